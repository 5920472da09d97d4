package eventsource

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/emulator/rie"
)

// Invoker invokes the mapped function synchronously. *rie.Function is one.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) (rie.Result, error)
}

var _ Invoker = (*rie.Function)(nil)

// Starting positions of a stream mapping.
const (
	TrimHorizon = "TRIM_HORIZON"
	Latest      = "LATEST"
	AtTimestamp = "AT_TIMESTAMP"
)

// Settings are an event source mapping's properties, with the meaning
// CloudFormation's AWS::Lambda::EventSourceMapping gives them.
type Settings struct {
	FunctionName string
	// FunctionARN appears in on-failure records; empty means
	// arn:aws:lambda:<region>:<account>:function:<FunctionName>, region and
	// account taken from SourceARN.
	FunctionARN string
	// SourceARN is the Kinesis stream ARN, the SQS queue ARN or the DynamoDB
	// table's stream ARN.
	SourceARN string
	// BatchSize is the most records per invocation; 0 means Lambda's default
	// (100 for streams, 10 for SQS).
	BatchSize int
	// MaximumBatchingWindow is how long to gather records before invoking
	// with fewer than BatchSize; 0 invokes as soon as records are there.
	MaximumBatchingWindow time.Duration
	// StartingPosition is TRIM_HORIZON, LATEST or AT_TIMESTAMP (streams);
	// empty means TRIM_HORIZON.
	StartingPosition          string
	StartingPositionTimestamp time.Time
	// ReportBatchItemFailures is FunctionResponseTypes [ReportBatchItemFailures].
	ReportBatchItemFailures bool
	// BisectBatchOnFunctionError splits a failed stream batch in two and
	// retries each half; splitting does not consume retry attempts.
	BisectBatchOnFunctionError bool
	// MaximumRetryAttempts bounds retries of a failed stream batch; -1 is
	// infinite (AWS's default for streams), 0 means no retry.
	MaximumRetryAttempts int
	// MaximumRecordAge discards stream records older than this; <= 0 is
	// infinite.
	MaximumRecordAge time.Duration
	// OnFailureARN is the SQS queue ARN of the on-failure destination
	// (streams); empty discards failed batches with only an Observer event.
	OnFailureARN string
	// TumblingWindow is TumblingWindowInSeconds (streams); 0 is off.
	TumblingWindow time.Duration
	// ParallelizationFactor is the number of concurrent batches per shard,
	// keeping order per partition key; 0 means 1.
	ParallelizationFactor int
	// FilterPatterns are the FilterCriteria patterns (JSON), any of which
	// lets a record through.
	FilterPatterns []string
	// MaximumConcurrency is ScalingConfig.MaximumConcurrency (SQS): the
	// number of concurrent pollers and so invocations; 0 means 2.
	MaximumConcurrency int
	// Enabled false pauses the mapping: Run polls nothing until ctx ends
	// (CloudFormation's default is true; set it).
	Enabled bool
}

// arnParts splits arn:partition:service:region:account:resource.
type arnParts struct {
	service, region, account, resource string
}

func parseARN(field, arn string) (arnParts, error) {
	p := strings.SplitN(arn, ":", 6)
	if len(p) != 6 || p[0] != "arn" || p[2] == "" || p[5] == "" {
		return arnParts{}, fmt.Errorf("%s %q is not an ARN", field, arn)
	}
	return arnParts{service: p[2], region: p[3], account: p[4], resource: p[5]}, nil
}

// normalize fills defaults and checks the settings that apply to kind
// ("kinesis", "dynamodb", "sqs").
func (s Settings) normalize(kind string) (Settings, arnParts, error) {
	errf := func(format string, args ...any) error {
		return fmt.Errorf("eventsource: mapping of %s to %s: %s", s.SourceARN, s.FunctionName, fmt.Sprintf(format, args...))
	}
	if s.FunctionName == "" {
		return s, arnParts{}, errf("FunctionName is empty")
	}
	src, err := parseARN("SourceARN", s.SourceARN)
	if err != nil {
		return s, src, errf("%v", err)
	}
	if src.service != kind {
		return s, src, errf("SourceARN is a %s ARN, want %s", src.service, kind)
	}
	if s.FunctionARN == "" {
		s.FunctionARN = fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", src.region, src.account, s.FunctionName)
	}
	if s.BatchSize < 0 {
		return s, src, errf("BatchSize %d is negative", s.BatchSize)
	}
	if s.MaximumBatchingWindow < 0 || s.MaximumBatchingWindow > 5*time.Minute {
		return s, src, errf("MaximumBatchingWindow %v: want 0 to 5m", s.MaximumBatchingWindow)
	}
	if _, err := NewFilter(s.FilterPatterns); err != nil {
		return s, src, errf("%v", err)
	}
	if kind == "sqs" {
		if s.BatchSize == 0 {
			s.BatchSize = 10
		}
		if s.BatchSize > 10 && s.MaximumBatchingWindow == 0 {
			return s, src, errf("BatchSize %d above 10 needs a MaximumBatchingWindow, as on Lambda", s.BatchSize)
		}
		if s.MaximumConcurrency == 0 {
			s.MaximumConcurrency = 2
		}
		if s.MaximumConcurrency < 0 {
			return s, src, errf("MaximumConcurrency %d is negative", s.MaximumConcurrency)
		}
		if s.BisectBatchOnFunctionError || s.TumblingWindow > 0 || s.OnFailureARN != "" || s.ParallelizationFactor > 1 {
			return s, src, errf("BisectBatchOnFunctionError, TumblingWindow, OnFailureARN and ParallelizationFactor apply to streams, not SQS (use the queue's redrive policy)")
		}
		return s, src, nil
	}
	if s.BatchSize == 0 {
		s.BatchSize = 100
	}
	if s.BatchSize > 10000 {
		return s, src, errf("BatchSize %d: the most is 10000", s.BatchSize)
	}
	switch s.StartingPosition {
	case "":
		s.StartingPosition = TrimHorizon
	case TrimHorizon, Latest:
	case AtTimestamp:
		if kind != "kinesis" {
			return s, src, errf("StartingPosition AT_TIMESTAMP is for Kinesis only")
		}
		if s.StartingPositionTimestamp.IsZero() {
			return s, src, errf("StartingPosition AT_TIMESTAMP needs StartingPositionTimestamp")
		}
	default:
		return s, src, errf("StartingPosition %q: want TRIM_HORIZON, LATEST or AT_TIMESTAMP", s.StartingPosition)
	}
	if s.MaximumRetryAttempts < -1 {
		return s, src, errf("MaximumRetryAttempts %d: want -1 (infinite) or more", s.MaximumRetryAttempts)
	}
	if s.ParallelizationFactor == 0 {
		s.ParallelizationFactor = 1
	}
	if s.ParallelizationFactor < 1 || s.ParallelizationFactor > 10 {
		return s, src, errf("ParallelizationFactor %d: want 1 to 10", s.ParallelizationFactor)
	}
	if s.TumblingWindow < 0 || s.TumblingWindow > 15*time.Minute {
		return s, src, errf("TumblingWindow %v: want 0 to 15m", s.TumblingWindow)
	}
	if s.OnFailureARN != "" {
		d, err := parseARN("OnFailureARN", s.OnFailureARN)
		if err != nil {
			return s, src, errf("%v", err)
		}
		if d.service != "sqs" {
			return s, src, errf("OnFailureARN %s: only SQS destinations are played locally", s.OnFailureARN)
		}
	}
	return s, src, nil
}
