// Command aggregate is the declared, event-time windowed aggregation: a
// Kinesis consumer (per-batch path) or, when its mapping has a tumbling
// window, a consumer that carries partial aggregates in Lambda's window
// state (per-interval path). Config: PIPELINE_CONFIG, VIEWS_TABLE_NAME (or
// VIEWS_PARAMETER_NAME, the SSM parameter naming the current views table,
// re-read every VIEWS_REFRESH_SECONDS so a cmd/replay swap reaches warm
// instances), OUTPUT_STREAM_NAME, QUARANTINE_TABLE_NAME (where records that
// can never be applied are set aside). The logic is in package aggregate.
package main

import (
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/aggregate"
)

func main() {
	m := lambdamain.Main{Function: "aggregate"}
	m.RequireTable(aggregate.EnvQuarantineTable, "the DynamoDB table records that can never be applied are set aside in")
	p, err := aggregate.FromEnv(m.AWSConfig(), os.LookupEnv, "aggregate", os.Stdout, os.Stderr)
	if err != nil {
		m.Fail("%v", err)
	}
	lambda.Start(p)
}
