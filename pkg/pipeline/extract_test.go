package pipeline

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

func mustParse(t testing.TB, doc string) *Config {
	t.Helper()
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func envelope(data string) *stream.Envelope {
	return &stream.Envelope{ID: "evt-42", Type: "order_placed", Key: "customer-7", Data: json.RawMessage(data)}
}

func TestExtract(t *testing.T) {
	full := mustParse(t, `{"name": "p", "key": "data.region", "value": "data.order.total", "distinct": "data.customer",
		"aggregates": ["sum", "distinct"], "windows": [{"kind": "tumbling", "size": "1m"}]}`)
	tests := []struct {
		name     string
		cfg      *Config
		data     string
		key      string
		value    float64
		distinct string
	}{
		{"nested value", full, `{"region": "eu-west", "customer": "c-1", "order": {"total": 12.5}}`, "eu-west", 12.5, "c-1"},
		{"fields in any order, others skipped", full,
			`{"skip": {"a": [1, {"b": "}"}], "c": "\"{"}, "order": {"items": [1,2], "total": -3e2}, "customer": 17, "region": "us"}`, "us", -300, "17"},
		{"whitespace everywhere", full, " {\n \"region\" : \"ap\" ,\t\"customer\" : true , \"order\" : { \"total\" : 0 } } ", "ap", 0, "true"},
		{"escaped strings are decoded", full, `{"region": "eu\u002dwest", "customer": "a\"b", "order": {"total": 1}}`, "eu-west", 1, `a"b`},
		{"escaped field name", full, `{"re\u0067ion": "x", "customer": "c", "order": {"total": 1}}`, "x", 1, "c"},
		{"number key as written", full, `{"region": 42, "customer": "c", "order": {"total": 1E3}}`, "42", 1000, "c"},
		{"envelope fields", mustParse(t, `{"name": "p", "key": "type", "distinct": "key", "aggregates": ["distinct"], "windows": [{"kind": "tumbling", "size": "1m"}]}`),
			`{}`, "order_placed", 0, "customer-7"},
		{"count only reads nothing from data", mustParse(t, `{"name": "p", "windows": [{"kind": "tumbling", "size": "1m"}]}`), `not even JSON`, "customer-7", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, value, distinct, err := tt.cfg.Extract(envelope(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if key != tt.key || value != tt.value || string(distinct) != tt.distinct {
				t.Fatalf("Extract = %q, %v, %q; want %q, %v, %q", key, value, distinct, tt.key, tt.value, tt.distinct)
			}
		})
	}
}

func TestExtractErrors(t *testing.T) {
	c := mustParse(t, `{"name": "p", "key": "data.region", "value": "data.order.total", "distinct": "data.customer",
		"aggregates": ["sum", "distinct"], "windows": [{"kind": "tumbling", "size": "1m"}]}`)
	tests := []struct {
		name  string
		data  string
		field string
		want  string
	}{
		{"no data", ``, "data.region", "record evt-42: field data.region: is missing"},
		{"key missing", `{"customer": "c", "order": {"total": 1}}`, "data.region", "record evt-42: field data.region: is missing"},
		{"key is an object", `{"region": {"name": "eu"}}`, "data.region", "record evt-42: field data.region: must be a string or a number, not an object"},
		{"key is null", `{"region": null}`, "data.region", "record evt-42: field data.region: must be a string or a number, not null"},
		{"key is empty", `{"region": ""}`, "data.region", "record evt-42: field data.region: is empty: a grouping key has 1 to 256 characters"},
		{"key is past 256 characters", `{"region": "` + strings.Repeat("é", 257) + `"}`, "data.region", "record evt-42: field data.region: is 257 characters long; a grouping key has at most 256"},
		{"key holds a newline", `{"region": "eu\nwest"}`, "data.region", "record evt-42: field data.region: holds control character U+000A at byte 2; a grouping key is printable text, as ingest requires of an envelope's key"},
		{"key holds a C1 control", `{"region": "eu\u0085"}`, "data.region", "record evt-42: field data.region: holds control character U+0085 at byte 2; a grouping key is printable text, as ingest requires of an envelope's key"},
		// It would group apart from "eu" while every result and log line
		// shows the two alike.
		{"key starts with a byte order mark", `{"region": "\ufeffeu"}`, "data.region", "record evt-42: field data.region: holds invisible character U+FEFF at byte 0; a grouping key is printable text, as ingest requires of an envelope's key"},
		{"key holds a line separator", `{"region": "eu\u2028west"}`, "data.region", "record evt-42: field data.region: holds line separator U+2028 at byte 2; a grouping key is printable text, as ingest requires of an envelope's key"},
		{"data is not an object", `[1, 2]`, "data.region", "record evt-42: field data.region: is missing: data is an array, not an object"},
		{"value missing", `{"region": "eu", "customer": "c", "order": {}}`, "data.order.total", "record evt-42: field data.order.total: is missing"},
		{"value parent missing", `{"region": "eu", "customer": "c"}`, "data.order.total", "record evt-42: field data.order.total: is missing"},
		{"value parent not an object", `{"region": "eu", "order": "big"}`, "data.order.total", "record evt-42: field data.order.total: is missing: data.order is a string, not an object"},
		{"value is a string", `{"region": "eu", "order": {"total": "12.50"}}`, "data.order.total", "record evt-42: field data.order.total: must be a number, not a string"},
		{"value is null", `{"region": "eu", "order": {"total": null}}`, "data.order.total", "record evt-42: field data.order.total: must be a number, not null"},
		{"value overflows", `{"region": "eu", "order": {"total": 1e400}}`, "data.order.total", "record evt-42: field data.order.total: 1e400 is not a finite 64-bit number"},
		{"value would overflow a sum", `{"region": "eu", "order": {"total": 1.7e308}}`, "data.order.total", "record evt-42: field data.order.total: 1.7e308 is outside ±9.007199254740992e+15, the range a window aggregates without overflow"},
		{"value just past 2^53", `{"region": "eu", "order": {"total": -9007199254740994}}`, "data.order.total", "record evt-42: field data.order.total: -9007199254740994 is outside ±9.007199254740992e+15, the range a window aggregates without overflow"},
		// A value cut for the reason says so: 40 digits of 1 alone read as
		// a finite number.
		{"value of 100,000 digits", `{"region": "eu", "order": {"total": ` + strings.Repeat("1", 100_000) + `}}`, "data.order.total", "record evt-42: field data.order.total: " + strings.Repeat("1", 40) + "… is not a finite 64-bit number"},
		{"value of 60 digits", `{"region": "eu", "order": {"total": 1` + strings.Repeat("0", 59) + `}}`, "data.order.total", "record evt-42: field data.order.total: 1" + strings.Repeat("0", 39) + "… is outside ±9.007199254740992e+15, the range a window aggregates without overflow"},
		{"distinct missing", `{"region": "eu", "order": {"total": 1}}`, "data.customer", "record evt-42: field data.customer: is missing"},
		{"distinct is an array", `{"region": "eu", "order": {"total": 1}, "customer": [1]}`, "data.customer", "record evt-42: field data.customer: must be a string, number or boolean, not an array"},
		{"truncated JSON", `{"region": "eu", "order": {"total": "1`, "data.order.total", "record evt-42: field data.order.total: cannot be read: malformed JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := c.Extract(envelope(tt.data))
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Extract error = %v, want %q", err, tt.want)
			}
			var pe *stream.PoisonRecordError
			if !errors.As(err, &pe) || pe.RecordID != "evt-42" || pe.Field != tt.field {
				t.Fatalf("error %#v does not name record evt-42 and field %s", err, tt.field)
			}
		})
	}
}

// TestFindAgreesWithEncodingJSON looks up random paths in random documents
// and compares with encoding/json's decoding of the same document.
func TestFindAgreesWithEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var gen func(depth int) any
	gen = func(depth int) any {
		switch n := r.IntN(8); {
		case n < 3 && depth < 3:
			m := map[string]any{}
			for range r.IntN(4) {
				m[string(rune('a'+r.IntN(4)))] = gen(depth + 1)
			}
			return m
		case n == 3 && depth < 3:
			return []any{gen(depth + 1), gen(depth + 1)}
		case n == 4:
			return "s" + strconv.Itoa(r.IntN(100)) + `"}{\`
		case n == 5:
			return r.Float64() * 1e6
		case n == 6:
			return r.IntN(2) == 0
		}
		return nil
	}
	for range 3000 {
		doc, _ := json.Marshal(gen(0))
		fields := make([]string, 1+r.IntN(3))
		for i := range fields {
			fields[i] = string(rune('a' + r.IntN(4)))
		}
		var want any
		json.Unmarshal(doc, &want)
		found := true
		for _, f := range fields {
			m, ok := want.(map[string]any)
			if !ok {
				found = false
				break
			}
			if want, ok = m[f]; !ok {
				found = false
				break
			}
		}
		raw, err := find(doc, fields)
		if !found {
			if err == nil {
				t.Fatalf("find(%s, %v) = %s, want missing", doc, fields, raw)
			}
			continue
		}
		if err != nil {
			t.Fatalf("find(%s, %v): %v", doc, fields, err)
		}
		var got any
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("find(%s, %v) = %s, not a JSON value", doc, fields, raw)
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			t.Fatalf("find(%s, %v) = %s, want %s", doc, fields, gb, wb)
		}
	}
}

func TestFindDoesNotPanicOnMalformedJSON(t *testing.T) {
	doc := `{"a": {"b": [1, "x\"y", {"c": true}], "d": -1.5e3}, "e": null}`
	for i := range len(doc) {
		for _, fields := range [][]string{{"a", "d"}, {"e"}, {"a", "b"}, {"z"}} {
			find([]byte(doc[:i]), fields)                            // must not panic
			find([]byte(strings.Replace(doc, `"`, ``, i%7)), fields) // nor here
		}
	}
}

func TestExtractAllocations(t *testing.T) {
	c := mustParse(t, `{"name": "p", "value": "data.total", "distinct": "data.customer",
		"aggregates": ["sum", "distinct"], "windows": [{"kind": "tumbling", "size": "1m"}]}`)
	env := envelope(`{"customer": "c-1", "items": [1, 2, 3], "total": 12.5}`)
	n := testing.AllocsPerRun(1000, func() {
		if _, _, _, err := c.Extract(env); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("Extract with key from the envelope allocates %v times", n)
	}
}

var (
	sinkKey      string
	sinkValue    float64
	sinkDistinct []byte
)

func BenchmarkExtract(b *testing.B) {
	data := `{"region": "eu-west-1", "customer": "c-123456", "items": [{"sku": "a", "n": 2}, {"sku": "b", "n": 1}], "order": {"currency": "EUR", "total": 129.95}}`
	for _, bc := range []struct{ name, doc string }{
		{"key-envelope/value/distinct", `{"name": "p", "value": "data.order.total", "distinct": "data.customer", "aggregates": ["sum", "distinct"], "windows": [{"kind": "tumbling", "size": "1m"}]}`},
		{"key-data/value", `{"name": "p", "key": "data.region", "value": "data.order.total", "aggregates": ["sum"], "windows": [{"kind": "tumbling", "size": "1m"}]}`},
		{"count-only", `{"name": "p", "windows": [{"kind": "tumbling", "size": "1m"}]}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := mustParse(b, bc.doc)
			env := envelope(data)
			b.ReportAllocs()
			for b.Loop() {
				k, v, d, err := c.Extract(env)
				if err != nil {
					b.Fatal(err)
				}
				sinkKey, sinkValue, sinkDistinct = k, v, d
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	doc := with(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// TestExtractNegativeZeroIsZero: a producer's -0 (Python's -0.0, or a
// value too small for a float64, -1e-400) is aggregated as 0, so a window's
// min, max and quantiles read 0, where they used to read -0 in the results
// table, on the stream and on the dashboard.
func TestExtractNegativeZeroIsZero(t *testing.T) {
	c := mustParse(t, `{"name": "p", "value": "data.ms", "aggregates": ["min"], "windows": [{"kind": "tumbling", "size": "1m"}]}`)
	for _, v := range []string{"-0", "-0.0", "-0e5", "-1e-400"} {
		_, value, _, err := c.Extract(envelope(`{"ms": ` + v + `}`))
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if value != 0 || math.Signbit(value) {
			t.Errorf("%s read as %v (sign bit %v), want 0", v, value, math.Signbit(value))
		}
	}
}

// TestDeepestPathAnyRecordHolds: a value path may name as many nested
// fields as a record can hold (the envelope and data are the first two of
// strictjson.MaxDepth objects), and reads the value from such a record;
// one field more is refused when the file is read, since no record the
// strict reader takes could ever hold it.
func TestDeepestPathAnyRecordHolds(t *testing.T) {
	nested := func(n int) (path, data string) {
		fields := make([]string, n)
		for i := range fields {
			fields[i] = "a"
		}
		return "data." + strings.Join(fields, "."), strings.Repeat(`{"a":`, n) + "7" + strings.Repeat("}", n)
	}
	path, data := nested(strictjson.MaxDepth - 1)
	p, err := ParsePath(path)
	if err != nil {
		t.Fatalf("ParsePath of %d fields: %v", strictjson.MaxDepth-1, err)
	}
	var env stream.Envelope
	doc := `{"id":"e1","type":"t","key":"k","occurredAt":"2026-01-01T00:00:00Z","data":` + data + `}`
	if err := stream.Unmarshal([]byte(doc), &env); err != nil {
		t.Fatalf("a record %d objects deep: %v", strictjson.MaxDepth, err)
	}
	if v, err := p.Text(&env); err != nil || v != "7" {
		t.Errorf("value at %d fields = %q, %v; want 7", strictjson.MaxDepth-1, v, err)
	}
	deeper, _ := nested(strictjson.MaxDepth)
	if _, err := ParsePath(deeper); err == nil || !strings.Contains(err.Error(), "so no record holds it") {
		t.Errorf("ParsePath of %d fields = %v; want it refused: no record holds it", strictjson.MaxDepth, err)
	}
}
