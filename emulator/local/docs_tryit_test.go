package local_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/testtools"
)

// The "Try it locally" commands of docs/event-sourcing.md,
// docs/stream-joins.md and docs/changes.md, run as the pages give them
// against this test's topology, in the pages' order: each checks the
// answer the page says the user sees.

// Where the pages send their commands: make local-up's URLs and stand-in.
const (
	docCommandsURL = "http://127.0.0.1:9001/"
	docIngestURL   = "http://127.0.0.1:9000/"
	docStandin     = "http://127.0.0.1:4566"
)

func init() {
	for prefix, run := range tryItRuns {
		docRuns[prefix] = run
	}
}

// commandAnswers are docs/event-sourcing.md's commands' answers as the
// page gives them, by command id.
var commandAnswers = map[string]struct{ status, field string }{
	"c1": {status: "accepted"},
	"c2": {status: "accepted"},
	"c3": {status: "refused", field: "data.seats[0]"},
}

// onLocalURL runs c with the make local-up URL documented replaced by
// this topology's url, and returns its standard output.
func onLocalURL(t *testing.T, env *docEnv, c docCommand, documented, url string) string {
	t.Helper()
	testtools.Need(t, c.file+"'s example needs it", "curl")
	if !strings.Contains(c.text, documented) {
		t.Fatalf("%s: does not name %s, make local-up's URL", c, documented)
	}
	return bash(t, env.root, nil, strings.ReplaceAll(c.text, documented, url))
}

var tryItRuns = map[string]docRun{
	"curl -s -X POST http://127.0.0.1:9001/commands": func(t *testing.T, env *docEnv, c docCommand) {
		out := onLocalURL(t, env, c, docCommandsURL, env.stack.URL("commands"))
		var ans struct{ ID, Status, Field string }
		if err := json.Unmarshal([]byte(out), &ans); err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
		want, ok := commandAnswers[ans.ID]
		if !ok {
			t.Fatalf("%s: answered for id %q, which the page gives no answer for:\n%s", c, ans.ID, out)
		}
		if ans.Status != want.status || ans.Field != want.field {
			t.Errorf("%s:\n%s\nwant status %q, field %q, as the page says", c, out, want.status, want.field)
		}
	},
	"curl -s http://127.0.0.1:9001/shows/show-1": func(t *testing.T, env *docEnv, c docCommand) {
		out := onLocalURL(t, env, c, docCommandsURL, env.stack.URL("commands"))
		for _, want := range []string{`"version":2`, `"free":8`, `"seats":{"A1":"r1","A2":"r1"}`} {
			if !strings.Contains(out, want) {
				t.Errorf("%s:\n%s\nwant %s: the seat map after c2, as the page says", c, out, want)
			}
		}
		if strings.Contains(out, "ada@example.com") {
			t.Errorf("%s:\n%s\nthe seat map holds the holder's e-mail", c, out)
		}
	},
	"curl -s 'http://127.0.0.1:9001/shows/show-1/availability?minVersion=2'": func(t *testing.T, env *docEnv, c docCommand) {
		out := onLocalURL(t, env, c, docCommandsURL, env.stack.URL("commands"))
		if !strings.Contains(out, `"version":2`) || !strings.Contains(out, `"free":8`) {
			t.Errorf("%s:\n%s\nwant the availability view at version 2 with 8 seats free", c, out)
		}
	},

	// docs/stream-joins.md: a search and its click through ingest come
	// out joined on the joins stream, where make tail shows them.
	`curl -sS http://127.0.0.1:9000/ -H 'content-type: application/json' --data-binary '[ {"id":"s1","type":"search"`: func(t *testing.T, env *docEnv, c docCommand) {
		out := onLocalURL(t, env, c, docIngestURL, env.stack.URL("ingest"))
		if !strings.Contains(out, `{"events":3,"accepted":3}`) {
			t.Fatalf("%s:\n%s\nwant the three events accepted", c, out)
		}
		tail := underMakeLock(env.root, "make tail STREAM=joins FOLLOW=0 JSON=1 2>/dev/null")
		deadline := time.Now().Add(2 * time.Minute)
		for {
			lines := bash(t, env.root, append(os.Environ(), "TRIBUTARY_STANDIN_ADDR="+env.addr), tail)
			for _, l := range strings.Split(lines, "\n") {
				var r struct {
					Data struct {
						Type, Key string
						Data      struct{ Left, Right struct{ ID string } }
					}
				}
				if json.Unmarshal([]byte(l), &r) == nil && r.Data.Type == "joined" && r.Data.Key == "sess-1" &&
					r.Data.Data.Left.ID == "s1" && r.Data.Data.Right.ID == "c1" {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: make tail STREAM=joins shows no joined record of s1 and c1 after 2 minutes:\n%s", c, lines)
			}
			time.Sleep(2 * time.Second)
		}
	},

	// docs/changes.md: the banner's export line, then the AWS CLI on the
	// timelines' tables.
	"export AWS_ENDPOINT_URL=": func(t *testing.T, env *docEnv, c docCommand) {
		src, err := os.ReadFile(filepath.Join(env.root, "cmd", "local", "up.go"))
		if err != nil {
			t.Fatal(err)
		}
		if banner := strings.ReplaceAll(c.text, docStandin, "%s"); !strings.Contains(string(src), "  "+banner+"\n") {
			t.Errorf("%s: is not the export line make local-up prints (cmd/local/up.go)", c)
		}
	},
	"aws dynamodb ": func(t *testing.T, env *docEnv, c docCommand) {
		cli := filepath.Join(env.root, ".tools", "awscli", "cli")
		if _, err := os.Stat(filepath.Join(cli, "aws")); err != nil {
			testtools.Need(t, c.file+"'s commands need it (make deps installs it into .tools/awscli)", "aws")
		}
		export := ""
		for _, o := range documentedCommands(t, env.root) {
			if o.file == c.file && strings.HasPrefix(o.text, "export AWS_ENDPOINT_URL=") {
				export = o.text
			}
		}
		if export == "" {
			t.Fatalf("%s: %s has no export line before it", c, c.file)
		}
		// As a user runs them: the page's export line, no AWS
		// configuration of their own.
		dir := t.TempDir()
		clean := []string{"PATH=" + cli + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + dir}
		local := "http://" + env.addr
		run := func(command string) string {
			return bash(t, dir, clean, strings.ReplaceAll(export+"\n"+command, docStandin, local))
		}
		var query string
		for _, o := range documentedCommands(t, env.root) {
			if o.file == c.file && strings.HasPrefix(o.text, "aws dynamodb query ") {
				query = o.text
			}
		}
		const tweet = "bob\tb1\tStreams are tables in motion"
		switch {
		case strings.HasPrefix(c.text, "aws dynamodb query "):
			// A second or two after the follow, Ada's timeline shows Bob's tweet.
			deadline := time.Now().Add(time.Minute)
			for out := run(c.text); !strings.Contains(out, tweet); out = run(c.text) {
				if time.Now().After(deadline) {
					t.Fatalf("%s:\n%s\nwant Bob's tweet in Ada's timeline (%q)", c, out, tweet)
				}
				time.Sleep(time.Second)
			}
		case strings.HasPrefix(c.text, "aws dynamodb delete-item "):
			run(c.text)
			// The unfollow empties Ada's timeline: the query, run again, lists nothing.
			deadline := time.Now().Add(time.Minute)
			for out := run(query); strings.TrimSpace(out) != ""; out = run(query) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: then %s:\n%s\nwant an empty timeline once Ada unfollowed Bob", c, query, out)
				}
				time.Sleep(time.Second)
			}
		default:
			run(c.text)
		}
	},
}
