package setaside

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Metric is the count of records set aside (namespace Tributary, dimension
// Function), emitted through the handler's metrics logger.
const Metric = "RecordsSetAside"

// ErrNoSink is what a nil *Sink answers: a handler built without one
// reports the records it would set aside as failed, so nothing is lost.
var ErrNoSink = errors.New("setaside: no quarantine table configured (QUARANTINE_TABLE_NAME)")

// maxBatchWrite is DynamoDB's limit of requests per BatchWriteItem.
const maxBatchWrite = 25

// putParallelism bounds the concurrent conditional PutItem calls of Keep.
const putParallelism = 8

// attemptsWithoutDeadline bounds the BatchWriteItem attempts for
// unprocessed items when ctx has no deadline (tests, tools); with one,
// attempts go on until it.
const attemptsWithoutDeadline = 10

// writer is what a Sink needs of DynamoDB.
type writer interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ writer = (*dynamodb.Client)(nil)

// Sink writes records to the quarantine table. Build it with New; it is
// safe for concurrent use.
type Sink struct {
	db       writer
	table    string
	function string
	metrics  *metrics.Logger
	log      *slog.Logger
	now      func() time.Time
	backoff  func(attempt int) time.Duration
	// report, when set, is handed each record SetAside is given, and
	// nothing is written (Reporting).
	report func(Record)
}

// Option configures a Sink.
type Option func(*Sink)

// WithFunction names the function setting records aside (its
// AWS_LAMBDA_FUNCTION_NAME), for records that do not name one.
func WithFunction(name string) Option { return func(s *Sink) { s.function = name } }

// WithMetrics counts records set aside in m as Metric; the handler flushes m.
func WithMetrics(m *metrics.Logger) Option { return func(s *Sink) { s.metrics = m } }

// WithLogger sets where the line per record set aside goes (default:
// discarded).
func WithLogger(l *slog.Logger) Option { return func(s *Sink) { s.log = l } }

// WithClock sets the clock for setAsideAt and expiresAt.
func WithClock(now func() time.Time) Option { return func(s *Sink) { s.now = now } }

// WithBackoff sets the wait before attempt+1 of unprocessed writes.
func WithBackoff(f func(attempt int) time.Duration) Option { return func(s *Sink) { s.backoff = f } }

// New returns a Sink writing to the DynamoDB table named table (partition
// key source, sort key sequenceNumber, both strings).
func New(db writer, table string, opts ...Option) *Sink {
	s := &Sink{db: db, table: table, now: time.Now,
		log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		backoff: func(attempt int) time.Duration { return time.Duration(25<<min(attempt, 5)) * time.Millisecond }}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Reporting returns a Sink that writes nothing: SetAside hands each record
// to report and succeeds, so the handler goes on as if it had been set
// aside. For replay's rebuild, whose records the live function set aside
// already when it first read them.
func Reporting(report func(Record)) *Sink { return &Sink{report: report} }

// Table is the name of the table the sink writes to.
func (s *Sink) Table() string {
	if s == nil {
		return ""
	}
	return s.table
}

// SetAside writes recs to the quarantine table, each with its data (over
// several items when it is bigger than one holds), counts them in Metric
// and logs one line per record. It is idempotent: the same record gives the
// same items. An error means some records may not be written — throttling,
// a timeout, a missing table, a record without source or sequence number
// (ErrUnwritable) — and the caller reports them all as failed (Lambda
// redelivers them), so nothing is lost.
func (s *Sink) SetAside(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	if s == nil {
		return ErrNoSink
	}
	if s.report != nil {
		for i := range recs {
			s.report(recs[i])
		}
		return nil
	}
	now := s.now()
	heads := make([]Item, 0, len(recs))
	var chunks []Item
	for i := range recs {
		it := recs[i].item(s.function, now)
		if err := it.bound(); err != nil {
			return err
		}
		head, cs := split(it)
		heads = append(heads, head)
		chunks = append(chunks, cs...)
	}
	// Chunks first: a record's item is never there without its data.
	// Every function that sets the record aside writes the same data.
	if err := s.batchWrite(ctx, chunks); err != nil {
		return err
	}
	if err := s.writeHeads(ctx, heads); err != nil {
		return err
	}
	s.metrics.Add(Metric, metrics.Count, float64(len(recs)))
	for i := range heads {
		h := &heads[i]
		s.log.WarnContext(ctx, "record set aside", "function", h.Function, "source", recs[i].Source, "shard", recs[i].Shard,
			"sequenceNumber", h.SequenceNumber, "field", h.Field, "kind", h.Category, "reason", h.Reason,
			"dataBytes", h.DataBytes, "table", s.table)
	}
	return nil
}

// Keep writes items as they are (quarantine's records of failed ranges and
// its notes of missing records), each record's data over several items
// when needed. An ItemRecord never replaces an item a function set aside
// (its reason is the precise one): those are left as they are. Every
// attribute is bounded as SetAside bounds it; an item whose keys are
// missing or over DynamoDB's limits is ErrUnwritable, and no retry of the
// same items can succeed. Idempotent.
func (s *Sink) Keep(ctx context.Context, items []Item) error {
	if len(items) == 0 {
		return nil
	}
	if s == nil || s.report != nil {
		return ErrNoSink
	}
	heads := make([]Item, 0, len(items))
	var chunks []Item
	for _, it := range items {
		if err := it.bound(); err != nil {
			return err
		}
		head, cs := split(it) // a missing item has no data: itself, no chunks
		heads = append(heads, head)
		chunks = append(chunks, cs...)
	}
	// Chunks first, as for SetAside, each on the condition that it is
	// not a chunk of a record set aside: the copy's data need not be the
	// same bytes (a DynamoDB stream record as GetRecords returns it).
	if err := s.putAll(ctx, chunks); err != nil {
		return err
	}
	return s.putAll(ctx, heads)
}

// writeHeads writes the records' own items concurrently (writeSetAside),
// each record once.
func (s *Sink) writeHeads(ctx context.Context, heads []Item) error {
	seen := map[string]bool{}
	once := heads[:0:0]
	for i := range heads {
		k := heads[i].Source + "\x00" + heads[i].SequenceNumber
		if !seen[k] { // the same record twice in one batch: the first is kept, as before
			seen[k] = true
			once = append(once, heads[i])
		}
	}
	return each(len(once), func(i int) error { return s.writeSetAside(ctx, &once[i]) })
}

// each runs fn(0) … fn(n-1), putParallelism at a time, and returns the
// first error any returned (all run).
func each(n int, fn func(i int) error) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, putParallelism)
	)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(i); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// notSetAside is the condition of Keep's record items, and notSetAsideChunk
// of their chunk items.
var notSetAside, notSetAsideChunk = notOf("kind"), notOf("chunkOf")

// notOf is the condition that attribute name is absent or not ItemSetAside.
func notOf(name string) expression.Expression {
	cond := expression.Or(expression.AttributeNotExists(expression.Name(name)),
		expression.Name(name).NotEqual(expression.Value(ItemSetAside)))
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		panic(err) // a constant expression: fails in every test if wrong
	}
	return e
}

// putAll puts items concurrently, record items (and their chunks) on the
// condition that they do not replace a set-aside item (or its chunks).
func (s *Sink) putAll(ctx context.Context, items []Item) error {
	ins := make([]*dynamodb.PutItemInput, len(items))
	for i := range items {
		av, err := s.marshal(&items[i])
		if err != nil {
			return err
		}
		in := &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av}
		var cond *expression.Expression
		switch {
		case items[i].Kind == ItemRecord:
			cond = &notSetAside
		case items[i].Kind == ItemChunk && items[i].ChunkOf == ItemRecord:
			cond = &notSetAsideChunk
		}
		if cond != nil {
			in.ConditionExpression = cond.Condition()
			in.ExpressionAttributeNames = cond.Names()
			in.ExpressionAttributeValues = cond.Values()
		}
		ins[i] = in
	}
	return each(len(items), func(i int) error {
		_, err := s.db.PutItem(ctx, ins[i])
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			if items[i].Kind != ItemChunk { // a chunk's record item says it below
				s.log.InfoContext(ctx, "record already set aside by its function; kept as it is",
					"source", items[i].Source, "sequenceNumber", items[i].SequenceNumber)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("PutItem %s/%s into %s: %w", items[i].Source, items[i].SequenceNumber, s.table, err)
		}
		return nil
	})
}

// marshal encodes an item and checks it against DynamoDB's item size.
func (s *Sink) marshal(it *Item) (map[string]types.AttributeValue, error) {
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("setaside: encoding item %s/%s: %w", it.Source, it.SequenceNumber, err)
	}
	if err := limits.CheckItem(av); err != nil {
		// Bounded attributes make this unreachable; if it is reached the
		// write could never succeed, and the caller must hear of it.
		return nil, fmt.Errorf("%w: item %s/%s: %w", ErrUnwritable, strictjson.Cut(it.Source, 64), strictjson.Cut(it.SequenceNumber, 64), err)
	}
	return av, nil
}

// batchWrite puts items with BatchWriteItem, 25 a call, retrying
// unprocessed items with backoff until ctx's deadline.
func (s *Sink) batchWrite(ctx context.Context, items []Item) error {
	for start := 0; start < len(items); start += maxBatchWrite {
		part := items[start:min(start+maxBatchWrite, len(items))]
		reqs := make([]types.WriteRequest, 0, len(part))
		seen := map[string]bool{}
		for i := range part {
			// BatchWriteItem refuses two requests for one key in a call.
			k := part[i].Source + "\x00" + part[i].SequenceNumber
			if seen[k] {
				continue
			}
			seen[k] = true
			av, err := s.marshal(&part[i])
			if err != nil {
				return err
			}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: av}})
		}
		if err := s.writeRequests(ctx, reqs); err != nil {
			return err
		}
	}
	return nil
}

func (s *Sink) writeRequests(ctx context.Context, reqs []types.WriteRequest) error {
	_, hasDeadline := ctx.Deadline()
	pending := map[string][]types.WriteRequest{s.table: reqs}
	for attempt := 0; len(pending[s.table]) > 0; attempt++ {
		if attempt > 0 {
			if !hasDeadline && attempt >= attemptsWithoutDeadline {
				return fmt.Errorf("BatchWriteItem into %s: %d items still unprocessed after %d attempts", s.table, len(pending[s.table]), attempt)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("BatchWriteItem into %s: %d items still unprocessed at the deadline: %w", s.table, len(pending[s.table]), ctx.Err())
			case <-time.After(s.backoff(attempt)):
			}
		}
		out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
		if err != nil {
			return fmt.Errorf("BatchWriteItem into %s: %w", s.table, err)
		}
		pending = out.UnprocessedItems
	}
	return nil
}
