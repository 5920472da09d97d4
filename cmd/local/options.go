package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/emulator/template"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

type options struct {
	cmd           string // run, up, logs or invoke
	root          string
	template      string
	bin           string
	addr          string
	urlPort       int
	lambdaPort    int
	dashboardPort int
	keys          int
	minutes       int
	max           int
	seed          uint64
	timeout       time.Duration
	checkTimeout  time.Duration
	verbose       bool
	since         time.Duration
	stack         string
	raw           bool
	fn            string
	event         string
	checkOnly     bool
	screenshot    string

	// progressAfter is how long logs works before it says how far it
	// got (0: logsProgressAfter).
	progressAfter time.Duration
	// progress is where the running stack's own lines go (its
	// schedules, CloudWatch forwarding, Invoke API); nil: standard output.
	progress io.Writer

	scheduleEvery time.Duration
	batchWindow   time.Duration
	// set records the flags given on the command line, so that a command
	// can tell a default from a choice (run picks free ports unless told).
	set map[string]bool
}

// Default ports of `make local-up`: function URLs from 9000, the Lambda
// Invoke API where `sam local start-lambda` listens, the dashboard on 8090.
const (
	defaultURLPort       = 9000
	defaultLambdaPort    = 3001
	defaultDashboardPort = 8090
)

func bindOptions(fs *flag.FlagSet) *options {
	root, err := standin.RepoRoot()
	if err != nil {
		root = "."
	}
	o := &options{root: root, set: map[string]bool{}}
	fs.StringVar(&o.template, "template", filepath.Join(root, "infra", "cdk.out", "Tributary.template.json"), "synthesized stack template")
	fs.StringVar(&o.bin, "functions", filepath.Join(root, ".build", "local"), "directory of <function>/bootstrap built for this machine")
	addrUsage := "host:port of the AWS stand-in: moto is started there, or whatever already answers there (LocalStack, a make local-up) is used (env TRIBUTARY_STANDIN_ADDR)"
	def := envOr("TRIBUTARY_STANDIN_ADDR", standin.DefaultAddr)
	fs.StringVar(&o.addr, "addr", def, addrUsage)
	fs.StringVar(&o.addr, "standin", def, "the same as -addr")
	fs.IntVar(&o.urlPort, "url-port", defaultURLPort, "up: first port for function URLs on 127.0.0.1 (0 = any free port; run uses free ports unless given)")
	fs.IntVar(&o.lambdaPort, "lambda-port", defaultLambdaPort, "up, invoke: port of the local Lambda Invoke API on 127.0.0.1 (0 = any free port; run uses a free port unless given)")
	fs.IntVar(&o.dashboardPort, "dashboard-port", defaultDashboardPort, "up: port of the dashboard page on 127.0.0.1 (0 = any free port; run uses a free port unless given)")
	fs.IntVar(&o.keys, "keys", 8, "run: distinct keys in the sample traffic")
	fs.IntVar(&o.minutes, "minutes", 3, "run: event-time minutes in the sample traffic")
	fs.IntVar(&o.max, "max", 40, "run: at most this many events per key and minute")
	fs.Uint64Var(&o.seed, "seed", 1, "run: random seed of the sample traffic")
	fs.DurationVar(&o.timeout, "timeout", 6*time.Minute, "run: give up waiting for results after this long (the demo takes 1–3 min on 2 busy cores)")
	fs.DurationVar(&o.checkTimeout, "check-timeout", 3*time.Minute, "run: give up on one check (windows applied, a join, the tasks run, …) after this long, naming what did not arrive")
	fs.BoolVar(&o.verbose, "v", false, "list every resource, function and mapping, and echo every function log line")
	fs.DurationVar(&o.since, "since", time.Hour, "logs: how far back to print (make logs SINCE=), at most 168h")
	fs.StringVar(&o.stack, "stack", "Tributary", "logs: the stack whose functions' logs to print, as -template deploys it (a second make local-up prints STACK= for its own)")
	fs.BoolVar(&o.raw, "raw", false, "logs: print every log event as stored (START, END, EMF documents) instead of the summary")
	fs.StringVar(&o.fn, "fn", "", "invoke: the function (ingest, aggregate, … or a logical id, physical name or ARN)")
	fs.StringVar(&o.event, "event", "", "invoke: the JSON event file (for example events/ingest/function-url-post.json)")
	fs.BoolVar(&o.checkOnly, "check", false, "invoke: check -event, and -fn against -template unless a make local-up answers on -lambda-port, and invoke nothing (make invoke does, before it builds)")
	fs.StringVar(&o.screenshot, "screenshot", filepath.Join(root, ".build", "local-dashboard.png"), "run: save a PNG of the dashboard page here at the end (\"\" = none; needs chromium)")
	fs.DurationVar(&o.scheduleEvery, "schedule-every", 5*time.Second, "fire EventBridge schedules this often instead of their rate (0 = their rate)")
	fs.DurationVar(&o.batchWindow, "batching-window", time.Second, "run: shorten mappings' MaximumBatchingWindow to at most this (0 = the template's; up always uses the template's)")
	return o
}

// parsed records which flags fs saw.
func (o *options) parsed(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
}

// check refuses flag values no command can use, naming the flag (or the
// variable) and what is allowed: a port outside 0 to 65535 (-lambda-port
// -1 used to turn the Invoke API off while the banner still printed its
// command; 70000 was reported as a port in use), and a stand-in address
// that is not 127.0.0.1:<port> or localhost:<port> (127.0.0.1:99999 was
// reported in use, 127.0.0.1: silently took any free port).
func (o *options) check() error {
	for _, p := range []struct {
		flag  string
		value int
	}{{"url-port", o.urlPort}, {"lambda-port", o.lambdaPort}, {"dashboard-port", o.dashboardPort}} {
		if p.value < 0 || p.value > 65535 {
			return usageError{fmt.Sprintf("-%s %d: want a port from 1 to 65535, or 0 for any free port", p.flag, p.value)}
		}
	}
	// A malformed STACK= is refused, not read as "every stack's logs" (the
	// template's plan refuses the name, which logs took as no template).
	if o.cmd == "logs" && !template.ValidStackName(o.stack) {
		return usageError{fmt.Sprintf("-stack %s (make logs STACK=): a stack name starts with a letter and has only letters, digits and hyphens (at most 128), such as the Tributary-<time> a second make local-up prints", strictjson.QuoteCut(o.stack, 64))}
	}
	if o.cmd == "logs" && (o.since <= 0 || o.since > maxLogsSince) {
		return usageError{fmt.Sprintf("-since %s (make logs SINCE=): want how far back to read, above 0 and at most %s (the log groups keep 7 days), such as 10m or 2h", o.since, maxLogsSince)}
	}
	if err := standin.CheckAddr(o.addr); err != nil {
		name := "TRIBUTARY_STANDIN_ADDR"
		switch {
		case o.set["addr"]:
			name = "-addr"
		case o.set["standin"]:
			name = "-standin"
		}
		return usageError{fmt.Sprintf("%s %v", name, err)}
	}
	return nil
}

// port is the port to use for flag name: the flag's value for `up` and when
// given, else 0 (a free port), so that `make local` runs next to a `make
// local-up`.
func (o *options) port(name string, value int, keepDefault bool) int {
	if keepDefault || o.set[name] {
		return value
	}
	return 0
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// progressEvery is how long logs works before it says how far it got, and
// then how often.
func (o *options) progressEvery() time.Duration {
	if o.progressAfter > 0 {
		return o.progressAfter
	}
	return logsProgressAfter
}
