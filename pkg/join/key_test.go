package join_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/join"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestJoinKeyFitsAPartitionKey reads the join key from data: it is the
// partition key of the key's outputs, which Kinesis bounds at 256
// characters (a longer one refuses the whole PutRecords call, so the
// outputs could never be put and the shard would retry them for ever), and
// it must be the records' partition key (partitionKeyIsJoinKey), or the
// two sides of a key may be read from different shards, each with its own
// watermark, and what joins would depend on how the shards interleave. A
// key of 256 characters of any script joins; a longer one, or one that is
// not the record's partition key, is set aside naming the field, and the
// batch goes on.
func TestJoinKeyFitsAPartitionKey(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, session, key string // key: the envelope key (the partition key); "" for the session
		aside              string // the reason's words when set aside
	}{
		{"256 characters", strings.Repeat("s", 256), "", ""},
		{"256 characters, 768 bytes", strings.Repeat("€", 256), "", ""},
		{"257 characters", strings.Repeat("s", 257), "k", "256"},
		{"300 characters", strings.Repeat("s", 300), "k", "256"},
		{"not the partition key", "s1", "s2", "partition key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := join.Parse([]byte(`{"name":"bykey","left":"search","right":"click","key":"data.session","partitionKeyIsJoinKey":true,"within":"10s","joinType":"inner"}`))
			if err != nil {
				t.Fatal(err)
			}
			table, out, quarantine := newResources(t)
			h := join.New(cfg, state.NewViews(db, table, nil), kin, out, join.DefaultLimits,
				keyed.WithLogger(quiet), keyed.WithSetAside(setaside.New(db, quarantine)), keyed.WithBackoff(func(int) time.Duration { return 0 }))
			data, _ := json.Marshal(map[string]string{"session": tc.session})
			key := tc.key
			if key == "" {
				key = tc.session
			}
			var recs []record
			for i, typ := range []string{"search", "click"} {
				at := base.Add(time.Duration(i) * time.Second)
				recs = append(recs, record{shard: "shardId-000000000000", seq: 100 + i,
					env: stream.Envelope{ID: typ, Type: typ, Key: key, OccurredAt: at, SentAt: at, ReceivedAt: at, Data: data}})
			}
			resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: kinesisRecords(recs)})
			if err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("batch: %+v %v; want every record reported processed", resp, err)
			}
			got := keyedtest.ReadAll(t, kin, out)
			scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(quarantine)})
			if err != nil {
				t.Fatal(err)
			}
			if tc.aside != "" {
				if len(got) != 0 || scan.Count != 2 {
					t.Fatalf("%d outputs, %d records set aside; want none joined and both set aside", len(got), scan.Count)
				}
				it, err := setaside.Load(ctx, db, quarantine, "arn:aws:kinesis:us-east-1:123456789012:stream/events/shardId-000000000000", "100")
				if err != nil || it == nil {
					t.Fatalf("search not set aside: %v", err)
				}
				if it.Field != "data.session" || !strings.Contains(it.Reason, tc.aside) {
					t.Errorf("set aside as field %q reason %q; want data.session and a reason with %q", it.Field, it.Reason, tc.aside)
				}
				return
			}
			if len(got) != 1 || scan.Count != 0 {
				t.Fatalf("%d outputs, %d records set aside; want the pair joined", len(got), scan.Count)
			}
		})
	}
}

// TestJoinKeyFromDataIsDeterministic sends a search and its click whose
// session (the join key) is not their partition key, so they land on two
// shards, and plays the shards in both orders: what comes out must not
// depend on which shard Lambda reads first. Records whose join key is not
// their partition key are refused, so both orders give the same outputs.
func TestJoinKeyFromDataIsDeterministic(t *testing.T) {
	ctx := context.Background()
	cfg, err := join.Parse([]byte(`{"name":"shards","left":"search","right":"click","key":"data.session","partitionKeyIsJoinKey":true,"within":"10s","joinType":"left"}`))
	if err != nil {
		t.Fatal(err)
	}
	env := func(id, typ, key string, sec int) stream.Envelope {
		at := base.Add(time.Duration(sec) * time.Second)
		return stream.Envelope{ID: id, Type: typ, Key: key, OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{"session":"s"}`)}
	}
	a := kinesisRecords([]record{
		{shard: "shardId-000000000000", seq: 100, env: env("search", "search", "user-1", 0)},
		{shard: "shardId-000000000000", seq: 101, env: env("later", "search", "s", 30)}, // moves shard 0's watermark past the search's window
	})
	b := kinesisRecords([]record{{shard: "shardId-000000000001", seq: 100, env: env("click", "click", "device-9", 2)}})
	var outs []string
	for _, order := range [][][]events.KinesisEventRecord{{a, b}, {b, a}} {
		table, out, quarantine := newResources(t)
		h := join.New(cfg, state.NewViews(db, table, nil), kin, out, join.DefaultLimits, keyed.WithLogger(quiet), keyed.WithSetAside(setaside.New(db, quarantine)))
		for _, recs := range order {
			if resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: recs}); err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("batch: %+v %v", resp, err)
			}
		}
		for _, at := range []time.Time{base.Add(time.Hour), base.Add(2 * time.Hour)} {
			if _, err := h.Tick(ctx, at); err != nil {
				t.Fatal(err)
			}
		}
		outs = append(outs, strings.Join(describe(t, keyedtest.ReadAll(t, kin, out)), " "))
	}
	if outs[0] != outs[1] {
		t.Fatalf("shard 0 first: %q; shard 1 first: %q; want the same outputs whatever the order", outs[0], outs[1])
	}
}
