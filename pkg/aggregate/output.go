package aggregate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/state"
)

// RecordPutter is what the processor needs of Kinesis to emit results.
type RecordPutter interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

var _ RecordPutter = (*kinesis.Client)(nil)

// Output is one record on the output stream: a window's final result, or a
// correction of a final result. Emission is at least once; ID is the same
// for every emission of one revision, so consumers dedupe by it.
type Output struct {
	ID       string      `json:"id"`
	Kind     string      `json:"type"` // "final" or "correction"
	Pipeline string      `json:"pipeline"`
	Key      string      `json:"key"`
	Window   string      `json:"window"` // window kind, e.g. tumbling:1m0s
	Start    time.Time   `json:"start"`
	End      time.Time   `json:"end"`
	Revision int         `json:"revision"`
	Result   agg.Result  `json:"result"`
	Previous *agg.Result `json:"previous,omitempty"` // corrections: the value to retract
}

func finalOutput(v state.View) Output {
	return Output{
		ID:   fmt.Sprintf("%s/%s/%s/%s/r%d", v.Pipeline, v.Key, v.Kind, v.Window.ID(), v.Revision),
		Kind: "final", Pipeline: v.Pipeline, Key: v.Key, Window: v.Kind,
		Start: v.Window.Start, End: v.Window.End, Revision: v.Revision, Result: v.Result,
	}
}

// emit puts outs on the output stream, retrying entries the stream refused.
func (p *Processor) emit(ctx context.Context, outs []Output) error {
	if p.out == nil || len(outs) == 0 {
		return nil
	}
	for start := 0; start < len(outs); start += 500 {
		chunk := outs[start:min(start+500, len(outs))]
		entries := make([]types.PutRecordsRequestEntry, 0, len(chunk))
		for i := range chunk {
			b, err := json.Marshal(chunk[i])
			if err != nil {
				return fmt.Errorf("aggregate: encoding output %s: %w", chunk[i].ID, err)
			}
			entries = append(entries, types.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(chunk[i].Key)})
		}
		for attempt := 0; len(entries) > 0; attempt++ {
			if attempt == 4 {
				return fmt.Errorf("aggregate: output stream %s refused %d records after %d attempts", p.streamName, len(entries), attempt)
			}
			out, err := p.out.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(p.streamName), Records: entries})
			if err != nil {
				return fmt.Errorf("aggregate: emitting to %s: %w", p.streamName, err)
			}
			var retry []types.PutRecordsRequestEntry
			for i, r := range out.Records {
				if r.ErrorCode != nil {
					retry = append(retry, entries[i])
				}
			}
			entries = retry
			if len(entries) > 0 {
				time.Sleep(time.Duration(50<<attempt) * time.Millisecond)
			}
		}
	}
	p.metrics.Add("OutputRecords", metrics.Count, float64(len(outs)))
	return nil
}
