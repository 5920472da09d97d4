package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/cli/clitest"
	"github.com/tributary-dev/tributary/pkg/archive"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

func TestParseFrom(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Time
		err  string
	}{
		{"2026-11-29T10:00:00Z", time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), ""},
		{"90m", now.Add(-90 * time.Minute), ""},
		{"-1h", time.Time{}, "must be positive"},
		{"0s", time.Time{}, "must be positive"},
		{"yesterday", time.Time{}, "neither an RFC 3339 time"},
		{"2030-01-01T00:00:00Z", time.Time{}, "in the future"},
	} {
		got, err := parseFrom(c.in, now)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) || !got.Equal(c.want) {
			t.Errorf("parseFrom(%q) = %v, %v; want %v (error %q)", c.in, got, err, c.want, c.err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "-from ") {
			t.Errorf("parseFrom(%q) error %q does not name -from", c.in, err)
		}
	}
}

const pipelineJSON = `{"name":"p","key":"key","windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count"]}`

type result struct {
	code           int
	stdout, stderr string
}

func cmd(ctx context.Context, env map[string]string, args ...string) result {
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code := run(ctx, args, lookup, time.Now(), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// TestBadCommandLines: every flag out of range or nonsensical is refused
// with exit 2 and one line naming it, before any AWS call (no endpoint is
// set up here); -h exits 0 with the flags.
func TestBadCommandLines(t *testing.T) {
	ctx := context.Background()
	env := map[string]string{"PIPELINE_CONFIG": pipelineJSON}
	base := []string{"-parameter", "/t/views", "-stream", "events"}
	with := func(cmd string, extra ...string) []string { return append(append([]string{cmd}, base...), extra...) }
	big := strings.Repeat("b", 100_000) // a value pasted by mistake
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "a command is required"},
		{[]string{"rebuild-all"}, nil, `unknown command "rebuild-all"`},
		{with("rebuild"), nil, "-from is required"},
		{with("rebuild", "-from", "2030-01-01T00:00:00Z"), nil, "-from 2030-01-01T00:00:00Z is in the future"},
		{with("rebuild", "-from", "-1h"), nil, "-from -1h: a duration ago must be positive"},
		{with("rebuild", "-from", "soon"), nil, `-from "soon" is neither`},
		{with("rebuild", "-from", "1h", "-handover", "-1s"), nil, "-handover -1s: must be from 30s to 1h0m0s"},
		{with("rebuild", "-from", "1h", "-handover", "1s"), nil, "-handover 1s: must be from 30s to 1h0m0s"},
		{with("rebuild", "-from", "1h", "-handover", "5s"), map[string]string{"VIEWS_REFRESH_SECONDS": "10"}, "-handover 5s: must be from 10s"},
		{with("rebuild", "-from", "1h", "-handover", "2h"), nil, "-handover 2h0m0s: must be from 30s to 1h0m0s"},
		{with("rebuild", "-from", "1h", "-handover", "soon"), nil, `invalid value "soon" for flag -handover`},
		{with("rebuild", "-from", "1h"), map[string]string{"VIEWS_REFRESH_SECONDS": "-3"}, "VIEWS_REFRESH_SECONDS"},
		{with("rebuild", "-from", "1h", "-to-table", "a b"), nil, `-to-table "a b": a DynamoDB table name`},
		{with("rebuild", "-from", "1h", "-output-stream", "events"), nil, "-output-stream events is the events stream"},
		{with("rebuild", "-from", "1h", "-pipeline", "/no/such/file.json"), nil, "-pipeline open /no/such/file.json"},
		{with("rebuild", "-from", "1h"), map[string]string{}, "-pipeline not given, and"},
		{with("rebuild", "-from", "1h", "-nope"), nil, "flag provided but not defined: -nope"},
		{with("rebuild", "-from", "1h", "-archive-bucket", "Bad_Bucket"), nil, `-archive-bucket "Bad_Bucket": an S3 bucket name`},
		{with("rebuild", "-from", "1h", "-archive-until", "30m"), nil, "-archive-until needs -archive-bucket"},
		{with("rebuild", "-from", "1h", "-archive-bucket", "arch", "-archive-until", "soon"), nil, `-archive-until "soon" is neither`},
		{with("rebuild", "-from", "1h", "-archive-bucket", "arch", "-archive-until", "2030-01-01T00:00:00Z"), nil, "-archive-until 2030-01-01T00:00:00Z is in the future"},
		{with("use-version", "-table", "views-v2", "-archive-bucket", "arch"), nil, "flag provided but not defined: -archive-bucket"},
		{with("rebuild", "-from", "1h", "stray"), nil, `unexpected argument "stray"`},
		{[]string{"rebuild", "-stream", "events", "-from", "1h"}, nil, "-parameter is required"},
		{[]string{"rebuild", "-parameter", "bad name!", "-stream", "events", "-from", "1h"}, nil, `-parameter "bad name!"`},
		{[]string{"rebuild", "-parameter", "/t/views", "-from", "1h"}, nil, "-stream is required"},
		{with("use-version"), nil, "-table is required"},
		{with("use-version", "-table", "views-v2", "-margin", "0s"), nil, "-margin 0s: must be from 1s to 1h0m0s"},
		{with("rollback", "-margin", "-5m"), nil, "-margin -5m0s: must be from 1s"},
		{with("rollback", "-table", "x"), nil, "flag provided but not defined: -table"},
		{[]string{"delete-version", "-parameter", "/t/views"}, nil, "-table is required"},
		{[]string{"delete-version", "-parameter", "/t/views", "-table", "x", "-dry-run"}, nil, "flag provided but not defined: -dry-run"},
		{[]string{"versions", "-parameter", "/t/views", "-stream", "bad/stream"}, nil, `-stream "bad/stream"`},
		// A value pasted by mistake is repeated cut, not whole.
		{[]string{big}, nil, `unknown command "` + big[:256] + `"…`},
		{with("rebuild", "-from", big), nil, `-from "` + big[:256] + `"… is neither`},
		{with("rebuild", "-from", "-"+strings.Repeat("1s", 50_000)), nil, "-from -1s1s1s"},
		{with("rebuild", "-from", "1h", "-archive-bucket", big), nil, `-archive-bucket "` + big[:256] + `"…: an S3 bucket name`},
		{with("rebuild", "-from", "1h", "-archive-bucket", "arch", "-archive-until", big), nil, `-archive-until "` + big[:256] + `"… is neither`},
	} {
		e := env
		if c.env != nil {
			e = c.env
			if _, ok := e["PIPELINE_CONFIG"]; !ok && len(e) > 0 {
				e["PIPELINE_CONFIG"] = pipelineJSON
			}
		}
		r := cmd(ctx, e, c.args...)
		name := strings.Join(c.args, " ")
		if r.code != 2 {
			t.Errorf("replay %s: exit %d, want 2; stderr %q", name, r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("replay %.200s: stderr %.300q, want it to say %.300q", name, r.stderr, c.want)
		}
		if len(r.stderr) > 2000 {
			t.Errorf("replay %.200s: %d bytes on stderr: a value repeated whole", name, len(r.stderr))
		}
		if c.args != nil && len(c.args) > 0 && c.args[0] != "rebuild-all" && c.args[0] != big {
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
				t.Errorf("replay %s: %d lines on stderr, want one:\n%s", name, n+1, r.stderr)
			}
			if strings.Count(r.stderr, "replay "+c.args[0]+":") != 1 || strings.Contains(r.stderr, "replay: replay") {
				t.Errorf("replay %s: prefix repeated: %q", name, r.stderr)
			}
		}
	}
	for _, c := range []string{"-h", "rebuild -h", "use-version -h", "rollback -h", "versions -h", "current -h", "delete-version -help"} {
		r := cmd(ctx, env, strings.Fields(c)...)
		if r.code != 0 || !strings.Contains(r.stdout, "AWS_REGION") {
			t.Errorf("replay %s: exit %d, stdout %q; want 0 and the help with where the region comes from", c, r.code, r.stdout)
		}
	}
	if r := cmd(ctx, env, "rebuild", "-h"); !strings.Contains(r.stdout, "-handover") || !strings.Contains(r.stdout, "-allow-empty") {
		t.Errorf("rebuild -h lacks its flags:\n%s", r.stdout)
	}
}

// setAWS points the commands at srv, with the region given (or none).
func setAWS(t *testing.T, endpoint, region string) {
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": region, "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none} {
		t.Setenv(k, v)
	}
}

// TestRebuildRefusesToLeaveOutASharingPipeline: rebuild -pipeline
// pipelines/a.json, while the current views table also holds pipeline b's
// windows (its watermark items) and b's file sits beside a's, is refused
// before anything is replayed: the new version would hold a's windows
// alone, and b's readers would find none. Given both (or the directory),
// the check passes.
func TestRebuildRefusesToLeaveOutASharingPipeline(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	if err := state.CreateTable(ctx, db, "views"); err != nil {
		t.Fatal(err)
	}
	if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/t/views"), Value: aws.String("views"), Type: ssmtypes.ParameterTypeString}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"a", "b"} {
		doc := strings.Replace(pipelineJSON, `"name":"p"`, `"name":"`+name+`"`, 1)
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := pipeline.Parse([]byte(strings.Replace(pipelineJSON, `"name":"p"`, `"name":"b"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := state.NewViews(db, "views", b.Aggregates).SaveWatermark(ctx, "b", "shardId-000000000000", b.NewWatermark()); err != nil {
		t.Fatal(err)
	}
	setAWS(t, srv.Endpoint(), "us-east-1")
	env := map[string]string{"VIEWS_PARAMETER_NAME": "/t/views", "EVENTS_STREAM_NAME": "events"}
	r := cmd(ctx, env, "rebuild", "-from", "1h", "-pipeline", filepath.Join(dir, "a.json"), "-dry-run")
	if r.code != 2 || !strings.Contains(r.stderr, "-pipeline leaves out b ("+filepath.Join(dir, "b.json")+"), whose windows the current views table views holds") ||
		!strings.Contains(r.stderr, "-pipeline "+dir+"/ takes every file") {
		t.Errorf("rebuild of a alone: %+v", r)
	}
	r = cmd(ctx, env, "rebuild", "-from", "1h", "-pipeline", dir+"/", "-dry-run")
	if strings.Contains(r.stderr, "leaves out") {
		t.Errorf("rebuild of the directory: %+v", r)
	}
}

// TestCommands drives the tools as an operator would against the stand-in:
// no region is refused; delete-version of tables that are not versions is
// refused (exit 3) and deletes nothing; a rebuild from before the stream's
// retention creates nothing; a rebuild swaps; rollback to an empty table is
// refused, then allowed with -allow-empty; versions lists both; a rebuilt
// version is deleted only with -yes.
func TestCommands(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	kin := kinesis.NewFromConfig(cfg)
	for _, tb := range []string{"views", "timelines"} {
		if err := state.CreateTable(ctx, db, tb); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/t/views"), Value: aws.String("views"), Type: ssmtypes.ParameterTypeString}); err != nil {
		t.Fatal(err)
	}
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("events"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var entries []kintypes.PutRecordsRequestEntry
	for i := range 12 {
		e := stream.Envelope{ID: fmt.Sprint("e", i), Type: "click", Key: fmt.Sprint("k", i%3), OccurredAt: now, SentAt: now, ReceivedAt: now, Data: json.RawMessage(`{}`)}
		b, _ := json.Marshal(&e)
		entries = append(entries, kintypes.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(e.Key)})
	}
	if _, err := kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("events"), Records: entries}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PIPELINE_CONFIG": pipelineJSON, "VIEWS_PARAMETER_NAME": "/t/views", "EVENTS_STREAM_NAME": "events", "VIEWS_REFRESH_SECONDS": "1"}
	exists := func(table string) bool {
		_, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		return err == nil
	}

	setAWS(t, srv.Endpoint(), "")
	if r := cmd(ctx, env, "current"); r.code != 2 || !strings.Contains(r.stderr, "no AWS region is set") {
		t.Errorf("current without a region: %+v, want exit 2 naming the region", r)
	}
	setAWS(t, srv.Endpoint(), "us-east-1")

	steps := []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"current"}, 0, "views (parameter /t/views version 1)", ""},
		{[]string{"delete-version", "-table", "timelines", "-yes"}, 3, "", "refused -table: timelines is not a version"},
		{[]string{"delete-version", "-table", "views", "-yes"}, 3, "", "refused -table: views is the current views table"},
		{[]string{"delete-version", "-table", "views-v4", "-yes"}, 3, "", "views-v4 does not exist"},
		{[]string{"use-version", "-table", "timelines", "-handover", "1s"}, 3, "", "refused -table: timelines is not a version"},
		{[]string{"rebuild", "-from", "25h", "-handover", "1s"}, 3, "", "refused -from"},
		{[]string{"rebuild", "-from", "1h", "-handover", "1s", "-to-table", "timelines"}, 3, "", "refused -to-table: timelines is not named views-vN"},
		{[]string{"rollback", "-handover", "1s"}, 3, "", "refused: parameter /t/views has named only views"},
		{[]string{"rebuild", "-from", "1h", "-dry-run"}, 0, "", "dry run: create table views-v2 as a copy of views"},
		{[]string{"rebuild", "-from", "1h", "-handover", "1s"}, 0, "views-v2 is current (was views): read 12, applied 12", "summary: compared the item counts"},
		{[]string{"rollback", "-handover", "1s"}, 3, "", "refused: views holds no items while views-v2 (current) holds some"},
		{[]string{"rollback", "-handover", "1s", "-allow-empty"}, 0, "views is current (was views-v2)", "catch views (0 items) up"},
		{[]string{"versions"}, 0, "* views (current)", ""},
		{[]string{"delete-version", "-table", "views-v2"}, 0, "dry run: nothing deleted", "checked: views-v2 was created by replay rebuild"},
	}
	for _, s := range steps {
		r := cmd(ctx, env, s.args...)
		name := strings.Join(s.args, " ")
		if r.code != s.code || !strings.Contains(r.stdout, s.out) || !strings.Contains(r.stderr, s.err) {
			t.Errorf("replay %s: exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", name, r.code, s.code, r.stdout, s.out, r.stderr, s.err)
		}
		if strings.Contains(r.stderr, "replay: replay") {
			t.Errorf("replay %s: doubled prefix: %q", name, r.stderr)
		}
	}
	for _, tb := range []string{"timelines", "views", "views-v2"} {
		if !exists(tb) {
			t.Errorf("%s was deleted", tb)
		}
	}
	if exists("views-v3") {
		t.Errorf("a refused rebuild created views-v3")
	}
	if r := cmd(ctx, env, "versions"); !strings.Contains(r.stdout, "views-v2: 4 items; created by replay rebuild") || !strings.Contains(r.stdout, "reached shardId-000000000000 sequence number") {
		t.Errorf("versions:\n%s", r.stdout)
	}
	if r := cmd(ctx, env, "delete-version", "-table", "views-v2", "-yes"); r.code != 0 || exists("views-v2") {
		t.Errorf("delete-version -yes of a rebuilt version: %+v; exists %v", r, exists("views-v2"))
	}
}

// TestVersionsSaysSamplesAreNoPosition: a table that holds records make
// invoke sent lists its real positions, and says the samples are not one.
func TestVersionsSaysSamplesAreNoPosition(t *testing.T) {
	var out bytes.Buffer
	printVersions(&out, "/t/views", []replay.VersionInfo{{Table: "views", Number: 1, Current: true, Items: 5, Samples: true,
		Positions: []replay.Position{{Shard: "shardId-000000000000", Sequence: "12"}}}})
	for _, want := range []string{"reached shardId-000000000000 sequence number 12", "also holds console samples make invoke sent (shard shardId-make-invoke, which no stream has): not a position"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("versions:\n%s\nwant %q", out.String(), want)
		}
	}
	if strings.Count(out.String(), "reached ") != 1 {
		t.Errorf("versions:\n%s\nwant one position", out.String())
	}
}

// TestVersionsBoundsTheShardsListed: a version of a stream with thousands
// of shards lists the first few and counts the rest, naming the one that
// is furthest behind, rather than a line for every shard.
func TestVersionsBoundsTheShardsListed(t *testing.T) {
	base := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	var ps []replay.Position
	for i := range 5000 {
		p := replay.Position{Shard: fmt.Sprintf("shardId-%012d", i), Sequence: strconv.Itoa(i), Arrival: base.Add(time.Duration(i%97) * time.Minute)}
		switch i {
		case 4321:
			p.Arrival = base.Add(-time.Hour)
		case 4322:
			p.Gone, p.Arrival = true, time.Time{}
		}
		ps = append(ps, p)
	}
	var out bytes.Buffer
	printVersions(&out, "/t/views", []replay.VersionInfo{{Table: "views", Number: 1, Current: true, Items: 5, Positions: ps}})
	if n := strings.Count(out.String(), "reached shardId-"); n != maxPositionsShown {
		t.Errorf("versions lists %d shards; want %d", n, maxPositionsShown)
	}
	want := fmt.Sprintf("and %d more shards: the furthest behind shardId-000000004321 (its last record arrived %s); 1 no longer in the stream", 5000-maxPositionsShown, fmtTime(base.Add(-time.Hour)))
	if !strings.Contains(out.String(), want) {
		t.Errorf("versions:\n%.2000s\nwant %q", out.String(), want)
	}
}

// TestRebuildBackfillsFromTheArchive: a pipeline file added beside the one
// running is backfilled by a rebuild given both files, reading the
// archive up to -archive-until and the stream after it: the new version
// holds both pipelines' windows, and the command says how many records
// came from where. Two files declaring one pipeline are refused.
func TestRebuildBackfillsFromTheArchive(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	kin := kinesis.NewFromConfig(cfg)
	s3c := archive.NewS3Client(cfg)
	liveViews(ctx, t, cfg, db, kin)
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("arch")}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	put := func(prefix string) {
		var entries []kintypes.PutRecordsRequestEntry
		for i := range 6 {
			e := stream.Envelope{ID: fmt.Sprint(prefix, i), Type: "click", Key: fmt.Sprint("k", i%3), OccurredAt: now, SentAt: now, ReceivedAt: now, Data: json.RawMessage(`{}`)}
			b, _ := json.Marshal(&e)
			entries = append(entries, kintypes.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(e.Key)})
		}
		if _, err := kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("events"), Records: entries}); err != nil {
			t.Fatal(err)
		}
	}
	put("before")
	time.Sleep(50 * time.Millisecond)
	seam := time.Now().UTC()
	time.Sleep(50 * time.Millisecond)
	put("after")
	// The archive function's work: every record of the stream into the bucket.
	sum, err := kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("events")})
	if err != nil {
		t.Fatal(err)
	}
	it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("events"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	var ev events.KinesisEvent
	for _, r := range recs.Records {
		ev.Records = append(ev.Records, events.KinesisEventRecord{EventID: "shardId-000000000000:" + aws.ToString(r.SequenceNumber), EventSourceArn: aws.ToString(sum.StreamDescriptionSummary.StreamARN),
			Kinesis: events.KinesisRecord{SequenceNumber: aws.ToString(r.SequenceNumber), PartitionKey: aws.ToString(r.PartitionKey), Data: r.Data,
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: aws.ToTime(r.ApproximateArrivalTimestamp)}}})
	}
	if err := archive.NewArchiver(s3c, "arch").Handle(ctx, ev); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	running, added, again := filepath.Join(dir, "p.json"), filepath.Join(dir, "q.json"), filepath.Join(dir, "p2.json")
	for f, doc := range map[string]string{running: pipelineJSON, added: strings.Replace(pipelineJSON, `"name":"p"`, `"name":"q"`, 1), again: pipelineJSON} {
		if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"VIEWS_PARAMETER_NAME": "/t/views", "EVENTS_STREAM_NAME": "events", "VIEWS_REFRESH_SECONDS": "1", "ARCHIVE_BUCKET_NAME": "arch"}
	setAWS(t, srv.Endpoint(), "us-east-1")
	if r := cmd(ctx, env, "rebuild", "-pipeline", running, "-pipeline", again, "-from", "1h"); r.code != 2 || !strings.Contains(r.stderr, `both declare pipeline "p"`) {
		t.Errorf("two files of one pipeline: %+v, want exit 2 naming it", r)
	}
	r := cmd(ctx, env, "rebuild", "-pipeline", running, "-pipeline", added, "-from", "1h", "-archive-until", seam.Format(time.RFC3339Nano), "-handover", "1s")
	if r.code != 0 || !strings.Contains(r.stdout, "views-v2 is current (was views): read 12 (6 from the archive, before") || !strings.Contains(r.stdout, "; 6 from the stream)") {
		t.Fatalf("rebuild of both pipelines from the archive and the stream: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "note: pipeline") {
		t.Errorf("a rebuild from within the retention warned of expiring windows: %s", r.stderr)
	}
	// From further back than a pipeline keeps its windows: said before
	// anything is read.
	short := filepath.Join(dir, "short.json")
	if err := os.WriteFile(short, []byte(strings.Replace(pipelineJSON, `"name":"p"`, `"name":"p","retention":"24h"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := cmd(ctx, env, "rebuild", "-pipeline", short, "-pipeline", added, "-from", "48h", "-dry-run"); !strings.Contains(r.stderr, "note: pipeline p keeps a window 24h0m0s after it ends (its retention)") {
		t.Errorf("a rebuild from 48h ago of a pipeline kept 24h: exit %d, stderr %s; want a note that its older windows expire", r.code, r.stderr)
	}
	cfgP, _ := pipeline.Parse([]byte(pipelineJSON))
	for _, name := range []string{"p", "q"} {
		n := 0
		for k := range 3 {
			vs, err := state.NewViews(db, "views-v2", cfgP.Aggregates).Query(ctx, name, fmt.Sprint("k", k), cfgP.Windows[0].ID(), now.Add(-time.Hour), now.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				n += int(v.Result.Count)
			}
		}
		if n != 12 {
			t.Errorf("pipeline %s counts %d events in views-v2, want all 12", name, n)
		}
	}
}

// TestPipelineFlagTakesADirectory: -pipeline pipelines/ stands for every
// aggregation file there, and leaves the join and CEP files out (a rebuild
// given those would be refused). The shipped files (testdata/shipped-pipelines):
// a pipeline you add to pipelines/ does not change what this test expects.
func TestPipelineFlagTakesADirectory(t *testing.T) {
	got, err := aggregationFiles("../../testdata/shipped-pipelines")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, filepath.Base(p))
	}
	if want := []string{"checkouts.json", "pageviews.json"}; !slices.Equal(names, want) {
		t.Errorf("-pipeline ../../testdata/shipped-pipelines = %v, want %v", names, want)
	}
	if got, err := aggregationFiles("../../pipelines/pageviews.json"); err != nil || len(got) != 1 {
		t.Errorf("-pipeline of a file = %v, %v: want the file", got, err)
	}
}

// TestInterruptedHandoverSaysWhatWasDone: Ctrl-C during the handover,
// after the swap, says that the swap was made and how to catch the new
// version up, not only "interrupted".
func TestInterruptedHandoverSaysWhatWasDone(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	kin := kinesis.NewFromConfig(cfg)
	liveViews(ctx, t, cfg, db, kin)
	now := time.Now().UTC()
	e := stream.Envelope{ID: "e0", Type: "click", Key: "k0", OccurredAt: now, SentAt: now, ReceivedAt: now, Data: json.RawMessage(`{}`)}
	b, _ := json.Marshal(&e)
	if _, err := kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("events"), Data: b, PartitionKey: aws.String(e.Key)}); err != nil {
		t.Fatal(err)
	}
	setAWS(t, srv.Endpoint(), "us-east-1")
	env := map[string]string{"PIPELINE_CONFIG": pipelineJSON, "VIEWS_PARAMETER_NAME": "/t/views", "EVENTS_STREAM_NAME": "events", "VIEWS_REFRESH_SECONDS": "1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stderr := &clitest.CancelOn{Marker: "swapped: parameter /t/views now names views-v2", Cancel: cancel}
	var stdout bytes.Buffer
	code := run(rctx, []string{"rebuild", "-from", "1h", "-handover", "30s"}, lookup, time.Now(), &stdout, stderr)
	last := strings.TrimSpace(stderr.String())
	last = last[strings.LastIndex(last, "\n")+1:]
	if code != 130 || !strings.Contains(last, "interrupted") || !strings.Contains(last, "swapped to views-v2, but the handover was cut short") || !strings.Contains(last, "replay use-version -table views-v2 catches it up") {
		t.Errorf("Ctrl-C in the handover: exit %d, last line %q; want 130 saying the swap was made and how to catch up", code, last)
	}
}

// liveViews sets up what a rebuild starts from on the stand-in: the views
// table "views", the parameter /t/views naming it, and the events stream
// "events" of one shard.
func liveViews(ctx context.Context, t *testing.T, cfg aws.Config, db *dynamodb.Client, kin *kinesis.Client) {
	t.Helper()
	if err := state.CreateTable(ctx, db, "views"); err != nil {
		t.Fatal(err)
	}
	if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/t/views"), Value: aws.String("views"), Type: ssmtypes.ParameterTypeString}); err != nil {
		t.Fatal(err)
	}
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("events"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
}

// TestRollbackCatchesUpEveryPipeline: on the stock pipelines/ directory
// (two aggregation pipelines sharing the views table), the rollback the
// make local-up banner and docs/changes.md print, -pipeline once per file
// or the directory, runs: it catches the previous version up with every
// pipeline given and points the readers back at it; use-version likewise.
func TestRollbackCatchesUpEveryPipeline(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	kin := kinesis.NewFromConfig(cfg)
	if err := state.CreateTable(ctx, db, "views"); err != nil {
		t.Fatal(err)
	}
	if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/t/views"), Value: aws.String("views"), Type: ssmtypes.ParameterTypeString}); err != nil {
		t.Fatal(err)
	}
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("events"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var entries []kintypes.PutRecordsRequestEntry
	for i := range 8 {
		typ, data := "page_view", `{"ms":12}`
		if i%2 == 1 {
			typ, data = "checkout", `{"amount":30}`
		}
		e := stream.Envelope{ID: fmt.Sprint("e", i), Type: typ, Key: fmt.Sprint("k", i%3), OccurredAt: now, SentAt: now, ReceivedAt: now, Data: json.RawMessage(data)}
		b, _ := json.Marshal(&e)
		entries = append(entries, kintypes.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(e.Key)})
	}
	if _, err := kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("events"), Records: entries}); err != nil {
		t.Fatal(err)
	}
	setAWS(t, srv.Endpoint(), "us-east-1")
	env := map[string]string{"VIEWS_PARAMETER_NAME": "/t/views", "EVENTS_STREAM_NAME": "events", "VIEWS_REFRESH_SECONDS": "1"}
	const stock = "../../pipelines/"
	each := []string{"-pipeline", stock + "checkouts.json", "-pipeline", stock + "pageviews.json"}
	steps := []struct {
		args     []string
		out, err string
	}{
		{append([]string{"rebuild", "-from", "1h", "-handover", "1s"}, each...), "views-v2 is current (was views)", ""},
		{[]string{"rollback", "-pipeline", stock, "-handover", "1s", "-allow-empty"}, "views is current (was views-v2)", "catch views (0 items) up"},
		{append([]string{"use-version", "-table", "views-v2", "-handover", "1s"}, each...), "views-v2 is current (was views)", "catch views-v2"},
		{append([]string{"rollback", "-handover", "1s", "-allow-empty"}, each...), "views is current (was views-v2)", ""},
	}
	for _, s := range steps {
		r := cmd(ctx, env, s.args...)
		if r.code != 0 || !strings.Contains(r.stdout, s.out) || !strings.Contains(r.stderr, s.err) {
			t.Fatalf("replay %s: exit %d, want 0\nstdout %q (want %q)\nstderr %q (want %q)", strings.Join(s.args, " "), r.code, r.stdout, s.out, r.stderr, s.err)
		}
	}
	// Both pipelines' watermark items are in the version rolled back to:
	// it was caught up with each.
	for _, p := range []string{"pageviews", "checkouts"} {
		wms, err := state.NewViews(db, "views", nil).Watermarks(ctx, p)
		if err != nil || len(wms) == 0 {
			t.Errorf("views after the rollback holds no watermark of %s (%v): not caught up with it", p, err)
		}
	}
}

// TestSharingCheckReadsTheTable: which pipelines a rebuild or rollback
// must be given is what the current views table holds, not which files sit
// beside the -pipeline file: a file copied elsewhere, or beside a file that
// does not load, is still refused naming the pipeline left out (and the
// file that does not load); -leave-out drops a pipeline that no longer
// runs on purpose.
func TestSharingCheckReadsTheTable(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	if err := state.CreateTable(ctx, db, "views"); err != nil {
		t.Fatal(err)
	}
	if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/t/views"), Value: aws.String("views"), Type: ssmtypes.ParameterTypeString}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		p, err := pipeline.Parse([]byte(strings.Replace(pipelineJSON, `"name":"p"`, `"name":"`+name+`"`, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := state.NewViews(db, "views", p.Aggregates).SaveWatermark(ctx, name, "shardId-000000000000", p.NewWatermark()); err != nil {
			t.Fatal(err)
		}
	}
	alone, broken := t.TempDir(), t.TempDir()
	a := []byte(strings.Replace(pipelineJSON, `"name":"p"`, `"name":"a"`, 1))
	for _, f := range []struct{ path, doc string }{
		{filepath.Join(alone, "a.json"), string(a)},
		{filepath.Join(broken, "a.json"), string(a)},
		{filepath.Join(broken, "b.json"), strings.Replace(pipelineJSON, `"name":"p"`, `"name":"b"`, 1)},
		{filepath.Join(broken, "zz.json"), `{"name":"zz",`},
	} {
		if err := os.WriteFile(f.path, []byte(f.doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setAWS(t, srv.Endpoint(), "us-east-1")
	env := map[string]string{"VIEWS_PARAMETER_NAME": "/t/views", "EVENTS_STREAM_NAME": "events"}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"rebuild", "-from", "1h", "-pipeline", filepath.Join(alone, "a.json")},
			[]string{"-pipeline leaves out b, whose windows the current views table views holds"}},
		{[]string{"rollback", "-pipeline", filepath.Join(alone, "a.json")},
			[]string{"-pipeline leaves out b, whose windows the current views table views holds"}},
		{[]string{"rebuild", "-from", "1h", "-pipeline", filepath.Join(broken, "a.json")},
			[]string{"-pipeline leaves out b, whose windows the current views table views holds", filepath.Join(broken, "zz.json") + ": ", "does not load"}},
	} {
		r := cmd(ctx, env, append(c.args, "-dry-run")...)
		if r.code != 2 {
			t.Errorf("replay %s: exit %d, want 2 (refused); stderr %q", strings.Join(c.args, " "), r.code, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("replay %s: stderr %q, want it to say %q", strings.Join(c.args, " "), r.stderr, w)
			}
		}
	}
	// A directory without b's file is not offered as the way to give it.
	if r := cmd(ctx, env, "rebuild", "-from", "1h", "-pipeline", filepath.Join(alone, "a.json"), "-dry-run"); strings.Contains(r.stderr, alone+"/ takes every file") {
		t.Errorf("the refusal offers %s/, which lacks b's file: %q", alone, r.stderr)
	}
	r := cmd(ctx, env, "rebuild", "-from", "1h", "-pipeline", filepath.Join(alone, "a.json"), "-leave-out", "b", "-dry-run")
	if strings.Contains(r.stderr, "leaves out") || strings.Contains(r.stderr, "-leave-out") {
		t.Errorf("rebuild -leave-out b: %+v", r)
	}
}

// TestRebuildRefusesChangedAggregates: the deployed pageviews pipeline (the
// template the running stack was deployed from) has six aggregates; a
// rebuild, rollback or use-version given its file changed in place to
// "aggregates":["count"] is refused before anything is created or
// swapped, naming the pipeline, both sets of aggregates and the docs'
// way to change them — the live function could not merge the version's
// window states and would fail its batches. The deployed file, or one
// that only reports other quantiles (the same sketch), is not refused;
// with no template to read, the command says so in one line and goes on.
func TestRebuildRefusesChangedAggregates(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	liveViews(ctx, t, cfg, db, kinesis.NewFromConfig(cfg))
	fixture, err := os.ReadFile("testdata/pageviews.template.json")
	if err != nil {
		t.Fatal(err)
	}
	deployed, err := os.ReadFile("../../pipelines/pageviews.json")
	if err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	write := func(name string, fromTo ...string) string {
		t.Helper()
		doc := string(deployed)
		for i := 0; i < len(fromTo); i += 2 {
			if !strings.Contains(doc, fromTo[i]) {
				t.Fatalf("pipelines/pageviews.json no longer holds %s", fromTo[i])
			}
			doc = strings.Replace(doc, fromTo[i], fromTo[i+1], 1)
		}
		path := filepath.Join(files, name)
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	same := write("same.json")
	counted := write("count.json", `"value": "data.ms",`+"\n", "", `"aggregates": ["count", "sum", "min", "max", "mean", "quantiles"],
  "quantiles": [0.5, 0.99],`, `"aggregates": ["count"],`)
	requantiled := write("quantiles.json", `"quantiles": [0.5, 0.99]`, `"quantiles": [0.9]`)
	byKey := write("bykey.json", `"dedupeLedger": "range"`, `"dedupeLedger": "key"`)

	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "infra", "cdk.out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "infra", "cdk.out", "Tributary.template.json"), fixture, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	setAWS(t, srv.Endpoint(), "us-east-1")
	env := map[string]string{"VIEWS_PARAMETER_NAME": "/t/views", "EVENTS_STREAM_NAME": "events", "VIEWS_REFRESH_SECONDS": "1"}
	for _, args := range [][]string{
		{"rebuild", "-from", "1h", "-handover", "1s", "-pipeline", counted},
		{"rollback", "-handover", "1s", "-pipeline", counted},
		{"use-version", "-table", "views-v2", "-handover", "1s", "-pipeline", counted},
	} {
		r := cmd(ctx, env, args...)
		want := "-pipeline " + counted + ": pipeline pageviews has aggregates count, but the pageviews the template deploys (infra/cdk.out/Tributary.template.json) has aggregates count, sum, min, max, mean, quantiles"
		if r.code != 2 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, `docs/changes.md, "Changing a pipeline's aggregates"`) ||
			strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("replay %s: exit %d, stderr %q; want 2 and one line saying %q", strings.Join(args, " "), r.code, r.stderr, want)
		}
	}
	// A replay that keeps its dedupe ids in the other layout: after the
	// handover the live function would look for them in its own, and
	// copies of replayed events would count again.
	if r := cmd(ctx, env, "rebuild", "-from", "1h", "-handover", "1s", "-pipeline", byKey); r.code != 2 ||
		!strings.Contains(r.stderr, "-pipeline "+byKey+`: pipeline pageviews keeps its dedupe ids by key (dedupeLedger "key"), but the pageviews the template deploys (infra/cdk.out/Tributary.template.json) keeps them by range ("range")`) {
		t.Errorf("replay rebuild -pipeline %s: exit %d, stderr %q; want 2 and the layouts named", byKey, r.code, r.stderr)
	}
	if current, _, err := replay.NewRegistry(ssm.NewFromConfig(cfg), "/t/views").Current(ctx); err != nil || current != "views" {
		t.Errorf("after the refusals the parameter names %q (%v), want views", current, err)
	}
	if _, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("views-v2")}); err == nil {
		t.Errorf("a refused rebuild created views-v2")
	}
	for _, f := range []string{same, requantiled} {
		if r := cmd(ctx, env, "rebuild", "-from", "1h", "-pipeline", f, "-dry-run"); r.code != 0 || strings.Contains(r.stderr, "aggregates") {
			t.Errorf("rebuild -pipeline %s (the deployed aggregates): exit %d, stderr %q; want 0", f, r.code, r.stderr)
		}
	}
	// While a make local-up runs, a synth since (make invoke after the
	// edit) rewrote infra/cdk.out with the changed file; the copy of the
	// template the running stack was deployed from decides.
	synthesized := strings.Replace(string(fixture), `\"aggregates\":[\"count\",\"sum\",\"min\",\"max\",\"mean\",\"quantiles\"],\"quantiles\":[0.5,0.99]`, `\"aggregates\":[\"count\"]`, 1)
	synthesized = strings.Replace(synthesized, `\"value\":\"data.ms\",`, "", 1)
	if synthesized == string(fixture) {
		t.Fatal("the fixture's aggregates were not replaced")
	}
	if err := os.WriteFile(filepath.Join(root, "infra", "cdk.out", "Tributary.template.json"), []byte(synthesized), 0o644); err != nil {
		t.Fatal(err)
	}
	running := filepath.Join(root, ".build", "up", strings.ReplaceAll(strings.TrimPrefix(srv.Endpoint(), "http://"), ":", "-"), "Tributary.template.json")
	if err := os.MkdirAll(filepath.Dir(running), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(running, fixture, 0o644); err != nil {
		t.Fatal(err)
	}
	local := map[string]string{"AWS_ENDPOINT_URL": srv.Endpoint()}
	for k, v := range env {
		local[k] = v
	}
	if r := cmd(ctx, local, "rebuild", "-from", "1h", "-pipeline", counted, "-dry-run"); r.code != 2 || !strings.Contains(r.stderr, "the pageviews the template deploys ("+filepath.Join(".build", "up")) {
		t.Errorf("rebuild while make local-up runs the six aggregates and infra/cdk.out has the changed file: exit %d, stderr %q; want 2 naming the running copy", r.code, r.stderr)
	}

	// No template here: said in one line, and the rebuild goes on.
	t.Chdir(t.TempDir())
	r := cmd(ctx, env, "rebuild", "-from", "1h", "-pipeline", counted, "-dry-run")
	if r.code != 0 || !strings.Contains(r.stderr, "replay rebuild: note: the -pipeline files' aggregates are not checked against the deployed ones: template: open infra/cdk.out/Tributary.template.json: no such file or directory") {
		t.Errorf("rebuild with no template to read: exit %d, stderr %q; want 0 and a note", r.code, r.stderr)
	}
}
