package aggregate

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

func burstRecord(seq int, key string, at time.Time) events.KinesisEventRecord {
	s := strconv.Itoa(seq)
	ts := at.UTC().Format(time.RFC3339Nano)
	data := fmt.Sprintf(`{"id":"e%d","type":"view","key":%q,"occurredAt":%q,"sentAt":%q,"receivedAt":%q,"data":{"ms":%d}}`, seq, key, ts, ts, ts, seq)
	return events.KinesisEventRecord{EventID: "shardId-000000000000:" + s, EventSource: "aws:kinesis",
		EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/events",
		Kinesis:        events.KinesisRecord{SequenceNumber: s, PartitionKey: key, Data: []byte(data), ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: at}}}
}

// TestKeyedCopiesHoldNoMoreThanTheirBound: a finalize encodes a pruned
// state into a buffer sized for the state before the prune; the copy it
// keeps must not pin that buffer uncounted, or the memory the copies hold
// is many times their bound (keyedCacheMax) while their count says it is
// within it.
func TestKeyedCopiesHoldNoMoreThanTheirBound(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"capb","key":"key","value":"data.ms",
	 "windows":[{"kind":"sliding","difference":"10s"}],"aggregates":["count","max"],"outOfOrderness":"0s",
	 "partitionKeyIsGroupingKey":true,"dedupeHorizon":"0s"}`))
	if err != nil {
		t.Fatal(err)
	}
	views := state.NewViews(memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable}), "views", cfg.Aggregates)
	const bound = 32 << 10
	p := New(cfg, views, nil, "", WithKeyedCacheBytes(bound), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	seq := 0
	const keys = 150
	// Each key: a burst of 300 records, then the next key's burst moves
	// the watermark past it and the finalize closes and prunes it.
	at := t0
	for k := range keys {
		var ev events.KinesisEvent
		key := fmt.Sprintf("k%03d", k)
		for range 300 {
			seq++
			ev.Records = append(ev.Records, burstRecord(seq, key, at))
			at = at.Add(10 * time.Millisecond)
		}
		at = at.Add(time.Minute)
		if resp, err := p.HandleBatch(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch %d: %v %v", k, err, resp.BatchItemFailures)
		}
	}
	held, counted := 0, 0
	p.mu.Lock()
	for k, ks := range p.keyed {
		held += cap(ks.Blob)
		counted += keyedEntryBytes(k, ks)
	}
	n, keyedBytes := len(p.keyed), p.keyedBytes
	p.mu.Unlock()
	runtime.KeepAlive(p)
	t.Logf("%d copies: counted %d bytes (keyedBytes %d, bound %d), their blobs' arrays hold %d bytes", n, counted, keyedBytes, bound, held)
	if held > bound {
		t.Errorf("the copies' blobs pin %d bytes of arrays, %.0f times the %d-byte bound they are counted within (%d counted)", held, float64(held)/float64(bound), bound, keyedBytes)
	}
}
