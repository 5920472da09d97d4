package aggregate_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
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

// stateWrites counts the writes to one key's keyed (session) state.
type stateWrites struct {
	memdb.Client
	key    string
	writes atomic.Int64
}

func (s *stateWrites) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	pk, _ := in.Key["pk"].(*types.AttributeValueMemberS)
	sk, _ := in.Key["sk"].(*types.AttributeValueMemberS)
	if pk != nil && sk != nil && strings.HasSuffix(pk.Value, "#"+s.key) && strings.HasSuffix(sk.Value, "|~state") {
		s.writes.Add(1)
	}
	return s.Client.UpdateItem(ctx, in, opts...)
}

// TestAFinalizeThatOnlyPrunesDoesNotWrite: a growing session stays
// listed at the end it first had, so each finalize after that visits its
// state early; once the key's closed session is past the allowed lateness
// such a visit forgets its points and emitted value. A warm handler no
// longer writes the state for that alone (at the reference load 0.020
// writes an event): it keeps the pruned copy, which the key's next fold
// writes with its records. Results are the same: each session is logged
// once, and a record for the pruned one is dropped as late.
func TestAFinalizeThatOnlyPrunesDoesNotWrite(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(warmSessions))
	if err != nil {
		t.Fatal(err)
	}
	store := &stateWrites{Client: memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable}), key: "a"}
	var logs lockedBuffer
	p := aggregate.New(cfg, state.NewViews(store, "views", cfg.Aggregates), nil, "", aggregate.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ctx := context.Background()
	seq := 0
	batch := func(key string, at time.Duration) int64 {
		t.Helper()
		seq++
		before := store.writes.Load()
		resp, err := p.HandleBatch(ctx, warmBatch([]string{key}, seq, base.Add(at)))
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("%s at %v: %v %v", key, at, err, resp.BatchItemFailures)
		}
		return store.writes.Load() - before
	}
	batch("a", 0)
	batch("b", 40*time.Second) // a's first session closes (30 s gap)
	batch("a", 50*time.Second) // a's second session, listed at its end then
	batch("a", 70*time.Second) // it grows past that end: found early from now on
	batch("b", 90*time.Second)
	// This batch's watermark passes the first session's end plus the
	// minute of lateness: its fold writes a's state, and the finalize
	// after it, visiting the state early, only prunes it.
	if n := batch("a", 95*time.Second); n != 1 {
		t.Errorf("a's fold and a finalize that only pruned wrote a's state %d times, want once (the fold)", n)
	}
	if n := batch("b", 100*time.Second); n != 0 {
		t.Errorf("a finalize that only visited a's state wrote it %d time(s), want none", n)
	}
	// a's next record writes the state once, pruned.
	if n := batch("a", 110*time.Second); n != 1 {
		t.Errorf("a's next fold wrote its state %d time(s), want 1", n)
	}
	// A record of a's first session, past the lateness, changes nothing;
	// b's records close a's second session.
	batch("a", 5*time.Second)
	batch("b", 200*time.Second)
	lines := strings.Count(logs.String(), `"key":"a"`)
	if lines != 2 || !strings.Contains(logs.String(), `"key":"a","window":"session:30s","start":"2026-12-01T09:00:50`) {
		t.Errorf("key a's results logged %d times, want its two sessions once each:\n%s", lines, logs.String())
	}
}

// TestALargeStatesPruneIsWrittenAtOnce: the history of
// TestAFinalizeThatOnlyPrunesDoesNotWrite with a first session of 3,000
// records, its runs never held as aggregates: the state is past
// deferPruneBytes, so the finalize that forgets that session's points
// writes the state at once (a container without the handler's copy would
// otherwise read the larger state and judge the key's records against its
// budget with it).
func TestALargeStatesPruneIsWrittenAtOnce(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(warmSessions))
	if err != nil {
		t.Fatal(err)
	}
	store := &stateWrites{Client: memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable}), key: "a"}
	mem := store.Client.(*memdb.DB)
	p := aggregate.New(cfg, state.NewViews(store, "views", cfg.Aggregates), nil, "", aggregate.WithSessionFoldBytes(1<<20),
		aggregate.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ctx := context.Background()
	seq := 0
	batch := func(key string, at time.Duration, n int) int64 {
		t.Helper()
		var ev events.KinesisEvent
		for i := range n {
			seq++
			ts := base.Add(at + time.Duration(i)*5*time.Millisecond)
			ev.Records = append(ev.Records, rawRecord(seq, key, view(fmt.Sprint("e", seq), key, ts, fmt.Sprintf(`{"ms":%d}`, seq)), ts))
		}
		before := store.writes.Load()
		resp, err := p.HandleBatch(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("%s at %v: %v %v", key, at, err, resp.BatchItemFailures)
		}
		return store.writes.Load() - before
	}
	batch("a", 0, 3000) // 15 s of records: one session
	batch("b", 50*time.Second, 1)
	batch("a", 60*time.Second, 1)
	batch("a", 80*time.Second, 1)
	batch("b", 100*time.Second, 1)
	big := keyedStateBytes(t, mem, "a")
	if big <= 8<<10 {
		t.Fatalf("a's state is %d bytes: not past the size whose prune may wait", big)
	}
	if n := batch("a", 110*time.Second, 1); n != 2 {
		t.Errorf("a's fold and the finalize that pruned its %d-byte state wrote it %d time(s), want twice", big, n)
	}
	if got := keyedStateBytes(t, mem, "a"); got >= big/10 {
		t.Errorf("a's stored state is %d bytes after its first session was pruned, from %d", got, big)
	}
}
