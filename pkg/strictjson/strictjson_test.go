package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCheck: what one reader refuses, with the path and kind of each
// refusal, and what it accepts.
func TestCheck(t *testing.T) {
	deepArrays := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name string
		doc  string
		o    Options
		kind Kind // 0: accepted
		path string
		text string
	}{
		{name: "an object", doc: `{"a":[1,2.5e3,-0,"x",true,false,null,{}],"b":{"c":"\u00e9\ud83d\ude00\n"}}`},
		{name: "raw UTF-8 of every width", doc: `{"k":"é€😀"}`},
		{name: "a surrogate pair", doc: `"\ud83d\ude00"`},
		{name: "the same key in two objects", doc: `[{"a":1},{"a":2}]`},
		{name: "nested exactly to the bound", doc: deepArrays(MaxDepth)},

		{name: "invalid UTF-8 in a value", doc: `{"a":{"b":"caf` + "\xe9" + `"}}`, kind: Encoding, path: "a.b", text: "invalid UTF-8 at byte 14 of the document (byte 0xe9)"},
		{name: "invalid UTF-8 in a key", doc: `{"a` + "\xff" + `":1}`, kind: Encoding, path: "", text: "invalid UTF-8"},
		{name: "a truncated sequence", doc: `["` + "\xe2\x82" + `"]`, kind: Encoding, path: "[0]", text: "invalid UTF-8"},
		{name: "an overlong encoding", doc: `["` + "\xc0\xaf" + `"]`, kind: Encoding, path: "[0]", text: "invalid UTF-8"},
		{name: "an encoded surrogate", doc: `["` + "\xed\xa0\x80" + `"]`, kind: Encoding, path: "[0]", text: "invalid UTF-8"},
		{name: "a lone high surrogate", doc: `{"a":"x\ud800"}`, kind: Encoding, path: "a", text: `\ud800 at byte 7 is a high surrogate without its low half`},
		{name: "a high surrogate before another escape", doc: `{"a":"\ud800\u0041"}`, kind: Encoding, path: "a", text: "high surrogate without its low half"},
		{name: "a lone low surrogate", doc: `{"a":["\udc00"]}`, kind: Encoding, path: "a[0]", text: "lone low surrogate"},
		{name: "a surrogate in a key", doc: `{"\udfff":1}`, kind: Encoding, path: "", text: "lone low surrogate"},
		{name: "a raw control character", doc: "{\"a\":\"x\x01\"}", kind: Encoding, path: "a", text: "control character 0x01"},

		{name: "two values on two lines", doc: "{\"id\":\"a\"}\n{\"id\":\"b\"}\n", kind: Syntax, text: "must hold exactly one value; another begins on line 2"},
		{name: "two values on one line", doc: `{"id":"a"} {"id":"b"}`, kind: Syntax, text: "must hold exactly one value; another begins on line 1"},
		{name: "a key twice", doc: `{"id":"one","id":"two"}`, kind: Duplicate, path: "id", text: `duplicate object key "id"`},
		{name: "a key twice at depth", doc: `{"a":[{"b":{"c":1,"d":2,"c":3}}]}`, kind: Duplicate, path: "a[0].b.c", text: `duplicate object key "c"`},
		{name: "a key twice, once escaped", doc: `{"within":"1m","wit\u0068in":"24h"}`, kind: Duplicate, path: "within", text: "duplicate"},
		{name: "a key twice, once starting with an escape", doc: `{"within":"1m","\u0077ithin":"24h"}`, kind: Duplicate, path: "within", text: "duplicate"},
		{name: "a key twice, once all escapes", doc: `{"a":1,"\u0061":2}`, kind: Duplicate, path: "a", text: "duplicate"},
		{name: "a key twice among many", doc: `{` + manyKeys(500) + `,"k250":0}`, kind: Duplicate, path: "k250", text: "duplicate"},
		{name: "a key that is not an identifier", doc: `{"a b":1,"a b":2}`, kind: Duplicate, path: `["a b"]`, text: "duplicate"},

		{name: "nested past the bound", doc: deepArrays(MaxDepth + 1), kind: Depth, path: strings.Repeat("[0]", MaxDepth), text: "deeper than 64 levels"},
		{name: "nested 5,000 deep", doc: strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000), kind: Depth, path: "a" + strings.Repeat(".a", MaxDepth-1), text: "deeper than 64"},

		{name: "over the size bound", doc: `"` + strings.Repeat("x", 99) + `"`, o: Options{MaxBytes: 100, Name: "rule"}, kind: TooLarge, text: "the rule is 101 bytes; at most 100"},
		{name: "over the default size bound", doc: `"` + strings.Repeat("x", DefaultMaxBytes) + `"`, kind: TooLarge, text: "at most 1048576"},

		{name: "empty", doc: " ", kind: Syntax, text: "is empty"},
		{name: "two values", doc: `{} {}`, kind: Syntax, text: "exactly one value"},
		{name: "truncated", doc: `{"a":[1,`, kind: Syntax, path: "a[1]", text: "ends at byte 8"},
		{name: "a bad literal", doc: `{"a":nul}`, kind: Syntax, path: "a", text: "in a literal"},
		{name: "a leading zero", doc: `[01]`, kind: Syntax, text: "in an array"},
		{name: "a bad escape", doc: `["\x"]`, kind: Syntax, path: "[0]", text: "in an escape"},
		{name: "a short unicode escape", doc: `["\u12"]`, kind: Syntax, path: "[0]", text: `\u escape`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.doc), tc.o)
			if tc.kind == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if e.Kind != tc.kind || e.Path != tc.path || !strings.Contains(e.Reason, tc.text) {
				t.Fatalf("got kind %d path %q: %q\nwant kind %d path %q with %q", e.Kind, e.Path, e.Reason, tc.kind, tc.path, tc.text)
			}
			if len(e.Error()) > 1024 {
				t.Errorf("the message is %d bytes", len(e.Error()))
			}
		})
	}
}

func manyKeys(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `"k` + itoa(i) + `":1`
	}
	return strings.Join(parts, ",")
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

type holder struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
}

type base struct {
	Kind string `json:"kind"`
}

type request struct {
	base
	ID      string            `json:"id"`
	Holder  *holder           `json:"holder"`
	Seats   []string          `json:"seats"`
	Rows    int8              `json:"rows"`
	Count   uint              `json:"count"`
	Amount  float64           `json:"amount"`
	OK      bool              `json:"ok"`
	Tags    map[string]holder `json:"tags"`
	Data    json.RawMessage   `json:"data"`
	Any     any               `json:"any"`
	At      time.Time         `json:"at"`
	Blob    []byte            `json:"blob"`
	Ignored string            `json:"-"`
	GoName  string
}

// TestDecode: unknown fields and type errors are refused by their full
// path, with the did-you-mean hint; what a field can hold is decoded.
// TestDecodeAllowUnknown: with AllowUnknown a key no field has is skipped,
// at any depth and whatever its value, and the known fields decoded; a
// field's name in another case, a key twice and invalid text are still
// refused.
func TestDecodeAllowUnknown(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		kind      Kind
		path      string
	}{
		{name: "new fields at two depths", doc: `{"id":"x","payload":{"deep":[1,{"a":null}]},"holder":{"name":"Ada","phone":"1"}}`},
		{name: "a field in another case", doc: `{"id":"x","ID":"y"}`, kind: Unknown, path: "ID"},
		{name: "a nested field in another case", doc: `{"holder":{"NAME":"Ada"}}`, kind: Unknown, path: "holder.NAME"},
		{name: "an unknown key twice", doc: `{"extra":1,"extra":2}`, kind: Duplicate, path: "extra"},
		{name: "invalid UTF-8 in an unknown field", doc: `{"extra":"` + "\xff" + `"}`, kind: Encoding, path: "extra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r request
			err := Decode([]byte(tc.doc), &r, Options{AllowUnknown: true})
			if tc.kind == 0 {
				if err != nil || r.ID != "x" || r.Holder == nil || r.Holder.Name != "Ada" {
					t.Fatalf("got %+v, %v; want it read, the new fields skipped", r, err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Kind != tc.kind || e.Path != tc.path {
				t.Fatalf("got %v, want kind %d at %q", err, tc.kind, tc.path)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		kind Kind
		path string
		text string
	}{
		{name: "every kind of field", doc: `{"kind":"k","id":"x","holder":{"name":"Ada"},"seats":["A1"],"rows":-128,"count":3,"amount":1e300,"ok":true,
			"tags":{"a b":{"email":"e"}},"data":{"anything":[1,{"x":null}]},"any":[1],"at":"2026-11-29T10:00:00Z","blob":"AAE=","GoName":"g","holder":null}`,
			kind: Duplicate, path: "holder", text: "duplicate"},
		{name: "accepted", doc: `{"kind":"k","id":"x","holder":{"name":"Ada"},"seats":["A1"],"rows":-128,"count":3,"amount":1e300,"ok":true,
			"tags":{"a b":{"email":"e"}},"data":{"anything":[1,{"x":null}]},"any":[1],"at":"2026-11-29T10:00:00Z","blob":"AAE=","GoName":"g"}`},
		{name: "null for anything", doc: `{"holder":null,"seats":null,"rows":null,"tags":null}`},
		{name: "a misspelt field in a nested object", doc: `{"holder":{"nmae":"Ada"}}`, kind: Unknown, path: "holder.nmae", text: `unknown field; did you mean "name"? (known: name, email)`},
		{name: "a field in another case", doc: `{"ID":"x"}`, kind: Unknown, path: "ID", text: `did you mean "id"?`},
		{name: "a field far from any", doc: `{"holder":{"phone":"1"}}`, kind: Unknown, path: "holder.phone", text: "unknown field (known: name, email)"},
		{name: "a field of an embedded struct's", doc: `{"knd":"x"}`, kind: Unknown, path: "knd", text: `did you mean "kind"?`},
		{name: "a field left out with -", doc: `{"Ignored":"x"}`, kind: Unknown, path: "Ignored"},
		{name: "an unknown field in a map's value", doc: `{"tags":{"t1":{"name":"a"},"t2":{"mail":"b"}}}`, kind: Unknown, path: "tags.t2.mail", text: `did you mean "email"?`},
		{name: "a string for a number", doc: `{"rows":"3"}`, kind: Type, path: "rows", text: "must be a JSON number (a whole number), not a string"},
		{name: "a fraction for a whole number", doc: `{"rows":1.5}`, kind: Type, path: "rows", text: "must be a whole number from -128 to 127, not 1.5"},
		{name: "a whole number out of range", doc: `{"rows":128}`, kind: Type, path: "rows", text: "from -128 to 127, not 128"},
		// -0 is 0 in another spelling, which the reader does not take.
		{name: "-0 for a whole number", doc: `{"rows":-0}`, kind: Type, path: "rows", text: "must be a whole number from -128 to 127, not -0"},
		{name: "a negative count", doc: `{"count":-1}`, kind: Type, path: "count", text: "from 0 to"},
		{name: "a number out of range", doc: `{"amount":1e400}`, kind: Type, path: "amount", text: "out of range"},
		{name: "an object for a string in a list", doc: `{"seats":["A1",{"x":1}]}`, kind: Type, path: "seats[1]", text: "must be a JSON string, not an object"},
		{name: "a list for an object", doc: `{"holder":[]}`, kind: Type, path: "holder", text: "must be a JSON object, not an array"},
		{name: "a number for a boolean", doc: `{"ok":1}`, kind: Type, path: "ok", text: "must be a JSON boolean, not a number"},
		{name: "a number for bytes", doc: `{"blob":1}`, kind: Type, path: "blob", text: "base64"},
		{name: "an array at the top", doc: `[]`, kind: Type, path: "", text: "must be a JSON object, not an array"},
		// encoding/json leaves the struct as it was: every field would read
		// as not sent ("id: required" for a body of null).
		{name: "null at the top", doc: ` null `, kind: Type, path: "", text: "must be a JSON object, not null"},
		{name: "a custom decoder's refusal", doc: `{"at":"tomorrow"}`, kind: Type, text: "tomorrow"},
		{name: "invalid UTF-8 before decoding", doc: `{"holder":{"name":"` + "\xff" + `"}}`, kind: Encoding, path: "holder.name"},
		{name: "a lone surrogate before decoding", doc: `{"holder":{"email":"\ud800"}}`, kind: Encoding, path: "holder.email"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r request
			err := Decode([]byte(tc.doc), &r, Options{})
			if tc.kind == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if e.Kind != tc.kind || e.Path != tc.path || !strings.Contains(e.Reason, tc.text) {
				t.Fatalf("got kind %d path %q: %q\nwant kind %d path %q with %q", e.Kind, e.Path, e.Reason, tc.kind, tc.path, tc.text)
			}
		})
	}
	var r request
	if err := Decode([]byte(`{"kind":"k","holder":{"name":"Ada","email":"ada@example.com"},"rows":3,"data":{"x":1}}`), &r, Options{}); err != nil {
		t.Fatal(err)
	}
	if r.Kind != "k" || r.Holder == nil || r.Holder.Name != "Ada" || r.Holder.Email != "ada@example.com" || r.Rows != 3 || string(r.Data) != `{"x":1}` {
		t.Fatalf("decoded %+v", r)
	}
}

// TestSplit: elements are returned as written; refusals name the element
// by index and the place inside it.
func TestSplit(t *testing.T) {
	elems, err := Split([]byte(` [ {"a":1} , {"a":[2]} ] `), 10, "events")
	if err != nil || len(elems) != 2 || string(elems[0]) != `{"a":1}` || string(elems[1]) != `{"a":[2]}` {
		t.Fatalf("split: %q %v", elems, err)
	}
	if elems, err := Split([]byte(`{"a":1}`), 10, "events"); err != nil || len(elems) != 1 {
		t.Fatalf("one object: %q %v", elems, err)
	}
	for _, tc := range []struct {
		doc   string
		kind  Kind
		index int
		path  string
		text  string
	}{
		{``, Empty, -1, "", ""},
		{`[]`, EmptyArray, -1, "", ""},
		{`[{},{},{}]`, TooMany, -1, "", ""},
		{`42`, NotContainer, -1, "", ""},
		{`[{"a":1},{"b":{"c":1,"c":2}}]`, Duplicate, 1, "b.c", "duplicate"},
		{`[{"a":1}{"a":2}]`, Syntax, -1, "", "after events[0], want ',' or ']'"},
		{`[{"a":"` + "\xff" + `"}]`, Encoding, 0, "a", "invalid UTF-8 at byte 7 of the body"},
		{`[{"a":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}]`, Depth, 0, "a" + strings.Repeat("[0]", MaxDepth-2), "deeper than 64"},
		{`{"a":1} x`, Syntax, -1, "", "exactly one value"},
		// Bytes that are not UTF-8 outside a string are called that too,
		// not an unexpected character.
		{"\xff\xfe[\x00]\x00", Encoding, -1, "", "invalid UTF-8 at byte 0 of the body (byte 0xff) (FF FE or FE FF: a UTF-16 byte order mark); the body must be UTF-8"},
		{"\xe9t\xe9", Encoding, -1, "", "invalid UTF-8 at byte 0 of the body (byte 0xe9); the body must be UTF-8"},
		{`[{"a":1},` + "\xc3" + `]`, Encoding, 1, "", "invalid UTF-8 at byte 9 of the body (byte 0xc3)"},
		{`[{"a":1` + "\xff" + `}]`, Encoding, 0, "", "invalid UTF-8 at byte 7 of the body (byte 0xff)"},
	} {
		_, e := Split([]byte(tc.doc), 2, "events")
		if e == nil || e.Kind != tc.kind || e.Index != tc.index || e.Path != tc.path || !strings.Contains(e.Reason, tc.text) {
			t.Errorf("%q: got %+v\nwant kind %d index %d path %q with %q", tc.doc, e, tc.kind, tc.index, tc.path, tc.text)
		}
	}
}

func TestNearest(t *testing.T) {
	known := []string{"name", "email", "windows", "aggregates"}
	for name, want := range map[string]string{"nmae": "name", "Email": "email", "agregates": "aggregates", "window": "windows", "phone": "", "": ""} {
		if got := Nearest(name, known); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestJoinPath(t *testing.T) {
	for _, tc := range [][3]string{{"data", "holder.name", "data.holder.name"}, {"rules", "[2].id", "rules[2].id"}, {"", "a", "a"}, {"data", "", "data"}} {
		if got := JoinPath(tc[0], tc[1]); got != tc[2] {
			t.Errorf("JoinPath(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}

// TestKeyPathQuotesAKeyThatIsNoIdentifier: a key a producer chose is named
// as the reader names it in its own errors, so that it reads as no other
// place and shows no character a terminal acts on.
func TestKeyPathQuotesAKeyThatIsNoIdentifier(t *testing.T) {
	for _, tc := range []struct{ name, prefix, key, want string }{
		{"an identifier at the start", "", "amount", "amount"},
		{"an identifier after a prefix", "data", "amount", "data.amount"},
		{"a key that reads as a path", "", "data.amount", `["data.amount"]`},
		{"a key with a dot after a prefix", "dynamodb.NewImage", "a.b", `dynamodb.NewImage["a.b"]`},
		{"an escape sequence", "", "\x1b]0;PWNED\a\x1b[2J", `["\x1b]0;PWNED\a\x1b[2J"]`},
		{"a bidirectional override", "data", "\u202eevil", `data["\u202eevil"]`},
		{"an empty key", "data", "", `data[""]`},
		{"a key past 64 bytes", "", strings.Repeat("é", 40), `["` + strings.Repeat("é", 32) + `"…]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := KeyPath(tc.prefix, tc.key); got != tc.want {
				t.Errorf("KeyPath(%q, %q) = %q, want %q", tc.prefix, tc.key, got, tc.want)
			}
		})
	}
}
