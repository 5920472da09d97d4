package template

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// consumerAPI is what Provision needs of Kinesis to register enhanced
// fan-out consumers.
type consumerAPI interface {
	RegisterStreamConsumer(ctx context.Context, in *kinesis.RegisterStreamConsumerInput, opts ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error)
	DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error)
}

var _ consumerAPI = (*kinesis.Client)(nil)

// consumerNameRE is the ConsumerName pattern of AWS::Kinesis::StreamConsumer.
var consumerNameRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

// planConsumer names an AWS::Kinesis::StreamConsumer and gives it the ARN
// the stand-in will give it (<stream ARN>/consumer/<name>; AWS adds
// ":<creation timestamp>", which Provision takes from the endpoint).
func (d *Deployment) planConsumer(id string, ph *physicalResource) error {
	pr, err := d.resolvedProps(id)
	if err != nil {
		return err
	}
	name, err := pr.str("ConsumerName")
	if err != nil {
		return err
	}
	if !consumerNameRE.MatchString(name) {
		return fmt.Errorf("template: %s: %q: want 1-128 letters, digits, '_', '.' or '-'", pr.at("ConsumerName"), name)
	}
	stream, err := pr.str("StreamARN")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(stream, "arn:") || !strings.Contains(stream, ":kinesis:") || !strings.Contains(stream, ":stream/") {
		return fmt.Errorf("template: %s: %q is not a Kinesis stream ARN", pr.at("StreamARN"), stream)
	}
	arn := stream + "/consumer/" + name
	ph.name = name
	ph.ref = arn
	ph.attrs["ConsumerARN"] = arn
	ph.attrs["ConsumerName"] = name
	ph.attrs["StreamARN"] = stream
	d.note(fmt.Sprintf("%s: enhanced fan-out consumer %s is played locally by polling the stream's shards with GetRecords, not SubscribeToShard: it has no dedicated throughput and shares the stream's read limits", id, name))
	return nil
}

// consumer registers (or reuses) an AWS::Kinesis::StreamConsumer on its
// stream and waits until it is ACTIVE.
func (p *provisioner) consumer(ctx context.Context, id string, ph *physicalResource) error {
	// Resolved again: the stream's ARN is the endpoint's now that the
	// stream is provisioned.
	pr, err := p.d.resolvedProps(id)
	if err != nil {
		return err
	}
	stream, err := pr.str("StreamARN")
	if err != nil {
		return err
	}
	name := ph.name

	desc, err := p.describeConsumer(ctx, stream, name)
	if err != nil {
		return err
	}
	if desc == nil {
		_, err := p.consumers.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{
			StreamARN:    aws.String(stream),
			ConsumerName: aws.String(name),
		})
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("register stream consumer: %w", err)
		}
		if err == nil {
			p.d.report(fmt.Sprintf("registered Kinesis stream consumer %s on %s", name, stream))
		}
	} else {
		ph.reused = true
		p.d.report(fmt.Sprintf("reused Kinesis stream consumer %s on %s", name, stream))
	}
	err = p.waitFor(ctx, "stream consumer "+name+" ACTIVE", func() (bool, error) {
		d, err := p.describeConsumer(ctx, stream, name)
		if err != nil || d == nil {
			return false, err
		}
		desc = d
		return d.ConsumerStatus == types.ConsumerStatusActive, nil
	})
	if err != nil {
		return err
	}
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	if arn := aws.ToString(desc.ConsumerARN); arn != "" {
		ph.ref = arn
		ph.attrs["ConsumerARN"] = arn
	}
	ph.attrs["StreamARN"] = stream
	ph.attrs["ConsumerStatus"] = string(desc.ConsumerStatus)
	if ts := desc.ConsumerCreationTimestamp; ts != nil {
		ph.attrs["ConsumerCreationTimestamp"] = ts.UTC().Format(time.RFC3339)
	}
	return nil
}

// describeConsumer returns nil when no consumer of that name is registered
// on the stream.
func (p *provisioner) describeConsumer(ctx context.Context, stream, name string) (*types.ConsumerDescription, error) {
	out, err := p.consumers.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{
		StreamARN:    aws.String(stream),
		ConsumerName: aws.String(name),
	})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describe stream consumer: %w", err)
	}
	return out.ConsumerDescription, nil
}

// consumerStream returns the stream ARN and logical id (if in the template)
// of a consumer ARN: a consumer of the template by its StreamARN, any other
// by the ARN's form, arn:...:stream/<stream>/consumer/<name>[:<timestamp>].
// ok is false when arn is not a consumer ARN.
func (d *Deployment) consumerStream(arn string) (streamARN, streamID string, ok bool) {
	d.mu.Lock()
	for id, ph := range d.res {
		if ph.typ == "AWS::Kinesis::StreamConsumer" && ph.attrs["ConsumerARN"] == arn {
			streamARN = ph.attrs["StreamARN"]
			d.mu.Unlock()
			if refs := d.t.refsOf(d.t.Resources[id].Properties["StreamARN"]); len(refs) == 1 {
				streamID = refs[0]
			}
			return streamARN, streamID, true
		}
	}
	d.mu.Unlock()
	i := strings.Index(arn, "/consumer/")
	if !strings.HasPrefix(arn, "arn:") || !strings.Contains(arn, ":kinesis:") || i < 0 {
		return "", "", false
	}
	return arn[:i], "", true
}
