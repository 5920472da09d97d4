package projection_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/tributary-dev/tributary/emulator/eventsource"
	"github.com/tributary-dev/tributary/internal/sdkparam"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/projection"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/seats"
)

// pipeline is the deployed topology in this process: the views table named
// by an SSM parameter (followed by the commands and the live projector), the
// publisher on the events table's stream, the live projector on the
// published Kinesis stream — both played by package eventsource with
// Lambda's mapping semantics.
type pipeline struct {
	*fixture
	param, stream string
	live          *projection.Projector
	pollers       []*eventsource.Poller
	cancel        context.CancelFunc
	wg            sync.WaitGroup
}

func newPipeline(t *testing.T) *pipeline {
	t.Helper()
	ctx := context.Background()
	n := seq.Add(1)
	param := fmt.Sprintf("/test/views%d", n)
	sm := ssm.NewFromConfig(awsCfg)
	current := aggregate.NewViewsTable(sdkparam.New(sm), param, 100*time.Millisecond, nil, nil)
	p := &pipeline{param: param, stream: fmt.Sprintf("show-events%d", n)}
	p.fixture = newFixture(t, current)
	if _, err := sm.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(param), Value: aws.String(p.views), Type: ssmtypes.ParameterTypeString}); err != nil {
		t.Fatal(err)
	}
	if err := current.Resolve(ctx); err != nil {
		t.Fatal(err)
	}
	kin := kinesis.NewFromConfig(awsCfg)
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(p.stream), ShardCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	sum, err := kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(p.stream)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(p.store.Tables().Events)})
	if err != nil {
		t.Fatal(err)
	}
	pub := es.NewPublisher(kin, p.stream)
	p.live = projection.New(p.db, p.store, current, seats.Views(p.x), projection.WithoutStateViews())
	settings := func(fn, arn string) eventsource.Settings {
		return eventsource.Settings{FunctionName: fn, SourceARN: arn, BatchSize: 100, StartingPosition: eventsource.TrimHorizon,
			ReportBatchItemFailures: true, BisectBatchOnFunctionError: true, MaximumRetryAttempts: 3, Enabled: true}
	}
	pp, err := eventsource.NewDynamoDBStreams(awsCfg, settings("publish", aws.ToString(d.Table.LatestStreamArn)),
		invoker[events.DynamoDBEvent, events.DynamoDBEventResponse](pub.Handle), nil)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := eventsource.NewKinesis(awsCfg, settings("project", aws.ToString(sum.StreamDescriptionSummary.StreamARN)),
		invoker[events.KinesisEvent, events.KinesisEventResponse](p.live.Handle), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.pollers = []*eventsource.Poller{pp, pk}
	runCtx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	for _, pl := range p.pollers {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); _ = pl.Run(runCtx) }()
	}
	t.Cleanup(func() { p.cancel(); p.wg.Wait() })
	return p
}

// drain waits until both mappings have processed everything.
func (p *pipeline) drain(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range 2 { // the publisher's records reach the projector's stream
		for _, pl := range p.pollers {
			if err := pl.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (p *pipeline) replayer() *replay.Replayer {
	return replay.New(kinesis.NewFromConfig(awsCfg), p.db, replay.NewRegistry(ssm.NewFromConfig(awsCfg), p.param))
}

// hookWriter runs hook once, the first time a line containing trigger is
// written (before the write returns): the test's way to act between a
// rebuild's scan of the log and its following of the stream.
type hookWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	trigger string
	hook    func()
}

func (w *hookWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	hook := w.hook
	if hook != nil && strings.Contains(string(b), w.trigger) {
		w.hook = nil
	} else {
		hook = nil
	}
	n, err := w.buf.Write(b)
	w.mu.Unlock()
	if hook != nil {
		hook()
	}
	return n, err
}

// TestRebuildFromTheLogEqualsTheLiveViews: with commands running during
// the rebuild's scan of the log, the rebuilt version — filled from the log
// from its start, then caught up from the published stream — holds the same
// items as the live views (seat maps written by the commands, availability
// and bookings by the live projector), and both equal the log applied once.
// The readers are swapped to it; a second rebuild gives the same items
// again (replay determinism); rollback points the readers back.
func TestRebuildFromTheLogEqualsTheLiveViews(t *testing.T) {
	ctx := context.Background()
	p := newPipeline(t)
	rng := rand.New(rand.NewPCG(11, 3))
	shows := []string{"show-1", "show-2", "show-3"}
	p.workload(t, rng, shows, 40, "before")
	p.drain(t)

	// Commands run while the rebuild scans the log; they end before it
	// follows the stream (so before the swap), so the live table gets all.
	var during sync.WaitGroup
	during.Add(1)
	go func() {
		defer during.Done()
		p.workload(t, rand.New(rand.NewPCG(12, 3)), []string{"show-4"}, 25, "during")
	}()
	// And commands after the scan, before the rebuild follows the stream:
	// only the stream brings those to the new version.
	// The live projector applies all of them before the swap (the mappings
	// read an idle shard once a second, as Lambda does, so two hops can take
	// longer than the handover): after it, its writes go to the new version.
	progress := &hookWriter{trigger: "filled", hook: func() {
		during.Wait()
		p.workload(t, rand.New(rand.NewPCG(13, 3)), []string{"show-6"}, 10, "afterscan")
		p.drain(t)
	}}
	res, err := projection.Rebuild(ctx, p.replayer(), p.live, p.db, p.store.Tables().Events,
		replay.Options{Stream: p.stream, Handover: time.Second, Poll: 100 * time.Millisecond, Progress: progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.buf.String())
	}
	if !res.Swapped || res.Target != p.views+"-v2" || res.Applied < 10 {
		t.Fatalf("rebuild: %+v\n%s", res, progress.buf.String())
	}
	// The stack's own table was current: delete-version would refuse it,
	// so the closing hint must not suggest it.
	checkClosingHint(t, p, progress.buf.String(), p.views, false)
	p.drain(t)
	d, err := projection.Compare(ctx, p.db, p.views, res.Target)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Equal() || d.ItemsA < 20 {
		t.Fatalf("live and rebuilt: %s\n%s", d, progress.buf.String())
	}
	reference := p.table(t, p.views+"-reference")
	ref := projection.New(p.db, p.store, projection.FixedTable(reference), seats.Views(p.x))
	if _, err := es.ScanLog(ctx, p.db, p.store.Tables().Events, func(run []es.Event) error { return ref.ApplyLog(ctx, reference, run) }); err != nil {
		t.Fatal(err)
	}
	if d, _ := projection.Compare(ctx, p.db, reference, res.Target); !d.Equal() {
		t.Fatalf("rebuilt and the log applied once: %s", d)
	}
	checkViewsMatchTheLog(t, p.fixture, res.Target)

	// Commands after the swap reach the new version: the seat map through
	// the commands (which follow the parameter), the rest through the live
	// projector.
	time.Sleep(300 * time.Millisecond) // past the readers' refresh
	p.workload(t, rng, []string{"show-5"}, 10, "after")
	p.drain(t)
	checkViewsMatchTheLog(t, p.fixture, res.Target)

	progress2 := &hookWriter{}
	again, err := projection.Rebuild(ctx, p.replayer(), p.live, p.db, p.store.Tables().Events,
		replay.Options{Stream: p.stream, Handover: 200 * time.Millisecond, Poll: 100 * time.Millisecond, Progress: progress2})
	if err != nil {
		t.Fatal(err)
	}
	// The previous version was rebuilt: the hint offers its deletion.
	checkClosingHint(t, p, progress2.buf.String(), res.Target, true)
	p.drain(t)
	if d, _ := projection.Compare(ctx, p.db, res.Target, again.Target); !d.Equal() {
		t.Fatalf("two rebuilds differ: %s", d)
	}
	back, err := p.replayer().Rollback(ctx, replay.Options{Stream: p.stream, Handover: 200 * time.Millisecond, Poll: 100 * time.Millisecond}, projection.CatchUp(p.live))
	if err != nil || !back.Swapped || back.Target != res.Target {
		t.Fatalf("rollback: %+v %v", back, err)
	}
}

// checkClosingHint: Rebuild's progress ends with a line about previous (no
// longer current); it suggests replay delete-version exactly when wantDelete,
// and every delete-version it suggests is one replay accepts (checked
// without -yes: nothing is deleted).
func checkClosingHint(t *testing.T, p *pipeline, progress, previous string, wantDelete bool) {
	t.Helper()
	var hint string
	for _, l := range strings.Split(progress, "\n") {
		if strings.HasPrefix(l, previous+" is unchanged and no longer current") {
			hint = l
		}
	}
	if hint == "" {
		t.Fatalf("no closing line about %s in:\n%s", previous, progress)
	}
	if !strings.Contains(hint, "eventstore rollback") {
		t.Errorf("closing hint %q does not say how to point the readers back", hint)
	}
	_, cmd, suggests := strings.Cut(hint, "replay delete-version ")
	if suggests != wantDelete {
		t.Fatalf("closing hint %q: suggests delete-version %v, want %v", hint, suggests, wantDelete)
	}
	if !suggests {
		return
	}
	fields := strings.Fields(strings.TrimSuffix(strings.Split(cmd, "`")[0], "`"))
	var param, table string
	for i := 0; i+1 < len(fields); i++ {
		switch fields[i] {
		case "-parameter":
			param = fields[i+1]
		case "-table":
			table = fields[i+1]
		}
	}
	if param != p.param || table != previous {
		t.Fatalf("closing hint %q: delete-version -parameter %q -table %q, want %q and %q", hint, param, table, p.param, previous)
	}
	if _, err := replay.DeleteVersion(context.Background(), p.db, replay.NewRegistry(ssm.NewFromConfig(awsCfg), param), table, false); err != nil {
		t.Errorf("closing hint %q suggests a command replay refuses: %v", hint, err)
	}
}
