package aggregate

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// reviewChunks is a pipeline keeping carries on memdb: tumbling 1m,
// latePolicy drop (the default). Key "a" is in chunk 4, "e" in chunk 0.
func reviewChunks(t *testing.T, opts ...Option) (*Processor, *state.Views, time.Time) {
	t.Helper()
	cfg, err := pipeline.Parse([]byte(`{"name":"rc","key":"key","value":"data.v",
	  "windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"],
	  "outOfOrderness":"5s","idleTimeout":"30s","partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if carryChunk("a") != 4 || carryChunk("e") != 0 {
		t.Fatalf("chunks of a, e: %d, %d", carryChunk("a"), carryChunk("e"))
	}
	views := state.NewViews(memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable}), "views", cfg.Aggregates)
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)
	return New(cfg, views, nil, "", opts...), views, time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
}

func rseq(n int) string { return fmt.Sprintf("496000000000000000000000%05d", n) }

// onePartial is key's partial of the tumbling minute win: one record of
// value v at sequence number seq.
func onePartial(p *Processor, key string, win window.Window, v float64, seq int) map[setKey]*partial {
	st := p.cfg.Aggregates.New()
	st.Add(v, nil)
	return map[setKey]*partial{{upKey{key: key, kind: "tumbling:1m0s", win: win}, 1}: {st: st, minSeq: rseq(seq), maxSeq: rseq(seq)}}
}

// carryA is a flush of p carrying key a's record (value 5, sequence
// number 10) of the minute after base in chunk 4; it returns the window.
func carryA(t *testing.T, p *Processor, shard string, base time.Time) window.Window {
	t.Helper()
	w := window.Window{Start: base.Add(time.Minute), End: base.Add(2 * time.Minute)}
	if _, err := p.flushCarried(context.Background(), shard, onePartial(p, "a", w, 5, 10), base.Add(60*time.Second), 0, rseq(10), false); err != nil {
		t.Fatal(err)
	}
	return w
}

// carryOff is reviewChunks' pipeline with the carry off, on p's views.
func carryOff(t *testing.T, p *Processor, views *state.Views) *Processor {
	t.Helper()
	cfg, err := pipeline.Parse([]byte(`{"name":"rc","key":"key","value":"data.v",
	  "windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"],
	  "outOfOrderness":"5s","idleTimeout":"30s"}`))
	if err != nil {
		t.Fatal(err)
	}
	return New(cfg, views, nil, "", WithLogger(p.log))
}

// saveWhole stores c as the code before chunks did: format 2, one item
// at the shard's sort key, on version.
func saveWhole(t *testing.T, views *state.Views, c *shardCarry, version int64) {
	t.Helper()
	data := encodeCarry(c)
	data[0] = carryFormatWhole
	if err := views.SaveCarry(context.Background(), "rc", state.Carry{Shard: c.id, Data: data, Version: version}); err != nil {
		t.Fatal(err)
	}
}

func wantWindow(t *testing.T, views *state.Views, key string, win window.Window, count uint64, sum float64) {
	t.Helper()
	got, err := views.Query(context.Background(), "rc", key, "tumbling:1m0s", win.Start, win.End)
	if err != nil || len(got) != 1 || !got[0].Final || got[0].Result.Count != count || got[0].Result.Sum != sum {
		t.Errorf("key %s's window %v: %+v %v; want final, count %d sum %g", key, win, got, err, count, sum)
	}
}

// The code before chunks stored the interval's carry (fence: its last
// record) and died before the final invocation returned; Lambda sends the
// final invocation again, now to the code with chunks (a deploy in
// between). The whole carry's fence covers every key of the interval, but
// only chunk 0 checks it: chunk 4 carries key a's record a second time.
// Once the whole carry is written out, chunk 4's partial overlaps the
// window's fence and the shard's flush fails at every retry.
func TestARetriedFinalInvocationAfterTheDeployFindsTheWholeCarrysFence(t *testing.T) {
	ctx := context.Background()
	p, views, base := reviewChunks(t)
	const shard = "shardId-000000000000"
	w := window.Window{Start: base.Add(time.Minute), End: base.Add(2 * time.Minute)}
	// Interval 1 (a at 1m05s, seq 10), flushed by the old code: carried.
	saveWhole(t, views, &shardCarry{shard: shard, id: shard, fence: rseq(10), closed: base.Add(60 * time.Second),
		itemsBy: base.Add(125 * time.Second), sets: onePartial(p, "a", w, 5, 10)}, 0)
	// Its final invocation again, on the new code.
	if _, err := p.flushCarried(ctx, shard, onePartial(p, "a", w, 5, 10), base.Add(60*time.Second), 0, rseq(10), false); err != nil {
		t.Fatal(err)
	}
	// Interval 2: a at 1m30s (seq 11). Interval 3: e at 2m10s (seq 12),
	// whose watermark closes [1m,2m).
	if _, err := p.flushCarried(ctx, shard, onePartial(p, "a", w, 7, 11), base.Add(85*time.Second), 0, rseq(11), false); err != nil {
		t.Fatal(err)
	}
	next := window.Window{Start: w.End, End: w.End.Add(time.Minute)}
	if _, err := p.flushCarried(ctx, shard, onePartial(p, "e", next, 1, 12), base.Add(125*time.Second), 0, rseq(12), false); err != nil {
		t.Fatalf("the flush closing [1m,2m): %v", err)
	}
	wantWindow(t, views, "a", w, 2, 12)
}

// A deploy where the old code (one carry at the shard's sort key, format
// 2) and the new run at once (an alias shifting traffic): the new code's
// flush carries key a in chunk 4 and stores nothing at chunk 0 (or an
// empty carry, format 1, which the old code reads); the old code's flush
// of the next interval carries a's next record in its whole carry. The
// new code's next flush writes that whole carry's partial out first,
// moving the window's fence past chunk 4's record, which the closing
// write then skips as a duplicate: a record counted in no window.
func TestAMixedDeployCountsEveryRecord(t *testing.T) {
	ctx := context.Background()
	p, views, base := reviewChunks(t)
	const shard = "shardId-000000000000"
	w := carryA(t, p, shard, base) // interval 1 on the new code
	c0, err := views.LoadCarry(ctx, "rc", shard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c0.Data) > 0 && c0.Data[0] != carryFormatNoItemsBy && c0.Data[0] != carryFormatWhole {
		return // a format the old code refuses: its flush fails, carrying nothing
	}
	// Interval 2 on the old code: a at 1m30s (seq 11), carried whole
	// (what the old flushCarried stores on the chunk 0 item it read).
	saveWhole(t, views, &shardCarry{shard: shard, id: shard, fence: rseq(11), closed: base.Add(85 * time.Second),
		itemsBy: base.Add(150 * time.Second), sets: onePartial(p, "a", w, 7, 11)}, c0.Version)
	// Interval 3 on the new code: e at 2m10s (seq 12) closes [1m,2m).
	next := window.Window{Start: w.End, End: w.End.Add(time.Minute)}
	if _, err := p.flushCarried(ctx, shard, onePartial(p, "e", next, 1, 12), base.Add(125*time.Second), 0, rseq(12), false); err != nil {
		t.Fatal(err)
	}
	// The commit's finalize (the window was listed when written out).
	if err := p.finalize(ctx, shard, base.Add(125*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	wantWindow(t, views, "a", w, 2, 12)
}

type oneChild struct{ parent, child string }

func (s oneChild) ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return &kinesis.ListShardsOutput{Shards: []ktypes.Shard{
		{ShardId: aws.String(s.parent)},
		{ShardId: aws.String(s.child), ParentShardId: aws.String(s.parent)},
	}}, nil
}

// A reshard after the deploy, of a parent whose carry is whole (written
// before chunks): the child's first flush writes it out, but the keys
// outside chunk 0 are listed under the parent, not the child, so the
// parent's idle watermark (its tick) closes key a's window without the
// child's carried record of it, which the child's closing write then
// drops as late. A chunked parent carry (the second case) lists them
// under the child and the window has both records.
func TestAWholeParentCarryIsListedUnderTheChild(t *testing.T) {
	for _, whole := range []bool{true, false} {
		t.Run(fmt.Sprintf("whole=%v", whole), func(t *testing.T) {
			ctx := context.Background()
			const parent, child = "shardId-000000000000", "shardId-000000000001"
			p, views, base := reviewChunks(t, WithShardLister(oneChild{parent, child}, "events"))
			w := window.Window{Start: base.Add(time.Minute), End: base.Add(2 * time.Minute)}
			// The parent's last interval: a at 1m05s carried.
			if whole {
				saveWhole(t, views, &shardCarry{shard: parent, id: parent, fence: rseq(10), closed: base.Add(60 * time.Second),
					itemsBy: base.Add(125 * time.Second), sets: onePartial(p, "a", w, 5, 10)}, 0)
			} else if _, err := p.flushCarried(ctx, parent, onePartial(p, "a", w, 5, 10), base.Add(60*time.Second), 0, rseq(10), false); err != nil {
				t.Fatal(err)
			}
			// The child's first flush: a at 1m30s, carried.
			if _, err := p.flushCarried(ctx, child, onePartial(p, "a", w, 7, 20), base.Add(85*time.Second), 0, rseq(20), true); err != nil {
				t.Fatal(err)
			}
			// The parent, read to its end and idle, ticks at 2m30s.
			if err := p.finalize(ctx, parent, base.Add(150*time.Second), nil); err != nil {
				t.Fatal(err)
			}
			// The child's next flush closes [1m,2m).
			next := window.Window{Start: w.End, End: w.End.Add(time.Minute)}
			if _, err := p.flushCarried(ctx, child, onePartial(p, "e", next, 1, 21), base.Add(125*time.Second), 0, rseq(21), false); err != nil {
				t.Fatal(err)
			}
			wantWindow(t, views, "a", w, 2, 12)
		})
	}
}

// While the carry is on, chunk 0 is in the current format from the first
// flush (code from before fails on it rather than carry a chunk's key);
// a pipeline that stops carrying writes every chunk out and stores chunk 0
// last, empty, in the first format, which that code reads.
func TestChunkZeroSaysWhetherCodeFromBeforeMayRun(t *testing.T) {
	ctx := context.Background()
	p, views, base := reviewChunks(t)
	const shard = "shardId-000000000000"
	w := carryA(t, p, shard, base)
	if c0, err := views.LoadCarry(ctx, "rc", shard); err != nil || len(c0.Data) == 0 || c0.Data[0] != carryFormat {
		t.Fatalf("chunk 0 after a flush that carries only chunk 4's key: %v %v, want the current format", c0, err)
	}
	if _, _, err := p.spillCarry(ctx, shard, shard, true); err != nil {
		t.Fatal(err)
	}
	for chunk := range carryChunks {
		c, err := p.loadCarry(ctx, shard, chunk)
		if err != nil || len(c.sets)+len(c.closing)+len(c.spilling) != 0 {
			t.Errorf("chunk %d after the carry is written out: %+v %v, want it empty", chunk, c, err)
		}
	}
	if c0, err := views.LoadCarry(ctx, "rc", shard); err != nil || c0.Data[0] != carryFormatNoItemsBy {
		t.Errorf("chunk 0 after the carry is written out: %v %v, want the first format", c0, err)
	}
	got, err := views.Query(ctx, "rc", "a", "tumbling:1m0s", w.Start, w.End)
	if err != nil || len(got) != 1 || got[0].Result.Sum != 5 {
		t.Errorf("key a's window after the carry is written out: %+v %v, want it written with its record", got, err)
	}
}

// A tick closes what a shard's carry holds that its watermark passed
// whatever moved the watermark: a per-batch function's batches (a mapping
// moved to flushIntervalSeconds 0 keeps the pipeline's file) leave a late
// per-interval flush's carried window to it. (A tick that read the carries
// only when it moved the watermark itself never closed it.)
func TestATickerClosesWhatABusyShardsWatermarkPassed(t *testing.T) {
	ctx := context.Background()
	p, views, base := reviewChunks(t)
	const shard = "shardId-000000000000"
	w := window.Window{Start: base.Add(time.Minute), End: base.Add(2 * time.Minute)}
	wm := window.NewWatermark(5 * time.Second)
	wm.Observe(base.Add(65 * time.Second))
	if err := views.CommitWatermark(ctx, "rc", shard, wm, rseq(9)); err != nil {
		t.Fatal(err)
	}
	// The ticker's first tick in its process: reads the (empty) chunks.
	if _, err := p.Tick(ctx, base.Add(70*time.Second)); err != nil {
		t.Fatal(err)
	}
	// The late per-interval flush: a at 1m05s carried in chunk 4.
	if _, err := p.flushCarried(ctx, shard, onePartial(p, "a", w, 5, 10), base.Add(60*time.Second), 0, rseq(10), false); err != nil {
		t.Fatal(err)
	}
	// The per-batch function's batches move the watermark past [1m,2m).
	for i, s := range []int{130, 190, 250} {
		wm.Observe(base.Add(time.Duration(s) * time.Second))
		if err := views.CommitWatermark(ctx, "rc", shard, wm, rseq(20+i)); err != nil {
			t.Fatal(err)
		}
		// A tick a minute, the shard busy (never idle for 30 s).
		if _, err := p.Tick(ctx, base.Add(time.Duration(s+5)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	wantWindow(t, views, "a", w, 1, 5)
}

// The deploy that turns the carry off runs the carrying function beside
// the one that writes the carry out (portable, chunks 7..0): a flush that
// stores chunk 0 before the spill reaches it and chunk 4 after the spill
// wrote it leaves chunk 4 carrying with chunk 0 in the first format. The
// spill's next pass (it passes until one finds nothing) writes it out, so
// the record is in its window and older code finds nothing carried.
func TestAPortableSpillRacingACarryingFlushLeavesNoChunkBehind(t *testing.T) {
	ctx := context.Background()
	p, views, base := reviewChunks(t) // the old function: carry on
	off := carryOff(t, p, views)      // the new function: carry off
	const shard = "shardId-000000000000"
	w := window.Window{Start: base.Add(time.Minute), End: base.Add(2 * time.Minute)}
	next := window.Window{Start: w.End, End: w.End.Add(time.Minute)}
	// Interval 1 on the old function: e (chunk 0) and a (chunk 4) carried.
	first := onePartial(p, "a", w, 5, 10)
	for k, v := range onePartial(p, "e", w, 1, 11) {
		first[k] = v
	}
	if _, err := p.flushCarried(ctx, shard, first, base.Add(60*time.Second), 0, rseq(11), false); err != nil {
		t.Fatal(err)
	}
	// The carry-off side's spillOnce: spillCarry(portable) is chunks 7..0
	// one after the other; the old function's flush of interval 2 (a at
	// 1m30s, seq 12) runs between its chunk 1 and chunk 0.
	for chunk := carryChunks - 1; chunk >= 1; chunk-- {
		if _, _, err := off.spillChunk(ctx, shard, chunk, shard, true, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.flushCarried(ctx, shard, onePartial(p, "a", w, 7, 12), base.Add(85*time.Second), 0, rseq(12), false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := off.spillChunk(ctx, shard, 0, shard, true, true); err != nil {
		t.Fatal(err)
	}
	// That pass wrote chunks out: the next batch, flush or tick passes
	// again (spillLeftCarry), writing out what the racing flush carried,
	// and the one after finds every chunk empty.
	for range 2 {
		if err := off.spillLeftCarry(ctx, shard); err != nil {
			t.Fatal(err)
		}
	}
	if !off.carryless[shard] {
		t.Errorf("no pass found the carry empty")
	}
	for chunk := range carryChunks {
		c, err := off.loadCarry(ctx, shard, chunk)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(c.sets) + len(c.closing) + len(c.spilling); n > 0 {
			t.Errorf("chunk %d still carries %d partials", chunk, n)
		}
	}
	if c0, err := views.LoadCarry(ctx, "rc", shard); err != nil || c0.Data[0] != carryFormatNoItemsBy {
		t.Errorf("chunk 0: %v %v, want the first format (code from before may run)", c0, err)
	}
	if _, err := off.flush(ctx, shard, windowPartials(onePartial(off, "e", next, 1, 13), off.advance), base.Add(125*time.Second), 0, rseq(13)); err != nil {
		t.Fatal(err)
	}
	if err := off.finalize(ctx, shard, base.Add(125*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	wantWindow(t, views, "a", w, 2, 12)
}

// A mapping moved to flushIntervalSeconds 0 keeps the pipeline's file
// (carries() stays true): the per-batch function writes the carry out
// once per process (spillOnce), and a carrying flush after it (the last
// per-interval invocation of the old mapping, finishing after the switch)
// leaves key a's partial in chunk 4. Before 32079fb the ticker closed it
// as soon as the shard's watermark (committed by the per-batch
// function's batches) passed its window. Now a warm ticker reads a busy
// shard's chunks only when it moves the watermark itself: the per-batch
// watermark closed no carry, and the window is never written while the
// shard stays busy.

// A pass of spillLeftCarry that wrote anything out is not trusted to have
// left the carry empty (a carrying function may be storing a chunk beside
// it): only a pass that finds nothing stops the process looking.
func TestACarryWrittenOutIsLookedAtAgain(t *testing.T) {
	ctx := context.Background()
	p, views, base := reviewChunks(t)
	off := carryOff(t, p, views)
	const shard = "shardId-000000000000"
	carryA(t, p, shard, base)
	for i, want := range []bool{false, true} {
		if err := off.spillLeftCarry(ctx, shard); err != nil {
			t.Fatal(err)
		}
		if off.carryless[shard] != want {
			t.Errorf("after pass %d: carryless %v, want %v", i+1, off.carryless[shard], want)
		}
	}
}
