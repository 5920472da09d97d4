package keyed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/backlog"
	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/emit"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
	"github.com/tributary-dev/tributary/pkg/window"
)

// Settings say where a Runner keeps its state and how its watermark moves.
type Settings struct {
	// Name names the operator's items: state "<Name>#<key>", watermarks
	// "watermark#<Name>", the dedupe ledger "dedupe#<Name>#<key>".
	Name string
	// Kind is the keyed state kind of its state items ("join", "cep").
	Kind string
	// OutOfOrderness is the watermark's allowance: the watermark is the
	// newest event time of the shard minus it.
	OutOfOrderness time.Duration
	// IdleTimeout is how long a shard may see no newer event time before
	// Tick advances its watermark by processing time.
	IdleTimeout time.Duration
	// FoldBytes ends a key's fold early once its state reaches this size
	// (the rest of the key's records are reported and come again).
	FoldBytes int
	// MaxStateBytes is the largest state blob written; the operators'
	// limits keep below it (a larger one is a bug, reported, not written).
	MaxStateBytes int
}

// DefaultMaxStateBytes leaves room in DynamoDB's 400 KB item for the
// item's other attributes (fences of a few shards, keys, index attributes).
const DefaultMaxStateBytes = 360_000

// Runner runs an Operator over Kinesis batches: see the package doc. It is
// safe for concurrent use.
type Runner[V any] struct {
	set          Settings
	op           Operator[V]
	views        *state.Views
	kin          emit.Putter
	stream       string
	ledger       *dedupe.Ledger
	sink         *setaside.Sink
	backlog      backlog.Reader // the tick's view of records not yet processed; nil: none
	metrics      *metrics.Logger
	log          *slog.Logger
	now          func() time.Time
	concurrency  int
	backoff      func(int) time.Duration
	maxCacheKeys int
	onEmit       func(ctx context.Context, recs []emit.Record, resent bool)

	mu    sync.Mutex
	marks map[string]*window.Watermark
	// through is, per shard, the last record whose effects this process
	// committed with the watermark (state.Views.CommitWatermark).
	through map[string]string
	cache   map[string]cached

	batches sync.Pool
	stats   counters
}

// cached is a warm copy of a key's state item, so the normal path needs no
// read. The blob is decoded afresh for each fold: a failed write must not
// leave the copy changed.
type cached struct {
	version int
	fence   string
	blob    []byte
	sent    bool // the blob's outbox is known to be on the stream
}

// Option configures a Runner.
type Option func(*options)

type options struct {
	ledger       *dedupe.Ledger
	sink         *setaside.Sink
	backlog      backlog.Reader
	metrics      *metrics.Logger
	log          *slog.Logger
	now          func() time.Time
	concurrency  int
	backoff      func(int) time.Duration
	maxCacheKeys int
	onEmit       func(ctx context.Context, recs []emit.Record, resent bool)
}

// WithEmitHook calls f with the records of every outbox once they are on
// the stream (resent: a copy of an outbox that may have been sent before).
// CEP logs each match there.
func WithEmitHook(f func(ctx context.Context, recs []emit.Record, resent bool)) Option {
	return func(o *options) { o.onEmit = f }
}

// WithDedupe suppresses producer copies of folded records with ledger
// (NewLedger); without it only Lambda's redeliveries are deduplicated.
func WithDedupe(l *dedupe.Ledger) Option { return func(o *options) { o.ledger = l } }

// WithSetAside is where records that can never be folded go; without it
// they are reported as failures, as a transient error is.
func WithSetAside(s *setaside.Sink) Option { return func(o *options) { o.sink = s } }

// WithBacklog has the tick ask b (backlog.New on the stream the runner
// reads), before it advances an idle-looking shard's watermark by
// processing time, whether the shard still holds records the runner has
// not processed — a function failing, throttled or redeploying for longer
// than IdleTimeout stops moving its watermark while its records wait. The
// advance then stops IdleTimeout + OutOfOrderness before the first such
// record arrived (backlog.IdleHold), so those records are not late when
// they are folded; a stream the tick cannot read advances nothing and
// fails the tick, naming the shard. Each batch stores the last record it
// committed with the watermark for this. Without it the tick advances by
// the clock alone.
func WithBacklog(b backlog.Reader) Option { return func(o *options) { o.backlog = b } }

// WithMetrics emits EMF metrics after each batch and tick.
func WithMetrics(m *metrics.Logger) Option { return func(o *options) { o.metrics = m } }

// WithLogger logs failures and records set aside.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithClock sets processing time (Tick's idle advance, metrics).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithConcurrency bounds the keys folded at once (default 16).
func WithConcurrency(n int) Option { return func(o *options) { o.concurrency = max(1, n) } }

// WithBackoff sets the wait before output retry attempt+1 (tests shorten it).
func WithBackoff(f func(int) time.Duration) Option { return func(o *options) { o.backoff = f } }

// WithMaxCacheKeys bounds the warm copies kept (default 100,000); past it
// the cache starts afresh.
func WithMaxCacheKeys(n int) Option { return func(o *options) { o.maxCacheKeys = max(1, n) } }

// NewLedger is the dedupe ledger of operator name in its state table, or
// nil for a horizon of 0.
func NewLedger(db dedupe.Store, table, name string, horizon time.Duration) *dedupe.Ledger {
	if horizon <= 0 {
		return nil
	}
	return dedupe.NewLedger(db, table, state.LedgerKey(name), dedupe.WithHorizon(horizon), dedupe.WithTTLAttribute(state.TTLAttribute))
}

// New returns a Runner keeping op's state in views and putting its outputs
// on the Kinesis stream named out (kin nil: outputs are dropped, for
// tests of the state alone).
func New[V any](set Settings, op Operator[V], views *state.Views, kin emit.Putter, out string, opts ...Option) *Runner[V] {
	o := options{log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now, concurrency: 16, backoff: emit.Backoff, maxCacheKeys: 100_000}
	for _, f := range opts {
		f(&o)
	}
	if set.MaxStateBytes == 0 {
		set.MaxStateBytes = DefaultMaxStateBytes
	}
	if set.FoldBytes == 0 {
		set.FoldBytes = set.MaxStateBytes / 2
	}
	r := &Runner[V]{set: set, op: op, views: views, kin: kin, stream: out,
		ledger: o.ledger, sink: o.sink, backlog: o.backlog, metrics: o.metrics, log: o.log, now: o.now,
		concurrency: o.concurrency, backoff: o.backoff, maxCacheKeys: o.maxCacheKeys, onEmit: o.onEmit,
		marks: map[string]*window.Watermark{}, through: map[string]string{}, cache: map[string]cached{}}
	r.batches.New = func() any { return new(stream.KinesisBatch) }
	return r
}

// Stats are a Runner's counters since it was built. RecordsIn counts the
// records that went to a key's fold: a record the operator ignores (not
// its type), sets aside when selecting it (SetAside counts those) or finds
// a producer's copy of (Duplicates) is not one.
type Stats struct {
	RecordsIn, Observed, Late, SetAside, Duplicates, Conflicts    int64
	Outputs, OutputsResent, StateWrites, FoldCheckpoints, Refolds int64
}

type counters struct {
	recordsIn, observed, late, setAside, duplicates, conflicts    atomic.Int64
	outputs, outputsResent, stateWrites, foldCheckpoints, refolds atomic.Int64
}

// Stats returns the counters so far.
func (r *Runner[V]) Stats() Stats {
	c := &r.stats
	return Stats{RecordsIn: c.recordsIn.Load(), Observed: c.observed.Load(), Late: c.late.Load(), SetAside: c.setAside.Load(),
		Duplicates: c.duplicates.Load(), Conflicts: c.conflicts.Load(), Outputs: c.outputs.Load(), OutputsResent: c.outputsResent.Load(),
		StateWrites: c.stateWrites.Load(), FoldCheckpoints: c.foldCheckpoints.Load(), Refolds: c.refolds.Load()}
}

// Invoke is the Lambda entry point, as lambda.Start(r) calls it with the
// runtime's bytes: an EventBridge scheduled event runs Tick; anything else
// is decoded in one pass as a Kinesis event and handled.
func (r *Runner[V]) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	if isScheduled(payload) {
		res, err := r.Tick(ctx, r.now())
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	}
	b := r.batches.Get().(*stream.KinesisBatch)
	defer r.batches.Put(b)
	if err := b.Decode(payload); err != nil {
		return nil, fmt.Errorf("%s: %w", r.set.Name, err)
	}
	if err := stream.CheckKinesisBatch(b, payload); err != nil {
		return nil, fmt.Errorf("%s: %w", r.set.Name, err)
	}
	resp, err := r.handleBatch(ctx, b.Records)
	if err != nil {
		return nil, err
	}
	return stream.AppendKinesisEventResponse(nil, &resp), nil
}

// isScheduled reports whether payload is an EventBridge event rather than
// a Kinesis batch.
func isScheduled(payload []byte) bool {
	if bytes.Contains(payload, []byte(`"Records"`)) {
		return false
	}
	var ev struct {
		DetailType string `json:"detail-type"`
	}
	return json.Unmarshal(payload, &ev) == nil && ev.DetailType != ""
}

// HandleBatch handles one Kinesis batch given as aws-lambda-go's event.
func (r *Runner[V]) HandleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	if err := stream.CheckKinesisEvent(&ev); err != nil {
		return events.KinesisEventResponse{}, fmt.Errorf("%s: %w", r.set.Name, err)
	}
	recs := make([]stream.KinesisRecord, len(ev.Records))
	for i := range ev.Records {
		recs[i] = stream.RecordFromEvent(&ev.Records[i])
	}
	return r.handleBatch(ctx, recs)
}

// item is one record of a batch to fold.
type item[V any] struct {
	idx    int
	rec    *stream.KinesisRecord
	seq    string
	key    string
	v      V
	wm     time.Time // the shard's watermark just before the record
	cand   int       // index of its dedupe candidate, -1 without dedupe
	skip   bool      // a producer's copy or a reused id: no effect
	failed bool      // its key's ledger write failed: it comes again
}

// deadlineMargin is how long before the invoke deadline the handler stops.
const deadlineMargin = 500 * time.Millisecond

func (r *Runner[V]) handleBatch(ctx context.Context, recs []stream.KinesisRecord) (events.KinesisEventResponse, error) {
	defer r.flushMetrics()
	if len(recs) == 0 {
		return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{}}, nil
	}
	shard := strings.Clone(shardOf(recs[0].EventID))
	ctx, cancel := batch.Reserve(ctx, deadlineMargin)
	defer cancel()
	committed, err := r.watermark(ctx, shard)
	if err != nil {
		return events.KinesisEventResponse{}, err
	}

	var (
		env      stream.Envelope
		observe  = make([]time.Time, len(recs)) // zero: the record does not move the watermark
		items    []*item[V]
		aside    []setaside.Record
		cands    []dedupe.Candidate
		failures batch.StreamFailures
	)
	for i := range recs {
		rec := &recs[i]
		if err := rec.DecodeEnvelope(&env); err != nil {
			field, kind := poisonKind(err)
			aside = append(aside, asideOf(rec, field, kind, err.Error()))
			continue
		}
		key, v, sel, err := r.op.Select(rec, &env)
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) {
				re = &RecordError{Kind: setaside.KindInvalid, Reason: err.Error()}
			}
			aside = append(aside, asideOf(rec, re.Field, re.Kind, re.Reason))
			continue
		}
		et := env.EventTime().UTC().Truncate(time.Millisecond)
		switch sel {
		case Observe:
			observe[i] = et
			r.stats.observed.Add(1)
		case Fold:
			observe[i] = et
			it := &item[V]{idx: i, rec: rec, seq: strings.Clone(rec.SequenceNumber), key: key, v: v, cand: -1}
			if r.ledger != nil {
				it.cand = len(cands)
				cands = append(cands, candidateOf(shard, rec, &env))
			}
			items = append(items, it)
		}
	}

	if len(cands) > 0 {
		verdicts, failedKeys, err := r.judge(ctx, shard, cands)
		if err != nil {
			return events.KinesisEventResponse{}, err
		}
		for _, it := range items {
			c := cands[it.cand]
			switch {
			case failedKeys[c.Key]:
				// Its key's ids were not committed: it comes again. It moves
				// the watermark now as it will then: a new or redelivered
				// record does, a producer's copy (or a conflicting reuse of
				// an id) does not, as below; otherwise a copy whose key's
				// commit failed would move the watermark past records
				// after it that the retry finds on time, and those would be
				// folded as late now.
				it.failed = true
				failures.Add(it.seq)
				if v := verdicts[it.cand]; v == dedupe.Duplicate || v == dedupe.Conflict {
					observe[it.idx] = time.Time{}
				}
			case verdicts[it.cand] == dedupe.Duplicate:
				it.skip, observe[it.idx] = true, time.Time{}
				r.stats.duplicates.Add(1)
			case verdicts[it.cand] == dedupe.Conflict:
				it.skip, observe[it.idx] = true, time.Time{}
				r.stats.conflicts.Add(1)
				aside = append(aside, asideOf(it.rec, "id", setaside.KindDuplicateConflict,
					fmt.Sprintf("event id %q of key %q was accepted earlier with a different type, occurredAt or data; this record is refused, not folded", idOf(it.rec), c.Key)))
			}
		}
	}
	if len(aside) > 0 {
		if err := r.setAside(ctx, aside); err != nil {
			for i := range aside {
				failures.Add(aside[i].Sequence)
			}
		}
	}

	// The watermark just before each record: a function of the records
	// before it in the shard, whatever the batch boundaries.
	wm := *committed
	before := make([]window.Watermark, len(recs))
	for i := range recs {
		before[i] = wm
		if !observe[i].IsZero() {
			wm.Observe(observe[i])
		}
	}
	end := wm

	byKey := map[string][]*item[V]{}
	var keys []string
	for _, it := range items {
		it.wm = before[it.idx].Current()
		if it.skip || it.failed {
			continue
		}
		if _, ok := byKey[it.key]; !ok {
			keys = append(keys, it.key)
		}
		byKey[it.key] = append(byKey[it.key], it)
		r.stats.recordsIn.Add(1)
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, r.concurrency)
	)
	for _, key := range keys {
		its := byKey[key]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if at := r.fold(ctx, shard, key, its, end.Current()); at >= 0 {
				mu.Lock()
				failures.Add(its[at].seq)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	// Commit the watermark as of Lambda's checkpoint: everything before the
	// lowest failed record is done, through the record before it.
	commit, through := end, recs[len(recs)-1].SequenceNumber
	if failures.Len() > 0 {
		lowest := failures.Lowest()
		for i := range recs {
			if recs[i].SequenceNumber == lowest {
				commit, through = before[i], ""
				if i > 0 {
					through = recs[i-1].SequenceNumber
				}
				break
			}
		}
	}
	if err := r.commit(ctx, shard, committed, &commit, through); err != nil {
		return events.KinesisEventResponse{}, err
	}
	return failures.Kinesis(), nil
}

// judge screens the batch's records for producer copies and commits the
// new ids: one conditional write per key with new ids.
func (r *Runner[V]) judge(ctx context.Context, shard string, cands []dedupe.Candidate) ([]dedupe.Verdict, map[string]bool, error) {
	s := r.ledger.Begin("", nil)
	before := r.ledger.Stats()
	if err := s.Judge(ctx, cands); err != nil {
		return nil, nil, fmt.Errorf("%s: dedupe: %w", r.set.Name, err)
	}
	failed := s.Commit(ctx, r.concurrency)
	after := r.ledger.Stats()
	r.metric("LedgerWrites", float64(after.Writes-before.Writes))
	r.metric("WriteRequests", float64(after.Writes-before.Writes))
	if n := after.DroppedEarly - before.DroppedEarly; n > 0 {
		r.metric("DedupeDroppedEarly", float64(n))
		r.log.WarnContext(ctx, "a key's dedupe claims passed the ledger's segment limit: its oldest were let go before the horizon, and copies of those events are no longer suppressed",
			"shard", shard, "claims", n)
	}
	keys := map[string]bool{}
	for _, f := range failed {
		keys[f.Key] = true
		r.log.ErrorContext(ctx, "dedupe ledger write failed: the key's records will be retried", "shard", shard, "key", f.Key, "error", f.Err.Error())
	}
	return s.Verdicts(), keys, nil
}

// maxFoldAttempts bounds the reloads of a key's state that kept changing
// under a fold (a concurrent duplicate invocation, the tick).
const maxFoldAttempts = 8

// fold folds one key's records of the batch in rounds (foldRound), each
// ending when the key's state reaches FoldBytes with what it folded
// written and its outputs sent, and goes on with the next record while the
// invocation has time for another round. It returns the index in its of
// the first record that must come again (-1 when all are done). A round
// that ended early used to end the invocation for the key, reporting the
// next record: Lambda counts each such partial failure as a retry of the
// batch, so a key needing more rounds than the mapping's retries (3) had
// the rest of its batch sent to the on-failure queue as if a transient
// error had outlasted them.
func (r *Runner[V]) fold(ctx context.Context, shard, key string, its []*item[V], wmEnd time.Time) int {
	base := 0
	for {
		began := time.Now()
		next, checkpoint := r.foldRound(ctx, shard, key, its[base:], wmEnd)
		if next < 0 {
			return -1
		}
		if !checkpoint || !timeForAnotherRound(ctx, time.Since(began)) {
			return base + next
		}
		base += next
	}
}

// timeForAnotherRound reports whether ctx leaves time for another fold
// round as long as the last one (took): twice that and a second before its
// deadline (batch.Reserve's, already short of Lambda's). Without a
// deadline (a test, a tool) there is always time.
func timeForAnotherRound(ctx context.Context, took time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > 2*took+time.Second
}

// foldRound folds one key's records of the batch into its state item and
// puts the outputs on the stream, until the state reaches FoldBytes. It
// returns the index in its of the first record that must come again (-1
// when all are done), and checkpoint when that is because the round
// ended at FoldBytes with all it folded written and sent, not because
// something failed.
func (r *Runner[V]) foldRound(ctx context.Context, shard, key string, its []*item[V], wmEnd time.Time) (next int, checkpoint bool) {
	ref := state.KeyedRef{Pipeline: r.set.Name, Key: key, Kind: r.set.Kind}
	// setAside are the records an attempt set aside: decided, a later
	// attempt (the state changed under the write) neither sets them aside
	// again (counted and logged twice) nor folds them.
	setAside := map[int]bool{}
	for attempt := 0; attempt < maxFoldAttempts; attempt++ {
		c, err := r.load(ctx, ref, shard)
		if err != nil {
			r.log.ErrorContext(ctx, "loading a key's state failed: its records will be retried", "shard", shard, "key", key, "error", err.Error())
			return 0, false
		}
		st, err := r.op.NewState(key, c.blob)
		if err != nil {
			return r.unreadable(ctx, shard, ref, c.fence, its, err), false
		}
		if st.Outbox() > 0 && !c.sent {
			// The last writer may have died before its outputs reached the
			// stream: send them again (same ids).
			n, err := r.emit(ctx, st, true, outboxOf(key, c.version))
			if err != nil {
				r.log.ErrorContext(ctx, "re-sending a key's outputs failed: its records will be retried", "shard", shard, "key", key, "error", err.Error())
				return 0, false
			}
			r.stats.outputsResent.Add(int64(n))
		}
		st.Compact()
		var (
			aside       []setaside.Record
			asideAt     = map[int]bool{}
			last        string
			first, stop = -1, len(its)
			late        int
		)
		for i, it := range its {
			if c.fence != "" && stream.CompareSequence(it.seq, c.fence) <= 0 {
				continue // folded before: Lambda redelivered it
			}
			if first >= 0 && st.Size() >= r.set.FoldBytes {
				stop = i
				break
			}
			if first < 0 {
				first = i
			}
			if setAside[i] {
				last = it.seq
				continue
			}
			fate, rerr := st.Add(it.v, it.wm)
			switch fate {
			case Late, AddedLate:
				late++
			case Aside:
				if rerr == nil {
					rerr = &RecordError{Kind: setaside.KindStateBudget, Reason: "the key's state is full"}
				}
			}
			if rerr != nil { // with another fate: a part of the operator skips it
				rec := asideOf(it.rec, rerr.Field, rerr.Kind, rerr.Reason)
				// The ledger took its id when it judged the batch: a copy
				// put back would be dropped, or refused as a conflict.
				rec.IDTaken = it.cand >= 0
				aside = append(aside, rec)
				asideAt[i] = true
			}
			last = it.seq
		}
		if first < 0 {
			r.markSent(ref, shard, c.version)
			return -1, false
		}
		if stop == len(its) {
			st.Advance(wmEnd)
		} else {
			st.Advance(its[stop].wm)
		}
		if len(aside) > 0 {
			if err := r.setAside(ctx, aside); err != nil {
				return first, false
			}
			maps.Copy(setAside, asideAt)
		}
		blob, encErr := st.Encode(nil)
		if encErr != nil || len(blob) > r.set.MaxStateBytes {
			// The same state, records and watermark make the same blob (or
			// encoding error) on every retry: set the records aside, leave
			// the state as it is.
			var reason string
			if encErr != nil {
				reason = unencodableReason(ref, encErr)
				r.log.ErrorContext(ctx, "a key's state cannot be encoded: not written, its records are set aside", "shard", shard, "key", key, "error", echo(encErr))
			} else {
				reason = outgrownReason(ref, len(blob), st.Outbox(), r.set.MaxStateBytes)
				r.log.ErrorContext(ctx, "a key's state outgrew its item: not written, its records are set aside", "shard", shard, "key", key, "bytes", len(blob), "max", r.set.MaxStateBytes)
			}
			var rest []setaside.Record
			for i := first; i < stop; i++ {
				if asideAt[i] || setAside[i] || (c.fence != "" && stream.CompareSequence(its[i].seq, c.fence) <= 0) {
					continue
				}
				rest = append(rest, asideOf(its[i].rec, "key", setaside.KindStateBudget, reason))
			}
			if err := r.setAside(ctx, rest); err != nil {
				return first, false
			}
			if stop < len(its) {
				return stop, true // decided: the rest is the next round's
			}
			return -1, false
		}
		n, err := r.views.SaveKeyed(ctx, ref, shard, state.KeyedState{Blob: blob, Version: c.version}, last, r.openIn(shard), window.Window{End: dueAt(st)})
		r.stats.stateWrites.Add(int64(n))
		r.metric("WriteRequests", float64(n))
		if errors.Is(err, state.ErrKeyedConflict) {
			r.stats.refolds.Add(1)
			r.forget(ref, shard)
			continue
		}
		if err != nil {
			r.log.ErrorContext(ctx, "writing a key's state failed: its records will be retried", "shard", shard, "key", key, "error", err.Error())
			r.forget(ref, shard)
			if st.Outbox() > 0 {
				// Made with its answer lost, the write left outputs unsent
				// in a state that may not be due: list it as due at once
				// (see closeKey).
				_, _ = r.views.SaveKeyed(ctx, ref, shard, state.KeyedState{Blob: blob, Version: c.version + 1}, last, r.openIn(shard), window.Window{End: time.UnixMilli(1)})
			}
			return first, false
		}
		r.stats.late.Add(int64(late))
		r.metric("LateDropped", float64(late))
		r.remember(ref, shard, cached{version: c.version + 1, fence: last, blob: blob, sent: st.Outbox() == 0})
		if st.Outbox() > 0 {
			n, err := r.emit(ctx, st, false, outboxOf(key, c.version+1))
			if err != nil {
				r.log.ErrorContext(ctx, "putting a key's outputs failed: they are in its state and will be sent again", "shard", shard, "key", key, "error", err.Error())
				return first, false
			}
			r.stats.outputs.Add(int64(n))
			r.metric("Outputs", float64(n))
			r.markSent(ref, shard, c.version+1)
			r.settle(ctx, ref, shard, st, c.version+1, last)
		}
		if stop < len(its) {
			r.stats.foldCheckpoints.Add(1)
			r.metric("FoldCheckpoints", 1)
			return stop, true
		}
		return -1, false
	}
	r.log.ErrorContext(ctx, "a key's state kept changing under the fold: its records will be retried", "shard", shard, "key", key)
	return 0, false
}

// unreadable sets aside the records of a key whose stored state does not
// decode (written by code that stored another shape, or damaged), reason
// naming the key and the item, and reports them done. Retried, they would
// fail every batch holding one of them, and hold the shard, until Lambda
// gave up on it; and no retry can decode the state. The item is left as it
// is, for a person to read: deploy code that reads it, or delete it, then
// redrive the records. Records the state's fence shows folded before are
// not set aside again.
func (r *Runner[V]) unreadable(ctx context.Context, shard string, ref state.KeyedRef, fence string, its []*item[V], decodeErr error) int {
	reason := unreadableReason(ref, decodeErr)
	r.log.ErrorContext(ctx, "a key's stored state cannot be decoded: its records are set aside", "shard", shard, "key", ref.Key, "error", echo(decodeErr))
	aside := make([]setaside.Record, 0, len(its))
	for _, it := range its {
		if fence != "" && stream.CompareSequence(it.seq, fence) <= 0 {
			continue // folded before: Lambda redelivered it
		}
		aside = append(aside, asideOf(it.rec, "key", setaside.KindStateUnreadable, reason))
	}
	if err := r.setAside(ctx, aside); err != nil {
		return 0
	}
	return -1
}

// park deals with a listed key that a close can never write: its stored
// state does not decode (kind state-unreadable), or what the close adds to
// it outgrows its item (state-budget). Failing the close would fail every
// batch that moves the shard's watermark (and every tick) while the key
// stays listed. A copy of the item's state is set aside (source the item's
// partition key, sequence its sort key and version; field state), so it is
// counted and alarmed, and the item is written back as it is, unlisted: it
// waits for a person, and the key's records are set aside as they come. It
// returns ErrKeyedConflict when the item changed since it was read.
func (r *Runner[V]) park(ctx context.Context, shard string, ref state.KeyedRef, ks state.KeyedState, kind, reason string) (int, error) {
	pk, sk := ref.ItemKey()
	if err := r.setAside(ctx, []setaside.Record{{Source: pk, Sequence: sk + "@" + strconv.Itoa(ks.Version), PartitionKey: ref.Key,
		Data: ks.Blob, Field: "state", Kind: kind, Reason: reason}}); err != nil {
		return 0, fmt.Errorf("%s: setting aside the state of key %q (%s): %w", r.set.Name, ref.Key, kind, err)
	}
	n, err := r.views.SaveKeyed(ctx, ref, shard, state.KeyedState{Blob: ks.Blob, Version: ks.Version}, "", "", window.Window{})
	r.stats.stateWrites.Add(int64(n))
	r.metric("WriteRequests", float64(n))
	if err != nil && !errors.Is(err, state.ErrKeyedConflict) {
		return n, fmt.Errorf("%s: unlisting the state of key %q (%s): %w", r.set.Name, ref.Key, kind, err)
	}
	return n, err
}

// outgrownReason says why a key's records, or its state, are set aside
// when closing its windows makes a state its item cannot hold: the results
// wait in the item until they are on the stream.
func outgrownReason(ref state.KeyedRef, bytes, outputs, max int) string {
	pk, sk := ref.ItemKey()
	return fmt.Sprintf("the state of key %q (state table item pk %q, sk %q) would be %d bytes with the %d results it closes, over the %d its item holds: "+
		"lower the limits or the results' size (a hopping window merges size/advance panes), delete the item, then redrive",
		ref.Key, pk, sk, bytes, outputs, max)
}

// maxErrorEcho bounds the encoding or decoding error of a state that a
// reason or a log line repeats: a user's aggregate writes it, and it may
// quote the whole state (360,000 bytes), which the quarantine table would
// cut at its end, with what to do about it, and every batch and tick that
// meets the key would log again.
const maxErrorEcho = 512

// echo is err's message as a reason or a log line repeats it: cut in the
// middle to maxErrorEcho bytes, so its start and end remain.
func echo(err error) string { return strictjson.CutMiddle(err.Error(), maxErrorEcho) }

// unencodableReason says why a key's records, or its state, are set aside
// when the state fails to encode (a bug of the operator's aggregate, as
// its error says): the stored state is kept, nothing is written.
func unencodableReason(ref state.KeyedRef, encodeErr error) string {
	pk, sk := ref.ItemKey()
	return fmt.Sprintf("the state of key %q (state table item pk %q, sk %q) cannot be written: %s; the stored state is kept: fix what fails to encode, deploy, then redrive",
		ref.Key, pk, sk, echo(encodeErr))
}

// unreadableReason says why a key's records, or its state, are set aside
// when the state does not decode, and what a person does about it.
func unreadableReason(ref state.KeyedRef, decodeErr error) string {
	pk, sk := ref.ItemKey()
	return fmt.Sprintf("the stored state of key %q (state table item pk %q, sk %q) does not decode: %s; deploy code that reads it or delete the item, then redrive",
		ref.Key, pk, sk, echo(decodeErr))
}

// dueAt is when a state written now is next due: at once while it holds
// outputs not yet on the stream (listed due, a crash between this write
// and their put cannot strand them: the next batch or tick of the shard
// loads the key, sends them and lists it by its own next due time), else
// its own next due time.
func dueAt[V any](st State[V]) time.Time {
	if st.Outbox() > 0 {
		return time.UnixMilli(1)
	}
	return st.NextDue()
}

// emit puts a state's outbox on the output stream. An output Kinesis would
// never take is set aside instead (splitTooLarge), so it does not hold the key,
// and its shard, for good.
func (r *Runner[V]) emit(ctx context.Context, st State[V], resent bool, outbox string) (int, error) {
	recs, err := st.Render()
	var ue *UnrenderableError
	if errors.As(err, &ue) {
		recs, err = ue.Records, nil
		if r.kin != nil && r.stream != "" {
			// Rendered on no try, they would hold the key's shard for good.
			if err := r.setAside(ctx, unrenderedAside(ue.Aside, r.stream, outbox)); err != nil {
				return 0, err
			}
		}
	}
	if err != nil {
		return 0, err
	}
	if r.kin != nil && r.stream != "" {
		fit, aside := splitTooLarge(recs, r.stream, outbox)
		if len(aside) > 0 {
			// Put on no try, they would hold the key's shard for good.
			if err := r.setAside(ctx, aside); err != nil {
				return 0, err
			}
			recs = fit
		}
		if err := emit.Put(ctx, r.kin, r.stream, recs, r.backoff); err != nil {
			return 0, err
		}
	}
	if r.onEmit != nil {
		r.onEmit(ctx, recs, resent)
	}
	return len(recs), nil
}

// outboxOf names the outbox a key's state holds at version, for the
// outputs of it set aside: the same name, so the same quarantine items, on
// every try.
func outboxOf(key string, version int) string {
	return key + "@" + strconv.Itoa(version)
}

// splitTooLarge parts recs into those Kinesis takes (fit, in order) and,
// as records set aside, those it would never take (over its 1 MiB with the
// partition key): the output itself as the data, stream as the source,
// outbox#<index> as the sequence.
func splitTooLarge(recs []emit.Record, stream, outbox string) (fit []emit.Record, aside []setaside.Record) {
	for i, rec := range recs {
		n := limits.KinesisRecordSize(rec.Data, rec.PartitionKey)
		if n <= limits.KinesisRecordBytes {
			if aside != nil {
				fit = append(fit, rec)
			}
			continue
		}
		if aside == nil { // the first: copy what fit before it (none is copied when all fit)
			fit = append(make([]emit.Record, 0, len(recs)-1), recs[:i]...)
		}
		aside = append(aside, setaside.Record{Source: stream, Sequence: outbox + "#" + strconv.Itoa(i), PartitionKey: rec.PartitionKey,
			Data: rec.Data, Kind: setaside.KindOutputTooLarge,
			Reason: fmt.Sprintf("an output of key %q is %d bytes with its partition key; Kinesis takes at most %d, so it is set aside instead of put",
				rec.PartitionKey, n, limits.KinesisRecordBytes)})
	}
	if aside == nil {
		return recs, nil
	}
	return fit, aside
}

// unrenderedAside are the records set aside for outputs that cannot be
// rendered: what is known of each as the data, stream as the source,
// outbox#<index>/unrendered as the sequence (apart from splitTooLarge's).
func unrenderedAside(outs []Unrendered, stream, outbox string) []setaside.Record {
	aside := make([]setaside.Record, len(outs))
	for i, u := range outs {
		aside[i] = setaside.Record{Source: stream, Sequence: outbox + "#" + strconv.Itoa(u.Index) + "/unrendered", PartitionKey: u.PartitionKey,
			Data: u.Data, Field: u.Field, Kind: setaside.KindInvalid, Reason: u.Reason}
	}
	return aside
}

// setAside writes records aside (or reports that it could not).
func (r *Runner[V]) setAside(ctx context.Context, recs []setaside.Record) error {
	err := r.sink.SetAside(ctx, recs)
	if err == nil {
		r.stats.setAside.Add(int64(len(recs)))
		for i := range recs {
			if recs[i].Kind == setaside.KindStateBudget {
				r.metric("StateBudgetExceeded", 1)
			}
		}
		return nil
	}
	if !errors.Is(err, setaside.ErrNoSink) {
		r.log.ErrorContext(ctx, "setting records aside failed: they will be retried", "records", len(recs), "error", err.Error())
	}
	return err
}

// watermark returns shard's committed watermark (a copy), read from the
// store for every batch and merged with this environment's copy: the tick —
// in any of the function's execution environments — stores its advance of
// an idle shard and tells no other. Judged against an older copy, a record
// the stored watermark makes late was taken in by a warm environment and
// dropped by a cold one: whether a record is late would depend on where
// Lambda ran its batch. One consistent read per batch.
func (r *Runner[V]) watermark(ctx context.Context, shard string) (*window.Watermark, error) {
	stored, err := r.views.Watermark(ctx, r.set.Name, shard)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	wm, ok := r.marks[shard]
	if !ok {
		wm = window.NewWatermark(r.set.OutOfOrderness)
		r.marks[shard] = wm
	}
	if stored != nil {
		wm.Merge(stored)
	}
	c := *wm
	return &c, nil
}

// commit stores the batch's watermark as of its checkpoint and closes the
// other keys' windows it passed. With a backlog it stores through, the
// last record whose effects the batch committed ("": none), with it, also
// when only that moved: the tick reads the stream after it.
func (r *Runner[V]) commit(ctx context.Context, shard string, prev, wm *window.Watermark, through string) error {
	if r.backlog == nil || shard == state.SampleShard {
		through = "" // no tick reads it, or no stream holds the shard's records
	}
	r.mu.Lock()
	ahead := through != "" && through != r.through[shard]
	r.mu.Unlock()
	moved := wm.Current().After(prev.Current())
	observed := moved || !wm.MaxEventTime.Equal(prev.MaxEventTime)
	if observed || ahead {
		// The tick (or a duplicate invocation) may have stored a later
		// one: wm takes it. The position goes with it, so the tick knows
		// which of the shard's records are still to be processed; alone
		// when the batch moved no event time (records the operator
		// ignores), so that the tick's idle clock stored with it stays.
		var err error
		if observed {
			err = r.views.CommitWatermark(ctx, r.set.Name, shard, wm, through)
		} else {
			err = r.views.CommitPosition(ctx, r.set.Name, shard, through, wm)
		}
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.marks[shard] = wm
		if through != "" {
			r.through[shard] = strings.Clone(through) // the batch's strings are reused
		}
		r.mu.Unlock()
	}
	if !wm.Current().IsZero() {
		r.observe("WatermarkLagMs", float64(r.now().Sub(wm.Current()).Milliseconds()))
	}
	if moved {
		_, err := r.finalize(ctx, shard, wm.Current())
		return err
	}
	return nil
}

// finalize closes what the watermark wm passed in the states of shard's
// keys listed as due by then.
func (r *Runner[V]) finalize(ctx context.Context, shard string, wm time.Time) (int, error) {
	refs, err := r.views.OpenWindows(ctx, r.openIn(shard), wm)
	if err != nil {
		return 0, err
	}
	var (
		mu    sync.Mutex
		errs  []error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, r.concurrency)
		total int
	)
	for _, ref := range refs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			n, err := r.closeKey(ctx, shard, ref, wm)
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return total, errors.Join(errs...)
}

// closeKey advances one key's state to wm, writes it and sends the outputs.
func (r *Runner[V]) closeKey(ctx context.Context, shard string, ref state.Ref, wm time.Time) (int, error) {
	for attempt := 0; attempt < maxFoldAttempts; attempt++ {
		ks, kref, err := r.views.LoadKeyedRef(ctx, ref, shard)
		if err != nil {
			return 0, err
		}
		if ks.Version == 0 {
			return 0, nil // gone (expired)
		}
		if ks.ListedIn != r.openIn(shard) || ks.ListedUntil.After(wm) {
			// Nothing of it is due here: another close (a duplicate
			// invocation, the tick, this one's own write whose answer was
			// lost) got to it first, or the open index, which is
			// eventually consistent, still listed it. Closing it again
			// would set a parked key's state aside a second time.
			return 0, nil
		}
		st, err := r.op.NewState(kref.Key, ks.Blob)
		if err != nil {
			r.log.ErrorContext(ctx, "a listed key's stored state cannot be decoded: set aside and unlisted", "shard", shard, "key", kref.Key, "error", echo(err))
			n, err := r.park(ctx, shard, kref, ks, setaside.KindStateUnreadable, unreadableReason(kref, err))
			if errors.Is(err, state.ErrKeyedConflict) {
				r.forget(kref, shard)
				continue
			}
			return n, err
		}
		if st.Outbox() > 0 && !r.isSent(kref, shard, ks.Version) {
			n, err := r.emit(ctx, st, true, outboxOf(kref.Key, ks.Version))
			if err != nil {
				return 0, fmt.Errorf("%s: re-sending the outputs of key %q: %w", r.set.Name, kref.Key, err)
			}
			r.stats.outputsResent.Add(int64(n))
		}
		st.Compact()
		st.Advance(wm)
		blob, encErr := st.Encode(nil)
		if encErr != nil || len(blob) > r.set.MaxStateBytes {
			// What it closes would not fit the item (or encode) on any
			// retry: failing here would fail every batch that moves the
			// shard's watermark, and every tick, for good.
			var reason string
			if encErr != nil {
				reason = unencodableReason(kref, encErr)
				r.log.ErrorContext(ctx, "a listed key's state cannot be encoded when closing: set aside and unlisted", "shard", shard, "key", kref.Key, "error", echo(encErr))
			} else {
				reason = outgrownReason(kref, len(blob), st.Outbox(), r.set.MaxStateBytes)
				r.log.ErrorContext(ctx, "a listed key's state outgrew its item when closing: set aside and unlisted", "shard", shard, "key", kref.Key, "bytes", len(blob), "max", r.set.MaxStateBytes)
			}
			n, err := r.park(ctx, shard, kref, ks, setaside.KindStateBudget, reason)
			if errors.Is(err, state.ErrKeyedConflict) {
				r.forget(kref, shard)
				continue
			}
			return n, err
		}
		n, err := r.views.SaveKeyed(ctx, kref, shard, state.KeyedState{Blob: blob, Version: ks.Version}, "", r.openIn(shard), window.Window{End: dueAt(st)})
		r.stats.stateWrites.Add(int64(n))
		r.metric("WriteRequests", float64(n))
		if errors.Is(err, state.ErrKeyedConflict) {
			r.forget(kref, shard)
			continue
		}
		if err != nil {
			r.forget(kref, shard)
			if st.Outbox() > 0 {
				// The write may have been made and its answer lost (a
				// timeout): then the state holds outputs never sent and
				// may no longer be listed as due. List it as due at once
				// (a no-op if the write was not made: the old state is
				// still due), so the next batch or tick sends them.
				_, lerr := r.views.SaveKeyed(ctx, kref, shard, state.KeyedState{Blob: blob, Version: ks.Version + 1}, "", r.openIn(shard), window.Window{End: time.UnixMilli(1)})
				if lerr != nil && !errors.Is(lerr, state.ErrKeyedConflict) {
					err = errors.Join(err, lerr)
				}
			}
			return 0, err
		}
		r.remember(kref, shard, cached{version: ks.Version + 1, fence: ks.Fence, blob: blob, sent: st.Outbox() == 0})
		if st.Outbox() == 0 {
			return 0, nil
		}
		n, err = r.emit(ctx, st, false, outboxOf(kref.Key, ks.Version+1))
		if err != nil {
			// List the key as due at once, so the next batch or tick sends
			// the outbox again; were that write to fail too, the outbox is
			// sent when the key is next folded or closed.
			r.forget(kref, shard)
			_, lerr := r.views.SaveKeyed(ctx, kref, shard, state.KeyedState{Blob: blob, Version: ks.Version + 1}, "", r.openIn(shard), window.Window{End: time.UnixMilli(1)})
			return 0, errors.Join(fmt.Errorf("%s: putting the outputs of key %q: %w", r.set.Name, kref.Key, err), lerr)
		}
		r.stats.outputs.Add(int64(n))
		r.metric("Outputs", float64(n))
		r.markSent(kref, shard, ks.Version+1)
		r.settle(ctx, kref, shard, st, ks.Version+1, ks.Fence)
		return n, nil
	}
	return 0, state.ErrConflict
}

// TickResult is what one tick did.
type TickResult struct {
	Shards   int `json:"shards"`
	Advanced int `json:"advanced"` // idle shards whose watermark moved by processing time
	Outputs  int `json:"outputs"`  // records the closed windows emitted
}

// Tick advances idle shards' watermarks by processing time (after
// IdleTimeout without a newer event time; with WithBacklog, no further
// than the records still waiting on the stream allow) and closes what
// every shard's watermark has passed. A shard whose stream it cannot read
// is not advanced, and the tick fails naming it once every shard is done.
func (r *Runner[V]) Tick(ctx context.Context, now time.Time) (TickResult, error) {
	defer r.flushMetrics()
	var res TickResult
	// The shards' watermarks, and the last record each shard's batches
	// committed: records after it are still to come, whatever the clock
	// says.
	shards, err := r.views.Shards(ctx, r.set.Name, now)
	if err != nil {
		return res, err
	}
	marks, positions := shards.Watermarks, shards.Positions
	var errs []error
	for shard, wm := range marks {
		res.Shards++
		hold, waiting, err := backlog.IdleHold(ctx, r.backlog, shard, backlog.Stored(positions, marks, nil), wm, r.set.IdleTimeout, time.Time{}, now)
		switch {
		case err != nil:
			// Not known to be idle: no advance (hold may be zero, no
			// bound, for a watermark not set yet).
			errs = append(errs, fmt.Errorf("%s: %w", r.set.Name, err))
		default:
			if waiting {
				r.log.InfoContext(ctx, "idle advance waits for records not processed yet", "shard", shard, "after", positions[shard],
					"watermarkAtMost", hold.UTC().Format(time.RFC3339Nano))
			}
			if wm.AdvanceIdleHeld(now, r.set.IdleTimeout, hold) {
				res.Advanced++
			}
		}
		if _, err := r.views.SaveWatermark(ctx, r.set.Name, shard, wm); err != nil {
			return res, err
		}
		n, err := r.finalize(ctx, shard, wm.Current())
		res.Outputs += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}

func (r *Runner[V]) openIn(shard string) string { return r.set.Name + "#" + shard }

func cacheKey(ref state.KeyedRef, shard string) string { return ref.Key + "\x00" + shard }

func (r *Runner[V]) load(ctx context.Context, ref state.KeyedRef, shard string) (cached, error) {
	r.mu.Lock()
	c, ok := r.cache[cacheKey(ref, shard)]
	r.mu.Unlock()
	if ok {
		return c, nil
	}
	ks, err := r.views.LoadKeyed(ctx, ref, shard)
	if err != nil {
		return cached{}, err
	}
	return cached{version: ks.Version, fence: ks.Fence, blob: ks.Blob}, nil
}

func (r *Runner[V]) remember(ref state.KeyedRef, shard string, c cached) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cache) >= r.maxCacheKeys {
		r.cache = map[string]cached{}
	}
	r.cache[cacheKey(ref, shard)] = c
}

func (r *Runner[V]) forget(ref state.KeyedRef, shard string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cache, cacheKey(ref, shard))
}

// settle writes back st, at version and with its outbox now on the stream,
// without the outbox and listed at its own next due time. The write that
// stored the outbox listed the key as due at once, so that outputs a crash
// kept from the stream are sent by the next batch or tick; left so, a tick
// in another execution environment — which cannot know from memory that
// they were sent — would send them all again. It costs one conditional
// write for each key that had outputs; when it fails (another writer got
// there first, a timeout) the outbox may be sent again, at least once, as
// it would have been without it. fence is the shard's fence the state
// holds, kept in the cache.
func (r *Runner[V]) settle(ctx context.Context, ref state.KeyedRef, shard string, st State[V], version int, fence string) {
	st.Compact()
	blob, err := st.Encode(nil)
	if err != nil || len(blob) > r.set.MaxStateBytes {
		return // it encoded with the outbox; left as it is, it is only resent
	}
	n, err := r.views.SaveKeyed(ctx, ref, shard, state.KeyedState{Blob: blob, Version: version}, "", r.openIn(shard), window.Window{End: st.NextDue()})
	r.stats.stateWrites.Add(int64(n))
	r.metric("WriteRequests", float64(n))
	if err != nil {
		r.forget(ref, shard)
		if !errors.Is(err, state.ErrKeyedConflict) {
			r.log.WarnContext(ctx, "clearing a key's sent outputs from its state failed: they may be sent again", "shard", shard, "key", ref.Key, "error", err.Error())
		}
		return
	}
	r.remember(ref, shard, cached{version: version + 1, fence: fence, blob: blob, sent: true})
}

// markSent notes that the cached version's outbox is on the stream.
func (r *Runner[V]) markSent(ref state.KeyedRef, shard string, version int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := cacheKey(ref, shard)
	if c, ok := r.cache[k]; ok && c.version == version {
		c.sent = true
		r.cache[k] = c
	}
}

func (r *Runner[V]) isSent(ref state.KeyedRef, shard string, version int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.cache[cacheKey(ref, shard)]
	return ok && c.version == version && c.sent
}

func (r *Runner[V]) metric(name string, v float64) {
	if r.metrics != nil && v != 0 {
		r.metrics.Add(name, metrics.Count, v)
	}
}

func (r *Runner[V]) observe(name string, v float64) {
	if r.metrics != nil {
		r.metrics.Observe(name, metrics.Milliseconds, v)
	}
}

func (r *Runner[V]) flushMetrics() {
	if r.metrics == nil {
		return
	}
	if err := r.metrics.Flush(); err != nil {
		r.log.Warn("writing metrics failed", "error", err.Error())
	}
}

// shardOf reads the shard id from a Kinesis eventID ("shardId-000000000000:4959...").
func shardOf(eventID string) string {
	shard, _, _ := strings.Cut(eventID, ":")
	return shard
}

// candidateOf is a record's identity for the dedupe ledger.
func candidateOf(shard string, rec *stream.KinesisRecord, env *stream.Envelope) dedupe.Candidate {
	arrival := rec.ApproximateArrivalTimestamp
	if arrival.IsZero() {
		arrival = env.ReceivedAt
	}
	content, spelling := dedupe.ContentsOf(env.Type, env.OccurredAt, env.Data)
	return dedupe.Candidate{Key: strings.Clone(env.Key), Entry: dedupe.Entry{
		ID:      dedupe.IdentityOf(env.Key, env.ID),
		Content: content,
		Claim:   dedupe.ClaimOf(shard, rec.SequenceNumber),
		Arrival: uint32(arrival.Unix()),
	}, Spelling: spelling}
}

// idOf reads a record's event id for a message (the batch's envelope has
// moved on).
func idOf(rec *stream.KinesisRecord) string {
	var env stream.Envelope
	if rec.DecodeEnvelope(&env) != nil {
		return ""
	}
	return strings.Clone(env.ID)
}

// asideOf is the set-aside record of rec.
func asideOf(rec *stream.KinesisRecord, field, kind, reason string) setaside.Record {
	shard, _, _ := strings.Cut(rec.EventID, ":")
	return setaside.Record{Source: strings.Clone(rec.EventSourceARN), Shard: strings.Clone(shard), Sequence: strings.Clone(rec.SequenceNumber),
		PartitionKey: strings.Clone(rec.PartitionKey), ArrivedAt: rec.ApproximateArrivalTimestamp, Data: bytes.Clone(rec.Data),
		Field: field, Kind: kind, Reason: reason}
}

// poisonKind classifies an envelope decoding error.
func poisonKind(err error) (field, kind string) {
	var pe *stream.PoisonRecordError
	if errors.As(err, &pe) {
		field = pe.Field
	}
	if field == "" {
		return "", setaside.KindUnparseable
	}
	return field, setaside.KindInvalid
}

// StateExpiry is the TTL the functions give keyed state items
// (state.WithKeyedExpiry): the events stream's longest default retention
// (7 days, through which a replay may still need a key's fences) and a
// day. A windowed handler (package handler) keeps its keys' state this
// long past the latest their windows can close or be corrected.
const StateExpiry = 8 * 24 * time.Hour
