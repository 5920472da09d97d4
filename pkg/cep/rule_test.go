package cep

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/stream"
)

func TestParseRuleRefusesNamingThePart(t *testing.T) {
	for _, tc := range []struct{ doc, part, reason string }{
		{`{"pattern":[{"begin":"a","type":"x"}]}`, "id", "required"},
		// null is no rule without an id: it is no rule at all.
		{`null`, "", "must be a JSON object, not null"},
		{`{"id":"bad id","pattern":[{"begin":"a","type":"x"}]}`, "id", "letters"},
		{`{"id":"r"}`, "pattern", "required"},
		// A key twice is most likely another key misspelt as it.
		{`{"id":"r","pattern":[{"begin":"a","type":"x"}],"keys":["k1","k2","k1"]}`, "keys[2]", `"k1" is keys[0] again`},
		{`{"id":"r","pattern":[{"type":"x"}]}`, "pattern[0]", "names no step"},
		{`{"id":"r","pattern":[{"followedBy":"a","type":"x"}]}`, "pattern[0]", "first step must be"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"},{"begin":"b","type":"y"}],"within":"1m"}`, "pattern[1].begin", "only the first step"},
		{`{"id":"r","pattern":[{"begin":"a","next":"b","type":"x"}]}`, "pattern[0]", "more than one"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"},{"followedBy":"a","type":"y"}],"within":"1m"}`, "pattern[1]", "used by an earlier step"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"},{"followedBy":"b","type":"y"}]}`, "within", "required"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"},{"followedBy":"b","type":"y"}],"within":"25h"}`, "within", "at most 24h"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"},{"followedBy":"b","type":"y"}],"within":"ten minutes"}`, "within", "not a duration"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"},{"followedBy":"b","type":"y"}],"within":"9999999999h"}`, "within", "9999999999h is longer than a duration can be (2562047h47m16.854775807s, about 292 years); at most 24h0m0s"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"}],"within":"1m"}`, "within", "no time to be within"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"},{"notFollowedBy":"b","type":"y"},{"followedBy":"c","type":"z"}],"within":"1m"}`, "pattern[1].notFollowedBy", "last step"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","where":"data.amount >"}]}`, "pattern[0].where", "at column 14: expected a value"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","where":"data.amount = 5"}]}`, "pattern[0].where", `compare with "=="`},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","where":"data.country == NZ"}]}`, "pattern[0].where", "quote strings"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","where":"data.tier in ('a', 'b'"}]}`, "pattern[0].where", `expected "," or ")"`},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","where":"amount > 5"}]}`, "pattern[0].where", "not a path"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","where":"data.a > true"}]}`, "pattern[0].where", "compares numbers or strings"},
		{`{"id":"r","pattern":[{"begin":"a"}]}`, "pattern[0]", "matches every event"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","timesOrMore":1}],"within":"1m"}`, "pattern[0].timesOrMore", "from 2"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","timesOrMore":3},{"followedBy":"b","type":"y"}],"within":"1m"}`, "pattern[0]", "one step only"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","sum":"data.amount"}],"within":"1m"}`, "pattern[0].atLeast", "required with sum"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","sum":"key","atLeast":5}],"within":"1m"}`, "pattern[0].sum", "want a data field"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","timesOrMore":3}],"within":"1m","afterMatch":"noSkip"}`, "afterMatch", "threshold"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"}],"afterMatch":"skipToNext"}`, "afterMatch", "want"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"}],"keys":["a"],"keyPrefix":"b"}`, "keyPrefix", "one or the other"},
		// An empty list would read every key, the opposite of what it
		// says: leaving keys out is how a rule reads every key.
		{`{"id":"r","pattern":[{"begin":"a","type":"x"}],"keys":[]}`, "keys", "leave keys out to read every key"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","when":"x"}]}`, "pattern[0].when", `unknown field; did you mean "where"? (known: begin, next, followedBy, notFollowedBy, type, where, timesOrMore, sum, atLeast)`},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","timesOrMore":"3"}],"within":"1m"}`, "pattern[0].timesOrMore", "must be a whole number from 2 to 1000, not a string"},
		// Ingest refuses control characters in an event's type and key:
		// a rule naming one could never match.
		{`{"id":"r","pattern":[{"begin":"a","type":"x"},{"followedBy":"b","type":"payment\t"}],"within":"1m"}`, "pattern[1].type", "control character U+0009"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"}],"keys":["acct-1","acct\n2"]}`, "keys[1]", "control character U+000A"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"}],"keyPrefix":"vip\u001b"}`, "keyPrefix", "control character U+001B"},
		// So are characters that show as nothing or break the line.
		{`{"id":"r","pattern":[{"begin":"a","type":"x"},{"followedBy":"b","type":"\ufeffpayment"}],"within":"1m"}`, "pattern[1].type", "holds invisible character U+FEFF at byte 0: no event's type can (ingest refuses it), so the rule could never match"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"}],"keys":["acct-1","acct\u20282"]}`, "keys[1]", "line separator U+2028 at byte 4"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"}],"keyPrefix":"vip\u202e"}`, "keyPrefix", "bidirectional control U+202E at byte 3"},
	} {
		_, err := ParseRule([]byte(tc.doc))
		var re *RuleError
		if !errors.As(err, &re) || re.Part != tc.part || !strings.Contains(re.Reason, tc.reason) {
			t.Errorf("%s:\n got %v\nwant part %q with %q", tc.doc, err, tc.part, tc.reason)
		}
	}
}

func TestRuleKinds(t *testing.T) {
	for doc, want := range map[string]Kind{
		`{"id":"f","pattern":[{"begin":"big","type":"payment","where":"data.amount > 100"}]}`:                                                  Filter,
		`{"id":"s","pattern":[{"begin":"a","type":"x"},{"next":"b","type":"y"}],"within":"1m"}`:                                                Sequence,
		`{"id":"n","pattern":[{"begin":"a","type":"order"},{"notFollowedBy":"paid","type":"payment"}],"within":"15m"}`:                         Sequence,
		`{"id":"c","pattern":[{"begin":"fails","type":"login_failed","timesOrMore":5}],"within":"1m"}`:                                         Count,
		`{"id":"m","pattern":[{"begin":"spend","type":"payment","sum":"data.amount","atLeast":1000}],"within":"1h"}`:                           Sum,
		`{"id":"k","pattern":[{"begin":"a","where":"data.x == 1"}],"keys":["k1","k2"],"description":"any type, two keys"}`:                     Filter,
		`{"id":"p","pattern":[{"begin":"a","type":"x"},{"followedBy":"b","type":"x"}],"within":"1s","keyPrefix":"vip-","afterMatch":"noSkip"}`: Sequence,
	} {
		r, err := ParseRule([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if r.Kind != want {
			t.Errorf("%s: kind %d, want %d", doc, r.Kind, want)
		}
	}
}

func env(typ, data string) *stream.Envelope {
	return &stream.Envelope{ID: "e", Type: typ, Key: "acct-1", Data: json.RawMessage(data), OccurredAt: time.Unix(0, 0)}
}

func TestWhereClauses(t *testing.T) {
	ev := env("payment", `{"amount": 120.5, "country": "NZ", "tier": "gold", "items": [1,2], "coupon": null, "ok": true, "n": {"x": 3}}`)
	for src, want := range map[string]bool{
		"data.amount > 100":                                    true,
		"data.amount >= 120.5 && data.amount <= 120.5":         true,
		"data.amount < 100":                                    false,
		"data.amount == 120.5":                                 true,
		"data.amount != 120.5":                                 false,
		"data.country == 'NZ'":                                 true,
		`data.country == "NZ"`:                                 true,
		"data.country != 'AU'":                                 true,
		"data.country in ('AU', 'NZ')":                         true,
		"data.country not in ('AU', 'NZ')":                     false,
		"data.tier in ('gold','platinum') and key == 'acct-1'": true,
		"data.missing > 1":                                     false,
		"data.missing != 1":                                    false,
		"not (data.missing == 1)":                              true,
		"exists(data.coupon)":                                  true,
		"not exists(data.gone)":                                true,
		"data.coupon == null":                                  true,
		"data.ok == true":                                      true,
		"data.n.x >= 3 or data.amount < 0":                     true,
		"data.country > 'AA'":                                  true,
		"data.amount > 'A'":                                    false,
		"type == 'payment' && (data.amount > 1000 || data.country == 'NZ')": true,
		"data.amount > -5e2": true,
		"id == 'e'":          true,
	} {
		e, err := parseExpr(src)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if got := e.eval(ev); got != want {
			t.Errorf("%s: %v, want %v", src, got, want)
		}
	}
}

// TestWhereClausesOnNumbersPastFloat64 reads numbers past what a float64
// holds (ingest takes them: JSON bounds no number): they are numbers as
// big as any, not missing fields, so "data.amount > 100" cannot be evaded
// by sending 1e400, and exists(data.amount) holds.
func TestWhereClausesOnNumbersPastFloat64(t *testing.T) {
	for _, c := range []struct {
		data, src string
		want      bool
	}{
		{`{"amount": 1e400}`, "data.amount > 100", true},
		{`{"amount": 1e400}`, "data.amount >= 1.7e308", true},
		{`{"amount": 1e400}`, "data.amount < 100", false},
		{`{"amount": 1e400}`, "data.amount == 100", false},
		{`{"amount": 1e400}`, "data.amount != 100", true},
		{`{"amount": 1e400}`, "exists(data.amount)", true},
		{`{"amount": -1e400}`, "data.amount < -1.7e308", true},
		{`{"amount": -1e400}`, "data.amount > 0", false},
		{`{"coupon": 1e999}`, "not exists(data.coupon)", false},
	} {
		e, err := parseExpr(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if got := e.eval(env("payment", c.data)); got != c.want {
			t.Errorf("%s on %s: %v, want %v", c.src, c.data, got, c.want)
		}
	}
}

// TestRuleNamesAnyKeyAndTypeAnEventCanHave: an event's key and type are
// bounded in characters (256, as Kinesis bounds a partition key), so a rule
// names one of 256 two-byte characters, and refuses one of 257 naming the
// part.
func TestRuleNamesAnyKeyAndTypeAnEventCanHave(t *testing.T) {
	long := strings.Repeat("é", stream.MaxKeyLength) // 512 bytes, 256 characters
	ev := &stream.Envelope{ID: "e1", Type: long, Key: long, OccurredAt: time.Unix(0, 0), SentAt: time.Unix(0, 0)}
	if err := ev.Validate(); err != nil {
		t.Fatalf("the event: %v", err)
	}
	for _, doc := range []string{
		`{"id":"k","pattern":[{"begin":"a","type":"` + long + `"}],"keys":["` + long + `"]}`,
		`{"id":"p","pattern":[{"begin":"a","type":"` + long + `"}],"keyPrefix":"` + long + `"}`,
	} {
		r, err := ParseRule([]byte(doc))
		if err != nil {
			t.Errorf("%.60s…: %v", doc, err)
			continue
		}
		if !r.appliesToKey(ev.Key) || !r.Steps[0].matches(ev) {
			t.Errorf("%.60s…: does not match the event", doc)
		}
	}
	for _, tc := range []struct{ doc, part string }{
		{`{"id":"r","pattern":[{"begin":"a","type":"x"}],"keys":["` + long + `é"]}`, "keys[0]"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"}],"keyPrefix":"` + long + `é"}`, "keyPrefix"},
		{`{"id":"r","pattern":[{"begin":"a","type":"` + long + `é"}]}`, "pattern[0].type"},
	} {
		_, err := ParseRule([]byte(tc.doc))
		var re *RuleError
		if !errors.As(err, &re) || re.Part != tc.part || !strings.Contains(re.Reason, "256 characters") {
			t.Errorf("%.60s…: got %v, want part %s refused at 256 characters", tc.doc, err, tc.part)
		}
	}
}

// TestWhereClausesOnFieldsNamedInAnyScript: a data field's name may hold
// any letters; the where clause reads it by characters, not bytes (it
// refused data.größe with `unexpected "¶"`, half of the ö).
func TestWhereClausesOnFieldsNamedInAnyScript(t *testing.T) {
	ev := env("payment", `{"größe": 42, "año": 2026, "café": "noir", "金额": 120}`)
	for src, want := range map[string]bool{
		"data.größe > 40":                  true,
		"data.año == 2026":                 true,
		"data.café == 'noir'":              true,
		"data.金额 >= 100":                   true,
		"exists(data.größe_x)":             false,
		"data.größe > 40 && data.金额 < 100": false,
	} {
		e, err := parseExpr(src)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if got := e.eval(ev); got != want {
			t.Errorf("%s: %v, want %v", src, got, want)
		}
	}
	// A character that is no letter is named whole.
	if _, err := parseExpr("data.a > 5 € 3"); err == nil || !strings.Contains(err.Error(), "€") {
		t.Errorf("data.a > 5 € 3: %v, want it to name the €", err)
	}
}

// TestRuleErrorsQuoteValuesCut: a refusal repeats at most maxEchoBytes of
// a value it was sent (docs/cep.md), not the whole of a 7 KB one; the
// rules URL and cmd/rules answer with it.
func TestRuleErrorsQuoteValuesCut(t *testing.T) {
	big := strings.Repeat("<", 7000)
	for _, tc := range []struct{ doc, part string }{
		{`{"id":"` + big + `","pattern":[{"begin":"a","type":"x"}]}`, "id"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"},{"next":"b","type":"y"}],"within":"` + big + `"}`, "within"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"},{"next":"b","type":"y"}],"within":"` + strings.Repeat("0", 7000) + `1ns"}`, "within"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x"}],"afterMatch":"` + big + `"}`, "afterMatch"},
		{`{"id":"r","pattern":[{"begin":"` + big + `","type":"x"}]}`, "pattern[0].begin"},
		{`{"id":"r","pattern":[{"begin":"a","type":"x","sum":"` + big + `","atLeast":1}],"within":"1m"}`, "pattern[0].sum"},
	} {
		_, err := ParseRule([]byte(tc.doc))
		var re *RuleError
		if !errors.As(err, &re) || re.Part != tc.part {
			t.Errorf("%.60s…: got %.300v, want part %s", tc.doc, err, tc.part)
			continue
		}
		if n := len(err.Error()); n > maxEchoBytes+200 || !strings.Contains(err.Error(), "…") {
			t.Errorf("%s: an error of %d bytes: %.300s", tc.part, n, err)
		}
	}
}

// TestParseRuleHoldsEveryNumberToItsRange: a number in a rule is refused
// by the part that holds it, quoting that part's own range, whatever is
// wrong with it — zero (which used to read as "left out", so that
// timesOrMore 0 made a filter, and its within was blamed), negative, a
// fraction, past what a float64 holds, or a hostile number of digits.
func TestParseRuleHoldsEveryNumberToItsRange(t *testing.T) {
	count := func(n string, within bool) string {
		doc := `{"id":"r","pattern":[{"begin":"a","type":"page_view","timesOrMore":` + n + `}]`
		if within {
			doc += `,"within":"1m"`
		}
		return doc + "}"
	}
	sum := func(n string) string {
		return `{"id":"r","pattern":[{"begin":"a","type":"payment","sum":"data.amount","atLeast":` + n + `}],"within":"1m"}`
	}
	const inRange = "must be a whole number from 2 to 1000, not "
	for _, tc := range []struct{ doc, part, reason string }{
		{count("0", false), "pattern[0].timesOrMore", inRange + "0"},
		{count("0", true), "pattern[0].timesOrMore", inRange + "0"},
		{count("1", true), "pattern[0].timesOrMore", inRange + "1"},
		{count("-3", true), "pattern[0].timesOrMore", inRange + "-3"},
		{count("1001", true), "pattern[0].timesOrMore", inRange + "1001"},
		{count("2.5", true), "pattern[0].timesOrMore", inRange + "2.5"},
		// JSON has no integer type, but the strict reader takes a whole
		// number in one spelling only, as it does for every int field.
		{count("2.0", true), "pattern[0].timesOrMore", inRange + "2.0"},
		{count("1e400", true), "pattern[0].timesOrMore", inRange + "1e400"},
		{count("-0", true), "pattern[0].timesOrMore", inRange + "-0"},
		{count(`"3"`, true), "pattern[0].timesOrMore", inRange + "a string"},
		{count("true", true), "pattern[0].timesOrMore", inRange + "a boolean"},
		{count(strings.Repeat("1", 5_000), true), "pattern[0].timesOrMore", inRange + strings.Repeat("1", 40) + "…"},
		{sum("1e400"), "pattern[0].atLeast", "1e400 is out of range of a number"},
		{sum(`"5"`), "pattern[0].atLeast", "must be a JSON number, not a string"},
	} {
		_, err := ParseRule([]byte(tc.doc))
		var re *RuleError
		if !errors.As(err, &re) || re.Part != tc.part || !strings.Contains(re.Reason, tc.reason) {
			t.Errorf("%.120s:\n got %.300v\nwant part %q with %q", tc.doc, err, tc.part, tc.reason)
		}
	}
	// A count within range, and a timesOrMore of null (left out), still
	// parse as before.
	for doc, kind := range map[string]Kind{
		count("2", true):     Count,
		count("1000", true):  Count,
		count("null", false): Filter,
	} {
		r, err := ParseRule([]byte(doc))
		if err != nil || r.Kind != kind {
			t.Errorf("%s: got %v, %v; want kind %v", doc, r, err, kind)
		}
	}
}

// TestStoredRuleWithTimesOrMoreZeroStillLoads: rules added before 0 was
// refused were stored as sent and ran as filters; the table keeps them,
// and they must still load, as filters, to be listed and deleted.
func TestStoredRuleWithTimesOrMoreZeroStillLoads(t *testing.T) {
	r, err := parseRule([]byte(`{"id":"hr-all","pattern":[{"begin":"a","type":"page_view","timesOrMore":0}]}`), true)
	if err != nil || r.Kind != Filter {
		t.Fatalf("stored rule: got %v, %v; want a filter", r, err)
	}
}

// TestStoredRuleWithEmptyKeysStillLoads: rules added before an empty keys
// list was refused were stored as sent and read every key; the table keeps
// them, and they must still load, reading every key, to be listed and
// deleted.
func TestStoredRuleWithEmptyKeysStillLoads(t *testing.T) {
	r, err := parseRule([]byte(`{"id":"all","pattern":[{"begin":"a","type":"x"}],"keys":[]}`), true)
	if err != nil || !r.appliesToKey("u1") {
		t.Fatalf("stored rule: got %+v, %v; want it loaded, reading key u1", r, err)
	}
}

// TestLongWhereIsRefusedNamingTheLimit: a where clause past its bound is
// refused naming the field, its length and the bound, with no column: the
// clause is not wrong at a place, it is too long (it was "at column 1024:
// is 8010 characters long", a column where nothing is wrong).
func TestLongWhereIsRefusedNamingTheLimit(t *testing.T) {
	for _, tc := range []struct {
		where, want string
	}{
		{"data.a == '" + strings.Repeat("x", 1014) + "'", "is 1026 bytes long; a where clause is at most 1024 bytes"},
		{strings.Repeat("data.a == 1 && ", 534) + "true", "is 8014 bytes long; a where clause is at most 1024 bytes"},
		// Bytes, not characters: 600 'ü' are 1,200 bytes.
		{"data.a == '" + strings.Repeat("ü", 600) + "'", "is 1212 bytes long; a where clause is at most 1024 bytes"},
	} {
		doc := `{"id":"r","pattern":[{"begin":"a","type":"x","where":"` + tc.where + `"}]}`
		_, err := ParseRule([]byte(doc))
		var re *RuleError
		if !errors.As(err, &re) || re.Part != "pattern[0].where" || re.Reason != tc.want {
			t.Errorf("a where of %d bytes: got %v\nwant part pattern[0].where with %q", len(tc.where), err, tc.want)
		}
	}
}
