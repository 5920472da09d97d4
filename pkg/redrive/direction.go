package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// ErrRefused is what every refusal of Move and DryRun wraps: the queues
// were checked and nothing was received, sent or deleted.
var ErrRefused = errors.New("refused")

// DirectionError is Move's refusal when the source's redrive policy does
// not name the DLQ: messages go back only to the queue they came from.
type DirectionError struct {
	DLQ, Source string
	// Names is the dead-letter queue ARN the source's redrive policy names
	// ("" when it has none).
	Names string
	// Reversed: the DLQ's own redrive policy names the source, so the two
	// were given the wrong way round.
	Reversed bool
}

func (e *DirectionError) Error() string {
	dlq, src := queueName(e.DLQ), queueName(e.Source)
	switch {
	case e.DLQ == e.Source:
		return fmt.Sprintf("-dlq and -to are the same queue, %s", dlq)
	case e.Reversed:
		return fmt.Sprintf("the wrong way round: %s sends its failures to %s (its redrive policy), so %s is the dead-letter queue; swap -dlq and -to", dlq, src, src)
	case e.Names == "":
		return fmt.Sprintf("%s has no redrive policy, so %s is not its dead-letter queue: redrive moves messages only back to the queue whose redrive policy names the DLQ", src, dlq)
	default:
		return fmt.Sprintf("%s's redrive policy names %s as its dead-letter queue, not %s: redrive moves messages only back to the queue they came from", src, queueName(e.Names), dlq)
	}
}

// queueName is the name at the end of a queue URL or ARN.
func queueName(urlOrARN string) string {
	if i := strings.LastIndexAny(urlOrARN, "/:"); i >= 0 {
		return urlOrARN[i+1:]
	}
	return urlOrARN
}

// Is makes errors.Is(err, ErrRefused) hold.
func (e *DirectionError) Is(target error) bool { return target == ErrRefused }

// NotADLQError is the refusal of a queue given as the DLQ that no queue
// names as its DLQ but that has a redrive policy of its own: a source queue
// given by mistake. For DryRun (Listing), a receive there would count
// towards each message's maxReceiveCount.
type NotADLQError struct {
	Queue, Names string
	Listing      bool
}

func (e *NotADLQError) Error() string {
	why := "its messages are to be moved back to it, not from it"
	if e.Listing {
		why = "listing it would count as a receive of each message, towards its maxReceiveCount"
	}
	return fmt.Sprintf("%s is no queue's dead-letter queue but a source with a redrive policy (to %s): %s; give its DLQ, %s", queueName(e.Queue), queueName(e.Names), why, queueName(e.Names))
}

// Is makes errors.Is(err, ErrRefused) hold.
func (e *NotADLQError) Is(target error) bool { return target == ErrRefused }

// queueInfo is a queue's ARN, the dead-letter queue its redrive policy
// names ("" without one) and the largest message it takes
// (MaximumMessageSize; 0 when the queue does not say).
type queueInfo struct {
	arn, dlq string
	maxBytes int
}

func (r *Redriver) queueInfo(ctx context.Context, url string) (queueInfo, error) {
	out, err := r.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn, types.QueueAttributeNameRedrivePolicy,
			types.QueueAttributeNameMaximumMessageSize}})
	if err != nil {
		var missing *types.QueueDoesNotExist
		if errors.As(err, &missing) {
			return queueInfo{}, fmt.Errorf("queue %s: %w", url, ErrNoQueue)
		}
		return queueInfo{}, fmt.Errorf("reading the attributes of %s: %w", url, err)
	}
	qi := queueInfo{arn: out.Attributes[string(types.QueueAttributeNameQueueArn)]}
	qi.maxBytes, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameMaximumMessageSize)])
	if p := out.Attributes[string(types.QueueAttributeNameRedrivePolicy)]; p != "" {
		var policy struct {
			DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		}
		if err := json.Unmarshal([]byte(p), &policy); err != nil {
			return queueInfo{}, fmt.Errorf("the redrive policy of %s: %w", url, err)
		}
		qi.dlq = policy.DeadLetterTargetArn
	}
	return qi, nil
}

// CheckDirection returns a *DirectionError unless sourceURL's redrive
// policy names dlqURL as its dead-letter queue.
func (r *Redriver) CheckDirection(ctx context.Context, dlqURL, sourceURL string) error {
	if dlqURL == sourceURL {
		return &DirectionError{DLQ: dlqURL, Source: sourceURL}
	}
	src, err := r.queueInfo(ctx, sourceURL)
	if err != nil {
		return err
	}
	dlq, err := r.queueInfo(ctx, dlqURL)
	if err != nil {
		return err
	}
	if src.dlq != "" && src.dlq == dlq.arn {
		return nil
	}
	return &DirectionError{DLQ: dlqURL, Source: sourceURL, Names: src.dlq, Reversed: dlq.dlq != "" && dlq.dlq == src.arn}
}

// checkListable refuses a dry run of a queue that is no queue's DLQ but has
// a redrive policy of its own (a source queue given by mistake).
func (r *Redriver) checkListable(ctx context.Context, queueURL string) error {
	qi, err := r.queueInfo(ctx, queueURL)
	if err != nil || qi.dlq == "" {
		return err
	}
	out, err := r.Client.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(queueURL), MaxResults: aws.Int32(1)})
	if err != nil {
		return fmt.Errorf("listing the source queues of %s: %w", queueURL, err)
	}
	if len(out.QueueUrls) > 0 {
		return nil // a DLQ with a redrive policy of its own: chained DLQs
	}
	return &NotADLQError{Queue: queueURL, Names: qi.dlq, Listing: true}
}
