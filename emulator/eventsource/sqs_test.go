package eventsource_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/emulator/eventsource"
)

// queueWithDLQ makes a queue whose redrive policy moves a message to a DLQ
// after maxReceive receives.
func queueWithDLQ(t *testing.T, maxReceive int, extra map[string]string) (url, arn, dlqURL string) {
	t.Helper()
	dlqURL, dlqARN := createQueue(t, uniqueName(t, "-dlq"), nil)
	attrs := map[string]string{
		"VisibilityTimeout": "1",
		"RedrivePolicy":     fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, dlqARN, maxReceive),
	}
	for k, v := range extra {
		attrs[k] = v
	}
	url, arn = createQueue(t, uniqueName(t, ""), attrs)
	return url, arn, dlqURL
}

func send(t *testing.T, url string, bodies ...string) []string {
	t.Helper()
	c := sqs.NewFromConfig(awsCfg)
	var ids []string
	for _, b := range bodies {
		out, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(b)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, aws.ToString(out.MessageId))
	}
	return ids
}

func TestSQSOnlyFailedMessagesComeBackAndLandInTheDLQ(t *testing.T) {
	needStandin(t)
	t.Parallel()
	url, arn, dlqURL := queueWithDLQ(t, 2, nil)
	fn, log := startFunction(t, "itemfailure", nil)
	ids := send(t, url, `{"n":0}`, `{"n":1}`, `{"n":2,"poison":true}`, `{"n":3}`, `{"n":4}`)
	p, err := eventsource.NewSQS(awsCfg, eventsource.Settings{FunctionName: "faulty", SourceARN: arn, BatchSize: 10, ReportBatchItemFailures: true, Enabled: true}, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)

	want := map[string]int{}
	for i, id := range ids {
		want[id] = 1
		if i == 2 {
			want[id] = 2 // maxReceiveCount
		}
	}
	// The function's log lines reach the test through RIE's output, read
	// apart from the invocations: on a loaded machine the last one can
	// come after the mapping is idle.
	got := log.deliveries()
	for deadline := time.Now().Add(5 * time.Second); !maps.Equal(got, want) && time.Now().Before(deadline); got = log.deliveries() {
		time.Sleep(50 * time.Millisecond)
	}
	for i, id := range ids {
		if got[id] != want[id] {
			t.Errorf("message %d (%s) delivered %d times, want %d", i, id, got[id], want[id])
		}
	}
	// SQS moves the message to the DLQ on the receive after its last
	// visibility timeout, which the mapping makes about a second later when
	// the queue is otherwise empty: give it a few seconds.
	var dlq []sqstypes.Message
	for deadline := time.Now().Add(10 * time.Second); len(dlq) == 0 && time.Now().Before(deadline); {
		dlq = append(dlq, drainQueue(t, dlqURL)...)
	}
	if len(dlq) != 1 || aws.ToString(dlq[0].MessageId) != ids[2] {
		t.Errorf("DLQ holds %d messages, want only the poison one %s", len(dlq), ids[2])
	}
}

func TestSQSFunctionErrorDeletesNothing(t *testing.T) {
	needStandin(t)
	t.Parallel()
	url, arn, dlqURL := queueWithDLQ(t, 2, nil)
	fn, log := startFunction(t, "error", nil)
	ids := send(t, url, `{"n":0}`, `{"n":1,"poison":true}`)
	// Without ReportBatchItemFailures a failed invocation fails every message.
	// One poller, so both messages always travel in one batch (two pollers may
	// split them, and the good one alone would succeed).
	p, err := eventsource.NewSQS(awsCfg, eventsource.Settings{FunctionName: "faulty", SourceARN: arn, BatchSize: 10,
		MaximumBatchingWindow: 300 * time.Millisecond, MaximumConcurrency: 1, Enabled: true}, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)
	got := log.deliveries()
	for _, id := range ids {
		if got[id] != 2 {
			t.Errorf("message %s delivered %d times, want 2 (the whole batch failed each time)", id, got[id])
		}
	}
	if dlq := drainQueue(t, dlqURL); len(dlq) != 2 {
		t.Errorf("DLQ holds %d messages, want both", len(dlq))
	}
}

func TestSQSFIFOKeepsGroupOrder(t *testing.T) {
	needStandin(t)
	t.Parallel()
	url, arn := createQueue(t, uniqueName(t, ".fifo"), map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	fn, err := startFunctionPool(t, 2)
	if err != nil {
		t.Fatal(err)
	}
	c := sqs.NewFromConfig(awsCfg)
	want := map[string][]string{}
	for i := 0; i < 6; i++ {
		for _, g := range []string{"g1", "g2"} {
			body := fmt.Sprintf(`{"g":%q,"i":%d}`, g, i)
			out, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageGroupId: aws.String(g)})
			if err != nil {
				t.Fatal(err)
			}
			want[g] = append(want[g], aws.ToString(out.MessageId))
		}
	}
	p, err := eventsource.NewSQS(awsCfg, eventsource.Settings{FunctionName: "pool", SourceARN: arn, BatchSize: 2, MaximumConcurrency: 2, Enabled: true}, fn.fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)
	pos := map[string]int{}
	for _, inv := range fn.log.invocations() {
		for _, id := range inv.IDs {
			if _, dup := pos[id]; dup {
				t.Errorf("message %s delivered twice", id)
			}
			pos[id] = len(pos)
		}
	}
	for g, ids := range want {
		for i := 1; i < len(ids); i++ {
			if pos[ids[i]] < pos[ids[i-1]] {
				t.Errorf("group %s: message %d delivered before message %d", g, i, i-1)
			}
		}
	}
	if len(pos) != 12 {
		t.Errorf("%d messages delivered, want 12", len(pos))
	}
}

func TestSQSFilterDeletesWhatItDrops(t *testing.T) {
	needStandin(t)
	t.Parallel()
	url, arn := createQueue(t, uniqueName(t, ""), map[string]string{"VisibilityTimeout": "1"})
	fn, log := startFunction(t, "", nil)
	ids := send(t, url, `{"type":"keep","n":1}`, `{"type":"drop"}`, `not json`, `{"type":"keep","n":2}`)
	p, err := eventsource.NewSQS(awsCfg, eventsource.Settings{FunctionName: "faulty", SourceARN: arn,
		FilterPatterns: []string{`{"body":{"type":["keep"]}}`}, Enabled: true}, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)
	got := log.deliveries()
	if got[ids[0]] != 1 || got[ids[3]] != 1 || got[ids[1]] != 0 || got[ids[2]] != 0 {
		t.Errorf("deliveries = %v; want only the two keep messages, once", got)
	}
	if s := p.Stats(); s.Filtered != 2 {
		t.Errorf("stats = %+v, want 2 filtered", s)
	}
	// WaitIdle returning means the queue is empty: the dropped messages were deleted.
	attrs, err := sqs.NewFromConfig(awsCfg).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(attrs.Attributes)
	if attrs.Attributes["ApproximateNumberOfMessages"] != "0" || attrs.Attributes["ApproximateNumberOfMessagesNotVisible"] != "0" {
		t.Errorf("queue not empty: %s", b)
	}
}
