// Command aggregate is the declared, event-time windowed aggregation: a
// Kinesis consumer (per-batch path) or, when its mapping has a tumbling
// window, a consumer that carries partial aggregates in Lambda's window
// state (per-interval path). Config: PIPELINE_CONFIG, VIEWS_TABLE_NAME,
// OUTPUT_STREAM_NAME. The logic is in package aggregate.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/tributary-dev/tributary/pkg/aggregate"
)

func main() {
	// AWS_ENDPOINT_URL, when set (the local runner), points every client at the stand-in.
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "aggregate: loading the AWS configuration: %v\n", err)
		os.Exit(1)
	}
	p, err := aggregate.FromEnv(cfg, os.LookupEnv, "aggregate", os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "aggregate: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(p.Handle)
}
