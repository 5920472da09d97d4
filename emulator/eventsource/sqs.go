package eventsource

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// queueClient is the part of the SQS client an SQS mapping uses.
type queueClient interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

var _ queueClient = (*sqs.Client)(nil)

// longPoll is the WaitTimeSeconds of an empty poll. Lambda long-polls for up
// to 20 s; a short wait keeps shutdown and WaitIdle quick.
const longPoll = 1

// NewSQS plays an SQS event source mapping: s.SourceARN is the queue ARN.
// The function receives events.SQSEvent. MaximumConcurrency pollers receive
// and invoke concurrently; a FIFO queue keeps each message group in order
// because SQS hands out a group's messages to one receiver at a time.
func NewSQS(cfg aws.Config, s Settings, inv Invoker, obs Observer) (*Poller, error) {
	s, src, err := s.normalize("sqs")
	if err != nil {
		return nil, err
	}
	if inv == nil {
		return nil, fmt.Errorf("eventsource: mapping of %s to %s: no Invoker", s.SourceARN, s.FunctionName)
	}
	p := newPoller(s, obs)
	f, _ := NewFilter(s.FilterPatterns)
	p.runner = &queue{p: p, s: s, client: sqs.NewFromConfig(cfg), inv: inv, filter: f, arn: src}
	return p, nil
}

type queue struct {
	p      *Poller
	s      Settings
	client queueClient
	inv    Invoker
	filter *Filter
	arn    arnParts

	mu        sync.Mutex
	url       string
	inflight  int       // messages received and not yet settled
	emptyRecv time.Time // start of the latest receive that found nothing
}

func (q *queue) emit(e Event) { q.p.rec.emit(e) }

func (q *queue) run(ctx context.Context) error {
	out, err := q.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &q.arn.resource, QueueOwnerAWSAccountId: &q.arn.account})
	if err != nil {
		return fmt.Errorf("eventsource: %s: queue %s: %w", q.s.SourceARN, q.arn.resource, err)
	}
	q.mu.Lock()
	q.url = aws.ToString(out.QueueUrl)
	q.mu.Unlock()
	var wg sync.WaitGroup
	for i := 0; i < q.s.MaximumConcurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q.poll(ctx)
		}()
	}
	wg.Wait()
	return nil
}

func (q *queue) poll(ctx context.Context) {
	for ctx.Err() == nil {
		msgs := q.collect(ctx)
		if len(msgs) == 0 {
			continue
		}
		q.handle(ctx, msgs)
		q.mu.Lock()
		q.inflight -= len(msgs)
		q.mu.Unlock()
	}
}

// collect receives up to BatchSize messages, waiting up to the batching
// window once the first message is in.
func (q *queue) collect(ctx context.Context) []types.Message {
	var msgs []types.Message
	var deadline time.Time
	for ctx.Err() == nil {
		wait := int32(longPoll)
		if len(msgs) > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			wait = int32(min(left/time.Second, 20))
		}
		start := time.Now()
		out, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    &q.url,
			MaxNumberOfMessages:         int32(min(10, q.s.BatchSize-len(msgs))),
			WaitTimeSeconds:             wait,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			q.emit(Event{Type: EventError, Err: fmt.Errorf("receiving from %s: %w", q.arn.resource, err)})
			if len(msgs) > 0 {
				break
			}
			sleep(ctx, errorBackoff)
			continue
		}
		q.mu.Lock()
		q.inflight += len(out.Messages)
		if len(out.Messages) == 0 && len(msgs) == 0 && start.After(q.emptyRecv) {
			q.emptyRecv = start
		}
		q.mu.Unlock()
		msgs = append(msgs, out.Messages...)
		if len(msgs) == 0 {
			continue
		}
		if deadline.IsZero() {
			deadline = start.Add(q.s.MaximumBatchingWindow)
		}
		if len(msgs) >= q.s.BatchSize || q.s.MaximumBatchingWindow == 0 {
			break
		}
		if len(out.Messages) == 0 && wait == 0 {
			sleep(ctx, min(time.Until(deadline), 50*time.Millisecond))
		}
	}
	return msgs
}

// sqsEventRecord is one record of events.SQSEvent, as Lambda writes it.
type sqsEventRecord struct {
	MessageID              string                         `json:"messageId"`
	ReceiptHandle          string                         `json:"receiptHandle"`
	Body                   string                         `json:"body"`
	Attributes             map[string]string              `json:"attributes"`
	MessageAttributes      map[string]sqsMessageAttribute `json:"messageAttributes"`
	Md5OfMessageAttributes *string                        `json:"md5OfMessageAttributes"`
	Md5OfBody              string                         `json:"md5OfBody"`
	EventSource            string                         `json:"eventSource"`
	EventSourceARN         string                         `json:"eventSourceARN"`
	AwsRegion              string                         `json:"awsRegion"`
}

type sqsMessageAttribute struct {
	StringValue      *string  `json:"stringValue,omitempty"`
	BinaryValue      []byte   `json:"binaryValue,omitempty"`
	StringListValues []string `json:"stringListValues"`
	BinaryListValues [][]byte `json:"binaryListValues"`
	DataType         string   `json:"dataType"`
}

func (q *queue) eventRecord(m types.Message) sqsEventRecord {
	r := sqsEventRecord{
		MessageID:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Attributes:             map[string]string{},
		MessageAttributes:      map[string]sqsMessageAttribute{},
		Md5OfMessageAttributes: m.MD5OfMessageAttributes,
		Md5OfBody:              aws.ToString(m.MD5OfBody),
		EventSource:            "aws:sqs",
		EventSourceARN:         q.s.SourceARN,
		AwsRegion:              q.arn.region,
	}
	for k, v := range m.Attributes {
		r.Attributes[k] = v
	}
	for k, v := range m.MessageAttributes {
		a := sqsMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, StringListValues: v.StringListValues,
			BinaryListValues: v.BinaryListValues, DataType: aws.ToString(v.DataType)}
		if a.StringListValues == nil {
			a.StringListValues = []string{}
		}
		if a.BinaryListValues == nil {
			a.BinaryListValues = [][]byte{}
		}
		r.MessageAttributes[k] = a
	}
	return r
}

// handle invokes the function with one batch and settles its messages.
func (q *queue) handle(ctx context.Context, msgs []types.Message) {
	records := make([]sqsEventRecord, 0, len(msgs))
	var keep, dropped []types.Message
	for _, m := range msgs {
		r := q.eventRecord(m)
		if !q.filter.Empty() && !q.filter.Match(q.view(r)) {
			dropped = append(dropped, m)
			continue
		}
		records = append(records, r)
		keep = append(keep, m)
	}
	if len(dropped) > 0 {
		// Lambda deletes the messages its filter criteria drop.
		q.emit(Event{Type: EventFiltered, Size: len(dropped), First: aws.ToString(dropped[0].MessageId), Last: aws.ToString(dropped[len(dropped)-1].MessageId)})
		q.delete(ctx, dropped, false)
	}
	if len(keep) == 0 {
		return
	}
	payload, err := json.Marshal(struct {
		Records []sqsEventRecord `json:"Records"`
	}{records})
	if err != nil {
		q.emit(Event{Type: EventError, Err: err})
		return
	}
	first, last := aws.ToString(keep[0].MessageId), aws.ToString(keep[len(keep)-1].MessageId)
	attempt := 1
	if n, err := strconv.Atoi(keep[0].Attributes["ApproximateReceiveCount"]); err == nil {
		attempt = n
	}
	res, err := q.inv.Invoke(ctx, payload)
	if err != nil {
		if ctx.Err() == nil {
			// Not deleted: the messages come back after the visibility timeout.
			q.emit(Event{Type: EventError, Size: len(keep), First: first, Last: last, Err: err})
		}
		return
	}
	ids := make([]string, len(keep))
	for i, m := range keep {
		ids[i] = aws.ToString(m.MessageId)
	}
	q.emit(Event{Type: EventBatch, Size: len(keep), First: first, Last: last, Duration: res.Duration, FunctionError: res.FunctionError, Attempt: attempt, Records: ids})
	if res.FunctionError != "" {
		// Nothing is deleted; the queue's visibility timeout and redrive
		// policy take it from here.
		return
	}
	settle := keep
	if q.s.ReportBatchItemFailures {
		failed, whole := sqsFailures(res.Payload, keep)
		if whole {
			q.emit(Event{Type: EventItemFailures, Size: len(keep), First: first, Last: last, Err: fmt.Errorf("unusable batchItemFailures in the response: the whole batch failed")})
			return
		}
		if len(failed) > 0 {
			ids := make([]string, 0, len(failed))
			settle = settle[:0:0]
			for _, m := range keep {
				if failed[aws.ToString(m.MessageId)] {
					ids = append(ids, aws.ToString(m.MessageId))
				} else {
					settle = append(settle, m)
				}
			}
			q.emit(Event{Type: EventItemFailures, Size: len(ids), First: ids[0], Last: ids[len(ids)-1], Failed: ids, Attempt: attempt})
		}
	}
	q.delete(ctx, settle, true)
}

// sqsFailures reads an SQSEventResponse: the failed message ids, or whole
// when an identifier is empty, missing or not a message of the batch.
func sqsFailures(payload []byte, batch []types.Message) (failed map[string]bool, whole bool) {
	var resp struct {
		BatchItemFailures []map[string]json.RawMessage `json:"batchItemFailures"`
	}
	if json.Unmarshal(payload, &resp) != nil || len(resp.BatchItemFailures) == 0 {
		return nil, false
	}
	ids := make(map[string]bool, len(batch))
	for _, m := range batch {
		ids[aws.ToString(m.MessageId)] = true
	}
	failed = map[string]bool{}
	for _, item := range resp.BatchItemFailures {
		var id string
		if json.Unmarshal(item["itemIdentifier"], &id) != nil || id == "" || !ids[id] {
			return nil, true
		}
		failed[id] = true
	}
	return failed, false
}

func (q *queue) view(r sqsEventRecord) map[string]any {
	b, _ := json.Marshal(r)
	v, _ := decodeJSON(b)
	m, _ := v.(map[string]any)
	if body, ok := decodeJSON([]byte(r.Body)); ok {
		m["body"] = body
	}
	return m
}

func (q *queue) delete(ctx context.Context, msgs []types.Message, success bool) {
	for i := 0; i < len(msgs); i += 10 {
		chunk := msgs[i:min(i+10, len(msgs))]
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for j, m := range chunk {
			entries[j] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), ReceiptHandle: m.ReceiptHandle}
		}
		out, err := q.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &q.url, Entries: entries})
		if err != nil {
			if ctx.Err() == nil {
				q.emit(Event{Type: EventError, Size: len(chunk), Err: fmt.Errorf("deleting from %s: %w", q.arn.resource, err)})
			}
			continue
		}
		for _, f := range out.Failed {
			q.emit(Event{Type: EventError, Err: fmt.Errorf("deleting from %s: %s: %s", q.arn.resource, aws.ToString(f.Code), aws.ToString(f.Message))})
		}
		if n := len(out.Successful); n > 0 && success {
			q.p.rec.succeeded(n)
			q.emit(Event{Type: EventDeleted, Size: n, First: aws.ToString(chunk[0].MessageId), Last: aws.ToString(chunk[len(chunk)-1].MessageId)})
		}
	}
}

func (q *queue) idle(ctx context.Context, since time.Time) (bool, error) {
	q.mu.Lock()
	url, inflight, empty := q.url, q.inflight, q.emptyRecv
	q.mu.Unlock()
	if url == "" || inflight > 0 || empty.IsZero() || !empty.After(since) {
		return false, nil
	}
	out, err := q.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	}})
	if err != nil {
		return false, err
	}
	for _, v := range out.Attributes {
		if v != "0" {
			return false, nil
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.inflight == 0, nil
}
