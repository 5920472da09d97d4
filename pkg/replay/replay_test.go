package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/syncbuf"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

var (
	awsCfg aws.Config
	seq    atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(c aws.Config) { awsCfg = c }))
}

const pipelineJSON = `{"name":"clicks","key":"key","value":"data.n","windows":[{"kind":"tumbling","size":"1m"}],
  "aggregates":["count","sum"],"outOfOrderness":"1h"}`

// fixture is an events stream, a views table with TTL, and the parameter
// naming it, on the shared stand-in.
type fixture struct {
	t          *testing.T
	kin        *kinesis.Client
	db         *dynamodb.Client
	ps         *ssm.Client
	stream     string
	table      string
	param      string
	cfg        *pipeline.Config
	sent       []stream.Envelope
	base       time.Time
	pipeline   string // the pipeline file the live function runs (pipelineJSON)
	liveIters  map[string]*string
	liveShards []string
}

func newFixture(t *testing.T, shards int32) *fixture {
	t.Helper()
	return newFixtureOf(t, shards, pipelineJSON)
}

// newFixtureOf is newFixture for another pipeline file (one tumbling window).
func newFixtureOf(t *testing.T, shards int32, pipelineFile string) *fixture {
	t.Helper()
	n := seq.Add(1)
	f := &fixture{t: t, pipeline: pipelineFile, kin: kinesis.NewFromConfig(awsCfg), db: dynamodb.NewFromConfig(awsCfg), ps: ssm.NewFromConfig(awsCfg),
		stream: fmt.Sprintf("events-%d", n), table: fmt.Sprintf("views-%d", n), param: fmt.Sprintf("/tributary/test%d/current-views", n),
		base: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), liveIters: map[string]*string{}}
	cfg, err := pipeline.Parse([]byte(pipelineFile))
	if err != nil {
		t.Fatal(err)
	}
	f.cfg = cfg
	ctx := context.Background()
	if _, err := f.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(f.stream), ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatal(err)
	}
	if err := state.CreateTable(ctx, f.db, f.table); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(f.table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("expiresAt"), Enabled: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{TableName: aws.String(f.table),
		PointInTimeRecoverySpecification: &ddbtypes.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ps.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(f.param), Value: aws.String(f.table), Type: ssmtypes.ParameterTypeString}); err != nil {
		t.Fatal(err)
	}
	ls, err := f.kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(f.stream)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range ls.Shards {
		id := aws.ToString(sh.ShardId)
		it, err := f.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(f.stream), ShardId: sh.ShardId, ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		f.liveIters[id] = it.ShardIterator
		f.liveShards = append(f.liveShards, id)
	}
	return f
}

// send puts n events of keys k0..k4 with event times spread over three
// minutes from minute, values 1..n.
func (f *fixture) send(prefix string, n int, minute int) []stream.Envelope {
	f.t.Helper()
	var entries []kintypes.PutRecordsRequestEntry
	var envs []stream.Envelope
	for i := range n {
		at := f.base.Add(time.Duration(minute)*time.Minute + time.Duration(i*180/n)*time.Second)
		env := stream.Envelope{ID: fmt.Sprintf("%s-%d", prefix, i), Type: "click", Key: fmt.Sprintf("k%d", i%5),
			OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i+1))}
		b, _ := json.Marshal(&env)
		entries = append(entries, kintypes.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(env.Key)})
		envs = append(envs, env)
	}
	out, err := f.kin.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String(f.stream), Records: entries})
	if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
		f.t.Fatalf("PutRecords: %v %v", out, err)
	}
	f.sent = append(f.sent, envs...)
	return envs
}

// live plays the aggregate function's event source mapping: it hands each
// shard's new records to the processor as one batch.
func (f *fixture) live(ctx context.Context, p *aggregate.Processor) int {
	f.t.Helper()
	n := 0
	for _, shard := range f.liveShards {
		out, err := f.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: f.liveIters[shard]})
		if err != nil {
			f.t.Fatal(err)
		}
		f.liveIters[shard] = out.NextShardIterator
		if len(out.Records) == 0 {
			continue
		}
		var ev events.KinesisEvent
		for _, r := range out.Records {
			s := aws.ToString(r.SequenceNumber)
			ev.Records = append(ev.Records, events.KinesisEventRecord{EventID: shard + ":" + s, EventSource: "aws:kinesis",
				EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/" + f.stream,
				Kinesis: events.KinesisRecord{SequenceNumber: s, PartitionKey: aws.ToString(r.PartitionKey), Data: r.Data,
					ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: aws.ToTime(r.ApproximateArrivalTimestamp)}}})
		}
		resp, err := p.HandleBatch(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			f.t.Fatalf("live batch: %v %v", resp, err)
		}
		n += len(ev.Records)
	}
	return n
}

// liveProcessor is the aggregate function as deployed: FromEnv with the
// views parameter, re-read every second.
func (f *fixture) liveProcessor(more ...string) *aggregate.Processor {
	f.t.Helper()
	env := map[string]string{pipeline.EnvVar: f.pipeline, aggregate.EnvViewsParameter: f.param, aggregate.EnvViewsRefresh: "1"}
	for i := 0; i+1 < len(more); i += 2 {
		env[more[i]] = more[i+1]
	}
	p, err := aggregate.FromEnv(awsCfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "aggregate", &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// onSwap calls fn (once, on a goroutine of its own) as soon as the views
// parameter names target; the watch ends with the test.
func (f *fixture) onSwap(t *testing.T, target string, fn func()) {
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() {
		for ctx.Err() == nil {
			out, err := f.ps.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(f.param)})
			if err == nil && aws.ToString(out.Parameter.Value) == target {
				fn()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
}

// reference counts envs once each: "key window-start" → "count N sum S".
func (f *fixture) reference(envs []stream.Envelope) map[string]string {
	type cell struct {
		count int
		sum   float64
	}
	cells := map[string]*cell{}
	for _, e := range envs {
		var d struct{ N float64 }
		_ = json.Unmarshal(e.Data, &d)
		for _, w := range f.cfg.Windows[0].Tumbling().AppendWindows(nil, e.EventTime()) {
			k := e.Key + " " + w.Start.UTC().Format(time.TimeOnly)
			if cells[k] == nil {
				cells[k] = &cell{}
			}
			cells[k].count++
			cells[k].sum += d.N
		}
	}
	out := map[string]string{}
	for k, c := range cells {
		out[k] = fmt.Sprintf("count %d sum %g", c.count, c.sum)
	}
	return out
}

// windows reads table's windows the same way.
func (f *fixture) windows(ctx context.Context, table string) map[string]string {
	f.t.Helper()
	views := state.NewViews(f.db, table, f.cfg.Aggregates)
	out := map[string]string{}
	for i := range 5 {
		vs, err := views.Query(ctx, f.cfg.Name, fmt.Sprintf("k%d", i), f.cfg.Windows[0].ID(), f.base.Add(-time.Hour), f.base.Add(time.Hour))
		if err != nil {
			f.t.Fatal(err)
		}
		for _, v := range vs {
			out[v.Key+" "+v.Window.Start.UTC().Format(time.TimeOnly)] = fmt.Sprintf("count %d sum %g", v.Result.Count, v.Result.Sum)
		}
	}
	return out
}

func diff(got, want map[string]string) string {
	var b strings.Builder
	for k, w := range want {
		if got[k] != w {
			fmt.Fprintf(&b, "  %s: got %q, want %q\n", k, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "  %s: got %q, want nothing\n", k, g)
		}
	}
	return b.String()
}

// TestReplayFromTimestampSwapsAfterCatchUp: events written before a
// timestamp are left out of the new version, those after it are in it once
// each; the parameter names the new version only when it already holds
// every record written before the replay; the live function then writes to
// it, and a record both it and the replay's handover apply counts once;
// the old version is untouched and can be deleted, the current one cannot.
func TestReplayFromTimestampSwapsAfterCatchUp(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	live := f.liveProcessor()

	early := f.send("early", 40, 0)
	f.live(ctx, live)
	time.Sleep(50 * time.Millisecond) // arrival times on the stand-in are wall-clock
	from := time.Now()
	time.Sleep(50 * time.Millisecond)
	before := f.send("before", 60, 2)
	f.live(ctx, live)
	v1Before := f.windows(ctx, f.table)
	if d := diff(v1Before, f.reference(append(append([]stream.Envelope{}, early...), before...))); d != "" {
		t.Fatalf("the live function's table before the replay differs from the reference:\n%s", d)
	}

	target := f.table + "-v2"
	progress := &syncbuf.Buffer{}
	// Watch the parameter: the moment it names the new version, that version
	// must already hold every record written since the timestamp.
	atSwap := make(chan map[string]string, 1)
	f.onSwap(t, target, func() { atSwap <- f.windows(ctx, target) })

	r := replay.New(f.kin, f.db, replay.NewRegistry(f.ps, f.param))
	type outcome struct {
		res *replay.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := r.Run(ctx, replay.Options{Stream: f.stream, From: from, Handover: 2500 * time.Millisecond,
			Poll: 50 * time.Millisecond, ProgressEvery: 300 * time.Millisecond, Progress: progress, BatchSize: 25},
			func(table string, aside *setaside.Sink) (replay.BatchHandler, error) {
				return aggregate.New(f.cfg, state.NewViews(f.db, table, f.cfg.Aggregates), nil, ""), nil
			})
		done <- outcome{res, err}
	}()

	var swapped map[string]string
	select {
	case swapped = <-atSwap:
	case o := <-done:
		t.Fatalf("replay ended without swapping: %+v %v\n%s", o.res, o.err, progress)
	case <-time.After(2 * time.Minute):
		t.Fatalf("no swap after 2m:\n%s", progress)
	}
	if d := diff(swapped, f.reference(before)); d != "" {
		t.Errorf("when the parameter swapped, %s differed from the records since the timestamp:\n%s", target, d)
	}

	// During the handover: new records, which the live function applies
	// once its refresh interval has passed (so to the new version), and the
	// replay applies too.
	time.Sleep(1100 * time.Millisecond)
	during := f.send("during", 30, 5)
	time.Sleep(200 * time.Millisecond)
	if n := f.live(ctx, live); n != len(during) {
		t.Fatalf("live function consumed %d records, want %d", n, len(during))
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("replay: %v\n%s", o.err, progress)
	}
	res := o.res
	if !res.Swapped || res.Current != f.table || res.Target != target {
		t.Errorf("result %+v: want swapped from %s to %s", res, f.table, target)
	}
	if res.Read != len(before)+len(during) || res.Applied != res.Read || res.Skipped != 0 {
		t.Errorf("read %d applied %d skipped %d, want %d read and applied", res.Read, res.Applied, res.Skipped, len(before)+len(during))
	}

	want := f.reference(append(append([]stream.Envelope{}, before...), during...))
	if d := diff(f.windows(ctx, target), want); d != "" {
		t.Errorf("%s after the handover differs from the records since the timestamp, each once:\n%s", target, d)
	}
	if d := diff(f.windows(ctx, f.table), v1Before); d != "" {
		t.Errorf("the old version changed after the swap (the live function kept writing it?):\n%s", d)
	}

	out := progress.String()
	for _, want := range []string{"shardId-000000000000 read", "shardId-000000000001 read", "caught up after", "swapped: parameter " + f.param + " now names " + target} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q:\n%s", want, out)
		}
	}
	// The swap says when it happened: a user matching the results on the
	// stream to it had to guess from the progress lines around it.
	if !regexp.MustCompile(`swapped: parameter \S+ now names \S+ \(was \S+\) at 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ;`).MatchString(out) {
		t.Errorf("progress does not say when it swapped:\n%s", out)
	}
	// Each shard's status says where it is: not read yet, behind (by how
	// much), or caught up. Whether a line with "behind" is printed at all
	// depends on whether a progress tick falls between a shard's first read
	// and its catching up, so the test checks every status it sees.
	for _, m := range shardStatus.FindAllStringSubmatch(out, -1) {
		if st := m[1]; !strings.HasPrefix(st, "not read yet") && !strings.HasPrefix(st, "behind ") && !strings.HasPrefix(st, "caught up") {
			t.Errorf("progress gives a shard the status %q, not one of: not read yet, behind <lag>, caught up:\n%s", st, out)
		}
	}
	if i, j := strings.Index(out, "2/2 shards caught up"), strings.Index(out, "swapped:"); i < 0 || j < i {
		t.Errorf("progress: want every shard caught up before the swap:\n%s", out)
	}

	reg := replay.NewRegistry(f.ps, f.param)
	if _, err := replay.DeleteVersion(ctx, f.db, reg, target, true); !errors.Is(err, replay.ErrRefused) {
		t.Errorf("deleting the current version: %v, want a refusal", err)
	}
	// The stack's own table is not one rebuild created: delete-version
	// leaves it, even with -yes.
	if _, err := replay.DeleteVersion(ctx, f.db, reg, f.table, true); !errors.Is(err, replay.ErrRefused) {
		t.Errorf("deleting the stack's table: %v, want a refusal", err)
	}
	if _, err := f.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(f.table)}); err != nil {
		t.Errorf("the old version is gone after a refused delete: %v", err)
	}
	if !strings.Contains(progress.String(), "delete-version leaves it") {
		t.Errorf("progress does not say the stack's table stays:\n%s", progress)
	}
	// The stack removes its own table; here the test does.
	if _, err := f.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(f.table)}); err != nil {
		t.Fatal(err)
	}

	// The ticker, started now (FromEnv as its main does), works on the new
	// version: the old one is gone, so reading it would fail.
	tick, err := f.liveProcessor().Tick(ctx, time.Now())
	if err != nil || tick.Shards != 2 {
		t.Errorf("tick after the swap: %+v, %v; want the new version's 2 shard watermarks", tick, err)
	}
}

// TestReplayFromStartEqualsLiveTable: a dry run describes the rebuild and
// changes nothing; a replay from before the first record rebuilds exactly
// the table the live function wrote, into a copy with its index and TTL.
func TestReplayFromStartEqualsLiveTable(t *testing.T) {
	f := newFixture(t, 1)
	ctx := context.Background()
	live := f.liveProcessor()
	start := time.Now().Add(-time.Second)
	f.send("a", 50, 0)
	f.send("b", 50, 3)
	f.live(ctx, live)
	v1 := f.windows(ctx, f.table)
	if len(v1) == 0 {
		t.Fatal("the live function wrote no windows")
	}
	handler := func(table string, aside *setaside.Sink) (replay.BatchHandler, error) {
		return aggregate.New(f.cfg, state.NewViews(f.db, table, f.cfg.Aggregates), nil, ""), nil
	}
	r := replay.New(f.kin, f.db, replay.NewRegistry(f.ps, f.param))
	target := f.table + "-v2"

	var dry bytes.Buffer
	res, err := r.Run(ctx, replay.Options{Stream: f.stream, From: start, DryRun: true, Progress: &dry}, handler)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dry run: create table " + target + " as a copy of " + f.table, "global index open", "time to live on expiresAt", "point-in-time recovery",
		"write " + target + " into parameter " + f.param} {
		if !strings.Contains(dry.String(), want) {
			t.Errorf("dry run output lacks %q:\n%s", want, dry.String())
		}
	}
	if _, err := f.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(target)}); err == nil {
		t.Errorf("the dry run created %s", target)
	}
	if res.Swapped {
		t.Errorf("the dry run swapped")
	}

	res, err = r.Run(ctx, replay.Options{Stream: f.stream, From: start, Handover: 100 * time.Millisecond, Poll: 20 * time.Millisecond}, handler)
	if err != nil {
		t.Fatal(err)
	}
	if res.Read != 100 || !res.Swapped {
		t.Errorf("read %d swapped %v, want 100 and a swap", res.Read, res.Swapped)
	}
	if d := diff(f.windows(ctx, target), v1); d != "" {
		t.Errorf("replaying from the start into %s differs from the live table:\n%s", target, d)
	}
	d, err := f.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(target)})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Table.GlobalSecondaryIndexes) != 1 || aws.ToString(d.Table.GlobalSecondaryIndexes[0].IndexName) != state.OpenIndex {
		t.Errorf("%s indexes %+v, want the open-windows index copied", target, d.Table.GlobalSecondaryIndexes)
	}
	ttl, err := f.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(target)})
	if err != nil || ttl.TimeToLiveDescription.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "expiresAt" {
		t.Errorf("%s time to live %+v %v, want enabled on expiresAt", target, ttl, err)
	}

	cb, err := f.db.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(target)})
	if err != nil || cb.ContinuousBackupsDescription.PointInTimeRecoveryDescription == nil ||
		cb.ContinuousBackupsDescription.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus != ddbtypes.PointInTimeRecoveryStatusEnabled {
		t.Errorf("%s point-in-time recovery %+v %v, want enabled as on %s", target, cb, err, f.table)
	}

	// The next rebuild goes to -v3, from the version now current.
	res, err = r.Run(ctx, replay.Options{Stream: f.stream, From: start, DryRun: true}, handler)
	if err != nil || res.Current != target || res.Target != f.table+"-v3" {
		t.Errorf("next rebuild %+v %v: want %s → %s-v3", res, err, target, f.table)
	}
}

func TestNextVersion(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"views", "views-v2"},
		{"views-v2", "views-v3"},
		{"Stack-Views1A2B-XYZ-v9", "Stack-Views1A2B-XYZ-v10"},
		{"views-vx", "views-vx-v2"},
	} {
		if got := replay.NextVersion(c.in); got != c.want {
			t.Errorf("NextVersion(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A deployed function whose parameter is missing fails at init naming
// VIEWS_PARAMETER_NAME.
func TestMissingViewsParameterFailsAtInit(t *testing.T) {
	env := map[string]string{pipeline.EnvVar: pipelineJSON, aggregate.EnvViewsParameter: "/tributary/nope"}
	_, err := aggregate.FromEnv(awsCfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "aggregate", &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), aggregate.EnvViewsParameter) || !strings.Contains(err.Error(), "/tributary/nope") {
		t.Errorf("err %v, want one naming %s and the parameter", err, aggregate.EnvViewsParameter)
	}
}

// shardStatus finds a shard's status in a progress line:
// "shardId-… read <n> applied <n> <status>" up to the next "|" or line end.
var shardStatus = regexp.MustCompile(`shardId-\d+ read \d+ applied \d+ ([^|\n]*)`)

// TestPlanVersionOfAProvisionedTableIsOnDemand: a provisioned views table
// (tributary:viewsWriteCapacity) is copied on demand, index included, and
// the plan says why: the rebuild writes in a burst, and the table's auto
// scaling is not the table's to copy. An on-demand table's copy says
// nothing of it.
func TestPlanVersionOfAProvisionedTableIsOnDemand(t *testing.T) {
	ctx := context.Background()
	db := dynamodb.NewFromConfig(awsCfg)
	name := fmt.Sprintf("views-prov-%d", seq.Add(1))
	s := func(n string) ddbtypes.AttributeDefinition {
		return ddbtypes.AttributeDefinition{AttributeName: aws.String(n), AttributeType: ddbtypes.ScalarAttributeTypeS}
	}
	units := &ddbtypes.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(56), WriteCapacityUnits: aws.Int64(221)}
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:             aws.String(name),
		AttributeDefinitions:  []ddbtypes.AttributeDefinition{s("pk"), s("sk"), s("openIn"), s("openUntil")},
		KeySchema:             []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: ddbtypes.KeyTypeRange}},
		BillingMode:           ddbtypes.BillingModeProvisioned,
		ProvisionedThroughput: units,
		GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndex{{IndexName: aws.String("open"),
			KeySchema:             []ddbtypes.KeySchemaElement{{AttributeName: aws.String("openIn"), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String("openUntil"), KeyType: ddbtypes.KeyTypeRange}},
			Projection:            &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeKeysOnly},
			ProvisionedThroughput: &ddbtypes.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(5), WriteCapacityUnits: aws.Int64(5)}}},
	}); err != nil {
		t.Fatal(err)
	}
	plan, err := replay.PlanVersion(ctx, db, name, name+"-v2")
	if err != nil {
		t.Fatal(err)
	}
	in := plan.Input
	if in.BillingMode != ddbtypes.BillingModePayPerRequest || in.ProvisionedThroughput != nil || len(in.GlobalSecondaryIndexes) != 1 || in.GlobalSecondaryIndexes[0].ProvisionedThroughput != nil {
		t.Errorf("copy billing %s, throughput %v, indexes %+v; want on demand throughout", in.BillingMode, in.ProvisionedThroughput, in.GlobalSecondaryIndexes)
	}
	if d := strings.Join(plan.Describe(), "\n"); !strings.Contains(d, "is provisioned: the copy is on demand") {
		t.Errorf("plan:\n%s\nwant it to say the copy is on demand and why", d)
	}
	if _, err := db.CreateTable(ctx, plan.Input); err != nil {
		t.Fatalf("creating the copy: %v", err)
	}
}
