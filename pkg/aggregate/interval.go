package aggregate

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
	"github.com/tributary-dev/tributary/pkg/window"
)

// Keys of the tumbling-window state (Lambda carries map[string]string).
const (
	stateWatermark = "wm"  // the interval's working watermark
	stateSeq       = "seq" // the last record accumulated: the state's own fence
	// statePartial prefixes a partial of the first format, one entry
	// each: p|<kind>|<window id>[*<n>]|<key> → "<minSeq> <maxSeq> <base64
	// partial>". Still read; written as statePartials (intervalstate.go).
	statePartial = "p|"
	// stateHold is the watermark hold the interval stored (Unix ms): the
	// earliest start of an open window its partials add to. The ticker's
	// idle advance stops there (state.Views.Hold) until the flush has
	// written them and cleared it.
	stateHold = "hold"
	// stateLate counts the records the interval's invocations dropped as
	// late from their tumbling and hopping windows: LateDropped counts them
	// once, at the flush (flush), since Lambda sends an invocation whose
	// response it lost again with the same state, whose claims do not
	// know the records were judged before.
	stateLate = "late"
)

// holdFor is how long a hold counts without its flush: Lambda's tumbling
// window (the interval) is at most 15 minutes, and a flush retried for as
// long again is given up on; the ticker then closes the windows and the
// flush finds them final.
const holdFor = 30 * time.Minute

// setKey names a partial of the window state: the records of one key that
// went to the same n windows of a kind — win and the n−1 after it, each
// the kind's advance later. A hopping record goes to size/advance windows,
// and the records of a pane go to the same ones, so one partial per (key,
// pane) stands for them all: the state Lambda carries (1 MB at most, past
// which it ends the interval early) holds one entry where it held one per
// window. The flush expands each into its windows (windowPartials), which
// then get exactly the records a partial per window would have held.
type setKey struct {
	upKey // win is the first of the windows
	n     int
}

// partial is one setKey's (or, expanded, one window's) accumulated
// aggregate in the state.
type partial struct {
	st             *agg.State
	minSeq, maxSeq string
	own            agg.State // st of a partial begun in this invocation (newPartials)
}

// newPartials hands out partials begun in an invocation, a block at a
// time: a batch begins one for each (key, window) it meets.
type newPartials struct {
	spec  *agg.Spec
	block []partial
}

func (n *newPartials) next(seq string) *partial {
	if len(n.block) == 0 {
		n.block = make([]partial, 64)
	}
	pt := &n.block[0]
	n.block = n.block[1:]
	pt.own = *n.spec.New()
	pt.st, pt.minSeq = &pt.own, seq
	return pt
}

// HandleInterval is the per-interval path: partial aggregates live in the
// tumbling-window state Lambda carries between invocations; the final
// invocation of each interval writes one update per (key, window).
func (p *Processor) HandleInterval(ctx context.Context, ev events.KinesisTimeWindowEvent) (events.KinesisTimeWindowEventResponse, error) {
	return p.handleInterval(ctx, records(ev.Records), &ev.TimeWindowProperties)
}

func (p *Processor) handleInterval(ctx context.Context, recs []stream.KinesisRecord, ev *events.TimeWindowProperties) (events.KinesisTimeWindowEventResponse, error) {
	defer p.flushMetrics()
	shard := ev.ShardID
	if shard == "" && len(recs) > 0 {
		shard = shardOf(recs[0].EventID)
	}
	shard = strings.Clone(shard) // the batch's strings are reused by the next batch
	ctx, cancel := batch.Reserve(ctx, deadlineMargin)
	defer cancel()
	committed, loaded, err := p.watermark(ctx, shard)
	if err != nil {
		return events.KinesisTimeWindowEventResponse{}, err
	}
	// The interval's watermark: the later of the one its state carries
	// (the interval's records so far) and the process's copy of the
	// stored one, raised to the stored one itself before any record is
	// judged (catchUp). The ticker advances the stored one during the
	// interval (as far as the interval's hold), and the carried one,
	// taken for the whole, judged records late by the stored one as on
	// time, even in a cold process.
	wm := *committed
	if s, ok := ev.State[stateWatermark]; ok {
		var carried window.Watermark
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return events.KinesisTimeWindowEventResponse{}, fmt.Errorf("aggregate: window state %q: %w", stateWatermark, err)
		}
		if err := carried.UnmarshalBinary(b); err != nil {
			return events.KinesisTimeWindowEventResponse{}, fmt.Errorf("aggregate: window state %q: %w", stateWatermark, err)
		}
		wm.Merge(&carried)
	}
	partials, err := p.decodePartials(ev.State)
	if err != nil {
		return events.KinesisTimeWindowEventResponse{}, err
	}
	keep, _, err := decodeCarried(ev.State)
	if err != nil {
		return events.KinesisTimeWindowEventResponse{}, err
	}
	overflowed, err := overflowNames(ev.State)
	if err != nil {
		return events.KinesisTimeWindowEventResponse{}, err
	}
	lastSeq := ev.State[stateSeq]
	if lastSeq != "" && !isSequenceNumber(lastSeq) {
		// Records at or below it are taken as already in the state: "abc"
		// or a forged value skipped them without a word.
		return events.KinesisTimeWindowEventResponse{}, fmt.Errorf("aggregate: window state %q: %s is not a Kinesis sequence number (1 to %d decimal digits), as the function writes it",
			stateSeq, strictjson.QuoteCut(lastSeq, 80), maxSeqDigits)
	}

	// What the interval's overflow items hold (overflow.go): read before
	// any record is judged, as the state's own claims and points are.
	ovf, err := p.loadOverflow(ctx, shard, overflowed)
	if err != nil {
		return events.KinesisTimeWindowEventResponse{}, err
	}
	c := p.newCollector(shard, &wm, len(recs))
	c.carriedPerKey, c.carried = keep.perKey(), keep
	begun := newPartials{spec: p.cfg.Aggregates}
	add := func(k setKey, seq string, value float64, distinct []byte) {
		pt, ok := partials[k]
		if !ok {
			pt = begun.next(seq)
			partials[k] = pt
		}
		pt.st.Add(value, distinct)
		pt.maxSeq = seq
	}
	// held is the earliest window this invocation adds to that the stored
	// watermark has not closed: an open one, or one the interval's own
	// watermark made final and a late record corrects (the store closes it
	// only when the flush commits, and its first result is to include the
	// record, as a batch's would; the ticker closing it first would make
	// the record a correction of a result without it).
	var held time.Time
	var stored time.Time // committed's, once caught up (below)
	var accepted []window.Window
	c.onWindows = func(key, kind, seq string, value float64, distinct []byte, d *window.Decision) {
		if len(d.Open) > 0 && (held.IsZero() || d.Open[0].Start.Before(held)) {
			held = d.Open[0].Start
		}
		for _, w := range d.Corrected { // oldest first
			if w.End.After(stored) {
				if held.IsZero() || w.Start.Before(held) {
					held = w.Start
				}
				break
			}
		}
		// Late records join the partial too (corrected windows, oldest
		// first, come before the open ones); the flush corrects a final
		// window.
		accepted = append(append(accepted[:0], d.Corrected...), d.Open...)
		if len(accepted) == 0 {
			return
		}
		if consecutive(accepted, p.advance(kind)) {
			add(setKey{upKey{key, kind, accepted[0]}, len(accepted)}, seq, value, distinct)
			return
		}
		for _, w := range accepted {
			add(setKey{upKey{key, kind, w}, 1}, seq, value, distinct)
		}
	}
	accumulated := lastSeq
	for i := range recs {
		rec := &recs[i]
		seq := rec.SequenceNumber
		if lastSeq != "" && stream.CompareSequence(seq, lastSeq) <= 0 {
			continue // already in the state (a redelivery after a partial failure)
		}
		c.decode(rec)
		accumulated = seq
	}
	if len(ovf) > 0 && !ev.IsFinalInvokeForWindow {
		// The points the overflow items hold of this invocation's keys
		// count against their keyed states' budget (overBudget), as
		// those the state carries do.
		keys := make(map[string]bool, len(c.decoded))
		for i := range c.decoded {
			keys[c.decoded[i].key] = true
		}
		all := withOverflowPoints(keep, ovf.pointsOf(keys))
		c.carriedPerKey, c.carried = all.perKey(), all
	}
	if len(c.decoded) > 0 && !loaded {
		// A failed read fails the invocation: Lambda sends it again with
		// the same state.
		if err := p.catchUp(ctx, shard, committed, &wm); err != nil {
			return events.KinesisTimeWindowEventResponse{}, err
		}
	}
	stored = committed.Current()
	budget := p.carriedBudget(ev.State, len(recs))
	dedupeState, spilled, err := p.judgeInterval(ctx, c, ev.State, ev.IsFinalInvokeForWindow, budget, ovf, accumulated)
	if err != nil {
		return events.KinesisTimeWindowEventResponse{}, err
	}
	overflowed = append(overflowed, spilled...)
	if err := p.screen(ctx, c); err != nil {
		return events.KinesisTimeWindowEventResponse{}, err
	}
	if c.failures.Len() > 0 {
		// Records could not be set aside (a transient error). The state
		// must not claim them accumulated, nor carry what follows them: the
		// invocation fails and Lambda retries it with the same state.
		return events.KinesisTimeWindowEventResponse{}, fmt.Errorf("aggregate: setting %d records aside failed; the batch is retried", len(c.aside))
	}
	c.routeAll()
	// Records dropped from their tumbling and hopping windows: carried to
	// the flush in the state (stateLate) and counted there, once.
	lateRouted, err := lateCarried(ev.State)
	if err != nil {
		return events.KinesisTimeWindowEventResponse{}, err
	}
	routed := len(c.late)
	lateRouted += routed
	// Session and sliding windows keep their own per-key state (keyed.go);
	// their points ride in the window state to the flush (keyedcarry.go).
	// The batch's strings are reused by the next batch: the points'
	// sequence numbers are copied, all into one string.
	keyedKeys := make([]keyedKey, 0, len(c.keyed))
	var seqs []byte
	for k, pts := range c.keyed {
		keyedKeys = append(keyedKeys, k)
		for i := range pts {
			seqs = append(seqs, pts[i].Seq...)
		}
	}
	copied := string(seqs)
	for _, k := range keyedKeys { // in the order seqs were copied
		for _, pt := range c.keyed[k] {
			_, late := c.late[pt.Seq]
			_, again := c.again[pt.Seq]
			pt.Seq, copied = copied[:len(pt.Seq)], copied[len(pt.Seq):]
			keep[k] = append(keep[k], carriedPoint{point: pt, Counted: late || again})
		}
	}
	c.keyed = nil
	carriedState := map[string]string{}
	if ev.IsFinalInvokeForWindow && c.failures.Len() == 0 {
		// Every record is routed: the watermark the flush commits.
		c.closeBy = wm.Current()
	}
	// Points carried to the flush, in the state or an overflow item,
	// hold the ticker (below); points folded now do not.
	holdAt := func(e time.Time) {
		if !e.IsZero() && (held.IsZero() || e.Before(held)) {
			held = e
		}
	}
	switch {
	case ev.IsFinalInvokeForWindow && (len(keep) > 0 || len(ovf) > 0):
		if err := p.foldCarried(ctx, c, withOverflowPoints(keep, ovf.pointsOf(nil))); err != nil {
			return events.KinesisTimeWindowEventResponse{}, err
		}
		keep, carriedState = nil, nil
	case len(keep) > 0 && keep.encode(carriedState, accumulated) > budget:
		if ovf.holdsPoints() || overflowCheaper(len(carriedState[stateCarriedAll])*3/4, len(keep)) {
			names, err := p.writeOverflowPoints(ctx, shard, accumulated, accumulated, keep)
			if err != nil {
				return events.KinesisTimeWindowEventResponse{}, err
			}
			overflowed = append(overflowed, names...)
			holdAt(keep.earliest())
			keep, carriedState = nil, map[string]string{}
			break
		}
		// Busy keys: folded now, a write per key.
		if err := p.foldCarried(ctx, c, keep); err != nil {
			return events.KinesisTimeWindowEventResponse{}, err
		}
		keep, carriedState = nil, nil
	}
	holdAt(keep.earliest())
	// The folds' late records are counted now: a fold is fenced, so a
	// redelivery never counts them again.
	p.count(c, len(c.late)-routed)

	hold, err := heldSince(ev.State)
	if err != nil {
		return events.KinesisTimeWindowEventResponse{}, err
	}
	if !ev.IsFinalInvokeForWindow {
		out := p.encodeState(partials, &wm, accumulated)
		for k, v := range dedupeState {
			out[k] = v
		}
		for k, v := range carriedState {
			out[k] = v
		}
		if !held.IsZero() && (hold.IsZero() || held.Before(hold)) {
			// The partials are carried to the flush: until then the
			// shard is not idle, whatever its stored watermark says.
			if err := p.views.Hold(ctx, p.cfg.Name, shard, held, p.now().Add(holdFor)); err != nil {
				return events.KinesisTimeWindowEventResponse{}, err
			}
			hold = held
		}
		if !hold.IsZero() {
			out[stateHold] = strconv.FormatInt(hold.UnixMilli(), 10)
		}
		if len(overflowed) > 0 {
			out[stateOverflow] = strings.Join(overflowed, ",")
		}
		if lateRouted > 0 {
			out[stateLate] = strconv.Itoa(lateRouted)
		}
		resp := c.failures.Kinesis()
		return events.KinesisTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: out}, BatchItemFailures: resp.BatchItemFailures}, nil
	}
	// The interval is over: flush one write per (key, window). When every
	// record is processed the flush knows the watermark it commits, and
	// its writes make the windows that end by it final.
	var published map[state.Ref]bool
	if p.carries() {
		// The shard's carry (carry.go): windows written when they close.
		// An interval that could not route every record commits no
		// watermark and moves no fence: its records come again.
		through := accumulated
		if c.closeBy.IsZero() {
			through = ""
		}
		published, err = p.flushCarried(ctx, shard, partials, c.closeBy, lateRouted, through, committed.Current().IsZero())
	} else {
		if err = p.spillLeftCarry(ctx, shard); err == nil {
			published, err = p.flush(ctx, shard, windowPartials(partials, p.advance), c.closeBy, lateRouted, accumulated)
		}
	}
	if err != nil {
		return events.KinesisTimeWindowEventResponse{}, err // Lambda retries the final invocation with the same state
	}
	if c.failures.Len() == 0 {
		if err := p.commit(ctx, shard, &wm, accumulated, true, published); err != nil {
			return events.KinesisTimeWindowEventResponse{}, err
		}
	}
	if !hold.IsZero() {
		// A failure retries the final invocation, whose flush finds its
		// writes done.
		if err := p.views.ClearHold(ctx, p.cfg.Name, shard, hold); err != nil {
			return events.KinesisTimeWindowEventResponse{}, err
		}
	}
	if len(overflowed) > 0 {
		p.forgetOverflow(shard)
	}
	resp := c.failures.Kinesis()
	return events.KinesisTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: map[string]string{}}, BatchItemFailures: resp.BatchItemFailures}, nil
}

// carriedBudget is how many bytes of the window state the claims (dedupe)
// and the session and sliding points may each take in the state an
// invocation returns; past it they are written as overflow items
// (overflow.go). Lambda carries at most 1 MB and ends the interval early past it
// (a flush of everything): each gets half of what the partials and the
// rest of the incoming state leave, with room for what this invocation's
// records add (stateGrowthPerRecord each), and never less than
// minCarriedBudget. With few partials (100 events a second over 1,000 keys
// a shard has some 100 KB of them) the claims of a whole two-minute
// interval fit, where a fixed 256 KB wrote them once more each interval.
// With many (5,000 keys a shard: some 600 KB) they get less than 256 KB:
// an overflow item, billed by its bytes, is cheaper than Lambda ending
// the interval early, a write per key and window.
func (p *Processor) carriedBudget(st map[string]string, records int) int {
	if p.carriedBudgetMax > 0 {
		return min(p.carriedBudgetMax, carriedBudget(st, records))
	}
	return carriedBudget(st, records)
}

func carriedBudget(st map[string]string, records int) int {
	other := limits.WindowStateSize(st)
	for _, k := range [...]string{statePending, stateCarriedAll} {
		if v, ok := st[k]; ok {
			other -= limits.WindowStateEntrySize(k, v)
		}
	}
	room := limits.LambdaWindowStateBytes - stateMargin - other - records*stateGrowthPerRecord
	return max(minCarriedBudget, room/2)
}

// Sizes carriedBudget works with: a record adds at most a key's partials
// (a new key's tumbling window and hopping pane, some 100 bytes), its
// session point and its claim (48); stateMargin is left free.
const (
	minCarriedBudget     = 64 << 10
	stateGrowthPerRecord = 192
	stateMargin          = 16 << 10
)

// foldCarried folds an interval's carried points (those of its state and
// of its overflow items) into their keyed states, at the flush.
func (p *Processor) foldCarried(ctx context.Context, c *collector, keep carried) error {
	c.keyed = make(map[keyedKey][]point, len(keep))
	for k, pts := range keep {
		ps := make([]point, len(pts))
		for i := range pts {
			ps[i] = pts[i].point
			if pts[i].Counted {
				if c.lateCounted == nil {
					c.lateCounted = map[string]struct{}{}
				}
				c.lateCounted[pts[i].Seq] = struct{}{}
			}
		}
		c.keyed[k] = ps
	}
	if failed := p.applyKeyed(ctx, c); len(failed) > 0 {
		// A keyed state write failed (a transient error): its points are
		// not stored, so the invocation fails and Lambda retries it with
		// the same state (the folds that did succeed are fenced).
		return fmt.Errorf("aggregate: %d keyed window states could not be written; the batch is retried", len(failed))
	}
	return nil
}

// heldSince is the hold an interval's state records (zero if none).
// lateCarried is the count of late records the state carries (stateLate).
func lateCarried(st map[string]string) (int, error) {
	s, ok := st[stateLate]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("aggregate: window state %q is %q, want a count", stateLate, s)
	}
	return n, nil
}

func heldSince(st map[string]string) (time.Time, error) {
	v, ok := st[stateHold]
	if !ok {
		return time.Time{}, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("aggregate: window state %q: %w", stateHold, err)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// flush writes an interval's partials, one write per (key, window), and
// lists the windows written. lateRouted is how many of the interval's
// records were dropped from their windows as late before they reached a
// partial (stateLate): the flush counts them in LateDropped when its writes
// are the first to apply the interval (a retried flush finds them applied,
// and its first try counted them), or, when it has none to make, when it is
// the first to mark the interval's records, up to lastSeq, counted
// (state.Views.FirstToCount). A window that ends by closeBy (the watermark
// the interval commits) is made final by its write (state.Update.CloseBy),
// where an update and the finalize after the commit would be two writes;
// its result is published here, with the corrections the flush made. It
// returns the windows published, which the finalize after the commit does
// not finalize again (a conditional write that fails is billed too).
func (p *Processor) flush(ctx context.Context, shard string, partials map[upKey]*partial, closeBy time.Time, lateRouted int, lastSeq string) (map[state.Ref]bool, error) {
	if err := p.loadPagedThrough(ctx, shard); err != nil {
		return nil, err
	}
	return p.flushWindows(ctx, windowFlush{shard: shard, partials: partials, closeBy: closeBy, lateRouted: lateRouted, lastSeq: lastSeq,
		pagedThrough: p.knownPagedThrough(shard)})
}

// windowFlush is what flushWindows writes: partials to their windows on
// shard, those ending by closeBy made final; lateRouted, the interval's
// records routed late, counted once lastSeq's flush applies them.
type windowFlush struct {
	shard string
	// listShard lists the windows written under its openIn ("": shard's):
	// a child shard writing out its parent's carry has them closed by its
	// own watermark, which its own carried records of them wait for, not
	// by the parent's (carry.go).
	listShard  string
	partials   map[upKey]*partial
	closeBy    time.Time
	lateRouted int
	lastSeq    string
	// A window the flush closes that ends after freshAfter (zero: none)
	// is fresh (state.Update.Fresh): every record of it is in partials,
	// it has no item as far as the carry knows, and its write creates it
	// published, unless a replay's version is handing over. Fresh windows
	// are written in result pages (state.Views.ApplyFresh): one write for
	// the keys of one page bucket.
	freshAfter time.Time
	// A window ending by pagedBy (zero: none) may be in a result page: the
	// carry closed it before (a late record's write, state.Update.Paged).
	pagedBy time.Time
	// markSpills marks the windows written open (state.Update.Spill): a
	// carry's windows written out where a flush of the same interval that
	// died may have closed some in result pages, the carry not knowing
	// it, and its retry may not come to this code to write them again (a
	// mapping moved to per batch, a replay's catch-up, an interval whose
	// records could not all be routed). Lambda retries a failed flush
	// before any other, and the ticker does not advance a shard with
	// records to process (WithBacklog), so a flush keeping its carry
	// small (fitCarry) and a reshard's child need not.
	markSpills bool
	// pagedThrough: a partial with records at or below it may be in a
	// result page a carried flush wrote before the pipeline stopped
	// carrying (state.Views.PagedThrough).
	pagedThrough string
	// pages: the carry was read in the current format, so no code from
	// before result pages writes its windows (carryFormat): its fresh
	// windows may be written in pages.
	pages bool
}

// flushWindows is flush as windowFlush says.
func (p *Processor) flushWindows(ctx context.Context, f windowFlush) (map[state.Ref]bool, error) {
	shard, partials, closeBy, lateRouted, lastSeq := f.shard, f.partials, f.closeBy, f.lateRouted, f.lastSeq
	listShard := f.listShard
	if listShard == "" {
		listShard = shard
	}
	var (
		mu       sync.Mutex
		firstErr error
		late     lateByKey
		pubs     []state.View
		created  []markedResult // fresh windows these writes created
		resend   []markedResult // fresh windows they met (state.Result.Resend)
		closed   int
		applied  bool // a write applied records for the first time
		keys     = make([]upKey, 0, len(partials))
		openIn   = p.openIn(listShard)
	)
	for k := range partials {
		keys = append(keys, k)
	}
	fresh, err := p.freshWindows(ctx, keys, closeBy, f.freshAfter)
	if err != nil {
		return nil, err
	}
	update := func(k upKey) *state.Update {
		pt := partials[k]
		return &state.Update{
			Pipeline: p.cfg.Name, Key: k.key, Kind: k.kind, Window: k.win, OpenIn: openIn,
			Partial: pt.st, MinSeq: pt.minSeq, MaxSeq: pt.maxSeq,
			CorrectIfFinal: p.cfg.Late.Policy == window.Correct,
			CloseBy:        closeBy,
			Fresh:          fresh(k),
			Paged:          p.pages() && (!f.pagedBy.IsZero() && !k.win.End.After(f.pagedBy) || state.SeqAtOrBelow(pt.minSeq, f.pagedThrough)),
			Spill:          p.pages() && f.markSpills && (closeBy.IsZero() || k.win.End.After(closeBy)),
		}
	}
	// The fresh windows first, in pages; the others one write each. Pages
	// need the shard's parents known (WithShardLister): a reshard's child
	// then writes the windows its parents may have closed in pages as
	// late, looking for them (Update.Paged). Without, a fresh window is
	// an item of its own, whose create finds a parent's.
	var paged []upKey
	others := keys[:0:0]
	for _, k := range keys {
		if fresh(k) && p.pages() && f.pages {
			paged = append(paged, k)
		} else {
			others = append(others, k)
		}
	}
	record := func(k upKey, res state.Result, err error) {
		pt := partials[k]
		mu.Lock()
		defer mu.Unlock()
		p.metrics.Add("WriteRequests", metrics.Count, float64(res.Writes))
		if res.Closed {
			closed++
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		if res.Outcome != state.Duplicate {
			applied = true
		}
		switch res.Outcome {
		case state.Duplicate:
			p.metrics.Add("DuplicatesSkipped", metrics.Count, float64(res.Skipped))
		case state.LateDropped:
			late.add(k, pt.st.Count())
		case state.Corrected:
			p.metrics.Add("Corrections", metrics.Count, 1)
		}
		if res.Resend != nil {
			resend = append(resend, markedResult{out: outputOf(*res.Resend), ref: res.Resend.Ref, key: k})
		}
		switch {
		case res.Publish != nil && res.Marked:
			created = append(created, markedResult{out: outputOf(*res.Publish), ref: res.Publish.Ref, key: k})
		case res.Publish != nil:
			pubs = append(pubs, *res.Publish)
		}
	}
	if len(paged) > 0 {
		us := make([]*state.Update, len(paged))
		for i, k := range paged {
			us[i] = update(k)
		}
		results, err := p.views.ApplyFresh(ctx, shard, us)
		for i, k := range paged {
			if results != nil && results[i].Outcome != 0 {
				record(k, results[i], nil) // written before a later page failed: logged below
			}
		}
		if err != nil {
			record(paged[0], state.Result{}, err)
		}
	}
	parallel(len(others), p.concurrency, func(i int) {
		k := others[i]
		res, err := p.apply(ctx, shard, update(k))
		record(k, res, err)
	})
	// A created window's line now, whatever fails after: the write that
	// created it is the one that logs it (sendMarked).
	for i := range created {
		p.logResult(ctx, &created[i].out)
	}
	p.metrics.Add("LateDropped", metrics.Count, float64(late.records(p.windowsPerRecord)))
	if firstErr != nil {
		return nil, firstErr
	}
	switch {
	case applied:
		p.metrics.Add("LateDropped", metrics.Count, float64(lateRouted))
	case len(keys) == 0 && lateRouted > 0 && lastSeq != "":
		first, err := p.views.FirstToCount(ctx, p.cfg.Name, shard, lastSeq)
		p.metrics.Add("WriteRequests", metrics.Count, 1)
		if err != nil {
			return nil, err
		}
		if first {
			p.metrics.Add("LateDropped", metrics.Count, float64(lateRouted))
		}
	}
	// List the windows written; a failure fails the final invocation,
	// whose retry finds them applied and lists them.
	written := make(map[listedWindow][]string, 8)
	published := make(map[state.Ref]bool, len(pubs)+len(created))
	var done map[upKey]bool // published with their writes: nothing to list
	for i := range created {
		if done == nil {
			done = make(map[upKey]bool, len(created))
		}
		done[created[i].key] = true
		published[created[i].ref] = true
	}
	for _, k := range keys {
		if done[k] {
			continue
		}
		w := listedWindow{k.kind, k.win}
		written[w] = append(written[w], k.key)
	}
	for w, err := range p.listWindows(ctx, listShard, written) {
		return nil, fmt.Errorf("aggregate: listing window %s|%s: %w", w.kind, w.win.ID(), err)
	}
	// The final results and corrections the flush made (or met
	// unpublished, on a retry of the final invocation) go on the output
	// stream; if that fails, the final invocation fails and its retry,
	// finding them applied, publishes them, or the ticker does.
	if err := p.sendMarked(ctx, append(resend, created...)); err != nil {
		return nil, err
	}
	held, err := p.publish(ctx, pubs)
	if err != nil {
		return nil, err
	}
	p.metrics.Add("WindowsFinalized", metrics.Count, float64(closed))
	for i := range pubs {
		if !held[listedWindow{pubs[i].Kind, pubs[i].Window}] {
			published[pubs[i].Ref] = true
		}
	}
	return published, nil
}

// lateByKey gathers, per key and window kind, the partials a flush found
// final (made final by the ticker during the interval) and dropped.
type lateByKey map[string]map[string]*lateKind

// lateKind is one (key, window kind)'s dropped partials: their record
// counts summed, and the largest.
type lateKind struct{ sum, largest uint64 }

func (l *lateByKey) add(k upKey, n uint64) {
	if *l == nil {
		*l = lateByKey{}
	}
	kinds := (*l)[k.key]
	if kinds == nil {
		kinds = map[string]*lateKind{}
		(*l)[k.key] = kinds
	}
	lk := kinds[k.kind]
	if lk == nil {
		lk = &lateKind{}
		kinds[k.kind] = lk
	}
	lk.sum += n
	lk.largest = max(lk.largest, n)
}

// records is how many records the dropped partials hold, counted once each
// as LateDropped counts them. A partial holds counts, not the records, so a
// record in several dropped windows cannot be recognised: per key, it takes
// the window kind that accounts for the most records, where a kind whose
// windows each record is in n of (a hopping window: size/advance) accounts
// for ⌈sum/n⌉ and at least its largest partial. That is exact for tumbling
// windows and for hopping windows all dropped, and never more than the
// key's records, so 100 × LateDropped / RecordsIn stays a share.
func (l lateByKey) records(windowsPerRecord func(kind string) uint64) uint64 {
	var total uint64
	for _, kinds := range l {
		var most uint64
		for kind, lk := range kinds {
			n := windowsPerRecord(kind)
			most = max(most, (lk.sum+n-1)/n, lk.largest)
		}
		total += most
	}
	return total
}

// advance is how far apart kind's windows start: a hopping window's
// advance, else 0 (a tumbling window: one window per record).
func (p *Processor) advance(kind string) time.Duration {
	for i, id := range p.kinds {
		if id == kind && p.cfg.Windows[i].Kind == pipeline.Hopping {
			return p.cfg.Windows[i].Hopping().Advance
		}
	}
	if _, advance, ok := hoppingID(kind); ok && !slices.Contains(p.kinds, kind) {
		return advance
	}
	return 0
}

// consecutive reports whether ws (two or more) are windows of one size
// that start advance apart, oldest first; a single window is.
func consecutive(ws []window.Window, advance time.Duration) bool {
	if len(ws) == 1 {
		return true
	}
	if advance <= 0 {
		return false
	}
	size := ws[0].End.Sub(ws[0].Start)
	for j := 1; j < len(ws); j++ {
		if !ws[j].Start.Equal(ws[j-1].Start.Add(advance)) || ws[j].End.Sub(ws[j].Start) != size {
			return false
		}
	}
	return true
}

// windowPartials expands the state's partials into one per (key, window):
// a window's partial is the merge of every set partial that covers it,
// from the first sequence number of any of them to the last.
func windowPartials(sets map[setKey]*partial, advance func(kind string) time.Duration) map[upKey]*partial {
	out := make(map[upKey]*partial, len(sets))
	owned := map[upKey]bool{} // its st is a merge of its own, not a set's
	for k, pt := range sets {
		if k.n > 1 {
			// The windows share pt.st, and the flush writes them at once:
			// encoding it must not write it.
			pt.st.Settle()
		}
		step := advance(k.kind)
		for j := range k.n {
			shift := time.Duration(j) * step
			w := upKey{key: k.key, kind: k.kind, win: window.Window{Start: k.win.Start.Add(shift), End: k.win.End.Add(shift)}}
			have, ok := out[w]
			if !ok {
				out[w] = &partial{st: pt.st, minSeq: pt.minSeq, maxSeq: pt.maxSeq}
				continue
			}
			if !owned[w] {
				have.st, owned[w] = have.st.Clone(), true
			}
			_ = have.st.Merge(pt.st) // one pipeline's spec: Merge cannot refuse it
			if stream.CompareSequence(pt.minSeq, have.minSeq) < 0 {
				have.minSeq = pt.minSeq
			}
			if stream.CompareSequence(pt.maxSeq, have.maxSeq) > 0 {
				have.maxSeq = pt.maxSeq
			}
		}
	}
	return out
}

// windowsPerRecord is how many windows of kind each record is in: 1 for
// tumbling, size/advance for hopping.
func (p *Processor) windowsPerRecord(kind string) uint64 {
	for i, id := range p.kinds {
		if id == kind && p.cfg.Windows[i].Kind == pipeline.Hopping {
			if h := p.cfg.Windows[i].Hopping(); h.Advance > 0 {
				return max(1, uint64(h.Size/h.Advance))
			}
		}
	}
	if size, advance, ok := hoppingID(kind); ok && !slices.Contains(p.kinds, kind) {
		return max(1, uint64(size/advance))
	}
	return 1
}

// hoppingID reads a hopping window kind's size and advance from its ID
// (pipeline.WindowSpec.ID: hopping:<size>:<advance>[+<offset>]), for the
// partials of a kind the pipeline no longer has that a shard's carry still
// holds (its file changed in place): they are written out as that kind's.
func hoppingID(kind string) (size, advance time.Duration, ok bool) {
	rest, found := strings.CutPrefix(kind, "hopping:")
	if !found {
		return 0, 0, false
	}
	rest, _, _ = strings.Cut(rest, "+")
	s, a, found := strings.Cut(rest, ":")
	if !found {
		return 0, 0, false
	}
	size, err1 := time.ParseDuration(s)
	advance, err2 := time.ParseDuration(a)
	if err1 != nil || err2 != nil || advance <= 0 || size < advance {
		return 0, 0, false
	}
	return size, advance, true
}

func (p *Processor) decodePartials(st map[string]string) (map[setKey]*partial, error) {
	out := make(map[setKey]*partial, len(st))
	slab := make([]partial, 0, len(st)) // one allocation for every entry's partial
	for k, v := range st {
		if k == statePartials {
			b, err := base64.RawStdEncoding.DecodeString(v)
			if err == nil {
				err = p.decodePartialsEntry(b, st[stateSeq], out)
			}
			if err != nil {
				return nil, fmt.Errorf("aggregate: window state entry %q: %w", k, err)
			}
			continue
		}
		// An entry of the first format (statePartial): one partial.
		if !strings.HasPrefix(k, statePartial) {
			continue
		}
		// <kind>|<window id>|<key> → "<minSeq> <maxSeq> <partial>"; the key
		// is the rest, "|" and all.
		kind, rest, ok1 := strings.Cut(k[len(statePartial):], "|")
		id, key, ok2 := strings.Cut(rest, "|")
		minSeq, rest, ok3 := strings.Cut(v, " ")
		maxSeq, text, ok4 := strings.Cut(rest, " ")
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, fmt.Errorf("aggregate: window state entry %q is malformed", k)
		}
		n := 1
		if first, count, many := strings.Cut(id, "*"); many {
			c, err := strconv.Atoi(count)
			if err != nil || c < 2 || uint64(c) > p.windowsPerRecord(kind)+1 {
				return nil, fmt.Errorf("aggregate: window state entry %q: %q windows, want 2 to %d", k, count, p.windowsPerRecord(kind)+1)
			}
			id, n = first, c
		}
		w, err := window.ParseID(id)
		if err != nil {
			return nil, fmt.Errorf("aggregate: window state entry %q: %w", k, err)
		}
		slab = append(slab, partial{own: *p.cfg.Aggregates.New(), minSeq: minSeq, maxSeq: maxSeq})
		pt := &slab[len(slab)-1]
		pt.st = &pt.own
		if err := pt.st.UnmarshalText([]byte(text)); err != nil {
			return nil, fmt.Errorf("aggregate: window state entry %q: %w", k, err)
		}
		out[setKey{upKey{key: key, kind: kind, win: w}, n}] = pt
	}
	return out, nil
}

func (p *Processor) encodeState(partials map[setKey]*partial, wm *window.Watermark, seq string) map[string]string {
	out := make(map[string]string, 3)
	if b, err := wm.MarshalBinary(); err == nil {
		out[stateWatermark] = base64.StdEncoding.EncodeToString(b)
	}
	if seq != "" {
		out[stateSeq] = seq
	}
	if len(partials) > 0 {
		out[statePartials] = encodePartials(partials, seq)
	}
	return out
}
