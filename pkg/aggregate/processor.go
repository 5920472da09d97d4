package aggregate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/backlog"
	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
	"github.com/tributary-dev/tributary/pkg/window"
)

// Processor runs one declared pipeline. Build it with New; it is safe for
// concurrent use (Lambda may run one per shard in a process only with
// ParallelizationFactor, but tests do).
type Processor struct {
	cfg         *pipeline.Config
	views       *state.Views
	out         RecordPutter
	streamName  string
	metrics     *metrics.Logger
	log         *slog.Logger
	now         func() time.Time
	concurrency int
	// sessionFoldBytes is the size of a session state's points past which
	// its runs are held as their aggregates (sessionfold.go).
	sessionFoldBytes int

	mu    sync.Mutex
	marks map[string]*window.Watermark // per shard: the last fully processed batch's watermark
	// through is, per shard, the last record whose effects this process
	// committed with the watermark (state.Views.CommitWatermark).
	through map[string]string
	loaded  bool
	keyed   map[keyedCacheRef]state.KeyedState // warm copies of keyed window states (rememberKeyed)
	// overflowKept are copies of the interval overflow items this
	// process wrote or read (keepOverflow), by shard and name.
	overflowKept      map[string]overflowPart
	overflowKeptBytes int
	// carriedBudgetMax, when not zero, caps carriedBudget
	// (WithCarriedBudget).
	carriedBudgetMax int
	// keyedBytes is what keyed holds (keyedEntryBytes), at most
	// keyedCacheMax once rememberKeyed returns.
	keyedBytes, keyedCacheMax int
	keyedTable                string // the views table the copies are of (keptKeyed)
	// unfinalized marks shards whose last finalize failed: the next batch
	// finalizes again even if its watermark does not move.
	unfinalized map[string]bool

	ledger  *dedupe.Ledger // claims of event ids; nil: no suppression by id
	backlog backlog.Reader // the ticker's view of records not yet processed; nil: none
	sink    *setaside.Sink // where records that can never be applied go

	batches sync.Pool // *stream.KinesisBatch, reused across invocations
	// handover: the version of the views table before this one, asked
	// before publishing (WithHandover; nil: not asked).
	handover *handover
	kinds    []string // cfg.Windows[i].ID(), made once: routing needs it per record

	// shards and shardsStream: where a new shard's first flush finds its
	// parents (WithShardLister); carryBytes bounds a shard's carry
	// (WithCarryBytes; 0: state.MaxCarryBytes). carry.go.
	shards       ShardLister
	shardsStream string
	carryBytes   int
	// carryless: shards whose carry this process found empty or wrote
	// out, the pipeline keeping none (spillLeftCarry).
	carryless map[string]bool
	// pagedThrough: per shard, the last record a carried flush may have
	// written in result pages (state.Views.PagedThrough, read once a
	// process), for the writes of code that keeps no carry: a record at
	// or below it may have its windows in a page a flush wrote before it
	// died, the carry not saying so (state.Update.Paged).
	pagedThrough map[string]string
}

// Option configures a Processor.
type Option func(*Processor)

// WithMetrics sets where EMF metrics go (nil: nowhere).
func WithMetrics(m *metrics.Logger) Option { return func(p *Processor) { p.metrics = m } }

// WithLogger sets the structured logger.
func WithLogger(l *slog.Logger) Option { return func(p *Processor) { p.log = l } }

// WithClock sets processing time (the ticker's idle advance uses it).
func WithClock(now func() time.Time) Option { return func(p *Processor) { p.now = now } }

// WithDedupe suppresses producer duplicates by event id with ledger (see
// package dedupe); without it only Lambda's redeliveries are deduplicated.
// NewLedger builds the ledger a pipeline keeps in its views table.
func WithDedupe(ledger *dedupe.Ledger) Option { return func(p *Processor) { p.ledger = ledger } }

// WithBacklog has the ticker ask b, before it advances an idle shard by
// processing time, whether the shard still holds records the function has
// not processed (a function failing, throttled or redeploying for longer
// than idleTimeout): the advance then stops idleTimeout + outOfOrderness
// before the first such record arrived, so those records are not late when
// they are applied. Without it the ticker advances by the clock alone.
func WithBacklog(b backlog.Reader) Option { return func(p *Processor) { p.backlog = b } }

// DefaultConcurrency is how many DynamoDB requests a processor has in
// flight at once unless WithConcurrency says otherwise. A flush or a batch
// waits on its writes, not on CPU: at a few milliseconds a request, 16 in
// flight kept one instance at 2.25 times a full shard on the per-interval
// path and 64 at 5.4 times (BENCH keepup, the SDK's CPU per request
// included). Functions keep as many idle connections per endpoint
// (lambdamain.IdleConnsPerHost), so a burst reuses them.
const DefaultConcurrency = 64

// WithConcurrency bounds concurrent DynamoDB requests (default DefaultConcurrency).
func WithConcurrency(n int) Option { return func(p *Processor) { p.concurrency = max(1, n) } }

// WithKeyedCacheBytes bounds the copies of keyed states (session and
// sliding windows) a warm process keeps to about n bytes
// (defaultKeyedCacheBytes when not given).
func WithKeyedCacheBytes(n int) Option { return func(p *Processor) { p.keyedCacheMax = max(1, n) } }

// WithCarriedBudget caps the bytes of window state an interval's claims,
// and its points, may each take (carriedBudget) before they are written as
// overflow items: a test's way to make a few records outgrow the state.
func WithCarriedBudget(n int) Option { return func(p *Processor) { p.carriedBudgetMax = max(0, n) } }

// CheckSupported refuses what the aggregate function cannot keep exactly
// once, naming the window: session and sliding windows are computed from
// each key's buffered records, which needs every record of a key on one
// shard.
func CheckSupported(cfg *pipeline.Config) error { return cfg.CheckKeyedWindows() }

// New returns a processor for cfg writing to views and, when out is not nil,
// emitting final results and corrections to the stream named streamName.
func New(cfg *pipeline.Config, views *state.Views, out RecordPutter, streamName string, opts ...Option) *Processor {
	p := &Processor{
		cfg: cfg, views: views, out: out, streamName: streamName,
		log: slog.Default(), now: time.Now, concurrency: DefaultConcurrency,
		sessionFoldBytes: DefaultSessionFoldBytes,
		marks:            map[string]*window.Watermark{},
		through:          map[string]string{},
		keyed:            map[keyedCacheRef]state.KeyedState{},
		keyedCacheMax:    defaultKeyedCacheBytes(),

		unfinalized:  map[string]bool{},
		carryless:    map[string]bool{},
		pagedThrough: map[string]string{},
	}
	p.batches.New = func() any { return new(stream.KinesisBatch) }
	for _, w := range cfg.Windows {
		p.kinds = append(p.kinds, w.ID())
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Handle decodes a raw Lambda event and handles it (see Invoke); it returns
// the encoded response.
func (p *Processor) Handle(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
	return p.Invoke(ctx, raw)
}

// Invoke is the Lambda entry point, as lambda.Start(p) calls it with the
// bytes the runtime received: a Kinesis event (per-batch path) or a Kinesis
// tumbling-window event (per-interval path), told apart by its window,
// decoded in one pass into a reused batch; the response is encoded as the
// runtime would encode it.
func (p *Processor) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	b := p.batches.Get().(*stream.KinesisBatch)
	defer p.batches.Put(b)
	if err := b.Decode(payload); err != nil {
		return nil, fmt.Errorf("aggregate: %w", err)
	}
	if err := stream.CheckKinesisBatch(b, payload); err != nil {
		return nil, fmt.Errorf("aggregate: %w", err)
	}
	if err := checkRecords(b.Records); err != nil {
		return nil, fmt.Errorf("aggregate: kinesis event: %w", err)
	}
	if b.TimeWindow {
		resp, err := p.handleInterval(ctx, b.Records, &b.TimeWindowProperties)
		if err != nil {
			return nil, err
		}
		return stream.AppendKinesisTimeWindowEventResponse(nil, &resp), nil
	}
	resp, err := p.handleBatch(ctx, b.Records)
	if err != nil {
		return nil, err
	}
	return stream.AppendKinesisEventResponse(nil, &resp), nil
}

// maxSeqDigits is the longest sequence number a window's fence takes
// (package state pads them to this width).
const maxSeqDigits = 64

// checkRecords refuses an event whose records lack what Lambda always
// sends and the windows need: a sequence number of decimal digits (the
// eventID naming the shard is stream.CheckKinesisBatch's).
// Only a hand-made event (the console's Test tab) lacks them; the error
// names the record and the field, where the batch used to come back
// failed from an empty item identifier with the reason only in the log.
func checkRecords(recs []stream.KinesisRecord) error {
	for i := range recs {
		r := &recs[i]
		seq := r.SequenceNumber
		ok := isSequenceNumber(seq)
		switch {
		case seq == "":
			return fmt.Errorf("Records[%d].kinesis.sequenceNumber: is missing: Lambda sends every record's (1 to %d decimal digits)", i, maxSeqDigits)
		case !ok:
			return fmt.Errorf("Records[%d].kinesis.sequenceNumber: %s is not a Kinesis sequence number (1 to %d decimal digits)", i, strictjson.QuoteCut(seq, 80), maxSeqDigits)
		}
	}
	return nil
}

// isSequenceNumber reports whether seq is 1 to maxSeqDigits decimal digits,
// as a Kinesis sequence number is.
func isSequenceNumber(seq string) bool {
	ok := seq != "" && len(seq) <= maxSeqDigits
	for j := 0; ok && j < len(seq); j++ {
		ok = seq[j] >= '0' && seq[j] <= '9'
	}
	return ok
}

// records converts aws-lambda-go's records for the handlers.
func records(evs []events.KinesisEventRecord) []stream.KinesisRecord {
	out := make([]stream.KinesisRecord, len(evs))
	for i := range evs {
		out[i] = stream.RecordFromEvent(&evs[i])
	}
	return out
}

// upKey identifies one (key, window kind, window) within a batch.
type upKey struct {
	key, kind string
	win       window.Window
}

// collector sorts a batch's records into per-(key, window) updates.
type collector struct {
	p       *Processor
	shard   string
	wm      *window.Watermark
	updates map[upKey]int  // index into ups
	ups     []state.Update // one per (key, window), in the order first met
	entries []state.Entry  // where ups' first entries are carved from (addEntry)
	openIn  string         // p.openIn(shard)
	// pagedThrough: records at or below it may have their windows in
	// result pages (Processor.pagedThrough; "": none).
	pagedThrough string
	failures     batch.StreamFailures
	late         map[string]struct{} // sequence numbers of records dropped as late from at least one window
	again        map[string]struct{} // sequence numbers of records the ledger knows as redelivered (see dropLate)
	poison       int
	filtered     int
	in           int
	env          stream.Envelope
	wins         []window.Window
	decision     window.Decision
	maxSeq       string
	onOpen       func(k upKey, seq string, value float64, distinct []byte)
	onCorrected  func(k upKey, seq string, value float64, distinct []byte)
	// onWindows, when set, takes each record's decision for a window kind
	// at once instead of onOpen and onCorrected per window (the
	// per-interval path keeps one partial per set of windows).
	onWindows func(key, kind, seq string, value float64, distinct []byte, d *window.Decision)
	keyed     map[keyedKey][]point // session and sliding windows' records, per key and kind
	// carriedPerKey is, per grouping key, the points an interval carries
	// to its flush and no keyed state holds yet (the budget counts them).
	carriedPerKey map[string]int
	// carried are those points, for the budget of a session state, whose
	// runs a fold holds as their aggregates (sessionFits).
	carried carried
	// lateCounted are carried records an earlier invocation already
	// counted in LateDropped or knew as redelivered.
	lateCounted map[string]struct{}
	// closeBy is the watermark the invocation commits once its writes
	// succeed, when it is known before them (an interval's flush): folds
	// record the keyed windows that end by it (foldKeyed).
	closeBy time.Time

	decoded  []decoded
	cands    []dedupe.Candidate // one per decoded record when the pipeline dedupes by id
	ids      []string           // the event id of each candidate, for logs
	verdicts []dedupe.Verdict
	aside    []setaside.Record // records that can never be applied
}

func (p *Processor) newCollector(shard string, wm *window.Watermark, records int) *collector {
	c := &collector{p: p, shard: shard, wm: wm, openIn: p.openIn(shard),
		decoded: make([]decoded, 0, records)}
	if p.ledger != nil {
		c.cands = make([]dedupe.Candidate, 0, records)
		c.ids = make([]string, 0, records)
	}
	c.onOpen = c.addEntry
	// A record for a final window (correct policy) joins the same update as
	// the item's on-time records: one write per item per batch keeps the
	// fence's "applied is a prefix" invariant, and the store applies the
	// whole update as a correction if it finds the window final.
	c.onCorrected = c.addEntry
	if p.pages() {
		// A per-interval flush before the mapping moved to per batch may
		// have closed the windows of the batch's records up to its
		// pagedThrough in a page (its final invocation failing after, and
		// sent here again as batches); and a final window of a pipeline
		// that keeps carries may be in one (state.Update.Paged).
		c.pagedThrough = p.knownPagedThrough(shard)
		if c.pagedThrough != "" {
			c.onOpen, c.onCorrected = c.addMaybePagedEntry, c.addMaybePagedEntry
		}
		if p.carries() {
			c.onCorrected = c.addPagedEntry
		}
	}
	return c
}

// addPagedEntry is addEntry for a record of a final window that may be in
// a result page.
func (c *collector) addPagedEntry(k upKey, seq string, value float64, distinct []byte) {
	c.addEntry(k, seq, value, distinct)
	c.ups[c.updates[k]].Paged = true
}

// addMaybePagedEntry is addEntry for a record whose windows a carried
// flush may have closed in a result page: one at or below pagedThrough.
func (c *collector) addMaybePagedEntry(k upKey, seq string, value float64, distinct []byte) {
	c.addEntry(k, seq, value, distinct)
	if state.SeqAtOrBelow(seq, c.pagedThrough) {
		c.ups[c.updates[k]].Paged = true
	}
}

func (c *collector) addEntry(k upKey, seq string, value float64, distinct []byte) {
	i, ok := c.updates[k]
	if !ok {
		if c.updates == nil {
			c.updates = make(map[upKey]int, min(len(c.decoded)*len(c.p.kinds), maxUpdatesHint))
			c.ups = make([]state.Update, 0, min(len(c.decoded)*len(c.p.kinds), maxUpdatesHint))
		}
		if len(c.entries) < entriesPerUpdate {
			c.entries = make([]state.Entry, entriesPerUpdate*entriesChunk)
		}
		i = len(c.ups)
		c.ups = append(c.ups, state.Update{
			Pipeline: c.p.cfg.Name, Key: k.key, Kind: k.kind, Window: k.win,
			OpenIn:         c.openIn,
			CorrectIfFinal: c.p.cfg.Late.Policy == window.Correct,
			// Room for a few entries from a shared block: most updates
			// carry a record or two (the next append copies them out).
			Entries: c.entries[:0:entriesPerUpdate],
		})
		c.entries = c.entries[entriesPerUpdate:]
		c.updates[k] = i
	}
	u := &c.ups[i]
	u.Entries = append(u.Entries, state.Entry{Seq: seq, Value: value, Distinct: distinct})
}

// Sizes of the collector's per-(key, window) storage: the room each update
// starts with, the updates one shared block of entries serves, and the
// most updates the first allocation is sized for.
const (
	entriesPerUpdate = 2
	entriesChunk     = 64
	maxUpdatesHint   = 4096
)

// decoded is one record that passed decoding and extraction, waiting for
// the dedupe verdict before it is routed to its windows.
type decoded struct {
	rec      *stream.KinesisRecord
	seq      string
	key      string // grouping key
	value    float64
	distinct []byte
	et       time.Time
	cand     int  // index into collector.cands; -1 without dedupe
	aside    bool // set aside: applied nowhere
}

// decode decodes one Kinesis record and keeps what routing needs; poison is
// reported, other event types are filtered.
func (c *collector) decode(rec *stream.KinesisRecord) {
	seq := rec.SequenceNumber
	c.maxSeq = seq
	if err := rec.DecodeEnvelope(&c.env); err != nil {
		c.poisoned(rec, err)
		return
	}
	if !c.p.cfg.Matches(c.env.Type) {
		c.filtered++
		return
	}
	key, value, distinct, err := c.p.cfg.Extract(&c.env)
	if err == nil {
		err = c.p.cfg.CheckPartition(&c.env, key, rec.PartitionKey)
	}
	if err != nil {
		c.poisoned(rec, err)
		return
	}
	if distinct != nil {
		distinct = append([]byte(nil), distinct...) // Extract's bytes share the reused envelope
	}
	d := decoded{rec: rec, seq: seq, key: key, value: value, distinct: distinct, et: c.env.EventTime(), cand: -1}
	if c.p.ledger != nil {
		d.cand = len(c.cands)
		c.cands = append(c.cands, candidateOf(c.shard, rec, &c.env))
		c.ids = append(c.ids, c.env.ID)
	}
	c.decoded = append(c.decoded, d)
}

// dropLate records that the record at seq was dropped as late from one of
// its windows: LateDropped counts records, so a record dropped from several
// windows (of one kind or of several) counts once. A record Lambda delivers
// again after it was processed (the ledger's Redelivered: it claimed its
// event id before) is not counted again: its windows had it, or it was
// counted, when it was first processed, and a window final now was open
// then.
func (c *collector) dropLate(seq string) {
	if _, again := c.again[seq]; again {
		return
	}
	if _, counted := c.lateCounted[seq]; counted {
		return
	}
	if c.late == nil {
		c.late = map[string]struct{}{}
	}
	c.late[seq] = struct{}{}
}

// route adds a decoded record to its windows.
func (c *collector) route(d *decoded) {
	key, seq, et, value, distinct := d.key, d.seq, d.et, d.value, d.distinct
	c.in++
	if d.cand >= 0 && c.verdicts[d.cand] == dedupe.Redelivered {
		if c.again == nil {
			c.again = map[string]struct{}{}
		}
		c.again[seq] = struct{}{}
	}
	for i, ws := range c.p.cfg.Windows {
		if isKeyedKind(ws.Kind) {
			c.collectKeyed(c.p.kinds[i], key, seq, et, value, distinct) // judged by the fold
			continue
		}
		c.wins = c.wins[:0]
		switch ws.Kind {
		case pipeline.Tumbling:
			c.wins = ws.Tumbling().AppendWindows(c.wins, et)
		case pipeline.Hopping:
			c.wins = ws.Hopping().AppendWindows(c.wins, et)
		}
		c.p.cfg.Late.Decide(&c.decision, c.wm, c.wins)
		kind := c.p.kinds[i]
		if c.onWindows != nil {
			c.onWindows(key, kind, seq, value, distinct, &c.decision)
		} else {
			for _, w := range c.decision.Open {
				c.onOpen(upKey{key, kind, w}, seq, value, distinct)
			}
			for _, w := range c.decision.Corrected {
				c.onCorrected(upKey{key, kind, w}, seq, value, distinct)
			}
		}
		if len(c.decision.Dropped) > 0 {
			c.dropLate(seq)
		}
	}
	c.wm.Observe(et)
}

// applies reports whether decoded record i is to be applied: not set
// aside, and not a duplicate (nor a record whose dedupe verdict is pending).
func (c *collector) applies(i int) bool {
	d := &c.decoded[i]
	return !d.aside && (d.cand < 0 || c.verdicts[d.cand].Applies())
}

// routeAll routes every decoded record that applies.
func (c *collector) routeAll() {
	for i := range c.decoded {
		if c.applies(i) {
			c.route(&c.decoded[i])
		}
	}
}

// screen sets aside, before any window sees them, the records of keys whose
// keyed state is full and the reuses of an event id with other content.
func (p *Processor) screen(ctx context.Context, c *collector) error {
	for i, v := range c.verdicts {
		if v == dedupe.Conflict {
			d := &c.decoded[c.candIndex(i)]
			d.aside = true
			c.setAside(d.rec, "id", setaside.KindDuplicateConflict,
				"event id "+quote(c.ids[i])+" of key "+quote(c.cands[i].Key)+" was accepted earlier with a different type, occurredAt or data; this record is refused, not merged")
		}
	}
	over, err := p.overBudget(ctx, c)
	if err != nil {
		return err
	}
	for i := range c.decoded {
		d := &c.decoded[i]
		if reason, ok := over[d.key]; ok && c.applies(i) {
			d.aside = true
			c.setAside(d.rec, p.cfg.Key.String(), setaside.KindStateBudget, reason)
			p.metrics.Add("StateBudgetExceeded", metrics.Count, 1)
		}
	}
	p.flushAside(ctx, c)
	return nil
}

func quote(s string) string { return strconv.Quote(s) }

// candIndex is the decoded record of candidate i.
func (c *collector) candIndex(i int) int {
	for j := range c.decoded {
		if c.decoded[j].cand == i {
			return j
		}
	}
	return -1
}

// poisoned sets aside a record that is not an envelope the pipeline can
// read. One set aside for its value field keeps the rule that field
// broke, so that a record put back corrected is held to it.
func (c *collector) poisoned(rec *stream.KinesisRecord, err error) {
	c.poison++
	field, kind := poisonKind(err)
	c.setAside(rec, field, kind, err.Error())
	c.aside[len(c.aside)-1].Rule = ruleOf(c.p.cfg, field)
}

func (p *Processor) openIn(shard string) string { return p.cfg.Name + "#" + shard }

// shardOf reads the shard id from a Kinesis eventID ("shardId-000000000000:4959...").
func shardOf(eventID string) string {
	shard, _, _ := strings.Cut(eventID, ":")
	return shard
}

// deadlineMargin is how long before the invoke deadline the handler stops writing.
const deadlineMargin = 500 * time.Millisecond

// HandleBatch is the per-batch path: one conditional write per (key, window).
func (p *Processor) HandleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	if err := stream.CheckKinesisEvent(&ev); err != nil {
		return events.KinesisEventResponse{}, fmt.Errorf("aggregate: %w", err)
	}
	return p.handleBatch(ctx, records(ev.Records))
}

func (p *Processor) handleBatch(ctx context.Context, recs []stream.KinesisRecord) (events.KinesisEventResponse, error) {
	defer p.flushMetrics()
	if len(recs) == 0 {
		return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{}}, nil
	}
	// A clone: the batch's strings share one buffer, reused by the next batch.
	shard := strings.Clone(shardOf(recs[0].EventID))
	// Stop before Lambda's deadline: writes cut short are reported as item
	// failures (their records come again, fenced) instead of a timeout.
	ctx, cancel := batch.Reserve(ctx, deadlineMargin)
	defer cancel()
	committed, loaded, err := p.watermark(ctx, shard)
	if err != nil {
		return events.KinesisEventResponse{}, err
	}
	// Before any window of the batch's is written or closed: what a
	// per-interval mapping carried before this one replaced it, and how
	// far it may have written result pages.
	if err := p.spillOnce(ctx, shard); err != nil {
		return events.KinesisEventResponse{}, err
	}
	if err := p.loadPagedThrough(ctx, shard); err != nil {
		return events.KinesisEventResponse{}, err
	}
	wm := *committed // work on a copy: commit only if the whole batch succeeds
	c := p.newCollector(shard, &wm, len(recs))
	for i := range recs {
		c.decode(&recs[i])
	}
	if len(c.decoded) > 0 && !loaded {
		// The records are judged against the stored watermark, whatever
		// this process last saw of it; committed with it, as the one the
		// batch's first record saw (settled).
		if err := p.catchUp(ctx, shard, committed, &wm); err != nil {
			// No record can be judged without it: the batch comes again
			// from its first record, reported as a write cut short by the
			// deadline is, not as a function error (which the mapping
			// counts against its retries and may bisect the batch on).
			p.log.Error("reading the shard's watermark failed: the batch will be retried", "shard", shard, "error", err.Error())
			var again batch.StreamFailures
			again.Add(recs[0].SequenceNumber)
			return again.Kinesis(), nil
		}
	}
	if err := p.judgeBatch(ctx, c); err != nil {
		return events.KinesisEventResponse{}, err
	}
	if err := p.screen(ctx, c); err != nil {
		return events.KinesisEventResponse{}, err
	}
	c.routeAll()
	for _, i := range p.applyAll(ctx, c) {
		c.failures.Add(c.ups[i].Entries[0].Seq) // its first record: Lambda retries from there
	}
	for _, seq := range p.applyKeyed(ctx, c) {
		c.failures.Add(seq)
	}
	p.count(c, len(c.late))
	if c.failures.Len() > 0 {
		// Lambda resumes from the lowest failed record: the records before
		// it had all their effects and do not come again. Their event times
		// are the shard's, as the failed record saw them in this batch, so
		// the retry is judged against the same watermark. Without them a
		// shard whose later batches bring no record that moves it (copies
		// the ledger suppresses, a closed parent shard) never stored a
		// watermark, and the ticker never closed the windows it wrote.
		wm = c.settled(*committed, c.failures.Lowest())
	}
	if err := p.commit(ctx, shard, &wm, processedThrough(recs, &c.failures), len(c.keyed) > 0, nil); err != nil {
		return events.KinesisEventResponse{}, err
	}
	return c.failures.Kinesis(), nil
}

// processedThrough is the last record of recs whose effects a batch has
// had: its last, or the last before its lowest failed record (Lambda
// resumes there); "" when that is the first.
func processedThrough(recs []stream.KinesisRecord, failures *batch.StreamFailures) string {
	if failures.Len() == 0 {
		return recs[len(recs)-1].SequenceNumber
	}
	lowest, through := failures.Lowest(), ""
	for i := range recs {
		if stream.CompareSequence(recs[i].SequenceNumber, lowest) >= 0 {
			break
		}
		through = recs[i].SequenceNumber
	}
	return through
}

// settled is committed raised by the event times of the records that
// applied before lowest, the batch's lowest failed sequence number: the
// watermark that record was judged against.
func (c *collector) settled(committed window.Watermark, lowest string) window.Watermark {
	wm := committed
	for i := range c.decoded {
		d := &c.decoded[i]
		if stream.CompareSequence(d.seq, lowest) >= 0 {
			break
		}
		if c.applies(i) {
			wm.Observe(d.et)
		}
	}
	return wm
}

// applyAll writes a collector's updates with bounded concurrency, publishes
// the results they made or met unpublished (corrections, and on a retry
// the corrections and final results a failed emission left behind), and
// returns the updates (indexes into c.ups) whose write failed.
func (p *Processor) applyAll(ctx context.Context, c *collector) []int {
	var (
		mu     sync.Mutex
		failed []int
		pubs   []state.View
		resend []markedResult // windows a carry's flush created fresh, met again
	)
	parallel(len(c.ups), p.concurrency, func(i int) {
		u := &c.ups[i]
		res, err := p.apply(ctx, c.shard, u)
		mu.Lock()
		defer mu.Unlock()
		p.metrics.Add("WriteRequests", metrics.Count, float64(res.Writes))
		if err != nil {
			p.log.Error("window write failed: its records will be retried", "shard", c.shard, "error", err.Error())
			failed = append(failed, i)
			return
		}
		p.metrics.Add("DuplicatesSkipped", metrics.Count, float64(res.Skipped))
		switch res.Outcome {
		case state.LateDropped:
			// The window was made final after routing (by the ticker):
			// its records are late. count adds them, once per record.
			for i := range u.Entries {
				c.dropLate(u.Entries[i].Seq)
			}
		case state.Corrected:
			p.metrics.Add("Corrections", metrics.Count, 1)
		}
		if res.Resend != nil {
			resend = append(resend, markedResult{out: outputOf(*res.Resend), ref: res.Resend.Ref})
		}
		if res.Publish != nil {
			pubs = append(pubs, *res.Publish)
		}
	})
	// List the windows written (a failed write's records are retried, and
	// the retry lists them); a failed listing fails its windows' records.
	written := make(map[listedWindow][]string, 8)
	bad := make(map[int]bool, len(failed))
	for _, i := range failed {
		bad[i] = true
	}
	for i := range c.ups {
		if !bad[i] {
			w := listedWindow{c.ups[i].Kind, c.ups[i].Window}
			written[w] = append(written[w], c.ups[i].Key)
		}
	}
	if unlisted := p.listWindows(ctx, c.shard, written); len(unlisted) > 0 {
		for w, err := range unlisted {
			p.log.Error("listing written windows failed: their records will be retried", "shard", c.shard, "window", w.kind+"|"+w.win.ID(), "error", err.Error())
		}
		for i := range c.ups {
			if _, ok := unlisted[listedWindow{c.ups[i].Kind, c.ups[i].Window}]; ok && !bad[i] {
				failed = append(failed, i)
			}
		}
	}
	err := p.sendMarked(ctx, resend)
	if err == nil {
		_, err = p.publish(ctx, pubs)
	}
	if err != nil {
		// The corrections are applied and stay listed until published: the
		// retry (which finds them applied) or the ticker publishes them
		// under the same ids. Fail the batch's first records to get the retry.
		p.log.Error("publishing window results failed", "error", err.Error())
		if len(c.ups) > 0 {
			failed = append(failed, 0)
		}
	}
	return failed
}

// parallel calls fn(0), ..., fn(n-1) on at most workers goroutines, each
// taking the next index when it is done: a batch makes hundreds of writes,
// and a goroutine per write (each growing its own stack) cost more than the
// writes' own work.
func parallel(n, workers int, fn func(i int)) {
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// apply is Views.Apply for the handler: a correction that meets the
// window's previous result unpublished publishes that first (one revision
// on the stream before the next replaces it), then applies.
func (p *Processor) apply(ctx context.Context, shard string, u *state.Update) (state.Result, error) {
	writes := 0
	for attempt := 0; ; attempt++ {
		res, err := p.views.Apply(ctx, shard, u)
		res.Writes += writes
		if !errors.Is(err, state.ErrUnpublished) || attempt == 3 {
			return res, err
		}
		// The previous revision goes out before the correction, even from
		// a replay, which otherwise leaves what it cannot tell is on the
		// stream listed: the correction cannot wait for it.
		if err := p.publishAll(ctx, []state.View{*res.Publish}); err != nil {
			return res, err
		}
		writes = res.Writes
	}
}

// count adds an invocation's record counts to its metrics, late of them
// dropped as late.
func (p *Processor) count(c *collector, late int) {
	p.metrics.Add("RecordsIn", metrics.Count, float64(c.in))
	p.metrics.Add("PoisonRecords", metrics.Count, float64(c.poison))
	p.metrics.Add("LateDropped", metrics.Count, float64(late))
	p.metrics.Add("Filtered", metrics.Count, float64(c.filtered))
}

// watermark returns this process's copy of shard's committed watermark,
// loading every shard's from the store on first use (a cold start's one
// read); loaded says this call read them. The copy may be older than the
// stored one: an invocation judges records only after catchUp.
func (p *Processor) watermark(ctx context.Context, shard string) (wm *window.Watermark, loaded bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.loaded {
		marks, err := p.views.Watermarks(ctx, p.cfg.Name)
		if err != nil {
			return nil, false, err
		}
		for s, wm := range marks {
			p.marks[s] = wm
		}
		p.loaded, loaded = true, true
	}
	wm, ok := p.marks[shard]
	if !ok {
		wm = p.cfg.NewWatermark()
		p.marks[shard] = wm
	}
	c := *wm
	return &c, loaded, nil
}

// catchUp raises this process's copy of shard's watermark, and each of
// wms (an invocation's), to the stored one, read consistently: one
// GetItem. Other functions store a later watermark and tell no process
// that keeps a copy: the ticker's idle advance, and the shard's batches
// that Lambda ran in another execution environment (it hands a shard's
// next batch to any free one; with several shards, routinely). Judged
// against an older copy, a record the stored watermark makes late was
// taken in by a warm process (for a key with no window yet, or as a
// correction past the allowed lateness) and dropped by a cold one, which
// reads it: whether a record is late depended on which environment ran
// its batch, and Kafka Streams drops it. An invocation with no record to
// judge (an interval's final invocation, a batch of other types or bad
// records) needs no read, nor one that loaded every shard's just now.
// Nothing cheaper tells a copy is current: the ticker's advance is
// bounded (idleTimeout; during an interval, its hold), but the other
// writers are not — another environment's batch, another lane's flush
// under parallelizationFactor > 1, a replay's version the views table
// swaps to — and a duplicate of the interval before's flush, holding at
// the same time, clears the hold.
func (p *Processor) catchUp(ctx context.Context, shard string, wms ...*window.Watermark) error {
	stored, err := p.views.Watermark(ctx, p.cfg.Name, shard)
	if err != nil || stored == nil {
		return err
	}
	p.mu.Lock()
	p.marks[shard].Merge(stored)
	p.mu.Unlock()
	for _, wm := range wms {
		wm.Merge(stored)
	}
	return nil
}

// commit stores a fully processed batch's watermark and closes the windows
// it makes final (also when it did not move but keyed states changed: a late
// record may correct a final session or sliding window), but for those
// published, which the batch's own writes made final and published.
func (p *Processor) commit(ctx context.Context, shard string, wm *window.Watermark, through string, keyedChanged bool, published map[state.Ref]bool) error {
	p.mu.Lock()
	prev := *p.marks[shard]
	ahead := through != "" && through != p.through[shard]
	p.mu.Unlock()
	if shard == state.SampleShard {
		through, ahead = "", false // no stream holds its records
	}
	moved := wm.Current().After(prev.Current()) || !wm.MaxEventTime.Equal(prev.MaxEventTime)
	if ahead || moved {
		// The ticker (or a duplicate invocation) may have stored a later
		// one: wm takes it. The position goes with it, so the ticker
		// knows which of the shard's records are still to be processed;
		// alone when the watermark did not move (records of other types),
		// so that the ticker's idle clock stored with it stays.
		commit := p.views.CommitWatermark
		if !moved {
			commit = func(ctx context.Context, pipeline, shard string, wm *window.Watermark, seq string) error {
				return p.views.CommitPosition(ctx, pipeline, shard, seq, wm)
			}
		}
		if err := commit(ctx, p.cfg.Name, shard, wm, through); err != nil {
			return err
		}
		p.mu.Lock()
		p.marks[shard] = wm
		if through != "" {
			p.through[shard] = strings.Clone(through) // the batch's strings are reused
		}
		p.mu.Unlock()
	}
	if !wm.Current().IsZero() {
		p.metrics.Observe("WatermarkLagMs", metrics.Milliseconds, float64(p.now().Sub(wm.Current()).Milliseconds()))
	}
	p.mu.Lock()
	retry := p.unfinalized[shard]
	p.mu.Unlock()
	if wm.Current().After(prev.Current()) || (keyedChanged && !wm.Current().IsZero()) || retry {
		// A finalize that failed (its results not all published) is done
		// again by the shard's next batch, a retry most often, although the
		// watermark it stored does not move again: a warm process
		// remembers; after a cold start the ticker finds the windows listed.
		err := p.finalize(ctx, shard, wm.Current(), published)
		p.mu.Lock()
		if err != nil {
			p.unfinalized[shard] = true
		} else {
			delete(p.unfinalized, shard)
		}
		p.mu.Unlock()
		return err
	}
	return nil
}

// finalize makes shard's windows that end by until final and publishes
// them, with the corrections listed there still unpublished. Each window
// (or keyed state) is its own item and its own conditional write, so they
// are finalized with bounded concurrency, as a batch's updates are
// written; the results are published after all of them, in the index's
// order. If any fails, the first failure (in that order) is returned and
// nothing is published: the windows finalized meanwhile stay listed with
// their results pending, which the next finalize publishes.
func (p *Processor) finalize(ctx context.Context, shard string, until time.Time, published map[state.Ref]bool) error {
	refs, listings, err := p.due(ctx, shard, until)
	if err != nil {
		return err
	}
	if len(published) > 0 {
		// Final and published by the caller since: nothing left to do
		// but drop their listings with the others'.
		refs = slices.DeleteFunc(refs, func(r state.Ref) bool { return published[r] })
	}
	_, err = p.finalizeDue(ctx, shard, until, refs, listings, true)
	return err
}

// finalizeDue is finalize of what p.due read: refs, found in listings. It
// returns how many windows it made final (a session's or sliding window's
// results it published), not how many it looked at: a listed state whose
// session is still growing, or a window another finalize made final, is
// looked at on every tick and made final once. warm says a keyed state may
// be taken from the process's copy (finalizeKeyedRound).
func (p *Processor) finalizeDue(ctx context.Context, shard string, until time.Time, refs []state.Ref, listings []state.Listing, warm bool) (int, error) {
	type finalized struct {
		view   state.View
		pub    bool
		resend bool // a result page's, published by its creator, perhaps not sent (state.View.Fresh)
		made   int
		err    error
	}
	done := make([]finalized, len(refs))
	parallel(len(refs), p.concurrency, func(i int) {
		ref, f := refs[i], &done[i]
		if _, ok := state.IsKeyed(ref); ok {
			f.made, f.err = p.finalizeKeyed(ctx, shard, ref, until, warm)
			return
		}
		view, already, err := p.views.Finalize(ctx, ref)
		if isNoWindow(err) {
			p.windowExpired(shard, ref)
			return
		}
		if err == nil && !already {
			f.made = 1
		}
		// Not published if already published and unlisted since the
		// index was read.
		f.view, f.pub, f.err = view, err == nil && (!already || view.Pending), err
		f.resend = err == nil && already && view.Fresh
	})
	var pubs []state.View
	var resends []Output
	made := 0
	for i := range done {
		if done[i].err != nil {
			return 0, done[i].err
		}
		made += done[i].made
		if done[i].pub {
			pubs = append(pubs, done[i].view)
		}
		if done[i].resend {
			resends = append(resends, outputOf(done[i].view))
		}
	}
	// Sent again under their ids, not logged again: their creator did.
	if err := p.put(ctx, resends); err != nil {
		return 0, err
	}
	// On the stream at least once (consumers dedupe by id); in the log
	// once: only the publisher that takes the window off the index at its
	// revision logs it, so the ticker racing the handler, or a retry after
	// a failed unlist, does not log a result twice (the saved queries sum
	// countDelta over these lines).
	held, err := p.publish(ctx, pubs)
	if err != nil {
		return 0, err
	}
	p.metrics.Add("WindowsFinalized", metrics.Count, float64(made))
	// Every window the listings name is published (but those a replay
	// held, whose listings the live function finds once it is on this
	// version): they are done with.
	if len(held) > 0 {
		listings = slices.DeleteFunc(listings, func(l state.Listing) bool { return held[listedWindow{l.Kind, l.Window}] })
	}
	return made, p.dropListings(ctx, listings)
}

// windowExpired reports a listed window whose item is gone before it was
// made final: the table's TTL deleted it, the pipeline's retention after
// the window's end, while the shard's watermark was still short of it (a
// shard that lagged or stood still longer than the retention). Its result
// is lost; it is logged, naming the pipeline, key and window, and counted
// in WindowsExpired, never skipped without a word.
func (p *Processor) windowExpired(shard string, ref state.Ref) {
	key, _ := strings.CutPrefix(ref.PK, p.cfg.Name+"#")
	p.log.Error("a listed window's item expired before the window was final: its result is lost; is the retention shorter than the shard's lag?",
		"pipeline", p.cfg.Name, "key", key, "window", ref.SK, "shard", shard, "retention", p.cfg.Retention.String())
	p.metrics.Add("WindowsExpired", metrics.Count, 1)
}

// TickResult is what one tick did.
type TickResult struct {
	Shards    int `json:"shards"`
	Advanced  int `json:"advanced"`  // idle shards whose watermark moved by processing time
	Finalized int `json:"finalized"` // windows made final
}

// Tick is the ticker's work: advance idle shards' watermarks by processing
// time and finalize the windows every shard's watermark has passed.
func (p *Processor) Tick(ctx context.Context, now time.Time) (TickResult, error) {
	defer p.flushMetrics()
	var res TickResult
	// The shards' watermarks; their holds (shards whose records a
	// per-interval invocation carries to its flush are not idle up to the
	// earliest window those records open); and their positions (the last
	// record each shard's function processed: records after it are still
	// to come, whatever the clock says).
	shards, err := p.views.Shards(ctx, p.cfg.Name, now)
	if err != nil {
		return res, err
	}
	marks, holds, positions := shards.Watermarks, shards.Holds, shards.Positions
	known := backlog.Stored(positions, marks, holds)
	var unread []error
	for shard, wm := range marks {
		res.Shards++
		moved := false
		if hold, err := p.idleHold(ctx, shard, wm, holds[shard], known, now); err != nil {
			// Not known to be idle: no advance (whatever the watermark,
			// a fresh one's zero included), and the tick fails once the
			// other shards are done, so its alarm says why.
			unread = append(unread, err)
		} else {
			moved = wm.AdvanceIdleHeld(now, p.cfg.IdleTimeout, hold)
		}
		// Save the idle clock even when the value did not move yet.
		if _, err := p.views.SaveWatermark(ctx, p.cfg.Name, shard, wm); err != nil {
			return res, err
		}
		if moved {
			res.Advanced++
		}
		// The windows the shard's carry holds that its watermark passed
		// are written and listed first (a shard that went idle has no
		// flush to close them).
		published, err := p.closeCarried(ctx, shard, wm.Current())
		if err != nil {
			// The tick fails once the other shards are done, so its
			// alarm says why; this shard's listed windows still close.
			unread = append(unread, fmt.Errorf("shard %s: %w", shard, err))
		}
		refs, listings, err := p.due(ctx, shard, wm.Current())
		if err != nil {
			return res, err
		}
		if len(published) > 0 {
			res.Finalized += len(published)
			refs = slices.DeleteFunc(refs, func(r state.Ref) bool { return published[r] })
		}
		if len(refs) > 0 || len(listings) > 0 {
			// The ticker reads each state: a copy it kept could lack
			// results a flush recorded pending and died before
			// publishing, which the ticker is there to publish.
			made, err := p.finalizeDue(ctx, shard, wm.Current(), refs, listings, false)
			if err != nil {
				return res, err
			}
			res.Finalized += made
		}
	}
	return res, errors.Join(unread...)
}

// idleHold is how far the ticker may advance shard's watermark by
// processing time: no further than hold (the records a per-interval
// invocation carries), nor than the first record the function has not
// processed allows, on the shard or, after a reshard, on the shards that
// took its keys, nor, the shard closed by a reshard, than those shards'
// stored watermarks and holds (backlog.IdleHold).
func (p *Processor) idleHold(ctx context.Context, shard string, wm *window.Watermark, hold time.Time, known backlog.Known, now time.Time) (time.Time, error) {
	bound, waiting, err := backlog.IdleHold(ctx, p.backlog, shard, known, wm, p.cfg.IdleTimeout, hold, now)
	if err != nil {
		return bound, fmt.Errorf("aggregate: %w", err)
	}
	if waiting {
		through, _ := known.Position(shard)
		p.log.Info("idle advance waits for records not processed yet", "shard", shard, "after", through,
			"watermarkAtMost", bound.UTC().Format(time.RFC3339Nano))
	}
	return bound, nil
}

func (p *Processor) flushMetrics() {
	if err := p.metrics.Flush(); err != nil {
		p.log.Warn("writing metrics failed", "error", err.Error())
	}
}
