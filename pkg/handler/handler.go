package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/envvar"
	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/backlog"
	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/emit"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// The environment variables FromEnv reads (the construct
// tributary.NewStreamHandler sets them).
const (
	EnvStateTable      = "STATE_TABLE_NAME"
	EnvOutputStream    = "OUTPUT_STREAM_NAME"
	EnvQuarantineTable = "QUARANTINE_TABLE_NAME"
	// EnvEventsStream names the stream the handler reads (optional): the
	// tick reads it before it takes a shard for idle (Config.Backlog).
	EnvEventsStream = backlog.EnvStream
)

// DynamoDB is what a handler needs of DynamoDB: its state and watermarks
// (package state), the dedupe ledger (package dedupe) and the quarantine
// table (package setaside). *dynamodb.Client is one.
type DynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var (
	_ DynamoDB     = (*dynamodb.Client)(nil)
	_ dedupe.Store = DynamoDB(nil)
	_ emit.Putter  = (*kinesis.Client)(nil)
)

// Config is where a handler keeps its state and sends its output.
type Config struct {
	// Name names the handler's state items, its results' ids and its
	// metrics' Function dimension: lower-case letters, digits and '-'.
	Name string
	// StateTable is a table with package state's schema (keys pk and sk,
	// index "open" on openIn and openUntil, TTL on expiresAt).
	StateTable string
	// OutputStream is the Kinesis stream final results are put on (empty:
	// results are kept in state only, for tests).
	OutputStream string
	// QuarantineTable is where records that can never be added are set
	// aside (empty: they are reported as batch item failures instead, so
	// nothing is lost).
	QuarantineTable string
	DynamoDB        DynamoDB
	Kinesis         emit.Putter
	// Backlog is what the tick asks, before it advances an idle-looking
	// shard's watermark by the clock, whether the stream the handler
	// reads still holds records it has not processed (FromEnv:
	// backlog.New on EVENTS_STREAM_NAME). nil: the clock alone decides.
	Backlog backlog.Reader
	// Function is the Lambda function's name recorded with each record set
	// aside (FromEnv: AWS_LAMBDA_FUNCTION_NAME).
	Function string
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// FromEnv is the Config of a handler named name running on Lambda (or under
// the local runner): the AWS clients from the function's environment and
// the tables and stream from STATE_TABLE_NAME, OUTPUT_STREAM_NAME and
// QUARANTINE_TABLE_NAME, and, when EVENTS_STREAM_NAME is set, the Backlog
// on that stream. The error names every variable that is missing or not a
// name the service takes.
func FromEnv(name string) (Config, error) {
	return configFrom(name, os.LookupEnv)
}

func configFrom(name string, lookup func(string) (string, bool)) (Config, error) {
	get := func(k string) string { v, _ := lookup(k); return v }
	var errs []error
	for _, v := range []struct {
		name, what string
		kind       envvar.Kind
	}{
		{EnvStateTable, "the DynamoDB table (keys pk/sk, index open, TTL expiresAt) holding the handler's state", envvar.Table},
		{EnvOutputStream, "the Kinesis stream final results are put on", envvar.Stream},
		{EnvQuarantineTable, "the DynamoDB table records that can never be added are set aside in", envvar.Table},
	} {
		if _, err := envvar.Name(lookup, v.name, v.what, v.kind); err != nil {
			errs = append(errs, err)
		}
	}
	events, err := backlog.StreamFromEnv(lookup)
	if err != nil {
		errs = append(errs, err)
	}
	aws, err := lambdamain.Config(lookup)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	kin := kinesis.NewFromConfig(aws)
	cfg := Config{Name: name, StateTable: get(EnvStateTable), OutputStream: get(EnvOutputStream), QuarantineTable: get(EnvQuarantineTable),
		DynamoDB: dynamodb.NewFromConfig(aws), Kinesis: kin, Function: get("AWS_LAMBDA_FUNCTION_NAME")}
	if events != "" {
		cfg.Backlog = backlog.New(kin, events)
	}
	return cfg, nil
}

// checkNames checks the tables' and stream's names given as FromEnv
// checks its variables: a name the service cannot take fails here, naming
// the field, not every batch with a ValidationException.
func (c Config) checkNames() error {
	var errs []error
	for _, n := range []struct {
		field, name string
		kind        envvar.Kind
	}{
		{"Config.StateTable", c.StateTable, envvar.Table},
		{"Config.OutputStream", c.OutputStream, envvar.Stream},
		{"Config.QuarantineTable", c.QuarantineTable, envvar.Table},
	} {
		if n.name == "" {
			continue // required or not: said apart
		}
		if err := envvar.Check(n.name, n.kind); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.field, err))
		}
	}
	return errors.Join(errs...)
}

// Option configures a handler.
type Option func(*options)

type options struct {
	win                           windows
	otherKind                     string // a window option of another kind given before win's, if any
	late                          window.LateRule
	outOfOrderness, idle, horizon time.Duration
	lim                           Limits
	log                           *slog.Logger
	metrics                       io.Writer
	now                           func() time.Time
	concurrency                   int
}

// WithOutOfOrderness sets how far behind a shard's newest event time its
// watermark stays (default DefaultOutOfOrderness): a window is final once
// the watermark passes its end, and a record for a final window is late
// (see WithLatePolicy).
func WithOutOfOrderness(d time.Duration) Option { return func(o *options) { o.outOfOrderness = d } }

// WithIdleTimeout sets how long a shard may see no newer event time before
// the scheduled tick advances its watermark by processing time (default
// DefaultIdleTimeout), so its last windows close.
func WithIdleTimeout(d time.Duration) Option { return func(o *options) { o.idle = d } }

// WithDedupeHorizon sets how long an event id suppresses a producer's
// copies (default DefaultDedupeHorizon, at most MaxDedupeHorizon); 0
// turns producer dedupe off (Lambda's redeliveries are still applied once).
func WithDedupeHorizon(d time.Duration) Option { return func(o *options) { o.horizon = d } }

// WithLimits bounds a key's state (default DefaultLimits).
func WithLimits(l Limits) Option { return func(o *options) { o.lim = l } }

// WithLogger logs failures and records set aside (FromEnv handlers: JSON
// on stderr).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithMetrics writes CloudWatch EMF metrics to w after each batch and tick
// (default os.Stdout, where Lambda's log agent reads them; nil: none).
func WithMetrics(w io.Writer) Option { return func(o *options) { o.metrics = w } }

// WithClock sets processing time (the tick's idle advance).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithConcurrency bounds the keys folded at once (default 16, from 1 to
// MaxConcurrency).
func WithConcurrency(n int) Option { return func(o *options) { o.concurrency = n } }

// MaxConcurrency bounds WithConcurrency: the most records a Kinesis batch
// holds (Lambda's BatchSize for a stream), so no batch has more keys to
// fold at once, and what the goroutines and DynamoDB requests in flight
// can be.
const MaxConcurrency = 10_000

// apply applies opts; a nil one (a helper's "no option") is an error
// naming its place, not a nil-pointer panic.
func (o *options) apply(opts []Option) []error {
	var errs []error
	for i, f := range opts {
		if f == nil {
			errs = append(errs, fmt.Errorf("option %d is nil", i+1))
			continue
		}
		f(o)
	}
	return errs
}

func (o *options) check() error {
	var errs []error
	errs = append(errs, o.win.check())
	if o.otherKind != "" {
		errs = append(errs, fmt.Errorf("%s: a handler has one window kind, and %s was given too", o.win.option, o.otherKind))
	}
	if o.concurrency < 1 || o.concurrency > MaxConcurrency {
		errs = append(errs, fmt.Errorf("WithConcurrency: %d is outside 1–%d", o.concurrency, MaxConcurrency))
	}
	if o.log == nil {
		errs = append(errs, errors.New("WithLogger: the logger is nil"))
	}
	if o.now == nil {
		errs = append(errs, errors.New("WithClock: the clock is nil"))
	}
	switch {
	case o.late.Policy != Drop && o.late.Policy != Correct:
		errs = append(errs, fmt.Errorf("WithLatePolicy: %v is not Drop or Correct", o.late.Policy))
	case o.late.Policy == Correct && (o.late.AllowedLateness <= 0 || o.late.AllowedLateness%time.Millisecond != 0):
		errs = append(errs, fmt.Errorf("WithAllowedLateness: %v is not a positive whole number of milliseconds, as the Correct policy needs", o.late.AllowedLateness))
	case o.late.Policy == Correct && o.late.AllowedLateness > MaxAllowedLateness:
		errs = append(errs, fmt.Errorf("WithAllowedLateness: %v is longer than %v, the longest a declared pipeline keeps a window for corrections", o.late.AllowedLateness, MaxAllowedLateness))
	case o.late.Policy == Drop && o.late.AllowedLateness != 0:
		errs = append(errs, fmt.Errorf("WithAllowedLateness: %v only applies with WithLatePolicy(Correct)", o.late.AllowedLateness))
	}
	if o.outOfOrderness < 0 || o.outOfOrderness > MaxOutOfOrderness {
		errs = append(errs, fmt.Errorf("WithOutOfOrderness: %v is outside 0–%v: every window would wait that long to be final (for later records, WithLatePolicy(Correct) with WithAllowedLateness)", o.outOfOrderness, MaxOutOfOrderness))
	}
	if o.idle <= 0 || o.idle > MaxIdleTimeout {
		errs = append(errs, fmt.Errorf("WithIdleTimeout: %v is not positive and at most %v: an idle shard's windows would wait that long to be final", o.idle, MaxIdleTimeout))
	}
	if o.horizon < 0 || o.horizon > MaxDedupeHorizon {
		errs = append(errs, fmt.Errorf("WithDedupeHorizon: %v is outside 0–%v", o.horizon, MaxDedupeHorizon))
	}
	if o.lim.MaxOpenWindows < 1 {
		errs = append(errs, fmt.Errorf("WithLimits: MaxOpenWindows %d is below 1", o.lim.MaxOpenWindows))
	}
	if o.lim.MaxAggregateBytes < 1 || o.lim.MaxAggregateBytes > keyed.DefaultMaxStateBytes/2 ||
		o.lim.MaxOpenWindows > keyed.DefaultMaxStateBytes/2/(o.lim.MaxAggregateBytes+24) {
		// A fold stops once the state reaches half an item (closed windows
		// not yet sent count too), so open windows must fit in that half.
		errs = append(errs, fmt.Errorf("WithLimits: MaxOpenWindows × MaxAggregateBytes (%d × %d) must fit half a state item (%d bytes)",
			o.lim.MaxOpenWindows, o.lim.MaxAggregateBytes, keyed.DefaultMaxStateBytes/2))
	}
	return errors.Join(errs...)
}

// stateExpiry is how long after its last write a key's state item is kept
// (its TTL): until the window that write touched can have closed — the
// window's span after the record, then the out-of-orderness and the idle
// timeout an idle shard's watermark takes to pass its end — and taken its
// last correction (the allowed lateness), and then keyed.StateExpiry more:
// the events stream's retention, through which a stuck handler or a replay
// may still bring the key's records and need its fences, and a day. A
// fixed keyed.StateExpiry deleted a 30-day window's state while the window
// was open, and its result was never put. The bounds of check keep the sum
// to about two years.
func (o *options) stateExpiry() time.Duration {
	return keyed.StateExpiry + o.win.span() + o.outOfOrderness + o.idle + o.late.AllowedLateness
}

// Stats are a handler's counters since it was built: records in (those
// folded into a key: not those set aside or found to be copies), late
// (dropped), set aside, producer duplicates, results put, state writes.
type Stats = keyed.Stats

// TickResult is what one scheduled tick did.
type TickResult = keyed.TickResult

// runner is the keyed runner behind a Handler, whatever its value type.
type runner interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
	HandleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error)
	Tick(ctx context.Context, now time.Time) (keyed.TickResult, error)
	Stats() keyed.Stats
}

// Handler is a Kinesis function: lambda.Start(h) runs it. It handles both
// the event source mapping's batches (reporting batch item failures) and
// the EventBridge schedule's events (the tick). It is safe for concurrent
// use.
type Handler struct {
	name string
	r    runner
}

// Invoke is the Lambda entry point (lambda.Handler): an EventBridge
// scheduled event runs Tick, anything else is a Kinesis event.
func (h *Handler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return h.r.Invoke(ctx, payload)
}

// HandleBatch handles one Kinesis batch given as aws-lambda-go's event.
func (h *Handler) HandleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	return h.r.HandleBatch(ctx, ev)
}

// Tick advances idle shards' watermarks by processing time and emits the
// results of the windows every shard's watermark has passed.
func (h *Handler) Tick(ctx context.Context, now time.Time) (TickResult, error) {
	return h.r.Tick(ctx, now)
}

// Stats returns the counters so far.
func (h *Handler) Stats() Stats { return h.r.Stats() }

// Name is the handler's name.
func (h *Handler) Name() string { return h.name }

// NewWindowed returns a windowed aggregation over a Kinesis stream of
// envelopes: sel picks each record's key and value, the value is merged
// into the key's windows of aggregate T (see Aggregate) — tumbling
// (WithWindow, the default), hopping (WithHopping), sliding (WithSliding)
// or session (WithSession) windows — and when the shard's watermark passes
// a window's end its Result goes to the output stream, once per key and
// window; under WithLatePolicy(Correct), corrections and retractions
// follow late records. T is given, V and A are inferred:
//
//	h, err := handler.NewWindowed[StatusMix](cfg, SelectStatus, handler.WithWindow(time.Minute))
func NewWindowed[T any, V any, A interface {
	*T
	Aggregate[V, A]
}](cfg Config, sel Selector[V], opts ...Option) (*Handler, error) {
	o := options{late: window.LateRule{Policy: Drop}, outOfOrderness: DefaultOutOfOrderness, idle: DefaultIdleTimeout, horizon: DefaultDedupeHorizon,
		lim: DefaultLimits, log: slog.New(slog.NewJSONHandler(os.Stderr, nil)), metrics: os.Stdout, now: time.Now, concurrency: 16}
	o.win = windows{kind: "tumbling", tumble: window.Tumbling{Size: DefaultWindow}} // set by no option
	errs := o.apply(opts)
	if !nameRE.MatchString(cfg.Name) {
		errs = append(errs, fmt.Errorf("Config.Name: %q is not 1–63 lower-case letters, digits and '-'", cfg.Name))
	}
	if cfg.StateTable == "" {
		errs = append(errs, errors.New("Config.StateTable is empty"))
	}
	errs = append(errs, cfg.checkNames())
	if cfg.DynamoDB == nil {
		errs = append(errs, errors.New("Config.DynamoDB is nil"))
	}
	if cfg.OutputStream != "" && cfg.Kinesis == nil {
		errs = append(errs, errors.New("Config.Kinesis is nil, with an OutputStream"))
	}
	if sel == nil {
		errs = append(errs, errors.New("the Selector is nil"))
	}
	errs = append(errs, o.check())
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("handler %s: %w", cfg.Name, err)
	}

	op := &windowed[T, V, A]{name: cfg.Name, kind: o.win, late: o.late, lim: o.lim, sel: sel, log: o.log}
	kopts := []keyed.Option{keyed.WithLogger(o.log), keyed.WithClock(o.now), keyed.WithConcurrency(o.concurrency)}
	var mt *metrics.Logger
	if o.metrics != nil {
		mt = metrics.New(o.metrics, cfg.Name)
		kopts = append(kopts, keyed.WithMetrics(mt))
	}
	if cfg.QuarantineTable != "" {
		sopts := []setaside.Option{setaside.WithFunction(cfg.Function), setaside.WithLogger(o.log)}
		if mt != nil {
			sopts = append(sopts, setaside.WithMetrics(mt))
		}
		kopts = append(kopts, keyed.WithSetAside(setaside.New(cfg.DynamoDB, cfg.QuarantineTable, sopts...)))
	}
	if l := keyed.NewLedger(cfg.DynamoDB, cfg.StateTable, cfg.Name, o.horizon); l != nil {
		kopts = append(kopts, keyed.WithDedupe(l))
	}
	if cfg.Backlog != nil {
		kopts = append(kopts, keyed.WithBacklog(cfg.Backlog))
	}
	views := state.NewViews(keyedOnly{cfg.DynamoDB}, cfg.StateTable, nil, state.WithKeyedExpiry(o.stateExpiry()))
	var kin emit.Putter
	if cfg.OutputStream != "" {
		kin = cfg.Kinesis
	}
	set := keyed.Settings{Name: cfg.Name, Kind: StateKind, OutOfOrderness: o.outOfOrderness, IdleTimeout: o.idle}
	return &Handler{name: cfg.Name, r: keyed.New[value[A]](set, op, views, kin, cfg.OutputStream, kopts...)}, nil
}

// WindowedFromEnv is NewWindowed with FromEnv's Config: what a function's
// main calls before lambda.Start.
func WindowedFromEnv[T any, V any, A interface {
	*T
	Aggregate[V, A]
}](name string, sel Selector[V], opts ...Option) (*Handler, error) {
	cfg, err := FromEnv(name)
	if err != nil {
		return nil, err
	}
	return NewWindowed[T, V, A](cfg, sel, opts...)
}

// keyedOnly is the state table as a handler uses it: keyed states only,
// which are never deleted (their TTL expires them); window listings, the
// one thing package state deletes, belong to declared pipelines.
type keyedOnly struct{ DynamoDB }

func (keyedOnly) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, errors.New("handler: the state table deletes nothing of a handler's")
}
