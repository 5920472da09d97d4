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
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/idempotency"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/stream"
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
)

// Task is the data of a "task" envelope: hash Input Rounds times with
// SHA-256 (a stand-in for any expensive, deterministic piece of work).
type Task struct {
	TaskID string `json:"taskId"`
	Input  string `json:"input"`
	Rounds int    `json:"rounds"`
}

// Result is a task's outcome, stored in the idempotency record and returned
// to duplicates.
type Result struct {
	TaskID string `json:"taskId"`
	Digest string `json:"digest"`
	Rounds int    `json:"rounds"`
	// MessageID is the message whose processing produced the result.
	MessageID string `json:"messageId"`
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

// idempotent is what the handler needs of an *idempotency.Store.
type idempotent interface {
	Do(ctx context.Context, payload []byte, fn func(ctx context.Context) ([]byte, error)) ([]byte, error)
}

var _ idempotent = (*idempotency.Store)(nil)

// resultWriter is what the handler needs of DynamoDB.
type resultWriter interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ resultWriter = (*dynamodb.Client)(nil)

// Handler is the worker function's handler. Build it with New.
type Handler struct {
	idem    idempotent
	db      resultWriter
	table   string
	now     func() time.Time
	metrics *metrics.Logger
	log     *slog.Logger
}

// Option configures a Handler.
type Option func(*Handler)

// WithMetrics sets where EMF metrics go (nil: nowhere).
func WithMetrics(m *metrics.Logger) Option { return func(h *Handler) { h.metrics = m } }

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithClock sets the clock completedAt is stamped with.
func WithClock(now func() time.Time) Option { return func(h *Handler) { h.now = now } }

// New returns a handler that runs tasks through idem and writes their
// results to the DynamoDB table resultsTable.
func New(idem idempotent, db resultWriter, resultsTable string, opts ...Option) *Handler {
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
)

// Handle runs each task of the batch once per task id and reports the
// messages that failed by id: poison ones, tasks another invocation is
// running (idempotency.ErrInProgress: they come back after the visibility
// timeout and find the result), task ids reused with other data, and tasks
// whose work or write failed.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
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
	for _, name := range []string{"Processed", "Duplicates", "InProgress", "Failures", "Poison"} {
		h.metrics.Add(name, metrics.Count, 0)
	}
	resp, errs := batch.SQS(ctx, ev.Records, func(ctx context.Context, msg *events.SQSMessage) error {
		o, err := h.handleMessage(ctx, msg)
		if err != nil {
			return err
		}
		if o == duplicate {
			h.metrics.Add("Duplicates", metrics.Count, 1)
		} else {
			h.metrics.Add("Processed", metrics.Count, 1)
		}
		return nil
	})
	for _, e := range errs {
		h.metrics.Add("Failures", metrics.Count, 1)
		var pe *stream.PoisonRecordError
		var te *TaskError
		var pm *idempotency.PayloadMismatchError
		switch {
		case errors.As(e.Err, &pe), errors.As(e.Err, &te), errors.As(e.Err, &pm):
			h.metrics.Add("Poison", metrics.Count, 1)
			h.log.Error("poison message: reported failed until it reaches the dead-letter queue", "messageId", e.MessageID, "err", e.Err.Error())
		case errors.Is(e.Err, idempotency.ErrInProgress):
			h.metrics.Add("InProgress", metrics.Count, 1)
			h.log.Warn("task in progress in another invocation: redelivered later", "messageId", e.MessageID)
		case errors.Is(e.Err, batch.ErrGroupBlocked):
			h.log.Warn("message not processed: an earlier message of its group failed", "messageId", e.MessageID)
		default:
			h.log.Error("task failed; it will be retried", "messageId", e.MessageID, "err", e.Err.Error())
		}
	}
	return resp, nil
}

func (h *Handler) handleMessage(ctx context.Context, msg *events.SQSMessage) (outcome, error) {
	var env stream.Envelope
	if err := stream.DecodeSQS(msg, &env); err != nil {
		return 0, err
	}
	task, err := DecodeTask(msg.MessageId, &env)
	if err != nil {
		return 0, err
	}
	executed := false
	out, err := h.idem.Do(ctx, []byte(msg.Body), func(ctx context.Context) ([]byte, error) {
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

// DecodeTask checks that env is a task and decodes its data; errors are
// *TaskError naming the message and the field.
func DecodeTask(messageID string, env *stream.Envelope) (Task, error) {
	var t Task
	if env.Type != TaskType {
		return t, &TaskError{MessageID: messageID, Field: "type", Reason: fmt.Sprintf("%q, want %q", env.Type, TaskType)}
	}
	if len(env.Data) == 0 {
		return t, &TaskError{MessageID: messageID, Field: "data", Reason: "missing"}
	}
	if err := json.Unmarshal(env.Data, &t); err != nil {
		return t, &TaskError{MessageID: messageID, Field: "data", Reason: err.Error()}
	}
	switch {
	case t.TaskID == "":
		return t, &TaskError{MessageID: messageID, Field: "data.taskId", Reason: "missing or empty"}
	case len(t.TaskID) > 256:
		return t, &TaskError{MessageID: messageID, Field: "data.taskId", Reason: "longer than 256 bytes"}
	case t.Rounds < 1 || t.Rounds > MaxRounds:
		return t, &TaskError{MessageID: messageID, Field: "data.rounds", Reason: fmt.Sprintf("%d, want 1 to %d", t.Rounds, MaxRounds)}
	}
	return t, nil
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
	r := Result{TaskID: t.TaskID, Digest: hex.EncodeToString(sum[:]), Rounds: t.Rounds, MessageID: messageID}
	_, err := h.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(h.table),
		Key:              map[string]types.AttributeValue{AttrTaskID: &types.AttributeValueMemberS{Value: t.TaskID}},
		UpdateExpression: aws.String("SET #d = :d, #r = :r, #m = :m, #c = :c ADD #x :one"),
		ExpressionAttributeNames: map[string]string{
			"#d": AttrDigest, "#r": AttrRounds, "#m": AttrMessageID, "#c": AttrCompletedAt, "#x": AttrExecutions,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":d":   &types.AttributeValueMemberS{Value: r.Digest},
			":r":   &types.AttributeValueMemberN{Value: strconv.Itoa(r.Rounds)},
			":m":   &types.AttributeValueMemberS{Value: messageID},
			":c":   &types.AttributeValueMemberS{Value: h.now().UTC().Format(time.RFC3339Nano)},
			":one": &types.AttributeValueMemberN{Value: "1"},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("task %s: writing its result to table %s: %w", t.TaskID, h.table, err)
	}
	return json.Marshal(r)
}
