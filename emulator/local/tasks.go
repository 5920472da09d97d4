package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/pkg/redrive"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/worker"
)

// Work is the deployed work queue, its dead-letter queue and its worker's
// results table.
type Work struct {
	QueueURL, Results string
	// DLQURL and DLQName are the Tasks queue's dead-letter queue.
	DLQURL, DLQName string
}

// FindWork finds the standard Tasks queue (not its FIFO twin), its DLQ and
// the worker's results table in the deployment.
func (s *Stack) FindWork() (*Work, error) {
	w := &Work{}
	for _, q := range s.deployment.Queues() {
		id := q.LogicalID
		if !strings.HasPrefix(id, "Tasks") || strings.HasPrefix(id, "TasksFifo") {
			continue
		}
		if strings.HasPrefix(id, "TasksDlq") {
			w.DLQURL, w.DLQName = q.URL, q.Name
		} else {
			w.QueueURL = q.URL
		}
	}
	specs, err := s.deployment.Functions()
	if err != nil {
		return nil, err
	}
	for _, f := range specs {
		if f.Binary == "worker" {
			w.Results = f.Env["RESULTS_TABLE_NAME"]
		}
	}
	if w.QueueURL == "" || w.DLQURL == "" || w.Results == "" {
		return nil, fmt.Errorf("the template has no Tasks queue, TasksDlq queue or worker RESULTS_TABLE_NAME")
	}
	return w, nil
}

// SendTasks sends one message per task id first..last (a producer
// retrying sends the same ids again) and returns the ids.
func (w *Work) SendTasks(ctx context.Context, cfg aws.Config, first, last int) ([]string, error) {
	client := sqs.NewFromConfig(cfg)
	var ids []string
	var entries []sqstypes.SendMessageBatchRequestEntry
	now := time.Now().UTC()
	for task := first; task <= last; task++ {
		id := TaskID(task)
		ids = append(ids, id)
		body, err := taskBody(worker.Task{TaskID: id, Input: fmt.Sprintf("invoice-%03d", task), Rounds: 2000}, task, now)
		if err != nil {
			return nil, err
		}
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(task)), MessageBody: aws.String(string(body))})
		if len(entries) == 10 || task == last {
			out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(w.QueueURL), Entries: entries})
			if err != nil {
				return nil, fmt.Errorf("sending tasks: %w", err)
			}
			if len(out.Failed) > 0 {
				return nil, fmt.Errorf("sending tasks: %d refused, first: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
			}
			entries = entries[:0]
		}
	}
	return ids, nil
}

// TaskID is the id SendTasks gives task number n.
func TaskID(n int) string { return fmt.Sprintf("task-%03d", n) }

func taskBody(t worker.Task, n int, now time.Time) (string, error) {
	data, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	env := stream.Envelope{ID: fmt.Sprintf("msg-%s-%d", t.TaskID, now.UnixNano()), Type: worker.TaskType, Key: fmt.Sprintf("customer-%d", n%5),
		OccurredAt: now, SentAt: now, Data: data}
	body, err := json.Marshal(env)
	return string(body), err
}

// SendTask sends task number n; after, if not 0, is the number of the task
// whose result it needs first (data.after).
func (w *Work) SendTask(ctx context.Context, cfg aws.Config, n, after int) (string, error) {
	t := worker.Task{TaskID: TaskID(n), Input: fmt.Sprintf("invoice-%03d", n), Rounds: 2000}
	if after != 0 {
		t.After = TaskID(after)
	}
	body, err := taskBody(t, n, time.Now().UTC())
	if err != nil {
		return "", err
	}
	if _, err := sqs.NewFromConfig(cfg).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(w.QueueURL), MessageBody: aws.String(body)}); err != nil {
		return "", fmt.Errorf("sending %s: %w", t.TaskID, err)
	}
	return t.TaskID, nil
}

// DeliverOnLastReceive hands the worker task number n, which needs the
// result of task after (data.after), as Lambda would on the Tasks queue's
// last receive: ApproximateReceiveCount equal to the queue's
// maxReceiveCount, read from its RedrivePolicy. A task whose dependency is
// missing waits through the queue's receives, a visibility timeout (6
// minutes) apart, and is dead-lettered with its reason only on the last:
// this shows that last receive without the half hour before it. The message
// never was in the queue, so nothing is left there. It returns the task id,
// or an error if the worker reported the message failed.
func (s *Stack) DeliverOnLastReceive(ctx context.Context, w *Work, n, after int) (string, error) {
	t := worker.Task{TaskID: TaskID(n), Input: fmt.Sprintf("invoice-%03d", n), Rounds: 2000, After: TaskID(after)}
	now := time.Now().UTC()
	body, err := taskBody(t, n, now)
	if err != nil {
		return "", err
	}
	client := sqs.NewFromConfig(s.cfg)
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(w.QueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", w.QueueURL, err)
	}
	arn := out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	// The last receive as the worker itself reads it (its RedrivePolicy).
	max, err := worker.NewDeadLetters(client, "").MaxReceiveCount(ctx, arn)
	if err != nil {
		return "", err
	}
	last := strconv.Itoa(max)
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	ev := events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: fmt.Sprintf("last-receive-%s-%d", t.TaskID, now.UnixNano()), Body: body,
		Attributes:        map[string]string{"ApproximateReceiveCount": last, "SentTimestamp": ms, "ApproximateFirstReceiveTimestamp": ms},
		MessageAttributes: map[string]events.SQSMessageAttribute{},
		EventSource:       "aws:sqs", EventSourceARN: arn, AWSRegion: s.cfg.Region,
	}}}
	payload, err := json.Marshal(ev)
	if err != nil {
		return "", err
	}
	fns := s.FunctionsOf("worker")
	if len(fns) != 1 {
		return "", fmt.Errorf("the template has %d worker functions, want 1", len(fns))
	}
	res, err := s.Invoke(ctx, fns[0], payload)
	if err != nil {
		return "", fmt.Errorf("invoking %s: %w", fns[0], err)
	}
	var resp events.SQSEventResponse
	if res.FunctionError != "" || json.Unmarshal(res.Payload, &resp) != nil || len(resp.BatchItemFailures) != 0 {
		return "", fmt.Errorf("%s on its last receive (%s): the worker answered %s %s, want no failures", t.TaskID, last, res.FunctionError, res.Payload)
	}
	return t.TaskID, nil
}

// Environments returns, for the given task ids, how many each worker
// execution environment ran (by its log stream name, which the worker
// records with each result).
func (w *Work) Environments(ctx context.Context, cfg aws.Config, ids []string) (map[string]int, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	rows, err := w.results(ctx, cfg)
	if err != nil {
		return nil, err
	}
	by := map[string]int{}
	for _, r := range rows {
		if want[r.TaskID] {
			by[r.Environment]++
		}
	}
	return by, nil
}

type resultRow struct {
	TaskID      string `dynamodbav:"taskId"`
	Executions  int    `dynamodbav:"executions"`
	Environment string `dynamodbav:"environment"`
}

func (w *Work) results(ctx context.Context, cfg aws.Config) ([]resultRow, error) {
	var rows []resultRow
	p := dynamodb.NewScanPaginator(dynamodb.NewFromConfig(cfg), &dynamodb.ScanInput{TableName: aws.String(w.Results), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("scanning %s: %w", w.Results, err)
		}
		var part []resultRow
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &part); err != nil {
			return nil, fmt.Errorf("reading %s: %w", w.Results, err)
		}
		rows = append(rows, part...)
	}
	return rows, nil
}

// WaitDeadLettered waits until the Tasks DLQ holds at least n visible messages.
func (w *Work) WaitDeadLettered(ctx context.Context, cfg aws.Config, n int) error {
	client := sqs.NewFromConfig(cfg)
	for {
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(w.DLQURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil {
			return fmt.Errorf("reading %s: %w", w.DLQURL, err)
		}
		if got, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]); got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d messages in %s: %w", n, w.DLQURL, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// redriver is package redrive's Redriver tuned for a local queue: short
// polls, two empty receives to call the DLQ drained.
func redriver(cfg aws.Config) *redrive.Redriver {
	r := redrive.New(sqs.NewFromConfig(cfg))
	r.WaitTime, r.EmptyReceives = 0, 2
	return r
}

// ShowDeadLetters prints the Tasks DLQ's messages, reasons included, as
// `redrive -dry-run` does, leaving them there.
func (w *Work) ShowDeadLetters(ctx context.Context, cfg aws.Config, out io.Writer) (int, error) {
	return redriver(cfg).DryRun(ctx, w.DLQURL, 0, out)
}

// Redrive moves the Tasks DLQ's messages back to the Tasks queue, as
// `redrive -dlq` does.
func (w *Work) Redrive(ctx context.Context, cfg aws.Config) (redrive.Result, error) {
	return redriver(cfg).Move(ctx, w.DLQURL, w.QueueURL, 0)
}

// WaitDrained waits until the queue holds no message, visible or in flight.
func (w *Work) WaitDrained(ctx context.Context, cfg aws.Config) error {
	client := sqs.NewFromConfig(cfg)
	for {
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(w.QueueURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			return fmt.Errorf("reading %s: %w", w.QueueURL, err)
		}
		a := out.Attributes
		if a[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)] == "0" && a[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)] == "0" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to drain: %w", w.QueueURL, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// WaitExecutions polls the results table until every id has run, and
// returns how many times each task's side effect ran.
func (w *Work) WaitExecutions(ctx context.Context, cfg aws.Config, ids []string, progress io.Writer) (map[string]int, error) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	status := newStatusLine(progress)
	defer status.Done()
	for {
		rows, err := w.results(ctx, cfg)
		if err != nil {
			return nil, err
		}
		got := map[string]int{}
		done := 0
		for _, r := range rows {
			got[r.TaskID] = r.Executions
		}
		for _, id := range ids {
			if got[id] > 0 {
				done++
			}
		}
		status.Set("    %d/%d tasks done", done, len(ids))
		if done >= len(ids) {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, fmt.Errorf("waiting for tasks in %s: %w", w.Results, ctx.Err())
		case <-tick.C:
		}
	}
}
