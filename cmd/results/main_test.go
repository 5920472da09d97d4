package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/syncbuf"
	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/results"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

const pipelineJSON = `{"name":"pv","outputs":{"table":true,"stream":true},"key":"key","value":"data.ms","distinct":"data.user",
  "windows":[{"kind":"tumbling","size":"1m"},{"kind":"hopping","size":"2m","advance":"1m"},{"kind":"session","gap":"30s"}],
  "aggregates":["count","sum","mean","min","max","quantiles","distinct"],"quantiles":[0.5,0.99],
  "outOfOrderness":"0s","latePolicy":"correct","allowedLateness":"1h","partitionKeyIsGroupingKey":true}`

type result struct {
	code           int
	stdout, stderr string
}

func cmd(ctx context.Context, env map[string]string, now time.Time, args ...string) result {
	var out, errb syncbuf.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code := run(ctx, args, lookup, func() time.Time { return now }, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// endpoint and awsCfg are the stand-in every test of the package shares.
var (
	endpoint string
	awsCfg   aws.Config
)

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(cfg aws.Config) {
		awsCfg = cfg
		endpoint = aws.ToString(cfg.BaseEndpoint)
	}))
}

// TestBadCommandLines: every flag out of range or nonsensical is refused
// with exit 2 and one line naming it, before any AWS call (no endpoint is
// set up here); -h exits 0 with the flags.
func TestBadCommandLines(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	env := map[string]string{"PIPELINE_CONFIG": pipelineJSON}
	withParam := func(extra ...string) []string {
		return append([]string{"-parameter", "/t/views", "-key", "k"}, extra...)
	}
	follow := func(extra ...string) []string { return append([]string{"-follow", "-stream", "results"}, extra...) }
	tableOnly := strings.Replace(pipelineJSON, `"outputs":{"table":true,"stream":true},`, "", 1)
	big := strings.Repeat("w", 100_000) // a value pasted by mistake
	// A file far larger than any template (a -template /dev/zero, a log):
	// refused at the bound, not read whole.
	huge := filepath.Join(t.TempDir(), "huge.template.json")
	if err := os.WriteFile(huge, nil, 0o600); err != nil || os.Truncate(huge, 64<<20) != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "-key is required"},
		{[]string{"-key", "k"}, nil, "-parameter is required (or -table)"},
		{[]string{"-key", "k", "-parameter", "/p", "-table", "views"}, nil, "-table and -parameter both given"},
		{[]string{"-key", "k", "-table", "a b"}, nil, `-table "a b": a DynamoDB table name`},
		{[]string{"-key", "k", "-parameter", "bad name!"}, nil, `-parameter "bad name!"`},
		// No key ingest refuses has windows (TestKeyNoEventCanHave).
		{[]string{"-key", strings.Repeat("k", 1025), "-parameter", "/p"}, nil, "can never be an event's key, so it has no windows: ingest refuses a key that is 1025 characters long"},
		{[]string{"-key", "user-\xff", "-parameter", "/p"}, nil, `-key "user-\xff" can never be an event's key, so it has no windows: ingest refuses a key that is not valid UTF-8`},
		{follow("-key", "user-\xff"), nil, `-key "user-\xff" can never be an event's key`},
		{withParam("-from", "soon"), nil, `-from "soon" is neither an RFC 3339 time`},
		{withParam("-from", "-1h"), nil, "-from -1h: a duration ago must be positive"},
		{withParam("-to", "0s"), nil, "-to 0s: a duration ago must be positive"},
		{withParam("-from", "1h", "-to", "2h"), nil, "-from 2026-11-29T11:00:00Z is not before -to 2026-11-29T10:00:00Z"},
		{withParam("-from", "9000h"), nil, "-from 9000h: at most 8784h0m0s ago (windows are kept at most 8760h0m0s after they end, a pipeline's retention)"},
		{withParam("-from", "99999999h"), nil, "-from 99999999h: at most 8784h0m0s ago (windows are kept at most 8760h0m0s after they end, a pipeline's retention)"},
		{withParam("-to", "99999999h"), nil, "-to 99999999h: at most 8784h0m0s ago"},
		{withParam("-from", "2025-11-01T00:00:00Z", "-to", "2026-11-29T00:00:00Z"), nil, "-from 2025-11-01T00:00:00Z is 9432h0m0s before -to 2026-11-29T00:00:00Z; a range spans at most 8784h0m0s (windows are kept at most 8760h0m0s after they end, a pipeline's retention)"},
		{withParam("-from", "2025-11-01T00:00:00Z"), nil, "-from 2025-11-01T00:00:00Z is 9444h0m0s before -to now (2026-11-29T12:00:00Z); a range spans at most 8784h0m0s"},
		{withParam("-from", "1700-01-01T00:00:00Z", "-to", "2026-11-29T00:00:00Z"), nil, "-from 1700-01-01T00:00:00Z is more than 292 years before -to 2026-11-29T00:00:00Z; a range spans at most 8784h0m0s"},
		{withParam("-limit", "0"), nil, "-limit 0: must be from 1 to 100000"},
		{withParam("-limit", "100001"), nil, "-limit 100001: must be from 1 to 100000"},
		{withParam("-window", "weekly"), nil, `-window "weekly": pipeline pv has no such window; its windows: tumbling:1m0s, hopping:2m0s:1m0s, session:30s`},
		{withParam("-pipeline", "/no/such/file.json"), nil, "-pipeline open /no/such/file.json"},
		{withParam(), map[string]string{"PIPELINE_CONFIG": `{"name":"x"}`}, "-pipeline not given, and"},
		{withParam("-stack", "Other"), nil, "-stack is only read with -template"},
		{withParam("-template", "t.json"), nil, "-template names resources as the local runner deploys them, but AWS_ENDPOINT_URL is not set"},
		{withParam("-template", huge), map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}, "-template template: " + huge + ": more than 1048576 bytes"},
		{withParam("-nope"), nil, "flag provided but not defined: -nope"},
		{withParam("stray"), nil, `unexpected argument "stray"`},
		{[]string{"-follow"}, nil, "-stream is required"},
		// A pipeline that writes only to the views table has nothing on
		// any stream to follow, a -stream given or not.
		{[]string{"-follow"}, map[string]string{"PIPELINE_CONFIG": tableOnly}, "-follow reads the window results stream, and pipeline pv writes its windows only to the views table"},
		{follow(), map[string]string{"PIPELINE_CONFIG": tableOnly}, "pipeline pv writes its windows only to the views table"},
		{follow("-to", "now"), nil, "-to is not read with -follow"},
		{follow("-from", "2030-01-01T00:00:00Z"), nil, "-from 2030-01-01T00:00:00Z is in the future"},
		{follow("-from", "9000h"), nil, "-from 9000h: at most 8760h0m0s ago (the longest a Kinesis stream keeps records)"},
		{follow("-from", "99999999h"), nil, "-from 99999999h: at most 8760h0m0s ago (the longest a Kinesis stream keeps records)"},
		{follow("-from", "2025-01-01T00:00:00Z"), nil, "-from 2025-01-01T00:00:00Z is more than 8760h0m0s ago"},
		{follow("-limit", "-2"), nil, "-limit -2: must be from 1"},
		{[]string{"-follow", "-stream", "bad/stream"}, nil, `-stream "bad/stream": a Kinesis stream name`},
		// A value pasted by mistake is repeated cut, not whole.
		{withParam("-from", big), nil, `-from "` + big[:256] + `"… is neither`},
		{withParam("-to", "-"+strings.Repeat("1s", 50_000)), nil, "-to -1s1s1s"},
		{withParam("-window", big), nil, `-window "` + big[:64] + `"…: pipeline pv has no such window`},
		{[]string{"-key", "k", "-table", big}, nil, `-table "` + big[:256] + `"…: a DynamoDB table name`},
		{follow("-from", "-"+strings.Repeat("1s", 50_000)), nil, "-from -1s1s1s"},
	} {
		e := env
		if c.env != nil {
			e = c.env
		}
		r := cmd(ctx, e, now, c.args...)
		name := strings.Join(c.args, " ")
		if r.code != 2 {
			t.Errorf("results %s: exit %d, want 2; stderr %q", name, r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("results %s: stderr %q, want it to say %q", name, r.stderr, c.want)
		}
		if len(r.stderr) > 1000 {
			t.Errorf("results %.200s: %d bytes on stderr: a value repeated whole", name, len(r.stderr))
		}
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 || strings.Count(r.stderr, "results:") != 1 {
			t.Errorf("results %s: want one line with one prefix on stderr, got:\n%s", name, r.stderr)
		}
	}
	for _, h := range []string{"-h", "-help"} {
		r := cmd(ctx, env, now, h)
		if r.code != 0 || !strings.Contains(r.stdout, "AWS_REGION") || !strings.Contains(r.stdout, "-follow") || !strings.Contains(r.stdout, "-parameter") {
			t.Errorf("results %s: exit %d, stdout %q; want 0 and the flags with where the region comes from", h, r.code, r.stdout)
		}
	}
}

// TestKeyNoEventCanHave: a -key that ingest's key check (stream.CheckKey)
// refuses — too long, a control character, not UTF-8 — is one no event
// can have. It was looked up and answered "no windows of key … start in
// that range", as if a typo of a real key; it is refused with exit 2 and
// the reason, the key quoted cut however long, and nothing read. A key
// ingest takes (256 characters, of two bytes each) is still looked up.
func TestKeyNoEventCanHave(t *testing.T) {
	ctx := context.Background()
	if err := state.CreateTable(ctx, dynamodb.NewFromConfig(awsCfg), "views-keys"); err != nil {
		t.Fatal(err)
	}
	setAWS(t, endpoint, "us-east-1")
	env := map[string]string{"PIPELINE_CONFIG": pipelineJSON}
	now := base.Add(3 * time.Minute)
	long := strings.Repeat("k", 100_000) // a value pasted by mistake
	for _, c := range []struct {
		name, key string
		follow    bool
		wantCode  int
		want      string // on stderr when refused, else on stdout
	}{
		{"one character too long", strings.Repeat("k", 257), false, 2,
			`-key "` + strings.Repeat("k", 64) + `"… can never be an event's key, so it has no windows: ingest refuses a key that is 257 characters long; at most 256 are allowed; see go run ./cmd/results -h`},
		{"pasted by mistake", long, false, 2, `-key "` + long[:64] + `"… can never be an event's key, so it has no windows: ingest refuses a key that is 100000 characters long; at most 256 are allowed`},
		{"a tab", "user\t1", false, 2, `-key "user\t1" can never be an event's key, so it has no windows: ingest refuses a key that holds control character U+0009 at byte 4; identifiers are printable text`},
		{"a trailing newline", "user-1\n", false, 2, `-key "user-1\n" can never be an event's key, so it has no windows: ingest refuses a key that holds control character U+000A at byte 6`},
		{"a C1 control", "user\u00851", false, 2, `-key "user\u00851" can never be an event's key, so it has no windows: ingest refuses a key that holds control character U+0085 at byte 4`},
		{"a tab, following", "user\t1", true, 2, `-key "user\t1" can never be an event's key, so it has no windows: ingest refuses a key that holds control character U+0009`},
		{"256 characters ingest takes", strings.Repeat("é", 256), false, 0, "no windows of key " + strings.Repeat("é", 256) + " start in that range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"-table", "views-keys", "-key", c.key}
			if c.follow {
				args = []string{"-follow", "-stream", "no-such-stream", "-key", c.key}
			}
			r := cmd(ctx, env, now, args...)
			if r.code != c.wantCode {
				t.Errorf("exit %d, want %d; stdout %.300q, stderr %.300q", r.code, c.wantCode, r.stdout, r.stderr)
			}
			if got := map[bool]string{true: r.stderr, false: r.stdout}[c.wantCode != 0]; !strings.Contains(got, c.want) {
				t.Errorf("got %.600q, want it to say %.600q", got, c.want)
			}
			if c.wantCode != 0 {
				if r.stdout != "" {
					t.Errorf("stdout %.300q: want nothing, the key refused before any read", r.stdout)
				}
				if len(r.stderr) > 500 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
					t.Errorf("stderr of %d bytes: want one line, the key cut: %.600q", len(r.stderr), r.stderr)
				}
			}
		})
	}
}

// setAWS points the command at endpoint, with the region given (or none).
func setAWS(t *testing.T, endpoint, region string) {
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": region, "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none} {
		t.Setenv(k, v)
	}
}

var base = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// ev is one event of key at base+at with data.ms = ms and data.user = user.
type ev struct {
	key  string
	at   time.Duration
	ms   float64
	user string
}

// apply runs batches of evs through a real aggregate processor on one
// shard, as the aggregate function would.
func apply(t *testing.T, p *aggregate.Processor, seq *int, evs ...ev) {
	t.Helper()
	var ke events.KinesisEvent
	for _, e := range evs {
		*seq++
		at := base.Add(e.at)
		env := stream.Envelope{ID: fmt.Sprint("e", *seq), Type: "page_view", Key: e.key, OccurredAt: at, SentAt: at, ReceivedAt: at,
			Data: json.RawMessage(fmt.Sprintf(`{"ms":%v,"user":%q}`, e.ms, e.user))}
		data, _ := json.Marshal(env)
		s := fmt.Sprint(*seq)
		ke.Records = append(ke.Records, events.KinesisEventRecord{EventID: "shardId-000000000000:" + s, EventSource: "aws:kinesis",
			Kinesis: events.KinesisRecord{SequenceNumber: s, PartitionKey: e.key, Data: data, ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: at}}})
	}
	resp, err := p.HandleBatch(context.Background(), ke)
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch: %v %v", resp, err)
	}
}

// row is one window as the table should show it, computed here from the
// values that fall in it.
type row struct {
	kind, start, end, status, rev string
	values                        []float64
	users                         int
}

// cells are the row's cells as the table writes them: the values' count,
// sum, mean, min, max, p50 and p99 (the sketch's estimates, as package agg
// computes them from the same values) and distinct.
func (r row) cells(t *testing.T, cfg *pipeline.Config) []string {
	st := cfg.Aggregates.New()
	for i, v := range r.values {
		st.Add(v, []byte(fmt.Sprint("u", i%r.users)))
	}
	res := st.Result()
	return []string{r.start, r.end, r.status, r.rev, fmt.Sprint(res.Count), results.FormatNumber(res.Sum), results.FormatNumber(res.Mean),
		results.FormatNumber(res.Min), results.FormatNumber(res.Max), results.FormatNumber(res.Quantiles["p50"]), results.FormatNumber(res.Quantiles["p99"]),
		fmt.Sprint(r.users)}
}

// tableRows parses the command's table into rows of cells by window kind.
func tableRows(out string) map[string][][]string {
	rows := map[string][][]string{}
	kind := ""
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case len(f) == 3 && strings.HasPrefix(f[1], "("):
			kind = f[0]
		case f[0] == "START" || f[0] == "…" || kind == "":
		default:
			rows[kind] = append(rows[kind], f)
		}
	}
	return rows
}

// TestShowsWindowsReadBack: windows a real aggregate processor wrote —
// final, corrected (revision 2), open, session and hopping ones — are read
// back from the views table through the SSM parameter and printed with
// their values; -window picks one kind, -json writes lines, -table reads a
// table directly, a key without windows says so, and no region is refused.
func TestShowsWindowsReadBack(t *testing.T) {
	cfg := awsCfg
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	if err := state.CreateTable(ctx, db, "views"); err != nil {
		t.Fatal(err)
	}
	if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/t/views"), Value: aws.String("views"), Type: ssmtypes.ParameterTypeString}); err != nil {
		t.Fatal(err)
	}
	pcfg, err := pipeline.Parse([]byte(pipelineJSON))
	if err != nil {
		t.Fatal(err)
	}
	p := aggregate.New(pcfg, state.NewViews(db, "views", pcfg.Aggregates), nil, "", aggregate.WithLogger(slog.New(slog.DiscardHandler)))
	seq := 0
	// user-1 at 0:05, 0:20, 1:10, 1:45; z at 1:50 moves the watermark:
	// the first minute is final, the second open.
	apply(t, p, &seq, ev{"user-1", 5 * time.Second, 100, "u0"}, ev{"user-1", 20 * time.Second, 300, "u1"},
		ev{"user-1", 70 * time.Second, 200, "u0"}, ev{"user-1", 105 * time.Second, 400, "u1"}, ev{"z", 110 * time.Second, 1, "u0"})
	// Late, within the allowed lateness: corrects the first minute (and
	// grows the first session).
	apply(t, p, &seq, ev{"user-1", 30 * time.Second, 500, "u2"})

	now := base.Add(3 * time.Minute)
	env := map[string]string{"PIPELINE_CONFIG": pipelineJSON}
	setAWS(t, endpoint, "")
	if r := cmd(ctx, env, now, "-parameter", "/t/views", "-key", "user-1"); r.code != 2 || !strings.Contains(r.stderr, "no AWS region is set") {
		t.Errorf("without a region: %+v, want exit 2 naming the region", r)
	}
	setAWS(t, endpoint, "us-east-1")

	r := cmd(ctx, env, now, "-parameter", "/t/views", "-key", "user-1", "-from", "5m")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	t.Logf("table:\n%s", r.stdout)
	if !strings.Contains(r.stdout, "pipeline pv, key user-1: windows starting from 2026-11-29T09:58:00Z to 2026-11-29T10:03:01Z, from views (named by /t/views)") {
		t.Errorf("no heading naming the pipeline, key, range and table:\n%s", r.stdout)
	}
	for _, h := range []string{"START", "END", "STATUS", "REV", "COUNT", "SUM", "MEAN", "MIN", "MAX", "P50", "P99", "DISTINCT"} {
		if !strings.Contains(r.stdout, h) {
			t.Errorf("no %s column:\n%s", h, r.stdout)
		}
	}
	want := map[string][]row{
		"tumbling:1m0s": {
			{"tumbling", "2026-11-29T10:00:00Z", "2026-11-29T10:01:00Z", "final", "2", []float64{100, 300, 500}, 3},
			{"tumbling", "2026-11-29T10:01:00Z", "2026-11-29T10:02:00Z", "open", "-", []float64{200, 400}, 2},
		},
		"hopping:2m0s:1m0s": {
			{"hopping", "2026-11-29T09:59:00Z", "2026-11-29T10:01:00Z", "final", "2", []float64{100, 300, 500}, 3},
			{"hopping", "2026-11-29T10:00:00Z", "2026-11-29T10:02:00Z", "open", "-", []float64{100, 300, 200, 400, 500}, 3},
			{"hopping", "2026-11-29T10:01:00Z", "2026-11-29T10:03:00Z", "open", "-", []float64{200, 400}, 2},
		},
		// The late record grew [0:05, 0:50) into [0:05, 1:00), a new final
		// session (the old one is retracted and not shown).
		"session:30s": {
			{"session", "2026-11-29T10:00:05Z", "2026-11-29T10:01:00Z", "final", "1", []float64{100, 300, 500}, 3},
			{"session", "2026-11-29T10:01:10Z", "2026-11-29T10:01:40Z", "final", "1", []float64{200}, 1},
			{"session", "2026-11-29T10:01:45Z", "2026-11-29T10:02:15Z", "open", "-", []float64{400}, 1},
		},
	}
	got := tableRows(r.stdout)
	for kind, rows := range want {
		if len(got[kind]) != len(rows) {
			t.Errorf("%s: %d rows, want %d:\n%s", kind, len(got[kind]), len(rows), r.stdout)
			continue
		}
		for i, w := range rows {
			if g, c := strings.Join(got[kind][i], " "), strings.Join(w.cells(t, pcfg), " "); g != c {
				t.Errorf("%s row %d:\n got  %s\n want %s", kind, i, g, c)
			}
		}
		if !strings.Contains(r.stdout, fmt.Sprintf("%s  (%d windows)", kind, len(rows))) {
			t.Errorf("no heading for %s with its %d windows", kind, len(rows))
		}
	}
	if len(got) != len(want) {
		t.Errorf("window kinds %v, want %d", got, len(want))
	}
	// One kind, by its name alone; a table named directly.
	r = cmd(ctx, env, now, "-table", "views", "-key", "user-1", "-from", "2026-11-29T10:00:00Z", "-to", "2026-11-29T10:01:00Z", "-window", "tumbling")
	if got := tableRows(r.stdout); r.code != 0 || len(got) != 1 || len(got["tumbling:1m0s"]) != 1 || got["tumbling:1m0s"][0][4] != "3" {
		t.Errorf("-window tumbling over the first minute: exit %d, rows %v\n%s%s", r.code, got, r.stdout, r.stderr)
	}

	// JSON lines.
	r = cmd(ctx, env, now, "-parameter", "/t/views", "-key", "user-1", "-from", "5m", "-json", "-window", "session:30s")
	var lines []results.WindowJSON
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var w results.WindowJSON
		if err := json.Unmarshal([]byte(l), &w); err != nil {
			t.Fatalf("-json line %q: %v", l, err)
		}
		lines = append(lines, w)
	}
	if len(lines) != 3 || lines[0].Status != "final" || lines[0].Revision != 1 || lines[0].Result.Count != 3 || lines[0].Result.Sum != 900 ||
		lines[2].Status != "open" || lines[2].Result.Max != 400 || lines[0].Key != "user-1" || lines[0].Pipeline != "pv" || lines[0].Window != "session:30s" {
		t.Errorf("-json: %+v", lines)
	}

	// -limit cuts and says so (how many more, it cannot know: it does
	// not read them).
	r = cmd(ctx, env, now, "-parameter", "/t/views", "-key", "user-1", "-from", "5m", "-limit", "2")
	if got := tableRows(r.stdout); len(got["tumbling:1m0s"]) != 2 || len(got) != 1 ||
		!strings.Contains(r.stdout, "… and more windows not shown, past the first 2 (raise -limit, or narrow -from/-to or -window)") {
		t.Errorf("-limit 2: %v\n%s", got, r.stdout)
	}

	// A key with no windows.
	r = cmd(ctx, env, now, "-parameter", "/t/views", "-key", "User-1", "-from", "5m")
	if r.code != 0 || !strings.Contains(r.stdout, "no windows of key User-1 start in that range. Keys are case-sensitive") {
		t.Errorf("unknown key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A parameter or table that does not exist is an error naming it.
	if r := cmd(ctx, env, now, "-parameter", "/t/nothing", "-key", "user-1"); r.code != 1 || !strings.Contains(r.stderr, "-parameter /t/nothing") {
		t.Errorf("missing parameter: %+v", r)
	}
	if r := cmd(ctx, env, now, "-table", "nothing", "-key", "user-1"); r.code != 1 || !strings.Contains(r.stderr, "views table nothing does not exist") {
		t.Errorf("missing table: %+v", r)
	}
	// A pipeline file other than the one the function ran (aggregates
	// changed since, or another pipeline's file): the stored results do not
	// decode with it, and the error says which flag to fix.
	edited := strings.NewReplacer(`"distinct":"data.user",`, "", `,"quantiles":[0.5,0.99]`, "",
		`["count","sum","mean","min","max","quantiles","distinct"]`, `["count","sum"]`).Replace(pipelineJSON)
	r = cmd(ctx, map[string]string{"PIPELINE_CONFIG": edited}, now, "-table", "views", "-key", "user-1", "-from", "5m")
	if r.code != 1 || !strings.Contains(r.stderr, "-pipeline") || !strings.Contains(r.stderr, "the pipeline the aggregate function runs") ||
		!strings.Contains(r.stderr, "count+sum") {
		t.Errorf("read with other aggregates: %+v, want exit 1 naming -pipeline and the aggregates", r)
	}
}

// putOutputs puts window results on the stream, partitioned by key.
func putOutputs(t *testing.T, kin *kinesis.Client, streamName string, outs ...aggregate.Output) {
	t.Helper()
	var entries []kintypes.PutRecordsRequestEntry
	for _, o := range outs {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, kintypes.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(o.Key)})
	}
	out, err := kin.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String(streamName), Records: entries})
	if err != nil || aws.ToInt32(out.FailedRecordCount) > 0 {
		t.Fatalf("put: %v %v", out, err)
	}
}

func output(kind, key string, rev int, count uint64, prev *agg.Result) aggregate.Output {
	r := agg.Result{Aggregates: agg.Count | agg.Sum, Count: count, Sum: float64(count) * 10}
	return aggregate.Output{ID: fmt.Sprintf("pv/%s/tumbling:1m0s/x/r%d", key, rev), Kind: kind, Pipeline: "pv", Key: key, Window: "tumbling:1m0s",
		Start: base, End: base.Add(time.Minute), Revision: rev, Result: r, Previous: prev}
}

// waitFor polls buf until it holds want or the deadline passes.
func waitFor(t *testing.T, buf *syncbuf.Buffer, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(buf.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %q; have:\n%s", within, want, buf.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFollow: -follow prints each final, correction and retraction put on
// any shard after it started (LATEST), filtered by -key, skipping with a
// warning a record that is not a result; it ends at -limit or at Ctrl-C
// with exit 0; -from reads what arrived before it started; -json writes the
// records as they are.
func TestFollow(t *testing.T) {
	cfg := awsCfg
	ctx := context.Background()
	kin := kinesis.NewFromConfig(cfg)
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("results"), ShardCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	setAWS(t, endpoint, "us-east-1")
	env := map[string]string{"PIPELINE_CONFIG": pipelineJSON, "OUTPUT_STREAM_NAME": "results"}
	started := time.Now()
	// Before the follow: seen only with -from.
	putOutputs(t, kin, "results", output("final", "early", 1, 1, nil))

	runFollow := func(ctx context.Context, args ...string) (*syncbuf.Buffer, *syncbuf.Buffer, chan int) {
		var out, errb syncbuf.Buffer
		done := make(chan int, 1)
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		go func() { done <- run(ctx, append([]string{"-follow"}, args...), lookup, time.Now, &out, &errb) }()
		return &out, &errb, done
	}

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out, errb, done := runFollow(fctx, "-key", "user-1")
	waitFor(t, errb, "following results (2 shards) from now (LATEST)", 10*time.Second)
	prev := &agg.Result{Aggregates: agg.Count | agg.Sum, Count: 4, Sum: 40}
	// Keys spread over both shards; only user-1's are printed.
	var outs []aggregate.Output
	for i := range 8 {
		outs = append(outs, output("final", fmt.Sprint("other-", i), 1, 2, nil))
	}
	outs = append(outs, output("final", "user-1", 1, 4, nil), output("correction", "user-1", 2, 5, prev))
	putOutputs(t, kin, "results", outs...)
	if _, err := kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("results"), Data: []byte("not json"), PartitionKey: aws.String("x")}); err != nil {
		t.Fatal(err)
	}
	putOutputs(t, kin, "results", aggregate.Output{ID: "pv/user-1/session:30s/y/r2", Kind: "retraction", Pipeline: "pv", Key: "user-1", Window: "session:30s",
		Start: base, End: base.Add(40 * time.Second), Revision: 2, Previous: prev})
	waitFor(t, out, "retraction", 15*time.Second)
	waitFor(t, errb, "is not a window result", 5*time.Second)
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("Ctrl-C ended the follow with exit %d, want 0; stderr %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	wantLines := []string{
		"final       key=user-1 tumbling:1m0s 2026-11-29T10:00:00Z..2026-11-29T10:01:00Z rev=1 count=4 sum=40",
		"correction  key=user-1 tumbling:1m0s 2026-11-29T10:00:00Z..2026-11-29T10:01:00Z rev=2 count=5 sum=50 was: count=4 sum=40",
		"retraction  key=user-1 session:30s 2026-11-29T10:00:00Z..2026-11-29T10:00:40Z rev=2 was: count=4 sum=40",
	}
	if len(lines) != len(wantLines) {
		t.Fatalf("printed %d lines, want %d:\n%s", len(lines), len(wantLines), out.String())
	}
	for i, w := range wantLines {
		// Each line starts with the arrival time.
		ts, rest, _ := strings.Cut(lines[i], "  ")
		at, err := time.Parse(time.RFC3339, ts)
		if err != nil || at.Before(started.Add(-time.Minute)) || rest != w {
			t.Errorf("line %d:\n got  %s\n want <arrival>  %s", i, lines[i], w)
		}
	}

	// From a time before the first put, every key, as JSON, up to as many
	// results as were put: the shards are read at once, so a smaller limit
	// could be reached on the other shard before the early record's.
	const putResults = 12 // early, 8 others, user-1's final and correction, the retraction
	out, errb, done = runFollow(ctx, "-from", started.Add(-5*time.Second).UTC().Format(time.RFC3339), "-json", "-limit", fmt.Sprint(putResults))
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("-from -limit %d: exit %d: %s", putResults, code, errb.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("-limit %d did not end the follow; stdout:\n%s\nstderr:\n%s", putResults, out.String(), errb.String())
	}
	if !strings.Contains(errb.String(), "(AT_TIMESTAMP)") {
		t.Errorf("stderr %q does not say it started AT_TIMESTAMP", errb.String())
	}
	var early int
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var o aggregate.Output
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("-json line %q: %v", l, err)
		}
		if o.Key == "early" {
			early++
		}
	}
	if n := strings.Count(strings.TrimSpace(out.String()), "\n") + 1; early != 1 || n != putResults {
		t.Errorf("-from printed %d records, early's %d times; want %d, early's once:\n%s", n, early, putResults, out.String())
	}

	// A stream that does not exist is an error naming it.
	r := cmd(ctx, env, time.Now(), "-follow", "-stream", "nothing")
	if r.code != 1 || !strings.Contains(r.stderr, "stream nothing does not exist") {
		t.Errorf("missing stream: %+v", r)
	}
}

// TestTemplate: -template reads the pipeline, the views parameter and the
// stream from a synthesized template, named <stack>-<logical id> as the
// local runner deploys it, so make results needs only the key.
func TestTemplate(t *testing.T) {
	cfg := awsCfg
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	names, err := readLocalNames("testdata/local.template.json", "Tributary", "")
	if err != nil {
		t.Fatal(err)
	}
	if names.parameter != "Tributary-ViewsRegistryCurrentViews5E6F7A8B" || names.table != "Tributary-Views1A2B3C4D" || names.stream != "Tributary-WindowResults9C0D1E2F" {
		t.Fatalf("names %+v, want <stack>-<logical id>", names)
	}
	if err := state.CreateTable(ctx, db, names.table); err != nil {
		t.Fatal(err)
	}
	if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(names.parameter), Value: aws.String(names.table), Type: ssmtypes.ParameterTypeString}); err != nil {
		t.Fatal(err)
	}
	pcfg, err := pipeline.Parse([]byte(names.pipeline))
	if err != nil {
		t.Fatal(err)
	}
	p := aggregate.New(pcfg, state.NewViews(db, names.table, pcfg.Aggregates), nil, "", aggregate.WithLogger(slog.New(slog.DiscardHandler)))
	seq := 0
	apply(t, p, &seq, ev{"user-1", 5 * time.Second, 7, "a"}, ev{"user-1", 6 * time.Second, 8, "a"})
	setAWS(t, endpoint, "us-east-1")
	env := map[string]string{"AWS_ENDPOINT_URL": endpoint}
	r := cmd(ctx, env, base.Add(time.Minute), "-template", "testdata/local.template.json", "-key", "user-1")
	got := tableRows(r.stdout)
	if r.code != 0 || len(got["tumbling:1m0s"]) != 1 || strings.Join(got["tumbling:1m0s"][0], " ") != "2026-11-29T10:00:00Z 2026-11-29T10:01:00Z open - 2 15" {
		t.Errorf("-template: exit %d, rows %v\n%s%s", r.code, got, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "pipeline local, key user-1") || !strings.Contains(r.stdout, "(named by Tributary-ViewsRegistryCurrentViews5E6F7A8B)") {
		t.Errorf("-template: heading does not name the template's pipeline and parameter:\n%s", r.stdout)
	}
	// Nothing answering at the endpoint: make local-up is not running.
	if r := cmd(ctx, map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}, base, "-template", "testdata/local.template.json", "-key", "user-1"); r.code != 1 || !strings.Contains(r.stderr, "nothing answers at http://127.0.0.1:1: start the topology with make local-up first") {
		t.Errorf("-template without a stand-in: %+v", r)
	}
	// Another prefix names other resources, which do not exist: -stack is
	// named, with the stacks that run (make results STACK=nope printed
	// SSM's ParameterNotFound), as make logs and make tail name it.
	if r := cmd(ctx, env, base.Add(time.Minute), "-template", "testdata/local.template.json", "-stack", "Tributary-1", "-key", "user-1"); r.code != 2 ||
		!strings.Contains(r.stderr, `-stack "Tributary-1": no stack of that name in the running topology; stacks: Tributary (give one`) || strings.Contains(r.stderr, "ParameterNotFound") {
		t.Errorf("-stack Tributary-1: %+v", r)
	}
}

// TestFollowTableOnlyPipeline: a pipeline whose file keeps its results off
// the stream (the default) has no stream to follow; -follow says so and
// how to read its windows, where it asked for a -stream no pipeline has.
func TestFollowTableOnlyPipeline(t *testing.T) {
	env := map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}
	r := cmd(context.Background(), env, base, "-template", "testdata/table-only.template.json", "-follow")
	if r.code != 2 || !strings.Contains(r.stderr, "pipeline local writes its windows only to the views table") || !strings.Contains(r.stderr, "-key") {
		t.Errorf("-follow of a table-only pipeline: %+v", r)
	}
}

// TestPipelineFlag: -pipeline names a pipeline — one the template deploys
// with -template, else pipelines/<name>.json — or gives a file; without it
// the only pipeline is used, and several are an error listing them.
func TestPipelineFlag(t *testing.T) {
	const two = "testdata/two-pipelines.template.json"
	if _, err := readLocalNames(two, "Tributary", ""); err == nil || !strings.Contains(err.Error(), "-pipeline not given, and testdata/two-pipelines.template.json runs 2 pipelines: give one of checkouts, pageviews") {
		t.Errorf("two pipelines, none named: %v", err)
	}
	n, err := readLocalNames(two, "Tributary", "checkouts")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := pipeline.Parse([]byte(n.pipeline)); err != nil || cfg.Name != "checkouts" || n.table != "Tributary-Views1A2B3C4D" {
		t.Errorf("-pipeline checkouts: %+v, %v", n, err)
	}
	if _, err := readLocalNames(two, "Tributary", "signups"); err == nil || !strings.Contains(err.Error(), `-pipeline "signups" is not deployed by testdata/two-pipelines.template.json; its pipelines: checkouts, pageviews`) {
		t.Errorf("-pipeline signups: %v", err)
	}
	// Through the command: a usage error (exit 2), before anything is read.
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	local := map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}
	if r := cmd(ctx, local, now, "-template", two, "-key", "eu-west"); r.code != 2 || !strings.Contains(r.stderr, "give one of checkouts, pageviews") {
		t.Errorf("-template with two pipelines, no -pipeline: %+v", r)
	}

	// Without -template: the pipelines directory.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pipelines"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pageviews", "checkouts"} {
		doc := fmt.Sprintf(`{"name":%q,"windows":[{"kind":"tumbling","size":"1m"}]}`, name)
		if err := os.WriteFile(filepath.Join(dir, "pipelines", name+".json"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	if cfg, err := pipelineNamed(defaultDir, "checkouts"); err != nil || cfg.Name != "checkouts" {
		t.Errorf("pipelineNamed checkouts: %v, %v", cfg, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-parameter", "/p", "-key", "k"}, "-pipeline not given, and pipelines holds 2 pipelines: give one of checkouts, pageviews"},
		{[]string{"-parameter", "/p", "-key", "k", "-pipeline", "signups"}, `-pipeline "signups" is not in pipelines; its pipelines: checkouts, pageviews`},
		{[]string{"-parameter", "/p", "-key", "k", "-pipeline", "pipelines/nope.json"}, "-pipeline open pipelines/nope.json"},
		{[]string{"-parameter", "/p", "-key", "k", "-pipeline", strings.Repeat("p", 100_000)}, `-pipeline "` + strings.Repeat("p", 256) + `"… is not in pipelines`},
	} {
		if r := cmd(ctx, map[string]string{}, now, c.args...); r.code != 2 || !strings.Contains(r.stderr, c.want) || len(r.stderr) > 1000 {
			t.Errorf("%.200v: exit %d %.300q, want 2 and %.300q", c.args, r.code, r.stderr, c.want)
		}
	}
}

// TestPipelineFileIsBounded: -pipeline <file> past a pipeline file's bound
// is refused naming the flag, as replay -pipeline is: it is read through
// cli.ReadFile, whose test shows it reads no further than the bound (a log
// or a dump given by mistake, /dev/zero).
func TestPipelineFileIsBounded(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, make([]byte, pipeline.MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := pipelineFile(big)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("-pipeline %s: more than %d bytes", big, pipeline.MaxFileBytes)) {
		t.Errorf("-pipeline of %d bytes: %v; want a usage error saying the bound", pipeline.MaxFileBytes+1, err)
	}
}

// TestFollowReadsRecordsStrictly: -follow reads each record with the
// strict reader. A record that names its key twice is skipped saying so
// (encoding/json took the last copy, so it was shown as user-1's while
// other readers may take it for another key's), and -json writes each
// record on one line, however the producer spaced it.
func TestFollowReadsRecordsStrictly(t *testing.T) {
	ctx := context.Background()
	kin := kinesis.NewFromConfig(awsCfg)
	const stream = "results-strict"
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	setAWS(t, endpoint, "us-east-1")
	env := map[string]string{"PIPELINE_CONFIG": pipelineJSON, "OUTPUT_STREAM_NAME": stream}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out, errb syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(fctx, []string{"-follow", "-key", "user-1", "-json"}, lookup, time.Now, &out, &errb)
	}()
	waitFor(t, &errb, "following results-strict (1 shard)", 10*time.Second)

	b, err := json.Marshal(output("final", "other", 1, 4, nil))
	if err != nil {
		t.Fatal(err)
	}
	twice := append(b[:len(b)-1:len(b)-1], []byte(`,"key":"user-1"}`)...)
	spaced, err := json.MarshalIndent(output("correction", "user-1", 2, 5, nil), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{twice, spaced} {
		if _, err := kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), Data: data, PartitionKey: aws.String("user-1")}); err != nil {
			t.Fatal(err)
		}
	}
	putOutputs(t, kin, stream, output("final", "user-1", 3, 6, nil))
	waitFor(t, &out, `"revision":3`, 15*time.Second)
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("Ctrl-C ended the follow with exit %d, want 0; stderr %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var revs []int
	for _, l := range lines {
		var o aggregate.Output
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("-json wrote %q, not one record a line: %v\nstdout:\n%s", l, err, out.String())
		}
		revs = append(revs, o.Revision)
	}
	if fmt.Sprint(revs) != "[2 3]" {
		t.Errorf("printed revisions %v, want [2 3] (the record naming its key twice skipped):\n%s", revs, out.String())
	}
	if !strings.Contains(errb.String(), `duplicate object key "key"`) {
		t.Errorf("stderr does not say the skipped record names its key twice:\n%s", errb.String())
	}
}

// TestTemplateSaysThePipelineFileChanged: with -template (make results),
// the windows are those of the pipeline file the running make local-up
// deployed; a user who edited pipelines/<name>.json since (an aggregate
// added) saw the old aggregates without a word. The note names the file;
// an unchanged file, or none, gives none.
func TestTemplateSaysThePipelineFileChanged(t *testing.T) {
	tpl, err := filepath.Abs("testdata/local.template.json")
	if err != nil {
		t.Fatal(err)
	}
	const deployed = `{"name":"local","key":"key","value":"data.ms","windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"],"outOfOrderness":"0s","partitionKeyIsGroupingKey":true}`
	env := map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}
	for _, tc := range []struct {
		name, file string // file: pipelines/local.json's contents ("": none)
		note       bool
	}{
		{"edited", strings.Replace(deployed, `"count","sum"`, `"count","sum","max"`, 1), true},
		{"as deployed, written out", strings.ReplaceAll(deployed, ",", ",\n  "), false},
		{"no file", "", false},
		{"edited into one that does not parse", strings.Replace(deployed, `"count","sum"`, `"count","sum","distinct"`, 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				if err := os.MkdirAll(filepath.Join(dir, "pipelines"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "pipelines", "local.json"), []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Chdir(dir)
			r := cmd(context.Background(), env, base, "-template", tpl, "-key", "user-1")
			const note = "pipelines/local.json has changed since the running make local-up deployed it"
			if got := strings.Contains(r.stderr, note); got != tc.note {
				t.Errorf("stderr %q: note %q given: %v, want %v", r.stderr, note, got, tc.note)
			}
			// The file given by its path (PIPELINE=pipelines/local.json):
			// the same note, and the windows are still the deployed ones
			// (a trial saw an edited file's windows, the deployed tumbling
			// window missing, without a word).
			if tc.file != "" && !strings.Contains(tc.name, "does not parse") {
				r := cmd(context.Background(), env, base, "-template", tpl, "-key", "user-1", "-pipeline", "pipelines/local.json")
				if got := strings.Contains(r.stderr, note); got != tc.note {
					t.Errorf("-pipeline pipelines/local.json: stderr %q: note %q given: %v, want %v", r.stderr, note, got, tc.note)
				}
			}
			// A file that no longer parses is said too: the stack runs the
			// one it deployed.
			const unread = "results: note: the pipeline files do not load ("
			if got, want := strings.Contains(r.stderr, unread), strings.Contains(tc.name, "does not parse"); got != want {
				t.Errorf("stderr %q: note %q given: %v, want %v", r.stderr, unread, got, want)
			}
		})
	}
}

// TestLongestFromIsARange: the most -from takes (8784h ago) is a range
// the check takes to now; it was refused as 1s too long, the second that
// makes a window starting now count, so the limit contradicted itself.
func TestLongestFromIsARange(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		from string
		ok   bool
	}{
		{maxRange.String(), true},
		{(maxRange + time.Second).String(), false},
	} {
		f := &flags{key: "k", parameter: "/t/views", from: tc.from, set: map[string]bool{}}
		q := &query{parameter: "/t/views"}
		if err := f.checkTable(q, now); (err == nil) != tc.ok {
			t.Errorf("-from %s: %v, want accepted %v", tc.from, err, tc.ok)
		}
	}
}
