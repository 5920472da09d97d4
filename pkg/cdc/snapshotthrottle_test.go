package cdc_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/cdc"
)

// busyStream is an events stream at its write limit (the ingest and cdc
// functions write to it too): each PutRecords call gets at most accept of
// its records in, the others fail with ProvisionedThroughputExceeded, as
// Kinesis fails the records over a shard's 1 MiB or 1,000 records a second.
type busyStream struct {
	kin    *kinesis.Client
	accept int
	mu     sync.Mutex
	calls  int
}

func (b *busyStream) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	b.mu.Lock()
	b.calls++
	b.mu.Unlock()
	n := min(b.accept, len(in.Records))
	out := &kinesis.PutRecordsOutput{}
	if n > 0 {
		part := *in
		part.Records = in.Records[:n]
		o, err := b.kin.PutRecords(ctx, &part, optFns...)
		if err != nil {
			return nil, err
		}
		out.Records = append(out.Records, o.Records...)
		out.FailedRecordCount = o.FailedRecordCount
	}
	for range in.Records[n:] {
		out.Records = append(out.Records, kintypes.PutRecordsResultEntry{ErrorCode: aws.String("ProvisionedThroughputExceededException"),
			ErrorMessage: aws.String("Rate exceeded for shard shardId-000000000000 in stream events")})
	}
	out.FailedRecordCount = aws.Int32(aws.ToInt32(out.FailedRecordCount) + int32(len(in.Records)-n))
	return out, nil
}

// TestSnapshotOfABusyStream: a snapshot into an events stream that takes
// only part of each call (throttled) goes on retrying the rest while
// records get in, and publishes every item once; only a stream that takes
// nothing at all for several attempts in a row stops it, with an error
// naming the stream and Kinesis' error.
func TestSnapshotOfABusyStream(t *testing.T) {
	const items = 24
	ctx := context.Background()
	db, streams, kin := profilesOf(t, items)

	// Three records a call: eight calls' worth, more than a fixed number
	// of attempts would allow.
	busy := &busyStream{kin: kin, accept: 3}
	_, counts, err := cdc.New(busy, "events").Snapshot(ctx, db, streams, "profiles")
	if err != nil {
		t.Fatalf("Snapshot into a throttled stream: %v (published %d of %d)", err, counts.Published, items)
	}
	if counts.Published != items {
		t.Errorf("published %d, want %d", counts.Published, items)
	}
	publishedOnce(t, kin, items)

	// A stream that takes nothing: the snapshot stops, saying why.
	stuck := &busyStream{kin: kin, accept: 0}
	_, counts, err = cdc.New(stuck, "events").Snapshot(ctx, db, streams, "profiles")
	if err == nil || !strings.Contains(err.Error(), "stream events") || !strings.Contains(err.Error(), "ProvisionedThroughputExceededException") {
		t.Fatalf("Snapshot into a stream that takes nothing: err %v, want one naming the stream and Kinesis' error", err)
	}
	if counts.Published != 0 {
		t.Errorf("published %d into a stream that took nothing", counts.Published)
	}
	if stuck.calls < 3 {
		t.Errorf("gave up after %d calls: a throttle is retried", stuck.calls)
	}
}

// throttledTable throttles every page of a Scan the first throttles times
// it is asked for, as DynamoDB does a table scanned faster than its
// provisioned read capacity once the SDK's own retries are spent.
type throttledTable struct {
	*dynamodb.Client
	throttles int
	mu        sync.Mutex
	asked     map[string]int // per page (its start key)
	refused   int
}

func (tt *throttledTable) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	tt.mu.Lock()
	page := fmt.Sprint(in.ExclusiveStartKey)
	tt.asked[page]++
	throttle := tt.asked[page] <= tt.throttles
	if throttle {
		tt.refused++
	}
	tt.mu.Unlock()
	if throttle {
		return nil, &ddbtypes.ProvisionedThroughputExceededException{Message: aws.String("The level of configured provisioned throughput for the table was exceeded")}
	}
	in.Limit = aws.Int32(5) // several pages
	return tt.Client.Scan(ctx, in, optFns...)
}

// TestSnapshotOfAThrottledTable: a table scanned faster than its read
// capacity throttles pages; the snapshot waits and reads the page again,
// and publishes every item once, rather than stop partway (and stop there
// again on every rerun, which starts over).
func TestSnapshotOfAThrottledTable(t *testing.T) {
	const items = 12
	ctx := context.Background()
	db, streams, kin := profilesOf(t, items)
	tt := &throttledTable{Client: db, throttles: 2, asked: map[string]int{}}
	_, counts, err := cdc.New(kin, "events").Snapshot(ctx, tt, streams, "profiles")
	if err != nil {
		t.Fatalf("Snapshot of a throttled table: %v (published %d of %d)", err, counts.Published, items)
	}
	if counts.Published != items || tt.refused < 2*3 {
		t.Errorf("published %d of %d, %d scans throttled", counts.Published, items, tt.refused)
	}
	publishedOnce(t, kin, items)
}

// profilesOf starts a stand-in with a profiles table of n items at version
// 1 (u-00, u-01, ...) and an events stream of one shard.
func profilesOf(t *testing.T, n int) (*dynamodb.Client, *dynamodbstreams.Client, *kinesis.Client) {
	t.Helper()
	cfg := standintest.Config(t, standintest.Start(t))
	db, streams, kin := dynamodb.NewFromConfig(cfg), dynamodbstreams.NewFromConfig(cfg), kinesis.NewFromConfig(cfg)
	createProfiles(t, db, "profiles")
	createKinesis(t, kin, "events", 1)
	for i := range n {
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("profiles"), Item: map[string]ddbtypes.AttributeValue{
			"userId": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("u-%02d", i)}, "version": &ddbtypes.AttributeValueMemberN{Value: "1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	return db, streams, kin
}

// publishedOnce checks the events stream holds n snapshot records, each
// once.
func publishedOnce(t *testing.T, kin *kinesis.Client, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, c := range readKinesis(t, kin, "events") {
		seen[c.env.ID]++
	}
	if len(seen) != n {
		t.Errorf("%d distinct snapshot records on the stream, want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("%s on the stream %d times, want once", id, k)
		}
	}
}
