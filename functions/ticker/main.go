// Command ticker runs on a schedule (an EventBridge rule, rate(1 minute)) for
// the windowed pipeline in PIPELINE_CONFIG: it advances the watermark of
// shards that saw no records for the pipeline's idleTimeout, finalizes the
// windows every watermark has passed in the DynamoDB table named by
// VIEWS_TABLE_NAME (or by the SSM parameter VIEWS_PARAMETER_NAME, as for
// aggregate), and emits their results to the Kinesis stream named by
// OUTPUT_STREAM_NAME (optional). With EVENTS_STREAM_NAME (the stream the
// aggregate reads) it first checks that an idle-looking shard holds no
// record the aggregate has not processed (package backlog). It reads the
// same configuration as the aggregate function; the logic is in package
// aggregate.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

func main() {
	m := lambdamain.Main{Function: "ticker"}
	cfg := m.AWSConfig()
	p, err := aggregate.FromEnv(cfg, os.LookupEnv, "ticker", os.Stdout, os.Stderr)
	if err != nil {
		m.Fail("%v", err)
	}
	t := &ticker{tick: p.Tick, now: time.Now, log: slog.New(slog.NewJSONHandler(os.Stderr, nil))}
	lambda.Start(lambdamain.Typed(stream.EventSchedule, t.Handle))
}

// ticker handles EventBridge's scheduled events.
type ticker struct {
	tick func(ctx context.Context, now time.Time) (aggregate.TickResult, error)
	now  func() time.Time
	log  *slog.Logger
}

// Handle runs one tick at processing time, not at the event's scheduled
// time: a tick delivered late still closes what is due now. An error fails
// the invocation; the stack allows no retry, the next tick does the work.
func (t *ticker) Handle(ctx context.Context, ev events.EventBridgeEvent) (aggregate.TickResult, error) {
	res, err := t.tick(ctx, t.now())
	// The rule's ARN, cut: a hand-pasted test event may carry anything.
	rule := strictjson.Cut(fmt.Sprint(ev.Resources), maxRuleEcho)
	if err != nil {
		return res, fmt.Errorf("tick for %s scheduled at %s: %w", rule, ev.Time.Format(time.RFC3339), err)
	}
	t.log.Info("tick", "rule", rule, "shards", res.Shards, "advanced", res.Advanced, "finalized", res.Finalized)
	return res, nil
}

// maxRuleEcho bounds what the error and the log line repeat of the
// event's resources (a rule's ARN is some 100 bytes).
const maxRuleEcho = 512
