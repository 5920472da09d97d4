package aggregate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream/streamtest"
)

// The state Lambda carries for a shard of the stack's own pipeline
// (tumbling 1m, hopping 5m/1m, session) holds thousands of keys: at 1,000
// events a second over 10,000 keys a shard meets 5,000 keys an interval,
// and past 1 MB Lambda ends the interval early, a flush each time. The
// first format took some 570 bytes a key and pane (tumbling and hopping
// partials of 240 bytes each, a session's points); this one holds 2,000
// keys of a pane in a fifth of that, on the records as Lambda hands them
// over (56-digit sequence numbers).
func TestIntervalStateOfTheStacksPipelineIsSmallPerKey(t *testing.T) {
	cfg, err := os.ReadFile("../../pipelines/pageviews.json")
	if err != nil {
		t.Fatal(err)
	}
	p, out := pipelineOn(t, string(cfg), inProcessViews)
	const keys = 2000
	// Two records a key in the minute from 10:41 (15 ms apart), sent as
	// invocations of 500 as the stack's mapping cuts them.
	start := time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)
	var state map[string]string
	for first := 0; first < 2*keys; first += 500 {
		raw := streamtest.KinesisEvent{Records: 500, First: first, Keys: keys, Start: start, Spacing: 15 * time.Millisecond,
			Window: true, WindowStart: start, WindowEnd: start.Add(2 * time.Minute), State: state}.JSON()
		var ev events.KinesisTimeWindowEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		resp, err := p.HandleInterval(context.Background(), ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("invocation from record %d: %v %v", first, resp.BatchItemFailures, err)
		}
		state = resp.State
	}
	size := limits.WindowStateSize(state)
	t.Logf("window state: %d bytes for %d keys (%d a key)", size, keys, size/keys)
	if perKey := size / keys; perKey > 120 {
		t.Errorf("the window state takes %d bytes a key, want at most 120", perKey)
	}
	// The flush writes what the state held: every key's tumbling window
	// counts its two records.
	raw := streamtest.KinesisEvent{Window: true, Final: true, WindowStart: start, WindowEnd: start.Add(2 * time.Minute), State: state}.JSON()
	var final events.KinesisTimeWindowEvent
	if err := json.Unmarshal(raw, &final); err != nil {
		t.Fatal(err)
	}
	if _, err := p.HandleInterval(context.Background(), final); err != nil {
		t.Fatal(err)
	}
	_ = out
}

// The claims an interval carries (dedupe) are written at its flush, not
// before, while the window state has room for them: 8,000 records over 20
// keys carry 384 KB of claims, past the 256 KB they were once bounded by,
// which wrote every key's ledger once more each interval at 100 events a
// second over 1,000 keys. The state stays inside Lambda's 1 MB.
func TestIntervalCarriesClaimsToTheFlushWhileTheStateHasRoom(t *testing.T) {
	p, emf := meteredPipelineWithLedger(t, `{"name":"claims","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
	  "aggregates":["count","sum"],"outOfOrderness":"5s"}`)
	r := &feed{t: t, p: p, base: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	const keys, records = 20, 8000
	for first := 0; first < records; first += 500 {
		recs := make([]at, 500)
		for i := range recs {
			recs[i] = at{fmt.Sprintf("k%02d", (first+i)%keys), float64(first+i) / 200, 1}
		}
		r.carry(recs...)
		if size := limits.WindowStateSize(r.state); size > limits.LambdaWindowStateBytes {
			t.Fatalf("after %d records the window state is %d bytes, past Lambda's %d", first+500, size, limits.LambdaWindowStateBytes)
		}
	}
	if got := emfSum(t, emf, "LedgerWrites"); got != 0 {
		t.Errorf("the interval wrote its claims %v times before its flush, want 0", got)
	}
	r.flush()
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("k%02d", i)
	}
	if got, want := emfSum(t, emf, "LedgerWrites"), float64(rangesOf(names)); got < want {
		t.Errorf("the flush wrote %v ledger items, want at least one per hash range of the keys (%v)", got, want)
	}
}

// rangesOf is how many of the ledger's hash ranges keys fall in: a flush
// writes the claims of each range's keys together (dedupe.WithRanges).
func rangesOf(keys []string) int {
	seen := map[string]bool{}
	for _, k := range keys {
		seen[dedupe.RangeOf(k)] = true
	}
	return len(seen)
}

// meteredPipelineWithLedger is pipelineOn's processor with its dedupe
// ledger, writing its metrics (EMF) to the buffer it returns.
func meteredPipelineWithLedger(t *testing.T, cfgJSON string) (*aggregate.Processor, *bytes.Buffer) {
	t.Helper()
	var ledger *dedupe.Ledger // made with the views, on their table
	views := func(cfg *pipeline.Config, table string) *state.Views {
		ledger = aggregate.NewLedger(db, table, cfg)
		return state.NewViews(db, table, cfg.Aggregates)
	}
	emf := &bytes.Buffer{}
	p, _ := pipelineOn(t, cfgJSON, views, aggregate.WithMetrics(metrics.New(emf, "aggregate")),
		func(p *aggregate.Processor) { aggregate.WithDedupe(ledger)(p) })
	return p, emf
}
