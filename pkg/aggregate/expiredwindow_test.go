package aggregate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/window"
)

// TestListedWindowWhoseItemExpiredIsReported: a window whose item the
// table's TTL deleted before a watermark made it final (the retention
// shorter than the shard's lag) has no result, and its finalize was
// skipped without a word. It is logged, naming the pipeline, the key, the
// window and the retention, and counted in WindowsExpired; the other
// windows of the finalize are still published.
func TestListedWindowWhoseItemExpiredIsReported(t *testing.T) {
	ctx := context.Background()
	cfg, err := pipeline.Parse([]byte(`{"name":"expiry","key":"key","value":"data.ms",
  "windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"],"outOfOrderness":"0s","idleTimeout":"30s","latePolicy":"drop"}`))
	if err != nil {
		t.Fatal(err)
	}
	table := fmt.Sprintf("expiry-%d", tableSeq.Add(1))
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	var emf, logs bytes.Buffer
	out := &outputLog{}
	p := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates), out, "results",
		aggregate.WithMetrics(metrics.New(&emf, "aggregate")), aggregate.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	rec := func(seq int, key string, offset time.Duration) record {
		at := base.Add(offset)
		return record{shard: "shardId-000000000000", seq: seq, env: stream.Envelope{ID: fmt.Sprint(seq), Type: "v", Key: key,
			OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{"ms":1}`)}}
	}
	batch := func(recs ...record) {
		t.Helper()
		if resp, err := p.HandleBatch(ctx, kinesisEvent(recs)); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch: %+v %v", resp, err)
		}
	}
	batch(rec(1, "gone", 10*time.Second), rec(2, "kept", 20*time.Second))
	// The TTL deletes gone's window item; its listing stays.
	scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var sks []string
	for _, it := range scan.Items {
		if pk, _ := it["pk"].(*types.AttributeValueMemberS); pk == nil || pk.Value != state.PartitionKey("expiry", "gone") {
			continue
		}
		sks = append(sks, it["sk"].(*types.AttributeValueMemberS).Value)
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}}); err != nil {
			t.Fatal(err)
		}
	}
	first := window.Of(base.UnixMilli(), base.Add(time.Minute).UnixMilli())
	if len(sks) != 1 || !strings.HasSuffix(sks[0], "|"+first.ID()) {
		t.Fatalf("gone's items %q; want its first minute's window", sks)
	}
	batch(rec(3, "kept", 2*time.Minute)) // the watermark passes the first minute
	if kept, gone := out.of("kept", base), out.of("gone", base); len(kept) != 1 || len(gone) != 0 {
		t.Errorf("published %q of kept and %q of gone; want kept's first minute alone", kept, gone)
	}
	if n := emfSum(t, &emf, "WindowsExpired"); n != 1 {
		t.Errorf("WindowsExpired %v; want 1", n)
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, "expired") {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line["pipeline"] != "expiry" || line["key"] != "gone" || line["window"] != sks[0] || line["level"] != "ERROR" ||
		!strings.Contains(fmt.Sprint(line["msg"]), "retention") || line["retention"] != cfg.Retention.String() {
		t.Errorf("log line %v; want an error naming pipeline expiry, key gone, window %s and the retention %v", line, first.ID(), cfg.Retention)
	}
}
