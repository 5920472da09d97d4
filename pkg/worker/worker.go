package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/idempotency"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// TaskType is the envelope type the worker accepts.
const TaskType = "task"

// MaxRounds bounds Task.Rounds, so that one task fits in an invocation.
const MaxRounds = 5_000_000

// Attributes of a results item (partition key AttrTaskID).
const (
	AttrTaskID      = "taskId"
	AttrDigest      = "digest"
	AttrRounds      = "rounds"
	AttrMessageID   = "messageId"
	AttrCompletedAt = "completedAt"
	// AttrExecutions counts how often the side effect ran for the task: 1
	// unless an invocation died between the write and the idempotency
	// record's COMPLETED mark (see package idempotency).
	AttrExecutions = "executions"
	// AttrEnvironment is the execution environment that ran the side effect
	// (its AWS_LAMBDA_LOG_STREAM_NAME, one per environment in Lambda), so
	// the spread of the work over environments can be seen.
	AttrEnvironment = "environment"
)

// Task is the data of a "task" envelope: hash Input Rounds times with
// SHA-256 (a stand-in for any expensive, deterministic piece of work).
type Task struct {
	TaskID string `json:"taskId"`
	Input  string `json:"input"`
	// Rounds is 1 to MaxRounds. TaskID and After hold no control,
	// invisible or line-breaking character (stream.CheckIdentifierPrintable).
	Rounds int `json:"rounds"`
	// After, if set, is the id of a task whose result must exist before
	// this one runs (this task builds on it). SQS does not order a
	// standard queue, nor a FIFO queue across message groups, so while it
	// has no result the message waits: it is reported failed and comes
	// back after the visibility timeout. Still missing on the queue's last
	// receive (its maxReceiveCount), it is dead-lettered with the reason
	// (a *DependencyError); the operator runs that task, then redrives
	// this one.
	After string `json:"after,omitempty"`
}

// Result is a task's outcome, stored in the idempotency record and returned
// to duplicates.
type Result struct {
	TaskID string `json:"taskId"`
	Digest string `json:"digest"`
	Rounds int    `json:"rounds"`
	// MessageID is the message whose processing produced the result.
	MessageID string `json:"messageId"`
	// Environment is the execution environment that produced it.
	Environment string `json:"environment,omitempty"`
}

// IdempotencyConfig is the idempotency configuration of the worker named
// function: one key per task id (data.taskId), and a task id arriving with
// different data is refused rather than given another task's result.
func IdempotencyConfig(function string) idempotency.Config {
	return idempotency.Config{
		FunctionName:   function,
		KeyPath:        "data.taskId",
		ValidationPath: "data",
		RequireKey:     true,
	}
}

// TaskError is a message whose envelope is valid but is not a task the worker
// can run. It is poison: redelivery cannot fix it.
type TaskError struct {
	MessageID string
	// Field is the envelope field, for example "type" or "data.rounds".
	Field  string
	Reason string
}

func (e *TaskError) Error() string {
	return fmt.Sprintf("message %s: field %s: %s", e.MessageID, e.Field, e.Reason)
}

// DependencyError is a task whose data.after names a task with no result
// yet. The dependency may simply not have run (SQS does not order a
// standard queue, nor a FIFO queue across groups), so the message waits
// through the queue's receives; on the last one it is dead-lettered with
// this as its reason, and an operator runs that task and redrives it.
type DependencyError struct {
	MessageID, TaskID string
	// Missing is the task id data.after names.
	Missing string
	Table   string
	// Receive is the message's receive (ApproximateReceiveCount) and
	// MaxReceives its source queue's maxReceiveCount, when known (0 if not).
	Receive, MaxReceives int
}

func (e *DependencyError) Error() string {
	if e.MaxReceives > 0 && e.Receive > 0 && e.Receive < e.MaxReceives {
		return fmt.Sprintf("message %s: task %s: field data.after: task %s has no result in table %s on receive %d of %d: redelivered after the visibility timeout; still missing on receive %d, it goes to the dead-letter queue",
			e.MessageID, e.TaskID, e.Missing, e.Table, e.Receive, e.MaxReceives, e.MaxReceives)
	}
	if e.MaxReceives > 0 {
		return fmt.Sprintf("message %s: task %s: field data.after: task %s has no result in table %s on receive %d of %d, the queue's last; run it, then redrive this message",
			e.MessageID, e.TaskID, e.Missing, e.Table, e.Receive, e.MaxReceives)
	}
	return fmt.Sprintf("message %s: task %s: field data.after: task %s has no result in table %s; run it, then redrive this message",
		e.MessageID, e.TaskID, e.Missing, e.Table)
}

// Permanent reports whether err is a failure no redelivery can fix: a
// message that is not a task, a task id reused with other data, or a
// payload whose idempotency key cannot be taken. A missing dependency
// (*DependencyError) is not: a later receive may find it.
func Permanent(err error) bool {
	var pe *stream.PoisonRecordError
	var te *TaskError
	var pm *idempotency.PayloadMismatchError
	var ke *idempotency.KeyError
	return errors.As(err, &pe) || errors.As(err, &te) || errors.As(err, &pm) || errors.As(err, &ke)
}

// idempotent is what the handler needs of an *idempotency.Store.
type idempotent interface {
	Do(ctx context.Context, payload []byte, fn func(ctx context.Context) ([]byte, error)) ([]byte, error)
}

var _ idempotent = (*idempotency.Store)(nil)

// resultStore is what the handler needs of DynamoDB: it writes results and
// reads the result a task depends on.
type resultStore interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

var _ resultStore = (*dynamodb.Client)(nil)

// deadLetterer is what the handler needs of *DeadLetters.
type deadLetterer interface {
	Send(ctx context.Context, msg *events.SQSMessage, reason error) (string, error)
	MaxReceiveCount(ctx context.Context, sourceARN string) (int, error)
}

var _ deadLetterer = (*DeadLetters)(nil)

// Handler is the worker function's handler. Build it with New.
type Handler struct {
	idem        idempotent
	db          resultStore
	table       string
	now         func() time.Time
	metrics     *metrics.Logger
	log         *slog.Logger
	deadLetters deadLetterer
	environment string
}

// Option configures a Handler.
type Option func(*Handler)

// WithMetrics sets where EMF metrics go (nil: nowhere).
func WithMetrics(m *metrics.Logger) Option { return func(h *Handler) { h.metrics = m } }

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithDeadLetters makes the handler send messages that fail permanently
// (see Permanent) to their queue's dead-letter queue at once, and a task
// whose dependency is still missing on the source queue's last receive
// (its maxReceiveCount), with the reason, and report them processed.
// Without it they are reported failed like any other and reach the
// dead-letter queue after maxReceiveCount, without a reason.
func WithDeadLetters(d *DeadLetters) Option { return func(h *Handler) { h.deadLetters = d } }

// WithEnvironment names the execution environment (Lambda's
// AWS_LAMBDA_LOG_STREAM_NAME) recorded in each result the handler writes.
func WithEnvironment(name string) Option { return func(h *Handler) { h.environment = name } }

// WithClock sets the clock completedAt is stamped with.
func WithClock(now func() time.Time) Option { return func(h *Handler) { h.now = now } }

// New returns a handler that runs tasks through idem and writes their
// results to the DynamoDB table resultsTable.
func New(idem idempotent, db resultStore, resultsTable string, opts ...Option) *Handler {
	h := &Handler{idem: idem, db: db, table: resultsTable, now: time.Now, log: slog.Default()}
	for _, o := range opts {
		o(h)
	}
	return h
}

// outcome is what happened to one message, for metrics.
type outcome int

const (
	ran outcome = iota
	duplicate
	deadLettered
)

// Handle runs each task of the batch once per task id and reports the
// messages that failed by id: tasks another invocation is running
// (idempotency.ErrInProgress: they come back after the visibility timeout
// and find the result), tasks whose dependency (data.after) has no result
// yet (counted DependencyWaiting) and tasks whose work or write failed,
// which SQS redelivers until maxReceiveCount. Permanent failures (see
// Permanent), and a missing dependency on the last receive, go to the
// dead-letter queue with their reason when the handler has WithDeadLetters,
// and are reported failed otherwise.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	if err := stream.CheckSQSEvent(&ev); err != nil {
		return events.SQSEventResponse{}, fmt.Errorf("worker: %w", err)
	}
	defer func() {
		if err := h.metrics.Flush(); err != nil {
			h.log.Error("metrics flush", "err", err)
		}
	}()
	// Stop half a second before the deadline so the answer gets out; the
	// messages not done by then are reported failed.
	ctx, cancel := batch.Reserve(ctx, 500*time.Millisecond)
	defer cancel()
	h.metrics.Add("MessagesIn", metrics.Count, float64(len(ev.Records)))
	for _, name := range []string{"Processed", "Duplicates", "InProgress", "Failures", "Poison", "DeadLettered", "Retries", "DependencyWaiting"} {
		h.metrics.Add(name, metrics.Count, 0)
	}
	resp, errs := batch.SQS(ctx, ev.Records, func(ctx context.Context, msg *events.SQSMessage) error {
		if n, _ := strconv.Atoi(msg.Attributes["ApproximateReceiveCount"]); n > 1 {
			// A redelivery: an earlier receive failed or timed out.
			h.metrics.Add("Retries", metrics.Count, 1)
		}
		o, err := h.handleMessage(ctx, msg)
		var de *DependencyError
		switch {
		case err == nil:
		case errors.As(err, &de):
			o, err = h.awaitDependency(ctx, msg, de)
		case Permanent(err) && h.deadLetters != nil:
			o, err = h.deadLetter(ctx, msg, err)
		}
		if err != nil {
			return err
		}
		switch o {
		case duplicate:
			h.metrics.Add("Duplicates", metrics.Count, 1)
		case deadLettered:
		default:
			h.metrics.Add("Processed", metrics.Count, 1)
		}
		return nil
	})
	held := heldBehind(ev.Records, errs)
	for _, e := range errs {
		h.metrics.Add("Failures", metrics.Count, 1)
		var de *DependencyError
		switch {
		case errors.As(e.Err, &de):
			h.log.Warn("task waits for its dependency: redelivered after the visibility timeout", "messageId", e.MessageID,
				"taskId", de.TaskID, "after", de.Missing, "receive", de.Receive, "maxReceiveCount", de.MaxReceives, "err", e.Err.Error())
		case Permanent(e.Err):
			h.metrics.Add("Poison", metrics.Count, 1)
			h.log.Error("poison message: reported failed until it reaches the dead-letter queue", "messageId", e.MessageID, "err", e.Err.Error())
		case errors.Is(e.Err, idempotency.ErrInProgress):
			h.metrics.Add("InProgress", metrics.Count, 1)
			h.log.Warn("task in progress in another invocation: redelivered later", "messageId", e.MessageID)
		case errors.Is(e.Err, batch.ErrGroupBlocked):
			h.log.Warn("message not processed: an earlier message of its group failed; if that one fails on every receive, SQS moves both to the dead-letter queue, this one for no fault of its own",
				"messageId", e.MessageID, "group", held[e.MessageID].group, "blockedBy", held[e.MessageID].by)
		default:
			h.log.Error("task failed; it will be retried", "messageId", e.MessageID, "err", e.Err.Error())
		}
	}
	return resp, nil
}

// blocker is the FIFO message group of a message failed unprocessed and
// the message of that group whose failure held it back.
type blocker struct{ group, by string }

// heldBehind maps each message batch.SQS failed unprocessed
// (ErrGroupBlocked) to the earlier message of its group that failed, so
// its log line names the message to fix: SQS moves the held messages to
// the dead-letter queue with it, without a reason, should it fail on every
// receive. (The worker cannot give them one: sending them there itself
// would put them ahead of the message SQS moves later, out of their
// group's order.)
func heldBehind(msgs []events.SQSMessage, errs []batch.MessageError) map[string]blocker {
	var held map[string]blocker
	if len(errs) == 0 {
		return held
	}
	group := make(map[string]string, len(msgs)) // message id -> its group (FIFO)
	for i := range msgs {
		if g := msgs[i].Attributes["MessageGroupId"]; g != "" {
			group[msgs[i].MessageId] = g
		}
	}
	first := map[string]string{} // group -> its first failed message
	for _, e := range errs {
		g := group[e.MessageID]
		if g == "" {
			continue
		}
		if !errors.Is(e.Err, batch.ErrGroupBlocked) {
			if _, ok := first[g]; !ok {
				first[g] = e.MessageID
			}
			continue
		}
		if held == nil {
			held = map[string]blocker{}
		}
		held[e.MessageID] = blocker{group: g, by: first[g]}
	}
	return held
}

// awaitDependency decides what becomes of msg, whose task's dependency has
// no result yet (de). Before the source queue's last receive it is
// reported failed and counted DependencyWaiting: SQS redelivers it after
// the visibility timeout, by when the dependency may have run. On the last
// receive (ApproximateReceiveCount reaching the RedrivePolicy's
// maxReceiveCount, or unknown) it is dead-lettered with de as the reason,
// rather than left for SQS to move without one. Without WithDeadLetters,
// or when the RedrivePolicy cannot be read, it is reported failed.
func (h *Handler) awaitDependency(ctx context.Context, msg *events.SQSMessage, de *DependencyError) (outcome, error) {
	receive, err := strconv.Atoi(msg.Attributes["ApproximateReceiveCount"])
	if err != nil || receive < 1 {
		receive = 0
	}
	de.Receive = receive
	if h.deadLetters == nil {
		h.metrics.Add("DependencyWaiting", metrics.Count, 1)
		return 0, de
	}
	max, err := h.deadLetters.MaxReceiveCount(ctx, msg.EventSourceARN)
	if err != nil {
		h.log.Error("cannot tell the last receive of a task waiting for its dependency: reported failed", "messageId", msg.MessageId, "err", err.Error())
		h.metrics.Add("DependencyWaiting", metrics.Count, 1)
		return 0, de
	}
	de.MaxReceives = max
	if receive != 0 && receive < max {
		h.metrics.Add("DependencyWaiting", metrics.Count, 1)
		return 0, de
	}
	return h.deadLetter(ctx, msg, de)
}

// deadLetter sends msg, which failed permanently with cause, to its
// dead-letter queue; if that fails, the message is reported failed as before
// (and counted Poison with the failures, once).
func (h *Handler) deadLetter(ctx context.Context, msg *events.SQSMessage, cause error) (outcome, error) {
	dlq, err := h.deadLetters.Send(ctx, msg, cause)
	if err != nil {
		h.log.Error("could not dead-letter a message that failed permanently: reported failed instead", "messageId", msg.MessageId, "cause", cause.Error(), "err", err.Error())
		return 0, cause
	}
	h.metrics.Add("Poison", metrics.Count, 1)
	h.metrics.Add("DeadLettered", metrics.Count, 1)
	h.log.Error("message failed permanently: sent to the dead-letter queue with the reason", "messageId", msg.MessageId, "deadLetterQueue", dlq, "reason", cause.Error())
	return deadLettered, nil
}

func (h *Handler) handleMessage(ctx context.Context, msg *events.SQSMessage) (outcome, error) {
	// The body's bytes, taken once: the strict check, the envelope's decode
	// and the idempotency key all read these.
	body := []byte(msg.Body)
	if err := checkBody(msg.MessageId, body); err != nil {
		return 0, err
	}
	// An envelope whose keys are its fields spelt exactly, checked in the
	// pass that decodes it (stream.UnmarshalExact).
	var env stream.Envelope
	if err := stream.DecodeSQSExact(msg, body, &env); err != nil {
		return 0, err
	}
	task, err := DecodeTask(msg.MessageId, &env)
	if err != nil {
		return 0, err
	}
	if task.After != "" {
		if err := h.requireResult(ctx, msg.MessageId, task); err != nil {
			return 0, err
		}
	}
	executed := false
	out, err := h.idem.Do(ctx, body, func(ctx context.Context) ([]byte, error) {
		executed = true
		return h.run(ctx, msg.MessageId, task)
	})
	if err != nil {
		var pm *idempotency.PayloadMismatchError
		if errors.As(err, &pm) {
			return 0, fmt.Errorf("message %s: task %s: %w", msg.MessageId, task.TaskID, err)
		}
		return 0, err
	}
	if executed {
		return ran, nil
	}
	var r Result
	if err := json.Unmarshal(out, &r); err == nil {
		h.log.Info("duplicate task: returning the stored result", "messageId", msg.MessageId, "taskId", task.TaskID, "firstMessageId", r.MessageID)
	}
	return duplicate, nil
}

// checkBody refuses a message body that is not the one strict reader's JSON
// (strictjson.Check: a key twice, invalid UTF-8, nested too deep): such a
// body could be read two ways. The idempotency key is taken from the body
// by its path and the task from the decoded envelope; were
// {"taskId":"A","taskId":"B"} taken, the one would name task A and the other
// run B. (A key spelt otherwise than the envelope's fields, {"ID":…}, is the
// decode's refusal: stream.DecodeSQSExact.) The error is a *TaskError naming
// the field.
func checkBody(messageID string, body []byte) error {
	if err := strictjson.Check(body, strictjson.Options{Name: "body"}); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && se.Path != "" {
			return &TaskError{MessageID: messageID, Field: se.Path, Reason: se.Reason}
		}
		return &TaskError{MessageID: messageID, Field: "body", Reason: err.Error()}
	}
	return nil
}

// taskWire is Task as read: rounds kept as sent, so that one outside its
// range is refused quoting that range (strictjson.WholeNumber), not an
// int's. Its fields and tags are Task's.
type taskWire struct {
	TaskID string          `json:"taskId"`
	Input  string          `json:"input"`
	Rounds json.RawMessage `json:"rounds"`
	After  *string         `json:"after,omitempty"` // nil: not sent; "" sent is refused
}

// DecodeTask checks that env is a task and decodes its data with the strict
// reader (a field spelt otherwise than its json tag, or unknown, is
// refused); errors are *TaskError naming the message and the field.
func DecodeTask(messageID string, env *stream.Envelope) (Task, error) {
	var t Task
	if env.Type != TaskType {
		return t, &TaskError{MessageID: messageID, Field: "type", Reason: fmt.Sprintf("%q, want %q", env.Type, TaskType)}
	}
	if len(env.Data) == 0 {
		return t, &TaskError{MessageID: messageID, Field: "data", Reason: "missing"}
	}
	var w taskWire
	if err := strictjson.Decode(env.Data, &w, strictjson.Options{Name: "data"}); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return t, &TaskError{MessageID: messageID, Field: strictjson.JoinPath("data", se.Path), Reason: se.Reason}
		}
		return t, &TaskError{MessageID: messageID, Field: "data", Reason: err.Error()}
	}
	t = Task{TaskID: w.TaskID, Input: w.Input}
	if w.After != nil {
		if *w.After == "" {
			return t, &TaskError{MessageID: messageID, Field: "data.after", Reason: "is empty: name the task whose result this one waits for, or leave after out"}
		}
		t.After = *w.After
	}
	if len(w.Rounds) == 0 || string(w.Rounds) == "null" {
		return t, &TaskError{MessageID: messageID, Field: "data.rounds", Reason: fmt.Sprintf("is required: must be a whole number from 1 to %d", MaxRounds)}
	}
	rounds, reason := strictjson.WholeNumber(w.Rounds, 1, MaxRounds)
	if reason != "" {
		return t, &TaskError{MessageID: messageID, Field: "data.rounds", Reason: reason}
	}
	t.Rounds = int(rounds)
	for _, id := range []struct{ field, v string }{{"taskId", t.TaskID}, {"after", t.After}} {
		// The task id is the idempotency key, the results table's key and
		// what logs and the dead-letter reason name: printable, as ingest
		// holds an event's id, type and key.
		var fe *stream.FieldError
		if err := stream.CheckIdentifierPrintable(id.field, id.v); errors.As(err, &fe) {
			return t, &TaskError{MessageID: messageID, Field: "data." + fe.Field, Reason: fe.Reason}
		}
	}
	switch {
	case t.TaskID == "":
		return t, &TaskError{MessageID: messageID, Field: "data.taskId", Reason: "missing or empty"}
	case strings.TrimFunc(t.TaskID, unicode.IsSpace) == "":
		// There in name only, as an event id of white space is for ingest:
		// no log search or listing tells it apart.
		return t, &TaskError{MessageID: messageID, Field: "data.taskId", Reason: "is blank (only white space): a task id must hold a character other than white space"}
	case strings.TrimFunc(t.After, unicode.IsSpace) == "" && t.After != "":
		return t, &TaskError{MessageID: messageID, Field: "data.after", Reason: "is blank (only white space): name the task whose result this one waits for, or leave after out"}
	case len(t.TaskID) > 256:
		return t, &TaskError{MessageID: messageID, Field: "data.taskId", Reason: "longer than 256 bytes"}
	case len(t.After) > 256:
		return t, &TaskError{MessageID: messageID, Field: "data.after", Reason: "longer than 256 bytes"}
	case t.After != "" && t.After == t.TaskID:
		return t, &TaskError{MessageID: messageID, Field: "data.after", Reason: "names the task itself"}
	}
	return t, nil
}

// requireResult returns a *DependencyError if t.After has no result.
func (h *Handler) requireResult(ctx context.Context, messageID string, t Task) error {
	out, err := h.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(h.table),
		Key:                      map[string]types.AttributeValue{AttrTaskID: &types.AttributeValueMemberS{Value: t.After}},
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#k"),
		ExpressionAttributeNames: map[string]string{"#k": AttrTaskID},
	})
	if err != nil {
		return fmt.Errorf("task %s: reading the result of task %s it depends on: %w", t.TaskID, t.After, err)
	}
	if len(out.Item) == 0 {
		return &DependencyError{MessageID: messageID, TaskID: t.TaskID, Missing: t.After, Table: h.table}
	}
	return nil
}

// run does the work and the side effect: the task's item in the results
// table, with executions counting the runs.
func (h *Handler) run(ctx context.Context, messageID string, t Task) ([]byte, error) {
	sum := sha256.Sum256([]byte(t.Input))
	for i := 1; i < t.Rounds; i++ {
		if i%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("task %s: stopped after %d of %d rounds: %w", t.TaskID, i, t.Rounds, err)
			}
		}
		sum = sha256.Sum256(sum[:])
	}
	r := Result{TaskID: t.TaskID, Digest: hex.EncodeToString(sum[:]), Rounds: t.Rounds, MessageID: messageID, Environment: h.environment}
	set := "SET #d = :d, #r = :r, #m = :m, #c = :c"
	names := map[string]string{
		"#d": AttrDigest, "#r": AttrRounds, "#m": AttrMessageID, "#c": AttrCompletedAt, "#x": AttrExecutions,
	}
	values := map[string]types.AttributeValue{
		":d":   &types.AttributeValueMemberS{Value: r.Digest},
		":r":   &types.AttributeValueMemberN{Value: strconv.Itoa(r.Rounds)},
		":m":   &types.AttributeValueMemberS{Value: messageID},
		":c":   &types.AttributeValueMemberS{Value: h.now().UTC().Format(time.RFC3339Nano)},
		":one": &types.AttributeValueMemberN{Value: "1"},
	}
	if h.environment != "" {
		set += ", #e = :e"
		names["#e"] = AttrEnvironment
		values[":e"] = &types.AttributeValueMemberS{Value: h.environment}
	}
	_, err := h.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(h.table),
		Key:                       map[string]types.AttributeValue{AttrTaskID: &types.AttributeValueMemberS{Value: t.TaskID}},
		UpdateExpression:          aws.String(set + " ADD #x :one"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		return nil, fmt.Errorf("task %s: writing its result to table %s: %w", t.TaskID, h.table, err)
	}
	return json.Marshal(r)
}
