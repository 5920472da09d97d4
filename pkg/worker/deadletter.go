package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/pkg/redrive"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// deadLetterAPI is what DeadLetters needs of SQS: the source queue's
// RedrivePolicy, and SendMessage on its dead-letter queue.
type deadLetterAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var _ deadLetterAPI = (*sqs.Client)(nil)

// maxMessageAttributes is SQS's limit on message attributes per message.
const maxMessageAttributes = 10

// maxReasonBytes bounds the reason attribute: what a dry run shows whole.
const maxReasonBytes = redrive.ReasonLimit

// ErrNoDeadLetterQueue is returned by DeadLetters.Send when the message's
// source queue has no redrive policy.
var ErrNoDeadLetterQueue = errors.New("the source queue has no dead-letter queue (RedrivePolicy)")

// DeadLetters sends messages that no retry can fix straight to their source
// queue's dead-letter queue, with the reason as message attributes (package
// redrive's Attr* names), instead of letting them fail maxReceiveCount times
// (with a 360 s visibility timeout and 5 receives, half an hour) and arrive
// there without a word of why. The dead-letter queue is read from the source
// queue's RedrivePolicy once per source and cached.
type DeadLetters struct {
	client   deadLetterAPI
	function string

	mu   sync.Mutex
	dlqs map[string]deadLetterQueue // by source queue ARN
}

type deadLetterQueue struct {
	url  string
	fifo bool
	// maxReceives is the source queue's maxReceiveCount: on that receive
	// SQS delivers a message for the last time.
	maxReceives int
	// maxBytes is its MaximumMessageSize: SQS counts a message's body and
	// each attribute's name, type and value against it.
	maxBytes int
}

// defaultMaxMessageBytes is SQS's MaximumMessageSize when a queue does not
// say (its default).
const defaultMaxMessageBytes = 256 << 10

// NewDeadLetters returns a DeadLetters using client; function is recorded in
// each message's AttrFunction.
func NewDeadLetters(client deadLetterAPI, function string) *DeadLetters {
	return &DeadLetters{client: client, function: function, dlqs: map[string]deadLetterQueue{}}
}

// Send copies msg (body, message attributes, message group) to the
// dead-letter queue of its source queue (msg.EventSourceARN), adding the
// reason, the source queue and the receive count as attributes, and returns
// the dead-letter queue's URL. The caller then reports msg processed so that
// Lambda deletes it from the source.
func (d *DeadLetters) Send(ctx context.Context, msg *events.SQSMessage, reason error) (string, error) {
	dlq, err := d.queue(ctx, msg.EventSourceARN)
	if err != nil {
		return "", err
	}
	attrs := make(map[string]types.MessageAttributeValue, len(msg.MessageAttributes)+4)
	for name, a := range msg.MessageAttributes {
		// A message redriven by SQS itself (StartMessageMoveTask) still
		// has the dead-letter attributes of its last move: they are
		// replaced below, so they take no room.
		if strings.HasPrefix(name, redrive.AttrPrefix) {
			continue
		}
		attrs[name] = types.MessageAttributeValue{DataType: aws.String(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue}
	}
	if len(attrs)+4 > maxMessageAttributes {
		return "", fmt.Errorf("message %s has %d message attributes: no room for the 4 dead-letter ones (SQS allows %d)", msg.MessageId, len(attrs), maxMessageAttributes)
	}
	receives := msg.Attributes["ApproximateReceiveCount"]
	if _, err := strconv.Atoi(receives); err != nil {
		receives = "0"
	}
	attrs[redrive.AttrReason] = stringAttr(strictjson.Cut(reason.Error(), maxReasonBytes))
	attrs[redrive.AttrSourceQueue] = stringAttr(msg.EventSourceARN)
	attrs[redrive.AttrReceiveCount] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(receives)}
	attrs[redrive.AttrFunction] = stringAttr(d.function)
	// A message near the source's size limit has little room for the
	// reason: cut it to fit the dead-letter queue's, rather than have the
	// send refused and the message reach it after maxReceiveCount without
	// one.
	if over := messageBytes(msg.Body, attrs) - dlq.maxBytes; over > 0 {
		reason := aws.ToString(attrs[redrive.AttrReason].StringValue)
		if len(reason)-over < minReasonBytes {
			return "", fmt.Errorf("message %s: %d bytes with the dead-letter attributes, over dead-letter queue %s's MaximumMessageSize of %d", msg.MessageId, messageBytes(msg.Body, attrs), dlq.url, dlq.maxBytes)
		}
		attrs[redrive.AttrReason] = stringAttr(strictjson.Cut(reason, len(reason)-over-len("…")))
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(dlq.url), MessageBody: aws.String(msg.Body), MessageAttributes: attrs}
	if dlq.fifo {
		group := msg.Attributes["MessageGroupId"]
		if group == "" {
			return "", fmt.Errorf("message %s: its dead-letter queue %s is FIFO but the message has no MessageGroupId", msg.MessageId, dlq.url)
		}
		// The source message id: a second attempt at the same move (the
		// invocation died before the source deleted it) is dropped by SQS.
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(group), aws.String(msg.MessageId)
	}
	if _, err := d.client.SendMessage(ctx, in); err != nil {
		return "", fmt.Errorf("message %s: sending it to dead-letter queue %s: %w", msg.MessageId, dlq.url, err)
	}
	return dlq.url, nil
}

// MaxReceiveCount returns the maxReceiveCount of the RedrivePolicy of the
// queue sourceARN: the receive on which SQS delivers a message for the last
// time before moving it to the dead-letter queue itself.
func (d *DeadLetters) MaxReceiveCount(ctx context.Context, sourceARN string) (int, error) {
	q, err := d.queue(ctx, sourceARN)
	if err == nil && q.maxReceives < 1 {
		err = fmt.Errorf("queue %s: its RedrivePolicy has no maxReceiveCount of at least 1", sourceARN)
	}
	return q.maxReceives, err
}

// queue finds (and caches) the dead-letter queue of the queue sourceARN.
func (d *DeadLetters) queue(ctx context.Context, sourceARN string) (deadLetterQueue, error) {
	d.mu.Lock()
	q, ok := d.dlqs[sourceARN]
	d.mu.Unlock()
	if ok {
		return q, nil
	}
	src, err := d.url(ctx, sourceARN)
	if err != nil {
		return q, err
	}
	out, err := d.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(src),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy}})
	if err != nil {
		return q, fmt.Errorf("reading the RedrivePolicy of %s: %w", sourceARN, err)
	}
	policy := out.Attributes[string(types.QueueAttributeNameRedrivePolicy)]
	if policy == "" {
		return q, fmt.Errorf("queue %s: %w", sourceARN, ErrNoDeadLetterQueue)
	}
	var p struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		// A number, or a number in a string (as CloudFormation and
		// SetQueueAttributes may leave it).
		MaxReceiveCount json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(policy), &p); err != nil || p.DeadLetterTargetArn == "" {
		return q, fmt.Errorf("queue %s: RedrivePolicy %s names no deadLetterTargetArn", sourceARN, policy)
	}
	// Only MaxReceiveCount needs it: Send works without.
	if n, err := strconv.Atoi(strings.Trim(string(p.MaxReceiveCount), `"`)); err == nil && n >= 1 {
		q.maxReceives = n
	}
	if q.url, err = d.url(ctx, p.DeadLetterTargetArn); err != nil {
		return q, err
	}
	q.fifo = strings.HasSuffix(p.DeadLetterTargetArn, ".fifo")
	dout, err := d.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMaximumMessageSize}})
	if err != nil {
		return q, fmt.Errorf("reading the MaximumMessageSize of %s: %w", p.DeadLetterTargetArn, err)
	}
	q.maxBytes = defaultMaxMessageBytes
	if n, err := strconv.Atoi(dout.Attributes[string(types.QueueAttributeNameMaximumMessageSize)]); err == nil && n > 0 {
		q.maxBytes = n
	}
	d.mu.Lock()
	d.dlqs[sourceARN] = q
	d.mu.Unlock()
	return q, nil
}

// url looks up the URL of the queue arn (arn:aws:sqs:region:account:name).
func (d *DeadLetters) url(ctx context.Context, arn string) (string, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return "", fmt.Errorf("%q is not an SQS queue ARN", arn)
	}
	out, err := d.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(parts[5]), QueueOwnerAWSAccountId: aws.String(parts[4])})
	if err != nil {
		return "", fmt.Errorf("looking up queue %s: %w", arn, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// minReasonBytes is the least of a reason worth sending.
const minReasonBytes = 64

// messageBytes is a message's size as SQS counts it against
// MaximumMessageSize: its body, and each attribute's name, data type and
// value.
func messageBytes(body string, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for name, a := range attrs {
		n += len(name) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
	}
	return n
}

func stringAttr(s string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}
