package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/pkg/putback"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// setAsideDoc is what docs/set-aside.md's commands run on: two records
// the running topology set aside, one whose occurredAt no consumer reads
// (corrected in record.json and put back) and one whose data.ms the page
// views pipeline cannot add (put back unchanged with the several-records
// form, as after a change to the pipeline file).
type setAsideDoc struct {
	source, seq, function string
	dir                   string
	// occurred is an occurredAt that record.json can be corrected to:
	// before the records' sentAt.
	occurred string
}

// setAsideRecords puts the two records on the events stream, once, and
// waits until the functions set them aside.
func (env *docEnv) setAsideRecords(t *testing.T) *setAsideDoc {
	t.Helper()
	if env.setAside != nil {
		return env.setAside
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	outs, err := env.stack.Deployment().Outputs()
	if err != nil {
		t.Fatal(err)
	}
	events, table := outs["EventsStreamName"], outs["QuarantineTableName"]
	sent := time.Now().UTC()
	now := sent.Format(time.RFC3339Nano)
	put := func(id, occurredAt, ms string) string {
		t.Helper()
		data := fmt.Sprintf(`{"id":%q,"type":"page_view","key":"doc-putback","occurredAt":%s,"sentAt":%q,"data":{"page":"/doc","ms":%s}}`,
			id, occurredAt, now, ms)
		seq, err := local.PutRaw(ctx, env.stack.Config(), events, "doc-putback", []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := local.WaitQuarantined(ctx, env.stack.Config(), table, seq); err != nil {
			t.Fatal(err)
		}
		return seq
	}
	d := &setAsideDoc{dir: env.tmp, occurred: sent.Add(-time.Second).Format(time.RFC3339Nano)}
	d.seq = put("doc-putback-1", `"yesterday"`, "5")
	ms := put("doc-putback-2", fmt.Sprintf("%q", d.occurred), `"slow"`)
	l, err := putback.List(ctx, dynamoOf(env), table, putback.Filter{}, putback.MaxList, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range l.Items {
		switch it.SequenceNumber {
		case d.seq:
			d.source = it.Source
		case ms:
			if it.Category != setaside.KindInvalid {
				t.Fatalf("the record with data.ms \"slow\" was set aside as %s by %s (%s), want invalid", it.Category, it.Function, it.Reason)
			}
			d.function = it.Function
			if fn := strings.ToLower(it.Function); !strings.Contains(fn, "aggregate") || !strings.Contains(fn, "pageviews") {
				t.Fatalf("the record with data.ms \"slow\" was set aside by %s, not by the page views pipeline's aggregate function docs/set-aside.md names", it.Function)
			}
		}
	}
	if d.source == "" || d.function == "" {
		t.Fatalf("the quarantine table %s does not list both records: %+v", table, l.Items)
	}
	env.setAside = d
	return d
}

func init() {
	for prefix, run := range setAsideRuns {
		docRuns[prefix] = run
	}
}

func dynamoOf(env *docEnv) *dynamodb.Client { return dynamodb.NewFromConfig(env.stack.Config()) }

// runSetAside runs a docs/set-aside.md command as the page gives it, its
// placeholders filled in and record.json in a directory of the test's,
// against this test's topology; it returns stdout and stderr.
func runSetAside(t *testing.T, env *docEnv, c docCommand) (*setAsideDoc, string) {
	t.Helper()
	d := env.setAsideRecords(t)
	text := strings.NewReplacer("<source>", d.source, "<n>", d.seq,
		"record.json", filepath.Join(d.dir, "record.json")).Replace(c.text)
	command, redirect, _ := strings.Cut(text, " >")
	script := underMakeLock(env.root, command)
	if redirect != "" {
		script += " >" + redirect
	} else {
		script += " 2>&1"
	}
	out := bash(t, env.root, append(os.Environ(), "TRIBUTARY_STANDIN_ADDR="+env.addr), script)
	t.Logf("%s:\n%s", text, out)
	return d, out
}

// setAsideRuns are docs/set-aside.md's commands, in the page's order: list,
// show, show the data into record.json (which the test then corrects, as
// a user would), a dry run, the put-back, and several records at once.
var setAsideRuns = map[string]docRun{
	"make setaside": func(t *testing.T, env *docEnv, c docCommand) {
		d, out := runSetAside(t, env, c)
		for _, want := range []string{d.seq, "occurredAt", "make putback SOURCE="} {
			if !strings.Contains(out, want) {
				t.Errorf("%s:\n%s\nwant %q", c, out, want)
			}
		}
	},
	"make setaside-show": func(t *testing.T, env *docEnv, c docCommand) {
		d, out := runSetAside(t, env, c)
		if !strings.Contains(c.text, "DATA_ONLY=1 >") {
			if !strings.Contains(out, `"occurredAt":"yesterday"`) || !strings.Contains(out, "data ") {
				t.Errorf("%s:\n%s\nwant the item and its data", c, out)
			}
			return
		}
		path := filepath.Join(d.dir, "record.json")
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasPrefix(string(b), `{"id":"doc-putback-1"`) {
			t.Fatalf("%s: record.json holds %q (%v), want the record's data", c, b, err)
		}
		fixed := strings.Replace(string(b), `"yesterday"`, fmt.Sprintf("%q", d.occurred), 1)
		if err := os.WriteFile(path, []byte(fixed), 0o600); err != nil {
			t.Fatal(err)
		}
	},
	"make putback": func(t *testing.T, env *docEnv, c docCommand) {
		_, out := runSetAside(t, env, c)
		switch {
		case strings.Contains(c.text, "DRY_RUN=1"):
			if !strings.Contains(out, "would put back") {
				t.Errorf("%s:\n%s\nwant what would be put back", c, out)
			}
		case strings.Contains(c.text, "FUNCTION="):
			if !strings.Contains(out, "1 put back, 0 refused") {
				t.Errorf("%s:\n%s\nwant the data.ms record put back", c, out)
			}
		default:
			if !strings.Contains(out, "put back  ") || !strings.Contains(out, "the record in ") || !strings.Contains(out, "sequence number") {
				t.Errorf("%s:\n%s\nwant the corrected record put back", c, out)
			}
		}
	},
}
