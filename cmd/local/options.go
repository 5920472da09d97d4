package main

import (
	"flag"
	"os"
	"path/filepath"
	"time"

	"github.com/tributary-dev/tributary/pkg/standin"
)

type options struct {
	root     string
	template string
	bin      string
	addr     string
	urlPort  int
	keys     int
	minutes  int
	max      int
	seed     uint64
	timeout  time.Duration
	verbose  bool
	since    time.Duration

	scheduleEvery time.Duration
}

func bindOptions(fs *flag.FlagSet) *options {
	root, err := standin.RepoRoot()
	if err != nil {
		root = "."
	}
	o := &options{root: root}
	fs.StringVar(&o.template, "template", filepath.Join(root, "infra", "cdk.out", "Tributary.template.json"), "synthesized stack template")
	fs.StringVar(&o.bin, "functions", filepath.Join(root, ".build", "local"), "directory of <function>/bootstrap built for this machine")
	fs.StringVar(&o.addr, "standin", envOr("TRIBUTARY_STANDIN_ADDR", standin.DefaultAddr), "host:port of the AWS stand-in (reused when something answers there)")
	fs.IntVar(&o.urlPort, "url-port", 9000, "first port for function URLs on 127.0.0.1 (0 = any free port)")
	fs.IntVar(&o.keys, "keys", 8, "run: distinct keys in the sample traffic")
	fs.IntVar(&o.minutes, "minutes", 3, "run: event-time minutes in the sample traffic")
	fs.IntVar(&o.max, "max", 40, "run: at most this many events per key and minute")
	fs.Uint64Var(&o.seed, "seed", 1, "run: random seed of the sample traffic")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "run: give up waiting for results after this long")
	fs.BoolVar(&o.verbose, "v", false, "echo every function log line")
	fs.DurationVar(&o.since, "since", time.Hour, "logs: how far back to print")
	fs.DurationVar(&o.scheduleEvery, "schedule-every", 5*time.Second, "fire EventBridge schedules this often instead of their rate (0 = their rate)")
	return o
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
