package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/emulator/rie"
	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/pkg/cep"
	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/join"
	"github.com/tributary-dev/tributary/pkg/state"
)

func main() {
	runs := flag.Int("runs", 9, "cold starts per function; the median is printed")
	flag.Parse()
	if err := run(*runs); err != nil {
		fmt.Fprintf(os.Stderr, "binary: %v\n", err)
		os.Exit(1)
	}
}

// payloads are the cheapest invocations each function answers: an empty
// batch for the stream and queue consumers (detect, join, project and
// archive on Kinesis, publish on the event store's DynamoDB stream), a request ingest
// refuses without writing, a rule rules refuses and a command commands
// refuses (both empty bodies, refused before any table is read), a tick
// over an empty views table, a snapshot request missing its fields.
var payloads = map[string]string{
	"aggregate":  `{"Records":[]}`,
	"enrich":     `{"Records":[]}`,
	"cdc":        `{"Records":[]}`,
	"timeline":   `{"Records":[]}`,
	"quarantine": `{"Records":[]}`,
	"worker":     `{"Records":[]}`,
	"detect":     `{"Records":[]}`,
	"join":       `{"Records":[]}`,
	"publish":    `{"Records":[]}`,
	"project":    `{"Records":[]}`,
	"archive":    `{"Records":[]}`,
	"ingest":     functionURLRequest("POST", "/"),
	"rules":      functionURLRequest("POST", "/rules"),
	"commands":   functionURLRequest("POST", "/commands"),
	"ticker":     `{}`,
	"snapshot":   `{}`,
	"hello":      `{}`,
}

// functionURLRequest is a Function URL event with an empty JSON body.
func functionURLRequest(method, path string) string {
	return `{"version":"2.0","rawPath":"` + path + `","requestContext":{"http":{"method":"` + method + `","path":"` + path +
		`"}},"headers":{"content-type":"application/json"},"body":"","isBase64Encoded":false}`
}

// Tables the stand-in holds before the first cold start: the views table
// the ticker's first call queries, and the rules table detect's first call
// reads the rules' version from (as deployed, it reads it before any
// batch). The other names in environment need not exist: no other
// function's first call reaches a table.
const (
	viewsTable = "views"
	rulesTable = "cep-rules"
)

// environment is what every function may need at init: each table,
// stream and index named, the deployed pipeline, CEP and join configs
// (pipelines/pageviews.json, infra/tributary/*.json), and the stand-in. Functions that read the views table's
// name from an SSM parameter when deployed (aggregate, ticker, commands,
// project) get the table's name directly here, so their init makes no
// request.
func environment(root, endpoint string) (map[string]string, error) {
	configs := map[string]string{"pipelines/pageviews.json": "", "pipelines/detect.json": "", "pipelines/search-click.json": ""}
	for name := range configs {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return nil, err
		}
		configs[name] = string(b)
	}
	return map[string]string{
		"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": standin.Region,
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"PIPELINE_CONFIG": configs["pipelines/pageviews.json"], "VIEWS_TABLE_NAME": viewsTable,
		"QUARANTINE_TABLE_NAME": "quarantine", "OUTPUT_STREAM_NAME": "window-results",
		"EVENTS_STREAM_NAME": "events", "ENRICHED_STREAM_NAME": "enriched", "JOIN_TABLE_NAME": "joins",
		"PROFILES_TABLE_NAME": "profiles", "FOLLOWERS_INDEX_NAME": "followers", "FOLLOWS_TABLE_NAME": "follows",
		"TIMELINES_TABLE_NAME": "timelines", "TWEETS_TABLE_NAME": "tweets", "TIMELINE_FANOUT_TABLE_NAME": "timeline-fanout",
		"IDEMPOTENCY_TABLE_NAME": "idempotency", "RESULTS_TABLE_NAME": "results",
		// detect and rules (CEP), join (the stream–stream join)
		cep.EnvVar: configs["pipelines/detect.json"], "CEP_STATE_TABLE_NAME": "cep-state",
		"RULES_TABLE_NAME": rulesTable, "MATCHES_STREAM_NAME": "matches",
		join.EnvVar: configs["pipelines/search-click.json"], "JOIN_STATE_TABLE_NAME": "join-state", "JOINS_STREAM_NAME": "joins",
		// commands, publish, project (event sourcing)
		es.EnvEventsTable: "show-events", es.EnvSnapshotsTable: "show-snapshots",
		es.EnvCommandsTable: "show-commands", es.EnvStreamName: "show-published",
		"ARCHIVE_BUCKET_NAME": "archive", // an empty batch writes no object
	}, nil
}

// build builds pkg into out with the project's flags for goarch.
func build(root, pkg, out, goarch string) error {
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s for %s: %v\n%s", pkg, goarch, err, b)
	}
	return nil
}

type result struct {
	name     string
	mb       float64
	initMs   []float64
	warmMs   []float64 // the second invocation of the same environment
	failures int       // first responses that were function errors
}

func run(runs int) error {
	if runs < 1 {
		return fmt.Errorf("-runs must be at least 1")
	}
	root, err := standin.RepoRoot()
	if err != nil {
		return err
	}
	ctx := context.Background()
	srv, err := standin.Start(ctx, standin.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer srv.Stop()
	awsCfg, err := standin.Config(ctx, srv.Endpoint())
	if err != nil {
		return err
	}
	db := dynamodb.NewFromConfig(awsCfg)
	if err := state.CreateTable(ctx, db, viewsTable); err != nil {
		return err
	}
	if err := cep.CreateRulesTable(ctx, db, rulesTable); err != nil {
		return err
	}
	env, err := environment(root, srv.Endpoint())
	if err != nil {
		return err
	}
	emulator, err := rie.Install(ctx, nil)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-binary-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	entries, err := os.ReadDir(filepath.Join(root, "functions"))
	if err != nil {
		return err
	}
	names := []string{"hello"}
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	results := make([]result, len(names))
	locals := make([]string, len(names))
	for i, name := range names {
		pkg := "./functions/" + name
		if name == "hello" {
			pkg = "./bench/binary/hello"
		}
		if _, ok := payloads[name]; !ok {
			return fmt.Errorf("function %s: no cheap invocation is known for it: add one to payloads", name)
		}
		deployed := filepath.Join(dir, "arm64", name, "bootstrap")
		locals[i] = deployed
		if err := build(root, pkg, deployed, "arm64"); err != nil {
			return err
		}
		if runtime.GOARCH != "arm64" {
			locals[i] = filepath.Join(dir, runtime.GOARCH, name, "bootstrap")
			if err := build(root, pkg, locals[i], runtime.GOARCH); err != nil {
				return err
			}
		}
		st, err := os.Stat(deployed)
		if err != nil {
			return err
		}
		results[i] = result{name: name, mb: float64(st.Size()) / 1e6}
	}
	// Round after round over every function, so that whatever else the
	// machine does weighs on all of them alike.
	for range runs {
		for i, name := range names {
			ms, warm, failed, err := coldStart(ctx, emulator, name, locals[i], env, []byte(payloads[name]))
			if err != nil {
				return err
			}
			r := &results[i]
			r.initMs = append(r.initMs, ms)
			r.warmMs = append(r.warmMs, warm)
			if failed {
				r.failures++
			}
		}
	}
	hello := results[0]
	for _, r := range results {
		m := median(r.initMs)
		fmt.Printf("BENCH binary fn=%s mb=%.2f hello_ratio=%.2f init_ms=%.1f init_hello_ratio=%.2f\n",
			r.name, r.mb, r.mb/hello.mb, m, m/median(hello.initMs))
	}
	for _, r := range results {
		s := slices.Clone(r.initMs)
		slices.Sort(s)
		var extra []float64
		for i := range r.initMs {
			extra = append(extra, r.initMs[i]-r.warmMs[i])
		}
		fmt.Printf("BENCH binary_spread fn=%s runs=%d init_ms_min=%.1f init_ms_max=%.1f warm_ms=%.1f cold_extra_ms=%.1f error_responses=%d\n",
			r.name, len(s), s[0], s[len(s)-1], median(r.warmMs), median(extra), r.failures)
	}
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// coldStart starts a fresh execution environment and times its first
// invocation — the emulator starts the bootstrap, the runtime initializes
// and answers — and then a second one, warm. It reports whether the first
// answer was a function error.
func coldStart(ctx context.Context, emulator, name, bootstrap string, env map[string]string, payload []byte) (first, warm float64, failed bool, err error) {
	var logs []string
	f, err := rie.Start(ctx, rie.Config{Name: name, Bootstrap: bootstrap, RIE: emulator, Env: env, Timeout: 10 * time.Second,
		Logs: func(_, line string) { logs = append(logs, line) }})
	if err != nil {
		return 0, 0, false, err
	}
	defer f.Stop()
	start := time.Now()
	res, err := f.Invoke(ctx, payload)
	elapsed := time.Since(start)
	if err != nil {
		return 0, 0, false, fmt.Errorf("%s: first invocation: %w\n%s", name, err, strings.Join(logs, "\n"))
	}
	if res.FunctionError != "" && strings.Contains(string(res.Payload), "Runtime.ExitError") {
		return 0, 0, false, fmt.Errorf("%s: the function did not start: %s\n%s", name, res.Payload, strings.Join(logs, "\n"))
	}
	start = time.Now()
	if _, err := f.Invoke(ctx, payload); err != nil {
		return 0, 0, false, fmt.Errorf("%s: second invocation: %w", name, err)
	}
	second := time.Since(start)
	return float64(elapsed.Microseconds()) / 1000, float64(second.Microseconds()) / 1000, res.FunctionError != "", nil
}
