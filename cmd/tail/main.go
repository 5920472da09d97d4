// Command tail prints the records of a stream of the stack — events,
// window results, joins, matches, enriched events, show events — from a
// position, filtered by partition key, event type or a JSON field, and
// with -f keeps following it, like tail -f.
//
//	go run ./cmd/tail -stream <name> [-from 10m|<RFC 3339>|latest|trim_horizon|<sequence number> [-shard id]] [-key k] [-type t] [-where data.page=/] [-f] [-json|-raw] [-n 100]
//	make tail STREAM=events KEY=user-1    (the running make local-up; STREAM=results, joins, matches, enriched, show-events)
//
// It does not disturb the stack's readers: it registers an enhanced
// fan-out consumer of its own for the session (2 MB/s a shard of its own)
// and deregisters it when it ends, on Ctrl-C too; a consumer a crashed run
// left is removed by the next run once its session's deadline (in its
// name) has passed. Where enhanced fan-out is not available (the local
// stand-in has no SubscribeToShard; no permission; the stream's 20
// consumers taken) it polls, at most one GetRecords call per shard a
// second, and says so in its first line on stderr. It never checkpoints
// and writes nothing but its own consumer's registration. Package
// pkg/tail does the work.
//
// Exit status: 0 done (Ctrl-C ends -f with 0), 1 error, 2 usage, 130
// interrupted.
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
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/internal/localdeploy"
	envelope "github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
	"github.com/tributary-dev/tributary/pkg/tail"
)

func main() {
	cli.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.LookupEnv, time.Now, os.Stdout, os.Stderr)
	})
}

const usage = `usage:
  tail -stream <stream> [-from 10m] [-shard id] [-key k] [-type t[,t]] [-where path=value]... [-f] [-json | -raw] [-n 100] [-max-bytes 65536] [-poll]
  tail -template infra/cdk.out/Tributary.template.json -stream events ...   (names from the local deployment: make tail STREAM=events)
Prints a stream's records from a position: a header (shard, sequence number, partition key, arrival,
size) and the data as indented JSON; -json one object a line (for jq), -raw the bytes. With -f it
keeps following until Ctrl-C.`

const footer = `Positions (-from): a duration ago (10m), an RFC 3339 time (2026-11-29T10:00:00Z), latest (only what
comes from now on), trim_horizon (the oldest record kept), or a sequence number (with -shard, unless
the stream has one shard). -where takes a JSON path (data.page, $.data.items[0].sku), = or !=, and a
value compared with the field's JSON value (strings as they are, numbers as numbers); several
-where must all hold.
Reading: through an enhanced fan-out consumer of its own (registered for the session, named
tributary-tail-<deadline>-<id>, deregistered at the end; ones left by a crashed run are removed by the
next run), else by polling at most one GetRecords call per shard per -interval (at least 1s).
Exit status: 0 done (Ctrl-C ends -f with 0), 1 error, 2 usage, 130 interrupted.
` + cli.RegionHelp

// Bounds of the flags.
const (
	defaultFrom     = "10m"
	defaultLimit    = 100
	minMaxBytes     = 64
	maxInterval     = time.Minute
	minSession      = time.Minute
	defaultStack    = "Tributary"
	maxStreamLength = 128
)

// multi is a flag given several times.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, " ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func run(ctx context.Context, args []string, lookup func(string) (string, bool), now func() time.Time, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	var (
		stream, from, shard, key, types, tmpl, stack string
		where                                        multi
		follow, asJSON, raw, poll                    bool
		limit, maxBytes                              int
		interval, session                            time.Duration
	)
	fs.StringVar(&stream, "stream", "", "the stream: its name; with -template also "+aliasHelp()+", or a label make local-up lists (StatusCodesResults)")
	fs.StringVar(&from, "from", defaultFrom, "where to start: a duration ago, an RFC 3339 time, latest, trim_horizon, or a sequence number")
	fs.StringVar(&shard, "shard", "", "read only this shard (required with -from <sequence number> on a stream of several shards)")
	fs.StringVar(&key, "key", "", "only records with this partition key")
	fs.StringVar(&types, "type", "", "only records whose top-level \"type\" is one of these (comma-separated: page_view,click; window results: final,correction,retraction)")
	fs.Var(&where, "where", "only records whose JSON field equals a value: path=value or path!=value (data.page=/home); repeat for several, all must hold")
	fs.BoolVar(&follow, "f", false, "keep following the stream until Ctrl-C")
	fs.BoolVar(&asJSON, "json", false, "one JSON object a line: shard, sequenceNumber, partitionKey, arrived, bytes, data (or dataBase64)")
	fs.BoolVar(&raw, "raw", false, "the records' bytes as they are, each followed by a newline (for a pipe or a file: newlines and control characters in a record are printed as they are)")
	fs.IntVar(&limit, "n", 0, fmt.Sprintf("stop after printing this many records, 1 to %d (default %d; with -f, no limit)", tail.MaxRecords, defaultLimit))
	fs.IntVar(&maxBytes, "max-bytes", tail.DefaultMaxBytes, fmt.Sprintf("print at most this many bytes of a record's data, %d to %d; longer records are cut, and say so", minMaxBytes, tail.MaxRecordBytes))
	fs.BoolVar(&poll, "poll", false, "poll with GetRecords instead of registering an enhanced fan-out consumer")
	fs.DurationVar(&interval, "interval", tail.MinPoll, fmt.Sprintf("when polling, the pause between two GetRecords calls on a shard, %s to %s", tail.MinPoll, maxInterval))
	fs.DurationVar(&session, "max-session", tail.DefaultMaxSession, fmt.Sprintf("with a consumer, stop after this long (its deadline, after which another run may remove it), %s to %s", minSession, tail.MaxSessionLimit))
	fs.StringVar(&tmpl, "template", "", "name streams as the local runner deploys this synthesized template (only with AWS_ENDPOINT_URL: the local stand-in)")
	fs.StringVar(&stack, "stack", defaultStack, "with -template: the prefix the local runner gave the names (make local-up prints it)")
	if err := cli.Parse(fs, args, stdout, usage, footer); errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	} else if err != nil {
		return fail(stderr, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	env := func(k string) string { v, _ := lookup(k); return v }

	// Every flag is checked before anything is read.
	o := tail.Options{Shard: shard, Follow: follow, PollOnly: poll, Poll: interval, MaxSession: session, Status: stderr, Now: now,
		Filter: tail.Filter{Key: key}}
	pos, err := tail.ParsePosition(from, now())
	if err != nil {
		return fail(stderr, cli.Usagef("from", "%v", err))
	}
	o.From = pos
	emptyType := 0 // the place of an empty type in a list that names some
	if types != "" {
		list := strings.Split(types, ",")
		for i, t := range list {
			if t = strings.TrimSpace(t); t != "" {
				o.Filter.Types = append(o.Filter.Types, t)
			} else if emptyType == 0 {
				emptyType = i + 1
			}
		}
		if len(o.Filter.Types) == 0 {
			emptyType = 0 // said as "names no type"
		}
		if emptyType > 0 {
			return fail(stderr, cli.Usagef("type", "%s: type %d of %d is empty; give the types comma-separated (page_view,click)",
				strictjson.QuoteCut(types, cli.MaxEcho), emptyType, len(list)))
		}
	}
	for _, w := range where {
		c, err := tail.ParseCondition(w)
		if err != nil {
			return fail(stderr, cli.Usagef("where", "%v", err))
		}
		o.Filter.Where = append(o.Filter.Where, c)
	}
	longType, unprintableType, badType := "", "", ""
	for _, t := range o.Filter.Types {
		if len(t) > envelope.MaxTypeLength {
			longType = t
		}
		if !utf8.ValidString(t) {
			badType = t
		}
		if _, found := envelope.FirstUnprintable(t); found {
			unprintableType = t
		}
	}
	switch {
	case len(key) > tail.MaxKeyBytes:
		err = cli.Usagef("key", "is %d bytes long; a partition key is at most 256 characters", len(key))
	case !utf8.ValidString(key):
		// Partition keys are Unicode strings: one typed in another
		// encoding would silently match nothing.
		err = cli.Usagef("key", "%s is not valid UTF-8: a partition key is Unicode text, so it would match nothing", strictjson.QuoteCut(key, 64))
	case len(o.Filter.Types) > tail.MaxTypes:
		err = cli.Usagef("type", "has %d types; at most %d", len(o.Filter.Types), tail.MaxTypes)
	case longType != "":
		err = cli.Usagef("type", "%s is %d bytes long; an event's type is at most %d", strictjson.QuoteCut(longType, 64), len(longType), envelope.MaxTypeLength)
	case badType != "":
		err = cli.Usagef("type", "%s is not valid UTF-8: an event's type is JSON text, so it would match nothing", strictjson.QuoteCut(badType, 64))
	case unprintableType != "":
		u, _ := envelope.FirstUnprintable(unprintableType)
		err = cli.Usagef("type", "%s holds %v: no event's type can (ingest refuses it), so it would match nothing", strictjson.QuoteCut(unprintableType, 64), u)
	case len(types) > 0 && len(o.Filter.Types) == 0:
		err = cli.Usagef("type", "%s names no type", strictjson.QuoteCut(types, cli.MaxEcho))
	case len(where) > tail.MaxConditions:
		err = cli.Usagef("where", "is given %d times; at most %d", len(where), tail.MaxConditions)
	case asJSON && raw:
		err = cli.Usagef("raw", "and -json are two formats: give one")
	case set["n"] && !follow:
		err = cli.IntIn("n", limit, 1, tail.MaxRecords, "")
	case set["n"]:
		err = cli.IntIn("n", limit, 0, tail.MaxRecords, "0: no limit")
	case set["shard"] && len(shard) > maxStreamLength:
		err = cli.Usagef("shard", "is %d bytes long; a shard id is at most %d", len(shard), maxStreamLength)
	}
	if err == nil {
		err = errors.Join(cli.IntIn("max-bytes", maxBytes, minMaxBytes, tail.MaxRecordBytes, ""),
			cli.DurationIn("interval", interval, tail.MinPoll, maxInterval, "Kinesis allows 5 GetRecords calls a second per shard, shared by every polling reader"),
			cli.DurationIn("max-session", session, minSession, tail.MaxSessionLimit, ""))
	}
	if err != nil {
		return fail(stderr, firstUsage(err))
	}
	if !set["n"] && !follow {
		limit = defaultLimit
	}
	o.Limit = limit
	if err := cli.Required("stream", stream, "the stream to print (make local-up lists the stack's streams)"); err != nil {
		return fail(stderr, err)
	}
	switch {
	case tmpl != "":
		if env("AWS_ENDPOINT_URL") == "" {
			return fail(stderr, cli.Usagef("template", "names streams as the local runner deploys them, but AWS_ENDPOINT_URL is not set; against AWS give -stream the name (the stack outputs EventsStreamName, WindowResultsStreamName, <join>JoinsStreamName and <detector>MatchesStreamName (a join or CEP file's outputs carry its name), EnrichedStreamName, EsStreamName)"))
		}
		st, err := templateStreams(tmpl, stack)
		if err == nil {
			stream, err = resolveStream(stream, st)
		}
		if err != nil {
			return fail(stderr, err)
		}
		if hint := st.resultsHint(stream); hint != "" {
			fmt.Fprintf(stderr, "tail: %s\n", hint)
		}
	case set["stack"]:
		return fail(stderr, cli.Usagef("stack", "is only read with -template"))
	}
	if err := cli.StreamName.Check("stream", stream); err != nil {
		return fail(stderr, err)
	}
	o.Stream = stream

	awsCfg, err := cli.LoadAWS(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	if tmpl != "" {
		if endpoint := env("AWS_ENDPOINT_URL"); !standin.Answers(ctx, endpoint) {
			return fail(stderr, fmt.Errorf("nothing answers at %s: start the topology with make local-up first (or set TRIBUTARY_STANDIN_ADDR to where it runs)", endpoint))
		}
	}
	p := &tail.Printer{W: stdout, Format: tail.Pretty, MaxBytes: maxBytes}
	switch {
	case asJSON:
		p.Format = tail.JSONLines
	case raw:
		p.Format = tail.Raw
	}
	kin := kinesis.NewFromConfig(awsCfg)
	sum, err := tail.Run(ctx, kin, o, p.Print)
	var fe *tail.FlagError
	if errors.As(err, &fe) {
		if fe.Flag == "stream" && tmpl != "" {
			// The stream the template names under -stack is not there:
			// most likely -stack is not the running stack's (make tail
			// STACK=nope said STREAM= "nope-Events…": no such stream).
			if names, lerr := localdeploy.StreamsOn(ctx, kin); lerr == nil {
				if err := localdeploy.CheckStack(stack, localdeploy.StacksAmong(tmpl, names, localdeploy.StreamNames)); err != nil {
					return fail(stderr, err)
				}
			}
		}
		msg := fe.Msg
		if fe.Flag == "stream" && tmpl == "" && isAlias(stream) {
			msg += fmt.Sprintf("; %s names a stream only with -template infra/cdk.out/Tributary.template.json (as make tail passes it), else give the stream's name", stream)
		}
		return fail(stderr, cli.Usagef(fe.Flag, "%s", msg))
	}
	end := fmt.Sprintf("tail: %d record(s) printed of %d read from %d shard(s)", sum.Printed, sum.Read, sum.Shards)
	if p.Truncated > 0 {
		end += fmt.Sprintf("; %d cut at -max-bytes %d", p.Truncated, maxBytes)
	}
	if o.Limit > 0 && sum.Printed >= o.Limit {
		end += fmt.Sprintf("; stopped at -n %d, its limit: more may follow (-n; N= with make tail)", o.Limit)
	}
	if err == nil && sum.Read == 0 && o.From.Type == ktypes.ShardIteratorTypeAtSequenceNumber {
		// Kinesis refuses a number that did not come from the shard; one
		// it takes with no record at or after it reads as nothing.
		on := "the stream's one shard"
		if shard != "" {
			on = "shard " + shard
		}
		end += fmt.Sprintf("; nothing is at or after sequence number %s on %s (a record's header gives one)", o.From.Sequence, on)
	}
	if sum.SessionEnded {
		end += fmt.Sprintf("; the session reached -max-session %s (run tail again to go on)", session)
	}
	fmt.Fprintln(stderr, end)
	if err != nil {
		return fail(stderr, err)
	}
	if ctx.Err() != nil && !follow {
		return fail(stderr, ctx.Err())
	}
	return cli.ExitOK
}

// firstUsage is the first *cli.UsageError joined in err (every check
// names its flag; one line is printed).
func firstUsage(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if e != nil {
				return e
			}
		}
	}
	return err
}

// fail prints err in one line and returns the exit status (cli.Fail).
func fail(stderr io.Writer, err error) int { return cli.Fail(stderr, "tail", err, "") }
