package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// sqsAPI is what Provision needs of SQS.
type sqsAPI interface {
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, opts ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
}

var _ sqsAPI = (*sqs.Client)(nil)

// queueAttributes maps AWS::SQS::Queue properties to SQS attribute names
// whose value is passed as is.
var queueAttributes = []string{
	"DelaySeconds", "MaximumMessageSize", "MessageRetentionPeriod", "ReceiveMessageWaitTimeSeconds",
	"VisibilityTimeout", "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit",
}

// queue creates (or reuses and updates) an AWS::SQS::Queue.
func (p *provisioner) queue(ctx context.Context, id string, ph *physicalResource) error {
	pr, err := p.d.resolvedProps(id)
	if err != nil {
		return err
	}
	attrs, err := p.d.queueAttributes(id, pr, ph)
	if err != nil {
		return err
	}
	url, err := p.queueURL(ctx, ph.name)
	if err != nil {
		return err
	}
	if url == "" {
		out, err := p.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(ph.name), Attributes: attrs})
		if err != nil {
			return fmt.Errorf("create queue: %w", err)
		}
		url = aws.ToString(out.QueueUrl)
		what := ""
		if rp := attrs["RedrivePolicy"]; rp != "" {
			what = " with redrive policy " + rp
		}
		p.d.report(fmt.Sprintf("created SQS queue %s%s", ph.name, what))
	} else {
		ph.reused = true
		update := maps.Clone(attrs)
		delete(update, "FifoQueue") // cannot change; the name's .fifo decides
		if len(update) > 0 {
			if _, err := p.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: update}); err != nil {
				return fmt.Errorf("update attributes of existing queue: %w", err)
			}
		}
		p.d.report(fmt.Sprintf("reused SQS queue %s", ph.name))
	}
	out, err := p.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return fmt.Errorf("get queue ARN: %w", err)
	}
	p.d.mu.Lock()
	ph.ref = url
	ph.attrs["QueueUrl"] = url
	if arn := out.Attributes[string(types.QueueAttributeNameQueueArn)]; arn != "" {
		ph.attrs["Arn"] = arn
	}
	p.d.mu.Unlock()
	return nil
}

// queueURL returns "" when the queue does not exist.
func (p *provisioner) queueURL(ctx context.Context, name string) (string, error) {
	out, err := p.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		var nx *types.QueueDoesNotExist
		var api smithy.APIError
		if errors.As(err, &nx) || (errors.As(err, &api) && strings.Contains(api.ErrorCode(), "NonExistentQueue")) {
			return "", nil
		}
		return "", fmt.Errorf("get queue URL: %w", err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// queueAttributes reads a queue resource's properties into SQS attributes.
func (d *Deployment) queueAttributes(id string, pr props, ph *physicalResource) (map[string]string, error) {
	attrs := map[string]string{}
	fifo, err := pr.boolean("FifoQueue", false)
	if err != nil {
		return nil, err
	}
	if fifo != strings.HasSuffix(ph.name, ".fifo") {
		return nil, fmt.Errorf("%s: a FIFO queue's name must end in .fifo and only a FIFO queue's may (name %q)", pr.at("QueueName"), ph.name)
	}
	if fifo {
		attrs["FifoQueue"] = "true"
	}
	for _, k := range queueAttributes {
		if !pr.has(k) {
			continue
		}
		v, err := pr.str(k)
		if err != nil {
			return nil, err
		}
		attrs[k] = v
	}
	if pr.has("RedrivePolicy") {
		rp, err := pr.obj("RedrivePolicy")
		if err != nil {
			if s, serr := pr.str("RedrivePolicy"); serr == nil && json.Valid([]byte(s)) {
				attrs["RedrivePolicy"] = s // a JSON string, as the SQS API takes it
			} else {
				return nil, err
			}
		} else {
			target, err := rp.str("deadLetterTargetArn")
			if err != nil {
				return nil, err
			}
			if target == "" {
				return nil, fmt.Errorf("%s: missing", rp.at("deadLetterTargetArn"))
			}
			n, err := rp.integer("maxReceiveCount", 0)
			if err != nil {
				return nil, err
			}
			if n < 1 {
				return nil, fmt.Errorf("%s: want a count of at least 1", rp.at("maxReceiveCount"))
			}
			b, _ := json.Marshal(map[string]any{"deadLetterTargetArn": target, "maxReceiveCount": n})
			attrs["RedrivePolicy"] = string(b)
		}
	}
	if pr.has("RedriveAllowPolicy") {
		s, err := pr.jsonString("RedriveAllowPolicy")
		if err != nil {
			return nil, err
		}
		attrs["RedriveAllowPolicy"] = s
	}
	if pr.has("KmsMasterKeyId") || pr.has("SqsManagedSseEnabled") {
		d.note(fmt.Sprintf("%s: queue encryption ignored locally (messages are stored unencrypted)", id))
	}
	return attrs, nil
}
