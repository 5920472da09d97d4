package es_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// datedLedger is the ledger whose Deposit carries a time, "at", that it
// reads as one.
type datedLedger struct{ ledger }

func (datedLedger) TimeFields(commandType string) []string {
	if commandType == "Deposit" {
		return []string{"at"}
	}
	return nil
}

// TestRetrySpelledAnotherWayIsReplayed: a command sent again with its data
// spelt another way — keys in another order, escapes, its time with a "z"
// or an offset — is the same command and gets its first answer; the same
// id with other data is another command (422 naming the id).
func TestRetrySpelledAnotherWayIsReplayed(t *testing.T) {
	_, store := newStore(t)
	x := es.NewExecutor[account](store, datedLedger{})
	const first = `{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":5,"Owner":"Ada","at":"2026-12-05T19:30:00Z","tags":{"b":1,"a":[1,2]}}}`
	accepted := run(t, x, []byte(first))
	if accepted.Status != es.StatusAccepted {
		t.Fatalf("first: %+v %s", accepted, accepted.Body)
	}
	for _, tt := range []struct {
		name, body string
		same       bool
	}{
		{"as sent", first, true},
		{"keys in another order", `{"data":{"tags":{"a":[1,2],"b":1},"at":"2026-12-05T19:30:00Z","Owner":"Ada","amount":5},"accountId":"a1","type":"Deposit","id":"c1"}`, true},
		{"white space and escapes", `{"id":"c1","type":"Deposit","accountId":"a1","data":{ "amount" : 5, "\u004fwner":"\u0041da", "at":"2026-12-05T19:30:00\u005a", "tags":{"b":1,"a":[ 1 , 2 ]}}}`, true},
		{"the time with a lower-case z and t", `{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":5,"Owner":"Ada","at":"2026-12-05t19:30:00z","tags":{"b":1,"a":[1,2]}}}`, true},
		{"the time at an offset", `{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":5,"Owner":"Ada","at":"2026-12-05T20:30:00+01:00","tags":{"b":1,"a":[1,2]}}}`, true},
		{"the time with zero fractions", `{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":5,"Owner":"Ada","at":"2026-12-05T19:30:00.000Z","tags":{"b":1,"a":[1,2]}}}`, true},
		{"another amount", `{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":6,"Owner":"Ada","at":"2026-12-05T19:30:00Z","tags":{"b":1,"a":[1,2]}}}`, false},
		{"another time", `{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":5,"Owner":"Ada","at":"2026-12-05T19:30:00.001Z","tags":{"b":1,"a":[1,2]}}}`, false},
		{"another owner", `{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":5,"Owner":"ada","at":"2026-12-05T19:30:00Z","tags":{"b":1,"a":[1,2]}}}`, false},
		{"a list in another order", `{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":5,"Owner":"Ada","at":"2026-12-05T19:30:00Z","tags":{"b":1,"a":[2,1]}}}`, false},
		{"a number as a string", `{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":5,"Owner":"Ada","at":"2026-12-05T19:30:00Z","tags":{"b":"1","a":[1,2]}}}`, false},
		{"a field more", `{"id":"c1","type":"Deposit","accountId":"a1","data":{"amount":5,"Owner":"Ada","at":"2026-12-05T19:30:00Z","tags":{"b":1,"a":[1,2]},"split":1}}`, false},
		{"an expected version", `{"id":"c1","type":"Deposit","accountId":"a1","expectedVersion":0,"data":{"amount":5,"Owner":"Ada","at":"2026-12-05T19:30:00Z","tags":{"b":1,"a":[1,2]}}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, x, []byte(tt.body))
			switch {
			case tt.same && (!res.Replayed || string(res.Body) != string(accepted.Body)):
				t.Errorf("%d %s (replayed %v), want the first answer replayed: %s", res.HTTPStatus, res.Body, res.Replayed, accepted.Body)
			case !tt.same && (res.HTTPStatus != 422 || !strings.Contains(string(res.Body), `"field":"id"`) || !strings.Contains(string(res.Body), "was used for another command")):
				t.Errorf("%d %s, want 422: the id was used for another command", res.HTTPStatus, res.Body)
			}
		})
	}
	if _, v, err := x.Load(t.Context(), "a1"); err != nil || v != 1 {
		t.Errorf("a1 at version %d (%v), want 1: no retry appended", v, err)
	}
}

// TestFingerprintIsTheCommandNotItsSpelling: two commands have one
// fingerprint when they have the same type, aggregate, expected version
// and data equal as JSON values (their times, the fields the type reads as
// times, equal as times; their numbers as written, as a decider reads a
// whole number), and two fingerprints otherwise.
func TestFingerprintIsTheCommandNotItsSpelling(t *testing.T) {
	const schedule = `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}}`
	for _, tt := range []struct {
		name, a, b string
		same       bool
	}{
		{"as sent", schedule, schedule, true},
		{"data keys in another order", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"rows":2,"title":"Hamlet","seatsPerRow":5,"startsAt":"2026-12-05T19:30:00Z"}}`, true},
		{"command keys in another order, another id", schedule, `{"data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5},"showId":"show-1","type":"ScheduleShow","id":"c2"}`, true},
		{"white space", schedule, "{\"id\":\"c1\",\"type\":\"ScheduleShow\",\"showId\":\"show-1\",\"data\":{\n\t\"title\" : \"Hamlet\",\r\n \"startsAt\":\"2026-12-05T19:30:00Z\", \"rows\":2 ,\"seatsPerRow\":5 }}", true},
		{"escapes in keys and strings", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"t\u0069tle":"H\u0061mlet","startsAt":"2026-12-05T19:30:00\u005a","rows":2,"seatsPerRow":5}}`, true},
		{"escapes for what needs none", `{"id":"c1","type":"T","showId":"s","data":{"a":"<&>/é😀"}}`, `{"id":"c1","type":"T","showId":"s","data":{"a":"\u003c\u0026\u003e\/\u00e9\ud83d\ude00"}}`, true},
		{"nested keys in another order", `{"id":"c1","type":"T","showId":"s","data":{"h":{"name":"Ada","email":"a@x"},"l":[{"b":1,"a":2}]}}`, `{"id":"c1","type":"T","showId":"s","data":{"l":[{"a":2,"b":1}],"h":{"email":"a@x","name":"Ada"}}}`, true},
		{"data null and no data", `{"id":"c1","type":"T","showId":"s","data":null}`, `{"id":"c1","type":"T","showId":"s","data":{}}`, true},
		{"the time with a lower-case z", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00z","rows":2,"seatsPerRow":5}}`, true},
		{"the time with a lower-case t", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05t19:30:00Z","rows":2,"seatsPerRow":5}}`, true},
		{"the time at an offset", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T20:30:00+01:00","rows":2,"seatsPerRow":5}}`, true},
		{"the time at offset zero", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00+00:00","rows":2,"seatsPerRow":5}}`, true},
		{"the time with zero fractions", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00.000000Z","rows":2,"seatsPerRow":5}}`, true},
		{"a time field that is no time, as written", `{"id":"c1","type":"T","showId":"s","data":{"startsAt":"tonight"}}`, `{"id":"c1","type":"T","showId":"s","data":{"startsAt":"tonight"}}`, true},

		{"another title", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Lear","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}}`, false},
		{"a field more", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5,"x":1}}`, false},
		{"another instant", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00+01:00","rows":2,"seatsPerRow":5}}`, false},
		{"a millisecond later", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00.001Z","rows":2,"seatsPerRow":5}}`, false},
		{"a time field that is no time, in another case", `{"id":"c1","type":"T","showId":"s","data":{"startsAt":"tonight"}}`, `{"id":"c1","type":"T","showId":"s","data":{"startsAt":"Tonight"}}`, false},
		{"a field the type does not read as a time", `{"id":"c1","type":"T","showId":"s","data":{"endsAt":"2026-12-05T19:30:00Z"}}`, `{"id":"c1","type":"T","showId":"s","data":{"endsAt":"2026-12-05T19:30:00z"}}`, false},
		{"a time below the top level", `{"id":"c1","type":"T","showId":"s","data":{"x":{"startsAt":"2026-12-05T19:30:00Z"}}}`, `{"id":"c1","type":"T","showId":"s","data":{"x":{"startsAt":"2026-12-05T19:30:00z"}}}`, false},
		{"another number", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":3,"seatsPerRow":5}}`, false},
		{"a whole number with a fraction", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2.0,"seatsPerRow":5}}`, false},
		{"a whole number with an exponent", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2e0,"seatsPerRow":5}}`, false},
		{"minus zero", `{"id":"c1","type":"T","showId":"s","data":{"n":0}}`, `{"id":"c1","type":"T","showId":"s","data":{"n":-0}}`, false},
		{"past float64's precision", `{"id":"c1","type":"T","showId":"s","data":{"n":9007199254740993}}`, `{"id":"c1","type":"T","showId":"s","data":{"n":9007199254740992}}`, false},
		{"a number as a string", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":"2","seatsPerRow":5}}`, false},
		{"null and no field", `{"id":"c1","type":"T","showId":"s","data":{"holder":null}}`, `{"id":"c1","type":"T","showId":"s","data":{}}`, false},
		{"a list in another order", `{"id":"c1","type":"T","showId":"s","data":{"seats":["A1","A2"]}}`, `{"id":"c1","type":"T","showId":"s","data":{"seats":["A2","A1"]}}`, false},
		{"keys in another case", `{"id":"c1","type":"T","showId":"s","data":{"title":"x"}}`, `{"id":"c1","type":"T","showId":"s","data":{"Title":"x"}}`, false},
		{"another type", schedule, `{"id":"c1","type":"ScheduleShows","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}}`, false},
		{"another show", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-2","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}}`, false},
		{"an expected version", schedule, `{"id":"c1","type":"ScheduleShow","showId":"show-1","expectedVersion":0,"data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := es.ParseCommand([]byte(tt.a), "showId")
			if err != nil {
				t.Fatal(err)
			}
			b, err := es.ParseCommand([]byte(tt.b), "showId")
			if err != nil {
				t.Fatal(err)
			}
			fa, fb := a.Fingerprint("startsAt"), b.Fingerprint("startsAt")
			if (fa == fb) != tt.same {
				t.Errorf("fingerprints %s and %s: same %v, want %v\n%s\n%s", fa, fb, fa == fb, tt.same, tt.a, tt.b)
			}
			if !a.RecordedAs(fa, fb) && tt.same || a.RecordedAs(fb, fa) && !tt.same {
				t.Errorf("RecordedAs(%s, %s) = %v, want %v", fb, fa, a.RecordedAs(fb, fa), tt.same)
			}
		})
	}
}

// spellingFingerprint is the fingerprint as command records held it
// before fingerprints read data as a value: the data hashed as sent,
// compacted.
func spellingFingerprint(t *testing.T, typ, aggregate, data string) string {
	t.Helper()
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(data)); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte(typ + "\n" + aggregate + "\n-\n" + compact.String()))
	return hex.EncodeToString(h[:])
}

// TestRecordsOfSpellingFingerprintsStillMatch: a command record written
// before fingerprints read data as a value (its fingerprint hashes the
// data as sent) still answers a retry of its command sent the same way
// within the record's day, and still refuses the id for another command.
func TestRecordsOfSpellingFingerprintsStillMatch(t *testing.T) {
	ctx := t.Context()
	_, store := newStore(t)
	x := es.NewExecutor[account](store, datedLedger{})
	const data = `{"at":"2026-12-05T19:30:00z","amount":5}` // not the one spelling of its value
	now := time.Now().UTC()
	old := &es.CommandRecord{ID: "c-old", Fingerprint: spellingFingerprint(t, "Deposit", "a1", data), Status: es.StatusAccepted,
		HTTPStatus: 200, Body: []byte(`{"id":"c-old","status":"accepted","accountId":"a1","version":1}`),
		AggregateID: "a1", Version: 1, RecordedAt: now.Add(-time.Hour), ExpiresAt: now.Add(23 * time.Hour)}
	if existing, err := store.PutRecord(ctx, old); err != nil || existing != nil {
		t.Fatalf("putting the old record: %v %v", existing, err)
	}
	cmd, err := es.ParseCommand([]byte(`{"id":"c-old","type":"Deposit","accountId":"a1","data":`+data+`}`), "accountId")
	if err != nil {
		t.Fatal(err)
	}
	if got := cmd.SpellingFingerprint(); got != old.Fingerprint {
		t.Fatalf("SpellingFingerprint %s, want the fingerprint records held: %s", got, old.Fingerprint)
	}
	res := run(t, x, []byte(`{"id":"c-old","type":"Deposit","accountId":"a1","data":`+data+`}`))
	if !res.Replayed || string(res.Body) != string(old.Body) {
		t.Fatalf("retry sent as before: %d %s (replayed %v), want the recorded answer %s", res.HTTPStatus, res.Body, res.Replayed, old.Body)
	}
	other := run(t, x, []byte(`{"id":"c-old","type":"Deposit","accountId":"a1","data":{"at":"2026-12-05T19:30:00z","amount":6}}`))
	if other.HTTPStatus != 422 || !strings.Contains(string(other.Body), "was used for another command") {
		t.Fatalf("another command under the old record's id: %d %s, want 422", other.HTTPStatus, other.Body)
	}
}

// TestFingerprintSpellsDataCanonically: without time fields, Fingerprint
// hashes the data in strictjson.AppendCanonical's spelling, the one the
// dedupe ledger fingerprints an event's data in: one canonical form of a
// JSON value in the project, not two that could drift apart.
func TestFingerprintSpellsDataCanonically(t *testing.T) {
	for _, data := range []string{
		`{}`, `{"b":1,"a":[true,null,{"d":"\u00e9","c":"\/"}]}`, `{"\u0063ity":"Z\u00fcrich","n":-0.50e+3}`,
		`{"s":"<&>\u2028\u0000\t\"\\😀"}`, `{"z":{"y":{"x":{}}},"a":""}`,
	} {
		cmd, err := es.ParseCommand([]byte(`{"id":"c1","type":"T","showId":"s","data":`+data+`}`), "showId")
		if err != nil {
			t.Fatal(err)
		}
		canonical, ok := strictjson.AppendCanonical(nil, cmd.Data)
		if !ok {
			t.Fatalf("AppendCanonical refuses %s", cmd.Data)
		}
		spelt := cmd
		spelt.Data = canonical
		if got, want := cmd.Fingerprint(), spelt.SpellingFingerprint(); got != want {
			t.Errorf("data %s: Fingerprint %s, want the hash of its canonical spelling %s (%s)", data, got, want, canonical)
		}
	}
}
