package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/cli/clitest"
	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/projection"
	"github.com/tributary-dev/tributary/pkg/seats"
)

type result struct {
	code           int
	stdout, stderr string
}

func cmd(env map[string]string, args ...string) result {
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code := run(context.Background(), args, lookup, time.Now, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// TestUsage: a wrong command line names the flag, exits 2 and reads
// nothing (no AWS settings are needed to refuse it).
func TestUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "a command is required"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"rebuild", "-parameter", "/p", "-events-table", "events"}, "-stream is required"},
		{[]string{"rebuild", "-parameter", "/p", "-stream", "s", "-events-table", "events", "-handover", "10ms"}, "-handover 10ms: must be from 30s to 1h0m0s"},
		{[]string{"use-version", "-parameter", "/p", "-stream", "s", "-events-table", "events"}, "-table is required"},
		{[]string{"compare", "-a", "x"}, `-a "x": a DynamoDB table name is 3 to 255`},
		// A table compared with itself tells nothing: -b is refused
		// before anything is read.
		{[]string{"compare", "-a", "views", "-b", "views"}, "eventstore compare: -b views: is the table -a names; give two versions of the views (replay versions lists them)"},
		{[]string{"erase", "-events-table", "events", "-subject", "ada"}, "-reason is required"},
		// -by defaults to $USER, which a container or CI job often lacks:
		// the error says so, or the usage's [-by <who>] reads as optional.
		{[]string{"erase", "-events-table", "events", "-subject", "ada", "-reason", "ticket 17", "-yes"}, "-by is required with -yes: who erases, named in the audit event (default $USER, which is not set)"},
		// The flag is named once: the usage error prefixes it.
		{[]string{"erase", "-events-table", "events", "-subject", "ada", "-reason", "ticket 17", "-by", "ops", "-dry-run", "-yes"}, "eventstore erase: -dry-run and -yes: give one (-yes erases, -dry-run lists)"},
		{[]string{"rebuild", "extra"}, `unexpected argument "extra"`},
		{[]string{strings.Repeat("e", 100_000)}, `unknown command "` + strings.Repeat("e", 256) + `"…`},
	} {
		r := cmd(nil, tt.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) || len(r.stderr) > 2000 {
			t.Errorf("%.200v: exit %d, stderr %.300q; want 2 and %.300q", tt.args, r.code, r.stderr, tt.want)
		}
	}
	// A handover shorter than the functions' refresh interval (the
	// stack's 30s, or $VIEWS_REFRESH_SECONDS, as replay reads it) can miss
	// what a function still writes to the old version: it is refused, as
	// the flag's own text says.
	views := []string{"-parameter", "/p", "-stream", "s", "-events-table", "events"}
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{append([]string{"rebuild", "-handover", "1s"}, views...), nil, "-handover 1s: must be from 30s to 1h0m0s (the functions re-read the parameter every 30s"},
		{append([]string{"rollback", "-handover", "29s"}, views...), nil, "-handover 29s: must be from 30s to 1h0m0s"},
		{append([]string{"use-version", "-table", "views-v2", "-handover", "5s"}, views...), map[string]string{"VIEWS_REFRESH_SECONDS": "10"}, "-handover 5s: must be from 10s to 1h0m0s (the functions re-read the parameter every 10s"},
		{append([]string{"rebuild"}, views...), map[string]string{"VIEWS_REFRESH_SECONDS": "soon"}, `environment variable VIEWS_REFRESH_SECONDS: "soon" is not a whole number of seconds from 1 to 3600`},
	} {
		if r := cmd(tt.env, tt.args...); r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v with %v: exit %d, stderr %q; want 2 and %q", tt.args, tt.env, r.code, r.stderr, tt.want)
		}
	}
	if r := cmd(nil, "erase", "-h"); r.code != 0 || !strings.Contains(r.stdout, "-subject") {
		t.Errorf("erase -h: %d %q", r.code, r.stdout)
	}
}

// TestEraseAndCompare against the stand-in: erase lists first, then removes
// the subject's personal data and names the audit event; compare says when
// two versions of the views hold the same items and exits 1 when they do
// not.
func TestEraseAndCompare(t *testing.T) {
	srv := standintest.Start(t)
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": srv.Endpoint(), "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"} {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	db := dynamodb.NewFromConfig(standintest.Config(t, srv))
	tables := es.Tables{Events: "events", Snapshots: "snapshots", Commands: "commands"}
	if err := es.CreateTables(ctx, db, tables); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"views", "views-v2"} {
		if err := seats.CreateViewsTable(ctx, db, v); err != nil {
			t.Fatal(err)
		}
	}
	x := es.NewExecutor[seats.Show](es.NewStore(db, tables), seats.Decider{}, es.WithSyncView(seats.SyncView(projection.FixedTable("views"))))
	for _, body := range []string{
		`{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":1,"seatsPerRow":4}}`,
		`{"id":"c2","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r1","customerId":"ada","seats":["A1"],"holder":{"name":"Ada"}}}`,
	} {
		if res, err := x.Execute(ctx, []byte(body)); err != nil || res.HTTPStatus != 200 {
			t.Fatalf("%s: %s %v", body, res.Body, err)
		}
	}
	env := map[string]string{"USER": "ops"}
	dry := cmd(env, "erase", "-events-table", "events", "-subject", "ada", "-reason", "ticket 17")
	if dry.code != 0 || !strings.Contains(dry.stdout, "dry run: 1 events of ada hold personal data: show-1/2") {
		t.Fatalf("dry run: %+v", dry)
	}
	// A dry run changes nothing and records no audit event: it needs no
	// -by, so no $USER (a container, a CI job), and -dry-run says so as
	// rebuild's does. What it suggests asks for -by, not an empty one.
	for _, args := range [][]string{
		{"erase", "-events-table", "events", "-subject", "ada", "-reason", "ticket 17"},
		{"erase", "-events-table", "events", "-subject", "ada", "-reason", "ticket 17", "-dry-run"},
	} {
		r := cmd(nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "dry run: 1 events of ada hold personal data: show-1/2") ||
			!strings.Contains(r.stdout, "-reason 'ticket 17' -by <who> -yes") {
			t.Errorf("%q without $USER: %+v; want the dry run's listing, suggesting -by <who>", args, r)
		}
	}
	// The command the dry run suggests, pasted into a shell, passes -reason
	// and -by as given, $ and quotes included.
	reason, by := `ticket $5 "it's" \n`, "o'brien"
	dry = cmd(map[string]string{"USER": by}, "erase", "-events-table", "events", "-subject", "ada", "-reason", reason)
	_, suggested, _ := strings.Cut(dry.stdout, "to erase it: eventstore erase ")
	out, err := exec.Command("sh", "-c", "set -- "+strings.TrimSpace(suggested)+`; for a; do printf '%s\n' "$a"; done`).Output()
	if args := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); err != nil || !slices.Equal(args, []string{"-events-table", "events", "-subject", "ada", "-reason", reason, "-by", by, "-yes"}) {
		t.Errorf("the suggested command %q reads in a shell as %q (%v)", suggested, args, err)
	}
	// -by is kept in the audit event, as -reason is: bounded.
	if r := cmd(env, "erase", "-events-table", "events", "-subject", "ada", "-reason", "ticket 17", "-by", strings.Repeat("b", 100_000), "-yes"); r.code != 2 || !strings.Contains(r.stderr, "-by: is required (at most 256 bytes)") {
		t.Errorf("a -by of 100,000 bytes: exit %d, stderr %.300q; want 2 naming -by and its bound", r.code, r.stderr)
	}
	done := cmd(env, "erase", "-events-table", "events", "-subject", "ada", "-reason", "ticket 17", "-yes")
	if done.code != 0 || !strings.Contains(done.stdout, "erased the personal data of 1 events of ada (show-1/2); audit event erasure#ada/1 (PersonalDataErased)") {
		t.Fatalf("erase: %+v", done)
	}
	if again := cmd(env, "erase", "-events-table", "events", "-subject", "ada", "-reason", "ticket 17", "-yes"); again.code != 0 || !strings.Contains(again.stdout, "nothing to erase") {
		t.Fatalf("erase again: %+v", again)
	}
	// A dry run with nothing left says so, and suggests no -yes.
	if dry := cmd(env, "erase", "-events-table", "events", "-subject", "ada", "-reason", "ticket 17"); dry.code != 0 ||
		!strings.Contains(dry.stdout, "dry run: no event of ada holds personal data (1 erased before, each audited): nothing to erase") || strings.Contains(dry.stdout, "-yes") {
		t.Fatalf("dry run once erased: %+v", dry)
	}

	if r := cmd(nil, "compare", "-a", "views", "-b", "views-v2"); r.code != 1 || !strings.Contains(r.stdout, "1 only in views") {
		t.Fatalf("compare with an empty version: %+v", r)
	}
	p := projection.New(db, es.NewStore(db, tables), projection.FixedTable("views-v2"), seats.Views(x))
	if _, err := es.ScanLog(ctx, db, "events", func(run []es.Event) error { return p.ApplyLog(ctx, "views-v2", run) }); err != nil {
		t.Fatal(err)
	}
	// views-v2 has availability and bookings besides the seat map.
	if r := cmd(nil, "compare", "-a", "views", "-b", "views-v2"); r.code != 1 || !strings.Contains(r.stdout, "0 only in views") || !strings.Contains(r.stdout, "2 only in views-v2") {
		t.Fatalf("compare: %+v", r)
	}
}

// TestCompareRefusesWhatItCannotCompare: a table that does not exist, or
// one that is not a version of the views (the events table, keyed by
// aggregate and version, not pk and sk), is refused naming its flag and
// exits 3, not 1 (the versions differ); it was a raw
// ResourceNotFoundException, and the events table's items, each read as
// the empty key, differed from one another until a read of that key
// failed with a ValidationException.
func TestCompareRefusesWhatItCannotCompare(t *testing.T) {
	newESStack(t)
	for _, tt := range []struct {
		a, b string
		want string
	}{
		{"views-v9", "views", "eventstore compare: refused -a: views-v9 does not exist (replay versions lists the versions of the views)"},
		{"views", "views-v9", "eventstore compare: refused -b: views-v9 does not exist (replay versions lists the versions of the views)"},
		{"events", "views", "eventstore compare: refused -a: events is not a version of the views: it is keyed (aggregateId, version), a version of the views (pk, sk), both strings"},
		{"views", "commands", "eventstore compare: refused -b: commands is not a version of the views: it is keyed (id)"},
	} {
		r := cmd(nil, "compare", "-a", tt.a, "-b", tt.b)
		if r.code != 3 || !strings.Contains(r.stderr, tt.want) || r.stdout != "" {
			t.Errorf("compare -a %s -b %s: exit %d, stdout %q, stderr %q; want 3 and %q", tt.a, tt.b, r.code, r.stdout, r.stderr, tt.want)
		}
	}
}

// TestEraseListsABoundedNumberOfIDs: a subject with thousands of events
// gets a line of the first ids and a count, not every id.
func TestEraseListsABoundedNumberOfIDs(t *testing.T) {
	ids := make([]string, 5000)
	for i := range ids {
		ids[i] = fmt.Sprintf("show-%d/%d", i, i)
	}
	got := listIDs(ids)
	if len(got) > 1000 || !strings.HasPrefix(got, "show-0/0 show-1/1 ") || !strings.Contains(got, "… and 4980 more") {
		t.Errorf("listIDs of 5,000 ids = %d bytes: %.200q", len(got), got)
	}
	if got := listIDs(ids[:2]); got != "show-0/0 show-1/1" {
		t.Errorf("listIDs of 2 = %q", got)
	}
}

// TestInterruptedHandoverSaysWhatWasDone: Ctrl-C during a rebuild's
// handover, after the swap, says that the swap was made and how to catch
// the new version up, not only "interrupted".
func TestInterruptedHandoverSaysWhatWasDone(t *testing.T) {
	ctx := context.Background()
	newESStack(t)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stderr := &clitest.CancelOn{Marker: "swapped: parameter /es/views now names views-v2", Cancel: cancel}
	var stdout bytes.Buffer
	code := run(rctx, []string{"rebuild", "-parameter", "/es/views", "-stream", "published", "-events-table", "events", "-handover", "30s"},
		func(string) (string, bool) { return "", false }, time.Now, &stdout, stderr)
	last := strings.TrimSpace(stderr.String())
	last = last[strings.LastIndex(last, "\n")+1:]
	if code != 130 || !strings.Contains(last, "interrupted") || !strings.Contains(last, "parameter /es/views names views-v2 (was views), but the handover was cut short") || !strings.Contains(last, "(eventstore use-version -table views-v2 catches it up)") {
		t.Errorf("Ctrl-C in the handover: exit %d, last line %q; want 130 saying the swap was made and how to catch up\n%s", code, last, stderr.String())
	}
}

// newESStack gives the test a stand-in (its AWS_* variables set) with the
// events, snapshots, commands and views tables, the parameter /es/views
// naming views, and the published stream.
func newESStack(t *testing.T) {
	t.Helper()
	srv := standintest.Start(t)
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": srv.Endpoint(), "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"} {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	cfg := standintest.Config(t, srv)
	db := dynamodb.NewFromConfig(cfg)
	tables := es.Tables{Events: "events", Snapshots: "snapshots", Commands: "commands"}
	if err := es.CreateTables(ctx, db, tables); err != nil {
		t.Fatal(err)
	}
	if err := seats.CreateViewsTable(ctx, db, "views"); err != nil {
		t.Fatal(err)
	}
	if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/es/views"), Value: aws.String("views"), Type: ssmtypes.ParameterTypeString}); err != nil {
		t.Fatal(err)
	}
	if _, err := kinesis.NewFromConfig(cfg).CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("published"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
}

// TestRollbackSaysNothingOfWindows: rollback and use-version of the
// event-sourced views print no notes about windowed views (sessions, late
// records, revisions), which a seat map has none of, and still say how to
// point the readers back.
func TestRollbackSaysNothingOfWindows(t *testing.T) {
	newESStack(t)
	esFlags := []string{"-parameter", "/es/views", "-stream", "published", "-events-table", "events", "-handover", "1s"}
	// The stand-in's functions are none: a 1s refresh lets the
	// handovers be short.
	noEnv := func(k string) (string, bool) { return "1", k == "VIEWS_REFRESH_SECONDS" }
	var out, errb bytes.Buffer
	if code := run(context.Background(), append([]string{"rebuild"}, esFlags...), noEnv, time.Now, &out, &errb); code != 0 {
		t.Fatalf("rebuild: exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, args := range [][]string{{"rollback"}, {"use-version", "-table", "views-v2"}} {
		out.Reset()
		errb.Reset()
		if code := run(context.Background(), append(args, esFlags...), noEnv, time.Now, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", args[0], code, out.String(), errb.String())
		}
		all := out.String() + errb.String()
		for _, windowed := range []string{"window", "session", "revision"} {
			if strings.Contains(all, windowed) {
				t.Errorf("%s of the event-sourced views speaks of %ss:\n%s", args[0], windowed, all)
			}
		}
		if !strings.Contains(all, "is unchanged and no longer current") {
			t.Errorf("%s no longer says how to point the readers back:\n%s", args[0], all)
		}
	}
}
