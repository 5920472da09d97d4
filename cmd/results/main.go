// Command results shows a windowed pipeline's results readably: a key's
// windows over a time range, from the views table (count, sum, mean, min,
// max, quantiles, distinct; open or final; revision), or, with -follow,
// every final result, correction and retraction as the WindowResults stream
// receives it.
//
//	go run ./cmd/results -parameter <views parameter> -key user-1 [-from 2h] [-to now] [-window tumbling] [-json]
//	go run ./cmd/results -stream <window results stream> -follow [-key user-1] [-from 10m]
//	make results KEY=user-1 [FROM=2h] [TO=now] [FOLLOW=1]    (the running make local-up)
//
// The same binary reads the local stand-in (AWS_ENDPOINT_URL) and AWS (the
// standard configuration: AWS_REGION or a profile's region, which it
// requires). In AWS, the stack's outputs ViewsParameterName and
// WindowResultsStreamName name the parameter and the stream. Locally,
// -template reads them, and the pipeline, from the synthesized template as
// the local runner deploys it. Exit status: 0 done (and Ctrl-C while
// following), 1 error, 2 usage, 130 interrupted.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/internal/sdkparam"
	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/results"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

func main() {
	cli.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.LookupEnv, time.Now, os.Stdout, os.Stderr)
	})
}

const usage = `usage:
  results -key <key> (-parameter <views parameter> | -table <views table>) [-from 1h] [-to now] [-window <kind>] [-pipeline name|file] [-json] [-limit 1000]
  results -follow -stream <window results stream> [-key <key>] [-window <kind>] [-from <time>] [-json] [-limit n]
  results -template infra/cdk.out/Tributary.template.json ...   (names from the local deployment: make results KEY=...)
Shows a key's windows over a time range, read from the views table (open and final, with their
revision and values), or, with -follow, each final result, correction and retraction as the
WindowResults stream receives it, from every shard.`

const footer = `Times are RFC 3339 (2026-11-29T10:00:00Z) or a duration ago (90m); -to also takes "now".
Exit status: 0 done (Ctrl-C ends -follow with 0), 1 error, 2 usage, 130 interrupted.
` + cli.RegionHelp

// Bounds of the flags. Window items expire the pipeline's retention after
// their window ends (at most pipeline.MaxRetention): a longer range finds
// nothing more.
const (
	maxRange       = pipeline.MaxRetention + 24*time.Hour
	defaultFrom    = time.Hour
	defaultLimit   = 1000
	maxLimit       = 100000
	maxFollowFrom  = 8760 * time.Hour // Kinesis's longest retention
	defaultDir     = "pipelines"
	defaultStack   = "Tributary"
	maxKeyEcho     = 64 // how much of a refused -key its error quotes: enough to recognise it
	resolveTimeout = 30 * time.Second
)

// flags are the command's flags, as given.
type flags struct {
	key, window, from, to              string
	follow, asJSON                     bool
	limit                              int
	pipeline, parameter, table, stream string
	template, stack                    string
	set                                map[string]bool // flags given on the command line
}

func run(ctx context.Context, args []string, lookup func(string) (string, bool), now func() time.Time, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("results", flag.ContinueOnError)
	var f flags
	fs.StringVar(&f.key, "key", "", fmt.Sprintf("the key whose windows to show (required, except with -follow, where it filters); one ingest would refuse as an event's key (over %d characters, a control character) is refused: no window can have it", stream.MaxKeyLength))
	fs.StringVar(&f.window, "window", "", "one window kind: its id (tumbling:1m0s, or tumbling:1m) or its kind (tumbling); default every window of the pipeline")
	fs.StringVar(&f.from, "from", "", "windows starting at or after this (default 1h ago); with -follow, where to start reading the stream (default now: LATEST)")
	fs.StringVar(&f.to, "to", "", "windows starting before this, or now (default now); not with -follow")
	fs.BoolVar(&f.follow, "follow", false, "tail the WindowResults stream: print each final result, correction and retraction as it arrives, until Ctrl-C")
	fs.BoolVar(&f.asJSON, "json", false, "JSON lines instead of a table: one window a line (with -follow, each record as it is on the stream, on one line)")
	fs.IntVar(&f.limit, "limit", 0, fmt.Sprintf("at most this many windows, 1 to %d (default %d), and no more are read; with -follow, stop after this many records (default: no limit)", maxLimit, defaultLimit))
	fs.StringVar(&f.pipeline, "pipeline", "", "the pipeline: its name (with -template, one the template deploys; else "+defaultDir+"/<name>.json) or its JSON file (default: with -template, the only one it deploys; else $PIPELINE_CONFIG, else the only one in "+defaultDir+"/)")
	fs.StringVar(&f.parameter, "parameter", "", "the SSM parameter naming the current views table: the stack output ViewsParameterName (default $VIEWS_PARAMETER_NAME)")
	fs.StringVar(&f.table, "table", "", "the views table itself, instead of -parameter (default $VIEWS_TABLE_NAME)")
	fs.StringVar(&f.stream, "stream", "", "with -follow: the WindowResults Kinesis stream, the stack output WindowResultsStreamName (default $OUTPUT_STREAM_NAME)")
	fs.StringVar(&f.template, "template", "", "read the pipeline, parameter and stream from this synthesized template, named as the local runner deploys it (only with AWS_ENDPOINT_URL: the local stand-in)")
	fs.StringVar(&f.stack, "stack", defaultStack, "with -template: the prefix the local runner gave the names (make local-up prints it)")
	if err := cli.Parse(fs, args, stdout, usage, footer); errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	} else if err != nil {
		return fail(stderr, err)
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })

	// Whole seconds: durations ago give readable times.
	q, err := f.check(lookup, now().UTC().Truncate(time.Second))
	if err != nil {
		return fail(stderr, err)
	}
	if q.filesUnread != nil {
		first, _, _ := strings.Cut(q.filesUnread.Error(), "\n")
		fmt.Fprintf(stderr, "results: note: the pipeline files do not load (%s): the running make local-up runs the files it deployed, and these are their windows\n", strictjson.Cut(first, 300))
	}
	if q.changedFile != "" {
		fmt.Fprintf(stderr, "results: note: %s has changed since the running make local-up deployed it: these are the windows of the file it deployed; stop make local-up (Ctrl-C) and start it again to run the change\n",
			q.changedFile)
	}
	awsCfg, err := cli.LoadAWS(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	if f.template != "" {
		if endpoint, _ := lookup("AWS_ENDPOINT_URL"); !standin.Answers(ctx, endpoint) {
			return fail(stderr, fmt.Errorf("nothing answers at %s: start the topology with make local-up first (or set TRIBUTARY_STANDIN_ADDR to where it runs)", endpoint))
		}
	}
	if f.follow {
		err = follow(ctx, kinesis.NewFromConfig(awsCfg), q, stdout, stderr)
		if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
			return cli.ExitOK // Ctrl-C is how a follow ends
		}
		if err != nil {
			return fail(stderr, cmp.Or(stackNotRunning(ctx, awsCfg, &f), err))
		}
		return cli.ExitOK
	}
	if err := show(ctx, dynamodb.NewFromConfig(awsCfg), ssm.NewFromConfig(awsCfg), q, stdout, stderr); err != nil {
		return fail(stderr, cmp.Or(stackNotRunning(ctx, awsCfg, &f), err))
	}
	return cli.ExitOK
}

// query is what the flags ask for, checked.
type query struct {
	cfg     *pipeline.Config
	cfgFrom string // where cfg was read, for errors
	// changedFile: the pipeline file of cfg's name, with -template, when it
	// is not the one the template deploys (edited since make local-up).
	changedFile      string
	filesUnread      error // the pipeline files do not load (with -template)
	key              string
	kinds            []string // the window kinds shown; every one of the pipeline when -window is not given
	from, to         time.Time
	follow, asJSON   bool
	limit            int
	parameter, table string // one of them, for the table
	stream           string // for -follow
}

// check validates every flag before anything is read from AWS, and
// resolves the names: a flag given, else the template's, else the
// environment's.
func (f *flags) check(lookup func(string) (string, bool), now time.Time) (*query, error) {
	env := func(k string) string { v, _ := lookup(k); return v }
	q := &query{key: f.key, follow: f.follow, asJSON: f.asJSON}
	local := localNames{}
	var fromFile *pipeline.Config // -pipeline <file>
	var fileJSON []byte           // fromFile compacted, to compare with the deployed copy
	if f.set["pipeline"] && isPipelineFile(f.pipeline) {
		var err error
		if fromFile, fileJSON, err = pipelineFile(f.pipeline); err != nil {
			return nil, err
		}
	}
	if f.template != "" {
		if endpoint := env("AWS_ENDPOINT_URL"); endpoint == "" {
			return nil, cli.Usagef("template", "names resources as the local runner deploys them, but AWS_ENDPOINT_URL is not set; against AWS give -parameter and -stream (the stack outputs ViewsParameterName and WindowResultsStreamName)")
		}
		name := f.pipeline
		if fromFile != nil {
			name = fromFile.Name
		}
		var err error
		if local, err = readLocalNames(f.template, f.stack, name); err != nil {
			return nil, err
		}
	} else if f.set["stack"] {
		return nil, cli.Usagef("stack", "is only read with -template")
	}
	pick := func(flagName, flagValue, templateValue, envName string) string {
		if f.set[flagName] {
			return flagValue
		}
		if templateValue != "" {
			return templateValue
		}
		return env(envName)
	}
	q.parameter = pick("parameter", f.parameter, local.parameter, aggregate.EnvViewsParameter)
	q.table = pick("table", f.table, local.table, aggregate.EnvViewsTable)
	q.stream = pick("stream", f.stream, local.stream, aggregate.EnvOutputStream)

	var err error
	switch {
	case local.pipeline != "":
		// The running stack's windows are those of the copy it deployed,
		// whatever file is given: a file edited since is said.
		q.cfgFrom = "the template's " + pipeline.EnvVar
		if q.cfg, err = pipeline.Parse([]byte(local.pipeline)); err != nil {
			err = cli.Usagef("template", "%s: the aggregate function's %s: %v", f.template, pipeline.EnvVar, err)
		} else if fromFile != nil {
			if string(fileJSON) != local.pipeline {
				q.changedFile = f.pipeline
			}
		} else {
			q.changedFile, q.filesUnread = changedSinceDeploy(defaultDir, q.cfg.Name, local.pipeline)
		}
	case fromFile != nil:
		q.cfg, q.cfgFrom = fromFile, "the file "+f.pipeline
	case f.set["pipeline"]:
		q.cfg, err = pipelineNamed(defaultDir, f.pipeline)
		q.cfgFrom = "its file in " + defaultDir + "/"
	case env(pipeline.EnvVar) != "":
		q.cfgFrom = "$" + pipeline.EnvVar
		if q.cfg, err = pipeline.FromEnv(lookup); err != nil {
			err = cli.Usagef("pipeline", "not given, and %v", err)
		}
	default:
		q.cfg, err = pipelineNamed(defaultDir, "")
		q.cfgFrom = "the only file in " + defaultDir + "/"
	}
	if err != nil {
		return nil, err
	}
	if err := checkKey(f.key); err != nil {
		return nil, err
	}
	q.kinds = results.Kinds(q.cfg)
	if f.window != "" {
		kind, err := results.Kind(q.cfg, f.window)
		if err != nil {
			return nil, cli.Usagef("window", "%v", err)
		}
		q.kinds = []string{kind}
	}
	if f.follow {
		return q, f.checkFollow(q, now)
	}
	return q, f.checkTable(q, now)
}

// checkKey is a *cli.UsageError for a -key that ingest's key check
// refuses (too long, a control character, not UTF-8): no event can have
// it, nor can a grouping key read from data (pipeline.Config.Extract holds
// one to the same limits), so it has no windows or results, and looking it
// up would answer as if it were a typo of a real key. A blank key is left
// to -key's own checks: required for the table, and a grouping key read
// from data may be white space.
func checkKey(key string) error {
	if strings.TrimSpace(key) == "" {
		return nil
	}
	var refused *stream.FieldError // CheckKey's only error
	if !errors.As(stream.CheckKey(key), &refused) {
		return nil
	}
	return cli.Usagef("key", "%s can never be an event's key, so it has no windows: ingest refuses a key that %s",
		strictjson.QuoteCut(key, maxKeyEcho), refused.Reason)
}

func (f *flags) checkFollow(q *query, now time.Time) error {
	if f.set["to"] {
		return cli.Usagef("to", "is not read with -follow, which reads until Ctrl-C (or -limit records)")
	}
	if q.cfg != nil && !q.cfg.Outputs.Stream {
		return cli.Usagef("follow", "reads the window results stream, and pipeline %s writes its windows only to the views table (its file has no \"outputs\": {\"table\": true, \"stream\": true}): read them with -key <key>",
			q.cfg.Name)
	}
	if err := cli.Required("stream", q.stream, "the WindowResults stream to follow (the stack output WindowResultsStreamName, or $OUTPUT_STREAM_NAME)"); err != nil {
		return err
	}
	if err := cli.StreamName.Check("stream", q.stream); err != nil {
		return err
	}
	if f.set["limit"] {
		if err := cli.IntIn("limit", f.limit, 1, maxLimit, ""); err != nil {
			return err
		}
		q.limit = f.limit
	}
	if f.from != "" {
		t, err := parseTime("from", f.from, now, maxFollowFrom, "the longest a Kinesis stream keeps records")
		if err != nil {
			return err
		}
		if t.After(now) {
			return cli.Usagef("from", "%s is in the future (it is %s now): nothing has arrived there yet", strictjson.Cut(f.from, cli.MaxEcho), now.UTC().Format(time.RFC3339))
		}
		if now.Sub(t) > maxFollowFrom {
			return cli.Usagef("from", "%s is more than %s ago, longer than a Kinesis stream keeps records", strictjson.Cut(f.from, cli.MaxEcho), maxFollowFrom)
		}
		q.from = t
	}
	return nil
}

func (f *flags) checkTable(q *query, now time.Time) error {
	if err := cli.Required("key", f.key, "the key whose windows to show (or -follow to tail the stream)"); err != nil {
		return err
	}
	switch {
	case f.set["table"] && f.set["parameter"]:
		return cli.Usagef("table", "and -parameter both given: give one (the parameter names the current views table)")
	case q.table != "" && (f.set["table"] || q.parameter == ""):
		if err := cli.TableName.Check("table", q.table); err != nil {
			return err
		}
		q.parameter = ""
	case q.parameter != "":
		if err := cli.ParameterName.Check("parameter", q.parameter); err != nil {
			return err
		}
		q.table = ""
	default:
		return cli.Usagef("parameter", "is required (or -table): the SSM parameter naming the current views table, the stack output ViewsParameterName")
	}
	q.limit = defaultLimit
	if f.set["limit"] {
		if err := cli.IntIn("limit", f.limit, 1, maxLimit, ""); err != nil {
			return err
		}
		q.limit = f.limit
	}
	from, to := f.from, f.to
	if from == "" {
		from = defaultFrom.String()
	}
	if to == "" {
		to = "now"
	}
	var err error
	kept := fmt.Sprintf("windows are kept at most %s after they end, a pipeline's retention", pipeline.MaxRetention)
	if q.from, err = parseTime("from", from, now, maxRange, kept); err != nil {
		return err
	}
	if to == "now" {
		// Windows start in [from, to): one that starts this second is
		// shown too.
		q.to = now.Add(time.Second)
	} else if q.to, err = parseTime("to", to, now, maxRange, kept); err != nil {
		return err
	}
	if !q.from.Before(q.to) {
		return cli.Usagef("from", "%s is not before -to %s", q.from.UTC().Format(time.RFC3339Nano), q.to.UTC().Format(time.RFC3339Nano))
	}
	span, until := q.to.Sub(q.from), q.to.UTC().Format(time.RFC3339)
	if to == "now" {
		// The second added above is not the user's: -from 8784h, taken
		// as at most 8784h ago, spans 8784h to now.
		span -= time.Second
		until = "now (" + now.UTC().Format(time.RFC3339) + ")"
	}
	if span > maxRange {
		spanText := span.Truncate(time.Second).String()
		if q.from.Add(q.to.Sub(q.from)).Before(q.to) {
			// Sub saturates at time.Duration's largest value.
			spanText = "more than 292 years"
		}
		return cli.Usagef("from", "%s is %s before -to %s; a range spans at most %s (%s)",
			strictjson.Cut(from, cli.MaxEcho), spanText, until, maxRange, kept)
	}
	return nil
}

// parseTime reads an RFC 3339 time or a positive duration before now, of
// at most max (why says why).
func parseTime(flagName, s string, now time.Time, max time.Duration, why string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil && cli.IsDuration(s) || err == nil && d > max {
		// (A duration past what time.Duration holds, about 2562047h,
		// does not parse, and is one all the same.)
		return time.Time{}, cli.Usagef(flagName, "%s: at most %s ago (%s)", strictjson.Cut(s, cli.MaxEcho), max, why)
	}
	if err != nil {
		return time.Time{}, cli.Usagef(flagName, "%s is neither an RFC 3339 time (2026-11-29T10:00:00Z) nor a duration ago (90m)", strictjson.QuoteCut(s, cli.MaxEcho))
	}
	if d <= 0 {
		return time.Time{}, cli.Usagef(flagName, "%s: a duration ago must be positive (2h means two hours ago)", strictjson.Cut(s, cli.MaxEcho))
	}
	return now.Add(-d), nil
}

// pipelineFile is the pipeline in file, read at most to its bound.
func pipelineFile(file string) (*pipeline.Config, []byte, error) {
	b, err := cli.ReadFile("pipeline", file, pipeline.MaxFileBytes, "a pipeline file is a small JSON object")
	if err != nil {
		return nil, nil, err
	}
	cfg, err := pipeline.Parse(b)
	if err != nil {
		return nil, nil, cli.Usagef("pipeline", "%s: %v", file, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil { // Parse took it: cannot fail
		return nil, nil, cli.Usagef("pipeline", "%s: %v", file, err)
	}
	return cfg, compact.Bytes(), nil
}

// windowStore is what show needs of DynamoDB: the reader's reads.
type windowStore interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

var _ windowStore = (*dynamodb.Client)(nil)

// show prints the key's first q.limit windows from the views table, having
// read no more of them than that and one (which says there are more).
func show(ctx context.Context, db windowStore, params *ssm.Client, q *query, stdout, stderr io.Writer) error {
	table, via := q.table, ""
	if table == "" {
		vt := aggregate.NewViewsTable(sdkparam.New(params), q.parameter, 0, nil, nil)
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		err := vt.Resolve(rctx)
		cancel()
		if err != nil {
			return fmt.Errorf("-parameter %s: %w", q.parameter, err)
		}
		table, via = vt.Current(ctx), " (named by "+q.parameter+")"
	}
	// A long read (up to 100,000 windows, page by page) says how far it
	// got: nothing else is printed until it ends.
	counted := &countingStore{windowStore: db}
	stopProgress := counted.report(stderr, progressEvery)
	r := results.NewReader(q.cfg, counted, table)
	views, more, err := r.Windows(ctx, q.key, q.kinds, q.from, q.to, q.limit)
	stopProgress()
	if err != nil {
		var nf *ddbtypes.ResourceNotFoundException
		if errors.As(err, &nf) {
			return fmt.Errorf("views table %s%s does not exist: %w", table, via, err)
		}
		if errors.Is(err, agg.ErrSpecMismatch) {
			// The stored results decode only with the aggregates that wrote
			// them: the file read is not the function's (edited since, or
			// another pipeline's).
			return fmt.Errorf("%w; -pipeline must be the pipeline the aggregate function runs, with the aggregates it ran with when these windows were written (read from %s)", err, cmp.Or(q.cfgFrom, "the configuration given"))
		}
		return err
	}
	// How many more there are is not known: counting them would read them.
	moreNote := fmt.Sprintf("… and more windows not shown, past the first %d (raise -limit, or narrow -from/-to or -window)", q.limit)
	if q.asJSON {
		if err := results.WriteJSON(stdout, views); err != nil {
			return err
		}
		if more {
			fmt.Fprintf(stderr, "results: %s\n", moreNote) // stdout holds only JSON lines
		}
		return nil
	}
	fmt.Fprintf(stdout, "pipeline %s, key %s: windows starting from %s to %s, from %s%s\n\n", q.cfg.Name, results.QuoteKey(q.key),
		q.from.UTC().Format(results.TimeFormat), q.to.UTC().Format(results.TimeFormat), table, via)
	if len(views) == 0 {
		fmt.Fprintf(stdout, "no windows of key %s start in that range. Keys are case-sensitive; the pipeline counts events of type %v by their %s.\n",
			results.QuoteKey(q.key), typesOf(q.cfg), q.cfg.Key)
		return nil
	}
	if err := results.WriteTable(stdout, q.cfg.Aggregates, views); err != nil {
		return err
	}
	if more {
		fmt.Fprintf(stdout, "\n%s\n", moreNote)
	}
	return nil
}

// progressEvery is how often a table read still going says how far it got.
var progressEvery = 10 * time.Second

// countingStore counts the window items and pages its Query calls return.
type countingStore struct {
	windowStore
	items, pages atomic.Int64
}

func (c *countingStore) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.windowStore.Query(ctx, in, opts...)
	if err == nil {
		c.items.Add(int64(len(out.Items)))
		c.pages.Add(1)
	}
	return out, err
}

// report writes a line to w every `every` until the returned stop is
// called (which waits for the writer to be done with w).
func (c *countingStore) report(w io.Writer, every time.Duration) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "results: still reading the views table: %d window item(s) in %d page(s) after %s\n",
					c.items.Load(), c.pages.Load(), time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done); <-exited }
}

func typesOf(cfg *pipeline.Config) any {
	if len(cfg.EventTypes) == 0 {
		return "any"
	}
	return cfg.EventTypes
}

// follow prints the stream's records as they arrive.
func follow(ctx context.Context, kin *kinesis.Client, q *query, stdout, stderr io.Writer) error {
	f := results.NewFollower(kin, q.stream)
	f.OnStart = func(shards int, from string) {
		unit := "shards"
		if shards == 1 {
			unit = "shard"
		}
		fmt.Fprintf(stderr, "following %s (%d %s) from %s; Ctrl-C stops\n", q.stream, shards, unit, from)
	}
	f.OnUndecodable = func(e *results.UndecodableError) { fmt.Fprintf(stderr, "results: skipped %v\n", e) }
	kinds := map[string]bool{}
	for _, k := range q.kinds {
		kinds[k] = true
	}
	errLimit := errors.New("limit reached")
	n := 0 // printed
	f.OnProgress = func(p results.Progress) {
		fmt.Fprintf(stderr, "results: still catching up: %d record(s) read, %d printed; %s is %v behind the stream's tip\n",
			p.Read, n, p.Shard, p.Behind.Round(time.Second))
	}
	err := f.Follow(ctx, q.from, func(r results.Record) error {
		if (q.key != "" && r.Output.Key != q.key) || !kinds[r.Output.Window] || r.Output.Pipeline != q.cfg.Name {
			return nil
		}
		if q.asJSON {
			// One record a line, however its producer spaced it (the
			// follower has read it as one valid JSON object).
			var line bytes.Buffer
			if err := json.Compact(&line, r.Data); err != nil {
				return err
			}
			line.WriteByte('\n')
			if _, err := stdout.Write(line.Bytes()); err != nil {
				return err
			}
		} else if _, err := fmt.Fprintf(stdout, "%s  %s\n", r.Arrived.UTC().Format(time.RFC3339), results.FormatOutput(r.Output)); err != nil {
			return err
		}
		if n++; q.limit > 0 && n >= q.limit {
			return errLimit
		}
		return nil
	})
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// fail prints err in one line and returns the exit status (cli.Fail).
func fail(stderr io.Writer, err error) int { return cli.Fail(stderr, "results", err, "") }
