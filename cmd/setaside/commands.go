package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/pkg/putback"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// commands runs the three commands on the parsed options.
type commands struct {
	o              options
	makePrefix     string // TRIBUTARY_STANDIN_ADDR=… for a stand-in not on the default address
	db             *dynamodb.Client
	putter         *putback.Putter
	stdout, stderr io.Writer
}

// list prints the newest items the filter selects.
func (c *commands) list(ctx context.Context) error {
	l, err := putback.List(ctx, c.db, c.o.table, c.o.filter, c.o.limit, c.progress())
	if err != nil {
		return err
	}
	enc := json.NewEncoder(c.stdout)
	for i := range l.Items {
		if c.o.asJSON {
			if err := enc.Encode(jsonItem(&l.Items[i])); err != nil {
				return err
			}
			continue
		}
		printItem(c.stdout, &l.Items[i])
	}
	fmt.Fprintf(c.stderr, "setaside: %d record(s) listed, newest first, of %d matching (%d items of %s read)%s\n",
		len(l.Items), l.Matched, l.Scanned, c.o.table, c.olderLeftOut(l))
	c.noSuchFunction(l)
	if len(l.Items) == 0 || c.o.asJSON {
		return nil
	}
	fmt.Fprintf(c.stderr, "show one with its data: %s\n", c.hint("show", &l.Items[0]))
	for i := range l.Items {
		it := &l.Items[i]
		if it.PutBackAt != "" || putback.Hopeless(it) != "" {
			continue
		}
		if !putback.DataAtFault(it) {
			fmt.Fprintf(c.stderr, "put one back once its cause is fixed: %s\n", c.hint("putback", it))
			return nil
		}
		show, put := c.correction(it, "record.json")
		fmt.Fprintf(c.stderr, "correct one and put it back: %s > record.json, edit record.json, then: %s\n", show, put)
		return nil
	}
	fmt.Fprintln(c.stderr, "none of these can be put back: each was put back before, or its category or source says why (docs/set-aside.md)")
	return nil
}

// olderLeftOut is what the listing's summary adds when -since left out
// records the other filters select ("; 4 older record(s) left out by
// -since 1h (set aside before …)"), "" when it left none out: without it
// a listing of few or none read as all there is. The scan reads those
// records anyway, so counting them costs nothing more.
func (c *commands) olderLeftOut(l putback.Listing) string {
	if l.Older == 0 {
		return ""
	}
	since := strictjson.Cut(c.o.since, cli.MaxEcho) // a duration may be written long: 1s1s1s…
	by := "-since " + since
	if c.o.tmpl != "" {
		by = "SINCE=" + since
	}
	return fmt.Sprintf("; %d older record(s) left out by %s (set aside before %s)", l.Older, by, c.o.filter.Since.UTC().Format(time.RFC3339))
}

// noSuchFunction says, when -function matched nothing, which functions
// have records: the name a user knows (aggregate-pageviews) is not always
// the function's (Tributary-PipelinesPageviewsAggregateFunction…).
func (c *commands) noSuchFunction(l putback.Listing) {
	if c.o.filter.Function == "" || l.Matched > 0 {
		return
	}
	names := make([]string, 0, len(l.Functions))
	for n := range l.Functions {
		names = append(names, n)
	}
	if len(names) == 0 {
		return
	}
	sort.Slice(names, func(i, j int) bool {
		return l.Functions[names[i]] > l.Functions[names[j]] || l.Functions[names[i]] == l.Functions[names[j]] && names[i] < names[j]
	})
	const most = 10
	var parts []string
	for i, n := range names {
		if i == most {
			parts = append(parts, fmt.Sprintf("… and %d more", len(names)-most))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", orNone(n), l.Functions[n]))
	}
	fmt.Fprintf(c.stderr, "setaside: no record set aside by a function named %s (its name, or words of it: aggregate pageviews); functions with records: %s\n",
		strictjson.QuoteCut(c.o.filter.Function, cli.MaxEcho), strings.Join(parts, ", "))
}

func orNone(function string) string {
	if function == "" {
		return "(none named: records Lambda gave up on)"
	}
	return function
}

// correction is the pair of commands that save it's data for editing and
// put the edited file back.
func (c *commands) correction(it *setaside.Item, file string) (show, put string) {
	if c.o.tmpl != "" {
		return c.hint("show", it) + " DATA_ONLY=1", c.hint("putback", it) + " DATA=" + file
	}
	return c.hint("show", it) + " -data-only", c.hint("putback", it) + " -data " + file
}

// listCommand is how the user lists the records.
func (c *commands) listCommand() string {
	if c.o.tmpl != "" {
		return c.makePrefix + "make setaside"
	}
	return "go run ./cmd/setaside list -table " + c.o.table
}

// refusalHint is what changes a refusal, spelt as the user runs the
// command: make's variables or the command's flags.
func (c *commands) refusalHint(r *putback.Refusal) string {
	local := c.o.tmpl != ""
	if c.o.sequence == "" && (r.Flag == putback.FlagData || r.Flag == putback.FlagUnchanged) {
		// Several records: each is corrected on its own.
		if local {
			return "correct it on its own (" + c.makePrefix + "make setaside-show SOURCE=… SEQUENCE=… DATA_ONLY=1 > record.json, edit, " + c.makePrefix + "make putback SOURCE=… SEQUENCE=… DATA=record.json), or, when the cause was elsewhere (the pipeline file or a limit changed), UNCHANGED=1 puts such records back as they are"
		}
		return "correct it on its own (show -data-only > record.json, edit, putback -source … -sequence … -data record.json), or, when the cause was elsewhere (the pipeline file or a limit changed), -unchanged puts such records back as they are"
	}
	if c.o.dataFile != "" && r.Flag == putback.FlagData {
		// The file itself would be set aside again (a field missing or
		// malformed): only correcting it helps; UNCHANGED=1 skips just
		// the check of the field at fault.
		return "correct " + c.o.dataFile + " and run it again"
	}
	if c.o.dataFile != "" && r.Flag == putback.FlagUnchanged {
		if local {
			return "correct " + c.o.dataFile + " and run it again (or UNCHANGED=1 when the cause was elsewhere: the pipeline file or a limit changed)"
		}
		return "correct " + c.o.dataFile + " and run it again (or -unchanged when the cause was elsewhere: the pipeline file or a limit changed)"
	}
	switch r.Flag {
	case putback.FlagAgain:
		if local {
			return "AGAIN=1 puts it back once more"
		}
		return "-again puts it back once more"
	case putback.FlagData:
		if local {
			return "correct it: " + c.makePrefix + "make setaside-show SOURCE=… SEQUENCE=… DATA_ONLY=1 > record.json, edit record.json, then DATA=record.json"
		}
		return "correct it: show -data-only > record.json, edit record.json, then -data record.json"
	case putback.FlagUnchanged:
		if local {
			return "correct it (DATA=record.json), or, when its cause was elsewhere (the pipeline file or a limit changed), UNCHANGED=1 puts it back as it is"
		}
		return "correct it (-data record.json), or, when its cause was elsewhere (the pipeline file or a limit changed), -unchanged puts it back as it is"
	case putback.FlagPastHorizon:
		if local {
			return "HORIZON=<their dedupeHorizon> when the consumers keep ids longer; PAST_HORIZON=1 puts it back anyway"
		}
		return "-horizon <their dedupeHorizon> when the consumers keep ids longer; -past-horizon puts it back anyway"
	}
	return ""
}

// progress prints how far a scan got, from its second page on (a table of
// one page is read at once).
func (c *commands) progress() func(scanned, matched int) {
	pages := 0
	return func(scanned, matched int) {
		if pages++; pages > 1 {
			fmt.Fprintf(c.stderr, "setaside: %d items read, %d matching so far\n", scanned, matched)
		}
	}
}

// hint is the command line that shows or puts back it: make's form for
// the local deployment, go run's otherwise.
// A put-back of a record several functions set aside names the function
// whose set-aside it stands for (it.Function), so that it is judged by
// that one's category and rule.
func (c *commands) hint(command string, it *setaside.Item) string {
	function := ""
	if command == "putback" && len(it.SetAsides()) > 1 {
		function = it.Function
	}
	if c.o.tmpl != "" {
		target := map[string]string{"show": "setaside-show", "putback": "putback"}[command]
		h := fmt.Sprintf("%smake %s SOURCE='%s' SEQUENCE=%s", c.makePrefix, target, it.Source, it.SequenceNumber)
		if function != "" {
			h += fmt.Sprintf(" FUNCTION='%s'", function)
		}
		return h
	}
	h := fmt.Sprintf("go run ./cmd/setaside %s -table %s -source '%s' -sequence %s", command, c.o.table, it.Source, it.SequenceNumber)
	if function != "" {
		h += fmt.Sprintf(" -function '%s'", function)
	}
	return h
}

// printItem prints an item's attributes, a few lines each. Its field and
// reason may repeat what a producer chose (a key of its record; an item
// written before the functions named such a key as a quoted path step
// holds it raw), so they are shown as cli.Shown shows a value, as
// printData shows the record's data: never a character a terminal acts on.
func printItem(w io.Writer, it *setaside.Item) {
	what := it.Category
	if what == "" {
		what = it.Kind
	}
	head := []string{putback.When(it).UTC().Format("2006-01-02T15:04:05.000Z"), cli.Shown(what)}
	if it.Field != "" {
		head = append(head, cli.Shown(it.Field))
	}
	if it.Function != "" {
		head = append(head, "by "+it.Function)
	}
	fmt.Fprintln(w, strings.Join(head, "  "))
	fmt.Fprintf(w, "  source    %s\n", it.Source)
	line := "  sequence  " + it.SequenceNumber
	if it.PartitionKey != "" {
		line += "  partition key " + strictjson.QuoteCut(it.PartitionKey, 64)
	}
	if it.DataBytes > 0 {
		line += fmt.Sprintf("  %d bytes", it.DataBytes)
	}
	if it.DataTruncated {
		line += " (only their start kept)"
	}
	fmt.Fprintln(w, line)
	fmt.Fprintf(w, "  reason    %s\n", oneLine(it.Reason, 300))
	if it.Rule != nil {
		fmt.Fprintf(w, "  rule      %s must hold %s\n", orWhole(it.Field), it.Rule)
	}
	if it.PutBackAt != "" {
		fmt.Fprintf(w, "  put back  %s as %s\n", it.PutBackAt, it.PutBackSequence)
	}
}

// orWhole is the field a rule holds (as cli.Shown shows it), or the whole
// record.
func orWhole(field string) string {
	if field == "" {
		return "the record"
	}
	return cli.Shown(field)
}

// oneLine is s cut to n bytes with its line breaks shown as spaces, quoted
// (cli.Shown) when it still holds a character a terminal acts on.
func oneLine(s string, n int) string {
	return cli.Shown(strictjson.Cut(strings.Join(strings.Fields(s), " "), n))
}

// show prints one item and its data.
func (c *commands) show(ctx context.Context) error {
	it, err := putback.Load(ctx, c.db, c.o.table, c.o.source, c.o.sequence)
	if err != nil {
		return err
	}
	if it == nil {
		return fmt.Errorf("%s %s: %w (%s names the records it holds)", c.o.source, c.o.sequence, putback.ErrNotFound, c.listCommand())
	}
	if c.o.dataOnly {
		_, err := c.stdout.Write(it.Data)
		return err
	}
	views := it.SetAsides()
	printItem(c.stdout, &views[0])
	for i := 1; i < len(views); i++ {
		printAlso(c.stdout, &views[i])
	}
	if len(it.Redacted) > 0 {
		fmt.Fprintf(c.stdout, "  redacted  %s\n", strings.Join(it.Redacted, ", "))
	}
	fmt.Fprintf(c.stdout, "  data      %d bytes:\n", len(it.Data))
	printData(c.stdout, it.Data)
	show, put := c.correction(&views[0], "record.json")
	fmt.Fprintf(c.stderr, "to correct it: %s > record.json, edit record.json, then: %s\n", show, put)
	return nil
}

// printAlso prints another function's set-aside of a record printItem
// printed: when, its category, field and reason.
func printAlso(w io.Writer, v *setaside.Item) {
	head := []string{"  also by  " + orNone(v.Function), putback.When(v).UTC().Format("2006-01-02T15:04:05.000Z"), cli.Shown(v.Category)}
	if v.Field != "" {
		head = append(head, cli.Shown(v.Field))
	}
	fmt.Fprintln(w, strings.Join(head, "  "))
	fmt.Fprintf(w, "    reason  %s\n", oneLine(v.Reason, 300))
	if v.Rule != nil {
		fmt.Fprintf(w, "    rule    %s must hold %s\n", orWhole(v.Field), v.Rule)
	}
}

// printData prints data indented, at most maxShown bytes of it. Data that
// is not UTF-8 text, or holds a character a terminal would act on (an
// escape sequence a producer put in the record), is shown quoted (or in
// base64), as make tail shows it, never written as it is: -data-only
// writes the bytes themselves, for a file.
func printData(w io.Writer, data []byte) {
	shown := data
	if len(shown) > maxShown {
		shown = strictjson.TruncateUTF8(shown, maxShown)
	}
	if !utf8.Valid(shown) || cli.HasControl(shown) {
		fmt.Fprintf(w, "    (quoted) %s\n", cli.QuoteData(shown))
	} else {
		for _, l := range strings.Split(string(shown), "\n") {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	if len(shown) < len(data) {
		fmt.Fprintf(w, "    …(%d more bytes; -data-only prints them all)\n", len(data)-len(shown))
	}
}

// putBack puts back the one record named, or those the filter selects.
func (c *commands) putBack(ctx context.Context) error {
	if c.o.sequence != "" {
		var fixed []byte
		if c.o.dataFile != "" {
			var err error
			if fixed, err = cli.ReadFile("data", c.o.dataFile, putback.MaxRecordBytes, "a Kinesis record holds at most 1 MiB"); err != nil {
				return err
			}
		}
		functions, err := c.functionsOf(ctx)
		if err != nil {
			return err
		}
		ok, err := c.putOne(ctx, c.o.source, c.o.sequence, functions, fixed)
		if err == nil && !ok {
			err = fmt.Errorf("%w: nothing was put back", errRefused)
		}
		return err
	}
	l, err := putback.List(ctx, c.db, c.o.table, c.o.filter, c.o.limit, c.progress())
	if err != nil {
		return err
	}
	if l.Matched > len(l.Items) {
		fmt.Fprintf(c.stderr, "setaside: %d records match; the newest %d are taken (-n)\n", l.Matched, len(l.Items))
	}
	c.noSuchFunction(l)
	// A record several functions set aside is listed once for each: it
	// is put back once, judged as the functions -function selected set
	// it aside (as each of them did, without -function).
	type record struct{ source, sequence string }
	selected := map[record][]string{}
	var items []*setaside.Item
	for i := range l.Items {
		it := &l.Items[i]
		k := record{it.Source, it.SequenceNumber}
		if _, ok := selected[k]; !ok {
			items = append(items, it)
		}
		if c.o.filter.Function != "" {
			selected[k] = append(selected[k], it.Function)
		} else {
			selected[k] = nil
		}
	}
	// A record put back before is skipped, not refused: a run that
	// stopped goes on where it was.
	var put, skipped, refused int
	for i, it := range items {
		if it.PutBackAt != "" && !c.o.again {
			skipped++
			continue
		}
		ok, err := c.putOne(ctx, it.Source, it.SequenceNumber, selected[record{it.Source, it.SequenceNumber}], nil)
		if err != nil {
			fmt.Fprintf(c.stderr, "setaside: %d of %d put back before this error\n", put, len(l.Items))
			return err
		}
		if ok {
			put++
		} else {
			refused++
		}
		if n := i + 1; n%10 == 0 && n < len(items) {
			fmt.Fprintf(c.stderr, "setaside: %d/%d done (%d put back, %d refused)\n", n, len(items), put, refused)
		}
	}
	verb := "put back"
	if c.o.dryRun {
		verb = "would be put back"
	}
	again := "-again"
	if c.o.tmpl != "" {
		again = "AGAIN=1"
	}
	fmt.Fprintf(c.stderr, "setaside: %d %s, %d refused, %d skipped (put back before; %s puts them back once more), of %d selected\n",
		put, verb, refused, skipped, again, len(items))
	if refused > 0 {
		return fmt.Errorf("%w: %d record(s), each named above with why", errRefused, refused)
	}
	return nil
}

// functionsOf is, for putback -source -sequence -function, the names of
// the functions -function selects of those that set the record aside
// (the name given, when none: the refusal names those that did); nil
// without -function, or for a record that is not there (Prepare says so).
func (c *commands) functionsOf(ctx context.Context) ([]string, error) {
	if c.o.filter.Function == "" {
		return nil, nil
	}
	it, err := putback.Load(ctx, c.db, c.o.table, c.o.source, c.o.sequence)
	if err != nil || it == nil {
		return nil, err
	}
	var names []string
	for _, v := range it.SetAsides() {
		if c.o.filter.SelectsFunction(v.Function) {
			names = append(names, v.Function)
		}
	}
	if len(names) == 0 {
		names = []string{c.o.filter.Function}
	}
	return names, nil
}

// putOne puts back one record (or, -dry-run, says what would be put),
// judged as the functions named set it aside (every one that did, when
// none are named): false when it is refused, which it prints.
func (c *commands) putOne(ctx context.Context, source, sequence string, functions []string, fixed []byte) (bool, error) {
	plan, err := c.putter.PrepareFor(ctx, source, sequence, functions, fixed)
	var r *putback.Refusal
	if errors.As(err, &r) {
		msg := r.Reason
		if hint := c.refusalHint(r); hint != "" {
			msg += "; " + hint
		}
		fmt.Fprintf(c.stderr, "refused  %s %s: %s\n", source, sequence, msg)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	desc := fmt.Sprintf("%s %s → stream %s, partition key %s, %d bytes", source, sequence, plan.Stream,
		strictjson.QuoteCut(plan.PartitionKey, 64), len(plan.Data))
	if plan.Fixed {
		desc += ", the record in " + c.o.dataFile
	}
	if plan.ReceivedAt != "" {
		desc += ", receivedAt " + plan.ReceivedAt + " (its first arrival) added"
	}
	if c.o.dryRun {
		fmt.Fprintf(c.stdout, "would put back  %s:\n", desc)
		printData(c.stdout, plan.Data)
		return true, nil
	}
	res, err := c.putter.Put(ctx, plan)
	if err != nil {
		return false, err
	}
	fmt.Fprintf(c.stdout, "put back  %s: sequence number %s on %s\n", desc, res.Sequence, res.ShardID)
	if res.Unmarked {
		fmt.Fprintf(c.stdout, "  (its item expired before it could be marked put back)\n")
	}
	return true, nil
}
