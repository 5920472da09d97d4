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
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/enrich"
	"github.com/tributary-dev/tributary/pkg/idempotency"
	"github.com/tributary-dev/tributary/pkg/ingest"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/quarantine"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/timeline"
	"github.com/tributary-dev/tributary/pkg/worker"
)

// env is what a case gets: clients on the shared stand-in and a name prefix
// unique to the case, for the streams and tables it creates.
type env struct {
	kin  *kinesis.Client
	db   *dynamodb.Client
	cfg  aws.Config // for a case that needs another service's client
	name string
}

// cases maps each sample (path under events/) to its check. A sample without
// an entry fails TestEverySample.
var cases = map[string]func(t *testing.T, e env, raw []byte){
	"ingest/function-url-post.json":            ingestCase(http.StatusAccepted, 1, ""),
	"ingest/function-url-batch.json":           ingestCase(http.StatusAccepted, 3, ""),
	"ingest/function-url-invalid.json":         ingestCase(http.StatusBadRequest, 0, `events[1].occurredAt: "29/11/2026 10:41" is not an RFC 3339 time`),
	"ingest/function-url-idempotency-key.json": ingestIdempotencyKey,
	"ingest/function-url-signed.json":          ingestSigned,
	"aggregate/kinesis-batch.json": aggregateCase(nil, map[string]string{
		"user-42": "count 2 sum 2000",
		"user-7":  "count 1 sum 300",
	}),
	"aggregate/kinesis-poison.json": aggregateCase([]string{"49601189658422359378836298521827638475320189012309704722"}, map[string]string{
		"user-42": "count 1 sum 1200",
	}),
	"aggregate/kinesis-tumbling-window.json": aggregateWindowCase,
	"quarantine/sqs-on-failure.json":         quarantineOnFailure,
	"quarantine/sqs-unparseable.json":        quarantineUnparseable,
	"ticker/eventbridge-scheduled.json":      tickerScheduled,
	"worker/sqs-tasks.json":                  workerCase(nil, map[string]int{"task-1001": 1}),
	"worker/sqs-fifo.json": workerCase([]string{"0b7e4c1a-3333-4d2e-9f3a-5b6c7d8e9f03", "0b7e4c1a-4444-4d2e-9f3a-5b6c7d8e9f04"},
		map[string]int{"task-2001": 1, "task-3001": 1, "task-2002": 0, "task-2003": 0}),
	"worker/sqs-after-missing.json":        workerCase([]string{"5d2e8a41-7c3b-4f6a-9e1d-0b2c3d4e5f60"}, map[string]int{"task-4002": 0}),
	"cdc/dynamodb-insert.json":             cdcCase("profiles/user-42/1", cdc.TypeChanged, `{"country":"NO","marketingOptIn":false,"plan":"free","userId":"user-42","version":1}`),
	"cdc/dynamodb-modify.json":             cdcCase("profiles/user-42/2", cdc.TypeChanged, `{"country":"NO","marketingOptIn":true,"plan":"pro","seats":5,"tags":["beta","eu"],"userId":"user-42","version":2}`),
	"cdc/dynamodb-remove.json":             cdcCase("profiles/user-42/3", cdc.TypeDeleted, `null`),
	"timeline/dynamodb-tweet-insert.json":  timelineTweetInsert,
	"timeline/dynamodb-follow-remove.json": timelineFollowRemove,
	"enrich/kinesis-profile-change.json":   enrichCase(map[string]string{"evt-0100": "-@-", "evt-0101": "pro@2"}),
	"enrich/kinesis-tombstone.json":        enrichCase(map[string]string{"evt-0201": "free@1", "evt-0202": "-@2 deleted"}),
	"snapshot/console-test.json":           snapshotConsoleTest,
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
			cases[f](t, env{kin: kin, db: db, cfg: cfg, name: "sample" + strconv.Itoa(i)}, raw)
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

// ingestIdempotencyKey: the sample twice through a handler keeping request
// records: 202 with 2 accepted, then the same answer byte for byte marked
// Idempotency-Replayed, and 2 records on the stream.
func ingestIdempotencyKey(t *testing.T, e env, raw []byte) {
	var req lambdaevents.LambdaFunctionURLRequest
	decode(t, raw, &req)
	ctx := context.Background()
	if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	if err := idempotency.CreateTable(ctx, e.db, e.name); err != nil {
		t.Fatal(err)
	}
	h := ingest.New(e.kin, e.name, ingest.WithIdempotency(ingest.NewRequestStore(e.db, e.name), 0))
	first, err := h.Handle(ctx, req)
	if err != nil || first.StatusCode != http.StatusAccepted || !strings.Contains(first.Body, `"accepted":2`) {
		t.Fatalf("first: %d %s %v, want 202 with 2 accepted", first.StatusCode, first.Body, err)
	}
	again, err := h.Handle(ctx, req)
	if err != nil || again.StatusCode != first.StatusCode || again.Body != first.Body || again.Headers[ingest.HeaderReplayed] != "true" {
		t.Errorf("resent: %d %v %s, want the first answer replayed", again.StatusCode, again.Headers, again.Body)
	}
	if n := recordsOnStream(t, e); n != 2 {
		t.Errorf("%d records on the stream, want 2", n)
	}
}

// ingestSigned: the sample is signed with the secret "tributary-test-secret"
// at its requestContext time (10:41:09): with that secret in Secrets Manager
// and the server's clock at that time it is accepted; at any real time it is
// outside the 5-minute window, and refused naming the timestamp (what the
// Lambda console shows for it).
func ingestSigned(t *testing.T, e env, raw []byte) {
	var req lambdaevents.LambdaFunctionURLRequest
	decode(t, raw, &req)
	ctx := context.Background()
	sm := secretsmanager.NewFromConfig(e.cfg)
	secret, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(e.name), SecretString: aws.String("tributary-test-secret")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	src := ingest.NewSecretsManagerSecret(sm, aws.ToString(secret.ARN))
	signedAt := time.UnixMilli(req.RequestContext.TimeEpoch)
	for _, c := range []struct {
		now    time.Time
		status int
		text   string
	}{
		{signedAt, http.StatusAccepted, `"accepted":1`},
		{time.Now(), http.StatusUnauthorized, "X-Tributary-Timestamp: 1795948869 is"},
	} {
		resp, err := ingest.New(e.kin, e.name, ingest.WithClock(func() time.Time { return c.now }), ingest.WithSignedRequests(src)).Handle(ctx, req)
		if err != nil || resp.StatusCode != c.status || !strings.Contains(resp.Body, c.text) {
			t.Errorf("at %s: %d %s %v, want %d with %q", c.now.Format(time.RFC3339), resp.StatusCode, resp.Body, err, c.status, c.text)
		}
	}
	if n := recordsOnStream(t, e); n != 1 {
		t.Errorf("%d records on the stream, want 1", n)
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

// stackPipeline is the pipeline the CDK stack deploys (pipelines/pageviews.json).
func stackPipeline(t *testing.T) *pipeline.Config {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "pipelines", "pageviews.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pipeline.Parse(raw)
	if err != nil {
		t.Fatalf("pipelines/pageviews.json: %v", err)
	}
	return cfg
}

func aggregateProcessor(t *testing.T, e env) (*aggregate.Processor, *state.Views, *pipeline.Config) {
	t.Helper()
	cfg := stackPipeline(t)
	if err := state.CreateTable(context.Background(), e.db, e.name); err != nil {
		t.Fatal(err)
	}
	views := state.NewViews(e.db, e.name, cfg.Aggregates)
	return aggregate.New(cfg, views, nil, ""), views, cfg
}

// minute1041 reads the tumbling 1m window 10:41 of key.
func minute1041(t *testing.T, views *state.Views, cfg *pipeline.Config, key string) string {
	t.Helper()
	from := time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)
	vs, err := views.Query(context.Background(), cfg.Name, key, cfg.Windows[0].ID(), from, from.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 {
		return fmt.Sprintf("%d windows", len(vs))
	}
	return fmt.Sprintf("count %d sum %v", vs[0].Result.Count, vs[0].Result.Sum)
}

func aggregateCase(wantFailures []string, want map[string]string) func(t *testing.T, e env, raw []byte) {
	return func(t *testing.T, e env, raw []byte) {
		p, views, cfg := aggregateProcessor(t, e)
		out, err := p.Invoke(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		var resp lambdaevents.KinesisEventResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("response %s: %v", out, err)
		}
		var got []string
		for _, f := range resp.BatchItemFailures {
			got = append(got, f.ItemIdentifier)
		}
		if fmt.Sprint(got) != fmt.Sprint(wantFailures) {
			t.Errorf("batch item failures %v, want %v", got, wantFailures)
		}
		for key, w := range want {
			if g := minute1041(t, views, cfg, key); g != w {
				t.Errorf("%s window 10:41: %s, want %s", key, g, w)
			}
		}
	}
}

func aggregateWindowCase(t *testing.T, e env, raw []byte) {
	p, views, cfg := aggregateProcessor(t, e)
	out, err := p.Invoke(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	var resp lambdaevents.KinesisTimeWindowEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("response %s: %v", out, err)
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("batch item failures %v, want none", resp.BatchItemFailures)
	}
	// The partials ride in the state (one entry for every key and window),
	// with the interval's watermark.
	if resp.State["p||"] == "" || resp.State["wm"] == "" {
		t.Errorf("the state carries no partials or no watermark: %v", resp.State)
	}
	if g := minute1041(t, views, cfg, "user-42"); g != "0 windows" {
		t.Errorf("a non-final invocation wrote to the table: user-42 %s", g)
	}
	// The interval's final invocation, with the state the sample's
	// returned, flushes what it carried: user-7's record and user-42's two
	// (from a producer whose clock is three hours behind: its sentAt and
	// the stream's receivedAt put them in 10:41) in their 10:41 windows.
	// The pipeline's keys stay on one shard, so the windows, which the
	// flush's watermark does not close, go to the shard's carry (written
	// when they close): make results shows them open from there.
	var final map[string]any
	if err := json.Unmarshal(raw, &final); err != nil {
		t.Fatal(err)
	}
	final["Records"], final["state"], final["isFinalInvokeForWindow"] = []any{}, resp.State, true
	finalRaw, err := json.Marshal(final)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Invoke(context.Background(), finalRaw); err != nil {
		t.Fatalf("the final invocation: %v", err)
	}
	for key, want := range map[string]string{"user-7": "count 1 sum 300", "user-42": "count 2 sum 2000"} {
		from := time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)
		vs, err := p.Windows(context.Background(), key, cfg.Windows[0].ID(), from, from.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		g := fmt.Sprintf("%d windows", len(vs))
		if len(vs) == 1 && !vs[0].Final {
			g = fmt.Sprintf("count %d sum %v", vs[0].Result.Count, vs[0].Result.Sum)
		}
		if g != want {
			t.Errorf("after the flush, %s window 10:41 as make results shows it: %s, want %s, open", key, g, want)
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
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("failures %v, want none: the message can never succeed, so it is set aside, not retried", resp.BatchItemFailures)
	}
	items := scan(t, e)
	if len(items) != 1 {
		t.Fatalf("%d items, want the message set aside", len(items))
	}
	it := items[0]
	if str(it, "kind") != "set-aside" || str(it, "source") != ev.Records[0].EventSourceARN || str(it, "sequenceNumber") != ev.Records[0].MessageId ||
		str(it, "field") != "" || str(it, "category") != "unparseable" || !strings.Contains(str(it, "reason"), "body is not a JSON object") {
		t.Errorf("item %v", it)
	}
	if d, ok := it["data"].(*ddbtypes.AttributeValueMemberB); !ok || string(d.Value) != ev.Records[0].Body {
		t.Errorf("data %v, want the message body", it["data"])
	}
}

// tickerScheduled plays the ticker after the aggregate sample's batch (three
// records, event time 10:41, one shard): a tick at the sample's scheduled
// time starts the idle shard's clock and finalizes nothing (the watermark,
// 10:41:35, has passed no window); the next scheduled tick, a minute later
// (over the 30s idleTimeout), advances the watermark to 10:51 − 30s − 5s and
// finalizes all 12 windows (2 keys × tumbling 1m and five 5m hopping windows),
// each emitted once to the results stream as a "final" revision 1. The
// ticker's handler calls Tick at processing time; here the ticks run at the
// sample's time so that the outcome does not depend on the clock.
func tickerScheduled(t *testing.T, e env, raw []byte) {
	var ev lambdaevents.EventBridgeEvent
	decode(t, raw, &ev)
	if ev.DetailType != "Scheduled Event" || ev.Source != "aws.events" || len(ev.Resources) != 1 || ev.Time.IsZero() {
		t.Fatalf("sample is not a scheduled event: %+v", ev)
	}
	ctx := context.Background()
	cfg := stackPipeline(t)
	if err := state.CreateTable(ctx, e.db, e.name); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	views := state.NewViews(e.db, e.name, cfg.Aggregates)
	p := aggregate.New(cfg, views, e.kin, e.name)
	batch, err := os.ReadFile(filepath.Join("aggregate", "kinesis-batch.json"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Invoke(ctx, batch)
	if err != nil || !strings.Contains(string(out), `"batchItemFailures":[]`) {
		t.Fatalf("aggregate batch: %s, %v", out, err)
	}

	ticks := []struct {
		at   time.Time
		want aggregate.TickResult
	}{
		{ev.Time, aggregate.TickResult{Shards: 1}},
		// 12 tumbling and hopping windows, and the two keys' session states.
		{ev.Time.Add(time.Minute), aggregate.TickResult{Shards: 1, Advanced: 1, Finalized: 14}},
	}
	for i, tk := range ticks {
		got, err := p.Tick(ctx, tk.at)
		if err != nil {
			t.Fatalf("tick %d at %s: %v", i, tk.at.Format(time.RFC3339), err)
		}
		if got != tk.want {
			t.Errorf("tick %d at %s: %+v, want %+v", i, tk.at.Format(time.RFC3339), got, tk.want)
		}
	}

	it, err := e.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(e.name), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := e.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	// 2 keys × (1 tumbling + 5 hopping windows) + 1 session each.
	if len(recs.Records) != 14 {
		t.Errorf("%d results on the stream, want 14", len(recs.Records))
	}
	tumbling := map[string]string{}
	for _, r := range recs.Records {
		var o aggregate.Output
		if err := json.Unmarshal(r.Data, &o); err != nil {
			t.Fatalf("result %s: %v", r.Data, err)
		}
		if o.Kind != "final" || o.Revision != 1 || o.Pipeline != cfg.Name {
			t.Errorf("result %s, want a final revision 1 of %s", r.Data, cfg.Name)
		}
		if o.Window == cfg.Windows[0].ID() {
			tumbling[o.Key] = fmt.Sprintf("%s count %d sum %v", o.Start.Format("15:04"), o.Result.Count, o.Result.Sum)
		}
	}
	want := map[string]string{"user-42": "10:41 count 2 sum 2000", "user-7": "10:41 count 1 sum 300"}
	if fmt.Sprint(tumbling) != fmt.Sprint(want) {
		t.Errorf("final tumbling results %v, want %v", tumbling, want)
	}
}

// workerCase runs an SQS sample through the worker twice (the second time as
// SQS redelivering the whole batch) and checks the failed message ids and how
// often each task's side effect ran: once per task id, however often it was
// delivered; never for a message that failed or was blocked behind one.
func workerCase(wantFailures []string, wantExecutions map[string]int) func(t *testing.T, e env, raw []byte) {
	return func(t *testing.T, e env, raw []byte) {
		var ev lambdaevents.SQSEvent
		decode(t, raw, &ev)
		ctx := context.Background()
		idemTable, results := e.name+"-idempotency", e.name+"-results"
		if err := idempotency.CreateTable(ctx, e.db, idemTable); err != nil {
			t.Fatal(err)
		}
		if err := worker.CreateResultsTable(ctx, e.db, results); err != nil {
			t.Fatal(err)
		}
		store, err := idempotency.New(e.db, idemTable, worker.IdempotencyConfig("worker"))
		if err != nil {
			t.Fatal(err)
		}
		h := worker.New(store, e.db, results)
		for delivery := 1; delivery <= 2; delivery++ {
			resp, err := h.Handle(ctx, ev)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range resp.BatchItemFailures {
				got = append(got, f.ItemIdentifier)
			}
			if strings.Join(got, ",") != strings.Join(wantFailures, ",") {
				t.Errorf("delivery %d: failures %v, want %v", delivery, got, wantFailures)
			}
		}
		for task, want := range wantExecutions {
			out, err := e.db.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: aws.String(results), ConsistentRead: aws.Bool(true),
				Key: map[string]ddbtypes.AttributeValue{worker.AttrTaskID: &ddbtypes.AttributeValueMemberS{Value: task}},
			})
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			if n := str(out.Item, worker.AttrExecutions); n != "" {
				if got, err = strconv.Atoi(n); err != nil {
					t.Fatal(err)
				}
			}
			if got != want {
				t.Errorf("task %s: side effect ran %d times, want %d", task, got, want)
			}
		}
	}
}

// cdcCase: the change becomes one changelog record on the events stream,
// partitioned by the entity key, with the table version in its id and the
// new image as plain JSON (null for a deletion: a tombstone at the deleted
// version + 1).
func cdcCase(wantID, wantType, wantImage string) func(t *testing.T, e env, raw []byte) {
	return func(t *testing.T, e env, raw []byte) {
		var ev lambdaevents.DynamoDBEvent
		decode(t, raw, &ev)
		ctx := context.Background()
		if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.name), ShardCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
		resp, err := cdc.New(e.kin, e.name).Handle(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("batch item failures %v, want none", resp.BatchItemFailures)
		}
		it, err := e.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(e.name), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Records) != 1 {
			t.Fatalf("%d records on the stream, want 1", len(out.Records))
		}
		r := out.Records[0]
		var got struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Key  string `json:"key"`
			Data struct {
				Image          json.RawMessage `json:"image"`
				SequenceNumber string          `json:"sequenceNumber"`
			} `json:"data"`
		}
		decode(t, r.Data, &got)
		if aws.ToString(r.PartitionKey) != "user-42" || got.Key != "user-42" {
			t.Errorf("partition key %q, key %q; want user-42", aws.ToString(r.PartitionKey), got.Key)
		}
		if got.ID != wantID || got.Type != wantType {
			t.Errorf("id %q type %q, want %q %q", got.ID, got.Type, wantID, wantType)
		}
		if string(got.Data.Image) != wantImage {
			t.Errorf("image %s, want %s", got.Data.Image, wantImage)
		}
		if got.Data.SequenceNumber != ev.Records[0].Change.SequenceNumber {
			t.Errorf("sequenceNumber %q, want the stream record's %q", got.Data.SequenceNumber, ev.Records[0].Change.SequenceNumber)
		}
	}
}

// timelineTables creates the timeline function's tables (and the followers
// index) named after e.name, with the given items in them.
func timelineTables(t *testing.T, e env, items map[string][]map[string]string) timeline.Tables {
	t.Helper()
	ctx := context.Background()
	tb := timeline.Tables{Tweets: e.name + "-tweets", Follows: e.name + "-follows", Followers: "followers", Timelines: e.name + "-timelines"}
	for _, d := range []struct {
		name, pk, sk string
		index        bool
	}{
		{tb.Tweets, "authorId", "tweetId", false},
		{tb.Follows, "followerId", "followeeId", true},
		{tb.Timelines, "userId", "sk", false},
	} {
		keySchema := func(pk, sk string) []ddbtypes.KeySchemaElement {
			return []ddbtypes.KeySchemaElement{{AttributeName: aws.String(pk), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String(sk), KeyType: ddbtypes.KeyTypeRange}}
		}
		in := &dynamodb.CreateTableInput{
			TableName:   aws.String(d.name),
			BillingMode: ddbtypes.BillingModePayPerRequest,
			AttributeDefinitions: []ddbtypes.AttributeDefinition{
				{AttributeName: aws.String(d.pk), AttributeType: ddbtypes.ScalarAttributeTypeS},
				{AttributeName: aws.String(d.sk), AttributeType: ddbtypes.ScalarAttributeTypeS},
			},
			KeySchema: keySchema(d.pk, d.sk),
		}
		if d.index {
			in.GlobalSecondaryIndexes = []ddbtypes.GlobalSecondaryIndex{{IndexName: aws.String(tb.Followers),
				KeySchema: keySchema(d.sk, d.pk), Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeKeysOnly}}}
		}
		if _, err := e.db.CreateTable(ctx, in); err != nil {
			t.Fatal(err)
		}
		for _, it := range items[d.name] {
			item := map[string]ddbtypes.AttributeValue{}
			for k, v := range it {
				item[k] = &ddbtypes.AttributeValueMemberS{Value: v}
			}
			if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(d.name), Item: item}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tb
}

// timelineRun runs the sample through the timeline handler twice (a
// redelivery) and returns the view as "userId sk" lines.
func timelineRun(t *testing.T, e env, raw []byte, tb timeline.Tables) []string {
	t.Helper()
	var ev lambdaevents.DynamoDBEvent
	decode(t, raw, &ev)
	h := timeline.New(e.db, tb)
	for range 2 {
		resp, err := h.Handle(context.Background(), ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("Handle = %v, %v; want no failures", resp, err)
		}
	}
	out, err := e.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(tb.Timelines)})
	if err != nil {
		t.Fatal(err)
	}
	var view []string
	for _, it := range out.Items {
		view = append(view, str(it, "userId")+" "+str(it, "sk"))
	}
	sort.Strings(view)
	return view
}

var timelineTweet = map[string]string{"authorId": "ann", "tweetId": "tw-1001", "createdAt": "2026-11-29T10:41:05Z", "text": "Streams are tables in motion"}

// timelineTweetInsert: ann's new tweet enters her own timeline and that of
// bob, who follows her; cat, who follows only bob, does not get it.
func timelineTweetInsert(t *testing.T, e env, raw []byte) {
	tb := timelineTables(t, e, map[string][]map[string]string{
		e.name + "-tweets":  {timelineTweet},
		e.name + "-follows": {{"followerId": "bob", "followeeId": "ann"}, {"followerId": "cat", "followeeId": "bob"}},
	})
	got := timelineRun(t, e, raw, tb)
	want := []string{"ann 2026-11-29T10:41:05Z#3#ann#tw-1001", "bob 2026-11-29T10:41:05Z#3#ann#tw-1001"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("timelines %v, want %v", got, want)
	}
}

// timelineFollowRemove: bob unfollowed ann, so her tweet leaves his
// timeline and stays in hers.
func timelineFollowRemove(t *testing.T, e env, raw []byte) {
	entry := func(user string) map[string]string {
		return map[string]string{"userId": user, "sk": "2026-11-29T10:41:05Z#3#ann#tw-1001", "authorId": "ann", "tweetId": "tw-1001",
			"createdAt": "2026-11-29T10:41:05Z", "text": timelineTweet["text"]}
	}
	tb := timelineTables(t, e, map[string][]map[string]string{
		e.name + "-tweets":    {timelineTweet},
		e.name + "-timelines": {entry("ann"), entry("bob")},
	})
	got := timelineRun(t, e, raw, tb)
	if want := []string{"ann 2026-11-29T10:41:05Z#3#ann#tw-1001"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("timelines %v, want %v", got, want)
	}
}

// enrichCase: the batch through the enrich handler, delivered twice (a
// redelivery). Each activity event becomes an enriched record per delivery,
// byte-identical, joined with the profile as of its place in the shard: want
// maps an event id to "plan@version" ("-@-": no profile; "-@N deleted": a
// tombstone at version N). Changelog records are not enriched.
func enrichCase(want map[string]string) func(t *testing.T, e env, raw []byte) {
	return func(t *testing.T, e env, raw []byte) {
		var ev lambdaevents.KinesisEvent
		decode(t, raw, &ev)
		ctx := context.Background()
		if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.name), ShardCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(e.name), BillingMode: ddbtypes.BillingModePayPerRequest,
			AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
			KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}}}); err != nil {
			t.Fatal(err)
		}
		h := enrich.New(e.db, e.kin, e.name, e.name)
		for range 2 {
			resp, err := h.Handle(ctx, ev)
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("Handle = %v, %v; want no failures", resp.BatchItemFailures, err)
			}
		}
		it, err := e.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(e.name), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		copies := map[string][][]byte{}
		got := map[string]string{}
		for _, r := range out.Records {
			var rec struct {
				ID   string      `json:"id"`
				Data enrich.Data `json:"data"`
			}
			decode(t, r.Data, &rec)
			copies[rec.ID] = append(copies[rec.ID], r.Data)
			var prof struct{ Plan string }
			if len(rec.Data.Profile) > 0 && string(rec.Data.Profile) != "null" {
				decode(t, rec.Data.Profile, &prof)
			}
			s := "-@-"
			if v := rec.Data.ProfileVersion; v != nil {
				s = map[bool]string{true: prof.Plan, false: "-"}[prof.Plan != ""] + "@" + v.String()
			}
			if rec.Data.ProfileDeleted {
				s += " deleted"
			}
			got[rec.ID] = s
		}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("%s joined %q, want %q", id, got[id], w)
			}
			if c := copies[id]; len(c) != 2 || string(c[0]) != string(c[1]) {
				t.Errorf("%s: %d enriched records, want 2 byte-identical ones (one per delivery)", id, len(c))
			}
		}
		if len(got) != len(want) {
			t.Errorf("enriched %v, want only %v", got, want)
		}
	}
}
