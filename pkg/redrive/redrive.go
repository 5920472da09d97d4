package redrive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Client is the part of the SQS API a Redriver uses.
type Client interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ListDeadLetterSourceQueues(ctx context.Context, in *sqs.ListDeadLetterSourceQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

var _ Client = (*sqs.Client)(nil)

// maxBatchBytes is SQS's limit on the total size of one SendMessageBatch
// (bodies plus message attributes). AWS has raised it to 1 MiB; 256 KiB is
// what every region and the local stand-ins accept.
const maxBatchBytes = 256 * 1024

// ErrNoQueue is returned for a queue that does not exist.
var ErrNoQueue = errors.New("does not exist (in this account and region)")

// ErrNoSourceQueue is returned by SourceQueue when no queue names the DLQ in
// its redrive policy.
var ErrNoSourceQueue = errors.New("no queue has this queue as its dead-letter queue")

// AmbiguousSourceError is returned by SourceQueue when more than one queue
// sends its failures to the DLQ, so the source must be given explicitly.
type AmbiguousSourceError struct {
	DLQ        string
	Candidates []string
}

func (e *AmbiguousSourceError) Error() string {
	return fmt.Sprintf("%s is the dead-letter queue of %d queues (%s): choose one with -to",
		e.DLQ, len(e.Candidates), strings.Join(e.Candidates, ", "))
}

// Redriver moves or lists the messages of a dead-letter queue. Build it with
// New and change the fields before use if the defaults do not fit.
type Redriver struct {
	Client Client
	// Progress receives progress lines ("moved 120/≈340"), about a
	// hundred in a run whatever its size, and the last count; nil for none.
	Progress io.Writer
	// WaitTime is the long-poll time of each receive (whole seconds, ≤ 20s).
	WaitTime time.Duration
	// EmptyReceives is how many receives in a row must come back empty
	// before the DLQ counts as drained.
	EmptyReceives int
	// VisibilityTimeout is how long received messages stay hidden while a
	// batch is moved, or while a dry run lists the queue.
	VisibilityTimeout time.Duration
	// BodyLimit is how many bytes of a body a dry run prints (a reason:
	// ReasonLimit, if more).
	BodyLimit int
	// AfterBatch, if set, is called after each batch is moved.
	AfterBatch func(Result)
}

// New returns a Redriver using c with the defaults: 2s long polls, 3 empty
// receives to call the DLQ drained, 30s visibility, bodies cut at 200 bytes.
func New(c Client) *Redriver {
	return &Redriver{
		Client:            c,
		WaitTime:          2 * time.Second,
		EmptyReceives:     3,
		VisibilityTimeout: 30 * time.Second,
		BodyLimit:         200,
	}
}

// Failure is a message that could not be moved; it stays in the DLQ.
type Failure struct {
	MessageID string
	Code      string
	Reason    string
}

// Result counts what a Move did.
type Result struct {
	Moved int
	// Failed are messages the source queue refused; they are still in the DLQ.
	Failed []Failure
	// NotDeleted are ids of messages that reached the source but could not be
	// deleted from the DLQ: a later run sends them again.
	NotDeleted []string
	// Left is about how many messages the DLQ still holds when Move ends
	// (its ApproximateNumberOfMessages, visible and in flight, which SQS
	// may report up to a minute late; -1 if it could not be read): the
	// refused ones, messages past the limit, on a FIFO queue those SQS
	// held back behind a refused one of their group, which Move never
	// received, or messages that arrived meanwhile.
	Left int
}

// String is the summary line: "moved N, failed M", and what is left in
// the DLQ past the messages the run names.
func (r Result) String() string {
	s := fmt.Sprintf("moved %d, failed %d", r.Moved, len(r.Failed))
	again := 0
	for _, f := range r.Failed {
		if f.Code == codeFailedAgain {
			again++
		}
	}
	if again > 0 {
		s += fmt.Sprintf(" (%d of the failed were moved and came back failing again: counted in both)", again)
	}
	if len(r.NotDeleted) > 0 {
		s += fmt.Sprintf(", %d sent but still in the DLQ (will be sent again)", len(r.NotDeleted))
	}
	if more := r.Left - len(r.Failed) - len(r.NotDeleted); more > 0 {
		s += fmt.Sprintf("; the DLQ still reports about %d more (SQS's approximate count, up to a minute behind; redrive -dry-run lists them): past the limit, behind a refused message of their FIFO group, or arrived meanwhile", more)
	}
	return s
}

// QueueURL returns the URL of the queue named nameOrURL; a URL is returned as is.
func (r *Redriver) QueueURL(ctx context.Context, nameOrURL string) (string, error) {
	if strings.HasPrefix(nameOrURL, "http://") || strings.HasPrefix(nameOrURL, "https://") {
		return nameOrURL, nil
	}
	if nameOrURL == "" {
		return "", errors.New("queue name is empty")
	}
	out, err := r.Client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(nameOrURL)})
	if err != nil {
		var missing *types.QueueDoesNotExist
		if errors.As(err, &missing) {
			return "", fmt.Errorf("queue %q %w", nameOrURL, ErrNoQueue)
		}
		return "", fmt.Errorf("looking up queue %q: %w", nameOrURL, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// SourceQueue returns the URL of the one queue whose redrive policy names
// dlqURL. It returns ErrNoSourceQueue if there is none (a *NotADLQError
// naming its DLQ when dlqURL is itself a source queue) and an
// *AmbiguousSourceError naming them if there are several.
func (r *Redriver) SourceQueue(ctx context.Context, dlqURL string) (string, error) {
	var sources []string
	p := sqs.NewListDeadLetterSourceQueuesPaginator(r.Client, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(dlqURL)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return "", fmt.Errorf("listing the source queues of %s: %w", dlqURL, err)
		}
		sources = append(sources, page.QueueUrls...)
	}
	switch len(sources) {
	case 0:
		qi, err := r.queueInfo(ctx, dlqURL)
		if err != nil {
			return "", err
		}
		if qi.dlq != "" {
			return "", &NotADLQError{Queue: dlqURL, Names: qi.dlq}
		}
		return "", fmt.Errorf("%s: %w; give the source with -to", dlqURL, ErrNoSourceQueue)
	case 1:
		return sources[0], nil
	default:
		return "", &AmbiguousSourceError{DLQ: dlqURL, Candidates: sources}
	}
}

// ApproximateCount returns the queue's ApproximateNumberOfMessages (visible messages).
func (r *Redriver) ApproximateCount(ctx context.Context, queueURL string) (int, error) {
	return r.count(ctx, queueURL, types.QueueAttributeNameApproximateNumberOfMessages)
}

// count returns the sum of the queue's approximate counts names.
func (r *Redriver) count(ctx context.Context, queueURL string, names ...types.QueueAttributeName) (int, error) {
	out, err := r.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL), AttributeNames: names})
	if err != nil {
		return 0, fmt.Errorf("reading %v of %s: %w", names, queueURL, err)
	}
	total := 0
	for _, name := range names {
		n, err := strconv.Atoi(out.Attributes[string(name)])
		if err != nil {
			return 0, fmt.Errorf("%s of %s: %w", name, queueURL, err)
		}
		total += n
	}
	return total, nil
}

func (r *Redriver) receive(ctx context.Context, queueURL string, n int) ([]types.Message, error) {
	out, err := r.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(queueURL),
		MaxNumberOfMessages:         int32(n),
		WaitTimeSeconds:             int32(r.WaitTime / time.Second),
		VisibilityTimeout:           int32(r.VisibilityTimeout / time.Second),
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		return nil, fmt.Errorf("receiving from %s: %w", queueURL, err)
	}
	return out.Messages, nil
}

// release makes the messages behind handles visible again at once. It runs
// even after ctx is cancelled: leaving them hidden would only delay them.
func (r *Redriver) release(ctx context.Context, queueURL string, handles []string) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	for len(handles) > 0 {
		n := min(10, len(handles))
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, n)
		for i, h := range handles[:n] {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String("m" + strconv.Itoa(i)), ReceiptHandle: aws.String(h)}
		}
		handles = handles[n:]
		out, err := r.Client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range out.Failed {
			errs = append(errs, fmt.Errorf("entry %s: %s: %s", aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("making messages of %s visible again (they reappear after %s anyway): %w", queueURL, r.VisibilityTimeout, errors.Join(errs...))
	}
	return nil
}
