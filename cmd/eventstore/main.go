// Command eventstore operates the event-sourced views and the event store:
// it rebuilds the views from the log into a new version of the views table
// and points the readers at it, points them back (rollback, use-version),
// compares two versions, and erases a subject's personal data from the
// log, audited.
//
//	go run ./cmd/eventstore rebuild     -parameter <views param> -stream <published stream> -events-table <events> [-handover 1m] [-to-table <views>-vN] [-dry-run]
//	go run ./cmd/eventstore rollback    -parameter <views param> -stream <published stream> -events-table <events> [-handover 1m] [-margin 1m]
//	go run ./cmd/eventstore use-version -parameter <views param> -stream <published stream> -events-table <events> -table <views>-vN
//	go run ./cmd/eventstore compare     -a <table> -b <table>
//	go run ./cmd/eventstore erase       -events-table <events> -subject <customerId> -reason <why> [-by <who>] [-yes | -dry-run]
//
// rebuild is package projection's Rebuild: replay's versioning (the next
// <views>-vN, tagged), filled from a consistent scan of the whole events
// table, caught up from the published stream from a minute before the scan,
// swapped, followed for the handover; then it compares the new version with
// the previous one and says which differences the swap explains (what
// commands created or updated after it is in the new version alone), a
// few items of each kind named as (pk, sk). `replay versions` and `replay delete-version` work on
// the same parameter. erase without -yes (or with -dry-run) lists what it
// would erase, changing nothing and recording nothing: only -yes needs -by
// (default $USER), whom the audit event names.
//
// Exit status: 0 done, 1 error, 2 usage (nothing was read or changed), 3
// refused (checked, nothing changed), 130 interrupted; for compare, 1 when
// the versions differ.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/projection"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/seats"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

func main() {
	cli.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.LookupEnv, time.Now, os.Stdout, os.Stderr)
	})
}

// Environment variables the flags default to (make local-up prints them).
const (
	envViewsParameter = "ES_VIEWS_PARAMETER"
	envOperator       = "USER"
)

const commands = `usage:
  eventstore rebuild     -parameter <views param> -stream <published stream> -events-table <events> [-handover 1m] [-to-table <views>-vN] [-dry-run]
  eventstore rollback    -parameter <views param> -stream <published stream> -events-table <events> [-handover 1m] [-margin 1m]
  eventstore use-version -parameter <views param> -stream <published stream> -events-table <events> -table <views>-vN [-handover 1m] [-margin 1m]
  eventstore compare     -a <table> -b <table>
  eventstore erase       -events-table <events> -subject <customerId> -reason <why> [-by <who>] [-yes | -dry-run]
eventstore <command> -h describes a command and its flags.`

const footer = `Exit status: 0 done, 1 error (compare: the versions differ), 2 usage, 3 refused (nothing changed), 130 interrupted.
` + cli.RegionHelp

// maxHandover bounds -handover. Its lower bound is the functions' refresh
// interval (aggregate.ViewsRefreshFromEnv: the stack's 30s, or
// $VIEWS_REFRESH_SECONDS, as replay reads it): until a function re-reads
// the parameter it goes on writing to the version the swap left.
const maxHandover = time.Hour

func run(ctx context.Context, args []string, lookup func(string) (string, bool), now func() time.Time, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "eventstore: a command is required\n"+commands)
		return cli.ExitUsage
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, commands+"\n\n"+footer)
		return cli.ExitOK
	}
	name := args[0]
	env := func(k string) string { v, _ := lookup(k); return v }
	fs := flag.NewFlagSet("eventstore "+name, flag.ContinueOnError)
	refresh, refreshErr := aggregate.ViewsRefreshFromEnv(lookup)
	fail := func(err error) int {
		var refused *replay.RefusedError
		var invalid *es.InvalidError
		switch {
		case errors.As(err, &invalid):
			fmt.Fprintf(stderr, "eventstore %s: -%v\n", name, err)
			return cli.ExitUsage
		case errors.As(err, &refused):
			fmt.Fprintf(stderr, "eventstore %s: %v\n", name, err)
			return cli.ExitRefused
		}
		return cli.Fail(stderr, "eventstore "+name, err, "")
	}
	var (
		param, streamName, events, table, toTable, a, b, subject, reason, by *string
		handover, margin                                                     *time.Duration
		dryRun, yes                                                          *bool
	)
	views := func() {
		param = fs.String("parameter", env(envViewsParameter), "the SSM parameter naming the current views table (default $"+envViewsParameter+"; the stack's EsViewsParameterName output)")
		streamName = fs.String("stream", env(es.EnvStreamName), "the Kinesis stream the events are published on (default $"+es.EnvStreamName+")")
		events = fs.String("events-table", env(es.EnvEventsTable), "the events table (default $"+es.EnvEventsTable+")")
		handover = fs.Duration("handover", max(time.Minute, refresh), fmt.Sprintf("how long to keep following after the swap: from the functions' refresh interval (%s: $%s, else the stack's 30s) to %s", refresh, aggregate.EnvViewsRefresh, maxHandover))
	}
	var synopsis string
	switch name {
	case "rebuild":
		synopsis = "eventstore rebuild: build a new version of the views from the log, from its start, then point the readers at it"
		views()
		toTable = fs.String("to-table", "", "the new version's name, <views>-vN (default: the next free N)")
		dryRun = fs.Bool("dry-run", false, "check and print what would be done, change nothing")
	case "rollback", "use-version":
		synopsis = "eventstore rollback: point the readers back at the views table the parameter named before, caught up from the stream first"
		if name == "use-version" {
			synopsis = "eventstore use-version: point the readers at a version of the views, caught up from the stream first"
			table = fs.String("table", "", "the version to use (replay versions lists them)")
		}
		views()
		margin = fs.Duration("margin", time.Minute, "start each shard this long before the newest record the version holds of it")
	case "compare":
		synopsis = "eventstore compare: read two versions of the views in full and compare their items"
		a = fs.String("a", "", "a views table")
		b = fs.String("b", "", "another views table")
	case "erase":
		synopsis = "eventstore erase: remove a subject's personal data from every event that holds some, and append the audit event (without -yes: list only)"
		events = fs.String("events-table", env(es.EnvEventsTable), "the events table (default $"+es.EnvEventsTable+")")
		subject = fs.String("subject", "", "whose personal data (a customer id)")
		reason = fs.String("reason", "", "why (a request's reference); kept in the audit event, so not itself personal data")
		by = fs.String("by", env(envOperator), "who erases, named in the audit event: required with -yes (default $"+envOperator+")")
		yes = fs.Bool("yes", false, "erase (without it: list what would be erased)")
		dryRun = fs.Bool("dry-run", false, "list what would be erased, change nothing (the default without -yes; needs no -by)")
	default:
		fmt.Fprintf(stderr, "eventstore: unknown command %s\n%s\n", strictjson.QuoteCut(name, cli.MaxEcho), commands)
		return cli.ExitUsage
	}
	if err := cli.Parse(fs, args[1:], stdout, synopsis+"\n\n"+commands, footer); errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	} else if err != nil {
		return fail(err)
	}
	var errs []error
	check := func(flag string, v *string, rule cli.NameRule, what string) {
		if v == nil {
			return
		}
		if err := cli.Required(flag, *v, what); err != nil {
			errs = append(errs, err)
			return
		}
		errs = append(errs, rule.Check(flag, *v))
	}
	check("parameter", param, cli.ParameterName, "the SSM parameter naming the current views table")
	check("stream", streamName, cli.StreamName, "the Kinesis stream the events are published on")
	check("events-table", events, cli.TableName, "the events table")
	check("table", table, cli.TableName, "the version to use")
	check("a", a, cli.TableName, "a views table")
	check("b", b, cli.TableName, "another views table")
	if a != nil && b != nil && *a != "" && *a == *b {
		errs = append(errs, cli.Usagef("b", "%s: is the table -a names; give two versions of the views (replay versions lists them)", *b))
	}
	for _, f := range []struct {
		flag string
		v    *string
		what string
	}{{"subject", subject, "whose personal data (a customer id)"}, {"reason", reason, "why: the audit event keeps it"}} {
		if f.v != nil {
			errs = append(errs, cli.Required(f.flag, *f.v, f.what))
		}
	}
	if name == "erase" {
		// A dry run changes nothing and appends no audit event: who
		// would erase is asked for only when someone does.
		switch {
		case *yes && *dryRun:
			errs = append(errs, cli.Usagef("dry-run", "and -yes: give one (-yes erases, -dry-run lists)"))
		case *yes && strings.TrimSpace(*by) == "":
			errs = append(errs, cli.Usagef("by", "is required with -yes: who erases, named in the audit event (default $%s, which is not set)", envOperator))
		}
	}
	if toTable != nil && *toTable != "" {
		errs = append(errs, cli.TableName.Check("to-table", *toTable))
	}
	if handover != nil {
		if refreshErr != nil {
			errs = append(errs, &cli.UsageError{Msg: refreshErr.Error()})
		} else {
			errs = append(errs, cli.DurationIn("handover", *handover, refresh, maxHandover, "the functions re-read the parameter every "+refresh.String()+": a shorter handover can miss what they still write to the old version"))
		}
	}
	if margin != nil {
		errs = append(errs, cli.DurationIn("margin", *margin, time.Second, time.Hour, ""))
	}
	for _, err := range errs {
		if err != nil {
			return fail(err)
		}
	}
	cfg, err := cli.LoadAWS(ctx)
	if err != nil {
		return fail(err)
	}
	db := dynamodb.NewFromConfig(cfg)

	switch name {
	case "compare":
		d, err := projection.Compare(ctx, db, *a, *b)
		var bad *projection.TableError
		if errors.As(err, &bad) {
			refused := &replay.RefusedError{Field: "a", Reason: bad.Error()}
			if bad.Table == *b {
				refused.Field = "b"
			}
			if errors.Is(err, projection.ErrNoTable) {
				refused.Reason += " (replay versions lists the versions of the views)"
			}
			return fail(refused)
		}
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, d)
		if !d.Equal() {
			return cli.ExitError
		}
		return cli.ExitOK
	case "erase":
		res, err := es.Erase(ctx, db, es.Tables{Events: *events}, es.Erasure{Subject: *subject, Reason: *reason, By: *by}, now(), !*yes)
		if err != nil {
			return fail(err)
		}
		switch {
		case !*yes && len(res.Erased) == 0 && len(res.Completed) == 0:
			fmt.Fprintf(stdout, "dry run: no event of %s holds personal data (%d erased before, each audited): nothing to erase\n", *subject, res.AlreadyErased)
		case !*yes:
			if len(res.Erased) > 0 {
				fmt.Fprintf(stdout, "dry run: %d events of %s hold personal data: %s\n", len(res.Erased), *subject, listIDs(res.Erased))
			} else {
				fmt.Fprintf(stdout, "dry run: no event of %s holds personal data\n", *subject)
			}
			if len(res.Completed) > 0 {
				fmt.Fprintf(stdout, "an earlier erasure stopped before its audit event: %d events erased without one (%s), which this run would audit\n",
					len(res.Completed), listIDs(res.Completed))
			}
			// Without -by (no $USER) the suggestion asks for one: the
			// shell refuses <who> rather than run an erase naming nobody.
			who := "<who>"
			if strings.TrimSpace(*by) != "" {
				who = shellQuote(*by)
			}
			fmt.Fprintf(stdout, "to erase it: eventstore erase -events-table %s -subject %s -reason %s -by %s -yes\n",
				*events, *subject, shellQuote(*reason), who)
		case res.Audit == nil:
			fmt.Fprintf(stdout, "nothing to erase: %d events of %s were erased before\n", res.AlreadyErased, *subject)
		default:
			fmt.Fprintf(stdout, "erased the personal data of %d events of %s (%s); audit event %s (%s)\n",
				len(res.Erased), *subject, listIDs(res.Erased), res.Audit.ID(), res.Audit.Type)
			if len(res.Completed) > 0 {
				fmt.Fprintf(stdout, "the audit event also lists %d events an earlier erasure stopped before auditing (%s)\n",
					len(res.Completed), listIDs(res.Completed))
			}
		}
		return cli.ExitOK
	}

	store := es.NewStore(db, es.Tables{Events: *events})
	p := projection.New(db, store, projection.FixedTable(""), seats.Views(es.NewExecutor[seats.Show](store, seats.Decider{})))
	r := replay.New(kinesis.NewFromConfig(cfg), db, replay.NewRegistry(ssm.NewFromConfig(cfg), *param))
	opts := replay.Options{Tool: "eventstore", Stream: *streamName, Handover: *handover, Progress: stderr, InPlace: isTerminal(stderr), Now: now}
	var res *replay.Result
	switch name {
	case "rebuild":
		opts.Target, opts.DryRun = *toTable, *dryRun
		res, err = projection.Rebuild(ctx, r, p, db, *events, opts)
	case "use-version":
		opts.Target, opts.Margin = *table, *margin
		res, err = projection.UseVersion(ctx, r, p, opts)
	case "rollback":
		opts.Margin = *margin
		res, err = projection.Rollback(ctx, r, p, opts)
	}
	if err != nil && res != nil && res.Swapped && errors.Is(err, context.Canceled) {
		// pkg/replay's error names replay's use-version; the event-sourced
		// views are caught up by this command's.
		fmt.Fprintf(stderr, "eventstore %s: interrupted after the swap: parameter %s names %s (was %s), but the handover was cut short: events the live functions applied to %s just before they switched may be missing from %s (eventstore use-version -table %s catches it up)\n",
			name, *param, res.Target, res.Current, res.Current, res.Target, res.Target)
		return cli.ExitInterrupted
	}
	if err != nil {
		return fail(err)
	}
	if opts.DryRun {
		return cli.ExitOK
	}
	fmt.Fprintf(stdout, "%s is current (was %s): read %d records from the stream, caught up after %s\n",
		res.Target, res.Current, res.Read, res.CaughtUp.Round(time.Millisecond))
	// Commands served during the rebuild leave the versions different:
	// the summary says which differences the swap explains.
	if d, err := projection.Compare(ctx, db, res.Current, res.Target); err == nil {
		fmt.Fprintln(stdout, d.AfterSwap())
	} else {
		fmt.Fprintf(stdout, "could not compare %s with %s: %v (eventstore compare -a %s -b %s does it again)\n", res.Current, res.Target, err, res.Current, res.Target)
	}
	return cli.ExitOK
}

// shellQuote quotes s for a POSIX shell, so that the command erase
// suggests runs with the same -reason and -by when pasted: Go's %q would
// leave $, ` and \ to the shell ("ticket $5" would lose its $5).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// erasedShown is how many event ids erase prints: a subject may have
// thousands of events, and the audit event lists them.
const erasedShown = 20

// listIDs is the first erasedShown of ids, and how many more there are.
func listIDs(ids []string) string {
	if len(ids) <= erasedShown {
		return strings.Join(ids, " ")
	}
	return fmt.Sprintf("%s … and %d more (the audit event lists the first 2,000 and counts the rest)", strings.Join(ids[:erasedShown], " "), len(ids)-erasedShown)
}
