package events

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/count"
	"github.com/tributary-dev/tributary/pkg/ingest"
	"github.com/tributary-dev/tributary/pkg/quarantine"
	"github.com/tributary-dev/tributary/pkg/standin/standintest"
)

// env is what a case gets: clients on the shared stand-in and a name prefix
// unique to the case, for the streams and tables it creates.
type env struct {
	kin  *kinesis.Client
	db   *dynamodb.Client
	name string
}

// cases maps each sample (path under events/) to its check. A sample without
// an entry fails TestEverySample.
var cases = map[string]func(t *testing.T, e env, raw []byte){
	"ingest/function-url-post.json":    ingestCase(http.StatusAccepted, 1, ""),
	"ingest/function-url-batch.json":   ingestCase(http.StatusAccepted, 3, ""),
	"ingest/function-url-invalid.json": ingestCase(http.StatusBadRequest, 0, `event 1 (id "evt-0006"): occurredAt:`),
	"aggregate/kinesis-batch.json": aggregateCase(nil, map[string]int{
		"user-42 2026-11-29T10:41:00Z": 2,
		"user-7 2026-11-29T10:41:00Z":  1,
	}),
	"aggregate/kinesis-poison.json": aggregateCase([]string{"49601189658422359378836298521827638475320189012309704723"}, map[string]int{
		"user-42 2026-11-29T10:41:00Z": 1,
	}),
	"quarantine/sqs-on-failure.json":  quarantineOnFailure,
	"quarantine/sqs-unparseable.json": quarantineUnparseable,
}

func TestEverySample(t *testing.T) {
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			files = append(files, filepath.ToSlash(path))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	seen := map[string]bool{}
	for _, f := range files {
		seen[f] = true
		if cases[f] == nil {
			t.Errorf("events/%s has no test case: add its documented outcome to cases in events/events_test.go and to doc.go", f)
		}
	}
	for f := range cases {
		if !seen[f] {
			t.Errorf("test case %s has no sample file events/%s", f, f)
		}
	}
	if t.Failed() {
		return
	}

	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	kin, db := kinesis.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg)
	for i, f := range files {
		t.Run(f, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			cases[f](t, env{kin: kin, db: db, name: "sample" + strconv.Itoa(i)}, raw)
		})
	}
}

func decode(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("sample is not a valid %T: %v", v, err)
	}
}

func ingestCase(status, accepted int, errText string) func(t *testing.T, e env, raw []byte) {
	return func(t *testing.T, e env, raw []byte) {
		var req lambdaevents.LambdaFunctionURLRequest
		decode(t, raw, &req)
		ctx := context.Background()
		if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.name), ShardCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
		resp, err := ingest.New(e.kin, e.name).Handle(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != status {
			t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, resp.Body)
		}
		if errText != "" {
			var er ingest.ErrorResponse
			decode(t, []byte(resp.Body), &er)
			if !strings.Contains(er.Error, errText) {
				t.Errorf("error %q does not contain %q", er.Error, errText)
			}
		} else {
			var r ingest.Response
			decode(t, []byte(resp.Body), &r)
			if r.Accepted != accepted {
				t.Errorf("accepted %d, want %d: %s", r.Accepted, accepted, resp.Body)
			}
		}
		if n := recordsOnStream(t, e); n != accepted {
			t.Errorf("%d records on the stream, want %d", n, accepted)
		}
	}
}

func recordsOnStream(t *testing.T, e env) int {
	t.Helper()
	ctx := context.Background()
	it, err := e.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(e.name), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Records)
}

func createTable(t *testing.T, e env, hash, rng string) {
	t.Helper()
	_, err := e.db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:   aws.String(e.name),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String(hash), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String(rng), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String(hash), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String(rng), KeyType: ddbtypes.KeyTypeRange},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func scan(t *testing.T, e env) []map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := e.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(e.name)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Items
}

func str(item map[string]ddbtypes.AttributeValue, name string) string {
	switch v := item[name].(type) {
	case *ddbtypes.AttributeValueMemberS:
		return v.Value
	case *ddbtypes.AttributeValueMemberN:
		return v.Value
	}
	return ""
}

func aggregateCase(wantFailures []string, wantCounts map[string]int) func(t *testing.T, e env, raw []byte) {
	return func(t *testing.T, e env, raw []byte) {
		var ev lambdaevents.KinesisEvent
		decode(t, raw, &ev)
		createTable(t, e, "key", "window")
		resp, err := count.New(e.db, e.name, count.WithClock(func() time.Time { return time.Date(2026, 11, 29, 10, 45, 0, 0, time.UTC) })).Handle(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range resp.BatchItemFailures {
			got = append(got, f.ItemIdentifier)
		}
		if fmt.Sprint(got) != fmt.Sprint(wantFailures) {
			t.Errorf("batch item failures %v, want %v", got, wantFailures)
		}
		counts := map[string]int{}
		for _, it := range scan(t, e) {
			n, _ := strconv.Atoi(str(it, "count"))
			counts[str(it, "key")+" "+str(it, "window")] = n
		}
		if fmt.Sprint(counts) != fmt.Sprint(wantCounts) {
			t.Errorf("counts %v, want %v", counts, wantCounts)
		}
	}
}

func quarantineOnFailure(t *testing.T, e env, raw []byte) {
	var ev lambdaevents.SQSEvent
	decode(t, raw, &ev)
	_, _, info, err := quarantine.Parse([]byte(ev.Records[0].Body))
	if err != nil {
		t.Fatalf("the sample's message body: %v", err)
	}
	createTable(t, e, "source", "sequenceNumber")
	resp, err := quarantine.New(e.kin, e.db, e.name).Handle(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v; want no failures", resp, err)
	}
	items := scan(t, e)
	if len(items) != 1 {
		t.Fatalf("%d items, want 1 missing-records item", len(items))
	}
	it := items[0]
	if str(it, "kind") != "missing" || str(it, "source") != info.Source() || str(it, "startSequenceNumber") != info.StartSequenceNumber ||
		str(it, "condition") != "RetryAttemptsExhausted" || str(it, "reason") == "" || str(it, "expiresAt") == "" {
		t.Errorf("item %v", it)
	}
}

func quarantineUnparseable(t *testing.T, e env, raw []byte) {
	var ev lambdaevents.SQSEvent
	decode(t, raw, &ev)
	createTable(t, e, "source", "sequenceNumber")
	resp, err := quarantine.New(e.kin, e.db, e.name).Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != ev.Records[0].MessageId {
		t.Errorf("failures %v, want exactly message %s", resp.BatchItemFailures, ev.Records[0].MessageId)
	}
	if n := len(scan(t, e)); n != 0 {
		t.Errorf("%d items written for an unparseable message", n)
	}
}
