package count

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// WindowLayout formats a window's start and end: RFC 3339, UTC, whole
// seconds, e.g. "2026-11-29T10:41:00Z".
const WindowLayout = "2006-01-02T15:04:05Z07:00"

// itemUpdater is what the handler needs of DynamoDB.
type itemUpdater interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ itemUpdater = (*dynamodb.Client)(nil)

// Handler is the aggregate function's handler. Build it with New.
type Handler struct {
	table       string
	db          itemUpdater
	now         func() time.Time
	concurrency int
	metrics     *metrics.Logger
	log         *slog.Logger
}

// Option configures a Handler.
type Option func(*Handler)

// WithClock sets the clock that stamps updatedAt.
func WithClock(now func() time.Time) Option { return func(h *Handler) { h.now = now } }

// WithMetrics sets where EMF metrics go (nil: nowhere).
func WithMetrics(m *metrics.Logger) Option { return func(h *Handler) { h.metrics = m } }

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithConcurrency sets how many UpdateItem calls run at once (default 8).
func WithConcurrency(n int) Option { return func(h *Handler) { h.concurrency = max(n, 1) } }

// New returns a handler counting into the DynamoDB table named table.
func New(db itemUpdater, table string, opts ...Option) *Handler {
	h := &Handler{table: table, db: db, now: time.Now, concurrency: 8, log: slog.Default()}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Window is one (key, minute) cell of the counts table.
type Window struct {
	Key   string
	Start time.Time // the minute's start, UTC
}

// group is the in-memory sum of one window in a batch.
type group struct {
	window Window
	count  int
	first  int // index of the window's first record in the batch
}

// Handle counts one Kinesis batch; see the package comment for the
// semantics. It never returns an error: failures are batch item failures.
func (h *Handler) Handle(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	defer func() {
		if err := h.metrics.Flush(); err != nil {
			h.log.Error("metrics flush", "err", err)
		}
	}()
	// Stop half a second before the invoke deadline: what is not written by
	// then is reported as failed and redelivered, and the answer gets out.
	ctx, cancel := batch.Reserve(ctx, 500*time.Millisecond)
	defer cancel()
	recs := ev.Records
	h.metrics.Add("RecordsIn", metrics.Count, float64(len(recs)))
	h.metrics.Add("PoisonRecords", metrics.Count, 0)

	var failures batch.StreamFailures
	groups, stop, err := aggregate(ctx, recs)
	if stop < len(recs) {
		failures.Add(recs[stop].Kinesis.SequenceNumber)
		var pe *stream.PoisonRecordError
		if errors.As(err, &pe) {
			h.metrics.Add("PoisonRecords", metrics.Count, 1)
			h.log.Error("poison record: stopping the batch here; Lambda redelivers from it",
				"sequenceNumber", pe.RecordID, "field", pe.Field, "err", pe.Err.Error(),
				"eventID", recs[stop].EventID, "recordsCounted", stop, "recordsNotCounted", len(recs)-stop)
		} else {
			h.log.Warn("stopped before the end of the batch", "sequenceNumber", recs[stop].Kinesis.SequenceNumber, "err", err)
		}
	}

	for _, f := range h.write(ctx, groups) {
		failures.Add(recs[f.group.first].Kinesis.SequenceNumber)
		h.log.Error("count not written; Lambda redelivers from the window's first record",
			"key", f.group.window.Key, "window", f.group.window.Start.Format(WindowLayout),
			"count", f.group.count, "sequenceNumber", recs[f.group.first].Kinesis.SequenceNumber, "err", f.err.Error())
	}
	return failures.Kinesis(), nil
}

// aggregate decodes recs in order into per-window sums, stopping at the first
// record that cannot be decoded (or when ctx is done). It returns the groups
// in order of first appearance and the index it stopped at (len(recs) when
// it did not).
func aggregate(ctx context.Context, recs []events.KinesisEventRecord) ([]*group, int, error) {
	byWindow := map[Window]*group{}
	var groups []*group
	var env stream.Envelope
	stop, err := batch.InOrder(ctx, len(recs), func(_ context.Context, i int) error {
		if err := stream.DecodeKinesis(&recs[i], &env); err != nil {
			return err
		}
		w := Window{Key: env.Key, Start: env.EventTime().UTC().Truncate(time.Minute)}
		g := byWindow[w]
		if g == nil {
			g = &group{window: w, first: i}
			byWindow[w] = g
			groups = append(groups, g)
		}
		g.count++
		return nil
	})
	return groups, stop, err
}

type writeFailure struct {
	group *group
	err   error
}

// write applies every group with UpdateItem, at most h.concurrency at once,
// and returns the groups that were not written.
func (h *Handler) write(ctx context.Context, groups []*group) []writeFailure {
	var (
		mu     sync.Mutex
		failed []writeFailure
		wg     sync.WaitGroup
		sem    = make(chan struct{}, h.concurrency)
	)
	updatedAt := h.now().UTC().Format(time.RFC3339Nano)
	for _, g := range groups {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := ctx.Err()
			if err == nil {
				h.metrics.Add("WriteRequests", metrics.Count, 1)
				err = h.add(ctx, g.window, g.count, updatedAt)
			}
			if err != nil {
				mu.Lock()
				failed = append(failed, writeFailure{group: g, err: err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	h.metrics.Add("WriteRequests", metrics.Count, 0)
	return failed
}

// add adds n to the window's count.
func (h *Handler) add(ctx context.Context, w Window, n int, updatedAt string) error {
	start := w.Start.Format(WindowLayout)
	key, err := attributevalue.MarshalMap(struct {
		Key    string `dynamodbav:"key"`
		Window string `dynamodbav:"window"`
	}{w.Key, start})
	if err != nil {
		return fmt.Errorf("count: key for %s/%s: %w", w.Key, start, err)
	}
	update := expression.Add(expression.Name("count"), expression.Value(n)).
		Set(expression.Name("windowEnd"), expression.Value(w.Start.Add(time.Minute).Format(WindowLayout))).
		Set(expression.Name("updatedAt"), expression.Value(updatedAt))
	expr, err := expression.NewBuilder().WithUpdate(update).Build()
	if err != nil {
		return fmt.Errorf("count: update expression: %w", err)
	}
	_, err = h.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(h.table),
		Key:                       key,
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if err != nil {
		return fmt.Errorf("count: add %d to %s/%s in table %s: %w", n, w.Key, start, h.table, err)
	}
	return nil
}
