package replay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/tributary-dev/tributary/internal/syncbuf"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// handler is the aggregate processor as replay rebuild builds it, records
// it can never apply given to replay's aside.
func (f *fixture) handler(table string, aside *setaside.Sink) (replay.BatchHandler, error) {
	return aggregate.New(f.cfg, state.NewViews(f.db, table, f.cfg.Aggregates), nil, "", aggregate.WithSetAside(aside)), nil
}

func (f *fixture) replayer(kin replay.StreamReader) *replay.Replayer {
	if kin == nil {
		kin = f.kin
	}
	return replay.New(kin, f.db, replay.NewRegistry(f.ps, f.param))
}

// quick are options for a replay on the stand-in: short polls and handover
// (the live processor re-reads the parameter every second).
func (f *fixture) quick(progress *syncbuf.Buffer) replay.Options {
	o := replay.Options{Stream: f.stream, Handover: 1200 * time.Millisecond, Poll: 20 * time.Millisecond, ProgressEvery: 50 * time.Millisecond}
	if progress != nil {
		o.Progress = progress
	}
	return o
}

// param is the parameter's value and version.
func (f *fixture) paramNow(ctx context.Context) (string, int64) {
	f.t.Helper()
	out, err := f.ps.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(f.param)})
	if err != nil {
		f.t.Fatal(err)
	}
	return aws.ToString(out.Parameter.Value), out.Parameter.Version
}

// tables lists the fixture's tables (its views table and every table named
// after it).
func (f *fixture) tables(ctx context.Context) []string {
	f.t.Helper()
	var out []string
	p := dynamodb.NewListTablesPaginator(f.db, &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, t := range page.TableNames {
			if t == f.table || strings.HasPrefix(t, f.table+"-") {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (f *fixture) exists(ctx context.Context, table string) bool {
	_, err := f.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	return err == nil
}

// createTable makes a views-shaped table with tags and, if withItem, one item.
func (f *fixture) createTable(ctx context.Context, name string, tags map[string]string, withItem bool) {
	f.t.Helper()
	if err := state.CreateTable(ctx, f.db, name); err != nil {
		f.t.Fatal(err)
	}
	if len(tags) > 0 {
		d, err := f.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			f.t.Fatal(err)
		}
		var ts []ddbtypes.Tag
		for k, v := range tags {
			ts = append(ts, ddbtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		if _, err := f.db.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: d.Table.TableArn, Tags: ts}); err != nil {
			f.t.Fatal(err)
		}
	}
	if withItem {
		if _, err := f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "someone#else"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "x"}}}); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) versionTags(param string) map[string]string {
	return map[string]string{replay.TagCreatedBy: replay.CreatedByRebuild, replay.TagParameter: param, replay.TagBase: f.table,
		replay.TagFrom: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}
}

// refusedAs checks err is a refusal of field.
func refusedAs(t *testing.T, what string, err error, field string) {
	t.Helper()
	var r *replay.RefusedError
	if !errors.As(err, &r) || !errors.Is(err, replay.ErrRefused) {
		t.Errorf("%s: err %v, want a refusal of -%s", what, err, field)
		return
	}
	if r.Field != field {
		t.Errorf("%s: refused %q (%v), want -%s", what, r.Field, err, field)
	}
}

// TestRebuildRefusesBeforeCreatingAnything: a -from in the future or older
// than the stream keeps, a target that is the current table, is not named
// like a version or already exists, and a missing stream: each is refused
// naming the input, with no table created and the parameter unchanged.
func TestRebuildRefusesBeforeCreatingAnything(t *testing.T) {
	f := newFixture(t, 1)
	ctx := context.Background()
	f.send("a", 10, 0)
	f.live(ctx, f.liveProcessor())
	f.createTable(ctx, f.table+"-v5", f.versionTags(f.param), false)
	now := time.Now()
	for _, c := range []struct {
		name  string
		opts  func(o *replay.Options)
		field string
	}{
		{"from in the future", func(o *replay.Options) { o.From = now.Add(time.Hour) }, "from"},
		{"from 2030", func(o *replay.Options) { o.From = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }, "from"},
		{"from before the stream's 24h retention", func(o *replay.Options) { o.From = now.Add(-25 * time.Hour) }, "from"},
		{"target is the current table", func(o *replay.Options) { o.Target = f.table }, "to-table"},
		{"target not named <views>-vN", func(o *replay.Options) { o.Target = "timelines" }, "to-table"},
		{"target -v1", func(o *replay.Options) { o.Target = f.table + "-v1" }, "to-table"},
		{"target exists", func(o *replay.Options) { o.Target = f.table + "-v5" }, "to-table"},
		{"stream missing", func(o *replay.Options) { o.Stream = "no-such-stream" }, "stream"},
	} {
		before := f.tables(ctx)
		_, version := f.paramNow(ctx)
		o := f.quick(nil)
		o.From, o.Now = now.Add(-time.Minute), func() time.Time { return now }
		c.opts(&o)
		res, err := f.replayer(nil).Run(ctx, o, f.handler)
		refusedAs(t, c.name, err, c.field)
		if res != nil && res.Swapped {
			t.Errorf("%s: swapped", c.name)
		}
		if after := f.tables(ctx); !slices.Equal(before, after) {
			t.Errorf("%s: tables %v became %v", c.name, before, after)
		}
		if v, n := f.paramNow(ctx); v != f.table || n != version {
			t.Errorf("%s: parameter is %s (version %d), want %s (version %d)", c.name, v, n, f.table, version)
		}
	}
	// A negative handover is an error, not a default.
	o := f.quick(nil)
	o.From, o.Handover = now.Add(-time.Minute), -time.Second
	if _, err := f.replayer(nil).Run(ctx, o, f.handler); err == nil || !strings.Contains(err.Error(), "Handover") {
		t.Errorf("negative handover: %v, want an error naming Handover", err)
	}
}

// TestRebuildOfNothingIsNotSwapped: a rebuild from a time after every record
// applies nothing; while the current table holds windows the readers are
// not moved to the empty version (it is left, tagged, not current). With
// AllowEmpty they are.
func TestRebuildOfNothingIsNotSwapped(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	f.send("a", 20, 0)
	f.live(ctx, f.liveProcessor())
	time.Sleep(50 * time.Millisecond)
	o := f.quick(nil)
	o.From = time.Now()
	res, err := f.replayer(nil).Run(ctx, o, f.handler)
	refusedAs(t, "rebuild of nothing", err, "from")
	if res == nil || res.Swapped || res.Applied != 0 {
		t.Errorf("result %+v: want nothing applied and no swap", res)
	}
	if v, _ := f.paramNow(ctx); v != f.table {
		t.Errorf("the parameter names %s, want still %s", v, f.table)
	}
	if !f.exists(ctx, f.table+"-v2") {
		t.Errorf("the refused version was deleted; want it left in place")
	}

	o.AllowEmpty = true
	res, err = f.replayer(nil).Run(ctx, o, f.handler)
	if err != nil || !res.Swapped || res.Target != f.table+"-v3" {
		t.Fatalf("rebuild with AllowEmpty: %+v %v; want a swap to %s-v3 (the next free version)", res, err, f.table)
	}
	if v, _ := f.paramNow(ctx); v != f.table+"-v3" {
		t.Errorf("the parameter names %s, want %s-v3", v, f.table)
	}
}

// trimmed is the events stream after its retention removed old records: an
// iterator at a sequence number no longer held starts at the next record
// (the stand-in never trims, so this is played here).
type trimmed struct{ *kinesis.Client }

func (c trimmed) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if in.ShardIteratorType == kintypes.ShardIteratorTypeAtSequenceNumber {
		cp := *in
		cp.ShardIteratorType = kintypes.ShardIteratorTypeAfterSequenceNumber
		in = &cp
	}
	return c.Client.GetShardIterator(ctx, in, opts...)
}

// TestRollbackRestoresTheReaders: after a rebuild swapped to v2 and the live
// function wrote there, rollback catches the old table up with what v2 got
// meanwhile and points the parameter back at it; the live function then
// writes the old table again, which holds every record once; a second
// rollback would return to v2 (the parameter's history).
func TestRollbackRestoresTheReaders(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	live := f.liveProcessor()
	a := f.send("a", 40, 0)
	f.live(ctx, live)
	time.Sleep(50 * time.Millisecond)
	from := time.Now()
	time.Sleep(50 * time.Millisecond)
	b := f.send("b", 30, 2)
	f.live(ctx, live)
	v2 := f.table + "-v2"
	if res, err := f.replayer(nil).Run(ctx, func() replay.Options { o := f.quick(nil); o.From = from; return o }(), f.handler); err != nil || !res.Swapped {
		t.Fatalf("rebuild: %+v %v", res, err)
	}
	time.Sleep(1100 * time.Millisecond) // the live function's refresh
	c := f.send("c", 30, 4)
	f.live(ctx, live)
	all := func(parts ...[]stream.Envelope) []stream.Envelope { return slices.Concat(parts...) }
	if d := diff(f.windows(ctx, f.table), f.reference(all(a, b))); d != "" {
		t.Fatalf("the old table changed after the swap:\n%s", d)
	}
	if d := diff(f.windows(ctx, v2), f.reference(all(b, c))); d != "" {
		t.Fatalf("v2 lacks what the live function applied after the swap:\n%s", d)
	}

	// A rollback that finds its newest record gone is refused, nothing moves.
	o := f.quick(nil)
	if _, err := f.replayer(trimmed{f.kin}).Rollback(ctx, o, f.handler); !errors.Is(err, replay.ErrRefused) || !strings.Contains(err.Error(), "no longer holds") {
		t.Errorf("rollback with the version's newest record trimmed: %v, want a refusal", err)
	}
	// So is one whose version stopped being current longer ago than the
	// stream keeps records (a day later).
	o.Now = func() time.Time { return time.Now().Add(25 * time.Hour) }
	if _, err := f.replayer(nil).Rollback(ctx, o, f.handler); !errors.Is(err, replay.ErrRefused) || !strings.Contains(err.Error(), "stopped being current") {
		t.Errorf("rollback a day later: %v, want a refusal", err)
	}
	if v, _ := f.paramNow(ctx); v != v2 {
		t.Fatalf("a refused rollback moved the parameter to %s", v)
	}

	progress := &syncbuf.Buffer{}
	o = f.quick(progress)
	o.Margin = time.Millisecond
	res, err := f.replayer(nil).Rollback(ctx, o, f.handler)
	if err != nil || !res.Swapped || res.Target != f.table || res.Current != v2 {
		t.Fatalf("rollback: %+v %v\n%s", res, err, progress)
	}
	if v, _ := f.paramNow(ctx); v != f.table {
		t.Errorf("after rollback the parameter names %s, want %s", v, f.table)
	}
	if d := diff(f.windows(ctx, f.table), f.reference(all(a, b, c))); d != "" {
		t.Errorf("after rollback %s is not every record once:\n%s\n%s", f.table, d, progress)
	}
	if res.Read == 0 || res.Read >= len(a)+len(b)+len(c) {
		t.Errorf("rollback read %d records: want only the shards' tails (after what %s held), not the whole stream", res.Read, f.table)
	}

	time.Sleep(1100 * time.Millisecond)
	d := f.send("d", 20, 6)
	f.live(ctx, live)
	if diff := diff(f.windows(ctx, f.table), f.reference(all(a, b, c, d))); diff != "" {
		t.Errorf("the live function did not return to %s:\n%s", f.table, diff)
	}
	if diff := diff(f.windows(ctx, v2), f.reference(all(b, c))); diff != "" {
		t.Errorf("v2 changed after the rollback:\n%s", diff)
	}
	prev, err := replay.NewRegistry(f.ps, f.param).Previous(ctx)
	if err != nil || prev.Table != v2 {
		t.Errorf("previous after the rollback: %+v %v, want %s", prev, err, v2)
	}
	for _, want := range []string{"catch " + f.table + " (", "swapped: parameter " + f.param + " now names " + f.table, "summary: compared the item counts"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("rollback output lacks %q:\n%s", want, progress)
		}
	}
}

// TestUseVersionRefusesWhatIsNotAVersion: another table, a table named like a
// version but not tagged, one tagged for another parameter, a missing one,
// the current one and an empty version while the current table holds
// windows: each refused naming -table, the parameter unchanged.
func TestUseVersionRefusesWhatIsNotAVersion(t *testing.T) {
	f := newFixture(t, 1)
	ctx := context.Background()
	f.send("a", 10, 0)
	f.live(ctx, f.liveProcessor())
	timelines := fmt.Sprintf("timelines-%d", seq.Add(1))
	f.createTable(ctx, timelines, nil, true)
	f.createTable(ctx, f.table+"-v7", nil, true)
	f.createTable(ctx, f.table+"-v8", f.versionTags("/someone/elses/parameter"), true)
	f.createTable(ctx, f.table+"-v6", f.versionTags(f.param), false)
	for _, c := range []struct{ name, table, why string }{
		{"another table", timelines, "not a version"},
		{"named like a version, not tagged", f.table + "-v7", "no tributary:created-by"},
		{"tagged for another parameter", f.table + "-v8", "tributary:views-parameter"},
		{"missing", f.table + "-v9", "does not exist"},
		{"current", f.table, "already the current"},
		{"empty while the current holds windows", f.table + "-v6", "holds no items"},
	} {
		_, version := f.paramNow(ctx)
		o := f.quick(nil)
		o.Target = c.table
		_, err := f.replayer(nil).UseVersion(ctx, o, f.handler)
		refusedAs(t, c.name, err, "table")
		if err != nil && !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.why)
		}
		if v, n := f.paramNow(ctx); v != f.table || n != version {
			t.Errorf("%s: the parameter is %s (version %d), want %s (version %d)", c.name, v, n, f.table, version)
		}
	}
	// The empty version with AllowEmpty: caught up from its -from tag (an
	// hour ago: the whole stream), then current.
	o := f.quick(nil)
	o.Target, o.AllowEmpty = f.table+"-v6", true
	res, err := f.replayer(nil).UseVersion(ctx, o, f.handler)
	if err != nil || !res.Swapped {
		t.Fatalf("use-version -allow-empty: %+v %v", res, err)
	}
	if d := diff(f.windows(ctx, f.table+"-v6"), f.reference(f.sent)); d != "" {
		t.Errorf("the version used was not caught up from its -from:\n%s", d)
	}
}

// TestDeleteVersionDeletesOnlyRebuiltVersions: given the wrong table —
// another table, the stack's table, the current one, one named like a
// version but not tagged, one tagged for another parameter — delete-version
// refuses and the table stays; a version rebuild made is only checked
// without yes, deleted with it.
func TestDeleteVersionDeletesOnlyRebuiltVersions(t *testing.T) {
	f := newFixture(t, 1)
	ctx := context.Background()
	f.send("a", 10, 0)
	f.live(ctx, f.liveProcessor())
	o := f.quick(nil)
	o.From = time.Now().Add(-time.Minute)
	o.Handover = 50 * time.Millisecond
	if res, err := f.replayer(nil).Run(ctx, o, f.handler); err != nil || !res.Swapped {
		t.Fatalf("rebuild: %+v %v", res, err)
	}
	o.Handover = 50 * time.Millisecond
	if res, err := f.replayer(nil).Run(ctx, o, f.handler); err != nil || !res.Swapped || res.Target != f.table+"-v3" {
		t.Fatalf("second rebuild: %+v %v", res, err)
	}
	timelines := fmt.Sprintf("timelines-%d", seq.Add(1))
	f.createTable(ctx, timelines, nil, true)
	f.createTable(ctx, f.table+"-v7", nil, true)
	f.createTable(ctx, f.table+"-v8", f.versionTags("/someone/elses/parameter"), true)
	reg := replay.NewRegistry(f.ps, f.param)
	for _, table := range []string{timelines, f.table, f.table + "-v3", f.table + "-v7", f.table + "-v8"} {
		_, err := replay.DeleteVersion(ctx, f.db, reg, table, true)
		refusedAs(t, "delete-version -yes "+table, err, "table")
		if !f.exists(ctx, table) {
			t.Errorf("delete-version -yes %s deleted it", table)
		}
	}
	if _, err := replay.DeleteVersion(ctx, f.db, reg, f.table+"-v9", true); !errors.Is(err, replay.ErrRefused) {
		t.Errorf("deleting a missing table: %v, want a refusal", err)
	}
	plan, err := replay.DeleteVersion(ctx, f.db, reg, f.table+"-v2", false)
	if err != nil || plan.Deleted || !f.exists(ctx, f.table+"-v2") {
		t.Errorf("delete-version without yes: %+v %v; want checks only, the table kept", plan, err)
	}
	if !strings.Contains(strings.Join(plan.Checked, "\n"), "rollback returns to") {
		t.Errorf("the dry run does not warn that -v2 is the rollback target: %q", plan.Checked)
	}
	plan, err = replay.DeleteVersion(ctx, f.db, reg, f.table+"-v2", true)
	if err != nil || !plan.Deleted || f.exists(ctx, f.table+"-v2") {
		t.Errorf("delete-version -yes of a rebuilt version: %+v %v; want it deleted", plan, err)
	}
	if v, _ := f.paramNow(ctx); v != f.table+"-v3" {
		t.Errorf("the parameter moved to %s", v)
	}
}

// TestVersionsListsCountsPositionsAndCurrent: versions lists the stack's
// table and the rebuilt one with their exact item counts, the highest
// sequence number each holds of every shard, when it arrived, and which is
// current.
func TestVersionsListsCountsPositionsAndCurrent(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	live := f.liveProcessor()
	f.send("a", 30, 0)
	f.live(ctx, live)
	time.Sleep(50 * time.Millisecond)
	from := time.Now()
	time.Sleep(50 * time.Millisecond)
	f.send("b", 20, 2)
	f.live(ctx, live)
	o := f.quick(nil)
	o.From, o.Handover = from, 50*time.Millisecond
	if res, err := f.replayer(nil).Run(ctx, o, f.handler); err != nil || !res.Swapped {
		t.Fatalf("rebuild: %+v %v", res, err)
	}
	last := map[string]string{} // shard → its last sequence number
	for _, shard := range f.liveShards {
		it, _ := f.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(f.stream), ShardId: aws.String(shard), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		out, err := f.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(out.Records); n > 0 {
			last[shard] = aws.ToString(out.Records[n-1].SequenceNumber)
		}
	}
	var shown bytes.Buffer
	vs, err := f.replayer(nil).Versions(ctx, replay.VersionsOptions{Stream: f.stream, Progress: &shown})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Table != f.table || vs[1].Table != f.table+"-v2" {
		t.Fatalf("versions %+v: want %s and %s-v2", vs, f.table, f.table)
	}
	// Reading every item of each version takes minutes for millions:
	// the user is told which table is being read.
	for i, table := range []string{f.table, f.table + "-v2"} {
		want := fmt.Sprintf("reading the items of %s (version %d of 2)", table, i+1)
		if !strings.Contains(shown.String(), want) {
			t.Errorf("progress %q: want a line %q", shown.String(), want)
		}
	}
	for _, v := range vs {
		out, err := f.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(v.Table)})
		if err != nil {
			t.Fatal(err)
		}
		results := 0 // windows, keyed state, watermarks: not the dedupe ledger, window listings nor a replay's handover
		for _, it := range out.Items {
			if !state.IsLedgerItem(it) && !state.IsListingItem(it) && !state.IsHandoverItem(it) {
				results++
			}
		}
		if v.Items != results || v.Items == 0 {
			t.Errorf("%s: %d items, the table holds %d results", v.Table, v.Items, results)
		}
		got := map[string]string{}
		for _, p := range v.Positions {
			got[p.Shard] = p.Sequence
			if p.Arrival.IsZero() || p.Gone {
				t.Errorf("%s %s: arrival %v gone %v, want when it arrived", v.Table, p.Shard, p.Arrival, p.Gone)
			}
		}
		if !maps(got, last) {
			t.Errorf("%s positions %v, want each shard's last record %v", v.Table, got, last)
		}
	}
	if vs[0].Current || !vs[1].Current || vs[0].Rebuilt || !vs[1].Rebuilt {
		t.Errorf("current/rebuilt: %+v", vs)
	}
	if len(vs[0].Spans) != 1 || vs[0].Spans[0].Until.IsZero() || len(vs[1].Spans) != 1 || !vs[1].Spans[0].Until.IsZero() {
		t.Errorf("spans %+v / %+v: want the stack's table current until the swap, v2 since", vs[0].Spans, vs[1].Spans)
	}
	if !vs[1].From.Equal(from.UTC()) && vs[1].From.Sub(from).Abs() > time.Millisecond {
		t.Errorf("v2 from %v, want %v", vs[1].From, from)
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// slowStart delays the first GetRecords, as a busy stream does, so the
// progress is shown before anything was read.
type slowStart struct {
	*kinesis.Client
	delay time.Duration
}

func (c slowStart) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	time.Sleep(c.delay)
	return c.Client.GetRecords(ctx, in, opts...)
}

// TestProgressSaysWhatWasRead: before a shard's first page the progress says
// it was not read yet (no "behind 0ms"); "behind" appears only for shards
// read; a line is written only when it changed, so a quiet handover does
// not repeat it; on a terminal the line is rewritten in place with the
// handover's countdown.
func TestProgressSaysWhatWasRead(t *testing.T) {
	f := newFixture(t, 1)
	ctx := context.Background()
	from := time.Now().Add(-time.Second)
	f.send("a", 20, 0)
	progress := &syncbuf.Buffer{}
	o := f.quick(progress)
	o.From, o.ProgressEvery, o.Handover = from, 10*time.Millisecond, 500*time.Millisecond
	if _, err := f.replayer(slowStart{f.kin, 150 * time.Millisecond}).Run(ctx, o, f.handler); err != nil {
		t.Fatal(err)
	}
	out := progress.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	sawNotRead := false
	for i, l := range lines {
		if strings.Contains(l, "not read yet") {
			sawNotRead = true
		}
		if regexp.MustCompile(`read 0 applied 0 (behind|caught up)`).MatchString(l) {
			t.Errorf("line %d says where a shard is before reading it: %q", i, l)
		}
		if i > 0 && l == lines[i-1] {
			t.Errorf("line %d repeats the one before: %q", i, l)
		}
	}
	if !sawNotRead {
		t.Errorf("no line says the shard was not read yet:\n%s", out)
	}
	// 500ms of handover at a 10ms tick: a line per tick would be ~50.
	if n := strings.Count(out, "1/1 shards caught up, read 20 applied 20 | "); n > 3 {
		t.Errorf("the caught-up line was written %d times:\n%s", n, out)
	}

	// On a terminal: rewritten in place, with the countdown.
	tty := &syncbuf.Buffer{}
	o = f.quick(tty)
	o.From, o.ProgressEvery, o.Handover, o.InPlace = from, 20*time.Millisecond, 300*time.Millisecond, true
	if _, err := f.replayer(nil).Run(ctx, o, f.handler); err != nil {
		t.Fatal(err)
	}
	if s := tty.String(); !strings.Contains(s, "\r\x1b[K") || !strings.Contains(s, "handover ") || !strings.Contains(s, " left") {
		t.Errorf("in-place progress lacks the rewrite or the countdown: %q", s)
	}
}

// TestProgressLineIsBoundedByShardCount: a stream of many shards gets a
// progress line of a bounded length, written each time it changes (a log,
// a pipe): the shards still being read are named, up to a bound, and the
// rest are counted: not a line of tens of kilobytes a second for a stream of
// hundreds.
func TestProgressLineIsBoundedByShardCount(t *testing.T) {
	const shards = 40
	f := newFixture(t, shards)
	ctx := context.Background()
	from := time.Now().Add(-time.Second)
	f.send("e", 80, 0)
	progress := &syncbuf.Buffer{}
	o := f.quick(progress)
	o.From, o.ProgressEvery, o.Handover = from, 10*time.Millisecond, 200*time.Millisecond
	if _, err := f.replayer(nil).Run(ctx, o, f.handler); err != nil {
		t.Fatalf("%v\n%s", err, progress)
	}
	sawMore := false
	for i, l := range strings.Split(progress.String(), "\n") {
		if !strings.Contains(l, " shards caught up, read ") {
			continue
		}
		if n := strings.Count(l, "shardId-"); n > 16 {
			t.Errorf("progress line %d names %d of the %d shards (%d bytes); want at most 16, the rest counted", i, n, shards, len(l))
		}
		if strings.Contains(l, "more shards") {
			sawMore = true
		}
	}
	if !sawMore {
		t.Errorf("no progress line counts the shards it does not name:\n%s", progress)
	}
}

// TestReadingAVersionShowsProgress: use-version reads every item of the
// version to find where it got to on each shard, and the summary reads
// both tables in full: a table of millions of items is minutes of reading,
// so the count so far is shown while it lasts, not only at the end.
func TestReadingAVersionShowsProgress(t *testing.T) {
	f := newFixture(t, 1)
	ctx := context.Background()
	from := time.Now().Add(-time.Second)
	f.send("a", 10, 0)
	if res, err := f.replayer(nil).Run(ctx, func() replay.Options { o := f.quick(nil); o.From = from; return o }(), f.handler); err != nil || !res.Swapped {
		t.Fatalf("rebuild: %+v %v", res, err)
	}
	// Enough items in the stack's table for more than one page of Scan (1 MB).
	pad := strings.Repeat("x", 500)
	for i := 0; i < 3000; i += 25 {
		var reqs []ddbtypes.WriteRequest
		for j := i; j < i+25; j++ {
			reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: map[string]ddbtypes.AttributeValue{
				"pk": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("filler#%d", j)}, "sk": &ddbtypes.AttributeValueMemberS{Value: "x"},
				"pad": &ddbtypes.AttributeValueMemberS{Value: pad}}}})
		}
		if _, err := f.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{f.table: reqs}}); err != nil {
			t.Fatal(err)
		}
	}
	progress := &syncbuf.Buffer{}
	o := f.quick(progress)
	o.Target, o.ProgressEvery, o.Handover = f.table, time.Nanosecond, 100*time.Millisecond
	if res, err := f.replayer(nil).UseVersion(ctx, o, f.handler); err != nil || !res.Swapped {
		t.Fatalf("use-version %s: %+v %v\n%s", f.table, res, err, progress)
	}
	out := progress.String()
	first := regexp.MustCompile(`reading the items of ` + regexp.QuoteMeta(f.table) + `[^\n]*: (\d+) so far`).FindStringSubmatch(out)
	if first == nil {
		t.Fatalf("no progress while reading the items of %s:\n%s", f.table, out)
	}
	if n, _ := strconv.Atoi(first[1]); n == 0 || n >= 3000 {
		t.Errorf("the first progress of the read says %s items so far; want a part of the 3,000", first[1])
	}
	if i, j := strings.Index(out, first[0]), strings.Index(out, "catch "+f.table); j < 0 || i > j {
		t.Errorf("the read's progress comes after the plan, or there is no plan:\n%s", out)
	}
}

// failOnKey is the views table's client for a rebuild interrupted in the
// middle of a batch (Ctrl-C, credentials expiring): the writes of one of
// key's windows fail, while the batch's other items are written.
type failOnKey struct {
	*dynamodb.Client
	pk, window string
}

func (c *failOnKey) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	pk, _ := in.Key["pk"].(*ddbtypes.AttributeValueMemberS)
	sk, _ := in.Key["sk"].(*ddbtypes.AttributeValueMemberS)
	if pk != nil && sk != nil && pk.Value == c.pk && strings.Contains(sk.Value, c.window) {
		return nil, errors.New("connection reset")
	}
	return c.Client.UpdateItem(ctx, in, opts...)
}

// interruptAfter cancels the run once its first batch has been handled.
type interruptAfter struct {
	replay.BatchHandler
	cancel context.CancelFunc
}

func (h interruptAfter) HandleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	resp, err := h.BatchHandler.HandleBatch(ctx, ev)
	h.cancel()
	return resp, err
}

// TestInterruptedRebuildCaughtUpByUseVersion: a rebuild interrupted in the
// middle of a batch leaves some keys of the batch written (their fences
// at the batch's last records) and others not; use-version, which the
// interrupted rebuild names to go on, must still bring every record in
// once, not start after the newest record any item holds. When the
// failing write is of the batch's first record, no batch of the shard
// finished and the table holds no watermark item at all: it must not be
// taken for a table without watermarks (a projection's) whose fences say
// where it got to, but read from the rebuild's start.
func TestInterruptedRebuildCaughtUpByUseVersion(t *testing.T) {
	for _, c := range []struct {
		name string
		// window is k0's window whose writes fail: 10:02 is after some
		// of the batch's records, 10:00 holds its first.
		window, plan string
	}{
		{"after some records", "10:02:00", "the last record of its last finished batch there"},
		{"at the first record", "10:00:00", "no batch of it finished"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 1)
			ctx := context.Background()
			from, a, b := f.sendAcrossTheMargin()
			f.live(ctx, f.liveProcessor())

			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			interrupted := &syncbuf.Buffer{}
			o := f.quick(interrupted)
			o.From, o.BatchSize = from, 100
			res, err := f.replayer(nil).Run(runCtx, o, func(table string, aside *setaside.Sink) (replay.BatchHandler, error) {
				// One of k0's windows fails; the other keys' windows of
				// the later records are written.
				db := &failOnKey{Client: f.db, pk: f.cfg.Name + "#k0", window: c.window}
				return interruptAfter{aggregate.New(f.cfg, state.NewViews(db, table, f.cfg.Aggregates), nil, ""), cancel}, nil
			})
			if err == nil || res == nil || res.Swapped {
				t.Fatalf("interrupted rebuild: %+v %v, want an error and no swap", res, err)
			}
			// Records the interruption kept from being applied were not applied:
			// they are not "skipped" as records that kept failing are.
			if res.Skipped != 0 || strings.Contains(interrupted.String(), "skipped") {
				t.Errorf("the interrupted rebuild skipped %d records as failing:\n%s", res.Skipped, interrupted)
			}
			v2 := res.Target
			if got := f.windows(ctx, v2); len(got) == 0 {
				t.Fatalf("the interrupted rebuild wrote nothing to %s: the test does not interrupt a batch half-way", v2)
			}

			progress := &syncbuf.Buffer{}
			o = f.quick(progress)
			o.Target, o.Margin, o.Pipelines = v2, time.Millisecond, []string{f.cfg.Name}
			res, err = f.replayer(nil).UseVersion(ctx, o, f.handler)
			if err != nil || !res.Swapped {
				t.Fatalf("use-version: %+v %v\n%s", res, err, progress)
			}
			if d := diff(f.windows(ctx, v2), f.reference(slices.Concat(a, b))); d != "" {
				t.Errorf("%s caught up after an interrupted rebuild is not every record once:\n%s\n%s", v2, d, progress)
			}
			if !strings.Contains(strings.Join(res.Plan, "\n"), c.plan) {
				t.Errorf("the plan does not say %q:\n%s", c.plan, strings.Join(res.Plan, "\n"))
			}
		})
	}
}

// TestInterruptedRebuildOfTwoPipelinesCaughtUpByUseVersion: of two
// pipelines rebuilt into one version, the first finished the interrupted
// batch (its watermark item holds the batch's last record) and the second
// failed at the batch's first record (no watermark item of it): the shard
// is where the second got to, its start, not where the first did.
func TestInterruptedRebuildOfTwoPipelinesCaughtUpByUseVersion(t *testing.T) {
	f := newFixture(t, 1)
	ctx := context.Background()
	other := *f
	cfg, err := pipeline.Parse([]byte(strings.Replace(pipelineJSON, `"name":"clicks"`, `"name":"clicks2"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	other.cfg = cfg
	both := func(db *failOnKey, table string) replay.Fanout {
		return replay.Fanout{aggregate.New(f.cfg, state.NewViews(f.db, table, f.cfg.Aggregates), nil, ""),
			aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates), nil, "")}
	}
	from, a, b := f.sendAcrossTheMargin()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	o := f.quick(&syncbuf.Buffer{})
	o.From, o.BatchSize = from, 100
	res, err := f.replayer(nil).Run(runCtx, o, func(table string, aside *setaside.Sink) (replay.BatchHandler, error) {
		return interruptAfter{both(&failOnKey{Client: f.db, pk: cfg.Name + "#k0", window: "10:00:00"}, table), cancel}, nil
	})
	if err == nil || res == nil || res.Swapped {
		t.Fatalf("interrupted rebuild: %+v %v, want an error and no swap", res, err)
	}
	v2 := res.Target

	progress := &syncbuf.Buffer{}
	o = f.quick(progress)
	o.Target, o.Margin, o.Pipelines = v2, time.Millisecond, []string{f.cfg.Name, cfg.Name}
	res, err = f.replayer(nil).UseVersion(ctx, o, func(table string, aside *setaside.Sink) (replay.BatchHandler, error) {
		return both(&failOnKey{Client: f.db}, table), nil
	}) // fails nothing
	if err != nil || !res.Swapped {
		t.Fatalf("use-version: %+v %v\n%s", res, err, progress)
	}
	if plan := strings.Join(res.Plan, "\n"); !strings.Contains(plan, "pipeline clicks2 finished no batch of it") {
		t.Errorf("the plan does not name the pipeline that finished no batch:\n%s", plan)
	}
	want := f.reference(slices.Concat(a, b))
	for _, p := range []*fixture{f, &other} {
		if d := diff(p.windows(ctx, v2), want); d != "" {
			t.Errorf("pipeline %s of %s caught up after an interrupted rebuild is not every record once:\n%s\n%s", p.cfg.Name, v2, d, progress)
		}
	}
}

// sendAcrossTheMargin sends 50 events of minute 0 and, more than the
// catch-up's margin later, 50 of minute 3, so that one batch spans more
// than the margin; from is a time just before the first.
func (f *fixture) sendAcrossTheMargin() (from time.Time, a, b []stream.Envelope) {
	time.Sleep(50 * time.Millisecond)
	from = time.Now()
	time.Sleep(50 * time.Millisecond)
	a = f.send("a", 50, 0)
	time.Sleep(200 * time.Millisecond) // the batch spans more than the margin
	b = f.send("b", 50, 3)
	return from, a, b
}
