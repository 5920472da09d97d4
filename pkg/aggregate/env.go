package aggregate

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// Environment variables the aggregate and ticker functions read.
const (
	EnvViewsTable   = "VIEWS_TABLE_NAME"
	EnvOutputStream = "OUTPUT_STREAM_NAME" // optional
)

// Retention is how long window items are kept after their window ends (TTL).
const Retention = 30 * 24 * time.Hour

// FromEnv builds the processor a function runs: the pipeline from
// PIPELINE_CONFIG, the views table, the optional output stream. Errors name
// the variable (and, for the config, the field).
func FromEnv(awsCfg aws.Config, lookup func(string) (string, bool), function string, stdout, stderr io.Writer) (*Processor, error) {
	cfg, err := pipeline.FromEnv(lookup)
	if err != nil {
		return nil, err
	}
	if err := CheckSupported(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", pipeline.EnvVar, err)
	}
	table, ok := lookup(EnvViewsTable)
	if !ok || table == "" {
		return nil, fmt.Errorf("environment variable %s is not set (the DynamoDB table window results are kept in)", EnvViewsTable)
	}
	streamName, _ := lookup(EnvOutputStream)
	var out RecordPutter
	if streamName != "" {
		out = kinesis.NewFromConfig(awsCfg)
	}
	views := state.NewViews(dynamodb.NewFromConfig(awsCfg), table, cfg.Aggregates, state.WithRetention(Retention))
	return New(cfg, views, out, streamName,
		WithMetrics(metrics.New(stdout, function)),
		WithLogger(slog.New(slog.NewJSONHandler(stderr, nil)))), nil
}
