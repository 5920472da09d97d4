package template

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// kinesisAPI is what Provision needs of Kinesis.
type kinesisAPI interface {
	CreateStream(ctx context.Context, in *kinesis.CreateStreamInput, opts ...func(*kinesis.Options)) (*kinesis.CreateStreamOutput, error)
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	IncreaseStreamRetentionPeriod(ctx context.Context, in *kinesis.IncreaseStreamRetentionPeriodInput, opts ...func(*kinesis.Options)) (*kinesis.IncreaseStreamRetentionPeriodOutput, error)
}

var _ kinesisAPI = (*kinesis.Client)(nil)

// onDemandShards is how many shards an ON_DEMAND stream starts with on AWS
// (4 MiB/s of write capacity); locally it becomes a provisioned stream of
// that size.
const onDemandShards = 4

// stream creates (or reuses) an AWS::Kinesis::Stream and waits until it is
// ACTIVE.
func (p *provisioner) stream(ctx context.Context, id string, ph *physicalResource) error {
	pr, err := p.d.resolvedProps(id)
	if err != nil {
		return err
	}
	mode, err := pr.obj("StreamModeDetails")
	if err != nil {
		return err
	}
	modeName, err := mode.str("StreamMode")
	if err != nil {
		return err
	}
	def := 1
	if modeName == "ON_DEMAND" {
		def = onDemandShards
	}
	shards, err := pr.integer("ShardCount", def)
	if err != nil {
		return err
	}
	if shards < 1 {
		return fmt.Errorf("%s: %d: a stream needs at least one shard", pr.at("ShardCount"), shards)
	}
	if modeName == "ON_DEMAND" {
		p.d.note(fmt.Sprintf("%s: ON_DEMAND stream %s emulated as a provisioned stream of %d shards (on-demand scaling is not emulated)", id, ph.name, shards))
	}
	if pr.has("StreamEncryption") {
		p.d.note(fmt.Sprintf("%s: StreamEncryption ignored locally (records are stored unencrypted)", id))
	}
	retention, err := pr.integer("RetentionPeriodHours", 24)
	if err != nil {
		return err
	}

	sum, err := p.describeStream(ctx, ph.name)
	if err != nil {
		return err
	}
	if sum == nil {
		_, err := p.kinesis.CreateStream(ctx, &kinesis.CreateStreamInput{
			StreamName: aws.String(ph.name),
			ShardCount: aws.Int32(int32(shards)),
		})
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("create stream: %w", err)
		}
		if err == nil {
			p.d.report(fmt.Sprintf("created Kinesis stream %s (%d shards)", ph.name, shards))
		}
	} else {
		ph.reused = true
		if got := int(aws.ToInt32(sum.OpenShardCount)); got != shards {
			p.d.note(fmt.Sprintf("%s: Kinesis stream %s already exists with %d shards (template: %d); kept as is — delete it to recreate", id, ph.name, got, shards))
		}
		p.d.report(fmt.Sprintf("reused Kinesis stream %s", ph.name))
	}
	err = p.waitFor(ctx, "stream "+ph.name+" ACTIVE", func() (bool, error) {
		s, err := p.describeStream(ctx, ph.name)
		if err != nil || s == nil {
			return false, err
		}
		sum = s
		return s.StreamStatus == types.StreamStatusActive, nil
	})
	if err != nil {
		return err
	}
	if retention > 24 && !ph.reused && int(aws.ToInt32(sum.RetentionPeriodHours)) < retention {
		if _, err := p.kinesis.IncreaseStreamRetentionPeriod(ctx, &kinesis.IncreaseStreamRetentionPeriodInput{
			StreamName:           aws.String(ph.name),
			RetentionPeriodHours: aws.Int32(int32(retention)),
		}); err != nil {
			return fmt.Errorf("%s: %w", pr.at("RetentionPeriodHours"), err)
		}
	}
	p.d.mu.Lock()
	ph.shards = int(aws.ToInt32(sum.OpenShardCount))
	if arn := aws.ToString(sum.StreamARN); arn != "" {
		ph.attrs["Arn"] = arn
	}
	p.d.mu.Unlock()
	return nil
}

// describeStream returns nil when the stream does not exist.
func (p *provisioner) describeStream(ctx context.Context, name string) (*types.StreamDescriptionSummary, error) {
	out, err := p.kinesis.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describe stream: %w", err)
	}
	return out.StreamDescriptionSummary, nil
}
