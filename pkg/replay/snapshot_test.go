package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// cdcFunction plays the cdc function on the profiles table's stream,
// remembering where it is, so the test decides how far it lags.
type cdcFunction struct {
	t       *testing.T
	streams *dynamodbstreams.Client
	arn     string
	h       *cdc.Handler
	iters   map[string]*string
}

func (c *cdcFunction) catchUp(ctx context.Context) int {
	c.t.Helper()
	d, err := c.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(c.arn)})
	if err != nil {
		c.t.Fatal(err)
	}
	n := 0
	for _, sh := range d.StreamDescription.Shards {
		id := aws.ToString(sh.ShardId)
		if c.iters[id] == nil {
			it, err := c.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(c.arn), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				c.t.Fatal(err)
			}
			c.iters[id] = it.ShardIterator
		}
		for {
			out, err := c.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: c.iters[id]})
			if err != nil {
				c.t.Fatal(err)
			}
			c.iters[id] = out.NextShardIterator
			if len(out.Records) == 0 {
				break
			}
			var ev events.DynamoDBEvent
			for i := range out.Records {
				ev.Records = append(ev.Records, stream.FromStreamsRecord(&out.Records[i], c.arn))
			}
			resp, err := c.h.Handle(ctx, ev)
			if err != nil || len(resp.BatchItemFailures) != 0 {
				c.t.Fatalf("cdc: %v %v", resp, err)
			}
			n += len(ev.Records)
		}
	}
	return n
}

// consume reads every shard of the events stream from a timestamp and
// applies the changelog by version, as a new consumer does; it returns the
// state and how often each key@version was applied.
func consume(t *testing.T, kin *kinesis.Client, name string, from time.Time) (map[string]map[string]any, map[string]int) {
	t.Helper()
	ctx := context.Background()
	shards, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	type held struct {
		version string
		image   map[string]any
	}
	st := map[string]held{}
	applied := map[string]int{}
	for _, sh := range shards.Shards {
		it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId,
			ShardIteratorType: kintypes.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(from)})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for {
			out, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			iter = out.NextShardIterator
			if len(out.Records) == 0 {
				break
			}
			for _, r := range out.Records {
				var env stream.Envelope
				var data cdc.Data
				if err := json.Unmarshal(r.Data, &env); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(env.Data, &data); err != nil {
					t.Fatal(err)
				}
				cur, ok := st[data.Key]
				if ok && stream.CompareSequence(data.Version.String(), cur.version) <= 0 {
					continue
				}
				st[data.Key] = held{data.Version.String(), data.Image}
				applied[data.Key+"@"+data.Version.String()]++
			}
		}
	}
	out := map[string]map[string]any{}
	for k, h := range st {
		if h.image != nil {
			out[k] = h.image
		}
	}
	return out, applied
}

// TestSnapshotStartLeavesNoGap: with the cdc function lagging behind the
// table (its backlog reaching Kinesis during the snapshot) and changes
// made during and after the scan, a consumer that starts at the result's
// StartAt and applies by version ends with the table's contents, applying
// no key@version twice; one that starts where the stream ended when the
// snapshot finished misses the change published during the scan.
func TestSnapshotStartLeavesNoGap(t *testing.T) {
	ctx := context.Background()
	n := seq.Add(1)
	db, streams, kin := dynamodb.NewFromConfig(awsCfg), dynamodbstreams.NewFromConfig(awsCfg), kinesis.NewFromConfig(awsCfg)
	table, events := fmt.Sprintf("profiles-%d", n), fmt.Sprintf("events-%d", n)
	created, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("userId"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("userId"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(events), ShardCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	put := func(user string, version int) {
		t.Helper()
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
			"userId": &ddbtypes.AttributeValueMemberS{Value: user}, "version": &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(version)},
			"plan": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("plan-%d", version)}}}); err != nil {
			t.Fatal(err)
		}
	}
	// 600 profiles: the snapshot needs two PutRecords calls (500 + 100).
	for i := range 600 {
		put(fmt.Sprintf("u-%03d", i), 1)
	}
	put("u-001", 2)
	fn := &cdcFunction{t: t, streams: streams, arn: aws.ToString(created.TableDescription.LatestStreamArn), h: cdc.New(kin, events), iters: map[string]*string{}}

	var progress []string
	duringScan := false
	s := replay.NewSnapshotter(db, streams, kin, events, replay.WithClockSkew(time.Second),
		replay.WithProgress(func(published, total int) {
			progress = append(progress, fmt.Sprintf("published %d/%d", published, total))
			if duringScan {
				return
			}
			duringScan = true
			// Between the two PutRecords of the snapshot: a change after the
			// position, and the cdc function working off its backlog (every
			// change before the position) and that change.
			put("u-002", 2)
			time.Sleep(20 * time.Millisecond)
			fn.catchUp(ctx)
		}))
	// As the function gets it: the console's Test event, raw.
	answer, err := s.Invoke(ctx, []byte(`{"table": "`+table+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var res *replay.SnapshotResult
	if err := json.Unmarshal(answer, &res); err != nil {
		t.Fatalf("answer %s: %v", answer, err)
	}
	finished := time.Now()
	time.Sleep(20 * time.Millisecond)
	if res.Published != 600 || res.StartingPosition != "AT_TIMESTAMP" || res.Position == nil || res.Position.StreamArn != fn.arn {
		t.Errorf("result %+v: want 600 published, AT_TIMESTAMP and the table's stream position", res)
	}
	if len(progress) != 2 || progress[0] != "published 500/601" && progress[0] != "published 500/600" || progress[1][:14] != "published 600/" {
		t.Errorf("progress %q, want published 500/…, 600/…", progress)
	}

	// After the snapshot.
	put("u-003", 2)
	put("u-700", 1)
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: map[string]ddbtypes.AttributeValue{"userId": &ddbtypes.AttributeValueMemberS{Value: "u-004"}}}); err != nil {
		t.Fatal(err)
	}
	fn.catchUp(ctx)

	want := map[string]string{}
	scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range scan.Items {
		want[it["userId"].(*ddbtypes.AttributeValueMemberS).Value] = it["plan"].(*ddbtypes.AttributeValueMemberS).Value
	}

	got, applied := consume(t, kin, events, res.StartAt)
	for k, n := range applied {
		if n > 1 {
			t.Errorf("applied %s %d times", k, n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("consumer holds %d profiles, the table %d", len(got), len(want))
	}
	for k, plan := range want {
		if got[k]["plan"] != plan {
			t.Errorf("%s: consumer has %v, table has plan %s (a gap)", k, got[k], plan)
		}
	}
	if _, ok := got["u-004"]; ok {
		t.Errorf("u-004 deleted after the snapshot is still held: %v", got["u-004"])
	}

	// Starting where the stream was when the snapshot finished loses the
	// change the cdc function published during the scan.
	late, _ := consume(t, kin, events, finished)
	if late["u-002"] != nil {
		t.Errorf("a consumer starting after the snapshot has u-002 = %v: the test did not publish it during the scan", late["u-002"])
	}
}

// A negative clock skew would put StartAt after the scan began (a consumer
// starting there misses snapshot records): refused before anything is read.
func TestSnapshotRefusesNegativeClockSkew(t *testing.T) {
	s := replay.NewSnapshotter(nil, nil, nil, "events", replay.WithClockSkew(-5*time.Second))
	if res, err := s.Snapshot(context.Background(), "profiles"); err == nil || res != nil || !strings.Contains(err.Error(), "clock skew -5s") {
		t.Errorf("Snapshot with skew -5s: %+v, %v; want a refusal naming the skew", res, err)
	}
}

// The snapshot function reads its input strictly: a misspelt or miscased
// field, a key twice, a name DynamoDB would refuse, or an input past its
// bound is refused naming it, before anything is read or published (the
// runtime's decoder ignored "tabel" and snapshotted the default table).
func TestSnapshotInputIsReadStrictly(t *testing.T) {
	s := replay.NewSnapshotter(nil, nil, nil, "events", replay.WithDefaultTable("profiles"))
	for _, tc := range []struct{ in, want string }{
		{`{"tabel":"orders"}`, `tabel: unknown field; did you mean "table"?`},
		{`{"TABLE":"orders"}`, `TABLE: unknown field`},
		{`{"table":"a","table":"orders"}`, `duplicate object key "table"`},
		{`{"table":7}`, `table: must be a JSON string`},
		{`{"table":"no spaces allowed"}`, `is not a DynamoDB table name`},
		{`{"table":"` + strings.Repeat("t", 90) + ` x"}`, `table: "` + strings.Repeat("t", 80) + `"… is not a DynamoDB table name`},
		{`{"table":"` + strings.Repeat("t", 5000) + `"}`, `input`},
		{`[]`, `must be`},
	} {
		answer, err := s.Invoke(context.Background(), []byte(tc.in))
		if err == nil || answer != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60s: %s, %v; want a refusal with %q", tc.in, answer, err, tc.want)
		}
		// The console shows the error's type and its text JSON-encoded:
		// a type that says what it is, and no < > that come out as \u003c.
		if _, ok := errors.AsType[*replay.InputError](err); !ok || strings.ContainsAny(err.Error(), "<>") {
			t.Errorf("%.60s: %T %q; want a *replay.InputError without < or >", tc.in, err, err)
		}
	}
}
