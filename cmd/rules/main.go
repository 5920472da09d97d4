// Command rules manages the CEP rules the detect function runs, while it
// runs: add a rule from a file, list the rules, disable, enable or delete
// one, test rules offline against a file of events, and run a rule added
// later over the past.
//
//	go run ./cmd/rules add      -table <rules> -file rule.json [-from 2h -stream <events> -matches <matches>]
//	go run ./cmd/rules list     -table <rules>
//	go run ./cmd/rules disable  -table <rules> -id big-payment
//	go run ./cmd/rules enable   -table <rules> -id big-payment
//	go run ./cmd/rules delete   -table <rules> -id big-payment
//	go run ./cmd/rules test     -rule rule.json -events events.json [-config pipelines/detect.json]
//	go run ./cmd/rules backfill -table <rules> -id big-payment -from 2h -stream <events> -matches <matches> -config pipelines/detect.json
//
// -table defaults to $RULES_TABLE_NAME (make local-up prints it). A rule
// applies to the events that reach the stream from 10 s after it was added
// (or enabled) on; disabling or deleting it takes effect as long after. A
// bad rule is refused naming the part at fault ("pattern[1].where: ...").
// add run again for a rule stored and active with the same definition is
// done already (exit 0, nothing changes); another definition under that id
// is refused naming what differs.
// test reads no AWS at all.
//
// Exit status: 0 done, 1 error, 2 usage, 3 refused (a bad rule, an id in
// use, a change the rule's status does not allow; nothing changed), 130
// interrupted.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/pkg/cep"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

func main() {
	cli.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.LookupEnv, time.Now, os.Stdout, os.Stderr)
	})
}

const commands = `rules manages the CEP rules the detect function runs (a DynamoDB rules table),
and tests rules offline against a file of events.

usage:
  rules add      -table <rules> -file rule.json [-from <time|duration ago> -stream <events> -matches <matches> -config <cep file>]
  rules list     -table <rules> [-json]
  rules disable  -table <rules> -id <rule>
  rules enable   -table <rules> -id <rule>
  rules delete   -table <rules> -id <rule>
  rules test     -rule rule.json [-rule more.json ...] -events events.jsonl [-config <cep file>] [-out-of-orderness 0s]
  rules backfill -table <rules> -id <rule> -from <time|duration ago> -stream <events> -matches <matches> [-config <cep file>] [-out-of-orderness 0s] [-idle-timeout 1m]
rules <command> -h describes a command and its flags.`

const footer = `Exit status: 0 done, 1 error, 2 usage, 3 refused (nothing changed), 130 interrupted.
A rule applies to events reaching the stream from 10s after it is added or enabled; disable and delete take effect 10s after.
` + cli.RegionHelp

// refusedError is a command AWS was asked to do and the rules refused.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

func run(ctx context.Context, args []string, lookup func(string) (string, bool), now func() time.Time, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "rules: a command is required\n"+commands)
		return cli.ExitUsage
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, commands+"\n\n"+footer)
		return cli.ExitOK
	}
	name := args[0]
	fail := func(err error) int {
		if err == nil {
			return cli.ExitOK
		}
		var refused *refusedError
		if errors.As(err, &refused) {
			fmt.Fprintf(stderr, "rules %s: refused: %v\n", name, err)
			return cli.ExitRefused
		}
		return cli.Fail(stderr, "rules "+name, err, "")
	}
	env := func(k string) string { v, _ := lookup(k); return v }
	fs := flag.NewFlagSet("rules "+name, flag.ContinueOnError)
	var (
		table, file, id, eventsFile, from, streamName, matches *string
		ooo, idle                                              *time.Duration
		configFile                                             *string
		asJSON                                                 *bool
		ruleFiles                                              files
		synopsis                                               string
	)
	tableFlag := func() {
		table = fs.String("table", env("RULES_TABLE_NAME"), "the rules DynamoDB table (default $RULES_TABLE_NAME)")
	}
	configFlag := func() {
		configFile = fs.String("config", "", "the detect function's CEP file (pipelines/detect.json): its outOfOrderness and idleTimeout, so that the past is matched as detect matches it")
	}
	pastFlags := func(required bool) {
		what := "run the rule over the past from here: an RFC 3339 time or a duration ago (2h)"
		if !required {
			what += "; without it the rule applies from 10s after it is added"
		}
		from = fs.String("from", "", what)
		streamName = fs.String("stream", env("EVENTS_STREAM_NAME"), "the events Kinesis stream, to read the past from (default $EVENTS_STREAM_NAME)")
		matches = fs.String("matches", env("MATCHES_STREAM_NAME"), "the matches Kinesis stream (default $MATCHES_STREAM_NAME)")
		ooo = fs.Duration("out-of-orderness", 0, "the detect function's outOfOrderness (its CEP_CONFIG); overrides -config's")
		idle = fs.Duration("idle-timeout", time.Minute, "the detect function's idleTimeout (its CEP_CONFIG); overrides -config's")
		configFlag()
	}
	switch name {
	case "add":
		synopsis = "rules add: add the rule in a file; it applies to events reaching the stream from 10s later on (with -from, it also runs over the past)"
		tableFlag()
		file = fs.String("file", "", "the rule's JSON file (- reads stdin), at most 8 KiB (cep.MaxRuleBytes)")
		pastFlags(false)
	case "list":
		synopsis = "rules list: list the rules, deleted ones too until their tombstone expires"
		tableFlag()
		asJSON = fs.Bool("json", false, "print JSON")
	case "disable", "enable", "delete":
		synopsis = "rules " + name + ": " + map[string]string{"disable": "stop a rule (it can be enabled again)", "enable": "start a disabled rule again", "delete": "delete a rule (its id stays taken for 8 days)"}[name]
		tableFlag()
		id = fs.String("id", "", "the rule's id")
	case "test":
		synopsis = "rules test: run rules over a file of events offline, as the detect function would on one shard, and print the matches (no AWS)"
		fs.Var(&ruleFiles, "rule", "a rule's JSON file, at most 8 KiB (repeat for more)")
		eventsFile = fs.String("events", "", "a file of events: a JSON array of envelopes or one per line, in arrival order (receivedAt, if absent, is sentAt)")
		ooo = fs.Duration("out-of-orderness", 0, "the watermark's allowance, as in the detect function's CEP_CONFIG; overrides -config's")
		configFlag()
	case "backfill":
		synopsis = "rules backfill: run a rule over the events stream from a time up to when it began to apply, matches to the matches stream (rerunning is harmless: same ids)"
		tableFlag()
		id = fs.String("id", "", "the rule's id")
		pastFlags(true)
	default:
		fmt.Fprintf(stderr, "rules: unknown command %s\n%s\n", strictjson.QuoteCut(name, cli.MaxEcho), commands)
		return cli.ExitUsage
	}
	if err := cli.Parse(fs, args[1:], stdout, synopsis+"\n\n"+commands, footer); errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	} else if err != nil {
		return fail(err)
	}
	if err := applyConfig(fs, configFile, ooo, idle, stderr); err != nil {
		return fail(err)
	}
	var errs []error
	if table != nil {
		errs = append(errs, cli.Required("table", *table, "the rules DynamoDB table"))
		if *table != "" {
			errs = append(errs, cli.TableName.Check("table", *table))
		}
	}
	if id != nil {
		errs = append(errs, cli.Required("id", *id, "the rule's id"))
		if *id != "" {
			errs = append(errs, cli.RuleID.Check("id", *id))
		}
	}
	if file != nil {
		errs = append(errs, cli.Required("file", *file, "the rule's JSON file"))
	}
	var start time.Time
	if from != nil && (*from != "" || name == "backfill") {
		if err := cli.Required("from", *from, "an RFC 3339 time or a duration ago"); err != nil {
			errs = append(errs, err)
		} else if start, err = parseFrom(*from, now()); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, cli.Required("stream", *streamName, "the events Kinesis stream"), cli.Required("matches", *matches, "the matches Kinesis stream"))
		if *streamName != "" {
			errs = append(errs, cli.StreamName.Check("stream", *streamName))
		}
		if *matches != "" {
			errs = append(errs, cli.StreamName.Check("matches", *matches))
		}
		if *streamName != "" && *streamName == *matches {
			errs = append(errs, cli.Usagef("matches", "%s is the events stream: matches written there would be read back as events", *matches))
		}
	}
	if ooo != nil {
		errs = append(errs, cli.DurationIn("out-of-orderness", *ooo, 0, time.Hour, ""))
	}
	if idle != nil {
		// The detect function's CEP_CONFIG takes idleTimeout above zero, up
		// to 24h; a negative one would move the watermark past now and close
		// partial matches that may still complete (false absence matches).
		errs = append(errs, cli.DurationIn("idle-timeout", *idle, time.Millisecond, 24*time.Hour, "as the detect function's idleTimeout"))
	}
	if name == "test" {
		if len(ruleFiles) == 0 {
			errs = append(errs, cli.Usagef("rule", "is required: a rule's JSON file"))
		}
		errs = append(errs, cli.Required("events", *eventsFile, "a file of events"))
	}
	for _, err := range errs {
		if err != nil {
			return fail(err)
		}
	}

	if name == "test" {
		return fail(test(ruleFiles, *eventsFile, *ooo, stdout))
	}
	var r *cep.Rule
	if name == "add" {
		doc, err := readFile("file", *file)
		if err != nil {
			return fail(err)
		}
		if r, err = cep.ParseRule(doc); err != nil {
			return fail(&refusedError{fmt.Errorf("%s: %w", *file, err)})
		}
	}
	cfg, err := cli.LoadAWS(ctx)
	if err != nil {
		return fail(err)
	}
	store := cep.NewStore(dynamodb.NewFromConfig(cfg), *table, now)
	refuse := func(err error) error {
		var se *cep.StateError
		if errors.Is(err, cep.ErrExists) || errors.Is(err, cep.ErrNotFound) || errors.Is(err, cep.ErrTooMany) || errors.As(err, &se) {
			return &refusedError{err}
		}
		return err
	}
	switch name {
	case "add":
		sr, added, err := store.Add(ctx, r)
		if err != nil {
			return fail(refuse(err))
		}
		if added {
			fmt.Fprintf(stdout, "added rule %s: it applies to events reaching the stream from %s on\n", r.ID, sr.Intervals[0].From.Format(time.RFC3339))
		} else {
			fmt.Fprintf(stdout, "rule %s was already added with this definition (nothing changed): it applies to events reaching the stream from %s on\n", r.ID, sr.Intervals[len(sr.Intervals)-1].From.Format(time.RFC3339))
		}
		if from != nil && *from != "" {
			return fail(backfill(ctx, kinesis.NewFromConfig(cfg), sr, start, *streamName, *matches, *ooo, *idle, stdout, stderr))
		}
		return cli.ExitOK
	case "list":
		rules, err := store.List(ctx)
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			views := make([]cep.RuleView, len(rules))
			for i, sr := range rules {
				views[i] = sr.View(now())
			}
			b, _ := json.MarshalIndent(map[string]any{"rules": views}, "", "  ")
			fmt.Fprintln(stdout, string(b))
			return cli.ExitOK
		}
		for _, sr := range rules {
			state := sr.Status
			if sr.ActiveAt(now()) {
				state += ", applying now"
			} else if sr.Status == cep.StatusActive {
				state += fmt.Sprintf(", applies from %s", sr.Intervals[len(sr.Intervals)-1].From.Format(time.RFC3339))
			}
			fmt.Fprintf(stdout, "%-24s %-36s %s\n", sr.Rule.ID, state, sr.Rule.Source)
		}
		if len(rules) == 0 {
			fmt.Fprintln(stdout, "no rules")
		}
		return cli.ExitOK
	case "disable", "enable", "delete":
		f := map[string]func(context.Context, string) (*cep.StoredRule, error){"disable": store.Disable, "enable": store.Enable, "delete": store.Delete}[name]
		sr, err := f(ctx, *id)
		if err != nil {
			return fail(refuse(err))
		}
		iv := sr.Intervals[len(sr.Intervals)-1]
		if name == "enable" {
			fmt.Fprintf(stdout, "enabled rule %s: it applies to events reaching the stream from %s on\n", *id, iv.From.Format(time.RFC3339))
		} else {
			fmt.Fprintf(stdout, "%s rule %s: it reads no event reaching the stream from %s on\n", name+"d", *id, iv.Until.Format(time.RFC3339))
		}
		return cli.ExitOK
	case "backfill":
		sr, err := store.Get(ctx, *id)
		if err != nil {
			return fail(refuse(err))
		}
		return fail(backfill(ctx, kinesis.NewFromConfig(cfg), sr, start, *streamName, *matches, *ooo, *idle, stdout, stderr))
	}
	return cli.ExitOK
}

func backfill(ctx context.Context, kin *kinesis.Client, sr *cep.StoredRule, from time.Time, streamName, matches string, ooo, idle time.Duration, stdout, stderr io.Writer) error {
	fmt.Fprintf(stderr, "running rule %s over %s from %s to %s\n", sr.Rule.ID, streamName, from.Format(time.RFC3339), sr.Intervals[0].From.Format(time.RFC3339))
	res, err := cep.Backfill(ctx, kin, sr, cep.BackfillOptions{Stream: streamName, Matches: matches, From: from, OutOfOrderness: ooo, IdleTimeout: idle, Progress: stderr})
	if errors.Is(err, cep.ErrNothingToBackfill) {
		return &refusedError{err}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backfill of rule %s: %d records on %d shards, %d matches put on %s\n", sr.Rule.ID, res.Records, res.Shards, res.Matches, matches)
	if res.Open > 0 {
		fmt.Fprintf(stdout, "  %d keys still had partial matches open at the end of the stream: run it again once the rule's %s have passed (same ids, no duplicates downstream)\n", res.Open, sr.Rule.Within)
	}
	return nil
}

func test(ruleFiles []string, eventsFile string, ooo time.Duration, stdout io.Writer) error {
	var rules []*cep.Rule
	// A match is named by its rule's id: two rules of one id would make
	// matches that cannot be told apart.
	files := map[string]string{}
	for _, f := range ruleFiles {
		doc, err := readFile("rule", f)
		if err != nil {
			return err
		}
		r, err := cep.ParseRule(doc)
		if err != nil {
			return &refusedError{fmt.Errorf("%s: %w", f, err)}
		}
		if earlier, ok := files[r.ID]; ok {
			return &refusedError{fmt.Errorf("%s: %w", f, &cep.RuleError{Part: "id",
				Reason: fmt.Sprintf("%q is the id of %s too: give each rule its own id (a match is named by its rule's id)", r.ID, earlier)})}
		}
		files[r.ID] = f
		rules = append(rules, r)
	}
	fh, err := os.Open(eventsFile)
	if err != nil {
		return cli.Usagef("events", "%v", err)
	}
	defer fh.Close()
	evs, err := cep.ReadEvents(fh, 1_000_000)
	if err != nil {
		return &refusedError{fmt.Errorf("%s: %w", eventsFile, err)}
	}
	ms, o, err := cep.TestRules(rules, evs, ooo)
	if err != nil {
		return err
	}
	for _, m := range ms {
		var parts []string
		for _, e := range m.Data.Events {
			parts = append(parts, fmt.Sprintf("%s=%s@%s", e.Step, e.ID, e.EventTime.Format("15:04:05.000")))
		}
		extra := ""
		if m.Data.Absent != "" {
			extra = " (no " + m.Data.Absent + " within the rule's time)"
		}
		if m.Data.Sum != nil {
			extra = fmt.Sprintf(" (sum %g)", *m.Data.Sum)
		}
		fmt.Fprintf(stdout, "match %s rule %s key %s: %s%s\n", m.ID, m.Data.Rule, m.Key, strings.Join(parts, " "), extra)
	}
	fmt.Fprintf(stdout, "%d events, %d matches, %d late (older than the watermark when they arrived), %d set aside (a key's state budget, a value no sum holds)\n",
		len(evs), len(ms), o.Late, o.Aside)
	return nil
}

func readFile(flag, name string) ([]byte, error) {
	return cli.ReadFile(flag, name, cep.MaxRuleBytes, "a rule is a small JSON object")
}

// maxConfigBytes bounds a CEP file read by -config: a handful of fields.
const maxConfigBytes = 4 << 10

// applyConfig sets ooo and idle (idle nil for test) from the CEP file
// -config names, but for a flag given on the command line, and says on
// stderr what it took. Without -config the flags' values stand.
func applyConfig(fs *flag.FlagSet, configFile *string, ooo, idle *time.Duration, stderr io.Writer) error {
	if configFile == nil || *configFile == "" {
		return nil
	}
	doc, err := cli.ReadFile("config", *configFile, maxConfigBytes, "a CEP file is a small JSON object, such as pipelines/detect.json")
	if err != nil {
		return err
	}
	c, err := cep.ParseConfig(doc)
	if err != nil {
		return cli.Usagef("config", "%s: %v", strictjson.Cut(*configFile, cli.MaxEcho), err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var took []string
	if !given["out-of-orderness"] {
		*ooo = c.OutOfOrderness
		took = append(took, "outOfOrderness "+c.OutOfOrderness.String())
	}
	if idle != nil && !given["idle-timeout"] {
		*idle = c.IdleTimeout
		took = append(took, "idleTimeout "+c.IdleTimeout.String())
	}
	if len(took) > 0 {
		fmt.Fprintf(stderr, "rules: %s from %s\n", strings.Join(took, " and "), strictjson.Cut(*configFile, cli.MaxEcho))
	}
	return nil
}

// parseFrom reads an RFC 3339 time or a duration ago.
func parseFrom(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, cli.Usagef("from", "%s: a duration ago must be above zero", strictjson.Cut(s, cli.MaxEcho))
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, cli.Usagef("from", "%s: want an RFC 3339 time (2026-11-29T10:00:00Z) or a duration ago (2h)", strictjson.QuoteCut(s, cli.MaxEcho))
	}
	if t.After(now) {
		return time.Time{}, cli.Usagef("from", "%s is in the future", strictjson.Cut(s, cli.MaxEcho))
	}
	return t, nil
}
