// Command setaside lists the records the stack's functions set aside (the
// quarantine table), shows one with its data, and puts one back on the
// stream it came from once its cause is fixed.
//
//	go run ./cmd/setaside list -table <QuarantineTableName> [-function f] [-category invalid] [-since 24h] [-n 20] [-json]
//	go run ./cmd/setaside show -table <QuarantineTableName> -source <source> -sequence <n> [-data-only]
//	go run ./cmd/setaside putback -table <QuarantineTableName> -source <source> -sequence <n> [-data fixed.json] [-function f] [-dry-run]
//	go run ./cmd/setaside putback -table <QuarantineTableName> -function f [-category c] [-since 1h] [-n 100] [-dry-run]
//	make setaside / make setaside-show / make putback    (the running make local-up)
//
// Package putback does the work and says what is refused and why (a
// DynamoDB stream record, a state-budget or duplicate-conflict record or
// one detect's dedupe ledger took the id of (idTaken), a record past the consumers' dedupe horizon, data that would be set aside
// again). Putting back is at-least-once: the record is put, then its item
// marked; a run stopped between the two puts it again next time, which its
// consumers drop as a copy within their horizon.
//
// Exit status: 0 done, 1 error, 2 usage, 3 a record refused (nothing put
// for it), 130 interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/internal/localdeploy"
	"github.com/tributary-dev/tributary/pkg/putback"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

func main() {
	cli.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.LookupEnv, time.Now, os.Stdout, os.Stderr)
	})
}

const usage = `usage:
  setaside list    -table <QuarantineTableName> [-function f] [-category c] [-source s] [-since 24h] [-n 20] [-json]
  setaside show    -table <QuarantineTableName> -source <source> -sequence <sequence number> [-data-only]
  setaside putback -table <QuarantineTableName> -source <source> -sequence <sequence number> [-data fixed.json] [-function f] [-dry-run]
  setaside putback -table <QuarantineTableName> -function f [-category c] [-source s] [-since 1h] [-n 100] [-dry-run]
  setaside <command> -template infra/cdk.out/Tributary.template.json ...   (the local deployment's table: make setaside)
Lists the records the stack's functions set aside, shows one with its data, and puts records back on
the stream they came from once their cause is fixed.`

const footer = `Putting back: only a Kinesis record, whose data (or the corrected record given with -data) every consumer
reads; with its partition key, and with receivedAt set to its first arrival when it has none, so it keeps
its event time (-arrive-now: it takes the time it arrives again). Refused: a DynamoDB stream record, an
SQS body, an output never written, a state-budget or duplicate-conflict record, or one detect set aside
after its other rules read it (idTaken) (its function took the event id: a copy reaches only the other
consumers), one that first arrived past the consumers' dedupe
horizon (-horizon, 1h; -past-horizon puts it back anyway: consumers that applied it apply it again), one
put back before (-again), one whose field at fault still holds what it held or breaks the rule its item
keeps (a pipeline's value: a number within ±2^53) (correct it with -data, or -unchanged when its cause
was elsewhere). It goes to every consumer of the stream: those that applied it drop it as a
copy within their horizon (docs/set-aside.md).
Exit status: 0 done, 1 error, 2 usage, 3 a record refused (nothing put for it), 130 interrupted.
` + cli.RegionHelp

// Bounds of the flags.
const (
	defaultList    = 20
	defaultPutBack = 100
	defaultStack   = "Tributary"
	// maxShown bounds the data show and a dry run print (-data-only prints
	// it whole).
	maxShown = 4096
	// The longest source, sequence number and text the quarantine table
	// keeps (package setaside's bounds).
	maxSourceBytes   = 2048
	maxSequenceBytes = 1024
	maxTextBytes     = 1024
)

// options are the command line, parsed and checked.
type options struct {
	command                       string
	table, tmpl, stack            string
	filter                        putback.Filter
	since                         string // -since as given, for the listing to repeat
	source, sequence, dataFile    string
	limit                         int
	asJSON, dataOnly, dryRun      bool
	arriveNow, pastHorizon, again bool
	unchanged                     bool
	horizon                       time.Duration
}

func run(ctx context.Context, args []string, lookup func(string) (string, bool), now func() time.Time, stdout, stderr io.Writer) int {
	o, err := parse(args, now(), stdout)
	if errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	}
	if err != nil {
		return fail(stderr, err)
	}
	env := func(k string) string { v, _ := lookup(k); return v }
	if o.tmpl != "" {
		if env("AWS_ENDPOINT_URL") == "" {
			return fail(stderr, cli.Usagef("template", "names the table as the local runner deploys it, but AWS_ENDPOINT_URL is not set; against AWS give -table the stack output QuarantineTableName"))
		}
		if o.table, err = templateTable(o.tmpl, o.stack); err != nil {
			return fail(stderr, err)
		}
	}
	awsCfg, err := cli.LoadAWS(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	if o.tmpl != "" {
		if endpoint := env("AWS_ENDPOINT_URL"); !standin.Answers(ctx, endpoint) {
			return fail(stderr, fmt.Errorf("nothing answers at %s: start the topology with make local-up first (or set TRIBUTARY_STANDIN_ADDR to where it runs)", endpoint))
		}
	}
	db := dynamodb.NewFromConfig(awsCfg)
	c := &commands{o: o, db: db, stdout: stdout, stderr: stderr, makePrefix: standin.MakePrefix(env("AWS_ENDPOINT_URL")),
		putter: &putback.Putter{DB: db, Streams: kinesis.NewFromConfig(awsCfg), Table: o.table, Now: now,
			Horizon: o.horizon, PastHorizon: o.pastHorizon, ArriveNow: o.arriveNow, Again: o.again, Unchanged: o.unchanged}}
	switch o.command {
	case "list":
		err = c.list(ctx)
	case "show":
		err = c.show(ctx)
	default:
		err = c.putBack(ctx)
	}
	return fail(stderr, err)
}

// parse reads the command line: the command, then its flags.
func parse(args []string, now time.Time, help io.Writer) (options, error) {
	var o options
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "-help" && args[0] != "--help" {
		return o, cli.Usagef("", "give a command first: list, show or putback")
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprintln(help, usage)
		fmt.Fprintln(help, "setaside <command> -h lists the command's flags.")
		fmt.Fprint(help, footer)
		return o, flag.ErrHelp
	}
	o.command = args[0]
	switch o.command {
	case "list", "show", "putback":
	default:
		hint := ""
		if n := strictjson.Nearest(o.command, []string{"list", "show", "putback"}); n != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", n)
		}
		return o, cli.Usagef("", "%s is not a command%s: list, show or putback", strictjson.QuoteCut(o.command, cli.MaxEcho), hint)
	}
	fs := flag.NewFlagSet("setaside "+o.command, flag.ContinueOnError)
	fs.StringVar(&o.table, "table", "", "the quarantine table (the stack output QuarantineTableName)")
	fs.StringVar(&o.tmpl, "template", "", "name the table as the local runner deploys this synthesized template (only with AWS_ENDPOINT_URL: the local stand-in)")
	fs.StringVar(&o.stack, "stack", defaultStack, "with -template: the prefix the local runner gave the names (make local-up prints it)")
	if o.command != "show" {
		fs.StringVar(&o.filter.Function, "function", "", "only records this function set aside (its name, as the item's function says, or words of it); putback judges each as this function set it aside")
		fs.StringVar(&o.filter.Category, "category", "", "only records of this category (invalid, unparseable, output-too-large, ...)")
		fs.StringVar(&o.since, "since", "", "only records set aside since: a duration ago (24h) or an RFC 3339 time (list says how many older ones it left out)")
		fs.IntVar(&o.limit, "n", 0, fmt.Sprintf("at most this many records, newest first, 1 to %d (default %d; putback %d)", putback.MaxList, defaultList, defaultPutBack))
	}
	if o.command != "list" {
		fs.StringVar(&o.sequence, "sequence", "", "the record's sequence number (the item's sequenceNumber)")
	}
	switch o.command {
	case "list":
		fs.StringVar(&o.filter.Source, "source", "", "only records whose source starts with this (a stream's ARN, or <stream ARN>/<shard>)")
		fs.BoolVar(&o.asJSON, "json", false, "one JSON object a line, the item's attributes without its data")
	case "show":
		fs.StringVar(&o.source, "source", "", "the record's source (the item's source: <stream ARN>/<shard>)")
		fs.BoolVar(&o.dataOnly, "data-only", false, "print only the record's data, whole, as it is (to correct it and give it to putback -data)")
	case "putback":
		fs.StringVar(&o.source, "source", "", "the record's source (<stream ARN>/<shard>), with -sequence")
		fs.StringVar(&o.dataFile, "data", "", "with -source and -sequence: put back this file's content (the whole record, corrected) in place of the data kept")
		fs.BoolVar(&o.dryRun, "dry-run", false, "say what would be put back, and put nothing")
		fs.BoolVar(&o.arriveNow, "arrive-now", false, "do not add receivedAt: a record without one takes the time it arrives again")
		fs.DurationVar(&o.horizon, "horizon", putback.DefaultHorizon, "the consumers' dedupe horizon (their dedupeHorizon): a record that first arrived longer ago is refused")
		fs.BoolVar(&o.pastHorizon, "past-horizon", false, "put back a record past -horizon all the same (the consumers that applied it apply it again)")
		fs.BoolVar(&o.again, "again", false, "put back a record marked put back before")
		fs.BoolVar(&o.unchanged, "unchanged", false, "put back a record whose field at fault still holds what it held (its cause was elsewhere: the pipeline file or a limit changed)")
	}
	if err := cli.Parse(fs, args[1:], help, usage, footer); err != nil {
		return o, err
	}
	return o, o.check(fs, now)
}

// check holds the options to their bounds and to each other.
func (o *options) check(fs *flag.FlagSet, now time.Time) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case o.tmpl == "" && o.table == "":
		return cli.Usagef("table", "is required: the stack output QuarantineTableName (or -template for the local deployment)")
	case o.tmpl != "" && o.table != "":
		return cli.Usagef("table", "and -template both name the table; give one")
	case o.tmpl == "" && set["stack"]:
		return cli.Usagef("stack", "is only read with -template")
	}
	if o.table != "" {
		if err := cli.TableName.Check("table", o.table); err != nil {
			return err
		}
	}
	for _, b := range []struct {
		flag, v string
		max     int
	}{{"source", o.source, maxSourceBytes}, {"sequence", o.sequence, maxSequenceBytes},
		{"function", o.filter.Function, maxTextBytes}, {"category", o.filter.Category, maxTextBytes}, {"source", o.filter.Source, maxSourceBytes}} {
		if len(b.v) > b.max {
			return cli.Usagef(b.flag, "%s is %d bytes; the quarantine table keeps at most %d", strictjson.QuoteCut(b.v, cli.MaxEcho), len(b.v), b.max)
		}
	}
	o.filter.Category = strings.ToLower(o.filter.Category)
	if c := o.filter.Category; c != "" && !slices.Contains(setaside.Categories, c) {
		hint := ""
		if n := strictjson.Nearest(c, setaside.Categories); n != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", n)
		}
		return cli.Usagef("category", "%s is no category%s: %s", strictjson.QuoteCut(c, cli.MaxEcho), hint, strings.Join(setaside.Categories, ", "))
	}
	if o.since != "" {
		t, err := parseSince(o.since, now)
		if err != nil {
			return err
		}
		o.filter.Since = t
	}
	one := o.source != "" && o.sequence != ""
	switch o.command {
	case "show":
		if err := cli.Required("source", o.source, "the record's source (setaside list prints it)"); err != nil {
			return err
		}
		return cli.Required("sequence", o.sequence, "the record's sequence number (setaside list prints it)")
	case "putback":
		switch {
		case o.sequence != "" && o.source == "":
			return cli.Usagef("sequence", "needs -source: a sequence number names a record only within its source")
		case o.source != "" && o.sequence == "":
			return cli.Usagef("source", "needs -sequence: putback puts back one record by its source and sequence number, or those -function, -category and -since select, never a whole shard")
		case o.dataFile != "" && !one:
			return cli.Usagef("data", "puts back one record: give its -source and -sequence too")
		case one && (o.filter.Category != "" || o.since != "" || set["n"]):
			return cli.Usagef("sequence", "names one record; -category, -since and -n select several: give one or the other")
		case !one && o.filter.Function == "" && o.filter.Category == "" && o.since == "":
			return cli.Usagef("source", "and -sequence, or a filter (-function, -category, -since), is required: putback does not put back every record of the table at once")
		case o.horizon <= 0:
			return cli.Usagef("horizon", "%s: must be above zero", o.horizon)
		}
	}
	if o.limit == 0 && !set["n"] { // -n 0 given is refused below, as -n -5 is
		o.limit = defaultList
		if o.command == "putback" {
			o.limit = defaultPutBack
		}
	}
	return cli.IntIn("n", o.limit, 1, putback.MaxList, "newest first")
}

// parseSince reads an RFC 3339 time or a duration ago.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, cli.Usagef("since", "%s: a duration ago must be above zero", strictjson.Cut(s, cli.MaxEcho))
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, cli.Usagef("since", "%s: want a duration ago (24h) or an RFC 3339 time (2026-12-05T10:00:00Z)", strictjson.QuoteCut(s, cli.MaxEcho))
	}
	return t, nil
}

// templateTable is the quarantine table's name as the local runner deploys
// the template under stack.
func templateTable(path, stack string) (string, error) {
	d, err := localdeploy.Plan(path, stack)
	if err != nil {
		return "", err
	}
	outs, err := d.Outputs()
	if err != nil {
		return "", cli.Usagef("template", "%s: %v", path, err)
	}
	name := outs["QuarantineTableName"]
	if name == "" {
		return "", cli.Usagef("template", "%s has no output QuarantineTableName", path)
	}
	return name, nil
}

// fail prints err in one line and returns the exit status: a refusal is
// ExitRefused, the rest as cli.Fail.
func fail(stderr io.Writer, err error) int {
	if errors.Is(err, putback.ErrNoTable) {
		fmt.Fprintf(stderr, "setaside: %v\n", err)
		return cli.ExitError
	}
	if errors.Is(err, errRefused) {
		fmt.Fprintf(stderr, "setaside: %v\n", err)
		return cli.ExitRefused
	}
	if err != nil && errors.Is(err, context.Canceled) {
		return cli.Fail(stderr, "setaside", err, "a record put back is marked; run again to go on")
	}
	if err == nil {
		return cli.ExitOK
	}
	return cli.Fail(stderr, "setaside", err, "")
}

// errRefused ends a putback that refused at least one record.
var errRefused = errors.New("refused")

// jsonItem is an item's attributes for -json: the table's names, data left
// out.
func jsonItem(it *setaside.Item) map[string]any {
	m := map[string]any{"source": it.Source, "sequenceNumber": it.SequenceNumber, "kind": it.Kind}
	for k, v := range map[string]string{"partitionKey": it.PartitionKey, "approximateArrival": it.ApproximateArrival,
		"function": it.Function, "field": it.Field, "category": it.Category, "setAsideAt": it.SetAsideAt,
		"failedAt": it.FailedAt, "condition": it.Condition, "functionError": it.FunctionError, "reason": it.Reason,
		"eventID": it.EventID, "eventName": it.EventName, "putBackAt": it.PutBackAt, "putBackSequence": it.PutBackSequence} {
		if v != "" {
			m[k] = v
		}
	}
	if it.DataBytes > 0 {
		m["dataBytes"] = it.DataBytes
	}
	if it.DataTruncated {
		m["dataTruncated"] = true
	}
	if len(it.Redacted) > 0 {
		m["redacted"] = it.Redacted
	}
	if it.Rule != nil {
		m["rule"] = it.Rule
	}
	if it.IDTaken {
		m["idTaken"] = true
	}
	return m
}
