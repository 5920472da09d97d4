package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

type result struct {
	code           int
	stdout, stderr string
}

func cmd(ctx context.Context, args ...string) result {
	var out, errb bytes.Buffer
	code := run(ctx, args, func(string) (string, bool) { return "", false }, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// TestBadCommandLines: each bad flag is refused with exit 2 in one line
// naming it, before any AWS call; -h exits 0.
func TestBadCommandLines(t *testing.T) {
	ctx := context.Background()
	ok := []string{"-table", "profiles", "-stream", "events"}
	with := func(extra ...string) []string { return append(append([]string{}, ok...), extra...) }
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "-table is required"},
		{[]string{"-table", "profiles"}, "-stream is required"},
		{with("-clock-skew", "-5s"), "-clock-skew -5s: must be from 1s to 1h0m0s"},
		{with("-clock-skew", "0s"), "-clock-skew 0s: must be from 1s to 1h0m0s"},
		{with("-clock-skew", "3h"), "-clock-skew 3h0m0s: must be from 1s to 1h0m0s"},
		{with("-clock-skew", "five"), `invalid value "five" for flag -clock-skew`},
		{with("-key-attribute", ""), "-key-attribute is required"},
		{[]string{"-table", "p", "-stream", "events"}, `-table "p": a DynamoDB table name is 3 to 255`},
		{[]string{"-table", "profiles", "-stream", "events/x"}, `-stream "events/x": a Kinesis stream name`},
		{with("-force"), "flag provided but not defined: -force"},
		{with("profiles"), `unexpected argument "profiles"`},
	} {
		r := cmd(ctx, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("snapshot %v: exit %d stderr %q; want 2 saying %q", c.args, r.code, r.stderr, c.want)
		}
		if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || strings.Count(r.stderr, "snapshot:") != 1 {
			t.Errorf("snapshot %v: want one line with one prefix: %q", c.args, r.stderr)
		}
	}
	if r := cmd(ctx, "-h"); r.code != 0 || !strings.Contains(r.stdout, "-clock-skew") || !strings.Contains(r.stdout, "AWS_REGION") {
		t.Errorf("-h: %+v", r)
	}
}

// TestSnapshot: without a region it refuses; with a stream that does not
// exist it refuses and publishes nothing; a snapshot publishes every item
// it can, names the one it cannot (exit 1), and its startAt is before
// every record it published arrived.
func TestSnapshot(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": srv.Endpoint(), "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none} {
		t.Setenv(k, v)
	}
	db, kin := dynamodb.NewFromConfig(cfg), kinesis.NewFromConfig(cfg)
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("profiles"),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("userId"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("userId"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("profiles"), Item: map[string]ddbtypes.AttributeValue{
			"userId": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprint("user-", i)}, "version": &ddbtypes.AttributeValueMemberN{Value: "1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	// An item no record can be made of: skipped and named, the others
	// published (it stopped the whole snapshot).
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("profiles"), Item: map[string]ddbtypes.AttributeValue{
		"userId": &ddbtypes.AttributeValueMemberS{Value: "user-bad"}, "version": &ddbtypes.AttributeValueMemberS{Value: "x"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("events"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}

	if r := cmd(ctx, "-table", "profiles", "-stream", "events"); r.code != 2 || !strings.Contains(r.stderr, "no AWS region is set") {
		t.Errorf("no region: %+v", r)
	}
	t.Setenv("AWS_REGION", "us-east-1")
	if r := cmd(ctx, "-table", "profiles", "-stream", "nope"); r.code != 3 || !strings.Contains(r.stderr, "refused -stream: stream nope does not exist") {
		t.Errorf("missing stream: %+v", r)
	}
	r := cmd(ctx, "-table", "profiles", "-stream", "events", "-clock-skew", "2s")
	if r.code != 1 || !strings.Contains(r.stderr, "1 of the table's items could not be published") || !strings.Contains(r.stderr, "userId=user-bad: item user-bad: version") {
		t.Fatalf("snapshot with an item it cannot publish: %+v; want exit 1 naming it", r)
	}
	var res struct {
		Published int       `json:"published"`
		Skipped   int       `json:"skipped"`
		StartAt   time.Time `json:"startAt"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Published != 5 || res.Skipped != 1 {
		t.Fatalf("result %q: %+v %v", r.stdout, res, err)
	}
	ls, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("events")})
	if err != nil {
		t.Fatal(err)
	}
	it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("events"), ShardId: ls.Shards[0].ShardId, ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	out, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil || len(out.Records) != 5 {
		t.Fatalf("the stream holds %d records (%v), want 5", len(out.Records), err)
	}
	for _, rec := range out.Records {
		// Arrival stamps come back to the second; startAt is 2s before the scan.
		if at := aws.ToTime(rec.ApproximateArrivalTimestamp); at.Before(res.StartAt.Truncate(time.Second)) {
			t.Errorf("record %s arrived %s, before startAt %s: a consumer starting there misses it", aws.ToString(rec.SequenceNumber), at, res.StartAt)
		}
	}
	if !strings.Contains(r.stderr, "2s before the scan began") {
		t.Errorf("stderr %q does not say how far before the scan startAt is", r.stderr)
	}
}
