package cdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// TableScanner is what Snapshot needs of DynamoDB.
type TableScanner interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// StreamReader is what Snapshot needs of DynamoDB Streams.
type StreamReader interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

var (
	_ TableScanner = (*dynamodb.Client)(nil)
	_ StreamReader = (*dynamodbstreams.Client)(nil)
)

// maxEmptyReads is how many empty GetRecords pages in a row mark the tip of
// an open shard (a page can come back empty before the tip).
const maxEmptyReads = 3

// putStalls is how many PutRecords attempts in a row that get none of
// the snapshot's records in make it give up; the waits between them double
// from putBackoff (about 3 s of a stream taking nothing). An attempt that
// gets some in starts the count again: an events stream at its write limit
// (ingest and cdc write to it too) takes part of each call, and a snapshot
// of a table bigger than a few seconds of the stream's capacity needs many
// attempts to go through.
const putStalls = 6

// putBackoff is the wait before the first retry of failed snapshot records.
const putBackoff = 100 * time.Millisecond

// Snapshot publishes every item of table to the handler's stream as a
// TypeSnapshot changelog record tied to the stream position it returns, and
// returns how many it published.
//
// The position is taken before the scan: for each shard of the table's
// stream, the sequence number of its last record (closed shards: their
// ending sequence number; open shards: read from TRIM_HORIZON to the tip,
// positionReaders shards at once, logged as it goes; with a deadline it
// gives up, publishing nothing, once it has used half the time left, see
// position).
// Changes after the position are those the cdc function writes after the
// snapshot's records' versions; a consumer applies the snapshot, then a
// change only if its version is higher than the version it holds for the
// key. The scan is not a point-in-time read: an item written during it can
// appear at a version after the position, which the version rule makes
// harmless (the change of that version is skipped, later ones applied), so
// there is no gap and nothing is applied twice.
//
// An item no snapshot record can be made of (no entity key, no version
// attribute or one that is not a version, a record over Kinesis' limit) is skipped, counted and named
// (the first MaxSkippedListed) in the counts, each logged with its reason
// (WithLogger), and the others are published:
// the item stays in the table, and the next snapshot takes it once it is
// mended. Before, the first such item stopped every snapshot of the table.
//
// Records Kinesis fails (the events stream at its write limit) are retried
// while each attempt gets some in (putAll), and a scan page the table
// throttles is read again (scanPage); the counts include the records
// published before an error.
func (h *Handler) Snapshot(ctx context.Context, db TableScanner, streams StreamReader, table string) (*Position, SnapshotCounts, error) {
	var counts SnapshotCounts
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return nil, counts, fmt.Errorf("table %s: describing the table: %w", table, err)
	}
	arn := aws.ToString(d.Table.LatestStreamArn)
	if arn == "" {
		return nil, counts, fmt.Errorf("table %s: the table has no stream: enable NEW_AND_OLD_IMAGES", table)
	}
	pos, err := h.position(ctx, streams, arn)
	if err != nil {
		return nil, counts, fmt.Errorf("table %s: %w", table, err)
	}
	now := time.Now().UTC()
	var start map[string]ddbtypes.AttributeValue
	for {
		page, err := h.scanPage(ctx, db, table, start, counts.Published)
		if err != nil {
			return pos, counts, fmt.Errorf("table %s: scanning: %w", table, err)
		}
		entries := make([]kintypes.PutRecordsRequestEntry, 0, len(page.Items))
		for _, item := range page.Items {
			e, err := h.snapshotEntry(table, item, pos, now)
			if err != nil {
				// Every one logged: the counts name only the first
				// MaxSkippedListed, and an operator mends them all.
				name := tableKeyText(item, d.Table.KeySchema)
				counts.skip(name, err)
				h.log.WarnContext(ctx, "snapshot: item skipped, no changelog record can be made of it", "table", table, "item", name,
					"reason", strictjson.Cut(err.Error(), 512))
				continue
			}
			entries = append(entries, e)
		}
		for len(entries) > 0 {
			n := putCallSize(entries)
			written, err := h.putAll(ctx, entries[:n])
			counts.Published += written
			if err != nil {
				return pos, counts, fmt.Errorf("table %s: %w", table, err)
			}
			entries = entries[n:]
		}
		if len(page.LastEvaluatedKey) == 0 {
			return pos, counts, nil
		}
		start = page.LastEvaluatedKey
	}
}

// Scan throttling: a table scanned faster than its read capacity (a
// strongly consistent 1 MB page takes 256 read units) refuses pages once
// the SDK's own retries are spent. The scan waits and asks for the same
// page again, the wait doubling from scanBackoff up to maxScanBackoff, and
// gives up after scanThrottles refusals of one page in a row (about a
// minute of waits).
const (
	scanBackoff    = 200 * time.Millisecond
	maxScanBackoff = 10 * time.Second
	scanThrottles  = 12
)

// scanPage reads the page of table starting at start, asking again while
// DynamoDB throttles it (logged, with the records published so far).
func (h *Handler) scanPage(ctx context.Context, db TableScanner, table string, start map[string]ddbtypes.AttributeValue, published int) (*dynamodb.ScanOutput, error) {
	for attempt := 1; ; attempt++ {
		page, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true)})
		if err == nil || !isThrottle(err) || attempt == scanThrottles {
			return page, err
		}
		wait := min(scanBackoff<<(attempt-1), maxScanBackoff)
		h.log.WarnContext(ctx, "snapshot: the table's scan is throttled (its read capacity); reading the page again", "table", table,
			"attempt", attempt, "wait", wait.String(), "published", published, "error", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// isThrottle reports whether err is DynamoDB refusing a request for
// throughput: the table's capacity, the account's request limit, or the
// control plane's rate.
func isThrottle(err error) bool {
	var pte *ddbtypes.ProvisionedThroughputExceededException
	var rle *ddbtypes.RequestLimitExceeded
	var api smithy.APIError
	return errors.As(err, &pte) || errors.As(err, &rle) ||
		(errors.As(err, &api) && (api.ErrorCode() == "ThrottlingException" || api.ErrorCode() == "Throttling"))
}

// SnapshotCounts is what a snapshot published and skipped.
type SnapshotCounts struct {
	Published int
	// Skipped counts the items no record could be made of; SkippedItems
	// names the first MaxSkippedListed of them.
	Skipped      int
	SkippedItems []SkippedItem
}

// SkippedItem is an item a snapshot skipped: its key in the table and why.
type SkippedItem struct {
	Item   string `json:"item"`
	Reason string `json:"reason"`
}

// MaxSkippedListed bounds the skipped items a snapshot names.
const MaxSkippedListed = 20

func (c *SnapshotCounts) skip(item string, err error) {
	c.Skipped++
	if len(c.SkippedItems) < MaxSkippedListed {
		c.SkippedItems = append(c.SkippedItems, SkippedItem{Item: item, Reason: strictjson.Cut(err.Error(), 512)})
	}
}

// tableKeyText names an item by its table key: "userId=u1", the key
// attributes in the schema's order, each value cut.
func tableKeyText(item map[string]ddbtypes.AttributeValue, schema []ddbtypes.KeySchemaElement) string {
	parts := make([]string, 0, len(schema))
	for _, k := range schema {
		name := aws.ToString(k.AttributeName)
		var v string
		switch av := item[name].(type) {
		case *ddbtypes.AttributeValueMemberS:
			v = av.Value
		case *ddbtypes.AttributeValueMemberN:
			v = av.Value
		case *ddbtypes.AttributeValueMemberB:
			v = fmt.Sprintf("%d bytes", len(av.Value))
		}
		parts = append(parts, name+"="+strictjson.Cut(v, 64))
	}
	return strings.Join(parts, " ")
}

// putCallSize is how many of entries (at least one) one PutRecords call
// takes: at most 500 records and 5 MiB. A Scan page holds 1 MB of items,
// which can be more than 5 MiB as JSON.
func putCallSize(entries []kintypes.PutRecordsRequestEntry) int {
	size := 0
	for i, e := range entries {
		size += limits.KinesisRecordSize(e.Data, aws.ToString(e.PartitionKey))
		if i > 0 && (i == maxPutRecords || size > limits.KinesisPutRecordsBytes) {
			return i
		}
	}
	return len(entries)
}

// putAll writes entries, retrying the ones Kinesis failed (throttling or
// an internal error, both transient) for as long as attempts get some of
// them in, and gives up after putStalls attempts in a row that got none in.
// Snapshot records of different keys need no order among themselves. It
// returns how many it wrote.
func (h *Handler) putAll(ctx context.Context, entries []kintypes.PutRecordsRequestEntry) (int, error) {
	written, stalls := 0, 0
	for attempt := 1; ; attempt++ {
		out, err := h.kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(h.stream), Records: entries})
		if err != nil {
			return written, fmt.Errorf("putting %d snapshot records on stream %s: %w", len(entries), h.stream, err)
		}
		if aws.ToInt32(out.FailedRecordCount) == 0 {
			return written + len(entries), nil
		}
		var failed []kintypes.PutRecordsRequestEntry
		lastErr := ""
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				failed = append(failed, entries[i])
				lastErr = aws.ToString(r.ErrorCode) + ": " + aws.ToString(r.ErrorMessage)
			}
		}
		if len(failed) == 0 {
			return written, fmt.Errorf("stream %s: PutRecords reported %d failed records but none carries an error code", h.stream, aws.ToInt32(out.FailedRecordCount))
		}
		if len(failed) < len(entries) {
			stalls = 0
		} else {
			stalls++
		}
		written += len(entries) - len(failed)
		if stalls == putStalls {
			return written, fmt.Errorf("stream %s: %d snapshot records still failed after %d attempts, the last %d taking none of them in (last error %s)",
				h.stream, len(failed), attempt, stalls, lastErr)
		}
		entries = failed
		select {
		case <-ctx.Done():
			return written, ctx.Err()
		case <-time.After(putBackoff << max(stalls-1, 0)):
		}
	}
}

func (h *Handler) snapshotEntry(table string, item map[string]ddbtypes.AttributeValue, pos *Position, now time.Time) (kintypes.PutRecordsRequestEntry, error) {
	img := stream.FromItem(item)
	var key string
	switch av, ok := img[h.keyAttr]; {
	case ok && av.DataType() == events.DataTypeString && av.String() != "":
		key = av.String()
	case ok && av.DataType() == events.DataTypeNumber:
		key = av.Number()
	default:
		return kintypes.PutRecordsRequestEntry{}, fmt.Errorf("an item has no S or N entity key attribute %q (ENTITY_KEY_ATTRIBUTE)", h.keyAttr)
	}
	av, ok := img[VersionAttribute]
	if !ok {
		// As a change without one is set aside: a made-up version would
		// outrank (or hide behind) the versions the item is given next.
		return kintypes.PutRecordsRequestEntry{}, fmt.Errorf("item %s: %s: is missing: every item of the table carries a number attribute %[2]s, bumped on every write", key, VersionAttribute)
	}
	v, err := itemVersion(av)
	if err != nil {
		return kintypes.PutRecordsRequestEntry{}, fmt.Errorf("item %s: %s: %w", key, VersionAttribute, err)
	}
	version := json.Number(v.String())
	image, err := ImageJSON(img)
	if err != nil {
		return kintypes.PutRecordsRequestEntry{}, fmt.Errorf("item %s: %w", key, err)
	}
	// As Handle writes the changelog: without HTML escaping, checked
	// against Kinesis' record limit.
	data, err := setaside.MarshalJSON(Data{Key: key, Version: version, Image: image, SnapshotOf: pos})
	if err != nil {
		return kintypes.PutRecordsRequestEntry{}, fmt.Errorf("item %s: encoding data: %w", key, err)
	}
	// No receivedAt: now is this machine's clock (cmd/snapshot runs on an
	// operator's), and consumers refuse a receivedAt more than a minute
	// after the record reached Kinesis; without one they take its arrival.
	env := stream.Envelope{ID: changeID(table, key, version.String()), Type: TypeSnapshot, Key: key,
		OccurredAt: now, SentAt: now, Data: data}
	if err := env.Validate(); err != nil {
		return kintypes.PutRecordsRequestEntry{}, fmt.Errorf("item %s: %w", key, err)
	}
	b, err := setaside.MarshalJSON(&env)
	if err != nil {
		return kintypes.PutRecordsRequestEntry{}, fmt.Errorf("item %s: %w", key, err)
	}
	if n := limits.KinesisRecordSize(b, key); n > limits.KinesisRecordBytes {
		reason := ""
		if name, size := largestAttribute(img); name != "" {
			reason = fmt.Sprintf("; attribute %s is %d bytes as JSON", name, size)
		}
		return kintypes.PutRecordsRequestEntry{}, fmt.Errorf("item %s: the snapshot record would be %d bytes (data and partition key), over Kinesis' limit of %d%s",
			key, n, limits.KinesisRecordBytes, reason)
	}
	return kintypes.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(key)}, nil
}

// positionProgressPages is how many GetRecords pages of one open shard
// pass between progress lines while the position is taken.
const positionProgressPages = 50

// positionReaders bounds the open shards read at once while the position is
// taken. A busy table's stream has an open shard per partition, and read one
// after another the position took the sum of their reads. Each reader reads
// one shard, one GetRecords after another: DynamoDB Streams throttles more
// than two readers of the same shard (the cdc function's event source
// mapping is the other one) and states no limit across a stream's shards;
// the bound keeps a table of hundreds of partitions from opening hundreds of
// connections at once.
const positionReaders = 8

// position is the last sequence number of every shard of the stream. An
// open shard is read from its oldest record to its tip (no call gives its
// last sequence number), which on a busy table is minutes of GetRecords:
// it reads positionReaders open shards at once, logs each shard read, and
// a line every positionProgressPages pages of a shard. With a deadline (a
// Lambda invocation's), it stops every reader once it has used half the
// time left when it began, rather than run until Lambda kills the
// invocation with nothing published: the scan and the publishing need the
// rest. The first shard that fails, or finds the time used, stops the
// others, and its error is the one returned.
func (h *Handler) position(ctx context.Context, streams StreamReader, arn string) (*Position, error) {
	start := time.Now()
	var stopAt time.Time
	if d, ok := ctx.Deadline(); ok {
		stopAt = start.Add(d.Sub(start) / 2)
	}
	pos := &Position{StreamArn: arn, Shards: map[string]string{}}
	var open []string
	for after := (*string)(nil); ; {
		d, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: after})
		if err != nil {
			return nil, fmt.Errorf("describing stream %s: %w", arn, err)
		}
		for _, sh := range d.StreamDescription.Shards {
			id := aws.ToString(sh.ShardId)
			if r := sh.SequenceNumberRange; r != nil && r.EndingSequenceNumber != nil {
				pos.Shards[id] = aws.ToString(r.EndingSequenceNumber)
				continue
			}
			open = append(open, id)
		}
		if after = d.StreamDescription.LastEvaluatedShardId; after == nil {
			break
		}
	}
	if len(open) > 0 {
		h.log.InfoContext(ctx, "taking the stream position: reading the open shards to their tips", "stream", arn,
			"openShards", len(open), "atOnce", min(len(open), positionReaders))
	}
	lasts, read, err := h.readOpenShards(ctx, streams, arn, open, start, stopAt)
	if err != nil {
		return nil, err
	}
	for i, id := range open {
		pos.Shards[id] = lasts[i]
	}
	h.log.InfoContext(ctx, "stream position taken", "stream", arn, "shards", len(pos.Shards), "recordsRead", read,
		"took", time.Since(start).Round(time.Millisecond).String())
	return pos, nil
}

// readOpenShards reads shards to their tips, positionReaders at once, and
// returns each one's last sequence number (in shards' order) and the records
// read. The first error cancels the other readers and is the one returned.
func (h *Handler) readOpenShards(ctx context.Context, streams StreamReader, arn string, shards []string, start, stopAt time.Time) ([]string, int, error) {
	readCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	lasts := make([]string, len(shards))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		read  int
	)
	next := make(chan int)
	for range min(len(shards), positionReaders) {
		wg.Go(func() {
			for i := range next {
				last, n, err := h.lastSequenceNumber(readCtx, streams, arn, shards[i], start, stopAt)
				lasts[i] = last
				mu.Lock()
				read += n
				if err != nil && first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
			}
		})
	}
feed:
	for i := range shards {
		select {
		case next <- i:
		case <-readCtx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return nil, read, first
	}
	if err := ctx.Err(); err != nil {
		return nil, read, fmt.Errorf("stream %s: taking the position after %d records: %w", arn, read, err)
	}
	return lasts, read, nil
}

// lastSequenceNumber reads an open shard to its tip; "" if it is empty.
// It also returns how many records it read.
func (h *Handler) lastSequenceNumber(ctx context.Context, streams StreamReader, arn, shard string, start, stopAt time.Time) (string, int, error) {
	it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(shard),
		ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		return "", 0, fmt.Errorf("stream %s shard %s: %w", arn, shard, err)
	}
	last, empty, records := "", 0, 0
	for pages, iter := 0, it.ShardIterator; iter != nil && empty < maxEmptyReads; pages++ {
		if !stopAt.IsZero() && time.Now().After(stopAt) {
			return "", records, fmt.Errorf("stream %s shard %s: taking the stream position, still reading the open shard to its tip after %d records (%s), "+
				"half the invocation's time: the scan and the publishing would not fit in the rest; nothing was published. "+
				"Run go run ./cmd/snapshot, which has no time limit, or raise the function's timeout",
				arn, shard, records, time.Since(start).Round(time.Millisecond))
		}
		out, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			return "", records, fmt.Errorf("stream %s shard %s: reading to the tip after %d records: %w", arn, shard, records, err)
		}
		if len(out.Records) == 0 {
			empty++
		} else {
			empty = 0
			records += len(out.Records)
			last = aws.ToString(out.Records[len(out.Records)-1].Dynamodb.SequenceNumber)
		}
		iter = out.NextShardIterator
		if pages > 0 && pages%positionProgressPages == 0 {
			h.log.InfoContext(ctx, "taking the stream position: reading an open shard to its tip", "stream", arn, "shard", shard,
				"records", records, "took", time.Since(start).Round(time.Millisecond).String())
		}
	}
	h.log.InfoContext(ctx, "stream position: read an open shard to its tip", "stream", arn, "shard", shard, "records", records,
		"last", last, "took", time.Since(start).Round(time.Millisecond).String())
	return last, records, nil
}
