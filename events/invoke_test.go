package events

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/emulator/local/localtest"
)

// topology is the whole stack running locally, for the Invoke API test.
type topology struct {
	stack  *local.Stack
	lambda *lambda.Client
	db     *dynamodb.Client
	sqs    *sqs.Client
}

// invokeCases maps each sample to what the deployed function answers when
// the sample is sent through the local Lambda Invoke API, as the console's
// Test tab (or `aws lambda invoke`) sends it. A sample without an entry fails
// TestEverySampleThroughTheInvokeAPI.
var invokeCases = map[string]func(t *testing.T, top topology, ans answer){
	"ingest/function-url-post.json":    urlAnswer(202, `"accepted":1`),
	"ingest/function-url-batch.json":   urlAnswer(202, `"accepted":3`),
	"ingest/function-url-invalid.json": urlAnswer(400, `"index":1,"id":"evt-0006","field":"occurredAt"`),
	// The console's Test tab run twice with one Idempotency-Key: the second
	// answer is the first, byte for byte, marked replayed.
	"ingest/function-url-idempotency-key.json": func(t *testing.T, top topology, ans answer) {
		urlAnswer(202, `"accepted":2`)(t, top, ans)
		raw, err := os.ReadFile("ingest/function-url-idempotency-key.json")
		if err != nil {
			t.Fatal(err)
		}
		again := invoke(t, top, "ingest", raw)
		var first, second struct {
			StatusCode int
			Headers    map[string]string
			Body       string
		}
		ans.decode(t, &first)
		again.decode(t, &second)
		if second.StatusCode != first.StatusCode || second.Body != first.Body || second.Headers["Idempotency-Replayed"] != "true" {
			t.Errorf("the same request again answered %d %v %s, want the first answer (%d %s) replayed", second.StatusCode, second.Headers, second.Body, first.StatusCode, first.Body)
		}
	},
	// The local stack is synthesized with the default auth, AWS_IAM: the
	// function checks no signature (the URL's SigV4 would), so the signed
	// sample is accepted as on a stack deployed without -c
	// tributary:ingestAuth=HMAC. emulator/local's TestSignedIngestEndToEnd runs
	// the HMAC stack, where the sample's old timestamp is a 401.
	"ingest/function-url-signed.json": urlAnswer(202, `"accepted":1`),
	"aggregate/kinesis-batch.json": func(t *testing.T, top topology, ans answer) {
		ans.failures(t)
		w, err := top.stack.FindPipeline("pageviews")
		if err != nil {
			t.Fatal(err)
		}
		from := time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)
		vs, err := w.Read(context.Background(), []string{"user-42", "user-7"}, from, from.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		got := local.Counted(vs)
		if got[local.WindowKey{Key: "user-42", Window: "2026-11-29T10:41:00Z"}] != 2 || got[local.WindowKey{Key: "user-7", Window: "2026-11-29T10:41:00Z"}] != 1 {
			t.Errorf("views table %s holds %v for 10:41, want user-42 2 and user-7 1", w.Table, got)
		}
	},
	// The deployed aggregate has a quarantine table: the record whose
	// occurredAt is no time is set aside there at once, naming the field, and
	// the batch succeeds.
	"aggregate/kinesis-poison.json": func(t *testing.T, top topology, ans answer) {
		ans.failures(t)
		const seq = "49601189658422359378836298521827638475320189012309704722"
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		recs, err := local.WaitQuarantined(ctx, top.stack.Config(), tableByPrefix(t, top, "Quarantine"), seq)
		if err != nil {
			t.Fatal(err)
		}
		// The item names the Lambda function, as every consumer's do: its
		// log group is /aws/lambda/<name>.
		fn := top.stack.FunctionNames()["aggregate-pageviews"][1]
		if fn == "" {
			t.Fatalf("no function aggregate-pageviews: %v", top.stack.FunctionNames())
		}
		for _, r := range recs {
			if r.SequenceNumber == seq && (r.Kind != "set-aside" || r.Field != "occurredAt" || len(r.Data) == 0 || r.Function != fn) {
				t.Errorf("quarantined %+v: want it set aside by %s (aggregate-pageviews) with its data, naming occurredAt", r, fn)
			}
		}
	},
	"aggregate/kinesis-tumbling-window.json": func(t *testing.T, _ topology, ans answer) {
		ans.failures(t)
		var r struct{ State map[string]string }
		ans.decode(t, &r)
		if r.State["seq"] == "" || len(r.State) < 3 {
			t.Errorf("returned state %v: want the partial aggregates and the position carried to the next invocation", r.State)
		}
	},
	"ticker/eventbridge-scheduled.json": func(t *testing.T, _ topology, ans answer) {
		ans.ok(t)
		var r struct{ Shards *int }
		ans.decode(t, &r)
		if r.Shards == nil || *r.Shards < 1 {
			t.Errorf("tick answered %s: want the shards it looked at", ans.payload)
		}
	},
	"worker/sqs-tasks.json": func(t *testing.T, _ topology, ans answer) { ans.failures(t) },
	"worker/sqs-fifo.json": func(t *testing.T, _ topology, ans answer) {
		ans.failures(t, "0b7e4c1a-3333-4d2e-9f3a-5b6c7d8e9f03", "0b7e4c1a-4444-4d2e-9f3a-5b6c7d8e9f04")
	},
	// The sample's queue (Tributary-Tasks) is the local Tasks queue, whose
	// redrive policy names the DLQ: the worker sends the message there with
	// its reason instead of failing it.
	"worker/sqs-after-missing.json": func(t *testing.T, top topology, ans answer) {
		ans.failures(t)
		dlq := queueByPrefix(t, top, "TasksDlq")
		out, err := top.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlq), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) != 1 || !strings.Contains(aws.ToString(out.Messages[0].Body), "task-4002") {
			t.Fatalf("DLQ %s holds %d messages, want the task-4002 message", dlq, len(out.Messages))
		}
	},
	"cdc/dynamodb-insert.json":             noFailures,
	"cdc/dynamodb-modify.json":             noFailures,
	"cdc/dynamodb-remove.json":             noFailures,
	"enrich/kinesis-profile-change.json":   noFailures,
	"enrich/kinesis-tombstone.json":        noFailures,
	"timeline/dynamodb-tweet-insert.json":  noFailures,
	"timeline/dynamodb-follow-remove.json": noFailures,
	"quarantine/sqs-on-failure.json":       noFailures,
	// A message that is no on-failure record can never succeed: set aside
	// in the quarantine table with its body, not retried into the DLQ.
	"quarantine/sqs-unparseable.json": func(t *testing.T, top topology, ans answer) {
		ans.failures(t)
		const id = "2e1424d4-f796-459a-8184-9c92662be6da"
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		recs, err := local.WaitQuarantined(ctx, top.stack.Config(), tableByPrefix(t, top, "Quarantine"), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.SequenceNumber == id && (r.Kind != "set-aside" || !strings.Contains(r.Reason, "not a Lambda on-failure record")) {
				t.Errorf("quarantined %+v: want the message set aside as not an on-failure record", r)
			}
		}
	},
	// The samples run in file order, so detect's runs before rules/ adds
	// fail-then-big: with no rule in the local rules table it matches
	// nothing and fails nothing (events_test.go plays it with the rule).
	"detect/kinesis-payments.json":        noFailures,
	"join/kinesis-search-click.json":      noFailures,
	"join/eventbridge-tick.json":          func(t *testing.T, _ topology, ans answer) { ans.ok(t) },
	"rules/function-url-add.json":         urlAnswer(201, `fail-then-big`),
	"rules/function-url-add-invalid.json": urlAnswer(400, `pattern[0].where`),
	"rules/function-url-test.json":        urlAnswer(200, `pay-`),
	// The commands samples run in the order sampleOrder gives: the show
	// scheduled, two seats reserved, a taken seat refused, the seat map.
	"commands/function-url-schedule.json": urlAnswer(200, `"status":"accepted","showId":"show-1","version":1`),
	"commands/function-url-reserve.json":  urlAnswer(200, `"status":"accepted","showId":"show-1","version":2`),
	"commands/function-url-refused.json":  urlAnswer(422, `"field":"data.seats[1]","reason":"seat A2 is already reserved"`),
	"commands/function-url-seatmap.json":  urlAnswer(200, `"version":2`),
	"publish/dynamodb-insert.json":        noFailures,
	"project/kinesis-events.json":         noFailures,
	// A MODIFY of an event can never be published: publish sets it aside,
	// naming the changed attribute, and reports no failure.
	"publish/dynamodb-modify-tampered.json": func(t *testing.T, top topology, ans answer) {
		ans.failures(t)
		const seq = "222200000000000000000002"
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		recs, err := local.WaitQuarantined(ctx, top.stack.Config(), tableByPrefix(t, top, "Quarantine"), seq)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.SequenceNumber == seq && (r.Kind != "set-aside" || !strings.HasPrefix(r.Field, "dynamodb.NewImage") || len(r.Data) == 0) {
				t.Errorf("quarantined %+v: want it set aside by publish with its data, naming dynamodb.NewImage", r)
			}
		}
	},
	// {"table": "profiles"} names the profiles table by its construct id;
	// the Invoke API gives the function the local table's name.
	"snapshot/console-test.json": func(t *testing.T, top topology, ans answer) {
		ans.ok(t)
		var r struct {
			Table, StartingPosition string
			Published               int
		}
		ans.decode(t, &r)
		profiles := profilesTable(top)
		if r.Table != profiles || r.Published < 1 || r.StartingPosition != "AT_TIMESTAMP" {
			t.Errorf("snapshot answered %s: want table %s, the profile written before published, AT_TIMESTAMP", ans.payload, profiles)
		}
	},
}

// answer is what the Invoke API returned.
type answer struct {
	functionError string
	payload       []byte
	log           string
}

func (a answer) ok(t *testing.T) {
	t.Helper()
	if a.functionError != "" {
		t.Fatalf("FunctionError %s: %s\nlog:\n%s", a.functionError, a.payload, a.log)
	}
}

func (a answer) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.payload, v); err != nil {
		t.Fatalf("answer %s: %v", a.payload, err)
	}
}

// failures checks the batch item failures, in order.
func (a answer) failures(t *testing.T, want ...string) {
	t.Helper()
	a.ok(t)
	var r struct {
		BatchItemFailures []struct{ ItemIdentifier string }
	}
	a.decode(t, &r)
	var got []string
	for _, f := range r.BatchItemFailures {
		got = append(got, f.ItemIdentifier)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("batch item failures %v, want %v (answer %s)", got, want, a.payload)
	}
}

func noFailures(t *testing.T, _ topology, ans answer) { ans.failures(t) }

// urlAnswer checks a function URL response: status and a part of the body.
func urlAnswer(status int, body string) func(*testing.T, topology, answer) {
	return func(t *testing.T, _ topology, ans answer) {
		ans.ok(t)
		var r struct {
			StatusCode int
			Body       string
		}
		ans.decode(t, &r)
		if r.StatusCode != status || !strings.Contains(r.Body, body) {
			t.Errorf("function URL response %d %s, want %d with %s", r.StatusCode, r.Body, status, body)
		}
	}
}

// tableByPrefix is the local name of the table whose logical id starts
// with logicalPrefix.
func tableByPrefix(t *testing.T, top topology, logicalPrefix string) string {
	t.Helper()
	for _, tb := range top.stack.Deployment().Tables() {
		if strings.HasPrefix(tb.LogicalID, logicalPrefix) {
			return tb.Name
		}
	}
	t.Fatalf("no table %s* in the deployment", logicalPrefix)
	return ""
}

// profilesTable is the local name of the table cdc follows.
func profilesTable(top topology) string {
	for _, tb := range top.stack.Deployment().Tables() {
		if strings.HasPrefix(tb.LogicalID, "ProfilesCDCProfiles") {
			return tb.Name
		}
	}
	return ""
}

func queueByPrefix(t *testing.T, top topology, logicalPrefix string) string {
	t.Helper()
	for _, q := range top.stack.Deployment().Queues() {
		if strings.HasPrefix(q.LogicalID, logicalPrefix) && !strings.Contains(q.LogicalID, "Fifo") {
			out, err := top.sqs.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(q.Name)})
			if err != nil {
				t.Fatal(err)
			}
			return aws.ToString(out.QueueUrl)
		}
	}
	t.Fatalf("no queue %s* in the deployment", logicalPrefix)
	return ""
}

// startTopology deploys the synthesized stack (infra/cdk.out) and runs the
// real function binaries under aws-lambda-rie against a private stand-in.
// `make test` builds both first; run alone, the test asks make for them.
func startTopology(t *testing.T) topology {
	t.Helper()
	stack, _, cfg := localtest.Up(t)
	return topology{
		stack:  stack,
		lambda: lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.BaseEndpoint = aws.String(stack.InvokeURL()) }),
		db:     dynamodb.NewFromConfig(cfg),
		sqs:    sqs.NewFromConfig(cfg),
	}
}

func invoke(t *testing.T, top topology, name string, payload []byte) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := top.lambda.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(name), Payload: payload, LogType: lambdatypes.LogTypeTail})
	if err != nil {
		t.Fatalf("Invoke %s: %v", name, err)
	}
	if out.StatusCode != 200 || aws.ToString(out.ExecutedVersion) != "$LATEST" {
		t.Errorf("Invoke %s: status %d, executed version %q; want 200, $LATEST", name, out.StatusCode, aws.ToString(out.ExecutedVersion))
	}
	log, err := base64.StdEncoding.DecodeString(aws.ToString(out.LogResult))
	if err != nil {
		t.Errorf("LogResult is not base64: %v", err)
	}
	return answer{functionError: aws.ToString(out.FunctionError), payload: out.Payload, log: string(log)}
}

// sampleOrder ranks the samples that depend on others: a show is scheduled
// before its seats are reserved, and both come before the refusal and the
// seat map. The others keep their file order.
func sampleOrder(f string) int {
	switch f {
	case "commands/function-url-schedule.json":
		return 1
	case "commands/function-url-reserve.json":
		return 2
	case "commands/function-url-refused.json", "commands/function-url-seatmap.json":
		return 3
	}
	return 0
}

// TestEverySampleThroughTheInvokeAPI sends every sample in events/ to the
// running local topology with the SDK's Lambda client, by the function's
// binary name (the directory), and checks the function's answer.
func TestEverySampleThroughTheInvokeAPI(t *testing.T) {
	files, err := filepath.Glob("*/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if invokeCases[f] == nil {
			t.Errorf("events/%s has no Invoke API case: add what the local function answers to invokeCases", f)
		}
	}
	if t.Failed() {
		return
	}
	top := startTopology(t)
	// The snapshot sample publishes what the profiles table holds.
	if _, err := top.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(profilesTable(top)), Item: map[string]ddbtypes.AttributeValue{
		"userId": &ddbtypes.AttributeValueMemberS{Value: "user-42"}, "version": &ddbtypes.AttributeValueMemberN{Value: "1"}, "plan": &ddbtypes.AttributeValueMemberS{Value: "free"}}}); err != nil {
		t.Fatal(err)
	}
	sort.SliceStable(files, func(i, j int) bool { return sampleOrder(files[i]) < sampleOrder(files[j]) })
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Dir(f)
			if fns := top.stack.FunctionsOf(name); len(fns) > 1 {
				// One per pipeline file: the samples are page views.
				name += "-pageviews"
			}
			ans := invoke(t, top, name, raw)
			if !strings.Contains(ans.log, "REPORT RequestId: ") {
				t.Errorf("LogType Tail: the log tail %q has no REPORT line", ans.log)
			}
			invokeCases[f](t, top, ans)
		})
	}

	// The ticker runs once per pipeline file: the page views' one.
	ticker := "ticker"
	if len(top.stack.FunctionsOf("ticker")) > 1 {
		ticker = "ticker-pageviews"
	}
	t.Run("a function by its logical id, physical name and ARN", func(t *testing.T) {
		names := top.stack.FunctionNames()[ticker]
		if names[0] == "" {
			t.Fatalf("no function %s: %v", ticker, top.stack.FunctionNames())
		}
		for _, name := range []string{names[0], names[1], "arn:aws:lambda:us-east-1:123456789012:function:" + names[1], names[1] + ":$LATEST"} {
			ans := invoke(t, top, name, []byte(`{"source":"aws.events","detail-type":"Scheduled Event","time":"2026-11-29T10:50:00Z","detail":{}}`))
			ans.ok(t)
		}
	})
	t.Run("an unknown function is ResourceNotFoundException", func(t *testing.T) {
		_, err := top.lambda.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("no-such-function")})
		var nf *lambdatypes.ResourceNotFoundException
		if !errors.As(err, &nf) || !strings.Contains(err.Error(), "ingest") {
			t.Errorf("Invoke(no-such-function) = %v, want ResourceNotFoundException naming the local functions", err)
		}
	})
	t.Run("a payload that is not JSON is InvalidRequestContentException", func(t *testing.T) {
		_, err := top.lambda.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("ingest"), Payload: []byte("{not json")})
		var bad *lambdatypes.InvalidRequestContentException
		if !errors.As(err, &bad) {
			t.Errorf("Invoke with a broken payload = %v, want InvalidRequestContentException", err)
		}
	})
	t.Run("Event invocations are accepted and run", func(t *testing.T) {
		out, err := top.lambda.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String(ticker), InvocationType: lambdatypes.InvocationTypeEvent,
			Payload: []byte(`{"source":"aws.events","detail-type":"Scheduled Event","detail":{}}`)})
		if err != nil || out.StatusCode != 202 {
			t.Fatalf("Event invoke: %v, status %d; want 202", err, statusOf(out))
		}
		out, err = top.lambda.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String(ticker), InvocationType: lambdatypes.InvocationTypeDryRun})
		if err != nil || out.StatusCode != 204 {
			t.Fatalf("DryRun invoke: %v, status %d; want 204", err, statusOf(out))
		}
	})
}

func statusOf(out *lambda.InvokeOutput) int32 {
	if out == nil {
		return 0
	}
	return out.StatusCode
}
