package local_test

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/internal/testtools"
)

// runsHere is the entry runBy that TestDocumentedCommandsRun stands for.
const runsHere = "emulator/local TestDocumentedCommandsRun"

// docRun runs one documented command (c.text as the page has it) and
// fails t when it does not do what the page says.
type docRun func(t *testing.T, env *docEnv, c docCommand)

// docEnv is what the runs share: the repository root and one local
// topology, with its stand-in's host:port.
type docEnv struct {
	root  string
	stack *local.Stack
	addr  string
	// setAside: the records docs/set-aside.md's commands run on
	// (docs_setaside_test.go), made by the first of them; tmp: a directory
	// that outlives each command's subtest.
	setAside *setAsideDoc
	tmp      string
}

// bash runs script under bash -euo pipefail in dir with env (nil: this
// process's), and returns its standard output.
func bash(t *testing.T, dir string, env []string, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", script, err, out, stderr.String())
	}
	return string(out)
}

// underMakeLock runs a make command under the lock the tests build under
// (paths), so that it never builds or synthesizes beside another.
func underMakeLock(root, command string) string {
	return "flock " + filepath.Join(root, ".build", "make.lock") + " " + command
}

// dryRun: `make -n` of a documented make command: the targets exist and
// their recipes expand (the long ones — make local, make test, make bench
// — are run for real by .ci/run and by the people who run them; make
// test's parts run make -n of their own).
func dryRun(t *testing.T, env *docEnv, c docCommand) {
	args := strings.TrimPrefix(strings.TrimPrefix(c.text, "cd .. && "), "make ")
	out := bash(t, env.root, nil, "make -n "+args)
	if strings.TrimSpace(out) == "" {
		t.Errorf("%s: make -n printed no recipe", c)
	}
}

// docRuns says how TestDocumentedCommandsRun runs each command registered
// with runBy runsHere, by the entry's prefix. Pages' own files add theirs:
// docs_setaside_test.go docs/set-aside.md's; docs_tryit_test.go the
// "Try it locally" commands of docs/event-sourcing.md, docs/stream-joins.md
// (whose make tail STREAM=joins runs as docs/tail.md's do) and
// docs/changes.md.
var docRuns = map[string]docRun{
	// README.md's two commands and deploy step, docs/localstack.md's make
	// local, docs/performance.md's make bench.
	"make local":                    dryRun,
	"make test":                     dryRun,
	"cd .. && make functions synth": dryRun,
	"make bench":                    dryRun,
	// -follow runs until Ctrl-C: cmd/results' TestFollow runs it; here
	// the target expands.
	"make results PIPELINE=checkouts FOLLOW=1": dryRun,

	"make results PIPELINE=pageviews KEY=user-42": func(t *testing.T, env *docEnv, c docCommand) {
		// make results reads the make local-up on 127.0.0.1:4566 unless
		// TRIBUTARY_STANDIN_ADDR names another: here, this test's.
		out := bash(t, env.root, append(os.Environ(), "TRIBUTARY_STANDIN_ADDR="+env.addr), underMakeLock(env.root, c.text))
		if !strings.Contains(out, "pipeline pageviews, key user-42: windows starting from") {
			t.Errorf("%s:\n%s\nwant the windows of pageviews' key user-42, as docs/results.md shows", c, out)
		}
	},

	// docs/tail.md's four: each as written, against this test's stand-in,
	// stopping at the end of what is there (FOLLOW=0) instead of following.
	"make tail STREAM=": func(t *testing.T, env *docEnv, c docCommand) {
		command, piped, _ := strings.Cut(c.text, " |")
		redirect := " 2>&1" // its first line, on stderr, says how it reads
		if piped != "" {
			redirect = ""
		}
		run := strings.Replace(c.text, command, underMakeLock(env.root, command+" FOLLOW=0"+redirect), 1)
		out := bash(t, env.root, append(os.Environ(), "TRIBUTARY_STANDIN_ADDR="+env.addr), run)
		if strings.Contains(c.text, "| jq") {
			return // jq read every line as JSON, or bash's pipefail failed the run
		}
		if !strings.Contains(out, "tail: ") || !strings.Contains(out, "by polling") {
			t.Errorf("%s:\n%s\nwant its first line saying which stream it reads and how", c, out)
		}
	},

	"make invoke FN=ingest EVENT=events/ingest/function-url-post.json": func(t *testing.T, env *docEnv, c docCommand) {
		stack := env.stack
		u, err := url.Parse(stack.InvokeURL())
		if err != nil {
			t.Fatal(err)
		}
		// LAMBDA_PORT: this test's Invoke API, not a make local-up's.
		out := bash(t, env.root, nil, underMakeLock(env.root, c.text+" LAMBDA_PORT="+u.Port()))
		for _, want := range []string{"function URL sample: rewritten, never refused", "▸ ingest answered:", `"statusCode": 202`} {
			if !strings.Contains(out, want) {
				t.Errorf("%s:\n%s\nwant %q", c, out, want)
			}
		}
	},

	"aws lambda invoke": func(t *testing.T, env *docEnv, c docCommand) {
		// make deps installs the AWS CLI into .tools/awscli (a user has
		// their own on PATH): it comes first here.
		path := filepath.Join(env.root, ".tools", "awscli", "cli") + string(os.PathListSeparator) + os.Getenv("PATH")
		if _, err := os.Stat(filepath.Join(env.root, ".tools", "awscli", "cli", "aws")); err != nil {
			testtools.Need(t, "docs/local.md's aws lambda invoke needs it (make deps installs it into .tools/awscli)", "aws")
		}
		stack := env.stack
		const documented = "http://127.0.0.1:3001"
		if !strings.Contains(c.text, documented) {
			t.Fatalf("%s: does not name %s, the Invoke API of make local-up", c, documented)
		}
		// As a new user runs it: no AWS_* in the environment, no config
		// file, in a directory of their own holding the samples.
		dir := t.TempDir()
		if err := os.Symlink(filepath.Join(env.root, "events"), filepath.Join(dir, "events")); err != nil {
			t.Fatal(err)
		}
		clean := []string{"PATH=" + path, "HOME=" + dir}
		out := bash(t, dir, clean, strings.ReplaceAll(c.text, documented, stack.InvokeURL()))
		if !strings.Contains(out, `"StatusCode": 200`) || strings.Contains(out, "FunctionError") {
			t.Errorf("%s:\n%s\nwant StatusCode 200 and no FunctionError", c, out)
		}
		answer, err := os.ReadFile(filepath.Join(dir, "out.json"))
		if err != nil || !strings.Contains(string(answer), "published") {
			t.Errorf("%s: out.json %s (%v), want snapshot's answer", c, answer, err)
		}
	},

	"curl -s -X POST http://127.0.0.1:9002/test": func(t *testing.T, env *docEnv, c docCommand) {
		testtools.Need(t, "docs/cep.md's example needs it", "curl")
		stack := env.stack
		const documented = "http://127.0.0.1:9002/"
		if !strings.Contains(c.text, documented) {
			t.Fatalf("%s: does not name %s, the rules URL of make local-up", c, documented)
		}
		out := bash(t, env.root, nil, strings.ReplaceAll(c.text, documented, stack.URL("rules")))
		if !strings.Contains(out, `"big"`) || !strings.Contains(out, `"e1"`) {
			t.Errorf("%s:\n%s\nwant rule big's match of e1", c, out)
		}
	},

	"go run ./cmd/rules test -rule rule.json -events events.jsonl": func(t *testing.T, env *docEnv, c docCommand) {
		dir := t.TempDir()
		rule := `{"id": "big-payment", "pattern": [{"begin": "p", "type": "payment", "where": "data.amount > 100"}]}` + "\n"
		// e3, of another key, is a second behind e1: within detect's
		// outOfOrderness, so matched, not late, when the command runs as
		// detect does (with 0s, on the one shard of the file, it is late).
		events := `{"id":"e1","type":"payment","key":"u1","occurredAt":"2026-12-01T10:00:01Z","sentAt":"2026-12-01T10:00:01Z","data":{"amount":150}}` + "\n" +
			`{"id":"e2","type":"payment","key":"u2","occurredAt":"2026-12-01T10:00:00Z","sentAt":"2026-12-01T10:00:00Z","data":{"amount":50}}` + "\n" +
			`{"id":"e3","type":"payment","key":"u2","occurredAt":"2026-12-01T10:00:00Z","sentAt":"2026-12-01T10:00:00Z","data":{"amount":200}}` + "\n"
		for name, body := range map[string]string{"rule.json": rule, "events.jsonl": events} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		script := strings.NewReplacer(" rule.json", " "+filepath.Join(dir, "rule.json"), " events.jsonl", " "+filepath.Join(dir, "events.jsonl")).Replace(c.text)
		out := bash(t, env.root, nil, script)
		if !strings.Contains(out, "p=e1@") || !strings.Contains(out, "p=e3@") || strings.Contains(out, "e2") {
			t.Errorf("%s:\n%s\nwant big-payment's matches of e1 and e3 alone", c, out)
		}
		if !strings.Contains(out, " 0 late ") {
			t.Errorf("%s:\n%s\nwant no event late: e3 is within detect's outOfOrderness (pipelines/detect.json)", c, out)
		}
	},

	// Docker is not on the test machines (make localstack-check runs
	// LocalStack without it): the compose file the command names exists
	// and publishes LocalStack on 4566, where make local looks, and the
	// health URL is the one make localstack-check waits on.
	"docker compose -f localstack/docker-compose.yml up -d": func(t *testing.T, env *docEnv, c docCommand) {
		b, err := os.ReadFile(filepath.Join(env.root, "localstack", "docker-compose.yml"))
		if err != nil || !strings.Contains(string(b), `"127.0.0.1:4566:4566"`) {
			t.Errorf("%s: localstack/docker-compose.yml (%v) does not publish 127.0.0.1:4566", c, err)
		}
	},
	"curl -s http://127.0.0.1:4566/_localstack/health": func(t *testing.T, env *docEnv, c docCommand) {
		b, err := os.ReadFile(filepath.Join(env.root, "scripts", "localstack-check.sh"))
		if err != nil || !strings.Contains(string(b), "/_localstack/health") {
			t.Errorf("%s: scripts/localstack-check.sh (%v) does not wait on /_localstack/health", c, err)
		}
	},
}

// TestDocumentedCommandsRun runs the commands of README.md and docs/*.md
// that TestEveryDocumentedCommandIsChecked says it runs, as the pages give
// them: the local ones against a local topology of its own (make invoke,
// aws lambda invoke with no AWS configuration at all, make results, the
// rules URL's /test), cmd/rules' offline test, and make -n of the long
// make targets.
func TestDocumentedCommandsRun(t *testing.T) {
	t.Parallel()
	root, _, _ := paths(t)
	stack, endpoint := startTopology(t)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	env := &docEnv{root: root, stack: stack, addr: u.Host, tmp: t.TempDir()}
	seen := map[string]bool{}
	for _, c := range documentedCommands(t, root) {
		h, ok := checkFor(c)
		if !ok || h.runBy != runsHere {
			continue
		}
		run, ok := docRuns[h.prefix]
		if !ok {
			t.Errorf("%s: registered as run by TestDocumentedCommandsRun, which has no docRuns entry for %q", c, h.prefix)
			continue
		}
		seen[h.prefix] = true
		t.Run(c.file+":"+h.prefix, func(t *testing.T) { run(t, env, c) })
	}
	for p := range docRuns {
		if !seen[p] {
			t.Errorf("docRuns %q: no documented command it runs", p)
		}
	}
}
