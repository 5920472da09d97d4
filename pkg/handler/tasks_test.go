package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/idempotency"
	"github.com/tributary-dev/tributary/pkg/redrive"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestTasksRunOncePerEventAndSetAsidePoison: a batch of task messages —
// two copies of one event, a task the user's function refuses naming a
// field, a body that is not an envelope, an event id reused with other
// data, and a task failing transiently — delivered twice. Each event's
// task runs once; the refused task, the garbage and the reused id are on
// the queue's dead-letter queue with their reason (the field named) and
// reported processed; only the transient failure is a batch item failure,
// both times.
func TestTasksRunOncePerEventAndSetAsidePoison(t *testing.T) {
	ctx := context.Background()
	sq := sqs.NewFromConfig(awsCfg)
	table, dlqURL, srcARN := taskQueues(t, sq)

	runs := map[string]*atomic.Int64{}
	for _, id := range []string{"t1", "t2", "t3", "t4", "t5"} {
		runs[id] = new(atomic.Int64)
	}
	fn := func(ctx context.Context, ev *handler.Event) ([]byte, error) {
		runs[ev.ID].Add(1)
		var d struct{ Qty int }
		if err := json.Unmarshal(ev.Data, &d); err != nil || d.Qty <= 0 {
			return nil, handler.Refuse("data.qty", "must be a positive whole number")
		}
		if ev.ID == "t5" {
			return nil, errors.New("the payment service timed out")
		}
		return json.Marshal(d.Qty * 2)
	}
	h, err := handler.NewTasks(handler.TasksConfig{Name: "orders", IdempotencyTable: table, DynamoDB: db, SQS: sq}, fn,
		handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	msg := func(mid, id, data string) events.SQSMessage {
		at := base
		body, _ := json.Marshal(stream.Envelope{ID: id, Type: "order", Key: "k", OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(data)})
		return events.SQSMessage{MessageId: mid, Body: string(body), EventSourceARN: srcARN, EventSource: "aws:sqs",
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
	}
	garbage := msg("m6", "x", "{}")
	garbage.Body = "not an envelope"
	batch := []events.SQSMessage{
		msg("m1", "t1", `{"qty":2}`),
		msg("m2", "t1", `{"qty":2}`), // the producer's copy
		msg("m3", "t2", `{"qty":0}`), // refused: data.qty
		msg("m4", "t3", `{"qty":1}`),
		msg("m5", "t5", `{"qty":1}`), // transient
		garbage,
		msg("m7", "t3", `{"qty":9}`), // t3's id reused with other data
	}
	for delivery := 1; delivery <= 2; delivery++ {
		resp, err := h.Handle(ctx, events.SQSEvent{Records: batch})
		if err != nil {
			t.Fatal(err)
		}
		var failed []string
		for _, f := range resp.BatchItemFailures {
			failed = append(failed, f.ItemIdentifier)
		}
		if strings.Join(failed, ",") != "m5" {
			t.Fatalf("delivery %d: failures %v, want only m5 (transient)", delivery, failed)
		}
	}
	if n := runs["t1"].Load(); n != 1 {
		t.Errorf("t1 ran %d times over two deliveries of two copies, want 1", n)
	}
	if n := runs["t3"].Load(); n != 1 {
		t.Errorf("t3 ran %d times, want 1 (the reused id is refused, not run)", n)
	}
	if n := runs["t5"].Load(); n != 2 {
		t.Errorf("t5 (transient) ran %d times, want once per delivery", n)
	}

	// The dead-letter queue: m3 (naming data.qty), m6 and m7, the first
	// delivery's; the second delivery's copies of m3, m6, m7 too (each
	// delivery of a poison message is set aside: SQS deletes it from the
	// source once reported processed, so in AWS there is no second).
	reasons := map[string]string{}
	for range 5 {
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlqURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			reasons[aws.ToString(m.Body)] = aws.ToString(m.MessageAttributes[redrive.AttrReason].StringValue)
		}
		if len(out.Messages) == 0 {
			break
		}
	}
	want := map[string]string{batch[2].Body: "data.qty: must be a positive", garbage.Body: "not valid JSON", batch[6].Body: "payload"}
	for body, reason := range want {
		if got, ok := reasons[body]; !ok || !strings.Contains(strings.ToLower(got), strings.ToLower(reason)) {
			t.Errorf("dead-letter of %s: %q (present %t); want a reason with %q", body, got, ok, reason)
		}
	}
	if len(reasons) != len(want) {
		t.Errorf("dead-lettered %d distinct messages, want %d: %v", len(reasons), len(want), reasons)
	}
	st := h.Stats()
	// Ran: t1 and t3 on the first delivery; duplicates: m2 then m1, m2, m4.
	if st.Ran != 2 || st.Duplicates != 4 || st.SetAside != 6 || st.Failures != 2 {
		t.Errorf("stats %+v: want 2 ran, 4 duplicates, 6 set aside (3 per delivery), 2 failures (m5 per delivery)", st)
	}
}

// taskQueues creates an idempotency table and a tasks queue whose
// RedrivePolicy (maxReceiveCount 5) names a dead-letter queue of its own,
// and returns the table, the DLQ's URL and the queue's ARN.
func taskQueues(t *testing.T, sq *sqs.Client) (table, dlqURL, srcARN string) {
	t.Helper()
	ctx := context.Background()
	table = name("idem")
	if err := idempotency.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	dlq, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name("tasks-dlq"))})
	if err != nil {
		t.Fatal(err)
	}
	dlqARN := queueAttr(t, sq, aws.ToString(dlq.QueueUrl), sqstypes.QueueAttributeNameQueueArn)
	src, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name("tasks")),
		Attributes: map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"5"}`, dlqARN)}})
	if err != nil {
		t.Fatal(err)
	}
	return table, aws.ToString(dlq.QueueUrl), queueAttr(t, sq, aws.ToString(src.QueueUrl), sqstypes.QueueAttributeNameQueueArn)
}

func queueAttr(t *testing.T, sq *sqs.Client, url string, attr sqstypes.QueueAttributeName) string {
	t.Helper()
	out, err := sq.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{attr}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes[string(attr)]
}

// TestTaskPanicFailsOnlyItsMessage: a TaskFunc that panics on one message
// must not fail the whole batch (every message would come again, and the
// ones done would climb towards maxReceiveCount and the dead-letter queue
// with it). The message that panicked is a batch item failure, run again
// on its next delivery (its idempotency record is not left in progress);
// the others are done once.
func TestTaskPanicFailsOnlyItsMessage(t *testing.T) {
	ctx := context.Background()
	table := name("idem")
	if err := idempotency.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	runs := map[string]*atomic.Int64{"t1": new(atomic.Int64), "t2": new(atomic.Int64), "t3": new(atomic.Int64)}
	fn := func(ctx context.Context, ev *handler.Event) ([]byte, error) {
		runs[ev.ID].Add(1)
		if ev.ID == "t2" {
			var lines []string
			return []byte(lines[1]), nil // index out of range
		}
		return []byte(`"ok"`), nil
	}
	h, err := handler.NewTasks(handler.TasksConfig{Name: "orders", IdempotencyTable: table, DynamoDB: db}, fn,
		handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	var batch []events.SQSMessage
	for i, id := range []string{"t1", "t2", "t3"} {
		body, _ := json.Marshal(stream.Envelope{ID: id, Type: "order", Key: "k", OccurredAt: base, SentAt: base, ReceivedAt: base, Data: json.RawMessage(`{}`)})
		batch = append(batch, events.SQSMessage{MessageId: fmt.Sprint("m", i+1), Body: string(body), EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:tasks", Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}
	for delivery := 1; delivery <= 2; delivery++ {
		var resp events.SQSEventResponse
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("delivery %d: the batch panicked: %v", delivery, p)
				}
			}()
			resp, err = h.Handle(ctx, events.SQSEvent{Records: batch})
		}()
		if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m2" {
			t.Fatalf("delivery %d: %+v %v; want only m2 failed", delivery, resp, err)
		}
	}
	if a, b, c := runs["t1"].Load(), runs["t2"].Load(), runs["t3"].Load(); a != 1 || b != 2 || c != 1 {
		t.Errorf("runs t1 %d, t2 %d, t3 %d; want 1, 2 (once per delivery), 1", a, b, c)
	}
}

// TestTasksRefuseWindowedOptions: a task handler takes WithLogger and
// WithMetrics; an option of the windowed handler (a dedupe horizon taken
// for the idempotency records' expiry, say) would be ignored without a
// word, so it is an error naming it.
func TestTasksRefuseWindowedOptions(t *testing.T) {
	cfg := handler.TasksConfig{Name: "orders", IdempotencyTable: "idem", DynamoDB: db}
	fn := func(context.Context, *handler.Event) ([]byte, error) { return nil, nil }
	for _, c := range []struct {
		opt  handler.Option
		name string
	}{
		{handler.WithDedupeHorizon(24 * time.Hour), "WithDedupeHorizon"},
		{handler.WithConcurrency(4), "WithConcurrency"},
		{handler.WithSession(time.Minute), "WithSession"},
		{handler.WithLimits(handler.DefaultLimits), "WithLimits"},
		{handler.WithLogger(nil), "WithLogger"},
	} {
		if _, err := handler.NewTasks(cfg, fn, c.opt); err == nil || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: %v; want an error naming it", c.name, err)
		}
	}
	if _, err := handler.NewTasks(cfg, fn, handler.WithLogger(quiet), handler.WithMetrics(nil)); err != nil {
		t.Errorf("WithLogger and WithMetrics: %v", err)
	}
	// A table name given in code is checked as TasksFromEnv checks the
	// variable's: one DynamoDB cannot take fails here, not every message.
	for _, table := range []string{"not a table!!", "id", "idem "} {
		bad := cfg
		bad.IdempotencyTable = table
		if _, err := handler.NewTasks(bad, fn, handler.WithLogger(quiet), handler.WithMetrics(nil)); err == nil || !strings.Contains(err.Error(), "TasksConfig.IdempotencyTable") {
			t.Errorf("IdempotencyTable %q: %v; want an error naming TasksConfig.IdempotencyTable", table, err)
		}
	}
	// A nil Option (a helper's "no option") is an error naming its place,
	// not a nil-pointer panic in main.
	if _, err := handler.NewTasks(cfg, fn, handler.WithLogger(quiet), nil); err == nil || !strings.Contains(err.Error(), "option 2 is nil") {
		t.Errorf("a nil option: %v; want an error naming option 2", err)
	}
}

// TestTasksRunEventsWithoutData: data is optional in an envelope (a
// "nightly_report" event may need nothing else), so a task handler runs
// such an event, once per id, rather than setting it aside because the
// idempotency record's payload check found no data to hash. A copy with
// data, or with "data":{}, under the same id is still other data.
func TestTasksRunEventsWithoutData(t *testing.T) {
	ctx := context.Background()
	table := name("idem")
	if err := idempotency.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	fn := func(context.Context, *handler.Event) ([]byte, error) { runs.Add(1); return []byte(`"done"`), nil }
	h, err := handler.NewTasks(handler.TasksConfig{Name: "reports", IdempotencyTable: table, DynamoDB: db}, fn,
		handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	msg := func(mid, id, data string) events.SQSMessage {
		body, _ := json.Marshal(stream.Envelope{ID: id, Type: "nightly_report", Key: "k", OccurredAt: base, SentAt: base, ReceivedAt: base, Data: json.RawMessage(data)})
		return events.SQSMessage{MessageId: mid, Body: string(body), EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:reports", Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
	}
	for _, c := range []struct {
		name       string
		msgs       []events.SQSMessage
		wantFailed int
		wantRuns   int64
	}{
		{"no data, twice", []events.SQSMessage{msg("m1", "r1", ""), msg("m2", "r1", "")}, 0, 1},
		{"data null", []events.SQSMessage{msg("m3", "r2", "null")}, 0, 2},
		{"the id again with data", []events.SQSMessage{msg("m4", "r1", `{}`)}, 1, 2},
	} {
		resp, err := h.Handle(ctx, events.SQSEvent{Records: c.msgs})
		if err != nil || len(resp.BatchItemFailures) != c.wantFailed || runs.Load() != c.wantRuns {
			t.Errorf("%s: %+v, %v, %d runs; want %d failed, %d runs", c.name, resp, err, runs.Load(), c.wantFailed, c.wantRuns)
		}
	}
}
