package aggregate_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// stateReads counts the GetItem requests for keyed states (sessions).
type stateReads struct {
	memdb.Client
	reads atomic.Int64
}

func (s *stateReads) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if sk, ok := in.Key["sk"].(*types.AttributeValueMemberS); ok && strings.HasSuffix(sk.Value, "|~state") {
		s.reads.Add(1)
	}
	return s.Client.GetItem(ctx, in, opts...)
}

const warmSessions = `{"name":"warm","key":"key","value":"data.ms",
	 "windows":[{"kind":"session","gap":"30s"}],"aggregates":["count","max"],"outOfOrderness":"1s",
	 "idleTimeout":"30s","latePolicy":"correct","allowedLateness":"1m","dedupeHorizon":"0s"}`

// warmBatch is one batch of a record of each key at at, sequence numbers
// from seq.
func warmBatch(keys []string, seq int, at time.Time) events.KinesisEvent {
	var ev events.KinesisEvent
	for i, key := range keys {
		ev.Records = append(ev.Records, rawRecord(seq+i, key, view(fmt.Sprint("e", seq+i), key, at, `{"ms":1}`), at))
	}
	return ev
}

// TestAWarmHandlerReadsASessionStateOnce: a warm handler folds and
// finalizes each key's session state from the copy it wrote last, its own
// fold's or finalize's: after the first batch reads them, batches that
// close every key's session and open the next read none (each finalize
// read its state, and the fold after it read the version the finalize
// wrote: two reads a key and batch).
func TestAWarmHandlerReadsASessionStateOnce(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(warmSessions))
	if err != nil {
		t.Fatal(err)
	}
	store := &stateReads{Client: memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})}
	var logs lockedBuffer
	p := aggregate.New(cfg, state.NewViews(store, "views", cfg.Aggregates), nil, "", aggregate.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ctx := context.Background()
	for b := range 6 {
		if b == 1 {
			if got := store.reads.Load(); got < int64(len(keys)) {
				t.Fatalf("the first batch read %d session states of %d keys new to the process", got, len(keys))
			}
			store.reads.Store(0)
		}
		// 40 s apart, past the gap: each batch closes the sessions the
		// one before opened.
		resp, err := p.HandleBatch(ctx, warmBatch(keys, 1+b*len(keys), base.Add(time.Duration(b)*40*time.Second)))
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch %d: %v %v", b, err, resp.BatchItemFailures)
		}
	}
	if got := store.reads.Load(); got != 0 {
		t.Errorf("%d session state reads after the first batch, want none: a warm handler holds what it wrote", got)
	}
	// Every closed session was still written and logged once.
	if got := strings.Count(logs.String(), `"msg":"window result"`); got != 5*len(keys) {
		t.Errorf("%d result lines, want %d (five closed sessions of each key)", got, 5*len(keys))
	}
}

// TestAHandlersStaleSessionCopyIsReadAgain: the ticker finalizes a
// session the handler holds a copy of; the handler's next batch, which
// moves the watermark past that session again, meets the newer state
// (its save refused) and neither writes nor logs the session twice.
func TestAHandlersStaleSessionCopyIsReadAgain(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(warmSessions))
	if err != nil {
		t.Fatal(err)
	}
	store := &stateReads{Client: memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})}
	var logs lockedBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	now := base
	clock := func() time.Time { return now }
	views := state.NewViews(store, "views", cfg.Aggregates, state.WithClock(clock))
	handler := aggregate.New(cfg, views, nil, "", aggregate.WithLogger(log), aggregate.WithClock(clock))
	ticker := aggregate.New(cfg, views, nil, "", aggregate.WithLogger(log), aggregate.WithClock(clock))
	ctx := context.Background()

	// Key a opens a session; the shard goes idle and the ticker closes it.
	if resp, err := handler.HandleBatch(ctx, warmBatch([]string{"a"}, 1, base)); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch: %v %v", err, resp.BatchItemFailures)
	}
	for _, after := range []time.Duration{time.Minute, 2 * time.Minute} {
		now = base.Add(after)
		if _, err := ticker.Tick(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Count(logs.String(), `"key":"a"`); got != 1 {
		t.Fatalf("the ticker logged %d results of key a, want 1:\n%s", got, logs.String())
	}
	// Another key's records move the watermark past a's session: the
	// handler's copy of a's state predates the ticker's finalize.
	now = base.Add(3 * time.Minute)
	reads := store.reads.Load()
	if resp, err := handler.HandleBatch(ctx, warmBatch([]string{"b"}, 2, base.Add(3*time.Minute))); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch: %v %v", err, resp.BatchItemFailures)
	}
	if got := strings.Count(logs.String(), `"key":"a"`); got != 1 {
		t.Errorf("key a's session logged %d times, want once (by the ticker):\n%s", got, logs.String())
	}
	var lines bytes.Buffer
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, `"key":"a"`) {
			lines.WriteString(line)
		}
	}
	if !strings.Contains(lines.String(), `"count":1`) {
		t.Errorf("key a's session result %s, want count 1", lines.String())
	}
	if store.reads.Load() == reads {
		t.Errorf("the handler read no session state: its copy of a's, older than the ticker's save, was never found out")
	}
}
