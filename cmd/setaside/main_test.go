package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

const tmpl = "testdata/local.template.json"

// result is one run of the command.
type result struct {
	code           int
	stdout, stderr string
}

// commandStack is a stand-in holding the quarantine table the template
// names and an events stream of one shard, with the AWS variables pointing
// at it: what a test drives the command against, as a user of make
// local-up would.
type commandStack struct {
	srv        *standin.Server
	db         *dynamodb.Client
	kin        *kinesis.Client
	env        map[string]string // the command's environment: a test may change it
	now        time.Time
	table, arn string // the quarantine table's name, the events stream's ARN
}

func newCommandStack(t *testing.T) *commandStack {
	t.Helper()
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	none := filepath.Join(t.TempDir(), "none")
	st := &commandStack{srv: srv, db: dynamodb.NewFromConfig(cfg), kin: kinesis.NewFromConfig(cfg),
		now: time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC),
		env: map[string]string{
			"AWS_ENDPOINT_URL": srv.Endpoint(), "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
			"AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "",
			"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none,
		}}
	for k, v := range st.env {
		t.Setenv(k, v)
	}
	var err error
	if st.table, err = templateTable(tmpl, defaultStack); err != nil {
		t.Fatal(err)
	}
	if err := setaside.CreateTable(ctx, st.db, st.table); err != nil {
		t.Fatal(err)
	}
	if _, err := st.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("events"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	d, err := st.kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("events")})
	if err != nil {
		t.Fatal(err)
	}
	st.arn = aws.ToString(d.StreamDescriptionSummary.StreamARN)
	return st
}

// cmd runs the command with the stack's environment and clock.
func (s *commandStack) cmd(args ...string) result {
	var stdout, stderr bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := s.env[k]; return v, ok }
	code := run(context.Background(), args, lookup, func() time.Time { return s.now }, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// TestRun drives the command as a user of make local-up would: list what
// was set aside, show one, put it back corrected (a dry run first), and
// meet the refusals, each with its exit status.
func TestRun(t *testing.T) {
	st := newCommandStack(t)
	srv, db, kin, env, now, table, arn := st.srv, st.db, st.kin, st.env, st.now, st.table, st.arn
	ctx, cmd := context.Background(), st.cmd
	const shard = "shardId-000000000000"
	source := arn + "/" + shard
	bad := `{"id":"evt-7","type":"page_view","key":"user-7","occurredAt":"2026-12-05T09:54:00Z","sentAt":"2026-12-05T09:54:01Z","data":{"ms":"slow"}}`
	sink := setaside.New(db, table, setaside.WithFunction("Tributary-AggregatePageviews"), setaside.WithClock(func() time.Time { return now.Add(-time.Minute) }))
	if err := sink.SetAside(ctx, []setaside.Record{
		{Source: arn, Shard: shard, Sequence: "49650001", PartitionKey: "user-7", ArrivedAt: now.Add(-5 * time.Minute), Data: []byte(bad),
			Field: "data.ms", Kind: setaside.KindInvalid, Reason: `"slow" is not a number`},
		{Source: arn, Shard: shard, Sequence: "49650002", PartitionKey: "user-8", ArrivedAt: now.Add(-4 * time.Minute), Data: []byte(bad),
			Field: "key", Kind: setaside.KindStateBudget, Reason: "the key's state is full"},
	}); err != nil {
		t.Fatal(err)
	}
	onStream := func() []kintypes.Record {
		t.Helper()
		it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("events"), ShardId: aws.String(shard),
			ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		out, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		return out.Records
	}

	// The stand-in is not on the default address: the commands offered
	// carry it, or, run as printed, they would ask 127.0.0.1:4566 (a trial
	// saw "nothing answers"; another run's stand-in there would be read).
	at := "TRIBUTARY_STANDIN_ADDR=" + strings.TrimPrefix(srv.Endpoint(), "http://") + " "
	r := cmd("list", "-template", tmpl)
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, `"slow" is not a number`) || !strings.Contains(r.stdout, "the key's state is full") ||
		!strings.Contains(r.stderr, "2 record(s) listed") || !strings.Contains(r.stderr, "correct one and put it back: "+at+"make setaside-show SOURCE='"+source+"' SEQUENCE=49650001 DATA_ONLY=1 > record.json") ||
		!strings.Contains(r.stderr, at+"make putback SOURCE='"+source+"' SEQUENCE=49650001 DATA=record.json") {
		t.Fatalf("list: %+v", r)
	}
	r = cmd("list", "-table", table, "-json", "-category", "invalid")
	var item map[string]any
	if r.code != cli.ExitOK || json.Unmarshal([]byte(r.stdout), &item) != nil || item["sequenceNumber"] != "49650001" || item["data"] != nil || item["field"] != "data.ms" {
		t.Fatalf("list -json -category invalid: %+v", r)
	}

	r = cmd("show", "-template", tmpl, "-source", source, "-sequence", "49650001")
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, `"ms":"slow"`) || !strings.Contains(r.stderr, "SEQUENCE=49650001 DATA_ONLY=1 > record.json") || !strings.Contains(r.stderr, "SEQUENCE=49650001 DATA=record.json") {
		t.Fatalf("show: %+v", r)
	}
	if r = cmd("show", "-template", tmpl, "-source", source, "-sequence", "49650001", "-data-only"); r.stdout != bad {
		t.Fatalf("show -data-only: %+v, want the data as kept", r)
	}
	if r = cmd("show", "-template", tmpl, "-source", source, "-sequence", "4965"); r.code != cli.ExitError || !strings.Contains(r.stderr, "not in the quarantine table") {
		t.Fatalf("show of a record not kept: %+v", r)
	}

	fixed := filepath.Join(t.TempDir(), "record.json")
	if err := os.WriteFile(fixed, []byte(strings.Replace(bad, `"slow"`, "120", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r = cmd("putback", "-template", tmpl, "-source", source, "-sequence", "49650001", "-data", fixed, "-dry-run")
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, "would put back") || !strings.Contains(r.stdout, `"receivedAt":"2026-12-05T09:55:00Z"`) || len(onStream()) != 0 {
		t.Fatalf("putback -dry-run: %+v, and the stream holds %d records", r, len(onStream()))
	}
	r = cmd("putback", "-template", tmpl, "-source", source, "-sequence", "49650001", "-data", fixed)
	recs := onStream()
	if r.code != cli.ExitOK || len(recs) != 1 || !strings.Contains(string(recs[0].Data), `"ms":120`) || !strings.Contains(r.stdout, "put back") {
		t.Fatalf("putback -data: %+v, stream %d records", r, len(recs))
	}
	if r = cmd("list", "-template", tmpl, "-category", "invalid"); !strings.Contains(r.stdout, "put back  ") {
		t.Errorf("list after the put-back does not say it was put back: %+v", r)
	}
	if r = cmd("putback", "-template", tmpl, "-source", source, "-sequence", "49650001", "-data", fixed); r.code != cli.ExitRefused || !strings.Contains(r.stderr, "AGAIN=1 puts it back once more") {
		t.Errorf("putback a second time: %+v", r)
	}
	if r = cmd("putback", "-template", tmpl, "-function", "Tributary-AggregatePageviews"); r.code != cli.ExitRefused ||
		!strings.Contains(r.stderr, "0 put back, 1 refused, 1 skipped (put back before; AGAIN=1 puts them back once more), of 2 selected") || !strings.Contains(r.stderr, "took the record's event id") {
		t.Errorf("putback by function: %+v", r)
	}
	// The user's name for a function matches by its words; one that
	// matches nothing lists the functions that have records.
	if r = cmd("list", "-template", tmpl, "-function", "aggregate pageviews"); r.code != cli.ExitOK || !strings.Contains(r.stderr, "2 record(s) listed") {
		t.Errorf("list -function by words: %+v", r)
	}
	if r = cmd("list", "-template", tmpl, "-function", "enrich"); r.code != cli.ExitOK ||
		!strings.Contains(r.stderr, `no record set aside by a function named "enrich"`) || !strings.Contains(r.stderr, "Tributary-AggregatePageviews (2)") {
		t.Errorf("list -function matching nothing: %+v", r)
	}
	// Unchanged data at the field at fault would be set aside again: the
	// refusal says how to correct it, as the user runs the command.
	if err := sink.SetAside(ctx, []setaside.Record{{Source: arn, Shard: shard, Sequence: "49650003", PartitionKey: "user-7",
		ArrivedAt: now.Add(-time.Minute), Data: []byte(bad), Field: "data.ms", Kind: setaside.KindInvalid, Reason: "not a number"}}); err != nil {
		t.Fatal(err)
	}
	if r = cmd("putback", "-table", table, "-source", source, "-sequence", "49650003"); r.code != cli.ExitRefused ||
		!strings.Contains(r.stderr, "holds the data.ms it held") || !strings.Contains(r.stderr, "-unchanged puts it back as it is") {
		t.Errorf("putback of unchanged data: %+v", r)
	}
	// A corrected file the strict reader refuses (sentAt left out) is
	// refused naming the field; only correcting the file helps, so the
	// refusal says that and nothing of UNCHANGED=1, which puts back the
	// data kept, not the file.
	noSentAt := filepath.Join(t.TempDir(), "record.json")
	if err := os.WriteFile(noSentAt, []byte(strings.Replace(strings.Replace(bad, `"slow"`, "120", 1), `,"sentAt":"2026-12-05T09:54:01Z"`, "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"-template", tmpl}},
		{[]string{"-table", table}},
	} {
		args := append([]string{"putback"}, tc.args...)
		r = cmd(append(args, "-source", source, "-sequence", "49650003", "-data", noSentAt)...)
		if r.code != cli.ExitRefused || !strings.Contains(r.stderr, "field sentAt") || !strings.Contains(r.stderr, "correct "+noSentAt+" and run it again") ||
			strings.Contains(strings.ToLower(r.stderr), "unchanged") {
			t.Errorf("putback %q of a file without sentAt: %+v; want refused naming sentAt, saying to correct the file, and nothing of UNCHANGED", tc.args, r)
		}
	}
	// A corrected file that still holds the value at fault: putting the
	// data back unchanged may be what was meant.
	same := filepath.Join(t.TempDir(), "record.json")
	if err := os.WriteFile(same, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if r = cmd("putback", "-template", tmpl, "-source", source, "-sequence", "49650003", "-data", same); r.code != cli.ExitRefused ||
		!strings.Contains(r.stderr, "holds the data.ms it held") || !strings.Contains(r.stderr, "UNCHANGED=1") {
		t.Errorf("putback of a file holding the value at fault: %+v; want refused, offering UNCHANGED=1", r)
	}
	if r = cmd("putback", "-table", table, "-source", source, "-sequence", "49650003", "-unchanged", "-dry-run"); r.code != cli.ExitOK {
		t.Errorf("putback -unchanged -dry-run: %+v", r)
	}
	// A record whose item keeps the rule its field broke (a pipeline's
	// value: a finite number within ±2^53): show says it, and a corrected
	// file with a new mistake in that field is refused, naming the field
	// and what it must hold, where it used to be put back and set aside
	// again at once.
	if err := sink.SetAside(ctx, []setaside.Record{{Source: arn, Shard: shard, Sequence: "49650004", PartitionKey: "user-7",
		ArrivedAt: now.Add(-time.Minute), Data: []byte(strings.Replace(bad, `"slow"`, `{"v":1}`, 1)), Field: "data.ms", Kind: setaside.KindInvalid,
		Reason: "record evt-7: field data.ms: must be a number, not an object", Rule: setaside.NumberRule(1 << 53)}}); err != nil {
		t.Fatal(err)
	}
	if r = cmd("show", "-template", tmpl, "-source", source, "-sequence", "49650004"); r.code != cli.ExitOK ||
		!strings.Contains(r.stdout, "rule      data.ms must hold a JSON number within ±9007199254740992") {
		t.Errorf("show of a record keeping its rule: %+v", r)
	}
	for _, v := range []string{`"120"`, `1e400`, `9223372036854775808`} {
		wrong := filepath.Join(t.TempDir(), "record.json")
		if err := os.WriteFile(wrong, []byte(strings.Replace(bad, `"slow"`, v, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		if r = cmd("putback", "-template", tmpl, "-source", source, "-sequence", "49650004", "-data", wrong); r.code != cli.ExitRefused ||
			!strings.Contains(r.stderr, "would be set aside again: field data.ms: ") || !strings.Contains(r.stderr, "takes only a JSON number within ±9007199254740992 there") ||
			!strings.Contains(r.stderr, "correct "+wrong+" and run it again") {
			t.Errorf("putback of a file whose data.ms is %s: %+v; want refused naming data.ms and what it must hold", v, r)
		}
	}
	if n := len(onStream()); n != 1 {
		t.Errorf("after refusals the stream holds %d records, want 1", n)
	}
	// A record detect set aside for a sum rule after its other rules read
	// it (its ledger took the id) can never reach that rule: no put-back
	// command is offered, and putback refuses it saying what to do instead.
	if err := sink.SetAside(ctx, []setaside.Record{{Source: arn, Shard: shard, Sequence: "49650005", PartitionKey: "user-7",
		ArrivedAt: now.Add(-time.Minute), Data: []byte(strings.Replace(bad, `"slow"`, `1e400`, 1)), Field: "data.ms", Kind: setaside.KindOverflow, IDTaken: true,
		Reason: `record evt-7: field data.ms: 1e400 is not a finite 64-bit number (sum rule "x3" cannot add it and skip this event; the other rules that read it still match it)`}}); err != nil {
		t.Fatal(err)
	}
	if r = cmd("list", "-template", tmpl, "-category", "overflow"); r.code != cli.ExitOK || !strings.Contains(r.stderr, "1 record(s) listed") ||
		strings.Contains(r.stderr, "make putback") || !strings.Contains(r.stderr, "none of these can be put back") {
		t.Errorf("list of a record detect's ledger took the id of: %+v; want no put-back offered", r)
	}
	if r = cmd("list", "-table", table, "-json", "-category", "overflow"); !strings.Contains(r.stdout, `"idTaken":true`) {
		t.Errorf("list -json of a record detect's ledger took the id of: %+v; want idTaken", r)
	}
	if r = cmd("putback", "-template", tmpl, "-source", source, "-sequence", "49650005", "-data", fixed); r.code != cli.ExitRefused ||
		!strings.Contains(r.stderr, "no put-back reaches only the part that skipped it") || !strings.Contains(r.stderr, "with a new id") {
		t.Errorf("putback of a record detect's ledger took the id of: %+v", r)
	}
	if r = cmd("list", "-table", "no-such-table"); r.code != cli.ExitError || !strings.Contains(r.stderr, "no such table") || !strings.Contains(r.stderr, "QuarantineTableName") {
		t.Errorf("list of a missing table: %+v", r)
	}

	// Every wrong command line is one line naming the flag, exit 2,
	// before anything is read.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "give a command first"},
		{[]string{"lst"}, "did you mean list?"},
		{[]string{"list"}, "-table is required"},
		{[]string{"list", "-table", "q"}, "-table \"q\""},
		{[]string{"list", "-table", "quarantine", "-template", tmpl}, "and -template both name the table"},
		{[]string{"list", "-table", "quarantine", "-n", "5000"}, "-n"},
		// Given, 0 is out of range as -5 is (it listed the default 20).
		{[]string{"list", "-table", "quarantine", "-n", "0"}, "-n"},
		{[]string{"list", "-table", "quarantine", "-since", "yesterday"}, "want a duration ago"},
		{[]string{"list", "-table", "quarantine", "-data", "x"}, "-data"},
		{[]string{"show", "-table", "quarantine", "-source", source}, "-sequence is required"},
		{[]string{"putback", "-table", "quarantine"}, "putback does not put back every record"},
		{[]string{"show", "-table", "quarantine", "-source", strings.Repeat("s", 1<<20), "-sequence", "1"}, "-source \"sss"},
		{[]string{"list", "-table", "quarantine", "-function", strings.Repeat("f", 2000)}, "is 2000 bytes; the quarantine table keeps at most 1024"},
		{[]string{"putback", "-table", "quarantine", "-sequence", "1"}, "-sequence needs -source"},
		{[]string{"putback", "-table", "quarantine", "-source", source}, "-source needs -sequence"},
		{[]string{"list", "-table", "quarantine", "-category", "invlaid"}, "(did you mean invalid?)"},
		{[]string{"putback", "-table", "quarantine", "-function", "f", "-data", fixed}, "-data puts back one record"},
		{[]string{"putback", "-table", "quarantine", "-source", source, "-sequence", "1", "-n", "3"}, "-sequence names one record"},
	} {
		if r := cmd(tc.args...); r.code != cli.ExitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%q: %+v, want exit 2 naming %q in one line", tc.args, r, tc.want)
		}
	}
	delete(env, "AWS_ENDPOINT_URL")
	if r := cmd("list", "-template", tmpl); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "QuarantineTableName") {
		t.Errorf("-template without the stand-in: %+v", r)
	}
	if r := cmd("-h"); r.code != cli.ExitOK || !strings.Contains(r.stdout, "putback") || !strings.Contains(r.stdout, "past-horizon") {
		t.Errorf("-h: %+v", r)
	}
}

// TestListSaysWhatSinceLeftOut: list -since leaves out records set aside
// before it; the listing said nothing of them, so a user took "0 record(s)
// listed" for an empty table. It reads them anyway (a scan of the whole
// table), so it says how many the other filters select that -since left
// out, and from when — as make's SINCE= under make — and nothing when
// -since left none out.
func TestListSaysWhatSinceLeftOut(t *testing.T) {
	st := newCommandStack(t)
	db, env, table, now := st.db, st.env, st.table, st.now
	ctx := context.Background()
	// Set aside 10 minutes ago: one by each function; 2 hours ago: three
	// by aggregate; 30 hours ago: one by aggregate.
	seq := 0
	setAside := func(function string, ago time.Duration, kind string, n int) {
		t.Helper()
		sink := setaside.New(db, table, setaside.WithFunction(function), setaside.WithClock(func() time.Time { return now.Add(-ago) }))
		var recs []setaside.Record
		for range n {
			seq++
			recs = append(recs, setaside.Record{Source: "arn:aws:kinesis:us-east-1:123456789012:stream/events", Shard: "shardId-000000000000",
				Sequence: fmt.Sprint(49650000 + seq), PartitionKey: "user-7", ArrivedAt: now.Add(-ago - time.Minute), Data: []byte(`{"id":"e"}`),
				Field: "data.ms", Kind: kind, Reason: "not a number"})
		}
		if err := sink.SetAside(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	setAside("Tributary-AggregatePageviews", 10*time.Minute, setaside.KindInvalid, 1)
	setAside("Tributary-Enrich", 10*time.Minute, setaside.KindStateBudget, 1)
	setAside("Tributary-AggregatePageviews", 2*time.Hour, setaside.KindInvalid, 3)
	setAside("Tributary-AggregatePageviews", 30*time.Hour, setaside.KindInvalid, 1)

	for _, tc := range []struct {
		name string
		args []string
		want string // the summary line on stderr
	}{
		{"no -since", []string{"-table", table},
			"setaside: 6 record(s) listed, newest first, of 6 matching (6 items of " + table + " read)\n"},
		{"-since 1h", []string{"-table", table, "-since", "1h"},
			"setaside: 2 record(s) listed, newest first, of 2 matching (6 items of " + table + " read); 4 older record(s) left out by -since 1h (set aside before 2026-12-05T09:00:00Z)\n"},
		{"-since 3h", []string{"-table", table, "-since", "3h"},
			"setaside: 5 record(s) listed, newest first, of 5 matching (6 items of " + table + " read); 1 older record(s) left out by -since 3h (set aside before 2026-12-05T07:00:00Z)\n"},
		{"-since a time", []string{"-table", table, "-since", "2026-12-05T09:30:00Z"},
			"; 4 older record(s) left out by -since 2026-12-05T09:30:00Z (set aside before 2026-12-05T09:30:00Z)\n"},
		{"-since leaving none out", []string{"-table", table, "-since", "48h"},
			"setaside: 6 record(s) listed, newest first, of 6 matching (6 items of " + table + " read)\n"},
		{"with -function", []string{"-table", table, "-since", "1h", "-function", "aggregate pageviews"},
			"setaside: 1 record(s) listed, newest first, of 1 matching (6 items of " + table + " read); 4 older record(s) left out by -since 1h (set aside before 2026-12-05T09:00:00Z)\n"},
		{"with -function none of whose are older", []string{"-table", table, "-since", "1h", "-function", "enrich"},
			"setaside: 1 record(s) listed, newest first, of 1 matching (6 items of " + table + " read)\n"},
		{"with -category none of whose are older", []string{"-table", table, "-since", "1h", "-category", "state-budget"},
			"setaside: 1 record(s) listed, newest first, of 1 matching (6 items of " + table + " read)\n"},
		{"with -n", []string{"-table", table, "-since", "3h", "-n", "2"},
			"setaside: 2 record(s) listed, newest first, of 5 matching (6 items of " + table + " read); 1 older record(s) left out by -since 3h (set aside before 2026-12-05T07:00:00Z)\n"},
		{"-json", []string{"-table", table, "-since", "1h", "-json"},
			"; 4 older record(s) left out by -since 1h (set aside before 2026-12-05T09:00:00Z)\n"},
		{"under make", []string{"-template", tmpl, "-since", "1h"},
			"; 4 older record(s) left out by SINCE=1h (set aside before 2026-12-05T09:00:00Z)\n"},
		{"under make, every one left out", []string{"-template", tmpl, "-since", "1m"},
			"setaside: 0 record(s) listed, newest first, of 0 matching (6 items of " + table + " read); 6 older record(s) left out by SINCE=1m (set aside before 2026-12-05T09:59:00Z)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
			code := run(ctx, append([]string{"list"}, tc.args...), lookup, func() time.Time { return now }, &stdout, &stderr)
			if code != cli.ExitOK || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 0 and it to say %q", code, stderr.String(), tc.want)
			}
			if !strings.Contains(tc.want, "left out") && strings.Contains(stderr.String(), "left out") {
				t.Errorf("stderr:\n%s\nsays something was left out; -since left none out", stderr.String())
			}
		})
	}
}
