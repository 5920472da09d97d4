package projection

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// AttrVersion is the version attribute of every view item: the aggregate
// version of the last event applied to it.
const AttrVersion = "version"

// fencePrefix starts the attribute holding the sequence number of the last
// record of a shard applied to an item (package replay reads it).
const fencePrefix = "f_"

// FoldView keeps one item per aggregate, to which events apply in order.
type FoldView interface {
	// Name names the view in logs and set-aside reasons.
	Name() string
	// AggregateType is the type of aggregates the view covers.
	AggregateType() string
	// Key is the item of aggregateID.
	Key(aggregateID string) map[string]types.AttributeValue
	// Fold is the update applying events — consecutive versions of one
	// aggregate, following version after held by the item (0: no item
	// yet) — to the item. The projector adds the version and the fence. An
	// error is an *ApplyError: the event can never be applied.
	Fold(after int64, events []es.Event) (expression.UpdateBuilder, error)
}

// EntityView keeps items each fully determined by the last event that
// touched it. An item belongs to one aggregate.
type EntityView interface {
	Name() string
	AggregateType() string
	// Entities are the items e sets, whole (keys included). An error is an
	// *ApplyError.
	Entities(e es.Event) ([]map[string]types.AttributeValue, error)
}

// StateView keeps an aggregate's current state, read from the event store.
type StateView interface {
	Name() string
	AggregateType() string
	// Current is the view's item of aggregateID as the store has it now
	// (keys included), and its version; nil when it has none.
	Current(ctx context.Context, aggregateID string) (map[string]types.AttributeValue, int64, error)
}

// Views are the views a projector keeps.
type Views struct {
	Folds    []FoldView
	Entities []EntityView
	States   []StateView
}

// ApplyError is an event a view can never apply as it is.
type ApplyError struct {
	View    string
	Event   string // <aggregateId>/<version>
	Field   string // the event's field at fault, for example "data.seats"
	Reason  string
	Version int64
	// Kind is the set-aside kind (setaside.KindInvalid when empty;
	// setaside.KindOutputTooLarge for an item over DynamoDB's limit;
	// setaside.KindNotInLog when the event is not the log's: its version
	// was never appended, or the log holds another event at it, so no view
	// applies it and a copy put back would be set aside again).
	Kind string
}

func (e *ApplyError) Error() string {
	if e.View == "" {
		return fmt.Sprintf("no view applies event %s: %s: %s", e.Event, e.Field, e.Reason)
	}
	return fmt.Sprintf("view %s cannot apply event %s: %s: %s", e.View, e.Event, e.Field, e.Reason)
}

// Table is where a projector writes: the views table current now.
type Table interface {
	Current(ctx context.Context) string
}

// FixedTable is a Table that never changes.
type FixedTable string

// Current implements Table.
func (t FixedTable) Current(context.Context) string { return string(t) }

// viewsAPI is what the projector needs of DynamoDB.
type viewsAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

var _ viewsAPI = (*dynamodb.Client)(nil)

// eventReader reads events back from the store, to fill gaps.
type eventReader interface {
	Events(ctx context.Context, aggregateID string, after, upTo int64) ([]es.Event, error)
}

var _ eventReader = (*es.Store)(nil)

// Stats are a projector's counters since it was made.
type Stats struct {
	EventsApplied int64 // events whose records were applied to every view
	Writes        int64 // item writes made (conditional writes that failed included)
	GapFills      int64 // reads of missing versions from the store
	SetAside      int64
}

// Projector is the projector function: published events in, views out.
type Projector struct {
	db       viewsAPI
	log      eventReader
	table    Table
	views    Views
	noStates bool
	sink     *setaside.Sink
	metrics  *metrics.Logger
	logger   *slog.Logger
	now      func() time.Time
	onLag    func(time.Duration)

	mu    sync.Mutex
	stats Stats
}

// Option configures a Projector.
type Option func(*Projector)

// WithoutStateViews leaves the StateViews to the commands, which write
// them in their transactions: the live projector's setting. For (a rebuild
// or catch-up) writes them again.
func WithoutStateViews() Option { return func(p *Projector) { p.noStates = true } }

// WithSetAside is where records that can never be applied go.
func WithSetAside(s *setaside.Sink) Option { return func(p *Projector) { p.sink = s } }

// WithMetrics emits EventsIn, EventsApplied (events whose views are
// written, or were already: redelivered ones count again), GapFills,
// RecordsSetAside and ProjectionLag (milliseconds from an event's recording
// to its views being written) per batch.
func WithMetrics(m *metrics.Logger) Option { return func(p *Projector) { p.metrics = m } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(p *Projector) { p.logger = l } }

// WithClock sets the clock (time.Now).
func WithClock(now func() time.Time) Option { return func(p *Projector) { p.now = now } }

// WithLagObserver receives each applied event's lag (benchmarks).
func WithLagObserver(f func(time.Duration)) Option { return func(p *Projector) { p.onLag = f } }

// New returns a projector keeping views in table, filling gaps from log.
func New(db viewsAPI, log eventReader, table Table, views Views, opts ...Option) *Projector {
	p := &Projector{db: db, log: log, table: table, views: views, now: time.Now,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(p)
	}
	return p
}

// For is a projector writing every view (StateViews included) to table,
// with p's other settings: what a rebuild or a catch-up runs.
func (p *Projector) For(table string) *Projector {
	return &Projector{db: p.db, log: p.log, table: FixedTable(table), views: p.views, sink: p.sink, metrics: p.metrics,
		logger: p.logger, now: p.now, onLag: p.onLag}
}

// Stats returns the counters so far.
func (p *Projector) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

func (p *Projector) add(f func(s *Stats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}

// deadlineMargin is kept before the invoke deadline to answer.
const deadlineMargin = 500 * time.Millisecond

// record is one decoded record of a batch.
type record struct {
	rec   *events.KinesisEventRecord
	event es.Event
}

// HandleBatch is Handle: package replay feeds it.
func (p *Projector) HandleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	return p.Handle(ctx, ev)
}

// Handle applies a batch of published events to the views. Records that
// are not published events are set aside; the events of each aggregate are
// applied together, each view with its fence. It reports the first record
// of the first aggregate it could not apply (throttling, a timeout), so
// Lambda redelivers from there.
func (p *Projector) Handle(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	if err := stream.CheckKinesisEvent(&ev); err != nil {
		return events.KinesisEventResponse{}, fmt.Errorf("project: %w", err)
	}
	ctx, cancel := batch.Reserve(ctx, deadlineMargin)
	defer cancel()
	table := p.table.Current(ctx)
	var failures batch.StreamFailures
	var aside []setaside.Record
	groups := map[string][]record{}
	var order []string
	for i := range ev.Records {
		r := &ev.Records[i]
		e, err := es.DecodePublished(r.Kinesis.Data)
		if err != nil {
			sr := setaside.FromKinesis(r)
			sr.Kind, sr.Reason = setaside.KindUnparseable, err.Error()
			var re *es.RecordError
			if errors.As(err, &re) {
				sr.Field, sr.Reason, sr.Kind = re.Field, re.Reason, setaside.KindInvalid
			}
			aside = append(aside, sr)
			continue
		}
		if r.Kinesis.PartitionKey != e.AggregateID {
			// publish puts each event with its aggregate as the partition
			// key, so that one aggregate's events are on one shard, in
			// order: this record was put by hand.
			sr := setaside.FromKinesis(r)
			sr.Kind, sr.Field = setaside.KindInvalid, "key"
			sr.Reason = fmt.Sprintf("%s is not the record's partition key %s: publish puts every event with its aggregate id as the partition key, so this record was not published from the event store",
				strictjson.QuoteCut(e.AggregateID, 64), strictjson.QuoteCut(r.Kinesis.PartitionKey, 64))
			aside = append(aside, sr)
			continue
		}
		if _, ok := groups[e.AggregateID]; !ok {
			order = append(order, e.AggregateID)
		}
		groups[e.AggregateID] = append(groups[e.AggregateID], record{rec: r, event: e})
	}
	applied := 0
	for _, agg := range order {
		g := groups[agg]
		if err := ctx.Err(); err != nil {
			failures.Add(g[0].rec.Kinesis.SequenceNumber)
			continue
		}
		fence, err := fenceOf(g[len(g)-1].rec)
		if err != nil {
			failures.Add(g[0].rec.Kinesis.SequenceNumber)
			p.logger.ErrorContext(ctx, "record without a shard sequence number", "error", err)
			continue
		}
		evs := make([]es.Event, len(g))
		for i := range g {
			evs[i] = g[i].event
		}
		stuck, logged, err := p.apply(ctx, table, evs, fence, false)
		if err != nil {
			failures.Add(g[0].rec.Kinesis.SequenceNumber)
			p.logger.ErrorContext(ctx, "events not applied to the views; Lambda redelivers them", "aggregate", agg, "error", err)
			continue
		}
		for _, r := range g {
			if ae := verdict(&r.event, stuck, logged); ae != nil {
				sr := setaside.FromKinesis(r.rec)
				sr.Kind, sr.Field, sr.Reason = cmp.Or(ae.Kind, setaside.KindInvalid), ae.Field, ae.Error()
				aside = append(aside, sr)
				continue
			}
			applied++
			p.observeLag(r.event)
		}
	}
	if len(aside) > 0 {
		if err := p.sink.SetAside(ctx, aside); err != nil {
			p.logger.ErrorContext(ctx, "records not set aside; they will be retried", "records", len(aside), "error", err)
			for _, a := range aside {
				failures.Add(a.Sequence)
			}
		} else {
			p.add(func(s *Stats) { s.SetAside += int64(len(aside)) })
		}
	}
	p.add(func(s *Stats) { s.EventsApplied += int64(applied) })
	if p.metrics != nil {
		p.metrics.Add("EventsIn", metrics.Count, float64(len(ev.Records)))
		p.metrics.Add("EventsApplied", metrics.Count, float64(applied))
		p.metrics.Add(setaside.Metric, metrics.Count, 0)
		if err := p.metrics.Flush(); err != nil {
			p.logger.WarnContext(ctx, "flushing metrics", "error", err)
		}
	}
	return failures.Kinesis(), nil
}

func (p *Projector) observeLag(e es.Event) {
	if e.RecordedAt.IsZero() {
		return
	}
	lag := p.now().Sub(e.RecordedAt)
	p.metrics.Observe("ProjectionLag", metrics.Milliseconds, float64(lag.Milliseconds()))
	if p.onLag != nil {
		p.onLag(lag)
	}
}

// fenceOf is the fence attribute and value of a Kinesis record: f_<shard>
// and its sequence number zero-padded.
func fenceOf(r *events.KinesisEventRecord) ([2]string, error) {
	shard, _, ok := strings.Cut(r.EventID, ":")
	if !ok || shard == "" {
		return [2]string{}, fmt.Errorf("eventID %q does not name the shard", r.EventID)
	}
	f, err := state.Fence(r.Kinesis.SequenceNumber)
	if err != nil {
		return [2]string{}, err
	}
	return [2]string{fencePrefix + shard, f}, nil
}

// ApplyLog applies a run of one aggregate's events read from the store
// (es.ScanLog) to every view in table, StateViews included: a rebuild's
// first pass. Events a view can never apply are returned as errors, not
// set aside (they are not records of the stream).
func (p *Projector) ApplyLog(ctx context.Context, table string, run []es.Event) error {
	stuck, _, err := p.apply(ctx, table, run, [2]string{}, true)
	if err != nil {
		return err
	}
	var errs []error
	for _, v := range slices.Sorted(mapsKeys(stuck)) {
		errs = append(errs, stuck[v])
	}
	return errors.Join(errs...)
}

func mapsKeys(m map[int64]*ApplyError) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// apply applies evs, events of one aggregate in the order received, to
// every view. stuck maps the versions some view could never apply to why.
// Events from the stream are first held to the log, and the views apply
// the log's events (trusted): logged holds those read, for each record to
// be judged against (verdict). fromLog says evs were read from it (a
// rebuild).
func (p *Projector) apply(ctx context.Context, table string, evs []es.Event, fence [2]string, fromLog bool) (stuck map[int64]*ApplyError, logged map[int64]*es.Event, err error) {
	stuck = map[int64]*ApplyError{}
	evs = ordered(evs)
	if !fromLog && len(p.views.Folds)+len(p.views.Entities) > 0 {
		if evs, logged, err = p.trusted(ctx, evs, stuck); err != nil {
			return nil, nil, err
		}
		if len(evs) == 0 {
			return stuck, logged, nil
		}
	}
	// The log's type: a record's own aggregateType is the producer's word.
	typ := evs[0].AggregateType
	// A view's own refusal marks the event and those after it; an event
	// not the log's keeps that reason.
	mark := func(ae *ApplyError) {
		for _, e := range evs {
			if e.Version >= ae.Version && stuck[e.Version] == nil {
				stuck[e.Version] = ae
			}
		}
	}
	for _, v := range p.views.Folds {
		if v.AggregateType() != typ {
			continue
		}
		ae, err := p.fold(ctx, table, v, evs, fence)
		if err != nil {
			return nil, nil, fmt.Errorf("view %s: %w", v.Name(), err)
		}
		if ae != nil {
			mark(ae)
		}
	}
	for _, v := range p.views.Entities {
		if v.AggregateType() != typ {
			continue
		}
		if err := p.entities(ctx, table, v, evs, fence, stuck); err != nil {
			return nil, nil, fmt.Errorf("view %s: %w", v.Name(), err)
		}
	}
	if !p.noStates {
		for _, v := range p.views.States {
			if v.AggregateType() != typ {
				continue
			}
			err := p.state(ctx, table, v, evs[0].AggregateID, evs[len(evs)-1].Version, fence)
			var ae *ApplyError
			if errors.As(err, &ae) {
				mark(ae)
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("view %s: %w", v.Name(), err)
			}
		}
	}
	return stuck, logged, nil
}

// ordered sorts one aggregate's events by version and drops repeats (a
// record published twice).
func ordered(evs []es.Event) []es.Event {
	out := slices.Clone(evs)
	slices.SortStableFunc(out, func(a, b es.Event) int { return int(a.Version - b.Version) })
	return slices.CompactFunc(out, func(a, b es.Event) bool { return a.Version == b.Version })
}

// maxFoldRounds bounds the rounds of one fold: each round either writes, or
// learns the item's version and narrows or fills the range.
const maxFoldRounds = 5

// fold applies evs (ordered) to v's item of their aggregate with one
// conditional UpdateItem, after dropping what the item holds and filling
// what it lacks from the store. It returns an *ApplyError when an event can
// never be applied; the events before it are applied.
func (p *Projector) fold(ctx context.Context, table string, v FoldView, evs []es.Event, fence [2]string) (*ApplyError, error) {
	agg := evs[0].AggregateID
	after := evs[0].Version - 1
	evs, failed, err := p.contiguous(ctx, evs)
	if err != nil {
		return nil, err
	}
	if failed != nil {
		failed.View = v.Name()
	}
	for range maxFoldRounds {
		if len(evs) == 0 {
			return failed, nil
		}
		upd, err := v.Fold(after, evs)
		if err != nil {
			var ae *ApplyError
			if !errors.As(err, &ae) {
				return nil, err
			}
			// Apply what comes before the event it cannot take.
			failed = ae
			i := slices.IndexFunc(evs, func(e es.Event) bool { return e.Version >= ae.Version })
			if i <= 0 {
				return failed, nil
			}
			evs = evs[:i]
			continue
		}
		last := evs[len(evs)-1].Version
		upd = upd.Set(expression.Name(AttrVersion), expression.Value(last))
		if fence[0] != "" {
			upd = upd.Set(expression.Name(fence[0]), expression.Value(fence[1]))
		}
		cond := expression.AttributeNotExists(expression.Name(AttrVersion))
		if after > 0 {
			cond = expression.Name(AttrVersion).Equal(expression.Value(after))
		}
		e, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
		if err != nil {
			return nil, fmt.Errorf("update of %s: %w", agg, err)
		}
		p.add(func(s *Stats) { s.Writes++ })
		_, err = p.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: v.Key(agg),
			UpdateExpression: e.Update(), ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(),
			ExpressionAttributeValues: e.Values(), ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
		if limits.IsItemTooLarge(err) {
			// The item would pass 400 KB: its last event cannot be
			// applied, nor any after it (a fold is in order); set them
			// aside and apply the ones before, which may fit.
			e := evs[len(evs)-1]
			failed = &ApplyError{View: v.Name(), Event: e.ID(), Version: e.Version, Kind: setaside.KindOutputTooLarge,
				Reason: "the view's item would be over DynamoDB's 400 KB with this event: " + err.Error()}
			evs = evs[:len(evs)-1]
			continue
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			if err != nil {
				return nil, fmt.Errorf("applying %s versions %d to %d: %w", agg, evs[0].Version, last, err)
			}
			return failed, nil
		}
		have := int64(0)
		if n, ok := ccf.Item[AttrVersion].(*types.AttributeValueMemberN); ok {
			have, _ = strconv.ParseInt(n.Value, 10, 64)
		}
		switch {
		case have >= last: // all applied already
			return failed, nil
		case have >= evs[0].Version: // some applied: the rest
			evs, after = evs[have-evs[0].Version+1:], have
		default: // a gap before them: read the missing versions from the log
			missing, err := p.missing(ctx, agg, have, evs[0].Version)
			var past *ApplyError
			if errors.As(err, &past) {
				past.View = v.Name()
				return past, nil // evs all follow the gap
			}
			if err != nil {
				return nil, err
			}
			evs, after = append(missing, evs...), have
		}
	}
	return nil, fmt.Errorf("%s kept changing under the fold of its events (another writer on the same item)", agg)
}

// contiguous fills the gaps between evs (ordered) from the log: a batch
// may hold versions 5 and 7 with 6 still on its way. An event past a gap
// the log cannot fill is returned as the *ApplyError (its View unset),
// with the events before it.
func (p *Projector) contiguous(ctx context.Context, evs []es.Event) ([]es.Event, *ApplyError, error) {
	out := evs[:1:1]
	for _, e := range evs[1:] {
		if prev := out[len(out)-1].Version; e.Version > prev+1 {
			missing, err := p.missing(ctx, e.AggregateID, prev, e.Version)
			var past *ApplyError
			if errors.As(err, &past) {
				return out, past, nil
			}
			if err != nil {
				return nil, nil, err
			}
			out = append(out, missing...)
		}
		out = append(out, e)
	}
	return out, nil, nil
}

// missing reads agg's versions after `after` and before `before` from the
// log (a consistent read: they were appended before any later version).
// When the log does not hold them all, no retry can change that: the event
// at before was never appended (a hand-made record, or one of an events
// table since replaced), and the error is an *ApplyError naming its
// data.version (View unset: the caller's).
func (p *Projector) missing(ctx context.Context, agg string, after, before int64) ([]es.Event, error) {
	if before <= after+1 {
		return nil, nil
	}
	evs, err := p.log.Events(ctx, agg, after, before-1)
	if err != nil {
		return nil, err
	}
	p.add(func(s *Stats) { s.GapFills++ })
	p.metrics.Add("GapFills", metrics.Count, 1)
	if int64(len(evs)) != before-1-after {
		return nil, &ApplyError{Event: fmt.Sprintf("%s/%d", agg, before), Version: before, Field: "data.version", Kind: setaside.KindNotInLog,
			Reason: fmt.Sprintf("the event store holds %d of %s's versions %d to %d, which come before it: no such event was appended", len(evs), agg, after+1, before-1)}
	}
	return evs, nil
}

// trusted holds evs (one aggregate, ordered) to the log with one
// consistent read of their versions, and returns the log's events for the
// views to apply, as their published records carry them, and the log's
// events read, by version. A version the log never had (a record made by
// hand, or of an events table since replaced) is marked stuck (setaside.KindNotInLog)
// and left out. The records themselves are judged by verdict: one the log
// holds as another event (made by hand with the next version, which the
// fold would apply and its fence then keep the real one out) is set aside
// while the log's is applied.
func (p *Projector) trusted(ctx context.Context, evs []es.Event, stuck map[int64]*ApplyError) ([]es.Event, map[int64]*es.Event, error) {
	agg, first, last := evs[0].AggregateID, evs[0].Version, evs[len(evs)-1].Version
	held, err := p.log.Events(ctx, agg, first-1, last)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s's versions %d to %d back: %w", agg, first, last, err)
	}
	logged := make(map[int64]*es.Event, len(held))
	top := first - 1
	for i := range held {
		logged[held[i].Version] = &held[i]
		top = max(top, held[i].Version)
	}
	out := make([]es.Event, 0, len(evs))
	for _, e := range evs {
		h := logged[e.Version]
		if h == nil {
			stuck[e.Version] = &ApplyError{Event: e.ID(), Version: e.Version, Field: "data.version", Kind: setaside.KindNotInLog,
				Reason: fmt.Sprintf("the event store holds %s up to version %d: no such event was appended", agg, top)}
			continue
		}
		out = append(out, published(h))
	}
	return out, logged, nil
}

// verdict is why the record of e is set aside (nil: it is applied): it
// is not the log's event at its version (logged, when the log was read),
// or its version is stuck. Each record is judged, two of one version
// included (ordered keeps one of them for the views).
func verdict(e *es.Event, stuck map[int64]*ApplyError, logged map[int64]*es.Event) *ApplyError {
	if h := logged[e.Version]; h != nil {
		if field := differs(e, h); field != "" {
			return &ApplyError{Event: e.ID(), Version: e.Version, Field: field, Kind: setaside.KindNotInLog,
				Reason: fmt.Sprintf("is not what the event store holds at version %d (command %q), so this record was not published from it: the views apply the stored event", e.Version, h.CommandID)}
		}
	}
	return stuck[e.Version]
}

// differs names the first field where e, read from a published record,
// is not the log's event h ("" when it is the same event): the data
// compared as JSON values (publishing compacts it).
func differs(e, h *es.Event) string {
	switch {
	case e.Type != h.Type:
		return "type"
	case e.AggregateType != h.AggregateType:
		return "data.aggregateType"
	case e.CommandID != h.CommandID:
		return "data.commandId"
	case !e.RecordedAt.Equal(h.RecordedAt):
		return "data.recordedAt"
	case !sameJSON(e.Data, h.Data):
		return "data.data"
	}
	return ""
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&va) != nil || db.Decode(&vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// published is the log's event h as its published record carries it:
// without its personal data, which the views never hold.
func published(h *es.Event) es.Event {
	e := *h
	e.Personal, e.Subject, e.ErasedAt = nil, "", time.Time{}
	return e
}

// entities puts each item v sets, the last event's version of each, whole,
// unless the item is at that version or newer.
func (p *Projector) entities(ctx context.Context, table string, v EntityView, evs []es.Event, fence [2]string, stuck map[int64]*ApplyError) error {
	type put struct {
		item    map[string]types.AttributeValue
		version int64
	}
	latest := map[string]put{}
	var keys []string
	for _, e := range evs {
		items, err := v.Entities(e)
		var ae *ApplyError
		if errors.As(err, &ae) {
			stuck[e.Version] = ae
			continue
		}
		if err != nil {
			return err
		}
		for _, it := range items {
			k := keyString(it)
			if _, ok := latest[k]; !ok {
				keys = append(keys, k)
			}
			latest[k] = put{item: it, version: e.Version}
		}
	}
	for _, k := range keys {
		pt := latest[k]
		item := make(map[string]types.AttributeValue, len(pt.item)+2)
		for a, val := range pt.item {
			item[a] = val
		}
		item[AttrVersion] = &types.AttributeValueMemberN{Value: strconv.FormatInt(pt.version, 10)}
		if fence[0] != "" {
			item[fence[0]] = &types.AttributeValueMemberS{Value: fence[1]}
		}
		if ae := tooLarge(v.Name(), item, evs[0].AggregateID, pt.version); ae != nil {
			stuck[pt.version] = ae
			continue
		}
		if err := p.putNewer(ctx, table, item, pt.version); err != nil {
			return err
		}
	}
	return nil
}

// tooLarge is the *ApplyError of an item over DynamoDB's 400 KB, which no
// retry would write: the event that made it is set aside naming the
// attribute, where a plain error would fail its records for ever.
func tooLarge(view string, item map[string]types.AttributeValue, agg string, version int64) *ApplyError {
	var tl *limits.TooLargeError
	if !errors.As(limits.CheckItem(item), &tl) {
		return nil
	}
	return &ApplyError{View: view, Event: agg + "/" + strconv.FormatInt(version, 10), Field: tl.Field, Reason: tl.Error(),
		Version: version, Kind: setaside.KindOutputTooLarge}
}

// state puts v's current item of agg, at least at version atLeast.
func (p *Projector) state(ctx context.Context, table string, v StateView, agg string, atLeast int64, fence [2]string) error {
	item, version, err := v.Current(ctx, agg)
	if err != nil {
		return err
	}
	if item == nil {
		return nil
	}
	// The store's read is consistent: events past its version were never
	// appended (a hand-made record, or one of an events table since
	// replaced), and no retry brings them. The item is put at the store's
	// version and they are an *ApplyError from the first of them.
	var past *ApplyError
	if version < atLeast {
		past = &ApplyError{View: v.Name(), Event: fmt.Sprintf("%s/%d", agg, atLeast), Version: version + 1, Field: "data.version", Kind: setaside.KindNotInLog,
			Reason: fmt.Sprintf("the event store has %s at version %d: no event after it was appended", agg, version)}
	}
	if fence[0] != "" {
		item[fence[0]] = &types.AttributeValueMemberS{Value: fence[1]}
	}
	if ae := tooLarge(v.Name(), item, agg, min(atLeast, version)); ae != nil {
		return ae
	}
	if err := p.putNewer(ctx, table, item, version); err != nil {
		return err
	}
	if past != nil {
		return past
	}
	return nil
}

// putNewer puts item unless the table holds it at version or newer.
func (p *Projector) putNewer(ctx context.Context, table string, item map[string]types.AttributeValue, version int64) error {
	if err := limits.CheckItem(item); err != nil {
		return err
	}
	p.add(func(s *Stats) { s.Writes++ })
	_, err := p.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item,
		ConditionExpression:       aws.String("attribute_not_exists(#v) OR #v < :v"),
		ExpressionAttributeNames:  map[string]string{"#v": AttrVersion},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: strconv.FormatInt(version, 10)}}})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // as new or newer already
	}
	if err != nil {
		return fmt.Errorf("putting a view item at version %d: %w", version, err)
	}
	return nil
}

// keyString identifies an item by its pk and sk (the views table's keys),
// the partition key's length first, so that no two keys share one
// ("a b"+"c" and "a"+"b c" were one, and only one of the items written).
func keyString(item map[string]types.AttributeValue) string {
	s := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	pk := s("pk")
	return strconv.Itoa(len(pk)) + ":" + pk + s("sk")
}
