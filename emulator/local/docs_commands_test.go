package local_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docCommand is one shell command a page shows in a ```sh block: its file
// (README.md or docs/<topic>.md), the line it starts on, and its text with
// continuation lines joined, comments dropped and spaces collapsed.
type docCommand struct {
	file string
	line int
	text string
}

func (c docCommand) String() string { return fmt.Sprintf("%s:%d: %s", c.file, c.line, c.text) }

// shellBlock: the code blocks whose lines are commands.
var shellBlock = regexp.MustCompile("^```(sh|bash|shell|console)$")

// looksLikeCommand: a line of an unmarked block that is a command all the
// same (it would escape the check below).
var looksLikeCommand = regexp.MustCompile(`^\s*(\$ |make |go run |go test |curl |aws |npx |cd |docker |export )`)

// documentedCommands reads every ```sh block of README.md and docs/*.md
// under root. An unmarked block holding a line that looks like a command
// is a failure naming its file and line: mark it ```sh so it is checked.
func documentedCommands(t *testing.T, root string) []docCommand {
	t.Helper()
	files := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		files = append(files, filepath.Join("docs", filepath.Base(d)))
	}
	var out []docCommand
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, documentedCommandsOf(t, f, string(raw))...)
	}
	return out
}

// documentedCommandsOf reads the ```sh blocks of page f, whose text is raw.
func documentedCommandsOf(t *testing.T, f, raw string) []docCommand {
	t.Helper()
	var out []docCommand
	lines := strings.Split(raw, "\n")
	for i := 0; i < len(lines); i++ {
		fence := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(fence, "```") {
			continue
		}
		start := i + 1
		end := start
		for end < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[end]), "```") {
			end++
		}
		body := lines[start:end]
		i = end
		switch {
		case shellBlock.MatchString(fence):
			out = append(out, splitCommands(f, start+1, body)...)
		case fence == "```":
			for k, l := range body {
				if looksLikeCommand.MatchString(l) {
					t.Errorf("%s:%d: %q is a shell command in a block not marked ```sh: mark the block so that the command is checked", f, start+1+k, strings.TrimSpace(l))
				}
			}
		}
	}
	return out
}

// splitCommands cuts a block's lines (the first on line first) into
// commands: a line ending in a backslash, or with a quote still open,
// goes on; "# …" outside quotes is a comment.
func splitCommands(file string, first int, lines []string) []docCommand {
	var out []docCommand
	var cur strings.Builder
	startLine := 0
	var quote byte // the quote open at the end of the text so far, or 0
	for k, l := range lines {
		text, open := stripComment(l, quote)
		quote = open
		cont := false
		if t := strings.TrimRight(text, " \t"); strings.HasSuffix(t, `\`) {
			text, cont = strings.TrimSuffix(t, `\`), true
		}
		if cur.Len() == 0 && strings.TrimSpace(text) == "" {
			continue
		}
		if cur.Len() == 0 {
			startLine = first + k
		}
		cur.WriteString(text)
		cur.WriteByte(' ')
		if cont || quote != 0 {
			continue
		}
		out = append(out, docCommand{file: file, line: startLine, text: strings.Join(strings.Fields(cur.String()), " ")})
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, docCommand{file: file, line: startLine, text: strings.Join(strings.Fields(cur.String()), " ")})
	}
	return out
}

// stripComment drops a "# …" comment from line, which starts inside quote
// (0 for none), and returns the quote still open at its end.
func stripComment(line string, quote byte) (string, byte) {
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i], 0
		}
	}
	return line, quote
}

// howChecked is what makes a documented command true: a test that runs it,
// or, for a command that needs an AWS account, the synthesized template.
type howChecked struct {
	file   string // README.md or docs/<topic>.md
	prefix string // the command (spaces collapsed) starts with this
	// runBy names the test that runs the command: "<package dir> <Test>".
	// The test must exist and its file must name the page.
	runBy string
	// account: the command needs an AWS account (a deployed stack). Every
	// stack name, OutputKey and <OutputName> placeholder it names must be
	// the synthesized template's; a go run ./cmd/… command's flags must
	// be flags of that command (see checkAgainstTemplate).
	account bool
	// otherSynth, for an account command of a stack synthesized with other
	// context (HMAC ingest): "<package dir> <Test>", the infra test that
	// synthesizes that stack and checks the outputs the command names that
	// the default template lacks.
	otherSynth string
}

// documented registers every command of README.md and docs/*.md. A
// command that no entry covers fails TestEveryDocumentedCommandIsChecked,
// naming its file and line; so does an entry that covers no command.
var documented = []howChecked{
	// README.md
	{file: "README.md", prefix: "make local", runBy: "emulator/local TestDocumentedCommandsRun"},
	{file: "README.md", prefix: "make test", runBy: "emulator/local TestDocumentedCommandsRun"},
	{file: "README.md", prefix: "curl -sS http://127.0.0.1:9000/", runBy: "emulator/local TestReadmeFirstPipeline"},
	{file: "README.md", prefix: "cd infra && npx cdk bootstrap", account: true},
	{file: "README.md", prefix: "cd .. && make functions synth", runBy: "emulator/local TestDocumentedCommandsRun"},
	{file: "README.md", prefix: "cd infra && npx cdk deploy", account: true},
	{file: "README.md", prefix: "aws cloudformation describe-stacks --stack-name Tributary --output text --query", account: true},
	{file: "README.md", prefix: "cd infra && npx cdk destroy", account: true},
	{file: "README.md", prefix: "aws kinesis delete-stream --stream-name <name>", account: true},
	// docs/cep.md
	{file: "docs/cep.md", prefix: "go run ./cmd/rules add -table <DetectRulesTableName> -file rule.json -from", account: true},
	{file: "docs/cep.md", prefix: "go run ./cmd/rules add -table <DetectRulesTableName>", account: true},
	{file: "docs/cep.md", prefix: "go run ./cmd/rules list -table <DetectRulesTableName>", account: true},
	{file: "docs/cep.md", prefix: "go run ./cmd/rules disable|enable|delete -table <DetectRulesTableName>", account: true},
	{file: "docs/cep.md", prefix: "go run ./cmd/rules test -rule rule.json -events events.jsonl", runBy: "emulator/local TestDocumentedCommandsRun"},
	{file: "docs/cep.md", prefix: `curl --aws-sigv4 "aws:amz:$AWS_REGION:lambda"`, account: true},
	{file: "docs/cep.md", prefix: "curl -s -X POST http://127.0.0.1:9002/test", runBy: "emulator/local TestDocumentedCommandsRun"},
	// docs/changes.md: the table–table join, tried with the AWS CLI
	{file: "docs/changes.md", prefix: "export AWS_ENDPOINT_URL=", runBy: runsHere},
	{file: "docs/changes.md", prefix: "aws dynamodb ", runBy: runsHere},
	// docs/deploy.md
	{file: "docs/deploy.md", prefix: `URL=$(aws cloudformation describe-stacks --stack-name Tributary`, account: true},
	{file: "docs/deploy.md", prefix: `curl -sS "$URL" --aws-sigv4`, runBy: "emulator/local TestReadmeSigV4"},
	// docs/event-sourcing.md: the commands URL of make local-up
	{file: "docs/event-sourcing.md", prefix: "curl -s -X POST http://127.0.0.1:9001/commands", runBy: runsHere},
	{file: "docs/event-sourcing.md", prefix: "curl -s http://127.0.0.1:9001/shows/show-1", runBy: runsHere},
	{file: "docs/event-sourcing.md", prefix: "curl -s 'http://127.0.0.1:9001/shows/show-1/availability?minVersion=2'", runBy: runsHere},
	// docs/events.md
	{file: "docs/events.md", prefix: "curl -sS http://127.0.0.1:9000/", runBy: "emulator/local TestReadmeLocalCurl"},
	{file: "docs/events.md", prefix: `URL=$(aws cloudformation describe-stacks --stack-name Tributary`, account: true},
	{file: "docs/events.md", prefix: `SECRET=$(aws secretsmanager get-secret-value`, account: true, otherSynth: "infra/tributary TestIngestAuthModes"},
	{file: "docs/events.md", prefix: "body=", runBy: "emulator/local TestSignedIngestEndToEnd"},
	{file: "docs/events.md", prefix: "key=", runBy: "emulator/local TestSignedIngestEndToEnd"},
	{file: "docs/events.md", prefix: "ts=", runBy: "emulator/local TestSignedIngestEndToEnd"},
	{file: "docs/events.md", prefix: "sig=", runBy: "emulator/local TestSignedIngestEndToEnd"},
	{file: "docs/events.md", prefix: `curl -sS "$URL" -H`, runBy: "emulator/local TestSignedIngestEndToEnd"},
	// docs/local.md
	{file: "docs/local.md", prefix: "make invoke FN=ingest EVENT=events/ingest/function-url-post.json", runBy: "emulator/local TestDocumentedCommandsRun"},
	{file: "docs/local.md", prefix: "aws lambda invoke", runBy: "emulator/local TestDocumentedCommandsRun"},
	// docs/localstack.md: Docker is not on the test machines; make
	// localstack-check runs LocalStack without it, and the test checks what
	// the commands name.
	{file: "docs/localstack.md", prefix: "docker compose -f localstack/docker-compose.yml up -d", runBy: "emulator/local TestDocumentedCommandsRun"},
	{file: "docs/localstack.md", prefix: "curl -s http://127.0.0.1:4566/_localstack/health", runBy: "emulator/local TestDocumentedCommandsRun"},
	{file: "docs/localstack.md", prefix: "make local", runBy: "emulator/local TestDocumentedCommandsRun"},
	// docs/performance.md
	{file: "docs/performance.md", prefix: "make bench", runBy: "emulator/local TestDocumentedCommandsRun"},
	// docs/results.md
	// docs/archive.md
	{file: "docs/archive.md", prefix: "go run ./cmd/replay rebuild -pipeline pipelines/pageviews.json -pipeline pipelines/checkouts.json", account: true},
	{file: "docs/archive.md", prefix: "go run ./cmd/replay rebuild -pipeline pipelines/ ", account: true},
	// docs/windows.md: a late event, its times computed when pasted
	{file: "docs/windows.md", prefix: docLatePrefix, runBy: "emulator/local TestLateExampleIsLateWhenPasted"},
	// docs/stream-joins.md: a search and its click through ingest, the joins stream
	{file: "docs/stream-joins.md", prefix: `curl -sS http://127.0.0.1:9000/ -H 'content-type: application/json' --data-binary '[ {"id":"s1","type":"search"`, runBy: runsHere},
	{file: "docs/stream-joins.md", prefix: "make tail STREAM=", runBy: runsHere},
	// docs/tail.md
	{file: "docs/tail.md", prefix: "make tail STREAM=", runBy: "emulator/local TestDocumentedCommandsRun"},
	{file: "docs/tail.md", prefix: "aws cloudformation describe-stacks --stack-name Tributary --query", account: true},
	{file: "docs/tail.md", prefix: "go run ./cmd/tail -stream <EventsStreamName>", account: true},
	{file: "docs/results.md", prefix: "make results PIPELINE=pageviews KEY=user-42", runBy: "emulator/local TestDocumentedCommandsRun"},
	{file: "docs/results.md", prefix: "make results PIPELINE=checkouts FOLLOW=1", runBy: "emulator/local TestDocumentedCommandsRun"},
	{file: "docs/results.md", prefix: "go run ./cmd/results -pipeline pageviews -parameter <ViewsParameterName>", account: true},
	{file: "docs/results.md", prefix: "go run ./cmd/results -pipeline pageviews -follow -stream <WindowResultsStreamName>", account: true},
	// docs/set-aside.md
	{file: "docs/set-aside.md", prefix: "aws dynamodb query --table-name <QuarantineTableName>", account: true},
	{file: "docs/set-aside.md", prefix: "aws dynamodb scan --table-name <QuarantineTableName>", account: true},
	{file: "docs/set-aside.md", prefix: "make setaside", runBy: runsHere},
	{file: "docs/set-aside.md", prefix: "make setaside-show", runBy: runsHere},
	{file: "docs/set-aside.md", prefix: "make putback", runBy: runsHere},
}

// checkFor returns the entry covering c: the longest prefix of its file.
func checkFor(c docCommand) (howChecked, bool) {
	var best howChecked
	found := false
	for _, h := range documented {
		if h.file == c.file && strings.HasPrefix(c.text, h.prefix) && (!found || len(h.prefix) > len(best.prefix)) {
			best, found = h, true
		}
	}
	return best, found
}

// TestEveryDocumentedCommandIsChecked: every shell command README.md and
// docs/*.md show is run by a test, or, when it needs an AWS account,
// checked against the synthesized template (stack name, outputs, the
// flags of the repository's own commands); one nobody runs or checks
// fails, naming file and line. Registered tests must exist and name the
// page they run.
func TestEveryDocumentedCommandIsChecked(t *testing.T) {
	t.Parallel()
	root, tplPath, _ := paths(t)
	cmds := documentedCommands(t, root)
	if len(cmds) == 0 {
		t.Fatal("no ```sh block in README.md or docs/")
	}
	tpl := readTemplate(t, tplPath)
	used := map[howChecked]bool{}
	tools := newCommandHelp(t, root)
	for _, c := range cmds {
		h, ok := checkFor(c)
		if !ok {
			t.Errorf("%s: no test runs this command and nothing checks it: run it in a test (and add it to documented in %s naming the test), or, if it needs an AWS account, register it as account so the template checks it", c, "emulator/local/docs_commands_test.go")
			continue
		}
		used[h] = true
		if h.runBy != "" {
			checkRunBy(t, root, c, h.runBy)
		}
		if h.account {
			checkAgainstTemplate(t, root, tpl, tools, c, h.otherSynth)
		}
	}
	for _, h := range documented {
		if !used[h] {
			t.Errorf("documented: %s has no command starting %q (moved or changed? update the entry)", h.file, h.prefix)
		}
	}
}

// checkRunBy: the test runBy names exists in its package and its file
// names the page the command is on.
func checkRunBy(t *testing.T, root string, c docCommand, runBy string) {
	t.Helper()
	dir, name, ok := strings.Cut(runBy, " ")
	if !ok {
		t.Errorf("%s: runBy %q: want \"<package dir> <Test>\"", c, runBy)
		return
	}
	files, _ := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), "\nfunc "+name+"(t *testing.T) {") {
			continue
		}
		if !strings.Contains(string(src), c.file) && !strings.Contains(string(src), strings.Replace(c.file, "docs/", `"docs", "`, 1)) {
			t.Errorf("%s: %s (%s) does not name %s, the page it is said to run", c, name, filepath.Base(f), c.file)
		}
		return
	}
	t.Errorf("%s: runBy %s: no such test in %s", c, name, dir)
}

// testNames reports whether the test test ("<package dir> <Test>") exists
// and its file holds the text what (an output it checks).
func testNames(t *testing.T, root, test, what string) bool {
	t.Helper()
	dir, name, _ := strings.Cut(test, " ")
	files, _ := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), "\nfunc "+name+"(t *testing.T) {") {
			return strings.Contains(string(src), `"`+what+`"`)
		}
	}
	return false
}

// synthTemplate is what the checks read of the synthesized stack.
type synthTemplate struct {
	stack     string
	Outputs   map[string]struct{ Value json.RawMessage }
	Resources map[string]struct {
		Type           string
		DeletionPolicy string
	}
}

func readTemplate(t *testing.T, path string) *synthTemplate {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tpl synthTemplate
	if err := json.Unmarshal(raw, &tpl); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tpl.stack = strings.TrimSuffix(filepath.Base(path), ".template.json")
	return &tpl
}

var (
	stackNameArg = regexp.MustCompile(`--stack-name (\S+)`)
	outputKeyArg = regexp.MustCompile(`OutputKey=='([^']+)'`)
	placeholder  = regexp.MustCompile(`<([A-Z][A-Za-z0-9]*)>`)
	goRunArgs    = regexp.MustCompile(`^go run \./cmd/([a-z]+) (.*)$`)
	flagArg      = regexp.MustCompile(`(?:^| )(-[a-z][a-z-]*)`)
)

// checkAgainstTemplate checks a command that needs an AWS account against
// the synthesized template: the stack it names is the template's, every
// OutputKey it queries and every <OutputName> placeholder is an output of
// it, and a go run ./cmd/<tool> command's subcommand takes every flag it
// gives.
func checkAgainstTemplate(t *testing.T, root string, tpl *synthTemplate, tools *commandHelp, c docCommand, otherSynth string) {
	t.Helper()
	for _, m := range stackNameArg.FindAllStringSubmatch(c.text, -1) {
		if m[1] != tpl.stack {
			t.Errorf("%s: --stack-name %s, the synthesized stack is %s", c, m[1], tpl.stack)
		}
	}
	var names []string
	for _, m := range outputKeyArg.FindAllStringSubmatch(c.text, -1) {
		names = append(names, m[1])
	}
	for _, m := range placeholder.FindAllStringSubmatch(c.text, -1) {
		names = append(names, m[1])
	}
	for _, n := range names {
		if _, ok := tpl.Outputs[n]; ok {
			continue
		}
		if otherSynth != "" && testNames(t, root, otherSynth, n) {
			continue
		}
		t.Errorf("%s: names the output %s, which the synthesized template does not have", c, n)
	}
	if m := goRunArgs.FindStringSubmatch(c.text); m != nil {
		args := strings.Fields(m[2])
		var subs []string
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			subs = strings.Split(args[0], "|")
		} else {
			subs = []string{""}
		}
		for _, sub := range subs {
			help := tools.help(m[1], sub)
			for _, f := range flagArg.FindAllStringSubmatch(m[2], -1) {
				// flag.PrintDefaults: "  -name type", "  -name" or "  -name\tusage" (a one-letter bool), at a line's start.
				if !strings.Contains(help, "\n  "+f[1]+" ") && !strings.Contains(help, "\n  "+f[1]+"\n") && !strings.Contains(help, "\n  "+f[1]+"\t") {
					t.Errorf("%s: %s takes no flag %s (see its -h)", c, strings.TrimSpace("cmd/"+m[1]+" "+sub), f[1])
				}
			}
		}
	}
	if strings.Contains(c.text, "npx cdk ") {
		// The CDK CLI the repository pins, run in infra/ where cdk.json is,
		// deploys the template's stack: the stack the other commands name.
		if !strings.HasPrefix(c.text, "cd infra && npx cdk ") {
			t.Errorf("%s: run the CDK CLI from infra/, where cdk.json and the pinned CLI are", c)
		}
		if tpl.stack != "Tributary" {
			t.Errorf("%s: the synthesized stack is %s; the pages name Tributary", c, tpl.stack)
		}
	}
	if c.file == "README.md" && strings.HasPrefix(c.text, "aws cloudformation describe-stacks") && strings.Contains(c.text, "StreamName") {
		// README's "Destroying it", what cdk destroy leaves billing: every retained stream is among
		// the outputs this command prints, so a reader can delete them
		// all after the stack is gone.
		queried := map[string]bool{}
		for _, m := range outputKeyArg.FindAllStringSubmatch(c.text, -1) {
			queried[m[1]] = true
		}
		for id, r := range tpl.Resources {
			if r.Type != "AWS::Kinesis::Stream" || r.DeletionPolicy != "Retain" {
				continue
			}
			found := false
			for name, v := range tpl.Outputs {
				var ref struct{ Ref string }
				_ = json.Unmarshal(v.Value, &ref) // a value that is no Ref names no stream
				if queried[name] && ref.Ref == id {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: cdk destroy keeps stream %s (DeletionPolicy Retain), and this command does not print its name", c, id)
			}
		}
	}
}

// commandHelp builds the repository's commands the pages run with go run,
// once, and reads their -h.
type commandHelp struct {
	t    *testing.T
	root string
	dir  string
	seen map[string]string
}

func newCommandHelp(t *testing.T, root string) *commandHelp {
	return &commandHelp{t: t, root: root, dir: t.TempDir(), seen: map[string]string{}}
}

// help returns cmd/<tool>'s -h output for subcommand sub ("" for none).
func (h *commandHelp) help(tool, sub string) string {
	h.t.Helper()
	if out, ok := h.seen[tool+" "+sub]; ok {
		return out
	}
	bin := filepath.Join(h.dir, tool)
	if _, err := os.Stat(bin); err != nil {
		build := exec.Command("go", "build", "-o", bin, "./cmd/"+tool)
		build.Dir = h.root
		if out, err := build.CombinedOutput(); err != nil {
			h.t.Fatalf("go build ./cmd/%s: %v\n%s", tool, err, out)
		}
	}
	args := []string{"-h"}
	if sub != "" {
		args = []string{sub, "-h"}
	}
	// -h exits 0 or 2 by tool; the text is what counts.
	out, _ := exec.Command(bin, args...).CombinedOutput()
	text := string(out) + "\n"
	h.seen[tool+" "+sub] = text
	return text
}

// TestSplitCommands: continuation lines and quotes spanning lines make one
// command; comments go.
func TestSplitCommands(t *testing.T) {
	got := splitCommands("x.md", 10, []string{
		"make local   # run it",
		"curl -sS http://h/ --data-binary '[",
		"  {\"id\":\"#1\"}]'",
		"",
		`aws x \`,
		`  --query "a # b"  # c`,
	})
	want := []docCommand{
		{"x.md", 10, "make local"},
		{"x.md", 11, `curl -sS http://h/ --data-binary '[ {"id":"#1"}]'`},
		{"x.md", 14, `aws x --query "a # b"`},
	}
	if !slices.Equal(got, want) {
		t.Errorf("splitCommands = %q, want %q", got, want)
	}
}
