package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// DefaultClockSkew is how far before the snapshot's start a new consumer
// is told to begin: Kinesis stamps arrival with its own clock, the
// snapshot's start is read from ours. Starting earlier only repeats
// changes, which the version rule skips.
const DefaultClockSkew = 5 * time.Second

// recordPutter is the Kinesis call a snapshot makes.
type recordPutter interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

var _ recordPutter = (*kinesis.Client)(nil)

// SnapshotRequest is the snapshot function's input (the console's Test
// event): the CDC table to snapshot; empty means the function's default.
type SnapshotRequest struct {
	Table string `json:"table"`
}

// SnapshotResult says what a snapshot published and where a new consumer
// of the events stream starts so that snapshot + later changes leave no gap.
type SnapshotResult struct {
	Table  string `json:"table"`
	Stream string `json:"stream"`
	// Position is the table's DynamoDB stream position the snapshot is tied
	// to: changes after it are the cdc function's later records.
	Position *cdc.Position `json:"position"`
	// Published is how many snapshot records were put on the stream.
	Published int `json:"published"`
	// Skipped counts the items no snapshot record could be made of (no
	// entity key, a version that is not one, over Kinesis' record limit),
	// which stay in the table for the next snapshot once mended;
	// SkippedItems names the first cdc.MaxSkippedListed.
	Skipped      int               `json:"skipped"`
	SkippedItems []cdc.SkippedItem `json:"skippedItems,omitempty"`
	// StartingPosition and StartAt are where a new consumer of the events
	// stream starts (an event source mapping's StartingPosition and
	// StartingPositionTimestamp, or GetShardIterator AT_TIMESTAMP): before
	// the position was taken, so every change after it and every snapshot
	// record is read; what comes earlier is older than the snapshot's
	// versions and skipped by the version rule.
	StartingPosition string    `json:"startingPosition"`
	StartAt          time.Time `json:"startAt"`
	Took             string    `json:"took"`
}

// Snapshotter runs cdc's Snapshot for a bootstrap and works out the
// consumer's start.
type Snapshotter struct {
	db       cdc.TableScanner
	streams  cdc.StreamReader
	kin      recordPutter
	stream   string
	table    string
	opts     []cdc.Option
	skew     time.Duration
	now      func() time.Time
	progress func(published, total int)
}

// SnapshotOption configures a Snapshotter.
type SnapshotOption func(*Snapshotter)

// WithDefaultTable is the table snapshotted when a request names none.
func WithDefaultTable(table string) SnapshotOption { return func(s *Snapshotter) { s.table = table } }

// WithCDCOptions are the cdc handler's options (the entity key attribute).
func WithCDCOptions(opts ...cdc.Option) SnapshotOption {
	return func(s *Snapshotter) { s.opts = append(s.opts, opts...) }
}

// WithClockSkew sets how far before the snapshot's start StartAt is
// (default DefaultClockSkew).
func WithClockSkew(d time.Duration) SnapshotOption { return func(s *Snapshotter) { s.skew = d } }

// WithSnapshotClock sets the clock StartAt is read from.
func WithSnapshotClock(now func() time.Time) SnapshotOption {
	return func(s *Snapshotter) { s.now = now }
}

// WithProgress is called after each PutRecords with the records published
// so far and the table's approximate item count (DescribeTable ItemCount,
// refreshed by DynamoDB about every six hours, so it can be off).
func WithProgress(f func(published, total int)) SnapshotOption {
	return func(s *Snapshotter) { s.progress = f }
}

// NewSnapshotter returns a Snapshotter publishing to the events stream
// named stream.
func NewSnapshotter(db cdc.TableScanner, streams cdc.StreamReader, kin recordPutter, stream string, opts ...SnapshotOption) *Snapshotter {
	s := &Snapshotter{db: db, streams: streams, kin: kin, stream: stream, skew: DefaultClockSkew, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Handle snapshots the table req names (or the default table).
func (s *Snapshotter) Handle(ctx context.Context, req SnapshotRequest) (*SnapshotResult, error) {
	return s.Snapshot(ctx, req.Table)
}

// InputError is a snapshot input refused before anything is read: the
// Lambda runtime names its type (errorType InputError) in the answer.
type InputError struct{ Reason string }

func (e *InputError) Error() string { return "snapshot input: " + e.Reason }

// MaxSnapshotRequestBytes bounds the snapshot function's input: a table
// name and the JSON around it.
const MaxSnapshotRequestBytes = 4 << 10

// Invoke is the snapshot function's entry point (lambda.Handler): the input
// is read with the project's strict reader, so a misspelt field ("tabel")
// or a name in another case ("TABLE") is refused, naming it, where the
// runtime's decoder would ignore it and snapshot the default table; a key
// given twice is refused, not the last copy taken. An empty input, or
// null, is {}: the default table.
func (s *Snapshotter) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var req SnapshotRequest
	if doc := bytes.TrimSpace(payload); len(doc) > 0 && !bytes.Equal(doc, []byte("null")) {
		if err := strictjson.Decode(doc, &req, strictjson.Options{MaxBytes: MaxSnapshotRequestBytes, Name: "input"}); err != nil {
			return nil, &InputError{Reason: err.Error() + ` (want {"table": "the profiles table's name"}, or {} for the default table)`}
		}
	}
	if req.Table != "" && !limits.DynamoDBTableName.MatchString(req.Table) {
		return nil, &InputError{Reason: fmt.Sprintf("table: %s is not a DynamoDB table name (%s)", strictjson.QuoteCut(req.Table, 80), limits.DynamoDBTableNameRule)}
	}
	res, err := s.Snapshot(ctx, req.Table)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// Snapshot publishes table (or the default table) as snapshot records tied
// to its stream position and returns where a new consumer starts.
//
// Why a timestamp taken before the scan: a change after the position
// enters the table's stream after the position was read, so the cdc
// function puts it on the events stream after this timestamp; the snapshot
// records are put after it too. A change at or before the position may
// reach the events stream late (the cdc function lags), even after the
// snapshot's records: its version is not above the snapshot's, so a
// consumer applying by version skips it. Starting later, for example where
// the stream ended when the snapshot finished, loses the changes the cdc
// function put during the scan.
func (s *Snapshotter) Snapshot(ctx context.Context, table string) (*SnapshotResult, error) {
	if table == "" {
		table = s.table
	}
	if table == "" {
		return nil, errors.New(`input field "table" is empty and no default table is configured (PROFILES_TABLE_NAME)`)
	}
	if s.skew < 0 {
		// A negative skew puts StartAt after the scan began: a consumer
		// starting there misses the changes (and snapshot records) before it.
		return nil, fmt.Errorf("clock skew %s: must not be negative (StartAt would come after records the snapshot publishes)", s.skew)
	}
	start := s.now()
	res := &SnapshotResult{Table: table, Stream: s.stream, StartingPosition: "AT_TIMESTAMP",
		StartAt: start.Add(-s.skew).UTC().Truncate(time.Millisecond)}
	total := 0
	if d, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err == nil {
		total = int(aws.ToInt64(d.Table.ItemCount))
	}
	put := &countingPutter{kin: s.kin, progress: s.progress, total: total}
	h := cdc.New(put, s.stream, s.opts...)
	pos, counts, err := h.Snapshot(ctx, s.db, s.streams, table)
	res.Position, res.Published, res.Took = pos, counts.Published, time.Since(start).Round(time.Millisecond).String()
	res.Skipped, res.SkippedItems = counts.Skipped, counts.SkippedItems
	if err != nil {
		return res, fmt.Errorf("%w (published %d records before it stopped; running it again is safe)", err, counts.Published)
	}
	return res, nil
}

// countingPutter reports the records Kinesis accepted.
type countingPutter struct {
	kin      recordPutter
	progress func(published, total int)
	total    int
	mu       sync.Mutex
	done     int
}

func (c *countingPutter) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	out, err := c.kin.PutRecords(ctx, in, optFns...)
	if err != nil || c.progress == nil {
		return out, err
	}
	c.mu.Lock()
	c.done += len(in.Records) - int(aws.ToInt32(out.FailedRecordCount))
	done, total := c.done, max(c.total, c.done)
	c.mu.Unlock()
	c.progress(done, total)
	return out, nil
}
