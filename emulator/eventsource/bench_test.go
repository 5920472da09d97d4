package eventsource_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/eventsource"
	"github.com/tributary-dev/tributary/emulator/rie"
)

// BenchmarkKinesisPollerThroughput measures how many records per second one
// Kinesis shard poller pushes through a trivial function under RIE (one
// execution environment), reading from the stand-in.
func BenchmarkKinesisPollerThroughput(b *testing.B) {
	needStandin(b)
	const records = 2000
	for _, batch := range []int{100, 500} {
		b.Run("batch"+strconv.Itoa(batch), func(b *testing.B) {
			fn, err := rie.Start(context.Background(), rie.Config{Name: "bench", Bootstrap: bootstrap})
			if err != nil {
				b.Fatal(err)
			}
			defer fn.Stop()
			var total time.Duration
			n := 0
			for b.Loop() {
				b.StopTimer()
				stream := fmt.Sprintf("bench-%d-%d-%d", batch, n, time.Now().UnixNano())
				arn := createStreamB(b, stream)
				putMany(b, stream, records)
				p, err := eventsource.NewKinesis(awsCfg, eventsource.Settings{FunctionName: "bench", SourceARN: arn, BatchSize: batch, Enabled: true}, fn, nil)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				b.StartTimer()
				start := time.Now()
				go func() { done <- p.Run(ctx) }()
				for p.Stats().Succeeded < records {
					if time.Since(start) > time.Minute {
						b.Fatalf("only %d of %d records processed in a minute", p.Stats().Succeeded, records)
					}
					time.Sleep(2 * time.Millisecond)
				}
				total += time.Since(start)
				b.StopTimer()
				cancel()
				<-done
				n++
				b.StartTimer()
			}
			b.ReportMetric(float64(records*n)/total.Seconds(), "records/s")
		})
	}
}

func createStreamB(b *testing.B, name string) string {
	k := kinesis.NewFromConfig(awsCfg)
	if _, err := k.CreateStream(context.Background(), &kinesis.CreateStreamInput{StreamName: &name, ShardCount: aws.Int32(1)}); err != nil {
		b.Fatal(err)
	}
	out, err := k.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: &name})
	if err != nil {
		b.Fatal(err)
	}
	return aws.ToString(out.StreamDescriptionSummary.StreamARN)
}

func putMany(b *testing.B, stream string, n int) {
	k := kinesis.NewFromConfig(awsCfg)
	for i := 0; i < n; i += 500 {
		var entries []types.PutRecordsRequestEntry
		for j := i; j < min(i+500, n); j++ {
			entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(strconv.Itoa(j % 50)), Data: []byte(fmt.Sprintf(`{"n":%d}`, j))})
		}
		if _, err := k.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: &stream, Records: entries}); err != nil {
			b.Fatal(err)
		}
	}
}
