package aggregate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/binenc"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// The shard's carry (state.Views.LoadCarry): on the per-interval path of a
// pipeline whose keys each stay on one shard (partitionKeyIsGroupingKey),
// the flush writes a tumbling or hopping window once, when the watermark it
// commits closes it, and keeps the partials of the windows it does not
// close in the shard's carry items (chunks, below) until a later flush
// (or the ticker) closes them. Without it each flush wrote every window its partials fall in: a
// five-minute window hopping by a minute was written at each of the three
// two-minute flushes it is open for, then made final, then marked
// published; with it, made final (by one write with all its records) and
// marked published.
//
// The carry holds the partials as the window state holds them (per key and
// pane, appendPartials), the last record they hold (its fence: a final
// invocation sent again finds its interval there and writes nothing twice)
// and the watermark through which its windows are written (closed): a
// window ending by it has been written whole, so a record of the interval
// for such a window (a late one) is written to it alone, as a correction
// or dropped, never added to the carried partial. Every write of it is on
// the version read: a flush that meets a carry the ticker wrote since, or
// a window the ticker closed from it, reads it again and plans again, its
// window writes being fenced (a repeat finds its records applied).
//
// Who closes a carried window: the shard's next flush whose watermark
// passes it; the ticker, when the shard is idle and its watermark moves by
// the clock (closeCarried, before the finalize reads the listings), which
// stores the carry without those windows (holding them as closing) before
// it writes them, so a flush never adds records to a window it may have
// written; and, after a reshard, the child shard's first flush, which
// writes the parent's carried partials to their windows before its own
// and lists them under itself (spillCarry), so that the child's
// watermark, not the idle parent's, closes them once its own carried
// records are in: Lambda reads a parent shard to its end before its
// children, so the parent's carry is final by then. A flush whose carry
// would pass carryBytes writes some keys' windows instead (spilled, as
// before the carry), and one that could not route every record writes all
// of them. A pipeline that stops keeping carries (the file or the mapping
// changed) writes each shard's out at its next batch, flush or tick
// (spillLeftCarry); a window kind changed in place is closed as the kind
// it was (its size and advance are in its id); a carry is kept until its
// windows have ended and their retention passed.
//
// The carry is kept in carryChunks items per shard, each an independent
// carry of the keys that hash to it (carryChunk), so a shard of thousands
// of keys fits. What it costs: a read and a write of each chunk per shard
// and flush (each write unit a KB; a chunk with nothing carried is read
// only), where each key's open windows were a write each; and the results
// of a window appear in the views table when it closes, not at each flush
// before.

// carryFormat is the first byte of a carry; the fence, the closing
// watermark, the itemsBy bound, the partials (appendPartials; none: no
// bytes) with their length, the windows closing (appendPartials) with
// theirs, the shard the spilling partials are listed under and those
// partials follow. The formats before: carryFormatNoPages, the same bytes
// stored by code from before result pages (which fails on the current
// format, so that while a deploy runs old and new code at once, no old
// code closes a window a new flush may have paged: a window closed from a
// carry in that format is written as an item of its own), carryFormatWhole,
// a shard's one carry of every key (read as its chunk 0, whose other keys
// it writes out), and carryFormatNoItemsBy, that without itemsBy.
const (
	carryFormat          byte = 4
	carryFormatNoPages   byte = 3
	carryFormatWhole     byte = 2
	carryFormatNoItemsBy byte = 1
)

// chunked reports whether a carry stored in format f is one chunk's.
func chunked(f byte) bool { return f == carryFormat || f == carryFormatNoPages }

// carryChunks is how many items a shard's carry is kept in, each with the
// keys that hash to it (carryChunk) and each within carryBytes: 300 KB
// holds the windows of some 1,500 keys of the stack's pipeline, and a
// shard of 1,000 records a second over 5,000 keys needs several. Each is
// a carry of its own (its version, fence, closed watermark); a flush
// reads each and stores each that carries (one with nothing carried is
// read only), so a chunk costs a read and at most a write a flush. Changing it moves keys between chunks: a carry written
// with another count must be written out first (not done: it is fixed).
const carryChunks = 8

// carryChunk is the chunk of a shard's carry that holds key's windows:
// its result page bucket (state.PageBucket), so that a chunk's flush
// writes the pages of one bucket, whose parts no other chunk writes.
func carryChunk(key string) int { return state.PageBucket(key) }

// A chunk per page bucket.
var _ [carryChunks - state.PageBuckets]struct{}
var _ [state.PageBuckets - carryChunks]struct{}

// carryID is the sort key of a shard's carry chunk: the shard for chunk 0
// (the one item of carries before chunks), then <shard>#<chunk>.
func carryID(shard string, chunk int) string {
	if chunk == 0 {
		return shard
	}
	return shard + "#" + strconv.Itoa(chunk)
}

// carryOf is the shard and chunk a carry's sort key names (carryID).
func carryOf(id string) (shard string, chunk int) {
	shard, n, ok := strings.Cut(id, "#")
	if !ok {
		return id, 0
	}
	chunk, err := strconv.Atoi(n)
	if err != nil {
		return id, 0
	}
	return shard, chunk
}

// shardCarry is a chunk of a shard's carry as read.
type shardCarry struct {
	shard  string
	id     string // its sort key (carryID)
	format byte   // as stored (0: none)
	// whole: a carry from before chunks, of every key of the shard (its
	// fence then says the interval is done for every chunk).
	whole   bool
	version int64
	fence   string    // the last record the partials hold ("" none)
	closed  time.Time // every window ending by it is written (or in closing)
	// itemsBy bounds the windows that may have an item before they close:
	// written open by a spill, or by a flush before the shard kept a
	// carry. One ending by it closes as any window does (written, listed,
	// marked published); one ending after it, with every record of it in
	// the carry and the interval, is fresh (state.Update.Fresh), created
	// by its closing write already published: one write, not two. A
	// window it misses (a spill that died before its carry was stored)
	// costs the refused create only.
	itemsBy time.Time
	sets    map[setKey]*partial
	// closing are windows the ticker took out of the carry to close (one
	// window each, n 1): stored before it writes them, so a flush that
	// reads the carry meanwhile writes them first and never adds records
	// to a window the ticker may have written (closeCarried).
	closing map[setKey]*partial
	// spilling are partials being written out open (a spill: a reshard's
	// parent, a carry left behind, a replay's catch-up), listed under
	// spillTo: stored before they are written, as closing is, so a flush
	// racing the spill never carries what the spill may have written.
	spilling map[setKey]*partial
	spillTo  string
}

// ShardLister is what the flush of a new shard asks Kinesis: its parents,
// whose carries it writes out first.
type ShardLister interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
}

var _ ShardLister = (*kinesis.Client)(nil)

// WithShardLister has the first flush of a shard the processor has no
// watermark for ask l (on the stream named stream) for the shard's
// parents, and write out their carries before its own windows: after a
// reshard the keys' open windows are in the parent's carry. Without it a
// pipeline keeping carries must not be resharded.
func WithShardLister(l ShardLister, stream string) Option {
	return func(p *Processor) { p.shards, p.shardsStream = l, stream }
}

// WithCarryBytes bounds each chunk of a shard's carry (default and at
// most state.MaxCarryBytes).
func WithCarryBytes(n int) Option {
	return func(p *Processor) { p.carryBytes = min(max(n, 64), state.MaxCarryBytes) }
}

// carries reports whether this pipeline's flushes keep a carry: it has
// tumbling or hopping windows, and each key's records are on one shard, so
// one shard's flushes write all of a window.
func (p *Processor) carries() bool {
	if !p.cfg.PartitionKeyIsGroupingKey {
		return false
	}
	for _, w := range p.cfg.Windows {
		if !isKeyedKind(w.Kind) {
			return true
		}
	}
	return false
}

// loadPagedThrough reads, once a process, how far a carried flush of
// shard may have written result pages (state.Views.PagedThrough), for the
// writes of code that keeps no carry: a batch's, a flush's of a pipeline
// no longer carrying.
func (p *Processor) loadPagedThrough(ctx context.Context, shard string) error {
	if !p.pages() {
		return nil
	}
	p.mu.Lock()
	_, known := p.pagedThrough[shard]
	p.mu.Unlock()
	if known {
		return nil
	}
	f, err := p.views.PagedThrough(ctx, p.cfg.Name, shard)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.pagedThrough[shard] = f
	p.mu.Unlock()
	return nil
}

// knownPagedThrough is what loadPagedThrough read for shard ("": none).
func (p *Processor) knownPagedThrough(shard string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pagedThrough[shard]
}

// pages reports whether the flushes write the windows the carry held to
// their close in result pages (state.Views.ApplyFresh): when the shard's
// parents are known (WithShardLister), so that a reshard's child writes
// the windows its parents may have closed in pages as late ones, looking
// for them (state.Update.Paged). Without, each is an item of its own,
// whose conditional create finds a parent's.
func (p *Processor) pages() bool { return p.shards != nil }

// loadCarry reads chunk of shard's carry. A whole carry (written before
// chunks) read as chunk 0 has the partials of the other chunks' keys
// moved to spilling, for writePending to write out open before the chunk
// is stored without them.
func (p *Processor) loadCarry(ctx context.Context, shard string, chunk int) (shardCarry, error) {
	id := carryID(shard, chunk)
	stored, err := p.views.LoadCarry(ctx, p.cfg.Name, id)
	if err != nil {
		return shardCarry{}, err
	}
	c := shardCarry{shard: shard, id: id, version: stored.Version, sets: map[setKey]*partial{}, closing: map[setKey]*partial{}, spilling: map[setKey]*partial{}}
	if len(stored.Data) == 0 {
		return c, nil
	}
	if err := p.decodeCarry(stored.Data, &c); err != nil {
		return shardCarry{}, fmt.Errorf("aggregate: the carry of %s %s: %w", p.cfg.Name, id, err)
	}
	c.format = stored.Data[0]
	c.whole = c.format == carryFormatWhole || (c.format == carryFormatNoItemsBy && len(c.sets)+len(c.closing)+len(c.spilling) > 0)
	if !chunked(c.format) && c.spillTo == "" {
		for k, pt := range c.sets {
			if carryChunk(k.key) != chunk {
				c.spilling[k] = pt
				delete(c.sets, k)
			}
		}
		c.wroteOpen(windowPartials(c.spilling, p.advance))
	}
	return c, nil
}

func (p *Processor) decodeCarry(b []byte, c *shardCarry) error {
	if !chunked(b[0]) && b[0] != carryFormatWhole && b[0] != carryFormatNoItemsBy {
		return fmt.Errorf("format %d, want %d", b[0], carryFormat)
	}
	r := binenc.NewReader(b[1:], errStateTruncated)
	fence := r.LenBytes()
	closed := r.Varint()
	var itemsBy int64
	if b[0] != carryFormatNoItemsBy {
		itemsBy = r.Varint()
	}
	if r.Err() != nil {
		return r.Err()
	}
	if len(fence) > 0 && !isSequenceNumber(string(fence)) {
		return fmt.Errorf("fence %q is not a sequence number", fence)
	}
	c.fence = string(fence)
	c.closed, c.itemsBy = unixMilli(closed), unixMilli(itemsBy)
	sets := r.LenBytes()
	if r.Err() != nil {
		return r.Err()
	}
	if len(sets) > 0 {
		if err := p.decodePartialsEntry(sets, c.fence, c.sets); err != nil {
			return err
		}
	}
	closing := r.LenBytes()
	spillTo := r.LenBytes()
	if r.Err() != nil {
		return r.Err()
	}
	c.spillTo = string(spillTo)
	if len(closing) > 0 {
		if err := p.decodePartialsEntry(closing, c.fence, c.closing); err != nil {
			return fmt.Errorf("the windows closing: %w", err)
		}
	}
	if r.Len() > 0 {
		if err := p.decodePartialsEntry(r.Bytes(r.Len()), c.fence, c.spilling); err != nil {
			return fmt.Errorf("the partials spilling: %w", err)
		}
	}
	if b[0] == carryFormatNoItemsBy {
		// Written before itemsBy: its windows may have items.
		c.itemsBy = c.closed
		for _, sets := range []map[setKey]*partial{c.sets, c.closing, c.spilling} {
			for k := range sets {
				c.itemsBy = latest(c.itemsBy, p.lastEnd(k))
			}
		}
	}
	return nil
}

// unixMilli is the time of ms milliseconds after the epoch, zero for 0.
func unixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// millisOrZero is t in Unix milliseconds, 0 for the zero time.
func millisOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// longestWindow is the size of the pipeline's longest tumbling or hopping
// window.
func (p *Processor) longestWindow() time.Duration {
	var d time.Duration
	for _, w := range p.cfg.Windows {
		if !isKeyedKind(w.Kind) {
			d = max(d, w.Size)
		}
	}
	return d
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// freshAfter is the end after which a window c's flush or tick closes is
// fresh (shardCarry.itemsBy): past what c has written and what may have
// items. Zero (none) before the shard's first carry is stored.
func (c *shardCarry) freshAfter() time.Time {
	if c.itemsBy.IsZero() {
		return time.Time{}
	}
	return latest(c.closed, c.itemsBy)
}

// wroteOpen moves c's itemsBy past the windows in writes that are written
// open (ending after c.closed): they have items before they close.
func (c *shardCarry) wroteOpen(writes map[upKey]*partial) {
	for k := range writes {
		if k.win.End.After(c.closed) {
			c.itemsBy = latest(c.itemsBy, k.win.End)
		}
	}
}

// encodePortable is an empty carry in the first format, which every
// version that keeps carries reads: what a pipeline that stops carrying
// stores (spillCarry, portable), chunk 0 last, so that it can go back to
// code from before chunks. Code from before finds any other format at the
// shard's sort key unreadable and fails, rather than carry keys a chunk
// holds: chunk 0 is kept in the current format while the carry is on (a
// carrying function racing the pass that turns it off can store a chunk
// after the pass wrote it out: spillOnce passes until it finds nothing).
func encodePortable(c *shardCarry) []byte {
	b := []byte{carryFormatNoItemsBy}
	b = binenc.AppendString(b, c.fence)
	b = binary.AppendVarint(b, millisOrZero(c.closed))
	return append(b, 0, 0, 0) // no sets, none closing, no spillTo
}

func encodeCarry(c *shardCarry) []byte {
	b := []byte{carryFormat}
	b = binenc.AppendString(b, c.fence)
	b = binary.AppendVarint(b, millisOrZero(c.closed))
	b = binary.AppendVarint(b, millisOrZero(c.itemsBy))
	b = binenc.AppendBytes(b, appendSorted(nil, c.sets, c.fence))
	b = binenc.AppendBytes(b, appendSorted(nil, c.closing, c.fence))
	b = binenc.AppendString(b, c.spillTo)
	return appendSorted(b, c.spilling, c.fence)
}

// appendSorted is appendPartials in compareSetKeys order (nothing for no
// partials).
func appendSorted(b []byte, sets map[setKey]*partial, ref string) []byte {
	if len(sets) == 0 {
		return b
	}
	order := make([]setKey, 0, len(sets))
	for k := range sets {
		order = append(order, k)
	}
	slices.SortFunc(order, compareSetKeys)
	return appendPartialsIn(b, sets, order, ref)
}

// compareSetKeys orders partials by key, window kind, first window and
// how many windows.
func compareSetKeys(a, b setKey) int {
	if c := strings.Compare(a.key, b.key); c != 0 {
		return c
	}
	if c := strings.Compare(a.kind, b.kind); c != 0 {
		return c
	}
	if c := a.win.Start.Compare(b.win.Start); c != 0 {
		return c
	}
	if c := a.win.End.Compare(b.win.End); c != 0 {
		return c
	}
	return a.n - b.n
}

// carryLimit is the most bytes a chunk of a carry holds (WithCarryBytes).
func (p *Processor) carryLimit() int {
	if p.carryBytes == 0 {
		return state.MaxCarryBytes
	}
	return p.carryBytes
}

// saveCarry stores c as data on the version it was read at, kept until
// the last window it holds has ended and the pipeline's retention passed
// (at least a week after the write), and moves c to the version written.
// Data past carryLimit and the name of the shard a spill lists under
// (state.CarryListingRoom) is refused.
func (p *Processor) saveCarry(ctx context.Context, c *shardCarry, data []byte) error {
	if most := p.carryLimit() + state.CarryListingRoom; len(data) > most {
		return fmt.Errorf("aggregate: the carry of %s %s is %d bytes, more than %d", p.cfg.Name, c.id, len(data), most)
	}
	var last time.Time
	for _, sets := range []map[setKey]*partial{c.sets, c.closing, c.spilling} {
		for k := range sets {
			if e := p.lastEnd(k); e.After(last) {
				last = e
			}
		}
	}
	keep := time.Time{}
	if !last.IsZero() {
		keep = last.Add(max(p.cfg.Retention, time.Hour))
	}
	err := p.views.SaveCarry(ctx, p.cfg.Name, state.Carry{Shard: c.id, Data: data, Version: c.version, KeepUntil: keep})
	p.metrics.Add("WriteRequests", metrics.Count, 1)
	if err == nil {
		c.version++
	}
	return err
}

// writePending writes what c holds to be written: the windows closing
// (the ticker's, stored before it wrote them), closed at c.closed and
// listed under c's shard, and the partials spilling, open, listed under
// c.spillTo. Both were stored before their writes, so writing them again
// finds them applied; the carry the caller saves next leaves them out.
func (p *Processor) writePending(ctx context.Context, c *shardCarry, mark bool) error {
	if len(c.closing) > 0 {
		if _, err := p.flushWindows(ctx, windowFlush{shard: c.shard, partials: windowPartials(c.closing, p.advance), closeBy: c.closed, freshAfter: c.itemsBy, pagedBy: c.itemsBy, pages: c.format == carryFormat}); err != nil {
			return err
		}
	}
	if len(c.spilling) > 0 {
		open := map[upKey]*partial{}
		for k, pt := range windowPartials(c.spilling, p.advance) {
			if c.closed.IsZero() || k.win.End.After(c.closed) {
				open[k] = pt
			}
		}
		to := c.spillTo
		if to == "" {
			to = c.shard
		}
		if _, err := p.flushWindows(ctx, windowFlush{shard: c.shard, listShard: to, partials: open, markSpills: mark}); err != nil {
			return err
		}
	}
	return nil
}

// pending reports whether c holds windows to be written (writePending).
func (c *shardCarry) pending() bool { return len(c.closing) > 0 || len(c.spilling) > 0 }

// carryAttempts bounds how often a flush reads its carry again after the
// ticker wrote it (or closed one of its windows) meanwhile.
const carryAttempts = 4

// flushCarried is flush for a pipeline that keeps carries: the interval's
// partials (sets) with the shard's carry, windows closing by closeBy
// written whole, the rest carried, chunk by chunk (flushChunk). lateRouted
// is counted when this call is the one that stores the interval (lastSeq)
// in chunk 0. newShard
// says the processor has no watermark for the shard: a child of a reshard
// writes out its parents' carries first.
func (p *Processor) flushCarried(ctx context.Context, shard string, sets map[setKey]*partial, closeBy time.Time, lateRouted int, lastSeq string, newShard bool) (map[state.Ref]bool, error) {
	var first spilled // a new shard's first carry's bounds (flushChunk)
	if newShard {
		parents, err := p.spillParents(ctx, shard)
		if err != nil {
			return nil, err
		}
		first.closed = parents.closed
		// No flush wrote the shard's windows before; its parents' may
		// have items.
		first.itemsBy = latest(parents.itemsBy, time.UnixMilli(1))
	}
	var c0 *shardCarry // chunk 0 as read here, for its flush's first attempt
	if lastSeq != "" {
		// A carry from before chunks whose fence has the interval: code
		// from before stored it whole, every key's, before it died.
		c, err := p.loadCarry(ctx, shard, 0)
		if err != nil {
			return nil, err
		}
		if c.whole && c.fence != "" && stream.CompareSequence(c.fence, lastSeq) >= 0 {
			return nil, nil
		}
		c0 = &c
	}
	if p.pages() && lastSeq != "" {
		// Before any page: code of another write path that meets these
		// records again (the final invocation failing after its pages,
		// sent again to a mapping moved to per batch) looks for their
		// windows in pages.
		if err := p.views.MarkPaged(ctx, p.cfg.Name, shard, lastSeq); err != nil {
			return nil, err
		}
	}
	chunks := make([]map[setKey]*partial, carryChunks)
	for k, pt := range sets {
		c := carryChunk(k.key)
		if chunks[c] == nil {
			chunks[c] = map[setKey]*partial{}
		}
		chunks[c][k] = pt
	}
	published := map[state.Ref]bool{}
	for chunk, sets := range chunks {
		// Each chunk stored is done: a final invocation sent again after
		// a chunk failed finds the ones before it stored (their fence).
		var read *shardCarry
		if chunk == 0 {
			read = c0
		}
		pub, err := p.flushChunk(ctx, shard, chunk, read, sets, closeBy, lateRouted, lastSeq, first)
		if err != nil {
			return nil, err
		}
		lateRouted = 0 // counted with chunk 0
		for r := range pub {
			published[r] = true
		}
	}
	return published, nil
}

// flushChunk is flushCarried for one chunk of the shard's carry and the
// interval's partials of its keys (sets); read, when not nil, is the chunk
// as just read, for the first attempt. firstItemsBy, when not zero, is the
// itemsBy of a chunk stored for the first time.
func (p *Processor) flushChunk(ctx context.Context, shard string, chunk int, read *shardCarry, sets map[setKey]*partial, closeBy time.Time, lateRouted int, lastSeq string, first spilled) (map[state.Ref]bool, error) {
	var lastErr error
	// Keys whose windows an attempt wrote open to keep the carry small:
	// an attempt after it, on a carry the ticker made smaller, writes them
	// open again (finding them applied) rather than carry what is written.
	spilled := map[string]bool{}
	for attempt := range carryAttempts {
		var cur shardCarry
		if attempt == 0 && read != nil {
			cur = *read
		} else {
			var err error
			if cur, err = p.loadCarry(ctx, shard, chunk); err != nil {
				return nil, err
			}
		}
		if lastSeq != "" && cur.fence != "" && stream.CompareSequence(cur.fence, lastSeq) >= 0 {
			// A final invocation sent again: its windows were written,
			// listed and published before its carry was.
			return nil, nil
		}
		if err := p.writePending(ctx, &cur, true); err != nil {
			return nil, err
		}
		if cur.version == 0 && !first.itemsBy.IsZero() {
			// A reshard's child: what its parents closed is closed (in
			// result pages, or items), its own records of it late.
			cur.closed = latest(cur.closed, first.closed)
		}
		writes, next := p.planCarry(&cur, sets, closeBy)
		if cur.version == 0 && !first.itemsBy.IsZero() {
			next.itemsBy = first.itemsBy
		}
		// Chunk 0 is stored in the current format before any other chunk
		// carries: code from before, reading the shard's one carry there,
		// then fails rather than carry a key a chunk holds.
		chunk0Current := chunk != 0 || cur.format == carryFormat
		firstOfChild := cur.version == 0 && !first.closed.IsZero()
		if chunk0Current && len(writes) == 0 && len(cur.sets) == 0 && !cur.pending() && len(next.sets) == 0 && !firstOfChild {
			// Nothing carried or to carry: nothing to store, and the
			// interval's late records are counted as a flush with no
			// write counts them. (A reshard's child stores each chunk
			// at its first flush all the same: what its parents closed,
			// which its later flushes take as closed.)
			return p.flush(ctx, shard, writes, closeBy, lateRouted, lastSeq)
		}
		if lastSeq != "" {
			next.fence = strings.Clone(lastSeq)
		}
		data := p.fitCarry(&next, writes, spilled)
		// Windows ending by what the carry (or a reshard's parents')
		// closed may be in result pages: a write that finds no item of
		// one looks there.
		published, err := p.flushWindows(ctx, windowFlush{shard: shard, partials: writes, closeBy: closeBy, freshAfter: cur.freshAfter(), pagedBy: cur.closed, markSpills: closeBy.IsZero(), pages: cur.format == carryFormat})
		if errors.Is(err, state.ErrPartialOverlap) {
			lastErr = err // the ticker closed a carried window meanwhile
			continue
		}
		if err != nil {
			return nil, err
		}
		err = p.saveCarry(ctx, &next, data)
		if errors.Is(err, state.ErrCarryChanged) {
			lastErr = err
			continue
		}
		if err != nil {
			return nil, err
		}
		p.metrics.Add("LateDropped", metrics.Count, float64(lateRouted))
		return published, nil
	}
	return nil, fmt.Errorf("aggregate: the carry of %s kept changing while the flush wrote it: %w", carryID(shard, chunk), lastErr)
}

// planCarry splits cur's partials and the interval's (sets) into the
// window writes a flush committing closeBy makes and the carry it keeps:
//   - the interval's partials of windows cur has written (ending by
//     cur.closed) are written alone, to be corrected or dropped as late;
//   - the windows ending after cur.closed and by closeBy get one write each
//     with every partial of theirs, carried and new, and close;
//   - the rest stays in the carry, or, when closeBy is zero (a flush that
//     could not route every record, a reshard's spill), is written open.
func (p *Processor) planCarry(cur *shardCarry, sets map[setKey]*partial, closeBy time.Time) (map[upKey]*partial, shardCarry) {
	writes := map[upKey]*partial{}
	if !cur.closed.IsZero() {
		for k, pt := range windowPartials(sets, p.advance) {
			if !k.win.End.After(cur.closed) {
				writes[k] = pt
			}
		}
	}
	merged := make(map[setKey]*partial, len(cur.sets)+len(sets))
	for k, pt := range cur.sets {
		merged[k] = pt
	}
	for k, pt := range sets {
		have, ok := merged[k]
		if !ok {
			merged[k] = pt
			continue
		}
		// have is the carry's, decoded for this call: it may take pt.
		_ = have.st.Merge(pt.st) // one pipeline's spec: Merge cannot refuse it
		if stream.CompareSequence(pt.minSeq, have.minSeq) < 0 {
			have.minSeq = pt.minSeq
		}
		if stream.CompareSequence(pt.maxSeq, have.maxSeq) > 0 {
			have.maxSeq = pt.maxSeq
		}
	}
	next := shardCarry{shard: cur.shard, id: cur.id, version: cur.version, fence: cur.fence, closed: cur.closed, itemsBy: cur.itemsBy, sets: map[setKey]*partial{}}
	if !closeBy.IsZero() && closeBy.After(next.closed) {
		next.closed = closeBy
	}
	if cur.version == 0 || cur.format == carryFormatNoItemsBy {
		// The shard's first carry, or the first since a process that
		// kept none stored it empty (spillOnce, the first format): a
		// flush before it may have written any window open then, those
		// of its records and of records up to the watermark's allowance
		// past it.
		next.itemsBy = latest(next.itemsBy, next.closed.Add(p.longestWindow()+p.cfg.OutOfOrderness))
		for k := range merged {
			next.itemsBy = latest(next.itemsBy, p.lastEnd(k))
		}
	}
	for k, pt := range windowPartials(merged, p.advance) {
		end := k.win.End
		if !end.After(cur.closed) && !cur.closed.IsZero() {
			continue // written whole before
		}
		if closeBy.IsZero() || !end.After(next.closed) {
			writes[k] = pt
		}
	}
	if closeBy.IsZero() {
		next.wroteOpen(writes)
		return writes, next
	}
	for k, pt := range merged {
		if p.lastEnd(k).After(next.closed) {
			next.sets[k] = pt
		}
	}
	return writes, next
}

// lastEnd is the end of the last window of k's.
func (p *Processor) lastEnd(k setKey) time.Time {
	return k.win.End.Add(time.Duration(k.n-1) * p.advance(k.kind))
}

// fitCarry encodes next, first moving the windows of as many keys as it
// takes into writes (open, as before the carry) to keep it within
// carryBytes. The keys spilled are the last in order, so a retry spills
// the same.
func (p *Processor) fitCarry(next *shardCarry, writes map[upKey]*partial, spilled map[string]bool) []byte {
	limit := p.carryLimit()
	spill := func(keys map[string]bool) {
		out := map[setKey]*partial{}
		for k, pt := range next.sets {
			if keys[k.key] {
				out[k] = pt
				delete(next.sets, k)
			}
		}
		open := map[upKey]*partial{}
		for k, pt := range windowPartials(out, p.advance) {
			if k.win.End.After(next.closed) {
				writes[k], open[k] = pt, pt
			}
		}
		next.wroteOpen(open)
		for k := range keys {
			spilled[k] = true
		}
	}
	if len(spilled) > 0 {
		spill(spilled)
	}
	data := encodeCarry(next)
	if len(data) <= limit {
		return data
	}
	keys := make([]string, 0, len(next.sets))
	for k := range next.sets {
		keys = append(keys, k.key)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	for len(data) > limit && len(keys) > 0 {
		// Spill in proportion to the excess, a quarter more for the
		// estimate, at least one key.
		n := max(1, len(keys)*(len(data)-limit)/len(data)*5/4)
		these := make(map[string]bool, n)
		for _, k := range keys[len(keys)-min(n, len(keys)):] {
			these[k] = true
		}
		keys = keys[:len(keys)-min(n, len(keys))]
		spill(these)
		data = encodeCarry(next)
	}
	return data
}

// spillParents writes out the carries of shard's parents (a reshard's),
// before shard's first flush writes its own windows: their keys are
// shard's now, and their open windows are in the parents' carries. It
// returns the latest of the parents' itemsBy (windows written open since)
// and of their closed (windows written whole, perhaps in result pages,
// which shard takes as closed: its records of them are late).
func (p *Processor) spillParents(ctx context.Context, shard string) (bounds spilled, err error) {
	if p.shards == nil {
		return spilled{}, nil
	}
	parents, err := p.parentsOf(ctx, shard)
	if err != nil {
		return spilled{}, err
	}
	for _, parent := range parents {
		// Listed under the child: its watermark closes them, and its own
		// records of them wait in its carry until then.
		by, _, err := p.spillCarry(ctx, parent, shard, false)
		if err != nil {
			return spilled{}, err
		}
		bounds.itemsBy, bounds.closed = latest(bounds.itemsBy, by.itemsBy), latest(bounds.closed, by.closed)
	}
	return bounds, nil
}

// parentsOf is shard's parent shards, as Kinesis lists them.
func (p *Processor) parentsOf(ctx context.Context, shard string) ([]string, error) {
	in := &kinesis.ListShardsInput{StreamName: aws.String(p.shardsStream)}
	for {
		out, err := p.shards.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("aggregate: listing the shards of %s for the parents of %s: %w", p.shardsStream, shard, err)
		}
		for _, s := range out.Shards {
			if aws.ToString(s.ShardId) != shard {
				continue
			}
			var parents []string
			for _, id := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
				if aws.ToString(id) != "" {
					parents = append(parents, *id)
				}
			}
			return parents, nil
		}
		if aws.ToString(out.NextToken) == "" {
			return nil, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// spillCarry writes out shard's carry: each partial to its windows, open,
// listed under listShard, and the carry emptied. As the ticker does, it
// stores the carry first with its partials as spilling, then writes them,
// then stores it without them: a flush racing it (a deploy's old and new
// functions at once, a replay on a live version) fails its own store,
// reads the carry again and writes the spilling partials before its own,
// so it never carries what the spill may have written. It returns the
// latest of its chunks' itemsBy, past the windows it wrote, and whether
// it stored any chunk (wrote).
//
// With portable (the pipeline no longer carries), the chunks are stored
// empty in the first format, chunk 0 last (encodePortable).
func (p *Processor) spillCarry(ctx context.Context, shard, listShard string, portable bool) (bounds spilled, wrote bool, err error) {
	for i := range carryChunks {
		chunk := carryChunks - 1 - i
		by, w, err := p.spillChunk(ctx, shard, chunk, listShard, portable, portable)
		if err != nil {
			return spilled{}, false, err
		}
		bounds.itemsBy, bounds.closed, wrote = latest(bounds.itemsBy, by.itemsBy), latest(bounds.closed, by.closed), wrote || w
	}
	return bounds, wrote, nil
}

// spilled is what a carry written out (spillChunk, spillCarry) leaves
// known: its itemsBy, windows ending by it perhaps with items (written
// open), and closed, windows ending by it written whole (perhaps in
// result pages).
type spilled struct{ itemsBy, closed time.Time }

// spillChunk is spillCarry for one chunk of shard's carry; mark marks the
// windows it writes open (windowFlush.markSpills).
func (p *Processor) spillChunk(ctx context.Context, shard string, chunk int, listShard string, portable, mark bool) (bounds spilled, wrote bool, err error) {
	var lastErr error
	for range carryAttempts {
		cur, err := p.loadCarry(ctx, shard, chunk)
		if err != nil {
			return spilled{}, false, err
		}
		if cur.spillTo == "" && len(cur.spilling) > 0 {
			// A whole carry's other keys (loadCarry), listed under the
			// shard the spill lists under: a reshard's child.
			cur.spillTo = listShard
		}
		// Nothing to write out, and, for a portable spill, the chunk
		// absent or stored in the first format already.
		settled := !portable || cur.version == 0 || cur.format == carryFormatNoItemsBy
		if len(cur.sets) == 0 && !cur.pending() && settled {
			return spilled{cur.itemsBy, cur.closed}, false, nil
		}
		if err := p.writePending(ctx, &cur, true); err != nil {
			return spilled{}, false, err
		}
		next := shardCarry{shard: shard, id: cur.id, version: cur.version, fence: cur.fence, closed: cur.closed, itemsBy: cur.itemsBy,
			sets: map[setKey]*partial{}, spilling: cur.sets, spillTo: listShard}
		next.wroteOpen(windowPartials(cur.sets, p.advance))
		if err := p.saveCarry(ctx, &next, encodeCarry(&next)); err != nil {
			if errors.Is(err, state.ErrCarryChanged) {
				lastErr = err
				continue
			}
			return spilled{}, false, err
		}
		if err := p.writePending(ctx, &next, mark); err != nil {
			return spilled{}, false, err // stored as spilling: whoever reads the carry next writes them
		}
		spilt := len(next.spilling)
		next.spilling, next.spillTo = nil, ""
		data := encodeCarry(&next)
		if portable {
			data = encodePortable(&next)
		}
		if err := p.saveCarry(ctx, &next, data); err != nil && !errors.Is(err, state.ErrCarryChanged) {
			return spilled{}, false, err
		}
		p.log.Info("wrote out the windows a shard carried",
			"pipeline", p.cfg.Name, "shard", shard, "chunk", chunk, "listedUnder", listShard, "partials", spilt)
		return spilled{next.itemsBy, next.closed}, true, nil
	}
	return spilled{}, false, fmt.Errorf("aggregate: the carry of %s kept changing while it was written out: %w", carryID(shard, chunk), lastErr)
}

// spillLeftCarry writes out a carry that shard's flushes no longer keep:
// one written before the pipeline's file changed (partitionKeyIsGroupingKey
// dropped, its tumbling and hopping windows removed), whose windows would
// otherwise never be written. A process looks until it finds none.
func (p *Processor) spillLeftCarry(ctx context.Context, shard string) error {
	if p.carries() {
		return nil
	}
	return p.spillOnce(ctx, shard)
}

// spillOnce writes out shard's carry until this process finds it empty:
// the per-batch path's (a mapping moved to flushIntervalSeconds 0 keeps
// the pipeline's file, so carries() cannot tell) and spillLeftCarry's. A
// pass that wrote anything out is followed by another at the next batch,
// flush or tick: a carrying function still running beside this one (the
// deploy that turns the carry off) may have stored a chunk after this
// pass wrote it out, chunk 0 in the first format already.
func (p *Processor) spillOnce(ctx context.Context, shard string) error {
	p.mu.Lock()
	done := p.carryless[shard]
	p.mu.Unlock()
	if done {
		return nil
	}
	_, wrote, err := p.spillCarry(ctx, shard, shard, true)
	if err != nil || wrote {
		return err
	}
	p.mu.Lock()
	p.carryless[shard] = true
	p.mu.Unlock()
	return nil
}

// SpillCarries writes out every shard's carry of the pipeline (each
// partial to its windows, open, listed under its shard) and empties it:
// what a replay calls on a version of the views table before it catches
// that version up from where it got to (package replay). The version is
// not the current one then, so no flush writes its carries meanwhile; and
// the records the catch-up applies again (its margin before that point)
// meet the fences of the windows the carries held, where, left in the
// carry, they would be applied to the windows and carried as well.
func (p *Processor) SpillCarries(ctx context.Context) error {
	if !p.carries() {
		return nil
	}
	carries, err := p.views.Carries(ctx, p.cfg.Name)
	if err != nil {
		return err
	}
	for _, c := range carries {
		shard, chunk := carryOf(c.Shard)
		if _, _, err := p.spillChunk(ctx, shard, chunk, shard, false, true); err != nil {
			return err
		}
	}
	return nil
}

// closeCarried is the ticker's part: the windows shard's carry holds that
// end by until (the shard's watermark, moved by the clock when the shard
// is idle) are written whole and closed, and the carry keeps the rest. It
// returns the windows it published. The carry is stored first, without
// them and with them as closing: a flush that read the carry before
// fails to store its own and reads it again, so it never adds records to
// a window this may have written (its own records of such a window are
// then written alone, late), and one that reads it after writes them
// first. Once written, the carry is stored again without them.
func (p *Processor) closeCarried(ctx context.Context, shard string, until time.Time) (map[state.Ref]bool, error) {
	if !p.carries() {
		return nil, p.spillLeftCarry(ctx, shard)
	}
	if until.IsZero() {
		return nil, nil
	}
	published := map[state.Ref]bool{}
	var errs []error
	for chunk := range carryChunks {
		pub, err := p.closeChunk(ctx, shard, chunk, until)
		if err != nil {
			errs = append(errs, err) // the other chunks close all the same
		}
		for r := range pub {
			published[r] = true
		}
	}
	return published, errors.Join(errs...)
}

// closeChunk is closeCarried for one chunk of shard's carry.
func (p *Processor) closeChunk(ctx context.Context, shard string, chunk int, until time.Time) (map[state.Ref]bool, error) {
	cur, err := p.loadCarry(ctx, shard, chunk)
	if err != nil {
		return nil, err
	}
	if err := p.writePending(ctx, &cur, true); err != nil {
		return nil, err
	}
	if len(cur.sets) == 0 || !until.After(cur.closed) {
		if cur.pending() { // written: store the carry without them
			cur.closing, cur.spilling, cur.spillTo = nil, nil, ""
			if err := p.saveCarry(ctx, &cur, encodeCarry(&cur)); err != nil && !errors.Is(err, state.ErrCarryChanged) {
				return nil, err
			}
		}
		return nil, nil
	}
	writes, next := p.planCarry(&cur, nil, until)
	next.closing = map[setKey]*partial{}
	for k, pt := range writes {
		next.closing[setKey{k, 1}] = pt
	}
	if len(next.closing) == 0 {
		return nil, nil
	}
	data := encodeCarry(&next)
	if cur.format == carryFormatNoPages {
		// Stored with its windows closing as it was read: what writes
		// them after a failure here writes them as this call does, as
		// items of their own (windowFlush.pages).
		data[0] = carryFormatNoPages
	}
	if len(data) > p.carryLimit() {
		// Its windows closing, each a partial of its own, and the rest
		// do not fit: the chunk is written out instead, and its windows
		// close from their listings.
		_, _, err := p.spillChunk(ctx, shard, chunk, shard, false, false)
		return nil, err
	}
	if err := p.saveCarry(ctx, &next, data); err != nil {
		if errors.Is(err, state.ErrCarryChanged) {
			return nil, nil // a flush stored it meanwhile: the next tick
		}
		return nil, err
	}
	published, err := p.flushWindows(ctx, windowFlush{shard: shard, partials: windowPartials(next.closing, p.advance), closeBy: next.closed, freshAfter: cur.freshAfter(), pagedBy: cur.itemsBy, pages: cur.format == carryFormat})
	if err != nil {
		return nil, err // stored as closing: the shard's next flush or tick writes them
	}
	next.closing = nil
	if err := p.saveCarry(ctx, &next, encodeCarry(&next)); err != nil && !errors.Is(err, state.ErrCarryChanged) {
		return nil, err
	}
	return published, nil
}
