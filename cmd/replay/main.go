// Command replay rebuilds the windowed views into a new version of the
// views table by replaying the events stream and points the readers at it;
// points them back at an earlier version; lists the versions; and deletes
// the ones rebuild made.
//
//	go run ./cmd/replay rebuild -stream events -parameter /tributary/current-views -from 2h
//	go run ./cmd/replay rebuild -stream events -parameter /tributary/current-views -from 720h -archive-bucket <bucket>
//	go run ./cmd/replay versions -parameter /tributary/current-views -stream events
//	go run ./cmd/replay rollback -pipeline pipelines/ -stream events -parameter /tributary/current-views
//	go run ./cmd/replay use-version -pipeline pipelines/ -stream events -parameter /tributary/current-views -table views-v2
//	go run ./cmd/replay current -parameter /tributary/current-views
//	go run ./cmd/replay delete-version -parameter /tributary/current-views -table views-v2 [-yes]
//
// rebuild reads the pipeline from -pipeline (or PIPELINE_CONFIG), the same
// config the aggregate function runs (-pipeline again for each other
// pipeline that shares the views table: the new version holds the windows
// of those given); creates the next version
// <views>-vN with the current table's keys, indexes, TTL and stream, tagged
// as rebuild's (tributary:created-by and tributary:views-parameter);
// replays every shard from -from through the aggregate processor into it
// (with -archive-bucket, what arrived before the seam, -archive-until, from
// the stream's archive in S3, and the stream after it: a -from older than
// the stream's retention);
// once every shard is caught up, and the version holds items if the current
// one does (or -allow-empty), writes it into the SSM parameter the functions
// read (VIEWS_PARAMETER_NAME), then keeps following for -handover so
// nothing they wrote to the old version before switching is missing. Every
// swap is a new version of the parameter, so its history records which
// table was current before: rollback points the readers back at it,
// use-version at any version, each first catching that version up from
// where it got to on every shard, with every pipeline given (-pipeline
// once for each that shares the views table, as for rebuild). delete-version only checks (a dry run)
// unless given -yes, and deletes only tables rebuild created for this
// parameter, never the current one. rebuild, rollback and use-version
// refuse a -pipeline file whose aggregates differ from those of the
// pipeline of its name the running template deploys (the copy a running
// make local-up keeps, else infra/cdk.out/Tributary.template.json): the
// live functions could not merge the windows the version would hold.
//
// Exit status: 0 done, 1 error, 2 usage (nothing was read or changed), 3
// refused (checked, nothing changed, except a rebuild refused after its
// replay, which leaves the new table in place, not current), 130
// interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/internal/localdeploy"
	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/archive"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

func main() {
	cli.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.LookupEnv, time.Now(), os.Stdout, os.Stderr)
	})
}

const commands = `usage:
  replay rebuild        -stream <events> -parameter <param> -from <time|duration ago> [-pipeline file]... [-leave-out name]... [-archive-bucket b [-archive-until <time|duration ago>]] [-to-table <views>-vN] [-handover 1m] [-output-stream name] [-allow-empty] [-dry-run]
  replay use-version    -stream <events> -parameter <param> -table <version> [-pipeline file]... [-leave-out name]... [-handover 1m] [-margin 1m] [-allow-empty] [-dry-run]
  replay rollback       -stream <events> -parameter <param> [-pipeline file]... [-leave-out name]... [-handover 1m] [-margin 1m] [-allow-empty] [-dry-run]
  replay versions       -parameter <param> [-stream <events>]
  replay current        -parameter <param>
  replay delete-version -parameter <param> -table <version> [-yes]
replay <command> -h describes a command and its flags.`

const footer = `Exit status: 0 done, 1 error, 2 usage, 3 refused (nothing changed), 130 interrupted.
` + cli.RegionHelp

// Bounds of the flags.
const (
	maxHandover = time.Hour
	maxMargin   = time.Hour
)

type command struct {
	name, synopsis string
	lookup         func(string) (string, bool)
	fs             *flag.FlagSet
	stdout, stderr io.Writer
}

// fail prints err in one line with one prefix and returns the exit status.
func (c *command) fail(err error) int {
	var usage *cli.UsageError
	var refused *replay.RefusedError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintf(c.stderr, "replay %s: %v; see go run ./cmd/replay %s -h\n", c.name, err, c.name)
		return cli.ExitUsage
	case errors.Is(err, cli.ErrNoRegion):
		fmt.Fprintf(c.stderr, "replay %s: %v\n", c.name, err)
		return cli.ExitUsage
	case errors.As(err, &refused):
		if refused.Field != "" && c.fs.Lookup(refused.Field) == nil {
			err = &replay.RefusedError{Reason: refused.Reason} // not a flag of this command
		}
		fmt.Fprintf(c.stderr, "replay %s: %v\n", c.name, err)
		return cli.ExitRefused
	case errors.Is(err, context.Canceled):
		// What the run had done when interrupted (swapped, and how to
		// catch up) is said by the error wrapping ctx's.
		if err == context.Canceled {
			fmt.Fprintf(c.stderr, "replay %s: interrupted\n", c.name)
		} else {
			fmt.Fprintf(c.stderr, "replay %s: interrupted: %v\n", c.name, err)
		}
		return cli.ExitInterrupted
	default:
		fmt.Fprintf(c.stderr, "replay %s: %v\n", c.name, err)
		return cli.ExitError
	}
}

func run(ctx context.Context, args []string, lookup func(string) (string, bool), now time.Time, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "replay: a command is required\n"+commands)
		return cli.ExitUsage
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, commands+"\n\n"+footer)
		return cli.ExitOK
	}
	c := &command{name: args[0], lookup: lookup, fs: flag.NewFlagSet("replay "+args[0], flag.ContinueOnError), stdout: stdout, stderr: stderr}
	env := func(k string) string { v, _ := lookup(k); return v }
	fs := c.fs
	param := fs.String("parameter", env(aggregate.EnvViewsParameter), "the SSM parameter naming the current views table (default $VIEWS_PARAMETER_NAME; make local-up prints it)")
	var (
		streamName, from, toTable, outStream, table, archiveBucket *string
		archiveUntil                                               *string
		pipelineFiles, leaveOut                                    []string
		pipelineFlag                                               bool
		handover, margin                                           *time.Duration
		dryRun, allowEmpty, yes                                    *bool
	)
	refresh, refreshErr := aggregate.ViewsRefreshFromEnv(lookup)
	stream := func(required bool) {
		what := "the events Kinesis stream"
		if !required {
			what += "; with it, each version's position also shows when its record arrived"
		}
		streamName = fs.String("stream", env("EVENTS_STREAM_NAME"), what+" (default $EVENTS_STREAM_NAME)")
	}
	catchUp := func() {
		pipelineFlag = true
		fs.Func("pipeline", "the pipeline's JSON config file, as the aggregate function runs it (default $PIPELINE_CONFIG), or a directory of pipeline files (every aggregation in it; join and CEP files are left out); give it once for each pipeline sharing the views table (a newly added one included, for rebuild): rebuild's new version holds the windows of those given, and rollback and use-version catch the version up with each", func(v string) error {
			files, err := aggregationFiles(v)
			if err != nil {
				return err
			}
			pipelineFiles = append(pipelineFiles, files...)
			return nil
		})
		fs.Func("leave-out", "a pipeline whose windows the current views table holds that no longer runs (its file removed): the version is made, or caught up, without it, and its windows are not in it; once for each (every pipeline the table holds must be given with -pipeline or named here)", func(v string) error {
			if v == "" {
				return errors.New("want a pipeline's name")
			}
			leaveOut = append(leaveOut, v)
			return nil
		})
		handover = fs.Duration("handover", max(time.Minute, refresh), fmt.Sprintf("how long to keep following after the swap: from the functions' refresh interval (%s: $VIEWS_REFRESH_SECONDS, else the stack's 30s) to %s", refresh, maxHandover))
		allowEmpty = fs.Bool("allow-empty", false, "swap even when the version holds no items while the current one holds some")
		dryRun = fs.Bool("dry-run", false, "check and print what would be done, change nothing")
	}
	switch c.name {
	case "rebuild":
		c.synopsis = "replay rebuild: replay the stream from a time into a new version of the views, then point the readers at it"
		stream(true)
		from = fs.String("from", "", "where to replay from: an RFC 3339 time (2026-11-29T10:00:00Z) or a duration ago (2h); not in the future, not older than the stream's retention unless -archive-bucket")
		archiveBucket = fs.String("archive-bucket", env(envArchiveBucket), "the S3 bucket the stack archives the events stream to (the ArchiveBucketName output; default $"+envArchiveBucket+"): a -from older than the stream's retention is read from it")
		archiveUntil = fs.String("archive-until", "", "the seam: records that arrived before it come from the archive, the rest from the stream; an RFC 3339 time or a duration ago (default: an hour inside the stream's retention, when -from is older than it)")
		toTable = fs.String("to-table", "", "the new version's name, <views>-vN (default: the next free N)")
		outStream = fs.String("output-stream", "", "also emit final results and corrections to this stream (default: none; never the events stream)")
		catchUp()
	case "use-version", "rollback":
		if c.name == "use-version" {
			c.synopsis = "replay use-version: catch a version up from where it got to (read from its items' fences: one full read of the table), then point the readers at it"
			table = fs.String("table", "", "the version to use: a table replay rebuild created for this parameter, or one the parameter named before (replay versions lists them)")
		} else {
			c.synopsis = "replay rollback: point the readers back at the table the parameter named before the current one, caught up first from where it got to (one full read of the table); rolling back twice returns"
		}
		stream(true)
		margin = fs.Duration("margin", time.Minute, fmt.Sprintf("start each shard this long before the last record whose batch the version finished (records already in it are skipped): from 1s to %s", maxMargin))
		catchUp()
	case "versions":
		c.synopsis = "replay versions: list the versions of the views with their item counts, the position each reached on every shard, and which is current (reads every item of each)"
		stream(false)
	case "current":
		c.synopsis = "replay current: print the views table the parameter names"
	case "delete-version":
		c.synopsis = "replay delete-version: delete a version replay rebuild created (never the current one, never another table); without -yes it only checks"
		table = fs.String("table", "", "the version to delete")
		yes = fs.Bool("yes", false, "delete it (without -yes: check and print what would be deleted)")
	default:
		fmt.Fprintf(stderr, "replay: unknown command %s\n%s\n", strictjson.QuoteCut(c.name, cli.MaxEcho), commands)
		return cli.ExitUsage
	}
	if err := cli.Parse(fs, args[1:], stdout, c.synopsis+"\n\n"+commands, footer); errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	} else if err != nil {
		return c.fail(err)
	}

	// Every flag is checked before anything is read.
	errs := []error{cli.Required("parameter", *param, "the SSM parameter naming the current views table")}
	if *param != "" {
		errs = append(errs, cli.ParameterName.Check("parameter", *param))
	}
	if streamName != nil {
		if c.name != "versions" {
			errs = append(errs, cli.Required("stream", *streamName, "the events Kinesis stream"))
		}
		if *streamName != "" {
			errs = append(errs, cli.StreamName.Check("stream", *streamName))
		}
	}
	if table != nil {
		errs = append(errs, cli.Required("table", *table, "the views table version"))
		if *table != "" {
			errs = append(errs, cli.TableName.Check("table", *table))
		}
	}
	var start time.Time
	if from != nil {
		if err := cli.Required("from", *from, "an RFC 3339 time or a duration ago"); err != nil {
			errs = append(errs, err)
		} else if start, err = parseFrom(*from, now); err != nil {
			errs = append(errs, err)
		}
	}
	var seam time.Time
	if archiveBucket != nil && *archiveBucket != "" {
		errs = append(errs, checkBucket(*archiveBucket))
	}
	if archiveUntil != nil && *archiveUntil != "" {
		if *archiveBucket == "" {
			errs = append(errs, cli.Usagef("archive-until", "needs -archive-bucket, the archive to read before it"))
		} else if t, err := parseFrom(*archiveUntil, now); err != nil {
			errs = append(errs, cli.Usagef("archive-until", "%s", strings.TrimPrefix(err.Error(), "-from ")))
		} else {
			seam = t
		}
	}
	if toTable != nil && *toTable != "" {
		errs = append(errs, cli.TableName.Check("to-table", *toTable))
	}
	if outStream != nil && *outStream != "" {
		errs = append(errs, cli.StreamName.Check("output-stream", *outStream))
		if *outStream == *streamName {
			errs = append(errs, cli.Usagef("output-stream", "%s is the events stream -stream reads: results written there would be read back as events", *outStream))
		}
	}
	if handover != nil {
		if refreshErr != nil {
			errs = append(errs, &cli.UsageError{Msg: refreshErr.Error()})
		} else {
			errs = append(errs, cli.DurationIn("handover", *handover, refresh, maxHandover, "the live functions re-read the parameter every "+refresh.String()+", so a shorter handover can miss what they still write to the old version"))
		}
	}
	if margin != nil {
		errs = append(errs, cli.DurationIn("margin", *margin, time.Second, maxMargin, ""))
	}
	for _, err := range errs {
		if err != nil {
			return c.fail(err)
		}
	}
	var pcfgs []*pipeline.Config
	if pipelineFlag {
		files := pipelineFiles
		if len(files) == 0 {
			files = []string{""} // PIPELINE_CONFIG
		}
		names := map[string]string{}
		for _, f := range files {
			pcfg, err := loadPipeline(f, lookup)
			if err != nil {
				return c.fail(err)
			}
			if other, ok := names[pcfg.Name]; ok {
				return c.fail(cli.Usagef("pipeline", "%s and %s both declare pipeline %q", other, f, pcfg.Name))
			}
			names[pcfg.Name] = f
			if slices.Contains(leaveOut, pcfg.Name) {
				return c.fail(cli.Usagef("leave-out", "%s is also given with -pipeline (%s): give it one way", pcfg.Name, f))
			}
			pcfgs = append(pcfgs, pcfg)
		}
		endpoint, _ := lookup("AWS_ENDPOINT_URL")
		tmpl := localdeploy.RunningTemplate(".", endpoint, localdeploy.DefaultStack)
		unread, err := checkDeployedAggregates(tmpl, files, pcfgs)
		if err != nil {
			return c.fail(err)
		}
		if unread != nil {
			fmt.Fprintf(stderr, "replay %s: note: the -pipeline files' aggregates are not checked against the deployed ones: %s\n", c.name, strictjson.Cut(strings.ReplaceAll(unread.Error(), "\n", "; "), 300))
		}
	}

	cfg, err := cli.LoadAWS(ctx)
	if err != nil {
		return c.fail(err)
	}
	db := dynamodb.NewFromConfig(cfg)
	kin := kinesis.NewFromConfig(cfg)
	reg := replay.NewRegistry(ssm.NewFromConfig(cfg), *param)
	r := replay.New(kin, db, reg)

	switch c.name {
	case "current":
		t, v, err := reg.Current(ctx)
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(stdout, "%s (parameter %s version %d)\n", t, *param, v)
		return cli.ExitOK
	case "versions":
		vs, err := r.Versions(ctx, replay.VersionsOptions{Stream: *streamName, Progress: stderr, InPlace: isTerminal(stderr)})
		if err != nil {
			return c.fail(err)
		}
		printVersions(stdout, *param, vs)
		return cli.ExitOK
	case "delete-version":
		plan, err := replay.DeleteVersion(ctx, db, reg, *table, *yes)
		if err != nil {
			return c.fail(err)
		}
		for _, l := range plan.Checked {
			fmt.Fprintln(stderr, "checked: "+l)
		}
		if plan.Deleted {
			fmt.Fprintf(stdout, "deleted table %s\n", *table)
		} else {
			fmt.Fprintf(stdout, "dry run: nothing deleted; to delete %s: replay delete-version -parameter %s -table %s -yes\n", *table, *param, *table)
		}
		return cli.ExitOK
	}

	var out aggregate.RecordPutter
	outName := ""
	if outStream != nil && *outStream != "" {
		out, outName = kin, *outStream
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// A version caught up again has its shards' carries written out first
	// (replay.CarrySpiller): the aggregate processor is one, and so is a
	// Fanout of them.
	var _ replay.CarrySpiller = (*aggregate.Processor)(nil)
	handler := func(table string, aside *setaside.Sink) (replay.BatchHandler, error) {
		var hs replay.Fanout
		for _, pcfg := range pcfgs {
			views := state.NewViews(db, table, pcfg.Aggregates, aggregate.ViewsOptions(pcfg)...)
			hs = append(hs, aggregate.New(pcfg, views, out, outName, aggregate.WithLogger(log),
				aggregate.WithDedupe(aggregate.NewLedger(db, table, pcfg)),
				aggregate.WithHandover(db, aggregate.FixedViewsTable(table).Current), aggregate.WithSetAside(aside)))
		}
		if len(hs) == 1 {
			return hs[0], nil
		}
		return hs, nil
	}
	opts := replay.Options{Stream: *streamName, Handover: *handover, Progress: stderr, InPlace: isTerminal(stderr),
		DryRun: *dryRun, AllowEmpty: *allowEmpty, Now: func() time.Time { return now }}
	for _, pcfg := range pcfgs {
		opts.Pipelines = append(opts.Pipelines, pcfg.Name)
	}
	if archiveBucket != nil && *archiveBucket != "" {
		opts.Archive, opts.ArchiveUntil = archive.NewReader(archive.NewS3Client(cfg), *archiveBucket), seam
	}
	// A rebuild writes, and a rollback or use-version catches up, only the
	// pipelines given: every pipeline the views table holds must be one.
	if err := checkSharing(ctx, db, reg, pipelineFiles, pcfgs, leaveOut); err != nil {
		return c.fail(err)
	}
	if c.name == "rebuild" {
		for _, pcfg := range pcfgs {
			if kept := now.Add(-pcfg.Retention); start.Before(kept) {
				fmt.Fprintf(stderr, "note: pipeline %s keeps a window %s after it ends (its retention): the windows this rebuild recomputes that ended before %s are written with a time to live already past, and DynamoDB deletes them within days; give the pipeline file a longer \"retention\" to keep them readable\n",
					pcfg.Name, pcfg.Retention, kept.UTC().Format(time.RFC3339))
			}
		}
	}
	var res *replay.Result
	switch c.name {
	case "rebuild":
		opts.From, opts.Target = start, *toTable
		res, err = r.Run(ctx, opts, handler)
	case "use-version":
		opts.Target, opts.Margin = *table, *margin
		res, err = r.UseVersion(ctx, opts, handler)
	case "rollback":
		opts.Margin = *margin
		res, err = r.Rollback(ctx, opts, handler)
	}
	if err != nil {
		if res != nil && res.Target != "" && !res.Swapped && !*dryRun && c.name == "rebuild" {
			fmt.Fprintf(stderr, "replay rebuild: %s was not made current; %s still is (%s is left in place: replay use-version can still use it, replay delete-version removes it)\n", res.Target, res.Current, res.Target)
		}
		return c.fail(err)
	}
	if !*dryRun {
		from := ""
		if !res.Seam.IsZero() {
			from = fmt.Sprintf(" (%d from the archive, before %s; %d from the stream)", res.Archived, res.Seam.UTC().Format(time.RFC3339), res.Read-res.Archived)
		}
		fmt.Fprintf(stdout, "%s is current (was %s): read %d%s, applied %d, skipped %d; caught up after %s; items: %s %d, %s %d\n",
			res.Target, res.Current, res.Read, from, res.Applied, res.Skipped, res.CaughtUp.Round(time.Millisecond), res.Current, res.CurrentItems, res.Target, res.TargetItems)
	}
	return cli.ExitOK
}

// checkSharing refuses a rebuild (or a rollback or use-version, which
// catch a version up) that leaves out a pipeline whose windows the
// current views table holds (its watermark items), unless -leave-out
// names it: the version made current would hold, or be caught up with,
// only the pipelines given, and the others' readers would miss their
// windows. What the table holds decides, read in one scan of it, not
// which files sit beside the files given: those are read only to name
// each left-out pipeline's file, and one that does not load is named.
func checkSharing(ctx context.Context, db *dynamodb.Client, reg *replay.Registry, files []string, given []*pipeline.Config, leaveOut []string) error {
	table, _, err := reg.Current(ctx)
	if err != nil {
		return err
	}
	held, err := state.PipelinesHeld(ctx, db, table)
	if err != nil {
		return err
	}
	var missing []string
	for _, p := range held {
		if !slices.ContainsFunc(given, func(c *pipeline.Config) bool { return c.Name == p }) && !slices.Contains(leaveOut, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var dirs []string
	for _, f := range files {
		if d := filepath.Dir(f); f != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	fileOf := map[string]string{}
	var unread []string
	for _, dir := range dirs {
		fs, err := pipeline.LoadDir(dir)
		if err != nil {
			unread = append(unread, strings.ReplaceAll(err.Error(), "\n", "; "))
			continue
		}
		for _, f := range pipeline.OfKind(fs, pipeline.KindAggregate) {
			fileOf[f.Name] = f.Path
		}
	}
	named := make([]string, len(missing))
	found := len(dirs) == 1
	for i, p := range missing {
		named[i] = p
		if f, ok := fileOf[p]; ok {
			named[i] += " (" + f + ")"
		} else {
			found = false
		}
	}
	// The directory is offered only when it holds every file left out.
	each := "with the file its aggregate function runs"
	if found {
		each = fmt.Sprintf("(-pipeline %s/ takes every file of the directory)", dirs[0])
	}
	msg := fmt.Sprintf("leaves out %s, whose windows the current views table %s holds: the version made current would hold (or be caught up with) only the pipelines given, and their readers would miss the others' windows. Give -pipeline once for each %s, or -leave-out <name> for a pipeline that no longer runs (its windows are then left out on purpose)",
		strings.Join(named, ", "), table, each)
	if len(unread) > 0 {
		msg += fmt.Sprintf("; the files beside the -pipeline file were read for theirs, and one does not load (%s)", strings.Join(unread, "; "))
	}
	return cli.Usagef("pipeline", "%s; nothing was replayed", msg)
}

// checkDeployedAggregates refuses, as a usage error, a pipeline given
// (pcfgs, read from files; "" is $PIPELINE_CONFIG) whose dedupe ledger
// layout (dedupeLedger) differs from that of the pipeline of its name the
// template at tmpl deploys — the live function would not find the ids the
// replay accepted — or whose window state differs: its aggregates, or its
// distinct precision. The live aggregate
// function and ticker run the deployed file and cannot merge the states a
// version made from the changed one holds ("states have different
// aggregates", or HyperLogLog's precisions), so once the readers moved to
// it they would fail every batch that meets such a window, and the ticker
// every few seconds, until a rollback. Quantiles are not compared: which
// ones are reported does not change the sketch a state keeps. A template
// that cannot be read is unread, and nothing is refused: the caller says
// so and goes on.
func checkDeployedAggregates(tmpl string, files []string, pcfgs []*pipeline.Config) (unread, err error) {
	d, err := localdeploy.Plan(tmpl, localdeploy.DefaultStack)
	if u := (*cli.UsageError)(nil); errors.As(err, &u) {
		return errors.New(u.Msg), nil // replay has no -template to name
	} else if err != nil {
		return err, nil
	}
	deployed, unread := localdeploy.Pipelines(tmpl, d)
	for i, given := range pcfgs {
		j := slices.IndexFunc(deployed, func(p localdeploy.Pipeline) bool { return p.Config.Name == given.Name })
		if j < 0 {
			continue // a pipeline new to the template: its windows are new items
		}
		file := "$" + pipeline.EnvVar
		if files[i] != "" {
			file = files[i]
		}
		if live := deployed[j].Config; given.DedupeHorizon > 0 && live.DedupeHorizon > 0 && given.DedupeLedger != live.DedupeLedger {
			return unread, cli.Usagef("pipeline", "%s: pipeline %s keeps its dedupe ids by %s (dedupeLedger %q), but the %s the template deploys (%s) keeps them by %s (%q): after the handover the live function would look for the ids the replay accepted in the other layout, and copies of replayed events would count again. Give the file the deployed dedupeLedger; nothing was replayed",
				file, given.Name, given.DedupeLedger, given.DedupeLedger, given.Name, tmpl, live.DedupeLedger, live.DedupeLedger)
		}
		was := deployed[j].Config.Aggregates
		if stateShape(given.Aggregates) == stateShape(was) {
			continue
		}
		return unread, cli.Usagef("pipeline", "%s: pipeline %s has %s, but the %s the template deploys (%s) has %s: the live aggregate function cannot merge the window states a version made from this file holds (\"states have different aggregates\"), and would fail its batches, and the ticker every few seconds, until a rollback. Give the changed file a new \"name\" (docs/changes.md, \"Changing a pipeline's aggregates\"), or give the file the template deploys; nothing was replayed",
			file, given.Name, stateShape(given.Aggregates), given.Name, tmpl, stateShape(was))
	}
	return unread, nil
}

// stateShape says what decides whether two window states merge: the
// aggregates, and the distinct precision when distinct is on.
func stateShape(s *agg.Spec) string {
	shape := "aggregates " + strings.Join(s.Aggregates.Names(), ", ")
	if s.Aggregates.Has(agg.Distinct) {
		shape += fmt.Sprintf(" (distinct precision %d)", s.DistinctPrecision)
	}
	return shape
}

// envArchiveBucket names the archive bucket, as the archive function's
// environment does.
const envArchiveBucket = "ARCHIVE_BUCKET_NAME"

var bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// checkBucket checks an S3 bucket name.
func checkBucket(name string) error {
	if !bucketRE.MatchString(name) || strings.Contains(name, "..") {
		return cli.Usagef("archive-bucket", "%s: an S3 bucket name is 3-63 lower-case letters, digits, '.' and '-', beginning and ending with a letter or digit", strictjson.QuoteCut(name, cli.MaxEcho))
	}
	return nil
}

// parseFrom reads an RFC 3339 time or a positive duration before now; a
// time in the future is refused.
func parseFrom(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		if t.After(now) {
			return time.Time{}, cli.Usagef("from", "%s is in the future (it is %s now): there is nothing to replay from there yet", strictjson.Cut(s, cli.MaxEcho), now.UTC().Format(time.RFC3339))
		}
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, cli.Usagef("from", "%s is neither an RFC 3339 time (2026-11-29T10:00:00Z) nor a duration ago (2h)", strictjson.QuoteCut(s, cli.MaxEcho))
	}
	if d <= 0 {
		return time.Time{}, cli.Usagef("from", "%s: a duration ago must be positive (2h means two hours ago)", strictjson.Cut(s, cli.MaxEcho))
	}
	return now.Add(-d), nil
}

// aggregationFiles is what one -pipeline value names: the file itself, or,
// for a directory such as pipelines/, each windowed aggregation file in it.
func aggregationFiles(v string) ([]string, error) {
	if st, err := os.Stat(v); err != nil || !st.IsDir() {
		return []string{v}, nil // a file: read, and its errors named, with the other flags
	}
	files, err := pipeline.LoadDir(v)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range files {
		if f.Kind == pipeline.KindAggregate {
			paths = append(paths, f.Path)
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s holds no aggregation pipeline file", v)
	}
	return paths, nil
}

func loadPipeline(file string, lookup func(string) (string, bool)) (*pipeline.Config, error) {
	var cfg *pipeline.Config
	if file != "" {
		b, err := cli.ReadFile("pipeline", file, pipeline.MaxFileBytes, "a pipeline file is a small JSON object")
		if err != nil {
			return nil, err
		}
		if cfg, err = pipeline.Parse(b); err != nil {
			return nil, cli.Usagef("pipeline", "%s: %v", file, err)
		}
	} else {
		var err error
		if cfg, err = pipeline.FromEnv(lookup); err != nil {
			return nil, cli.Usagef("pipeline", "not given, and %v", err)
		}
	}
	if err := aggregate.CheckSupported(cfg); err != nil {
		return nil, cli.Usagef("pipeline", "%v", err)
	}
	return cfg, nil
}

// maxPositionsShown bounds the shards versions lists for a version: a
// stream may have thousands; the rest are counted, with the one whose
// last record arrived earliest (the version's furthest behind there).
const maxPositionsShown = 32

// furthestBehind names, among positions, the one whose record arrived
// earliest, and how many are no longer in the stream.
func furthestBehind(ps []replay.Position) string {
	var early *replay.Position
	gone := 0
	for i := range ps {
		switch p := &ps[i]; {
		case p.Gone:
			gone++
		case !p.Arrival.IsZero() && (early == nil || p.Arrival.Before(early.Arrival)):
			early = p
		}
	}
	var about []string
	if early != nil {
		about = append(about, "the furthest behind "+early.Shard+" (its last record arrived "+fmtTime(early.Arrival)+")")
	}
	if gone > 0 {
		about = append(about, fmt.Sprintf("%d no longer in the stream", gone))
	}
	if len(about) == 0 {
		return ""
	}
	return ": " + strings.Join(about, "; ")
}

func printVersions(w io.Writer, param string, vs []replay.VersionInfo) {
	fmt.Fprintf(w, "versions of the views parameter %s names:\n", param)
	for _, v := range vs {
		mark := " "
		if v.Current {
			mark = "*"
		}
		var about []string
		switch {
		case v.Rebuilt:
			about = append(about, "created by replay rebuild from "+fmtTime(v.From))
		default:
			about = append(about, "not created by rebuild (the stack's own table)")
		}
		if !v.CaughtUpAt.IsZero() {
			about = append(about, "caught up "+fmtTime(v.CaughtUpAt))
		}
		for _, s := range v.Spans {
			if s.Until.IsZero() {
				about = append(about, "current since "+fmtTime(s.From))
			} else {
				about = append(about, "current "+fmtTime(s.From)+" to "+fmtTime(s.Until))
			}
		}
		if len(v.Spans) == 0 {
			about = append(about, "never current")
		}
		held := fmt.Sprintf("%d items", v.Items)
		if v.Deleted {
			held = "deleted"
		}
		current := ""
		if v.Current {
			current = " (current)"
		}
		fmt.Fprintf(w, "%s %s%s: %s; %s\n", mark, v.Table, current, held, strings.Join(about, "; "))
		shown := v.Positions
		if len(shown) > maxPositionsShown {
			shown = shown[:maxPositionsShown]
		}
		for _, p := range shown {
			at := ""
			switch {
			case p.Gone:
				at = " (no longer in the stream)"
			case !p.Arrival.IsZero():
				at = " (arrived " + fmtTime(p.Arrival) + ")"
			}
			fmt.Fprintf(w, "    reached %s sequence number %s%s\n", p.Shard, p.Sequence, at)
		}
		if rest := v.Positions[len(shown):]; len(rest) > 0 {
			fmt.Fprintf(w, "    and %d more shards%s\n", len(rest), furthestBehind(rest))
		}
		if !v.Deleted && len(v.Positions) == 0 {
			fmt.Fprintln(w, "    reached no record yet")
		}
		if v.Samples {
			fmt.Fprintf(w, "    also holds console samples make invoke sent (shard %s, which no stream has): not a position\n", state.SampleShard)
		}
	}
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return t.UTC().Format(time.RFC3339)
}

// isTerminal reports whether w is a terminal, where progress is rewritten
// in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
