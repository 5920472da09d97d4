package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/emulator/rie/rietest"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/idempotency"
	"github.com/tributary-dev/tributary/pkg/redrive"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestBootstrapUnderRIE runs the real receipts binary under aws-lambda-rie
// against the stand-in, with a queue whose RedrivePolicy names a DLQ. One
// SQS batch holds an order, a copy of it (same event id, another message),
// an order with a negative data.totalCents and one without it. No message
// is a batch item failure; the receipt is rendered once (the copy gets the
// stored one) and is the only record of the idempotency table; both bad
// orders are on the DLQ, unchanged, with a reason naming data.totalCents.
// A later batch with the event id reused for other data sets that message
// aside too. Without IDEMPOTENCY_TABLE_NAME the function fails at init
// naming it.
func TestBootstrapUnderRIE(t *testing.T) {
	ctx := context.Background()
	bootstrap := rietest.Build(t, ".")
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	db, q := dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	if err := idempotency.CreateTable(ctx, db, "rc-idempotency"); err != nil {
		t.Fatal(err)
	}
	queueARN := func(url string) string {
		out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	}
	dlq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("rc-tasks-dlq")})
	if err != nil {
		t.Fatal(err)
	}
	src, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("rc-tasks"), Attributes: map[string]string{
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"5"}`, queueARN(*dlq.QueueUrl)),
	}})
	if err != nil {
		t.Fatal(err)
	}
	srcARN := queueARN(*src.QueueUrl)

	env := map[string]string{
		"AWS_ENDPOINT_URL": srv.Endpoint(), "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
		"IDEMPOTENCY_TABLE_NAME": "rc-idempotency",
	}
	fn := rietest.Start(t, "receipts", bootstrap, env)
	invoke := func(ev events.SQSEvent) string {
		t.Helper()
		payload, _ := json.Marshal(ev)
		return string(fn.MustInvoke(t, payload))
	}

	at := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	body := func(id, order, data string) string {
		b, _ := json.Marshal(stream.Envelope{ID: id, Type: EventType, Key: order, OccurredAt: at, SentAt: at, Data: json.RawMessage(data)})
		return string(b)
	}
	msg := func(id, body string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, ReceiptHandle: "rh-" + id, Body: body, EventSource: "aws:sqs", EventSourceARN: srcARN, AWSRegion: "us-east-1",
			Attributes: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": strconv.FormatInt(at.UnixMilli(), 10)}}
	}
	placed := body("e-1", "o-1", `{"totalCents":2505,"currency":"EUR","lines":[{"sku":"mug","quantity":2,"unitCents":1000},{"sku":"tea","quantity":1,"unitCents":505}]}`)
	negative := body("e-2", "o-2", `{"totalCents":-5}`)
	missing := body("e-3", "o-3", `{"currency":"EUR"}`)
	got := invoke(events.SQSEvent{Records: []events.SQSMessage{msg("m1", placed), msg("m2", placed), msg("m3", negative), msg("m4", missing)}})
	if got != `{"batchItemFailures":[]}` {
		t.Fatalf("response %s, want no batch item failures (the copy is a duplicate, the bad orders are set aside)", got)
	}

	// The idempotency table holds the one receipt; the refused tasks left no record.
	want, err := Render(ctx, order(`{"totalCents":2505,"currency":"EUR","lines":[{"sku":"mug","quantity":2,"unitCents":1000},{"sku":"tea","quantity":1,"unitCents":505}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want = []byte(strings.NewReplacer(`"o-42"`, `"o-1"`, `"2026-12-01T09:30:00Z"`, `"`+at.Format(time.RFC3339)+`"`).Replace(string(want)))
	scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("rc-idempotency")})
	if err != nil {
		t.Fatal(err)
	}
	if len(scan.Items) != 1 {
		t.Fatalf("idempotency table has %d records, want 1 (the one event id rendered): %v", len(scan.Items), scan.Items)
	}
	status, _ := scan.Items[0][idempotency.AttrStatus].(*types.AttributeValueMemberS)
	data, _ := scan.Items[0][idempotency.AttrData].(*types.AttributeValueMemberS)
	if status == nil || status.Value != idempotency.StatusCompleted || data == nil || data.Value != string(want) {
		t.Errorf("idempotency record %v; want COMPLETED with the receipt %s", scan.Items[0], want)
	}

	// A later batch: the copy again, and the event id reused with other data.
	reused := body("e-1", "o-1", `{"totalCents":1}`)
	if got := invoke(events.SQSEvent{Records: []events.SQSMessage{msg("m5", placed), msg("m6", reused)}}); got != `{"batchItemFailures":[]}` {
		t.Fatalf("second batch: response %s, want no batch item failures", got)
	}

	aside := map[string]sqstypes.Message{}
	for range 5 {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: dlq.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			aside[*m.Body] = m
		}
		if len(aside) >= 3 {
			break
		}
	}
	if len(aside) != 3 {
		var bodies []string
		for b := range aside {
			bodies = append(bodies, b)
		}
		sort.Strings(bodies)
		t.Fatalf("DLQ holds %d messages, want the negative, the missing and the reused one:\n%s", len(aside), strings.Join(bodies, "\n"))
	}
	reason := func(b string) string {
		m, ok := aside[b]
		if !ok {
			t.Errorf("not on the DLQ: %s", b)
			return ""
		}
		if f := m.MessageAttributes[redrive.AttrFunction]; f.StringValue == nil || *f.StringValue != "receipts" {
			t.Errorf("set aside by %v, want the function receipts", f.StringValue)
		}
		if r := m.MessageAttributes[redrive.AttrReason].StringValue; r != nil {
			return *r
		}
		return ""
	}
	for _, tt := range []struct{ body, want string }{{negative, "data.totalCents: -5 is negative"}, {missing, "data.totalCents: missing"}, {reused, "e-1"}} {
		if r := reason(tt.body); !strings.Contains(r, tt.want) {
			t.Errorf("reason %q, want it to name %q", r, tt.want)
		}
	}
	if scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("rc-idempotency")}); err != nil || len(scan.Items) != 1 {
		t.Errorf("after the second batch, idempotency records: %v (%v), want still 1", scan, err)
	}

	// The EMF lines: one rendered, two copies, three set aside.
	out := fn.Logs()
	var ran, dup, setAside float64
	for _, line := range strings.Split(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["_aws"] == nil {
			continue
		}
		p, _ := m["Processed"].(float64)
		d, _ := m["Duplicates"].(float64)
		s, _ := m["RecordsSetAside"].(float64)
		ran, dup, setAside = ran+p, dup+d, setAside+s
	}
	if ran != 1 || dup != 2 || setAside != 3 {
		t.Errorf("metrics: Processed %v, Duplicates %v, RecordsSetAside %v; want 1, 2, 3\n%s", ran, dup, setAside, out)
	}

	delete(env, "IDEMPOTENCY_TABLE_NAME")
	broken := rietest.Start(t, "receipts-unconfigured", bootstrap, env)
	payload, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{msg("m7", placed)}})
	res, err := broken.Invoke(ctx, payload)
	if err != nil {
		t.Fatal(err)
	}
	out = broken.Logs()
	if res.FunctionError == "" || !strings.Contains(out, "environment variable IDEMPOTENCY_TABLE_NAME is not set") {
		t.Errorf("unconfigured function: error %q, want a failure naming IDEMPOTENCY_TABLE_NAME; logs:\n%s", res.FunctionError, out)
	}
}
