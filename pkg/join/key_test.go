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
// outputs could never be put and the shard would retry them for ever). A
// key of 256 characters of any script joins; a longer one is set aside
// naming the field, and the batch goes on.
func TestJoinKeyFitsAPartitionKey(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, session string
		aside         bool
	}{
		{"256 characters", strings.Repeat("s", 256), false},
		{"256 characters, 768 bytes", strings.Repeat("€", 256), false},
		{"257 characters", strings.Repeat("s", 257), true},
		{"300 characters", strings.Repeat("s", 300), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := join.Parse([]byte(`{"name":"bykey","left":"search","right":"click","key":"data.session","partitionKeyIsJoinKey":true,"within":"10s","joinType":"inner"}`))
			if err != nil {
				t.Fatal(err)
			}
			table, out, quarantine := name("join-state"), name("joins"), name("quarantine")
			if err := state.CreateTable(ctx, db, table); err != nil {
				t.Fatal(err)
			}
			if err := setaside.CreateTable(ctx, db, quarantine); err != nil {
				t.Fatal(err)
			}
			keyedtest.CreateStream(t, kin, out, 1)
			h := join.New(cfg, state.NewViews(db, table, nil), kin, out, join.DefaultLimits,
				keyed.WithLogger(quiet), keyed.WithSetAside(setaside.New(db, quarantine)), keyed.WithBackoff(func(int) time.Duration { return 0 }))
			data, _ := json.Marshal(map[string]string{"session": tc.session})
			var recs []record
			for i, typ := range []string{"search", "click"} {
				at := base.Add(time.Duration(i) * time.Second)
				recs = append(recs, record{shard: "shardId-000000000000", seq: 100 + i,
					env: stream.Envelope{ID: typ, Type: typ, Key: "k", OccurredAt: at, SentAt: at, ReceivedAt: at, Data: data}})
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
			if tc.aside {
				if len(got) != 0 || scan.Count != 2 {
					t.Fatalf("%d outputs, %d records set aside; want none joined and both set aside", len(got), scan.Count)
				}
				it, err := setaside.Load(ctx, db, quarantine, "arn:aws:kinesis:us-east-1:123456789012:stream/events/shardId-000000000000", "100")
				if err != nil || it == nil {
					t.Fatalf("search not set aside: %v", err)
				}
				if it.Field != "data.session" || !strings.Contains(it.Reason, "256") {
					t.Errorf("set aside as field %q reason %q; want data.session and the bound", it.Field, it.Reason)
				}
				return
			}
			if len(got) != 1 || scan.Count != 0 {
				t.Fatalf("%d outputs, %d records set aside; want the pair joined", len(got), scan.Count)
			}
		})
	}
}
