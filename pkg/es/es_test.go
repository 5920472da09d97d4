package es_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/es"
)

var awsCfg aws.Config

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(c aws.Config) { awsCfg = c }))
}

var tableSeq atomic.Int64

// newStore creates a private set of tables.
func newStore(t *testing.T) (*dynamodb.Client, *es.Store) {
	t.Helper()
	db := dynamodb.NewFromConfig(awsCfg)
	n := tableSeq.Add(1)
	tables := es.Tables{Events: fmt.Sprintf("events-%d", n), Snapshots: fmt.Sprintf("snapshots-%d", n), Commands: fmt.Sprintf("commands-%d", n)}
	if err := es.CreateTables(context.Background(), db, tables); err != nil {
		t.Fatal(err)
	}
	return db, es.NewStore(db, tables)
}

// account is a test domain: a balance that never goes below zero.
type account struct {
	Balance int   `json:"balance"`
	Ops     []int `json:"ops"` // every amount applied, so a lost or doubled event shows
}

type ledger struct{}

func (ledger) AggregateType() string  { return "account" }
func (ledger) AggregateField() string { return "accountId" }
func (ledger) StateSchema() string    { return "account/v1" }
func (ledger) Initial() account       { return account{} }

func (ledger) Evolve(s account, e es.Event) (account, error) {
	var d struct{ Amount int }
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return s, err
	}
	switch e.Type {
	case "Deposited":
		s.Balance += d.Amount
	case "Withdrawn":
		if d.Amount > s.Balance {
			return s, fmt.Errorf("overdraft: %d of %d", d.Amount, s.Balance)
		}
		s.Balance -= d.Amount
	default:
		return s, fmt.Errorf("unknown event %s", e.Type)
	}
	s.Ops = append(append([]int(nil), s.Ops...), d.Amount)
	return s, nil
}

func (ledger) Decide(s account, version int64, c es.Command) ([]es.NewEvent, error) {
	var d struct {
		Amount int
		Split  int // deposit in this many events (a multi-event command)
		Owner  string
		// Anonymous: the owner's personal data without its subject, a
		// decider's mistake the executor refuses.
		Anonymous bool
	}
	if err := json.Unmarshal(c.Data, &d); err != nil || d.Amount <= 0 {
		return nil, es.Invalid("data.amount", "must be a positive whole number")
	}
	switch c.Type {
	case "Deposit":
		n := max(d.Split, 1)
		out := make([]es.NewEvent, n)
		for i := range out {
			out[i] = es.NewEvent{Type: "Deposited", Data: map[string]int{"amount": d.Amount}}
			if d.Owner != "" {
				out[i].Personal, out[i].Subject = map[string]string{"owner": d.Owner}, "owner-"+c.AggregateID
				if d.Anonymous {
					out[i].Subject = ""
				}
			}
		}
		return out, nil
	case "Withdraw":
		if d.Amount > s.Balance {
			return nil, es.Refuse("data.amount", "%d is more than the balance %d", d.Amount, s.Balance)
		}
		return []es.NewEvent{{Type: "Withdrawn", Data: map[string]int{"amount": d.Amount}}}, nil
	}
	return nil, es.Invalid("type", "unknown command %q", c.Type)
}

func cmd(id, typ, acct string, amount int, extra string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"type":%q,"accountId":%q,"data":{"amount":%d%s}}`, id, typ, acct, amount, extra))
}

func run(t *testing.T, x *es.Executor[account], body []byte) es.Result {
	t.Helper()
	res, err := x.Execute(context.Background(), body)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return res
}

// TestAppendIsConditionalOnTheVersion: two appends decided on the same
// version cannot both land; the loser learns the current version, and a
// multi-event append that collides on any version writes none of its events.
func TestAppendIsConditionalOnTheVersion(t *testing.T) {
	ctx := context.Background()
	_, store := newStore(t)
	ev := func(v int64, cmd string) es.Event {
		return es.Event{AggregateType: "account", AggregateID: "a1", Version: v, Type: "Deposited", Data: json.RawMessage(`{"amount":1}`), CommandID: cmd}
	}
	if err := store.Append(ctx, es.Append{AggregateID: "a1", Expected: 0, Events: []es.Event{ev(1, "c1"), ev(2, "c1")}}); err != nil {
		t.Fatal(err)
	}
	err := store.Append(ctx, es.Append{AggregateID: "a1", Expected: 1, Events: []es.Event{ev(2, "c2"), ev(3, "c2")}})
	var conflict *es.ConflictError
	if !errors.As(err, &conflict) || conflict.Current != 2 || conflict.Expected != 1 {
		t.Fatalf("append at a taken version: %v, want a conflict naming current version 2", err)
	}
	evs, err := store.Events(ctx, "a1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].CommandID != "c1" {
		t.Fatalf("log after the lost append: %+v, want versions 1 and 2 of c1 only (version 3 not written)", evs)
	}
}

// TestCommandsAreIdempotent: a command sent again gets its first answer byte
// for byte and appends nothing; so does a refused one, even once the state
// would now allow it; the same id with another command is refused (422).
func TestCommandsAreIdempotent(t *testing.T) {
	ctx := context.Background()
	_, store := newStore(t)
	x := es.NewExecutor[account](store, ledger{})
	first := run(t, x, cmd("c1", "Deposit", "a1", 5, ""))
	if first.Status != es.StatusAccepted || first.Version != 1 {
		t.Fatalf("first: %+v", first)
	}
	again := run(t, x, cmd("c1", "Deposit", "a1", 5, ""))
	if !again.Replayed || string(again.Body) != string(first.Body) || again.HTTPStatus != 200 {
		t.Fatalf("retry: %+v %s, want the first answer replayed: %s", again, again.Body, first.Body)
	}
	refused := run(t, x, cmd("c2", "Withdraw", "a1", 9, ""))
	if refused.Status != es.StatusRefused || refused.HTTPStatus != 422 || !strings.Contains(string(refused.Body), `"field":"data.amount"`) {
		t.Fatalf("overdraft: %+v %s", refused, refused.Body)
	}
	run(t, x, cmd("c3", "Deposit", "a1", 10, ""))
	retried := run(t, x, cmd("c2", "Withdraw", "a1", 9, ""))
	if !retried.Replayed || retried.Status != es.StatusRefused || string(retried.Body) != string(refused.Body) {
		t.Fatalf("refused command retried after the balance grew: %+v %s, want the first refusal", retried, retried.Body)
	}
	reused := run(t, x, cmd("c1", "Deposit", "a1", 6, ""))
	if reused.HTTPStatus != 422 || !strings.Contains(string(reused.Body), `"field":"id"`) {
		t.Fatalf("id reused: %d %s", reused.HTTPStatus, reused.Body)
	}
	evs, _ := store.Events(ctx, "a1", 0, 0)
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2 (c1 and c3 once each)", len(evs))
	}
}

// TestExpectedVersionConflict: a command decided on a version the
// aggregate has left is answered 409 with the current version, unless it
// is the retry of a command that was accepted (then its first answer).
func TestExpectedVersionConflict(t *testing.T) {
	_, store := newStore(t)
	x := es.NewExecutor[account](store, ledger{})
	run(t, x, cmd("c1", "Deposit", "a1", 5, ""))
	a := run(t, x, []byte(`{"id":"c2","type":"Deposit","accountId":"a1","expectedVersion":1,"data":{"amount":1}}`))
	b := run(t, x, []byte(`{"id":"c3","type":"Deposit","accountId":"a1","expectedVersion":1,"data":{"amount":2}}`))
	if a.Status != es.StatusAccepted || b.Status != es.StatusConflict || b.HTTPStatus != 409 ||
		!strings.Contains(string(b.Body), `"expectedVersion":1,"currentVersion":2`) {
		t.Fatalf("a: %s\nb: %d %s", a.Body, b.HTTPStatus, b.Body)
	}
	retry := run(t, x, []byte(`{"id":"c2","type":"Deposit","accountId":"a1","expectedVersion":1,"data":{"amount":1}}`))
	if !retry.Replayed || retry.Status != es.StatusAccepted {
		t.Fatalf("retry of the accepted command with its stale expectedVersion: %+v %s", retry, retry.Body)
	}
}

// TestInvalidCommandsNameTheField: malformed commands are 400s naming the
// field, and are not remembered.
func TestInvalidCommandsNameTheField(t *testing.T) {
	_, store := newStore(t)
	x := es.NewExecutor[account](store, ledger{})
	for _, tt := range []struct{ body, field string }{
		{`{"type":"Deposit","accountId":"a1","data":{"amount":1}}`, "id"},
		{`{"id":"c 1","type":"Deposit","accountId":"a1","data":{"amount":1}}`, "id"},
		{`{"id":"c1","type":"Deposit","data":{"amount":1}}`, "accountId"},
		{`{"id":"c1","type":"Deposit","accountId":"a1","expectedVersion":-1,"data":{"amount":1}}`, "expectedVersion"},
		{`{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":0}}`, "data.amount"},
		{`{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":1},"extra":1}`, "extra"},
		{`{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":1,"amount":2}}`, "data.amount"},
		{`{"id":"c1","type":"Nope","accountId":"a1","data":{"amount":1}}`, "type"},
		// What encoding/json would store as U+FFFD, a decider never sees.
		{`{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":1,"Owner":"Ad\ud800a"}}`, "data.Owner"},
		{"{\"id\":\"c1\",\"type\":\"Deposit\",\"accountId\":\"a1\",\"data\":{\"amount\":1,\"Owner\":\"Ad\xffa\"}}", "data.Owner"},
		{`{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":1,"Owner":["\udc00"]}}`, "data.Owner[0]"},
	} {
		res := run(t, x, []byte(tt.body))
		if res.HTTPStatus != 400 || !strings.Contains(string(res.Body), fmt.Sprintf(`"field":%q`, tt.field)) {
			t.Errorf("%s: %d %s, want 400 naming %s", tt.body, res.HTTPStatus, res.Body, tt.field)
		}
	}
	if ok := run(t, x, cmd("c1", "Deposit", "a1", 1, "")); ok.Status != es.StatusAccepted || ok.Replayed {
		t.Errorf("c1 after its malformed attempts: %+v, want a first execution", ok)
	}
}

// TestExpectedVersionIsAWholeNumber: expectedVersion is read as every
// whole number of a command is (strictjson.WholeNumber): digits only, in
// its own range. -0, 1.0 or 1e400 is a 400 naming it and quoting what was
// sent, not read as 0 (a command on a new aggregate) or refused with
// another range.
func TestExpectedVersionIsAWholeNumber(t *testing.T) {
	_, store := newStore(t)
	x := es.NewExecutor[account](store, ledger{})
	for _, v := range []string{"-0", "0.0", "1.0", "1e400", "-1", `"0"`, "99999999999999999999"} {
		res := run(t, x, []byte(`{"id":"c1","type":"Deposit","accountId":"a1","expectedVersion":`+v+`,"data":{"amount":1}}`))
		var got struct{ Field, Error string }
		if err := json.Unmarshal(res.Body, &got); err != nil || res.HTTPStatus != 400 || got.Field != "expectedVersion" ||
			!strings.Contains(got.Error, "must be a whole number from 0 to 9223372036854775807") {
			t.Errorf("expectedVersion %s: %d %s, want 400 naming expectedVersion and its range", v, res.HTTPStatus, res.Body)
		}
	}
	if res := run(t, x, []byte(`{"id":"c1","type":"Deposit","accountId":"a1","expectedVersion":0,"data":{"amount":1}}`)); res.HTTPStatus != 200 || res.Version != 1 {
		t.Errorf("expectedVersion 0 on a new aggregate: %d %s, want accepted at version 1", res.HTTPStatus, res.Body)
	}
}

// TestInvalidIDNamesTheCharacterSent: an id with a character outside the
// allowed ones is refused naming that character as sent ('ö'), not the
// first byte of its UTF-8 read as another character ('Ã').
func TestInvalidIDNamesTheCharacterSent(t *testing.T) {
	_, store := newStore(t)
	x := es.NewExecutor[account](store, ledger{})
	for _, tt := range []struct{ id, char string }{
		{"shöw", `'ö'`},
		{"show-😀", `'😀'`},
		{"a\u00a0b", `'\u00a0'`}, // a no-break space, invisible when printed
	} {
		res := run(t, x, []byte(`{"id":"c1","type":"Deposit","accountId":"`+tt.id+`","data":{"amount":1}}`))
		var got struct{ Error string }
		if err := json.Unmarshal(res.Body, &got); err != nil || res.HTTPStatus != 400 || !strings.Contains(got.Error, "character "+tt.char+" is not allowed") {
			t.Errorf("%s: %d %s, want 400 naming the character %s", tt.id, res.HTTPStatus, res.Body, tt.char)
		}
	}
	if err := es.CheckAggregateID("a\xffb"); err == nil || !strings.Contains(err.Error(), "byte 0xff") {
		t.Errorf("an id with byte 0xff: %v, want it named as a byte (not UTF-8)", err)
	}
}

// TestInvalidAnswersAreBounded: a 400 repeats at most a few hundred bytes
// of what it was sent, however long the unknown field name or the value it
// refuses (a command may be 64 KiB).
func TestInvalidAnswersAreBounded(t *testing.T) {
	_, store := newStore(t)
	x := es.NewExecutor[account](store, ledger{})
	long := strings.Repeat("x", 60_000)
	for _, tt := range []struct{ name, body, field string }{
		{"an unknown field's name", `{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":1},"` + long + `":1}`, "xxxx"},
		{"an expectedVersion that is not a number", `{"id":"c1","type":"Deposit","accountId":"a1","expectedVersion":"` + long + `","data":{"amount":1}}`, "expectedVersion"},
		{"an expectedVersion that is an object", `{"id":"c1","type":"Deposit","accountId":"a1","expectedVersion":{"a":"` + long + `"},"data":{"amount":1}}`, "expectedVersion"},
	} {
		res := run(t, x, []byte(tt.body))
		if res.HTTPStatus != 400 || !strings.Contains(string(res.Body), `"field":"`+tt.field) {
			t.Errorf("%s: %d %.300s, want 400 naming %s", tt.name, res.HTTPStatus, res.Body, tt.field)
		}
		if len(res.Body) > 1024 {
			t.Errorf("%s: the answer is %d bytes, want at most 1,024", tt.name, len(res.Body))
		}
	}
}

// TestMultiEventCommandIsAtomic: a command's events land together, at
// consecutive versions, with one transaction.
func TestMultiEventCommandIsAtomic(t *testing.T) {
	ctx := context.Background()
	_, store := newStore(t)
	x := es.NewExecutor[account](store, ledger{})
	res := run(t, x, cmd("c1", "Deposit", "a1", 2, `,"split":3`))
	if res.Version != 3 || len(res.Events) != 3 || !strings.Contains(string(res.Body), `"events":[{"version":1,"type":"Deposited"},{"version":2`) {
		t.Fatalf("%+v %s", res, res.Body)
	}
	s, v, err := x.Load(ctx, "a1")
	if err != nil || v != 3 || s.Balance != 6 {
		t.Fatalf("loaded %+v at %d (%v), want 6 at version 3", s, v, err)
	}
}

// TestCommandPastATransactionIsRefused: a command whose events (with its
// record) are more than one TransactWriteItems holds — more than 100
// actions, or more than 4 MB in all, each item under 400 KB — can never be
// appended. It is a 400 naming data, not a 503 its sender would retry for
// ever, and nothing of it is written.
func TestCommandPastATransactionIsRefused(t *testing.T) {
	ctx := context.Background()
	_, store := newStore(t)
	x := es.NewExecutor[account](store, ledger{})
	owner := strings.Repeat("o", 50_000) // 90 events of 50 KB: about 4.5 MB
	for _, tt := range []struct{ name, id, extra, reason string }{
		{"100 events", "c-many", `,"split":100`, "101 items"}, // with the record; the snapshot left out
		{"90 events of 50 KB each", "c-big", `,"split":90,"Owner":"` + owner + `"`, "91 items of 45"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := x.Execute(ctx, cmd(tt.id, "Deposit", "a1", 1, tt.extra))
			if err != nil {
				t.Fatalf("answered as a failure to retry (503): %v", err)
			}
			if res.HTTPStatus != 400 || !strings.Contains(string(res.Body), `"field":"data"`) ||
				!strings.Contains(string(res.Body), tt.reason) || !strings.Contains(string(res.Body), "one DynamoDB transaction") {
				t.Fatalf("%d %.400s, want 400 naming data and the transaction's limit", res.HTTPStatus, res.Body)
			}
			if len(res.Body) > 1024 {
				t.Errorf("the answer is %d bytes", len(res.Body))
			}
		})
	}
	if _, v, err := x.Load(ctx, "a1"); err != nil || v != 0 {
		t.Fatalf("a1 at version %d (%v) after the refusals, want nothing appended", v, err)
	}
	// 99 events and the record fill a transaction: the snapshot due at
	// version 99 is left out rather than the command refused.
	if ok := run(t, x, cmd("c-ok", "Deposit", "a1", 1, `,"split":99`)); ok.HTTPStatus != 200 || ok.Version != 99 {
		t.Fatalf("99 events: %d %.300s, want accepted at version 99", ok.HTTPStatus, ok.Body)
	}
	if snap, err := store.Snapshot(ctx, "a1"); err != nil || snap != nil {
		t.Fatalf("snapshot %+v (%v), want none: it did not fit in the transaction", snap, err)
	}
	if s, v, err := x.Load(ctx, "a1"); err != nil || v != 99 || s.Balance != 99 {
		t.Fatalf("a1: balance %d at version %d (%v), want 99 at 99", s.Balance, v, err)
	}
}

// TestPersonalDataNeedsItsSubject: an event holding personal data without
// a subject is not appended: erasure finds personal data by its subject,
// so it would never be erased.
func TestPersonalDataNeedsItsSubject(t *testing.T) {
	_, store := newStore(t)
	x := es.NewExecutor[account](store, ledger{})
	_, err := x.Execute(context.Background(), cmd("c1", "Deposit", "a1", 5, `,"Owner":"Ada","Anonymous":true`))
	if err == nil || !strings.Contains(err.Error(), "without a subject") {
		t.Fatalf("err %v, want the event refused for holding personal data without a subject", err)
	}
	if ok := run(t, x, cmd("c2", "Deposit", "a1", 5, `,"Owner":"Ada"`)); ok.Status != es.StatusAccepted || ok.Version != 1 {
		t.Errorf("c2 after the refused c1: %+v, want version 1 (nothing of c1 appended)", ok)
	}
}

// notebook is a test domain whose state grows with each command: the notes
// written so far, past DynamoDB's 400 KB after a few commands.
type notebook struct{}

func (notebook) AggregateType() string  { return "notebook" }
func (notebook) AggregateField() string { return "notebookId" }
func (notebook) StateSchema() string    { return "notebook/v1" }
func (notebook) Initial() []string      { return nil }
func (notebook) Evolve(s []string, e es.Event) ([]string, error) {
	var d struct{ Note string }
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return s, err
	}
	return append(slices.Clone(s), d.Note), nil
}
func (notebook) Decide(s []string, version int64, c es.Command) ([]es.NewEvent, error) {
	var d struct{ Note string }
	if err := json.Unmarshal(c.Data, &d); err != nil || d.Note == "" {
		return nil, es.Invalid("data.note", "is required")
	}
	return []es.NewEvent{{Type: "Noted", Data: map[string]string{"note": d.Note}}}, nil
}

// TestStateTooLargeToSnapshot: an aggregate whose state outgrew what a
// DynamoDB item holds still takes commands (its snapshot is not taken, and
// a load reads the events after the last one that was); the command is
// not answered 400 for its data, which was fine.
func TestStateTooLargeToSnapshot(t *testing.T) {
	ctx := context.Background()
	_, store := newStore(t)
	x := es.NewExecutor[[]string](store, notebook{}, es.WithSnapshotEvery[[]string](2))
	note := strings.Repeat("n", 50_000)
	for i := 1; i <= 12; i++ {
		body := fmt.Sprintf(`{"id":"c%d","type":"Note","notebookId":"nb1","data":{"note":"%s"}}`, i, note)
		res, err := x.Execute(ctx, []byte(body))
		if err != nil || res.HTTPStatus != 200 || res.Version != int64(i) {
			t.Fatalf("note %d (state about %d KB): %d %.300s %v, want accepted at version %d", i, i*50, res.HTTPStatus, res.Body, err, i)
		}
	}
	s, version, err := x.Load(ctx, "nb1")
	if err != nil || version != 12 || len(s) != 12 {
		t.Fatalf("load: %d notes at version %d (%v), want 12 at version 12", len(s), version, err)
	}
	snap, err := store.Snapshot(ctx, "nb1")
	if err != nil || snap == nil {
		t.Fatalf("snapshot: %v %v, want one", snap, err)
	}
	if snap.Version != 8 {
		t.Fatalf("snapshot at version %d, want the last one that fitted: version 8, 400,000 bytes of notes", snap.Version)
	}
}
