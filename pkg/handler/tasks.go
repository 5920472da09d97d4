package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tributary-dev/tributary/internal/envvar"
	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/idempotency"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
	"github.com/tributary-dev/tributary/pkg/worker"
)

// EnvIdempotencyTable names the idempotency table of a task handler
// (TasksFromEnv reads it).
const EnvIdempotencyTable = "IDEMPOTENCY_TABLE_NAME"

// TaskFunc is the work one SQS message's envelope asks for. Its result is
// kept with the event id's idempotency record: a later copy of the event
// gets it without running the task again. An error wrapping ErrPermanent,
// or a *FieldError (Refuse), is a failure no redelivery can fix: the
// message is set aside on its queue's dead-letter queue with the reason;
// any other error, or a panic, fails that message alone and is retried by
// SQS.
type TaskFunc func(ctx context.Context, ev *Event) ([]byte, error)

// ErrPermanent marks a task's error as one no redelivery can fix:
// fmt.Errorf("order %s is closed: %w", id, handler.ErrPermanent).
var ErrPermanent = errors.New("permanent failure")

// TasksConfig is where a task handler keeps its idempotency records and
// sets messages aside.
type TasksConfig struct {
	// Name prefixes the idempotency keys and is the metrics' Function
	// dimension: lower-case letters, digits and '-'.
	Name string
	// IdempotencyTable has Powertools' schema (partition key "id", TTL on
	// "expiration"; idempotency.CreateTable).
	IdempotencyTable string
	// DynamoDB holds the idempotency records; *dynamodb.Client is one.
	DynamoDB IdempotencyStore
	// SQS sends permanent failures to their queue's dead-letter queue
	// (read from its RedrivePolicy); nil: they are reported failed and
	// reach it after maxReceiveCount, without their reason.
	SQS DeadLetterSender
	// Function is the Lambda function's name recorded with each message
	// set aside (TasksFromEnv: AWS_LAMBDA_FUNCTION_NAME).
	Function string
}

// IdempotencyStore is what a task handler needs of DynamoDB (package
// idempotency's records); *dynamodb.Client is one.
type IdempotencyStore interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// DeadLetterSender is what a task handler needs of SQS to set a message
// aside on its queue's dead-letter queue; *sqs.Client is one.
type DeadLetterSender interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var (
	_ IdempotencyStore = (*dynamodb.Client)(nil)
	_ DeadLetterSender = (*sqs.Client)(nil)
)

// Tasks is an SQS function running a TaskFunc once per event id: lambda.Start(t.Handle).
type Tasks struct {
	name    string
	fn      TaskFunc
	idem    *idempotency.Store
	dead    *worker.DeadLetters
	metrics *metrics.Logger
	log     *slog.Logger

	mu    sync.Mutex
	stats TaskStats
}

// TaskStats are a task handler's counters since it was built.
type TaskStats struct {
	Messages, Ran, Duplicates, SetAside, Failures int
}

// NewTasks returns an SQS handler running fn once per event id (the
// envelope's id; a copy with other data is refused and set aside). It
// reports failed messages by id (ReportBatchItemFailures) and stops before
// the invoke deadline, reporting the rest failed. Options: WithLogger,
// WithMetrics (a windowed handler's options are an error, naming them).
func NewTasks(cfg TasksConfig, fn TaskFunc, opts ...Option) (*Tasks, error) {
	o := options{log: slog.New(slog.NewJSONHandler(os.Stderr, nil)), metrics: os.Stdout}
	errs := o.apply(opts)
	if !nameRE.MatchString(cfg.Name) {
		errs = append(errs, fmt.Errorf("TasksConfig.Name: %q is not 1–63 lower-case letters, digits and '-'", cfg.Name))
	}
	if cfg.IdempotencyTable == "" || cfg.DynamoDB == nil {
		errs = append(errs, errors.New("TasksConfig.IdempotencyTable and DynamoDB are required"))
	} else if err := envvar.Check(cfg.IdempotencyTable, envvar.Table); err != nil {
		errs = append(errs, fmt.Errorf("TasksConfig.IdempotencyTable: %w", err))
	}
	if fn == nil {
		errs = append(errs, errors.New("the TaskFunc is nil"))
	}
	if o.log == nil {
		errs = append(errs, errors.New("WithLogger: the logger is nil"))
	}
	if ignored := o.windowedOnly(); len(ignored) > 0 {
		errs = append(errs, fmt.Errorf("%s: only a windowed handler takes it; a task handler takes WithLogger and WithMetrics", strings.Join(ignored, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("tasks %s: %w", cfg.Name, err)
	}
	// One key per event id; the same id with other data is refused
	// (*idempotency.PayloadMismatchError) rather than given another
	// event's result.
	idem, err := idempotency.New(cfg.DynamoDB, cfg.IdempotencyTable, idempotency.Config{FunctionName: cfg.Name, KeyPath: "id", ValidationPath: "data", RequireKey: true})
	if err != nil {
		return nil, err
	}
	t := &Tasks{name: cfg.Name, fn: fn, idem: idem, log: o.log}
	if cfg.SQS != nil {
		t.dead = worker.NewDeadLetters(cfg.SQS, cfg.Function)
	}
	if o.metrics != nil {
		t.metrics = metrics.New(o.metrics, cfg.Name)
	}
	return t, nil
}

// windowedOnly names the options given that configure a windowed handler
// only (NewTasks would ignore them).
func (o *options) windowedOnly() []string {
	var names []string
	for _, f := range []struct {
		set  bool
		name string
	}{
		{o.win != windows{}, o.win.option},
		{o.late.Policy != 0, "WithLatePolicy"},
		{o.late.AllowedLateness != 0, "WithAllowedLateness"},
		{o.outOfOrderness != 0, "WithOutOfOrderness"},
		{o.idle != 0, "WithIdleTimeout"},
		{o.horizon != 0, "WithDedupeHorizon"},
		{o.lim != Limits{}, "WithLimits"},
		{o.now != nil, "WithClock"},
		{o.concurrency != 0, "WithConcurrency"},
	} {
		if f.set {
			names = append(names, f.name)
		}
	}
	return names
}

// TasksFromEnv is NewTasks with the clients from the function's environment
// and the table from IDEMPOTENCY_TABLE_NAME; the error names what is missing
// or not a name DynamoDB takes.
func TasksFromEnv(name string, fn TaskFunc, opts ...Option) (*Tasks, error) {
	var errs []error
	table, err := envvar.Name(os.LookupEnv, EnvIdempotencyTable, "the DynamoDB table of the idempotency records, partition key id", envvar.Table)
	if err != nil {
		errs = append(errs, err)
	}
	aws, err := lambdamain.Config(os.LookupEnv)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return NewTasks(TasksConfig{Name: name, IdempotencyTable: table, DynamoDB: dynamodb.NewFromConfig(aws), SQS: sqs.NewFromConfig(aws),
		Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")}, fn, opts...)
}

// permanent reports whether err is a failure no redelivery can fix.
func permanent(err error) bool {
	var fe *FieldError
	var pe *stream.PoisonRecordError
	var pm *idempotency.PayloadMismatchError
	var ke *idempotency.KeyError
	return errors.Is(err, ErrPermanent) || errors.As(err, &fe) || errors.As(err, &pe) || errors.As(err, &pm) || errors.As(err, &ke)
}

// Handle runs the batch's tasks: each message's envelope once per event id.
func (t *Tasks) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	if err := stream.CheckSQSEvent(&ev); err != nil {
		return events.SQSEventResponse{}, fmt.Errorf("%s: %w", t.name, err)
	}
	ctx, cancel := batch.Reserve(ctx, 500*time.Millisecond)
	defer cancel()
	var ran, dup, aside int
	resp, errs := batch.SQS(ctx, ev.Records, func(ctx context.Context, msg *events.SQSMessage) error {
		executed, err := t.run(ctx, msg)
		if err != nil && permanent(err) && t.dead != nil {
			if _, derr := t.dead.Send(ctx, msg, err); derr != nil {
				t.log.ErrorContext(ctx, "could not set a message aside on its dead-letter queue: reported failed", "messageId", msg.MessageId,
					"reason", strictjson.Cut(err.Error(), maxLoggedError), "error", derr.Error())
				return err
			}
			t.log.WarnContext(ctx, "message set aside on its dead-letter queue", "messageId", msg.MessageId, "reason", strictjson.Cut(err.Error(), maxLoggedError))
			aside++
			return nil
		}
		if err != nil {
			return err
		}
		if executed {
			ran++
		} else {
			dup++
		}
		return nil
	})
	for _, e := range errs {
		t.log.ErrorContext(ctx, "message failed: SQS delivers it again", "messageId", e.MessageID, "error", strictjson.Cut(e.Err.Error(), maxLoggedError))
	}
	t.mu.Lock()
	t.stats.Messages += len(ev.Records)
	t.stats.Ran += ran
	t.stats.Duplicates += dup
	t.stats.SetAside += aside
	t.stats.Failures += len(errs)
	t.mu.Unlock()
	if t.metrics != nil {
		for _, m := range []struct {
			name string
			v    int
		}{{"MessagesIn", len(ev.Records)}, {"Processed", ran}, {"Duplicates", dup}, {"RecordsSetAside", aside}, {"Failures", len(errs)}} {
			t.metrics.Add(m.name, metrics.Count, float64(m.v))
		}
		if err := t.metrics.Flush(); err != nil {
			t.log.Warn("writing metrics failed", "error", err.Error())
		}
	}
	return resp, nil
}

// Stats returns the counters so far.
func (t *Tasks) Stats() TaskStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

// run decodes msg and runs the task through the idempotency store.
func (t *Tasks) run(ctx context.Context, msg *events.SQSMessage) (executed bool, err error) {
	var env stream.Envelope
	if err := stream.DecodeSQS(msg, &env); err != nil {
		return false, err
	}
	ev := Event{ID: env.ID, Type: env.Type, Key: env.Key, Time: env.EventTime().UTC(), Data: env.Data}
	_, err = t.idem.Do(ctx, []byte(msg.Body), func(ctx context.Context) (res []byte, err error) {
		executed = true
		// A panic is the message's failure, retried as any other error: it
		// must not fail the batch (every message in it would come again,
		// and climb towards the dead-letter queue) nor leave the event's
		// idempotency record in progress.
		defer func() {
			if p := recover(); p != nil {
				res, err = nil, fmt.Errorf("the TaskFunc panicked: %v", p)
			}
		}()
		return t.fn(ctx, &ev)
	})
	if err != nil {
		return false, fmt.Errorf("message %s, event %s: %w", msg.MessageId, env.ID, err)
	}
	return executed, nil
}
