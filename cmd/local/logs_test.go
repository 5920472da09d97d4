package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	cwltypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/localdeploy"
)

// logsTemplate is a stack of one function logging to a log group of its
// own, as the CDK app's functions do.
const logsTemplate = `{"Resources":{
 "IngestFunctionLogGroupFA1FDD02":{"Type":"AWS::Logs::LogGroup","Properties":{"RetentionInDays":7}},
 "IngestFnFunction49C815F8":{"Type":"AWS::Lambda::Function","Metadata":{"tributary:function":"ingest"},
  "Properties":{"Runtime":"provided.al2023","Handler":"bootstrap","LoggingConfig":{"LogGroup":{"Ref":"IngestFunctionLogGroupFA1FDD02"}}}}}}`

// make logs, as a second make local-up's banner prints it (STACK=), shows
// that stack's functions' logs only: it listed every log group on the
// stand-in, the first make local-up's mixed with its own, under the same
// function names. With no STACK it shows the first one's, not the
// second's, although the second's names start with "Tributary-" too.
func TestLogsShowOnlyTheirOwnStack(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	tmpl := filepath.Join(t.TempDir(), "Tributary.template.json")
	if err := os.WriteFile(tmpl, []byte(logsTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	stacks := []string{"Tributary", "Tributary-1765000000"}
	client := cloudwatchlogs.NewFromConfig(cfg)
	for i, stack := range stacks {
		d, err := localdeploy.Plan(tmpl, stack)
		if err != nil {
			t.Fatal(err)
		}
		fns, err := d.Functions()
		if err != nil || len(fns) != 1 {
			t.Fatalf("the test template's functions under %s: %v, %v", stack, fns, err)
		}
		group := fns[0].LogGroup
		if _, err := client.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String(group)}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String(group), LogStreamName: aws.String("env-1")}); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UnixMilli()
		emf := func(n int) *string {
			return aws.String(fmt.Sprintf(`{"_aws":{"Timestamp":%d,"CloudWatchMetrics":[{"Namespace":"Tributary","Dimensions":[["Function"]],"Metrics":[{"Name":"RecordsIn"}]}]},"Function":"ingest","RecordsIn":%d}`, now, n))
		}
		if _, err := client.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String(group), LogStreamName: aws.String("env-1"),
			LogEvents: []cwltypes.InputLogEvent{
				{Timestamp: aws.Int64(now), Message: aws.String("a line of " + stack)},
				{Timestamp: aws.Int64(now), Message: emf(i + 1)},
				{Timestamp: aws.Int64(now), Message: emf(2 * (i + 1))},
			}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, stack := range stacks {
		other := stacks[1-i]
		var out strings.Builder
		o := &options{cmd: "logs", addr: strings.TrimPrefix(srv.Endpoint(), "http://"), template: tmpl, stack: stack, since: time.Hour}
		if err := logsTo(ctx, o, &out, io.Discard); err != nil {
			t.Fatalf("logs -stack %s: %v", stack, err)
		}
		if !strings.Contains(out.String(), "a line of "+stack+"\n") || strings.Contains(out.String(), "a line of "+other+"\n") {
			t.Errorf("logs -stack %s: want its own line and not %s's; it printed:\n%s", stack, other, out.String())
		}
		// The metrics are its own functions' too: they summed every
		// stack's on the stand-in (and took minutes to read there).
		want := fmt.Sprintf("  RecordsIn{Function=ingest} sum=%d count=2 min=%d max=%d\n", 3*(i+1), i+1, 2*(i+1))
		if !strings.Contains(out.String(), want) || strings.Count(out.String(), "RecordsIn{") != 1 {
			t.Errorf("logs -stack %s: want its own metrics, %q; it printed:\n%s", stack, want, out.String())
		}
	}
	// A stack with no logs on the stand-in while others have some is a
	// mistyped STACK=: it said "no log groups of stack nope yet" and exited
	// 0, as if that stack ran and had not been sent events.
	var out strings.Builder
	o := &options{cmd: "logs", addr: strings.TrimPrefix(srv.Endpoint(), "http://"), template: tmpl, stack: "nope", since: time.Hour}
	err := logsTo(ctx, o, &out, io.Discard)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "STACK=nope") || !strings.Contains(err.Error(), strings.Join(stacks, ", ")) {
		t.Errorf("logs -stack nope: %v (printed %q); want a usage error naming STACK=nope and the stacks with logs, %s", err, out.String(), strings.Join(stacks, ", "))
	}
}
