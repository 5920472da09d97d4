package es

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Decider is a domain: its state, how a recorded event changes it, and how
// a command is judged against it.
type Decider[S any] interface {
	// AggregateType is the type of the domain's aggregates ("show"), kept
	// on every event so consumers can tell domains apart.
	AggregateType() string
	// AggregateField is the command field naming the aggregate ("showId").
	AggregateField() string
	// StateSchema names the state's JSON encoding; change it when the state
	// type changes, and older snapshots are ignored.
	StateSchema() string
	// Initial is the state of an aggregate with no events.
	Initial() S
	// Evolve applies a recorded event. It must not modify s (it returns
	// the new state) and must be deterministic: the log replayed gives the
	// same state. An error means the log holds an event the state cannot
	// take.
	Evolve(s S, e Event) (S, error)
	// Decide judges cmd against s (at version): the events to append, a
	// *Refusal, or an *InvalidError for a malformed command.
	Decide(s S, version int64, cmd Command) ([]NewEvent, error)
}

// TimedCommands is a Decider whose commands carry times. TimeFields names
// the top-level fields of a command type's data that Decide reads as RFC
// 3339 times (as stream.ParseTime reads them): a retry that writes one
// another way ("z" for "Z", an offset for UTC, ".000") is the same command,
// its fingerprint comparing the instants (Command.Fingerprint).
type TimedCommands interface {
	TimeFields(commandType string) []string
}

// NewEvent is an event Decide wants appended.
type NewEvent struct {
	Type string
	// Data is encoded as JSON (without HTML escaping).
	Data any
	// Personal, when not nil, is personal data kept apart from Data
	// (never published, erasable); Subject is whose it is.
	Personal any
	Subject  string
}

// SyncView returns the items of views that are written in the same
// transaction as the events: the state after them, at version.
type SyncView[S any] func(ctx context.Context, aggregateID string, version int64, state S) ([]types.TransactWriteItem, error)

// Result is how a command ended: the HTTP answer and what it did.
type Result struct {
	Status     string // StatusAccepted, StatusRefused, StatusConflict, StatusInvalid
	HTTPStatus int
	// Body is the answer (JSON); for a replay, the first answer's bytes.
	Body []byte
	// Replayed: the command ran before; Body is its first answer.
	Replayed    bool
	AggregateID string
	// Version is the aggregate's version after the command (accepted), or
	// the version it was judged at.
	Version int64
	// Events are the events this execution appended.
	Events []Event
	// Attempts is how many times the command was decided (more than one
	// when another command appended first).
	Attempts int
}

// Executor runs commands of one domain against the store.
type Executor[S any] struct {
	store       *Store
	d           Decider[S]
	sync        SyncView[S]
	every       int
	horizon     time.Duration
	maxAttempts int
	now         func() time.Time
	metrics     *metrics.Logger
	log         *slog.Logger
}

// ExecutorOption configures an Executor.
type ExecutorOption[S any] func(*Executor[S])

// WithSyncView writes the items f returns in each append's transaction.
func WithSyncView[S any](f SyncView[S]) ExecutorOption[S] {
	return func(x *Executor[S]) { x.sync = f }
}

// WithSnapshotEvery sets how many versions apart snapshots are taken
// (DefaultSnapshotEvery; 0 or less: never).
func WithSnapshotEvery[S any](n int) ExecutorOption[S] {
	return func(x *Executor[S]) { x.every = n }
}

// WithCommandHorizon sets how long a command id is remembered
// (DefaultCommandHorizon).
func WithCommandHorizon[S any](d time.Duration) ExecutorOption[S] {
	return func(x *Executor[S]) { x.horizon = d }
}

// WithClock sets the clock (time.Now).
func WithClock[S any](now func() time.Time) ExecutorOption[S] {
	return func(x *Executor[S]) { x.now = now }
}

// WithMetrics counts CommandsAccepted, CommandsRefused, CommandsInvalid,
// CommandConflicts (answered 409), AppendsLost (appends another command
// beat, decided again or answered 409), CommandsReplayed and
// SnapshotsSkipped (a state over DynamoDB's item limit, or a snapshot that
// did not fit in the command's transaction, not taken).
// The caller flushes.
func WithMetrics[S any](m *metrics.Logger) ExecutorOption[S] {
	return func(x *Executor[S]) { x.metrics = m }
}

// WithLogger sets the logger (default: discard).
func WithLogger[S any](l *slog.Logger) ExecutorOption[S] {
	return func(x *Executor[S]) { x.log = l }
}

// DefaultMaxAttempts bounds how often a command without expectedVersion is
// decided again after losing an append: each loss means another command on
// the same aggregate won, so more than a few means it is too hot to wait.
const DefaultMaxAttempts = 5

// NewExecutor returns an executor of d's commands on store.
func NewExecutor[S any](store *Store, d Decider[S], opts ...ExecutorOption[S]) *Executor[S] {
	x := &Executor[S]{store: store, d: d, every: DefaultSnapshotEvery, horizon: DefaultCommandHorizon,
		maxAttempts: DefaultMaxAttempts, now: time.Now, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(x)
	}
	return x
}

// Execute parses body as a command and runs it. Everything a sender can
// cause is a Result with its status; errors are transient failures
// (throttling, timeouts) or what only an operator can repair
// (ErrAheadOfLog, *DamagedLogError).
func (x *Executor[S]) Execute(ctx context.Context, body []byte) (Result, error) {
	cmd, err := ParseCommand(body, x.d.AggregateField())
	if err != nil {
		var ie *InvalidError
		if errors.As(err, &ie) {
			return x.invalid(cmd, ie), nil
		}
		return Result{}, err
	}
	return x.Run(ctx, cmd)
}

// Fold is the state of an aggregate from its snapshot (nil: none) and the
// events after it, and the version it is at. An erasure audit event in the
// log of an aggregate of another type (appended there before erasure
// trails had a namespace of their own: LegacyErasureAggregate) takes its
// version but is not evolved.
func (x *Executor[S]) Fold(snap *Snapshot, events []Event) (S, int64, error) {
	state := x.d.Initial()
	version := int64(0)
	if snap != nil {
		if err := json.Unmarshal(snap.State, &state); err != nil {
			return state, 0, fmt.Errorf("es: snapshot of %s at version %d: %w", snap.AggregateID, snap.Version, err)
		}
		version = snap.Version
	}
	return x.evolve(state, version, events)
}

// evolve applies events to state, at version. Its error is a
// *DamagedLogError naming the event that does not follow or that the state
// cannot take.
func (x *Executor[S]) evolve(state S, version int64, events []Event) (S, int64, error) {
	for _, e := range events {
		if e.Version != version+1 {
			return state, version, &DamagedLogError{AggregateID: e.AggregateID, Version: version + 1, Follows: e.Version,
				Err: fmt.Errorf("version %d is missing: event %d follows %d", version+1, e.Version, version)}
		}
		if misplacedAudit(&e, x.d.AggregateType()) {
			// Not the aggregate's own: an erasure audit event appended here
			// when erasure trails shared the domain's ids. Its version is
			// taken, its data is not the domain's.
			version = e.Version
			continue
		}
		next, err := x.d.Evolve(state, e)
		if err != nil {
			return state, version, &DamagedLogError{AggregateID: e.AggregateID, Version: e.Version,
				Err: fmt.Errorf("the %s state cannot take its event %d (%s): %w", x.d.AggregateType(), e.Version, e.Type, err)}
		}
		state, version = next, e.Version
	}
	return state, version, nil
}

// Store is the event store x appends to.
func (x *Executor[S]) Store() *Store { return x.store }

// Load is an aggregate's current state and version, from its snapshot and
// the events after it.
func (x *Executor[S]) Load(ctx context.Context, aggregateID string) (S, int64, error) {
	snap, tail, err := x.store.Load(ctx, aggregateID, x.d.StateSchema())
	if err != nil {
		var zero S
		return zero, 0, err
	}
	return x.Fold(snap, tail)
}

// Run judges cmd against the aggregate's current state and appends its
// events, or refuses it; a command id seen before gets its first answer.
func (x *Executor[S]) Run(ctx context.Context, cmd Command) (Result, error) {
	if err := CheckAggregateID(cmd.AggregateID); err != nil {
		// A command built without ParseCommand: its aggregate must still be
		// one a command may name (never the store's own, such as an
		// erasure trail).
		return x.invalid(cmd, &InvalidError{Field: x.d.AggregateField(), Reason: err.Error()}), nil
	}
	fp := x.fingerprint(cmd)
	state, version, err := x.Load(ctx, cmd.AggregateID)
	if err != nil {
		return Result{}, err
	}
	for attempt := 1; ; attempt++ {
		if cmd.ExpectedVersion != nil && *cmd.ExpectedVersion != version {
			return x.conflict(ctx, cmd, fp, *cmd.ExpectedVersion, version, attempt)
		}
		decided, err := x.d.Decide(state, version, cmd)
		var refusal *Refusal
		var invalid *InvalidError
		switch {
		case errors.As(err, &refusal):
			return x.refuse(ctx, cmd, fp, version, refusal, attempt)
		case errors.As(err, &invalid):
			return x.invalid(cmd, invalid), nil
		case err != nil:
			return Result{}, fmt.Errorf("es: deciding command %s: %w", cmd.ID, err)
		}
		now := x.now().UTC()
		evs, next, err := x.record(cmd, decided, state, version, now)
		if err != nil {
			var ie *InvalidError
			if errors.As(err, &ie) {
				return x.invalid(cmd, ie), nil
			}
			return Result{}, err
		}
		newVersion := version + int64(len(evs))
		body := x.answer(cmd, StatusAccepted, newVersion, func(b *answerBuilder) {
			type appended struct {
				Version int64  `json:"version"`
				Type    string `json:"type"`
			}
			list := make([]appended, len(evs))
			for i, e := range evs {
				list[i] = appended{e.Version, e.Type}
			}
			b.add("events", list)
		})
		rec := &CommandRecord{ID: cmd.ID, Fingerprint: fp, Status: StatusAccepted, HTTPStatus: http.StatusOK, Body: body,
			AggregateID: cmd.AggregateID, Version: newVersion, RecordedAt: now, ExpiresAt: now.Add(x.horizon)}
		if len(evs) == 0 {
			// Nothing to append (the command asks for what already is): only
			// its record, so a retry is answered the same way.
			if existing, err := x.store.PutRecord(ctx, rec); err != nil {
				return Result{}, err
			} else if existing != nil {
				return x.replay(cmd, fp, existing)
			}
			x.count("CommandsAccepted")
			return Result{Status: StatusAccepted, HTTPStatus: http.StatusOK, Body: body, AggregateID: cmd.AggregateID, Version: version, Attempts: attempt}, nil
		}
		app := Append{AggregateID: cmd.AggregateID, Expected: version, Events: evs, Command: rec}
		if x.sync != nil {
			if app.Views, err = x.sync(ctx, cmd.AggregateID, newVersion, next); err != nil {
				return Result{}, fmt.Errorf("es: views of command %s: %w", cmd.ID, err)
			}
		}
		if snapshotDue(version, newVersion, x.every) {
			st, err := marshal(next)
			if err != nil {
				return Result{}, fmt.Errorf("es: snapshot of %s: %w", cmd.AggregateID, err)
			}
			app.Snapshot = &Snapshot{AggregateID: cmd.AggregateID, Version: newVersion, Schema: x.d.StateSchema(), State: st, TakenAt: now}
			if err := limits.CheckItem(app.Snapshot.Item()); err != nil {
				// The state outgrew a DynamoDB item: no snapshot can hold
				// it, and refusing the command for it would refuse every
				// later one. Loads read on from the last snapshot.
				x.count("SnapshotsSkipped")
				x.log.WarnContext(ctx, "state too large to snapshot; loads read the events after the last snapshot", "aggregate", cmd.AggregateID,
					"version", newVersion, "error", err)
				app.Snapshot = nil
			}
		}
		err = x.store.Append(ctx, app)
		var txTooLarge *TransactionTooLargeError
		if errors.As(err, &txTooLarge) && app.Snapshot != nil {
			// The snapshot is what does not fit (or some of it): the events
			// go without it, and loads read on from the last snapshot.
			x.count("SnapshotsSkipped")
			x.log.WarnContext(ctx, "append too large for one transaction with its snapshot; appending without it", "aggregate", cmd.AggregateID,
				"version", newVersion, "error", err)
			app.Snapshot = nil
			err = x.store.Append(ctx, app)
		}
		var dup *DuplicateCommandError
		var conflict *ConflictError
		var tooLarge *TooLargeError
		switch {
		case err == nil:
			x.count("CommandsAccepted")
			return Result{Status: StatusAccepted, HTTPStatus: http.StatusOK, Body: body, AggregateID: cmd.AggregateID,
				Version: newVersion, Events: evs, Attempts: attempt}, nil
		case errors.As(err, &dup):
			return x.replay(cmd, fp, dup.Record)
		case errors.As(err, &tooLarge), errors.As(err, &txTooLarge):
			// No retry can write it: a 503 would have the sender retry for
			// ever.
			return x.invalid(cmd, &InvalidError{Field: "data", Reason: err.Error()}), nil
		case errors.As(err, &conflict), errors.Is(err, ErrContended):
			x.count("AppendsLost")
			x.log.InfoContext(ctx, "append lost to another command; deciding again", "command", cmd.ID, "aggregate", cmd.AggregateID,
				"attempt", attempt, "error", err)
			if cmd.ExpectedVersion != nil && conflict != nil {
				return x.conflict(ctx, cmd, fp, *cmd.ExpectedVersion, conflict.Current, attempt)
			}
			if attempt >= x.maxAttempts {
				current := version
				if conflict != nil {
					current = conflict.Current
				}
				return x.conflict(ctx, cmd, fp, -1, current, attempt)
			}
			if errors.Is(err, ErrContended) {
				select { // both writers retrying at once would collide again
				case <-time.After(time.Duration(rand.IntN(20)+5) * time.Millisecond):
				case <-ctx.Done():
					return Result{}, ctx.Err()
				}
			}
			tail, err := x.store.Events(ctx, cmd.AggregateID, version, 0)
			if err != nil {
				return Result{}, err
			}
			if state, version, err = x.evolve(state, version, tail); err != nil {
				return Result{}, err
			}
		default:
			return Result{}, err
		}
	}
}

// record turns decided events into events at the versions after version,
// and checks the state takes them.
func (x *Executor[S]) record(cmd Command, decided []NewEvent, state S, version int64, now time.Time) ([]Event, S, error) {
	evs := make([]Event, len(decided))
	for i, d := range decided {
		data, err := marshal(d.Data)
		if err != nil {
			return nil, state, fmt.Errorf("es: event %d of command %s: %w", i, cmd.ID, err)
		}
		e := Event{AggregateType: x.d.AggregateType(), AggregateID: cmd.AggregateID, Version: version + int64(i) + 1,
			Type: d.Type, Data: data, CommandID: cmd.ID, RecordedAt: now}
		if d.Personal != nil {
			if d.Subject == "" {
				// Erasure finds personal data by its subject (the
				// SubjectIndex): without one it would never be erased.
				return nil, state, fmt.Errorf("es: event %d (%s) of command %s holds personal data without a subject; the decider must name whose it is (NewEvent.Subject), or erasure could not find it", i, d.Type, cmd.ID)
			}
			if e.Personal, err = marshal(d.Personal); err != nil {
				return nil, state, fmt.Errorf("es: personal data of event %d of command %s: %w", i, cmd.ID, err)
			}
			e.Subject = d.Subject
		}
		evs[i] = e
	}
	next, _, err := x.evolve(state, version, evs)
	if err != nil {
		// Not the log's: the decider's own events, never written.
		if d := (*DamagedLogError)(nil); errors.As(err, &d) {
			err = d.Err
		}
		return nil, state, fmt.Errorf("es: command %s decided events its own state refuses: %w", cmd.ID, err)
	}
	return evs, next, nil
}

// conflict answers 409: the aggregate is at current, not at expected (-1:
// it kept moving for every attempt) — unless the command ran before (a
// retry of a command whose append succeeded), which gets its first answer.
func (x *Executor[S]) conflict(ctx context.Context, cmd Command, fp string, expected, current int64, attempts int) (Result, error) {
	rec, err := x.store.Record(ctx, cmd.ID)
	if err != nil {
		return Result{}, err
	}
	if rec != nil {
		return x.replay(cmd, fp, rec)
	}
	x.count("CommandConflicts")
	msg := fmt.Sprintf("%s %s is at version %d, not the expected %d: read it again and decide on that", x.d.AggregateField(), cmd.AggregateID, current, expected)
	if expected < 0 {
		msg = fmt.Sprintf("%s %s kept changing under the command (%d attempts); send it again", x.d.AggregateField(), cmd.AggregateID, attempts)
	}
	body := x.answer(cmd, StatusConflict, -1, func(b *answerBuilder) {
		if expected >= 0 {
			b.add("expectedVersion", expected)
		}
		b.add("currentVersion", current)
		b.add("error", msg)
	})
	return Result{Status: StatusConflict, HTTPStatus: http.StatusConflict, Body: body, AggregateID: cmd.AggregateID, Version: current, Attempts: attempts}, nil
}

// refuse records and answers a refusal (422); a record already there (the
// command ran before) is answered instead.
func (x *Executor[S]) refuse(ctx context.Context, cmd Command, fp string, version int64, r *Refusal, attempts int) (Result, error) {
	body := x.answer(cmd, StatusRefused, version, func(b *answerBuilder) {
		if r.Field != "" {
			b.add("field", r.Field)
		}
		b.add("reason", r.Reason)
	})
	now := x.now().UTC()
	rec := &CommandRecord{ID: cmd.ID, Fingerprint: fp, Status: StatusRefused, HTTPStatus: http.StatusUnprocessableEntity, Body: body,
		AggregateID: cmd.AggregateID, Version: version, RecordedAt: now, ExpiresAt: now.Add(x.horizon)}
	existing, err := x.store.PutRecord(ctx, rec)
	if err != nil {
		return Result{}, err
	}
	if existing != nil {
		return x.replay(cmd, fp, existing)
	}
	x.count("CommandsRefused")
	return Result{Status: StatusRefused, HTTPStatus: http.StatusUnprocessableEntity, Body: body, AggregateID: cmd.AggregateID, Version: version, Attempts: attempts}, nil
}

// fingerprint is cmd's fingerprint, its times read as the decider reads
// them (TimedCommands).
func (x *Executor[S]) fingerprint(cmd Command) string {
	var times []string
	if tc, ok := any(x.d).(TimedCommands); ok {
		times = tc.TimeFields(cmd.Type)
	}
	return cmd.Fingerprint(times...)
}

// replay answers with a command's first answer, or 422 if the id was used
// for another command. fp is cmd's fingerprint; a record written before
// fingerprints read data as a value holds its spelling's (RecordedAs).
func (x *Executor[S]) replay(cmd Command, fp string, rec *CommandRecord) (Result, error) {
	if !cmd.RecordedAs(rec.Fingerprint, fp) {
		return x.invalidStatus(cmd, &InvalidError{Field: "id", Reason: fmt.Sprintf(
			"%s was used for another command (%s on %s %s, %s at version %d): a command id names one command; use a new id",
			cmd.ID, rec.Status, x.d.AggregateField(), rec.AggregateID, rec.RecordedAt.Format(time.RFC3339), rec.Version)}, http.StatusUnprocessableEntity), nil
	}
	x.count("CommandsReplayed")
	return Result{Status: rec.Status, HTTPStatus: rec.HTTPStatus, Body: rec.Body, Replayed: true, AggregateID: rec.AggregateID, Version: rec.Version}, nil
}

func (x *Executor[S]) invalid(cmd Command, ie *InvalidError) Result {
	return x.invalidStatus(cmd, ie, http.StatusBadRequest)
}

func (x *Executor[S]) invalidStatus(cmd Command, ie *InvalidError, status int) Result {
	x.count("CommandsInvalid")
	body := x.answer(cmd, StatusInvalid, -1, func(b *answerBuilder) {
		if ie.Field != "" {
			b.add("field", ie.Field)
		}
		b.add("error", ie.Error())
	})
	return Result{Status: StatusInvalid, HTTPStatus: status, Body: body, AggregateID: cmd.AggregateID}
}

func (x *Executor[S]) count(name string) {
	x.metrics.Add(name, metrics.Count, 1)
}

// answerBuilder writes a JSON object with its fields in the order added.
type answerBuilder struct{ buf bytes.Buffer }

func (b *answerBuilder) add(key string, v any) {
	if b.buf.Len() > 1 {
		b.buf.WriteByte(',')
	}
	k, _ := marshal(key)
	b.buf.Write(k)
	b.buf.WriteByte(':')
	val, err := marshal(v)
	if err != nil {
		val = []byte(strconv.Quote(fmt.Sprint(v)))
	}
	b.buf.Write(val)
}

// answer is {"id", "status", <aggregate field>, "version" (when ≥ 0), ...}.
func (x *Executor[S]) answer(cmd Command, status string, version int64, more func(*answerBuilder)) []byte {
	b := &answerBuilder{}
	b.buf.WriteByte('{')
	if cmd.ID != "" {
		b.add("id", cmd.ID)
	}
	b.add("status", status)
	if cmd.AggregateID != "" {
		b.add(x.d.AggregateField(), cmd.AggregateID)
	}
	if version >= 0 {
		b.add("version", version)
	}
	more(b)
	b.buf.WriteByte('}')
	return b.buf.Bytes()
}

// marshal is JSON without HTML escaping ('<' stays one byte) and without
// the trailing newline.
func marshal(v any) ([]byte, error) { return strictjson.Marshal(v) }
