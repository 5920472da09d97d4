package worker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/redrive"
)

// queuePair is a source queue whose RedrivePolicy names a dead-letter queue.
type queuePair struct {
	src, srcARN, dlq string
}

func newQueuePair(t *testing.T, client *sqs.Client, name string, fifo bool) queuePair {
	t.Helper()
	ctx := context.Background()
	suffix, attrs := "", map[string]string{}
	if fifo {
		suffix, attrs = ".fifo", map[string]string{"FifoQueue": "true"}
	}
	dlq, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq" + suffix), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	dlqARN := queueARN(t, client, aws.ToString(dlq.QueueUrl))
	srcAttrs := map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"5"}`, dlqARN)}
	for k, v := range attrs {
		srcAttrs[k] = v
	}
	src, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + suffix), Attributes: srcAttrs})
	if err != nil {
		t.Fatal(err)
	}
	return queuePair{src: aws.ToString(src.QueueUrl), srcARN: queueARN(t, client, aws.ToString(src.QueueUrl)), dlq: aws.ToString(dlq.QueueUrl)}
}

func queueARN(t *testing.T, client *sqs.Client, url string) string {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["QueueArn"]
}

// receive takes up to 10 messages from url and turns them into the event
// records Lambda would pass, as the mapping does.
func receive(t *testing.T, client *sqs.Client, url, arn string) []events.SQSMessage {
	t.Helper()
	out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
		WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []events.SQSMessage
	for _, m := range out.Messages {
		em := events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Attributes: m.Attributes, MessageAttributes: map[string]events.SQSMessageAttribute{}, EventSourceARN: arn, EventSource: "aws:sqs"}
		for k, v := range m.MessageAttributes {
			em.MessageAttributes[k] = events.SQSMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType)}
		}
		msgs = append(msgs, em)
	}
	return msgs
}

func send(t *testing.T, client *sqs.Client, url, body, group string) {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")}}}
	if group != "" {
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(group), aws.String(fmt.Sprint(time.Now().UnixNano()))
	}
	if _, err := client.SendMessage(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

// settle deletes from url the messages the handler did not report failed,
// as the event source mapping does.
func settle(t *testing.T, client *sqs.Client, url string, msgs []events.SQSMessage, failed []string) {
	t.Helper()
	for _, m := range msgs {
		if slices.Contains(failed, m.MessageId) {
			continue
		}
		if _, err := client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(m.ReceiptHandle)}); err != nil {
			t.Fatal(err)
		}
	}
}

func attr(m sqstypes.Message, name string) string {
	return aws.ToString(m.MessageAttributes[name].StringValue)
}

// expire ends the visibility timeout of the messages failed names, as the
// queue's timeout would: SQS then redelivers them, one receive more.
func expire(t *testing.T, client *sqs.Client, url string, msgs []events.SQSMessage, failed []string) {
	t.Helper()
	for _, m := range msgs {
		if !slices.Contains(failed, m.MessageId) {
			continue
		}
		if _, err := client.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
			ReceiptHandle: aws.String(m.ReceiptHandle), VisibilityTimeout: 0}); err != nil {
			t.Fatal(err)
		}
	}
}

// dlqDepth is how many messages the queue url holds.
func dlqDepth(t *testing.T, client *sqs.Client, url string) string {
	t.Helper()
	attrs, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	return attrs.Attributes["ApproximateNumberOfMessages"] + "+" + attrs.Attributes["ApproximateNumberOfMessagesNotVisible"]
}

// TestMissingDependencyWaitsThenRuns: SQS does not order a standard queue,
// nor a FIFO queue across message groups, so a task sent after the task it
// depends on can arrive first. It is not dead-lettered: it is reported
// failed and comes back after the visibility timeout, and runs once the
// dependency's result exists. On a FIFO queue the waiting task holds back
// the later messages of its group, so the group's order holds. A message
// that is poison as sent still goes to the DLQ on its first receive.
func TestMissingDependencyWaitsThenRuns(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	db, client := dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	for _, fifo := range []bool{false, true} {
		t.Run(map[bool]string{false: "standard", true: "FIFO"}[fifo], func(t *testing.T) {
			f := newFixture(t, db)
			f.h.deadLetters = NewDeadLetters(client, "worker-test")
			q := newQueuePair(t, client, fmt.Sprintf("wait%d", tableSeq.Add(1)), fifo)
			group, other := map[bool]string{true: "g1"}[fifo], map[bool]string{true: "g2"}[fifo]
			dependent := strings.Replace(body("t-40", "x", 1), `"rounds":1`, `"rounds":1,"after":"t-39"`, 1)
			send(t, client, q.src, dependent, group)
			send(t, client, q.src, body("t-41", "y", 1), group)
			send(t, client, q.src, "{poison", other)

			msgs := receive(t, client, q.src, q.srcARN)
			if len(msgs) != 3 {
				t.Fatalf("received %d messages, want 3", len(msgs))
			}
			failed := f.handle(t, msgs...)
			want := []string{msgs[0].MessageId}
			if fifo {
				// t-41 comes after the waiting task in its group.
				want = append(want, msgs[1].MessageId)
			}
			if !slices.Equal(failed, want) {
				t.Fatalf("failures %v, want %v: the waiting task is reported failed for SQS to redeliver", failed, want)
			}
			settle(t, client, q.src, msgs, failed)
			if d := dlqDepth(t, client, q.dlq); d != "1+0" {
				t.Errorf("DLQ holds %s messages, want only the poison one (the waiting task is not dead-lettered)", d)
			}
			wantRuns := map[bool]int{false: 1, true: 0}[fifo]
			if n := f.executions(t, "t-41"); n != wantRuns {
				t.Errorf("t-41 ran %d times on the first receive, want %d", n, wantRuns)
			}
			for name, want := range map[string]float64{"DependencyWaiting": 1, "Poison": 1, "DeadLettered": 1} {
				if got := f.metric(t, name); got != want {
					t.Errorf("metric %s = %v, want %v", name, got, want)
				}
			}
			if logs := f.logs.String(); !strings.Contains(logs, "task t-39 has no result") || !strings.Contains(logs, `"receive":1`) {
				t.Errorf("the logs do not say what the task waits for and on which receive:\n%s", logs)
			}

			// The dependency runs; the visibility timeout ends.
			if failed := f.handle(t, message("dep", body("t-39", "z", 1), "g3")); len(failed) != 0 {
				t.Fatal(failed)
			}
			expire(t, client, q.src, msgs, failed)
			again := receive(t, client, q.src, q.srcARN)
			if len(again) != len(want) || again[0].Attributes["ApproximateReceiveCount"] != "2" {
				t.Fatalf("redelivered %d messages (first on receive %s), want %d, the first on receive 2", len(again), again[0].Attributes["ApproximateReceiveCount"], len(want))
			}
			if failed := f.handle(t, again...); len(failed) != 0 {
				t.Fatalf("failures %v once the dependency ran, want none", failed)
			}
			settle(t, client, q.src, again, nil)
			for task, want := range map[string]int{"t-40": 1, "t-41": 1} {
				if n := f.executions(t, task); n != want {
					t.Errorf("%s ran %d times, want %d", task, n, want)
				}
			}
			if d := dlqDepth(t, client, q.dlq); d != "1+0" {
				t.Errorf("DLQ holds %s messages, want only the poison one", d)
			}
		})
	}
}

// TestMissingDependencyDeadLetteredOnLastReceiveThenRedriven: a task whose
// dependency still has no result on the source queue's last receive
// (ApproximateReceiveCount reaching the RedrivePolicy's maxReceiveCount) is
// sent by the worker to the DLQ with the reason, the source queue and the
// receive count, rather than moved there by SQS without a word of why; once
// the dependency has run, a redrive brings the task back without the
// dead-letter attributes and it runs exactly once.
func TestMissingDependencyDeadLetteredOnLastReceiveThenRedriven(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	db, client := dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	for _, fifo := range []bool{false, true} {
		t.Run(map[bool]string{false: "standard", true: "FIFO"}[fifo], func(t *testing.T) {
			f := newFixture(t, db)
			f.h.deadLetters = NewDeadLetters(client, "worker-test")
			f.h.environment = "2026/11/29/[$LATEST]env-a"
			q := newQueuePair(t, client, fmt.Sprintf("tasks%d", tableSeq.Add(1)), fifo)
			group := map[bool]string{true: "g1"}[fifo]
			dependent := strings.Replace(body("t-20", "x", 1), `"rounds":1`, `"rounds":1,"after":"t-19"`, 1)
			send(t, client, q.src, dependent, group)
			send(t, client, q.src, body("t-21", "y", 1), group)

			// maxReceiveCount is 5: four receives wait, the fifth
			// dead-letters.
			var msgs []events.SQSMessage
			for n := 1; n <= 5; n++ {
				want := 1
				if fifo || n == 1 {
					want = 2 // t-21 too: FIFO holds it behind the waiting task
				}
				msgs = receiveN(t, client, q, dependent, want, n)
				failed := f.handle(t, msgs...)
				settle(t, client, q.src, msgs, failed)
				if n < 5 {
					if !slices.Contains(failed, msgs[0].MessageId) {
						t.Fatalf("receive %d: failures %v, want the waiting task reported failed", n, failed)
					}
					if d := dlqDepth(t, client, q.dlq); d != "0+0" {
						t.Fatalf("receive %d: DLQ holds %s messages, want none before the last receive", n, d)
					}
					expire(t, client, q.src, msgs, failed)
					continue
				}
				if len(failed) != 0 {
					t.Fatalf("failures %v on the last receive: a dead-lettered message is reported processed so Lambda deletes it", failed)
				}
			}
			if f.executions(t, "t-20") != 0 || f.executions(t, "t-21") != 1 {
				t.Fatalf("executions t-20 %d, t-21 %d; want 0 and 1", f.executions(t, "t-20"), f.executions(t, "t-21"))
			}
			for name, want := range map[string]float64{"DependencyWaiting": 4, "DeadLettered": 1, "Processed": 1} {
				if got := f.metric(t, name); got != want {
					t.Errorf("metric %s = %v, want %v", name, got, want)
				}
			}

			out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.dlq), WaitTimeSeconds: 1,
				VisibilityTimeout: 1, MessageAttributeNames: []string{"All"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Messages) != 1 {
				t.Fatalf("DLQ holds %d messages, want the dependent task", len(out.Messages))
			}
			dl := out.Messages[0]
			if aws.ToString(dl.Body) != dependent {
				t.Errorf("DLQ body %s, want the message as sent", aws.ToString(dl.Body))
			}
			reason := attr(dl, redrive.AttrReason)
			for _, want := range []string{"message " + msgs[0].MessageId, "task t-20", "field data.after", "task t-19 has no result", "receive 5 of 5"} {
				if !strings.Contains(reason, want) {
					t.Errorf("reason %q does not say %q", reason, want)
				}
			}
			if got := attr(dl, redrive.AttrSourceQueue); got != q.srcARN {
				t.Errorf("source queue attribute %q, want %q", got, q.srcARN)
			}
			if got := attr(dl, redrive.AttrReceiveCount); got != "5" {
				t.Errorf("receive count attribute %q, want 5", got)
			}
			if got := attr(dl, "tenant"); got != "acme" {
				t.Errorf("the producer's attribute tenant = %q in the DLQ, want acme", got)
			}

			// The operator runs the missing task, then redrives.
			dep := []events.SQSMessage{message("dep", body("t-19", "z", 1), group)}
			if failed := f.handle(t, dep...); len(failed) != 0 {
				t.Fatal(failed)
			}
			r := redrive.New(client)
			r.WaitTime, r.EmptyReceives = time.Second, 2
			time.Sleep(1100 * time.Millisecond) // the DLQ message's visibility ends
			res, err := r.Move(context.Background(), q.dlq, q.src, 0)
			if err != nil || res.Moved != 1 {
				t.Fatalf("redrive: %v, %v; want 1 moved", res, err)
			}
			back := receive(t, client, q.src, q.srcARN)
			if len(back) != 1 {
				t.Fatalf("source holds %d messages after the redrive, want 1", len(back))
			}
			for name := range back[0].MessageAttributes {
				if strings.HasPrefix(name, redrive.AttrPrefix) {
					t.Errorf("redriven message still carries %s", name)
				}
			}
			if failed := f.handle(t, back...); len(failed) != 0 {
				t.Fatalf("redriven task failed: %v", failed)
			}
			if n := f.executions(t, "t-20"); n != 1 {
				t.Errorf("t-20 ran %d times after the redrive, want 1", n)
			}
			got, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.results), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{AttrTaskID: &types.AttributeValueMemberS{Value: "t-20"}}})
			if err != nil {
				t.Fatal(err)
			}
			if e, _ := got.Item[AttrEnvironment].(*types.AttributeValueMemberS); e == nil || e.Value != f.h.environment {
				t.Errorf("result item environment %v, want %s", got.Item[AttrEnvironment], f.h.environment)
			}
		})
	}
}

// receiveN receives until the source of q has given want messages, the
// first of them first's body, on receive number n.
func receiveN(t *testing.T, client *sqs.Client, q queuePair, first string, want, n int) []events.SQSMessage {
	t.Helper()
	var msgs []events.SQSMessage
	for try := 0; len(msgs) < want && try < 5; try++ {
		msgs = append(msgs, receive(t, client, q.src, q.srcARN)...)
	}
	if len(msgs) != want || msgs[0].Body != first || msgs[0].Attributes["ApproximateReceiveCount"] != fmt.Sprint(n) {
		t.Fatalf("receive %d: got %d messages %v, want the dependent task on receive %d", n, len(msgs), msgs, n)
	}
	return msgs
}

// TestTransientFailureIsRetriedNotDeadLettered: a task whose result write
// fails (its table is missing) is reported failed for SQS to redeliver, and
// nothing is sent to the DLQ.
func TestTransientFailureIsRetriedNotDeadLettered(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	db, client := dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	f := newFixture(t, db)
	f.h.table = "no-such-table"
	f.h.deadLetters = NewDeadLetters(client, "worker-test")
	q := newQueuePair(t, client, fmt.Sprintf("tasks%d", tableSeq.Add(1)), false)
	send(t, client, q.src, body("t-30", "x", 1), "")
	msgs := receive(t, client, q.src, q.srcARN)
	msgs[0].Attributes["ApproximateReceiveCount"] = "2"
	if failed := f.handle(t, msgs...); !slices.Equal(failed, []string{msgs[0].MessageId}) {
		t.Fatalf("failures %v, want the message reported for redelivery", failed)
	}
	attrs, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.dlq),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	if n := attrs.Attributes["ApproximateNumberOfMessages"]; n != "0" {
		t.Errorf("DLQ holds %s messages after a transient failure, want 0", n)
	}
	for name, want := range map[string]float64{"Failures": 1, "Retries": 1, "DeadLettered": 0, "Poison": 0} {
		if got := f.metric(t, name); got != want {
			t.Errorf("metric %s = %v, want %v", name, got, want)
		}
	}
}

// TestDeadLettersWithoutRedrivePolicy: a source queue with no DLQ cannot take
// the message; it is reported failed instead, so nothing is lost.
func TestDeadLettersWithoutRedrivePolicy(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	db, client := dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	f := newFixture(t, db)
	f.h.deadLetters = NewDeadLetters(client, "worker-test")
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("plain%d", tableSeq.Add(1)))})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(out.QueueUrl)
	send(t, client, url, "{poison", "")
	msgs := receive(t, client, url, queueARN(t, client, url))
	if failed := f.handle(t, msgs...); !slices.Equal(failed, []string{msgs[0].MessageId}) {
		t.Fatalf("failures %v, want the poison message reported failed", failed)
	}
	if !strings.Contains(f.logs.String(), "has no dead-letter queue") {
		t.Errorf("logs do not say why the message was not dead-lettered:\n%s", f.logs.String())
	}
	// One poison message is one Poison, whether or not it could be
	// dead-lettered.
	for name, want := range map[string]float64{"Poison": 1, "Failures": 1, "DeadLettered": 0} {
		if got := f.metric(t, name); got != want {
			t.Errorf("metric %s = %v, want %v", name, got, want)
		}
	}
}

// TestDeadLetterReasonFitsTheQueue: a message near its dead-letter queue's
// MaximumMessageSize gets the dead-letter attributes with its reason cut to
// fit (SQS counts the body and every attribute's name, type and value), so
// the send is not refused and the message does not reach the queue later
// without a reason; one with no room for a reason is refused here, naming
// the sizes, and fails as before.
func TestDeadLetterReasonFitsTheQueue(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	client := sqs.NewFromConfig(cfg)
	name := fmt.Sprintf("tight%d", tableSeq.Add(1))
	dlq, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq"), Attributes: map[string]string{"MaximumMessageSize": "2048"}})
	if err != nil {
		t.Fatal(err)
	}
	dlqURL := aws.ToString(dlq.QueueUrl)
	src, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"5"}`, queueARN(t, client, dlqURL))}})
	if err != nil {
		t.Fatal(err)
	}
	srcARN := queueARN(t, client, aws.ToString(src.QueueUrl))
	d := NewDeadLetters(client, "worker-test")
	reason := fmt.Errorf("data.input: %s", strings.Repeat("r", 3000))
	msg := events.SQSMessage{MessageId: "m-1", Body: `{"pad":"` + strings.Repeat("b", 1500) + `"}`, EventSourceARN: srcARN,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
	if _, err := d.Send(ctx, &msg, reason); err != nil {
		t.Fatal(err)
	}
	got := receive(t, client, dlqURL, "")
	if len(got) != 1 {
		t.Fatalf("%d messages in the dead-letter queue, want 1", len(got))
	}
	attrs := map[string]sqstypes.MessageAttributeValue{}
	for k, v := range got[0].MessageAttributes {
		attrs[k] = sqstypes.MessageAttributeValue{DataType: aws.String(v.DataType), StringValue: v.StringValue}
	}
	r := aws.ToString(attrs[redrive.AttrReason].StringValue)
	if n := messageBytes(got[0].Body, attrs); n > 2048 || !strings.HasPrefix(r, "data.input: rrr") || !strings.HasSuffix(r, "…") {
		t.Errorf("dead-lettered at %d bytes (the queue takes 2048) with reason %.40q…, want it cut to fit", n, r)
	}

	big := events.SQSMessage{MessageId: "m-2", Body: strings.Repeat("b", 2040), EventSourceARN: srcARN}
	if _, err := d.Send(ctx, &big, reason); err == nil || !strings.Contains(err.Error(), "MaximumMessageSize of 2048") {
		t.Errorf("a message with no room for a reason: %v, want a refusal naming the queue's size", err)
	}
}

// TestDeadLettersAMessageRedrivenWithItsAttributes: SQS's own redrive (the
// console's "Start DLQ redrive", StartMessageMoveTask) brings a message
// back with the dead-letter attributes it was sent with. When it fails
// permanently again, those four are replaced, not added: a message with 3
// attributes of its own is dead-lettered with its new reason, rather than
// refused for want of room and left to reach the queue after
// maxReceiveCount with the old one.
func TestDeadLettersAMessageRedrivenWithItsAttributes(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	client := sqs.NewFromConfig(cfg)
	q := newQueuePair(t, client, fmt.Sprintf("again%d", tableSeq.Add(1)), false)
	str := func(s string) events.SQSMessageAttribute {
		return events.SQSMessageAttribute{DataType: "String", StringValue: aws.String(s)}
	}
	msg := events.SQSMessage{MessageId: "m-1", Body: `{"id":"e-1"}`, EventSourceARN: q.srcARN,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"},
		MessageAttributes: map[string]events.SQSMessageAttribute{
			"tenant": str("acme"), "trace": str("t-1"), "origin": str("web"),
			redrive.AttrReason: str("the first reason"), redrive.AttrSourceQueue: str(q.srcARN),
			redrive.AttrFunction:     str("worker-test"),
			redrive.AttrReceiveCount: {DataType: "Number", StringValue: aws.String("1")},
		}}
	if _, err := NewDeadLetters(client, "worker-test").Send(ctx, &msg, fmt.Errorf("field data.after: the second reason")); err != nil {
		t.Fatalf("Send: %v; want the message dead-lettered with its new reason", err)
	}
	got := receive(t, client, q.dlq, "")
	if len(got) != 1 {
		t.Fatalf("%d messages in the dead-letter queue, want 1", len(got))
	}
	if r := aws.ToString(got[0].MessageAttributes[redrive.AttrReason].StringValue); r != "field data.after: the second reason" {
		t.Errorf("reason %q, want the new one", r)
	}
	if n := len(got[0].MessageAttributes); n != 7 {
		t.Errorf("%d attributes, want 7 (3 of its own, 4 dead-letter ones)", n)
	}
}

// TestFIFOPoisonDeadLetteredItsGroupGoesOn: a poison message of a FIFO
// group is sent to the dead-letter queue with its reason and reported
// processed, so the later messages of its group run in the same invocation:
// none reaches the dead-letter queue for being behind it.
func TestFIFOPoisonDeadLetteredItsGroupGoesOn(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	db, client := dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	f := newFixture(t, db)
	f.h.deadLetters = NewDeadLetters(client, "worker-test")
	q := newQueuePair(t, client, fmt.Sprintf("poison%d", tableSeq.Add(1)), true)
	send(t, client, q.src, `{"id":"evt-p","type":"nope","key":"k","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:01Z","data":{}}`, "g1")
	send(t, client, q.src, body("t-51", "y", 1), "g1")
	msgs := receiveN(t, client, q, `{"id":"evt-p","type":"nope","key":"k","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:01Z","data":{}}`, 2, 1)
	if failed := f.handle(t, msgs...); len(failed) != 0 {
		t.Fatalf("failures %v; want the poison dead-lettered and t-51 run", failed)
	}
	if n := f.executions(t, "t-51"); n != 1 {
		t.Errorf("t-51 ran %d times; want once, behind the dead-lettered poison", n)
	}
	out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.dlq), MaxNumberOfMessages: 10,
		WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 || !strings.Contains(attr(out.Messages[0], redrive.AttrReason), "field type") {
		t.Fatalf("DLQ holds %d messages %v; want the poison alone, its reason naming field type", len(out.Messages), out.Messages)
	}
}

// TestUnknownKeyIsDeadLetteredNamedAsAPath: a message whose envelope has
// a top-level key that is no field is dead-lettered with a reason naming
// the key as the strict reader names a key in a path (["data.amount"]):
// raw, "data.amount" would name a place inside data, and a key holding
// ESC would put the producer's escape sequence into the reason, which
// make redrive and the console show (and which SQS does not take in a
// message attribute).
func TestUnknownKeyIsDeadLetteredNamedAsAPath(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	db, client := dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	for _, tc := range []struct {
		name string
		key  string // as written in the body's JSON
		says string
	}{
		{"a key that reads as a path into data", `data.amount`, `field ["data.amount"]: unknown field`},
		{"an escape sequence", `\u001b]0;PWNED\u0007\u001b[2J`, `field ["\x1b]0;PWNED\a\x1b[2J"]: unknown field`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, db)
			f.h.deadLetters = NewDeadLetters(client, "worker-test")
			q := newQueuePair(t, client, fmt.Sprintf("names%d", tableSeq.Add(1)), false)
			send(t, client, q.src, strings.Replace(body("t-61", "a", 1), `"data":`, `"`+tc.key+`":1,"data":`, 1), "")
			msgs := receive(t, client, q.src, q.srcARN)
			if failed := f.handle(t, msgs...); len(failed) != 0 {
				t.Fatalf("failures %v; want the message dead-lettered", failed)
			}
			got := receive(t, client, q.dlq, "")
			if len(got) != 1 {
				t.Fatalf("%d messages in the dead-letter queue, want 1", len(got))
			}
			reason := aws.ToString(got[0].MessageAttributes[redrive.AttrReason].StringValue)
			if !strings.Contains(reason, tc.says) || strings.ContainsAny(reason, "\x1b\a") {
				t.Errorf("reason %q, want it to say %s", reason, tc.says)
			}
		})
	}
}
