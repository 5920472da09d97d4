// Command archive keeps the events stream past its retention: on its own
// event source mapping of the stream it writes every batch into the S3
// bucket ARCHIVE_BUCKET_NAME as gzip'd JSON lines, one object per shard and
// arrival hour, each record with its shard, sequence number, arrival time,
// partition key and data, each object linked to the record before it on
// its shard (a chain head per shard under chain/), so that cmd/replay
// rebuild can read the archive up to a sequence number and the stream after
// it, and refuse a hole. It writes its metrics (records, objects and
// bytes written, chain heads it could not read or had to restart) as EMF
// on stdout, dimension Function=archive. The logic is in package archive.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/archive"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// EnvBucket names the archive bucket.
const EnvBucket = "ARCHIVE_BUCKET_NAME"

func main() {
	m := lambdamain.Main{Function: "archive"}
	bucket := m.RequireBucket(EnvBucket, "the S3 bucket the events stream is archived to")
	cfg := m.AWSConfig()
	a := archive.NewArchiver(archive.NewS3Client(cfg), bucket, archive.WithMetrics(metrics.New(os.Stdout, "archive")))
	// A handler of no answer: its response is null, as lambda.Start's.
	lambda.Start(lambdamain.Typed(stream.EventKinesis, func(ctx context.Context, ev events.KinesisEvent) (any, error) {
		return nil, a.Handle(ctx, ev)
	}))
}
