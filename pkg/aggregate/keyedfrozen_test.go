package aggregate_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// A finalize that prunes a keyed state (forgets the points and emitted
// values of sessions past the allowed lateness) saves it, freeze mark and
// all, even when it recorded nothing: the stored mark is how a process
// whose watermark is behind (a warm container that served the shard
// before another moved it, or a handler while the ticker advanced the
// idle shard) judges a record of a frozen session late. A change that left
// such a prune in the finalizer's memory, to save 0.020 writes an event at
// the reference load, let that record retract a session past its
// lateness; both tests below failed with it.

// resultLines are the result log lines of key.
func resultLines(logs string, key string) []string {
	var out []string
	for line := range strings.Lines(logs) {
		if strings.Contains(line, `"msg":"window result"`) && strings.Contains(line, `"key":"`+key+`"`) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// frozenRig is two processors on one views table (warmSessions: 30 s
// gap, a minute of lateness under the correct policy) and a clock.
type frozenRig struct {
	t      *testing.T
	logs   lockedBuffer
	base   time.Time
	now    time.Time
	p1, p2 *aggregate.Processor
	seq    int
}

func newFrozenRig(t *testing.T) *frozenRig {
	cfg, err := pipeline.Parse([]byte(warmSessions))
	if err != nil {
		t.Fatal(err)
	}
	r := &frozenRig{t: t, base: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	r.now = r.base
	clock := func() time.Time { return r.now }
	log := slog.New(slog.NewJSONHandler(&r.logs, nil))
	views := state.NewViews(memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable}), "views", cfg.Aggregates, state.WithClock(clock))
	r.p1 = aggregate.New(cfg, views, nil, "", aggregate.WithLogger(log), aggregate.WithClock(clock))
	r.p2 = aggregate.New(cfg, views, nil, "", aggregate.WithLogger(log), aggregate.WithClock(clock))
	return r
}

// batch hands p a record of key at at.
func (r *frozenRig) batch(p *aggregate.Processor, key string, at time.Duration) {
	r.t.Helper()
	r.seq++
	resp, err := p.HandleBatch(context.Background(), warmBatch([]string{key}, r.seq, r.base.Add(at)))
	if err != nil || len(resp.BatchItemFailures) > 0 {
		r.t.Fatalf("%s at %v: %v %v", key, at, err, resp.BatchItemFailures)
	}
}

// tick runs p as the ticker at at.
func (r *frozenRig) tick(p *aggregate.Processor, at time.Duration) {
	r.t.Helper()
	r.now = r.base.Add(at)
	if _, err := p.Tick(context.Background(), r.now); err != nil {
		r.t.Fatal(err)
	}
}

// twoSessionsOnce fails unless key a's results are its two sessions, each
// once, none corrected or retracted.
func (r *frozenRig) twoSessionsOnce() {
	r.t.Helper()
	lines := resultLines(r.logs.String(), "a")
	for _, l := range lines {
		if strings.Contains(l, `"resultType":"retraction"`) || strings.Contains(l, `"resultType":"correction"`) {
			r.t.Errorf("a session past its allowed lateness changed: %s", l)
		}
	}
	if len(lines) != 2 {
		r.t.Errorf("%d results of key a, want 2 (its two sessions):\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// TestTheTickersPruneGuardsAWarmHandlersStaleWatermark: the ticker
// advances the idle shard past key a's first session plus the lateness
// while a's second is open, and its finalize only prunes; the handler,
// whose watermark predates that advance, then gets a record of the first
// session: it is dropped as late.
func TestTheTickersPruneGuardsAWarmHandlersStaleWatermark(t *testing.T) {
	r := newFrozenRig(t)
	handler, ticker := r.p1, r.p2
	r.batch(handler, "a", 0)              // session [0s, 30s)
	r.batch(handler, "a", 50*time.Second) // that one final (watermark 49s); the next opens
	r.batch(handler, "a", 70*time.Second) // and grows to 100s; watermark 69s
	r.tick(ticker, 75*time.Second)        // the idle clock starts
	r.tick(ticker, 126*time.Second)       // watermark 95s: the first session past its lateness
	r.batch(handler, "a", 5*time.Second)  // the handler's watermark is still 69s
	r.tick(ticker, 300*time.Second)       // everything final
	r.twoSessionsOnce()
}

// TestAnotherContainersPruneGuardsAStaleOne: no ticker; two warm
// containers serve the shard in turn (Lambda does not pin a shard to one).
// One moves the watermark past key a's first session plus the lateness
// with a record of key b, its finalize only pruning a's state; the other,
// whose watermark predates that, gets a record of a's first session: it is
// dropped as late.
func TestAnotherContainersPruneGuardsAStaleOne(t *testing.T) {
	r := newFrozenRig(t)
	h1, h2 := r.p1, r.p2
	r.batch(h2, "a", 0)
	r.batch(h2, "a", 50*time.Second)
	r.batch(h2, "a", 70*time.Second) // h2's watermark: 69s
	r.batch(h1, "b", 99*time.Second) // h1 reads 69s and moves it to 98s
	r.batch(h2, "a", 5*time.Second)  // h2 still at 69s
	r.batch(h1, "b", 300*time.Second)
	r.twoSessionsOnce()
}
