package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/worker"
)

// Work is the deployed work queue and its worker's results table.
type Work struct {
	QueueURL, Results string
}

// FindWork finds the standard Tasks queue (not its FIFO twin or a DLQ) and
// the worker's results table in the deployment.
func (s *Stack) FindWork() (*Work, error) {
	w := &Work{}
	for _, q := range s.deployment.Queues() {
		id := q.LogicalID
		if strings.HasPrefix(id, "Tasks") && !strings.HasPrefix(id, "TasksFifo") && !strings.Contains(id, "Dlq") {
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
	if w.QueueURL == "" || w.Results == "" {
		return nil, fmt.Errorf("the template has no Tasks queue or worker RESULTS_TABLE_NAME")
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
		id := fmt.Sprintf("task-%03d", task)
		ids = append(ids, id)
		env := stream.Envelope{ID: fmt.Sprintf("msg-%s-%d", id, now.UnixNano()), Type: worker.TaskType, Key: fmt.Sprintf("customer-%d", task%5),
			OccurredAt: now, SentAt: now,
			Data: json.RawMessage(fmt.Sprintf(`{"taskId":%q,"input":"invoice-%03d","rounds":2000}`, id, task))}
		body, err := json.Marshal(env)
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
	client := dynamodb.NewFromConfig(cfg)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	last := -1
	for {
		out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(w.Results), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("scanning %s: %w", w.Results, err)
		}
		var rows []struct {
			TaskID     string `dynamodbav:"taskId"`
			Executions int    `dynamodbav:"executions"`
		}
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &rows); err != nil {
			return nil, err
		}
		got := map[string]int{}
		for _, r := range rows {
			got[r.TaskID] = r.Executions
		}
		if len(got) != last {
			fmt.Fprintf(progress, "\r    %d/%d tasks done", len(got), len(ids))
			last = len(got)
		}
		if len(got) >= len(ids) {
			fmt.Fprintln(progress)
			return got, nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(progress)
			return got, fmt.Errorf("waiting for tasks in %s: %w", w.Results, ctx.Err())
		case <-tick.C:
		}
	}
}
