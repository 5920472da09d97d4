package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// A session shows its running value while open, then its final value; a
// record that bridges two final sessions retracts them into one corrected.
func TestSessionRunningThenFinalThenMerged(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"s","key":"key","value":"data.ms","windows":[{"kind":"session","gap":"10s"}],
	  "aggregates":["count","sum"],"outOfOrderness":"0s","latePolicy":"correct","allowedLateness":"1h","partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	table := fmt.Sprintf("session-%d", tableSeq.Add(1))
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	p := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates), nil, "", aggregate.WithLogger(quiet))
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	seq := 0
	send := func(offsets ...time.Duration) {
		t.Helper()
		var recs []record
		for _, o := range offsets {
			seq++
			at := base.Add(o)
			recs = append(recs, record{shard: "shardId-000000000000", seq: seq, env: stream.Envelope{
				ID: fmt.Sprint(seq), Type: "v", Key: "k", OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{"ms":1}`)}})
		}
		resp, err := p.HandleBatch(ctx, kinesisEvent(recs))
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch: %v %v", resp, err)
		}
	}
	read := func() []state.View {
		t.Helper()
		vs, err := p.Windows(ctx, "k", cfg.Windows[0].ID(), base.Add(-time.Hour), base.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	describe := func(vs []state.View) string {
		s := ""
		for _, v := range vs {
			s += fmt.Sprintf("[%s+%s count %d final %v rev %d] ", v.Window.Start.Sub(base), v.Window.Size(), v.Result.Count, v.Final, v.Revision)
		}
		return s
	}

	send(0, 2*time.Second) // one open session [0, 12s)
	if got := describe(read()); got != "[0s+12s count 2 final false rev 0] " {
		t.Fatalf("running: %s", got)
	}
	send(20*time.Second, 45*time.Second) // watermark 45s: [0,12s) final; [20s,30s) final; [45s,55s) open
	if got := describe(read()); got != "[0s+12s count 2 final true rev 1] [20s+10s count 1 final true rev 1] [45s+10s count 1 final false rev 0] " {
		t.Fatalf("after the watermark passed: %s", got)
	}
	// Late, less than the gap from both: bridges [0,12s) and [20s,30s) into
	// [0s,30s), a new final session; the two it replaces are retracted.
	send(11 * time.Second)
	if got := describe(read()); got != "[0s+30s count 4 final true rev 1] [45s+10s count 1 final false rev 0] " {
		t.Fatalf("after the bridging late record: %s", got)
	}
}

// Near the invoke deadline the handler stops writing and answers with item
// failures (not a timeout, which would redeliver the whole batch); the
// retry from the reported record counts every record once.
func TestDeadlineReportsItemFailuresThenRetryCountsOnce(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"d","key":"key","windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count"],"partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	table := fmt.Sprintf("deadline-%d", tableSeq.Add(1))
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	views := state.NewViews(db, table, cfg.Aggregates)
	p := aggregate.New(cfg, views, nil, "", aggregate.WithLogger(quiet))
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var recs []record
	for i := 1; i <= 6; i++ {
		at := base.Add(time.Duration(i) * time.Second)
		recs = append(recs, record{shard: "shardId-000000000000", seq: i, env: stream.Envelope{
			ID: fmt.Sprint(i), Type: "v", Key: fmt.Sprintf("k%d", i%3), OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{}`)}})
	}
	// Warm: the first record, so the shard's watermark is cached.
	if _, err := p.HandleBatch(ctx, kinesisEvent(recs[:1])); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond) // less than the handler's margin
	defer cancel()
	resp, err := p.HandleBatch(short, kinesisEvent(recs[1:]))
	if err != nil {
		t.Fatalf("near the deadline: error %v, want item failures", err)
	}
	if len(resp.BatchItemFailures) == 0 || resp.BatchItemFailures[0].ItemIdentifier != "2" {
		t.Fatalf("near the deadline: failures %v, want the batch's first record (2) first", resp.BatchItemFailures)
	}
	// Lambda retries from record 2.
	if resp, err := p.HandleBatch(ctx, kinesisEvent(recs[1:])); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("retry: %v %v", resp, err)
	}
	total := uint64(0)
	for _, k := range []string{"k0", "k1", "k2"} {
		vs, err := views.Query(ctx, "d", k, cfg.Windows[0].ID(), base.Add(-time.Minute), base.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			total += v.Result.Count
		}
	}
	if total != 6 {
		t.Fatalf("counted %d records, want 6", total)
	}
}

// WindowsBounded reads a key's session windows no further than its limit
// and one more, and merges the open session (from the key's state) into
// them: it counts toward the limit, and past the limit it is what says
// there are more.
func TestWindowsBoundedMergesOpenSessions(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"b","key":"key","value":"data.ms","windows":[{"kind":"session","gap":"10s"}],
	  "aggregates":["count","sum"],"outOfOrderness":"0s","partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	table := fmt.Sprintf("bounded-%d", tableSeq.Add(1))
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	counter := &standintest.QueryCounter{Client: db}
	p := aggregate.New(cfg, state.NewViews(counter, table, cfg.Aggregates), nil, "", aggregate.WithLogger(quiet))
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	// One record every 30 s, data.ms = its index: sessions 0..8 are final
	// once the watermark reaches the tenth, which is still open.
	const n = 10
	var recs []record
	for i := range n {
		at := base.Add(time.Duration(i) * 30 * time.Second)
		recs = append(recs, record{shard: "shardId-000000000000", seq: i + 1, env: stream.Envelope{
			ID: fmt.Sprint(i), Type: "v", Key: "k", OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(fmt.Sprintf(`{"ms":%d}`, i))}})
	}
	if resp, err := p.HandleBatch(ctx, kinesisEvent(recs)); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch: %v %v", resp, err)
	}
	kind := cfg.Windows[0].ID()
	for _, tt := range []struct {
		limit    int
		want     string // sums, "o" after an open window's
		more     bool
		maxItems int
	}{
		{3, "0 1 2", true, 4},
		{9, "0 1 2 3 4 5 6 7 8", true, 9},      // the open tenth is the one more
		{10, "0 1 2 3 4 5 6 7 8 9o", false, 9}, // every stored one is read, and the open one
		{50, "0 1 2 3 4 5 6 7 8 9o", false, 9},
		{0, "", true, 1},
	} {
		counter.Take()
		vs, more, err := p.WindowsBounded(ctx, "k", kind, base.Add(-time.Hour), base.Add(time.Hour), tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		items, _ := counter.Take()
		var got []string
		for _, v := range vs {
			s := fmt.Sprint(v.Result.Sum)
			if !v.Final {
				s += "o"
			}
			got = append(got, s)
		}
		if g := strings.Join(got, " "); g != tt.want || more != tt.more {
			t.Errorf("limit %d: windows %q more %v, want %q more %v", tt.limit, g, more, tt.want, tt.more)
		}
		if items > tt.maxItems {
			t.Errorf("limit %d: read %d window items, want at most %d", tt.limit, items, tt.maxItems)
		}
	}
	// Windows is all of them.
	if vs, err := p.Windows(ctx, "k", kind, base.Add(-time.Hour), base.Add(time.Hour)); err != nil || len(vs) != n {
		t.Errorf("Windows: %d windows, %v; want %d", len(vs), err, n)
	}
}
