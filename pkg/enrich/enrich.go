package enrich

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// recordPutter is the Kinesis call the handler makes.
type recordPutter interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

var _ recordPutter = (*kinesis.Client)(nil)

// Defaults of the tail and cache bounds. The tail is rewritten by every
// batch that applies a change, and DynamoDB charges an update by the item's
// size (1 WCU per KB), so it is kept small: it only has to cover the changes
// a warm instance missed while other instances ran the shard's batches. A
// tail too short for that costs a second read round trip, counted in
// ExtraReadRoundTrips: raise the bounds with WithTailLimits when it grows.
const (
	DefaultTailEntries  = 64
	DefaultTailBytes    = 16 << 10
	DefaultMaxCacheKeys = 200_000
	// maxTailBytes caps WithTailLimits' bytes, so the tail item always
	// fits in DynamoDB's 400 KB.
	maxTailBytes = 256 << 10
)

// keyItemBudget bounds a key item as DynamoDB counts it: below its 400 KB
// (409,600 bytes) with room to spare, and below what stand-ins accept.
const keyItemBudget = 400_000

// writeParallelism bounds the concurrent UpdateItem calls of a batch.
const writeParallelism = 16

// Handler is the enrich function: batches of the events stream in, one
// enriched record per activity event out. It keeps a cache of histories
// across invocations; it is safe for concurrent use.
type Handler struct {
	db        tableAPI
	kin       recordPutter
	table     string
	outStream string
	sink      *setaside.Sink

	metrics      *metrics.Logger
	log          *slog.Logger
	tailEntries  int
	tailBytes    int
	maxCacheKeys int
	maxCacheB    int64 // bytes the shards' caches hold at most, together
	backoff      func(attempt int) time.Duration

	mu    sync.Mutex
	cache map[string]*shardCache

	stats counters

	ledger          *dedupe.Ledger // claims of activity event ids; nil: none suppressed
	dups, conflicts atomic.Int64
}

// shardCache is what an instance knows of one shard: every applied change
// up to pos for the keys it holds (an empty history: the key had none), and
// enough history to answer "as of" any position at or after floor.
type shardCache struct {
	floor, pos string // fenced
	keys       map[string]history
	bytes      int64 // what keys take in memory, about (historyBytes)
}

// set stores key's history h, fresh (not sharing an array with the one it
// replaces), keeping bytes.
func (sc *shardCache) set(key string, h history) {
	if old, ok := sc.keys[key]; ok {
		sc.bytes -= historyBytes(key, old)
	}
	sc.keys[key] = h
	sc.bytes += historyBytes(key, h)
}

// replace stores key's history h, changed in place from one that took
// before bytes (historyBytes before the change), keeping bytes.
func (sc *shardCache) replace(key string, h history, before int64) {
	sc.keys[key] = h
	sc.bytes += historyBytes(key, h) - before
}

// Memory a cached history takes besides its strings' bytes: the map entry
// and slice header of a key, and the three headers of a change.
const (
	cachedKeyOverhead    = 80
	cachedChangeOverhead = 56
)

// historyBytes is about what key's history h takes in the cache.
func historyBytes(key string, h history) int64 {
	n := int64(len(key) + cachedKeyOverhead)
	for _, c := range h {
		n += int64(len(c.seq) + len(c.version) + len(c.image) + cachedChangeOverhead)
	}
	return n
}

// CacheBytesFor is what the shards' caches of a function of memoryMB hold
// at most: a quarter of its memory (the dedupe ledger's cache takes
// another, dedupe.CacheEntriesFor, and the heap grows to twice what is
// live between collections).
func CacheBytesFor(memoryMB int) int64 { return int64(memoryMB) << 20 / 4 }

// defaultCacheBytes is CacheBytesFor the running Lambda function's memory,
// or for 256 MB (the enrich function's) outside Lambda.
func defaultCacheBytes() int64 {
	if mb, err := strconv.Atoi(os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")); err == nil && mb > 0 {
		return CacheBytesFor(mb)
	}
	return CacheBytesFor(256)
}

// Option configures a Handler.
type Option func(*Handler)

// WithMetrics emits the batch's counters (see Stats) as EMF after each batch.
func WithMetrics(m *metrics.Logger) Option { return func(h *Handler) { h.metrics = m } }

// WithLogger logs bad records and failed writes.
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithTailLimits bounds the shard tail item: at most entries changes and
// about bytes bytes (at most 256 KiB, so the item fits DynamoDB's 400 KB).
func WithTailLimits(entries, bytes int) Option {
	return func(h *Handler) { h.tailEntries, h.tailBytes = entries, min(bytes, maxTailBytes) }
}

// WithSetAside is where records that can never be joined go (the
// quarantine table). Without it such a record is reported as the batch
// item failure, as a transient error is, and nothing is lost.
func WithSetAside(s *setaside.Sink) Option { return func(h *Handler) { h.sink = s } }

// WithMaxCacheKeys bounds the keys an instance caches per shard; beyond it
// the shard's cache starts afresh.
func WithMaxCacheKeys(n int) Option { return func(h *Handler) { h.maxCacheKeys = n } }

// WithMaxCacheBytes bounds the memory the instance's caches of all shards
// take together (default: CacheBytesFor the function's memory,
// AWS_LAMBDA_FUNCTION_MEMORY_SIZE): keys are bounded, profiles are not
// (up to 128 KiB each), and an instance keeps the caches of every shard
// it ran. A shard's cache over it starts afresh; the other shards' caches
// are dropped to make room for the one just used. A dropped cache costs
// reads of the table, never a stale join.
func WithMaxCacheBytes(n int64) Option { return func(h *Handler) { h.maxCacheB = n } }

// WithBackoff sets the wait before retry attempt+1 of unprocessed reads and
// failed output records (tests make it short).
func WithBackoff(f func(attempt int) time.Duration) Option { return func(h *Handler) { h.backoff = f } }

// New returns a Handler keeping its state in the DynamoDB table named table
// (partition key "pk", a string) and writing enriched records to the
// Kinesis stream named outStream.
func New(db tableAPI, kin recordPutter, table, outStream string, opts ...Option) *Handler {
	h := &Handler{db: db, kin: kin, table: table, outStream: outStream,
		log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		tailEntries: DefaultTailEntries, tailBytes: DefaultTailBytes, maxCacheKeys: DefaultMaxCacheKeys, maxCacheB: defaultCacheBytes(),
		backoff: func(attempt int) time.Duration { return time.Duration(25<<min(attempt, 6)) * time.Millisecond },
		cache:   map[string]*shardCache{}}
	for _, o := range opts {
		o(h)
	}
	return h
}

func (h *Handler) sleep(ctx context.Context, attempt int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(h.backoff(attempt)):
		return nil
	}
}

// Stats are a Handler's counters since it was built, the same values it
// emits as metrics per batch.
type Stats struct {
	RecordsIn      int64 // records received
	BadRecords     int64 // records that can never be joined: set aside, or reported when they could not be
	ChangesApplied int64 // changelog records that raised a key's version
	ChangesSkipped int64 // changelog records at or below the version held (duplicates, late retries)
	Enriched       int64 // enriched records written
	CacheHits      int64 // keys of a batch served from the cache
	CacheMisses    int64 // keys of a batch read from the table
	ReadRoundTrips int64 // BatchGetItem round trips (concurrent chunks count once)
	// ExtraReadRoundTrips counts the second round trip of a batch whose
	// cache was older than the shard's tail reaches back.
	ExtraReadRoundTrips int64
	ReadRequests        int64 // BatchGetItem calls, chunks and retries included
	ItemsRead           int64 // items BatchGetItem returned
	TailCatchUps        int64 // batches whose cache caught up from the tail
	KeyWrites           int64 // UpdateItem calls on key items
	TailWrites          int64 // UpdateItem calls on tail items
	OutputRetries       int64 // PutRecords retries of failed entries
	Superseded          int64 // batches refused because a later batch already wrote
	FailedBatches       int64 // batches that reported a failure other than a bad record
	// KeyBudgetCheckpoints counts batches ended early, at a change whose
	// key item would have outgrown its budget: Lambda resumes there.
	KeyBudgetCheckpoints int64
}

type counters struct {
	RecordsIn, BadRecords, ChangesApplied, ChangesSkipped, Enriched, CacheHits, CacheMisses, ReadRoundTrips,
	ExtraReadRoundTrips, ReadRequests, ItemsRead, TailCatchUps, KeyWrites, TailWrites, OutputRetries, Superseded,
	FailedBatches, KeyBudgetCheckpoints atomic.Int64
}

// Stats returns the counters so far.
func (h *Handler) Stats() Stats {
	c := &h.stats
	return Stats{c.RecordsIn.Load(), c.BadRecords.Load(), c.ChangesApplied.Load(), c.ChangesSkipped.Load(),
		c.Enriched.Load(), c.CacheHits.Load(), c.CacheMisses.Load(), c.ReadRoundTrips.Load(),
		c.ExtraReadRoundTrips.Load(), c.ReadRequests.Load(), c.ItemsRead.Load(), c.TailCatchUps.Load(),
		c.KeyWrites.Load(), c.TailWrites.Load(), c.OutputRetries.Load(), c.Superseded.Load(), c.FailedBatches.Load(),
		c.KeyBudgetCheckpoints.Load()}
}

func (s Stats) sub(o Stats) Stats {
	return Stats{s.RecordsIn - o.RecordsIn, s.BadRecords - o.BadRecords, s.ChangesApplied - o.ChangesApplied,
		s.ChangesSkipped - o.ChangesSkipped, s.Enriched - o.Enriched, s.CacheHits - o.CacheHits,
		s.CacheMisses - o.CacheMisses, s.ReadRoundTrips - o.ReadRoundTrips, s.ExtraReadRoundTrips - o.ExtraReadRoundTrips,
		s.ReadRequests - o.ReadRequests, s.ItemsRead - o.ItemsRead, s.TailCatchUps - o.TailCatchUps,
		s.KeyWrites - o.KeyWrites, s.TailWrites - o.TailWrites, s.OutputRetries - o.OutputRetries,
		s.Superseded - o.Superseded, s.FailedBatches - o.FailedBatches, s.KeyBudgetCheckpoints - o.KeyBudgetCheckpoints}
}

// Handle joins one batch of one shard. A record that can never be joined —
// not an envelope, a changelog record without key or version, a profile
// image over MaxImageBytes, an enriched record over Kinesis' 1 MiB — is set
// aside (kept in the quarantine table with the field at fault) and the
// batch goes on without it; changelog records update the key's profile by
// the version rule, and every other record is activity, written to the
// output stream joined with the profile as of its position. A failed read
// or state write reports the first record (the whole batch is
// redelivered); failed output records report the lowest of them; a change
// whose key item would outgrow its budget ends the batch there (reported,
// so Lambda resumes from it with a history cut down to what it needs).
func (h *Handler) Handle(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	if err := stream.CheckKinesisEvent(&ev); err != nil {
		return events.KinesisEventResponse{}, fmt.Errorf("enrich: %w", err)
	}
	before := h.Stats()
	dups, conflicts := h.dups.Load(), h.conflicts.Load()
	var failures batch.StreamFailures
	if i := h.handle(ctx, ev.Records); i < len(ev.Records) {
		failures.Add(ev.Records[i].Kinesis.SequenceNumber)
	}
	h.emitDedupe(h.dups.Load()-dups, h.conflicts.Load()-conflicts)
	h.emit(h.Stats().sub(before))
	return failures.Kinesis(), nil
}

// handle processes recs and returns the index of the record to report as
// failed, len(recs) when none.
func (h *Handler) handle(ctx context.Context, recs []events.KinesisEventRecord) int {
	if len(recs) == 0 {
		return 0
	}
	h.stats.RecordsIn.Add(int64(len(recs)))
	shard := ""
	for i := range recs {
		if s, err := shardOf(&recs[i]); err == nil {
			shard = s
			break
		}
	}
	ps := make([]parsed, 0, len(recs))
	var aside []setaside.Record
	var asideAt []int
	for i := range recs {
		p, err := parse(&recs[i])
		if err == nil {
			if s, serr := shardOf(&recs[i]); serr != nil {
				err = serr
			} else if s != shard {
				err = &RecordError{SequenceNumber: recs[i].Kinesis.SequenceNumber, Field: "eventID", Kind: setaside.KindInvalid,
					Reason: "is in shard " + s + " but the batch started in shard " + shard + ": a batch is one shard's"}
			}
		}
		if err != nil {
			h.bad(ctx, err)
			aside, asideAt = append(aside, asideRecord(&recs[i], err)), append(asideAt, i)
			continue
		}
		p.idx = i
		ps = append(ps, p)
	}
	stop := len(recs)
	if err := h.sink.SetAside(ctx, aside); err != nil {
		// Transient (or no quarantine table): the first of them is reported
		// and only the records before it are joined.
		h.log.ErrorContext(ctx, "records not set aside; they will be retried", "records", len(aside), "error", err)
		stop = asideAt[0]
		for j := range ps {
			if ps[j].idx >= stop {
				ps = ps[:j]
				break
			}
		}
	}
	ps, conflicts, retryFrom, err := h.screenCopies(ctx, shard, ps)
	if err != nil {
		h.log.ErrorContext(ctx, "judging copies failed; the batch will be retried", "error", err)
		return 0
	}
	if retryFrom >= 0 {
		stop = min(stop, retryFrom)
	}
	if err := h.sink.SetAside(ctx, conflicts); err != nil {
		h.log.ErrorContext(ctx, "records not set aside; they will be retried", "records", len(conflicts), "error", err)
		for _, c := range conflicts {
			for i := range recs {
				if recs[i].Kinesis.SequenceNumber == c.Sequence {
					stop = min(stop, i)
				}
			}
		}
	}
	for j := range ps {
		if ps[j].idx >= stop {
			ps = ps[:j]
			break
		}
	}
	if len(ps) == 0 {
		return stop
	}
	ctx, cancel := batch.Reserve(ctx, time.Second)
	defer cancel()
	i, ok := h.join(ctx, shard, ps)
	if !ok {
		h.stats.FailedBatches.Add(1)
	}
	if i < len(ps) {
		return min(ps[i].idx, stop)
	}
	return stop
}

// asideRecord is the set-aside record of rec, which err says cannot be
// joined.
func asideRecord(rec *events.KinesisEventRecord, err error) setaside.Record {
	r := setaside.FromKinesis(rec)
	r.Kind, r.Reason = setaside.KindInvalid, err.Error()
	var re *RecordError
	if errors.As(err, &re) {
		r.Field, r.Reason = re.Field, re.Reason
		if re.Kind != "" {
			r.Kind = re.Kind
		}
	}
	return r
}

func (h *Handler) bad(ctx context.Context, err error) {
	h.stats.BadRecords.Add(1)
	h.log.ErrorContext(ctx, "record cannot be joined", "error", err)
}

// curState is a key's profile while a batch is walked.
type curState struct {
	c     change
	found bool
}

// join runs the read, the join, the state writes and the output of ps. It
// returns the index of the record to report (len(ps) when none) and false
// when that is for a failed read or write rather than a bad record.
func (h *Handler) join(ctx context.Context, shard string, ps []parsed) (int, bool) {
	first, last := ps[0].seq, ps[len(ps)-1].seq
	sc := h.takeCache(shard)
	if sc != nil && sc.floor > first {
		sc = nil // a redelivery from before what the cache can answer
	}
	var keys []string
	seenKey := map[string]bool{}
	for i := range ps {
		if !seenKey[ps[i].key] {
			seenKey[ps[i].key] = true
			keys = append(keys, ps[i].key)
		}
	}
	var need, fromCache []string
	for _, k := range keys {
		if sc != nil {
			if _, ok := sc.keys[k]; ok {
				fromCache = append(fromCache, k)
				continue
			}
		}
		need = append(need, k)
	}
	rr, err := h.countedRead(ctx, shard, need, true)
	if err != nil {
		h.log.ErrorContext(ctx, "reading the join state", "shard", shard, "error", err)
		h.putCache(shard, sc)
		return 0, false
	}
	if sc != nil && sc.pos < first {
		if rr.tail.from > sc.pos {
			// The cache is older than the tail reaches back: read the
			// keys it would have served.
			h.stats.ExtraReadRoundTrips.Add(1)
			sc = nil
			more, err := h.countedRead(ctx, shard, fromCache, false)
			if err != nil {
				h.log.ErrorContext(ctx, "reading the join state", "shard", shard, "error", err)
				return 0, false
			}
			for k, v := range more.keys {
				rr.keys[k] = v
			}
			need, fromCache = keys, nil
		} else {
			h.stats.TailCatchUps.Add(1)
			for _, c := range rr.tail.changes {
				if c.seq <= sc.pos || c.seq >= first {
					continue
				}
				if hist, ok := sc.keys[c.key]; ok {
					before := historyBytes(c.key, hist)
					hist.add(c.change)
					hist.prune(first)
					sc.replace(c.key, hist, before)
				}
			}
		}
	}
	for k, it := range rr.keys {
		if it.floor > first {
			h.stats.Superseded.Add(1)
			h.log.ErrorContext(ctx, "stale delivery", "shard", shard, "key", k, "firstSequenceNumber", ps[0].rawSeq, "error", ErrSuperseded)
			return 0, false
		}
	}
	h.stats.CacheHits.Add(int64(len(fromCache)))
	h.stats.CacheMisses.Add(int64(len(need)))
	if sc == nil {
		sc = &shardCache{keys: make(map[string]history, len(keys))}
	}
	for k, it := range rr.keys {
		sc.set(k, it.hist)
	}

	// Walk the batch in order.
	cur := make(map[string]curState, len(keys))
	added := map[string][]change{}
	items := map[string]*projectedItem{} // the key items as the batch's changes grow them
	var tailAdded []tailChange
	entries := make([]kintypes.PutRecordsRequestEntry, 0, len(ps))
	entryRec := make([]int, 0, len(ps))
	stopAt := len(ps)
	stopFailed := false // stopAt is a record that could not be set aside
	for i := range ps {
		p := &ps[i]
		st, ok := cur[p.key]
		if !ok {
			st.c, st.found = sc.keys[p.key].asOf(first)
		}
		if p.isChange {
			if !st.found || newer(p.ch.version, st.c.version) {
				item := items[p.key]
				if item == nil {
					item = newProjectedItem(p.key, first, sc.keys[p.key])
					items[p.key] = item
				}
				if n := item.with(p.ch); n > keyItemBudget && i > 0 {
					// The key item cannot hold this change with the ones
					// before it in the batch: end the batch here. Lambda
					// resumes from this change, and a batch starting at it
					// keeps only the one version before it.
					h.stats.KeyBudgetCheckpoints.Add(1)
					h.log.InfoContext(ctx, "key item budget reached: the batch ends before this change, Lambda resumes from it",
						"shard", shard, "key", p.key, "sequenceNumber", p.rawSeq, "keyItemBytes", n, "budget", keyItemBudget)
					stopAt = i
					break
				}
				st = curState{c: p.ch, found: true}
				item.add(p.ch)
				added[p.key] = append(added[p.key], p.ch)
				tailAdded = append(tailAdded, tailChange{key: p.key, change: p.ch})
				h.stats.ChangesApplied.Add(1)
			} else {
				h.stats.ChangesSkipped.Add(1)
			}
			cur[p.key] = st
			continue
		}
		cur[p.key] = st
		e, err := enrichedRecord(shard, p, st.c, st.found)
		if err != nil {
			// Too big for Kinesis with its profile: set aside, the batch
			// goes on. If it cannot be set aside, the records before it
			// go on and it is reported.
			h.bad(ctx, err)
			if serr := h.sink.SetAside(ctx, []setaside.Record{asideRecord(p.rec, err)}); serr != nil {
				h.log.ErrorContext(ctx, "record not set aside; it will be retried", "sequenceNumber", p.rawSeq, "error", serr)
				stopAt, stopFailed = i, true
				break
			}
			continue
		}
		entries = append(entries, e)
		entryRec = append(entryRec, i)
	}
	if stopAt == 0 {
		h.putCache(shard, sc) // unchanged but for the histories read
		return 0, !stopFailed
	}
	last = ps[stopAt-1].seq

	// State first: a crash after it is recomputed the same from the table.
	dropped := map[string][]string{}
	for k, chs := range added {
		hist := sc.keys[k]
		before := historyBytes(k, hist)
		for _, c := range chs {
			hist.add(c)
		}
		dropped[k] = hist.prune(first)
		sc.replace(k, hist, before)
	}
	sc.floor, sc.pos = first, last
	h.putCache(shard, sc)
	if err := h.writeState(ctx, shard, first, last, rr.tail, added, dropped, tailAdded); err != nil {
		if errors.Is(err, ErrSuperseded) {
			h.stats.Superseded.Add(1)
		}
		h.log.ErrorContext(ctx, "writing the join state", "shard", shard, "error", err)
		return 0, false
	}
	lowest, retries, err := h.put(ctx, entries)
	h.stats.OutputRetries.Add(int64(retries))
	if err != nil {
		h.log.ErrorContext(ctx, "writing enriched records", "stream", h.outStream, "error", err)
		h.stats.Enriched.Add(int64(lowest)) // a lower bound: entries before the lowest failed
		return entryRec[lowest], false
	}
	h.stats.Enriched.Add(int64(len(entries)))
	return stopAt, !stopFailed
}

// countedRead is read, counted.
func (h *Handler) countedRead(ctx context.Context, shard string, keys []string, withTail bool) (readResult, error) {
	if len(keys) == 0 && !withTail {
		return readResult{keys: map[string]keyItem{}}, nil
	}
	h.stats.ReadRoundTrips.Add(1)
	n := len(keys)
	if withTail {
		n++
	}
	rr, err := h.read(ctx, shard, keys, withTail)
	h.stats.ReadRequests.Add(int64((n+maxBatchGet-1)/maxBatchGet + rr.retries))
	h.stats.ItemsRead.Add(int64(rr.items))
	return rr, err
}

// writeState writes the keys' applied changes (concurrently) and the
// shard's tail.
func (h *Handler) writeState(ctx context.Context, shard, first, last string, t tail, added map[string][]change, dropped map[string][]string, tailAdded []tailChange) error {
	if len(added) == 0 {
		return nil
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, writeParallelism)
	)
	for k, chs := range added {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			n, err := h.writeKey(ctx, k, first, chs, dropped[k])
			h.stats.KeyWrites.Add(int64(n))
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	h.stats.TailWrites.Add(1)
	_, err := h.writeTail(ctx, shard, h.extendTail(t, tailAdded, last))
	return err
}

// takeCache removes and returns the shard's cache (nil when none), so a
// concurrent invocation on the same shard does not share it.
func (h *Handler) takeCache(shard string) *shardCache {
	h.mu.Lock()
	defer h.mu.Unlock()
	sc := h.cache[shard]
	delete(h.cache, shard)
	return sc
}

// putCache stores the shard's cache (nil forgets it), starting afresh when
// it holds more keys or bytes than allowed, and drops other shards' caches
// (those of shards the instance no longer runs, say) until all of them
// fit the bytes allowed.
func (h *Handler) putCache(shard string, sc *shardCache) {
	if sc == nil || len(sc.keys) > h.maxCacheKeys || sc.bytes > h.maxCacheB {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	total := sc.bytes
	for _, o := range h.cache {
		total += o.bytes
	}
	for s, o := range h.cache {
		if total <= h.maxCacheB {
			break
		}
		delete(h.cache, s)
		total -= o.bytes
	}
	h.cache[shard] = sc
}

func (h *Handler) emit(s Stats) {
	if h.metrics == nil {
		return
	}
	for _, m := range []struct {
		name string
		v    int64
	}{
		{"RecordsIn", s.RecordsIn}, {"BadRecords", s.BadRecords}, {"ChangesApplied", s.ChangesApplied},
		{"ChangesSkipped", s.ChangesSkipped}, {"Enriched", s.Enriched}, {"CacheHits", s.CacheHits},
		{"CacheMisses", s.CacheMisses}, {"ReadRoundTrips", s.ReadRoundTrips}, {"ExtraReadRoundTrips", s.ExtraReadRoundTrips},
		{"ReadRequests", s.ReadRequests}, {"ItemsRead", s.ItemsRead}, {"TailCatchUps", s.TailCatchUps},
		{"KeyWrites", s.KeyWrites}, {"TailWrites", s.TailWrites}, {"OutputRetries", s.OutputRetries},
		{"Superseded", s.Superseded}, {"FailedBatches", s.FailedBatches}, {"KeyBudgetCheckpoints", s.KeyBudgetCheckpoints},
		{setaside.Metric, 0}, // declared: the sink adds the records it set aside
	} {
		h.metrics.Add(m.name, metrics.Count, float64(m.v))
	}
	if err := h.metrics.Flush(); err != nil {
		h.log.Warn("flushing metrics", "error", err)
	}
}
