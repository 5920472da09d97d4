package enrich_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/enrich"
)

var errCrash = errors.New("injected crash")

// crashingDB passes the first `after` UpdateItem calls to DynamoDB and
// fails the rest, as if the function died between its writes.
type crashingDB struct {
	*dynamodb.Client
	after int64
	n     atomic.Int64
}

func (c *crashingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.n.Add(1) > c.after {
		return nil, errCrash
	}
	return c.Client.UpdateItem(ctx, in, opts...)
}

// crashingKinesis writes the first `keep` records of a PutRecords call and
// then fails the call, as if the function died during it.
type crashingKinesis struct {
	*kinesis.Client
	keep int
}

func (c *crashingKinesis) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	part := *in
	part.Records = in.Records[:min(c.keep, len(in.Records))]
	if _, err := c.Client.PutRecords(ctx, &part, opts...); err != nil {
		return nil, err
	}
	return nil, errCrash
}

// replayInput is a batch of three keys' changes (with a duplicate, an
// out-of-order older version and a tombstone) interleaved with activity.
func replayInput() [][]byte {
	var docs [][]byte
	plans := []string{"free", "pro", "team"}
	for i := range 12 {
		for k := range 3 {
			key := fmt.Sprintf("u-%d", k)
			switch {
			case i%4 == k:
				docs = append(docs, profile(key, i+1, plans[(i+k)%3]))
			case i == 7 && k == 0:
				docs = append(docs, profile(key, 2, "stale")) // a late retry of an old version
			case i == 9 && k == 1:
				docs = append(docs, tombstone(key, 100))
			}
			docs = append(docs, activity(fmt.Sprintf("e-%d-%d", i, k), key))
		}
	}
	return docs
}

// TestDeterministicReplay: the same input delivered whole, twice, bisected,
// and retried after a crash between the state writes or during the output
// writes gives byte-identical enriched records for every activity event.
func TestDeterministicReplay(t *testing.T) {
	t.Parallel()
	in := newStream(t, "events")
	put(t, in, replayInput()...)
	recs := shardRecords(t, in)
	var activity []string
	for _, r := range recs {
		if !bytes.Contains(r.Kinesis.Data, []byte(`"profile_`)) {
			activity = append(activity, r.Kinesis.SequenceNumber)
		}
	}

	// run delivers batches to a fresh table and output stream as a
	// scenario says and returns the output.
	run := func(t *testing.T, deliver func(table, out string)) map[string][]enriched {
		table, out := joinTable(t), newStream(t, "enriched")
		deliver(table, out)
		return output(t, out)
	}
	ref := run(t, func(table, out string) {
		if f := handle(t, enrich.New(db, kin, table, out, fastBackoff), recs); f != "" {
			t.Fatalf("reference run: failure at %s", f)
		}
	})
	for _, seq := range activity {
		if len(ref[seq]) != 1 {
			t.Fatalf("reference run enriched %s %d times", seq, len(ref[seq]))
		}
	}
	mid := len(recs) / 2

	tests := []struct {
		name    string
		deliver func(t *testing.T, table, out string)
	}{
		{"whole batch twice, same instance", func(t *testing.T, table, out string) {
			h := enrich.New(db, kin, table, out, fastBackoff)
			handleOK(t, h, recs)
			handleOK(t, h, recs)
		}},
		{"whole batch twice, new instance", func(t *testing.T, table, out string) {
			handleOK(t, enrich.New(db, kin, table, out, fastBackoff), recs)
			handleOK(t, enrich.New(db, kin, table, out, fastBackoff), recs)
		}},
		{"bisected, each half on a new instance", func(t *testing.T, table, out string) {
			handleOK(t, enrich.New(db, kin, table, out, fastBackoff), recs[:mid])
			handleOK(t, enrich.New(db, kin, table, out, fastBackoff), recs[mid:])
		}},
		{"crash after 2 state writes, then whole batch on a new instance", func(t *testing.T, table, out string) {
			crashing := enrich.New(&crashingDB{Client: db, after: 2}, kin, table, out, fastBackoff)
			if f := handle(t, crashing, recs); f != recs[0].Kinesis.SequenceNumber {
				t.Fatalf("after a crashed state write: failure at %q, want the first record", f)
			}
			handleOK(t, enrich.New(db, kin, table, out, fastBackoff), recs)
		}},
		{"crash during the output, checkpointed retry on the same instance", func(t *testing.T, table, out string) {
			h := enrich.New(db, kin, table, out, fastBackoff)
			crashing := enrich.New(db, &crashingKinesis{Client: kin, keep: 7}, table, out, fastBackoff)
			f := handle(t, crashing, recs)
			i := index(recs, f)
			if i <= 0 {
				t.Fatalf("after a crashed output write: failure at %q, want a record of the batch", f)
			}
			handleOK(t, crashing, recs[:0]) // nothing
			handleOK(t, h, recs[i:])
		}},
		{"crash during the output, checkpointed retry in two smaller batches on a new instance", func(t *testing.T, table, out string) {
			f := handle(t, enrich.New(db, &crashingKinesis{Client: kin, keep: 20}, table, out, fastBackoff), recs)
			i := index(recs, f)
			if i <= 0 {
				t.Fatalf("failure at %q, want a record of the batch", f)
			}
			h := enrich.New(db, kin, table, out, fastBackoff)
			j := i + (len(recs)-i)/2
			handleOK(t, h, recs[i:j])
			handleOK(t, h, recs[j:])
		}},
		{"two crashes during the output, each retry from the checkpoint on a new instance", func(t *testing.T, table, out string) {
			i := 0
			for _, keep := range []int{5, 9} {
				f := handle(t, enrich.New(db, &crashingKinesis{Client: kin, keep: keep}, table, out, fastBackoff), recs[i:])
				if i = index(recs, f); i <= 0 {
					t.Fatalf("failure at %q, want a record of the batch", f)
				}
			}
			handleOK(t, enrich.New(db, kin, table, out, fastBackoff), recs[i:])
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := run(t, func(table, out string) { tc.deliver(t, table, out) })
			for _, seq := range activity {
				if len(got[seq]) == 0 {
					t.Errorf("activity %s never enriched", seq)
				}
				for _, e := range got[seq] {
					if !bytes.Equal(e.raw, ref[seq][0].raw) {
						t.Errorf("activity %s enriched as\n%s\nwant (reference run)\n%s", seq, e.raw, ref[seq][0].raw)
					}
				}
			}
			if len(got) != len(activity) {
				t.Errorf("output enriches %d source records, want the %d activity events", len(got), len(activity))
			}
		})
	}
}

// handleOK runs a batch that must succeed.
func handleOK(t *testing.T, h *enrich.Handler, recs []events.KinesisEventRecord) {
	t.Helper()
	if len(recs) == 0 {
		return
	}
	if f := handle(t, h, recs); f != "" {
		t.Fatalf("failure reported at %s", f)
	}
}

// throttlingKinesis fails every other entry of the first PutRecords call
// with ProvisionedThroughputExceededException and writes the rest.
type throttlingKinesis struct {
	*kinesis.Client
	calls atomic.Int64
}

func (k *throttlingKinesis) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	if k.calls.Add(1) > 1 {
		return k.Client.PutRecords(ctx, in, opts...)
	}
	pass := *in
	pass.Records = nil
	for i, r := range in.Records {
		if i%2 == 1 {
			pass.Records = append(pass.Records, r)
		}
	}
	if _, err := k.Client.PutRecords(ctx, &pass, opts...); err != nil {
		return nil, err
	}
	out := &kinesis.PutRecordsOutput{Records: make([]kintypes.PutRecordsResultEntry, len(in.Records))}
	for i := range in.Records {
		if i%2 == 0 {
			out.Records[i] = kintypes.PutRecordsResultEntry{ErrorCode: aws.String("ProvisionedThroughputExceededException"), ErrorMessage: aws.String("Rate exceeded")}
			out.FailedRecordCount = aws.Int32(aws.ToInt32(out.FailedRecordCount) + 1)
		} else {
			out.Records[i] = kintypes.PutRecordsResultEntry{SequenceNumber: aws.String("1"), ShardId: aws.String("shardId-000000000000")}
		}
	}
	return out, nil
}

// TestOutputRetriesOnlyFailedEntries: entries Kinesis throttled are retried
// alone, so every activity event is enriched exactly once.
func TestOutputRetriesOnlyFailedEntries(t *testing.T) {
	t.Parallel()
	out := newStream(t, "enriched")
	recs := synthetic(profile("u-1", 1, "free"), activity("a1", "u-1"), activity("a2", "u-1"), activity("a3", "u-2"), activity("a4", "u-1"))
	h := enrich.New(db, &throttlingKinesis{Client: kin}, joinTable(t), out, fastBackoff)
	handleOK(t, h, recs)
	got := byID(t, output(t, out))
	if len(got) != 4 {
		t.Errorf("enriched %v, want a1..a4 once each", sortedKeys(got))
	}
	if st := h.Stats(); st.OutputRetries != 1 || st.Enriched != 4 {
		t.Errorf("stats %+v: want 1 output retry, 4 enriched", st)
	}
}
