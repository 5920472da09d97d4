package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/syncbuf"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
)

// closingPipelines close a window a second after the records pass its
// end, so a test sees final results without an hour of event time.
var closingPipelines = map[string]string{
	"tumbling": `{"name":"clicks","key":"key","value":"data.n","windows":[{"kind":"tumbling","size":"1m"}],
  "aggregates":["count","sum"],"outOfOrderness":"1s"}`,
	"session": `{"name":"clicks","key":"key","value":"data.n","windows":[{"kind":"session","gap":"30s"}],
  "aggregates":["count","sum"],"outOfOrderness":"1s","partitionKeyIsGroupingKey":true}`,
}

// TestRebuildLeavesEachFinalResultOnTheStreamOnce: the live function
// publishes final results to its output stream while a rebuild (with no
// output stream of its own, as the make local-up banner runs it) replays
// the same records into a new version, swaps and follows for the handover.
// Every window final in the version the readers end on is on the stream,
// and each result id is on it once: a window the old version published is
// not published again from the new one, and one the rebuild made final
// during the handover is published by the live function, not lost.
func TestRebuildLeavesEachFinalResultOnTheStreamOnce(t *testing.T) {
	for kind, file := range closingPipelines {
		t.Run(kind, func(t *testing.T) { testRebuildPublishesOnce(t, file) })
	}
}

// testRebuildPublishesOnce checks every final window is on the stream,
// each id once. Run four at once (a loaded machine), the session case sent
// sessions twice: the live function, on the new version, sent results the
// rebuild had made final and held, its save lost to the rebuild's (which
// kept them pending), and its retry, finding nothing left to send, did not
// save again: the ticker sent them a second time.
func testRebuildPublishesOnce(t *testing.T, pipelineFile string) {
	f := newFixtureOf(t, 1, pipelineFile)
	ctx := context.Background()
	results := fmt.Sprintf("results-%d", seq.Add(1))
	if _, err := f.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(results), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	live := f.liveProcessor(aggregate.EnvOutputStream, results)

	time.Sleep(50 * time.Millisecond) // arrival times on the stand-in are wall-clock
	from := time.Now()
	time.Sleep(50 * time.Millisecond)
	before := f.send("before", 40, 0) // minutes 0–2: tumbling windows 0 and 1 close
	f.live(ctx, live)

	target := f.table + "-v2"
	swapped := make(chan struct{})
	f.onSwap(t, target, func() { close(swapped) })
	progress := &syncbuf.Buffer{}
	done := make(chan error, 1)
	go func() {
		_, err := replay.New(f.kin, f.db, replay.NewRegistry(f.ps, f.param)).Run(ctx,
			replay.Options{Stream: f.stream, From: from, Handover: 3 * time.Second, Poll: 50 * time.Millisecond,
				ProgressEvery: time.Second, Progress: progress, BatchSize: 25},
			func(table string, aside *setaside.Sink) (replay.BatchHandler, error) {
				return aggregate.New(f.cfg, state.NewViews(f.db, table, f.cfg.Aggregates), nil, "",
					aggregate.WithHandover(f.db, aggregate.FixedViewsTable(table).Current)), nil
			})
		done <- err
	}()
	select {
	case <-swapped:
	case err := <-done:
		t.Fatalf("replay ended without swapping: %v\n%s", err, progress)
	case <-time.After(2 * time.Minute):
		t.Fatalf("no swap after 2m:\n%s", progress)
	}
	// During the handover: records that close the windows the first ones
	// left open and make more final, which the rebuild reads (it polls
	// every 50 ms) before the live function, now on the new version, gets
	// them.
	time.Sleep(1100 * time.Millisecond)
	during := f.send("during", 30, 5)
	time.Sleep(500 * time.Millisecond)
	f.live(ctx, live)
	if err := <-done; err != nil {
		t.Fatalf("replay: %v\n%s", err, progress)
	}
	f.live(ctx, live)
	// The ticker publishes what is left listed.
	if _, err := live.Tick(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}

	// What the readers see: the new version's final windows.
	views := state.NewViews(f.db, target, f.cfg.Aggregates)
	final := map[string]string{}
	for i := range 5 {
		vs, err := views.Query(ctx, f.cfg.Name, fmt.Sprintf("k%d", i), f.cfg.Windows[0].ID(), f.base.Add(-time.Hour), f.base.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if v.Final {
				final[fmt.Sprintf("%s %s r%d", v.Key, v.Window.Start.UTC().Format(time.TimeOnly), v.Revision)] = fmt.Sprintf("count %d sum %g", v.Result.Count, v.Result.Sum)
			}
		}
	}
	if len(final) == 0 {
		t.Fatalf("no final window in %s: the test closes none (%d + %d records)", target, len(before), len(during))
	}
	onStream := map[string]string{}
	var twice []string
	for _, o := range readOutputs(t, f, results) {
		k := fmt.Sprintf("%s %s r%d", o.Key, o.Start.UTC().Format(time.TimeOnly), o.Revision)
		if _, ok := onStream[k]; ok {
			twice = append(twice, o.ID)
		}
		onStream[k] = fmt.Sprintf("count %d sum %g", o.Result.Count, o.Result.Sum)
	}
	sort.Strings(twice)
	if len(twice) > 0 {
		t.Errorf("%d results are on the stream more than once: %s", len(twice), strings.Join(twice, ", "))
	}
	if d := diff(onStream, final); d != "" {
		t.Errorf("the results on the stream differ from the final windows of %s (got: stream, want: table):\n%s", target, d)
	}
}

// readOutputs reads every record on stream's one shard.
func readOutputs(t *testing.T, f *fixture, name string) []aggregate.Output {
	t.Helper()
	ctx := context.Background()
	it, err := f.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name),
		ShardId: aws.String("shardId-000000000000"), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	var outs []aggregate.Output
	iter := it.ShardIterator
	for range 100 {
		out, err := f.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Records {
			var o aggregate.Output
			if err := json.Unmarshal(r.Data, &o); err != nil {
				t.Fatalf("output record %s: %v", r.Data, err)
			}
			outs = append(outs, o)
		}
		if len(out.Records) == 0 || aws.ToInt64(out.MillisBehindLatest) == 0 {
			break
		}
		iter = out.NextShardIterator
	}
	return outs
}
