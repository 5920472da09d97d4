// Command subscriber is a test function for package local's fan-out test:
// it accepts any Kinesis batch and reports no failures.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func handle(_ context.Context, _ events.KinesisEvent) (events.KinesisEventResponse, error) {
	return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{}}, nil
}

func main() { lambda.Start(handle) }
