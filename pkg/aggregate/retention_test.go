package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// A window item is deleted by DynamoDB's TTL the pipeline's retention after
// its window ends: a week when the file says nothing, what it says
// otherwise, as the function built from the environment writes it.
func TestFromEnvExpiresWindowsAfterTheRetention(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		want        time.Duration
	}{
		{"default", "", 7 * 24 * time.Hour},
		{"two days", `"retention":"48h",`, 48 * time.Hour},
		{"a month", `"retention":"720h",`, 30 * 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			table := fmt.Sprintf("retention-%d", tableSeq.Add(1))
			if err := state.CreateTable(ctx, db, table); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{
				"PIPELINE_CONFIG": `{"name":"checkouts",` + tc.field + `"eventTypes":["checkout"],"key":"key","value":"data.amount",
					"windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"]}`,
				aggregate.EnvViewsTable: table,
			}
			lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
			p, err := aggregate.FromEnv(awsCfg, lookup, "aggregate", io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			at := time.Now().UTC().Add(-time.Minute)
			recs := []record{{shard: "shardId-000000000000", seq: 1, env: stream.Envelope{ID: "c1", Type: "checkout", Key: "eu-west",
				OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{"amount":1250}`)}}}
			if resp, err := p.HandleBatch(ctx, kinesisEvent(recs)); err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("batch: %+v %v", resp, err)
			}
			out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			windows := 0
			for _, it := range out.Items {
				pk, _ := it["pk"].(*types.AttributeValueMemberS)
				end, _ := it["windowEnd"].(*types.AttributeValueMemberS)
				if pk == nil || !strings.HasPrefix(pk.Value, "checkouts#") || end == nil {
					continue
				}
				windows++
				e, err := time.Parse(time.RFC3339Nano, end.Value)
				if err != nil {
					t.Fatalf("windowEnd %q: %v", end.Value, err)
				}
				exp, _ := it[state.TTLAttribute].(*types.AttributeValueMemberN)
				if exp == nil {
					t.Fatalf("window item %s has no %s", pk.Value, state.TTLAttribute)
				}
				got, _ := strconv.ParseInt(exp.Value, 10, 64)
				if want := e.Add(tc.want).Unix(); got != want {
					t.Errorf("window ending %s expires at %s, want %s (its end + %s)", e, time.Unix(got, 0).UTC(), time.Unix(want, 0).UTC(), tc.want)
				}
			}
			if windows != 1 {
				t.Errorf("%d window items, want the checkout's one", windows)
			}
		})
	}
}
