package template

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// Provision creates the template's Kinesis streams, DynamoDB tables, SQS
// queues, SSM parameters, Secrets Manager secrets and S3 buckets on the endpoint cfg points at, in dependency order (a queue's
// dead-letter queue before the queue), and returns the deployment that
// resolves the template's references to them. It is idempotent: resources
// that already exist under the same physical name are reused (and their
// stream, TTL and queue attributes brought in line with the template), so a
// second run is fast. Resources it does not create are listed by Skipped;
// places where the local result differs from AWS by Notes.
func Provision(ctx context.Context, cfg aws.Config, t *Template, opts ProvisionOptions) (*Deployment, error) {
	if opts.Region == "" {
		opts.Region = cfg.Region
	}
	d, err := Plan(t, opts)
	if err != nil {
		return nil, err
	}
	p := &provisioner{
		d:        d,
		dynamodb: dynamodb.NewFromConfig(cfg),
		sqs:      sqs.NewFromConfig(cfg),
		ssm:      ssm.NewFromConfig(cfg),
		secrets:  secretsmanager.NewFromConfig(cfg),
		s3:       newS3(cfg),
		poll:     20 * time.Millisecond,
	}
	kc := kinesis.NewFromConfig(cfg)
	p.kinesis, p.consumers = kc, kc
	for _, level := range d.levels() {
		if err := p.run(ctx, level); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// provisioner creates resources of the supported types.
type provisioner struct {
	d         *Deployment
	kinesis   kinesisAPI
	consumers consumerAPI
	dynamodb  dynamodbAPI
	sqs       sqsAPI
	ssm       ssmAPI
	secrets   secretsAPI
	s3        s3API
	poll      time.Duration // how often to look whether a resource is ACTIVE
}

// run provisions the resources of one dependency level concurrently.
func (p *provisioner) run(ctx context.Context, ids []string) error {
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.provision(ctx, id)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (p *provisioner) provision(ctx context.Context, id string) error {
	ph := p.d.res[id]
	var err error
	switch ph.typ {
	case "AWS::Kinesis::Stream":
		err = p.stream(ctx, id, ph)
	case "AWS::Kinesis::StreamConsumer":
		err = p.consumer(ctx, id, ph)
	case "AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable":
		err = p.table(ctx, id, ph)
	case "AWS::SQS::Queue":
		err = p.queue(ctx, id, ph)
	case "AWS::SSM::Parameter":
		err = p.parameter(ctx, id, ph)
	case "AWS::SecretsManager::Secret":
		err = p.secret(ctx, id, ph)
	case "AWS::S3::Bucket":
		err = p.bucket(ctx, id, ph)
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("template: Resources.%s (%s %s): %w", id, ph.typ, ph.name, err)
	}
	p.d.mu.Lock()
	ph.provisioned = true
	p.d.mu.Unlock()
	return nil
}

// levels groups the provisionable resources so that each group depends only
// on earlier groups (directly or through resources that are not created).
func (d *Deployment) levels() [][]string {
	deps := map[string][]string{}
	for _, id := range d.order {
		r := d.t.Resources[id]
		deps[id] = append(d.t.refsOf(r.Properties), r.dependsOn()...)
	}
	depth := map[string]int{}
	var depthOf func(id string) int
	depthOf = func(id string) int {
		if v, ok := depth[id]; ok {
			return v
		}
		depth[id] = 0 // order is acyclic; this only guards self references
		max := 0
		for _, x := range deps[id] {
			if x == id {
				continue
			}
			if v := depthOf(x); v > max {
				max = v
			}
		}
		if provisionable(d.t.Resources[id].Type) {
			max++
		}
		depth[id] = max
		return max
	}
	var levels [][]string
	for _, id := range d.order {
		if !provisionable(d.t.Resources[id].Type) {
			continue
		}
		if _, ok := d.res[id]; !ok {
			continue
		}
		l := depthOf(id) - 1
		for len(levels) <= l {
			levels = append(levels, nil)
		}
		levels[l] = append(levels[l], id)
	}
	return levels
}

// waitFor polls check until it reports done, ctx ends or a minute passes.
func (p *provisioner) waitFor(ctx context.Context, what string, check func() (bool, error)) error {
	deadline := time.Now().Add(time.Minute)
	for {
		done, err := check()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: still not ready after a minute", what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(p.poll):
		}
	}
}
