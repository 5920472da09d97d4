package cloudwatchlocal

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// TestQueueMetricsFollowTheQueue: the depth a DLQ alarm reads follows the
// queue — one message, then none once it is taken off.
func TestQueueMetricsFollowTheQueue(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	client := sqs.NewFromConfig(cfg)
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders-dlq")})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(out.QueueUrl)
	start := time.Now().Add(-time.Second)
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("poison")}); err != nil {
		t.Fatal(err)
	}
	q := StartQueueMetrics(ctx, cfg, map[string]string{"orders-dlq": url}, time.Hour, func(err error) { t.Error(err) })
	defer q.Stop()
	depth := func() float64 {
		t.Helper()
		if err := q.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		v, _, ok, err := LatestQueueMetric(ctx, cfg, MetricMessagesVisible, "orders-dlq", start)
		if err != nil || !ok {
			t.Fatalf("no %s for orders-dlq: %v", MetricMessagesVisible, err)
		}
		return v
	}
	if d := depth(); d != 1 {
		t.Errorf("depth %v with one message in the queue, want 1", d)
	}
	if _, err := client.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // a later second than the first point
	if d := depth(); d != 0 {
		t.Errorf("depth %v after the queue was emptied, want 0", d)
	}
	if _, _, ok, err := LatestQueueMetric(ctx, cfg, MetricMessagesVisible, "other-queue", start); err != nil || ok {
		t.Errorf("a queue never published has a value (ok %v, err %v)", ok, err)
	}
}
