package cloudwatchlocal

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSNamespace and the queue metrics AWS publishes there for every queue,
// by QueueName, that QueueMetrics emulates.
const (
	SQSNamespace             = "AWS/SQS"
	MetricMessagesVisible    = "ApproximateNumberOfMessagesVisible"
	MetricMessagesNotVisible = "ApproximateNumberOfMessagesNotVisible"
	MetricMessagesDelayed    = "ApproximateNumberOfMessagesDelayed"
	// DimensionQueueName is the one dimension of AWS/SQS metrics.
	DimensionQueueName = "QueueName"
)

// queueAttributes is what QueueMetrics needs of SQS.
type queueAttributes interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ queueAttributes = (*sqs.Client)(nil)

// latestReader is what LatestQueueMetric needs of CloudWatch.
type latestReader interface {
	GetMetricData(ctx context.Context, in *cloudwatch.GetMetricDataInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error)
}

var _ latestReader = (*cloudwatch.Client)(nil)

// QueueMetrics does locally what SQS does on AWS: it reads each queue's
// approximate counts and publishes them as AWS/SQS metrics with the
// QueueName dimension (AWS every minute, here every interval), so that an
// alarm on a dead-letter queue's ApproximateNumberOfMessagesVisible has
// data to read. Build it with StartQueueMetrics; Stop ends it.
type QueueMetrics struct {
	sqs    queueAttributes
	cw     metricPutter
	queues map[string]string // queue name → URL
	onErr  func(error)

	mu     sync.Mutex // serializes publishes
	cancel context.CancelFunc
	done   chan struct{}
}

// StartQueueMetrics publishes the metrics of queues (name → URL) now and then
// every interval until Stop; onErr, if set, hears of failed publishes.
func StartQueueMetrics(ctx context.Context, cfg aws.Config, queues map[string]string, every time.Duration, onErr func(error)) *QueueMetrics {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	q := &QueueMetrics{sqs: sqs.NewFromConfig(cfg), cw: CloudWatchClient(cfg), queues: queues, onErr: onErr, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(q.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if err := q.Publish(ctx); err != nil && ctx.Err() == nil && q.onErr != nil {
				q.onErr(err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return q
}

// Publish reads every queue's counts and puts them to CloudWatch now, as one
// data point per queue and metric stamped with the time read.
func (q *QueueMetrics) Publish(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	names := make([]string, 0, len(q.queues))
	for n := range q.queues {
		names = append(names, n)
	}
	sort.Strings(names)
	var data []cwtypes.MetricDatum
	var errs []error
	for _, name := range names {
		out, err := q.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.queues[name]), AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		}})
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the counts of queue %s: %w", name, err))
			continue
		}
		now := time.Now()
		for attr, metric := range map[sqstypes.QueueAttributeName]string{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages:           MetricMessagesVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible: MetricMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed:    MetricMessagesDelayed,
		} {
			v, err := strconv.ParseFloat(out.Attributes[string(attr)], 64)
			if err != nil {
				continue
			}
			data = append(data, cwtypes.MetricDatum{
				MetricName: aws.String(metric), Value: aws.Float64(v), Unit: cwtypes.StandardUnitCount, Timestamp: aws.Time(now),
				Dimensions: []cwtypes.Dimension{{Name: aws.String(DimensionQueueName), Value: aws.String(name)}},
			})
		}
	}
	for i := 0; i < len(data); i += maxDatumsPerPut {
		if _, err := q.cw.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String(SQSNamespace), MetricData: data[i:min(i+maxDatumsPerPut, len(data))]}); err != nil {
			errs = append(errs, fmt.Errorf("putting %s queue metrics: %w", SQSNamespace, err))
		}
	}
	return errors.Join(errs...)
}

// Stop ends the periodic publishing.
func (q *QueueMetrics) Stop() {
	q.cancel()
	<-q.done
}

// LatestQueueMetric reads back from CloudWatch the most recent value of the
// AWS/SQS metric for queue published since the given time; ok is false when
// there is none.
func LatestQueueMetric(ctx context.Context, cfg aws.Config, metric, queue string, since time.Time) (value float64, at time.Time, ok bool, err error) {
	return latestQueueMetric(ctx, CloudWatchClient(cfg), metric, queue, since, time.Now())
}

func latestQueueMetric(ctx context.Context, c latestReader, metric, queue string, since, now time.Time) (float64, time.Time, bool, error) {
	out, err := c.GetMetricData(ctx, &cloudwatch.GetMetricDataInput{
		StartTime: aws.Time(since.Truncate(time.Second)),
		EndTime:   aws.Time(now.Add(2 * time.Second).Truncate(time.Second)),
		ScanBy:    cwtypes.ScanByTimestampDescending,
		MetricDataQueries: []cwtypes.MetricDataQuery{{
			Id: aws.String("depth"),
			MetricStat: &cwtypes.MetricStat{
				Metric: &cwtypes.Metric{Namespace: aws.String(SQSNamespace), MetricName: aws.String(metric),
					Dimensions: []cwtypes.Dimension{{Name: aws.String(DimensionQueueName), Value: aws.String(queue)}}},
				Period: aws.Int32(1),
				Stat:   aws.String("Maximum"),
			},
			ReturnData: aws.Bool(true),
		}},
	})
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("cloudwatchlocal: reading %s %s of %s: %w", SQSNamespace, metric, queue, err)
	}
	var best time.Time
	var value float64
	found := false
	for _, r := range out.MetricDataResults {
		for i, ts := range r.Timestamps {
			if i < len(r.Values) && (!found || ts.After(best)) {
				best, value, found = ts, r.Values[i], true
			}
		}
	}
	return value, best, found, nil
}
