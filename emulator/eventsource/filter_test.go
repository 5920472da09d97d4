package eventsource

import (
	"testing"
)

func TestFilterMatch(t *testing.T) {
	// The record as a Kinesis filter sees it: metadata plus decoded data.
	record := `{
		"partitionKey": "device-7",
		"sequenceNumber": "49590338271490256608559692538361571095921575989136588898",
		"data": {
			"type": "order",
			"region": "us-west-2",
			"price": 15,
			"qty": 300,
			"note": "",
			"missing": null,
			"tags": ["red", "big"],
			"customer": {"tier": "gold", "id": "C-42"},
			"Status": "Error"
		}
	}`
	tests := []struct {
		name    string
		pattern string
		want    bool
	}{
		{"exact string", `{"data":{"type":["order"]}}`, true},
		{"exact string mismatch", `{"data":{"type":["refund"]}}`, false},
		{"or of values", `{"data":{"type":["refund","order"]}}`, true},
		{"metadata and data", `{"partitionKey":["device-7"],"data":{"type":["order"]}}`, true},
		{"metadata mismatch", `{"partitionKey":["device-8"],"data":{"type":["order"]}}`, false},
		{"number exact", `{"data":{"price":[15]}}`, true},
		{"number text differs", `{"data":{"price":[15.0]}}`, false},
		{"number is not a string", `{"data":{"price":["15"]}}`, false},
		{"empty string", `{"data":{"note":[""]}}`, true},
		{"null", `{"data":{"missing":[null]}}`, true},
		{"null is not absent", `{"data":{"nothere":[null]}}`, false},
		{"prefix", `{"data":{"region":[{"prefix":"us-"}]}}`, true},
		{"prefix mismatch", `{"data":{"region":[{"prefix":"eu-"}]}}`, false},
		{"suffix", `{"data":{"region":[{"suffix":"-2"}]}}`, true},
		{"equals-ignore-case", `{"data":{"Status":[{"equals-ignore-case":"ERROR"}]}}`, true},
		{"numeric range in", `{"data":{"price":[{"numeric":[">",10,"<=",20]}]}}`, true},
		{"numeric range out", `{"data":{"qty":[{"numeric":[">",10,"<=",20]}]}}`, false},
		{"numeric equals", `{"data":{"qty":[{"numeric":["=",300]}]}}`, true},
		{"numeric equals other text", `{"data":{"qty":[{"numeric":["=",3.0e2]}]}}`, true},
		{"numeric on a string never matches", `{"data":{"region":[{"numeric":[">",0]}]}}`, false},
		{"exists", `{"data":{"customer":{"tier":[{"exists":true}]}}}`, true},
		{"exists on missing", `{"data":{"coupon":[{"exists":true}]}}`, false},
		{"does not exist", `{"data":{"coupon":[{"exists":false}]}}`, true},
		{"does not exist but does", `{"data":{"type":[{"exists":false}]}}`, false},
		{"does not exist under a missing object", `{"data":{"shipping":{"address":[{"exists":false}]}}}`, true},
		{"anything-but value", `{"data":{"type":[{"anything-but":"refund"}]}}`, true},
		{"anything-but list hit", `{"data":{"type":[{"anything-but":["refund","order"]}]}}`, false},
		{"anything-but prefix", `{"data":{"region":[{"anything-but":{"prefix":"eu-"}}]}}`, true},
		{"anything-but on missing field", `{"data":{"coupon":[{"anything-but":"x"}]}}`, false},
		{"nested object", `{"data":{"customer":{"tier":["gold"]}}}`, true},
		{"nested object mismatch", `{"data":{"customer":{"tier":["silver"]}}}`, false},
		{"nested pattern on a scalar", `{"data":{"type":{"x":["y"]}}}`, false},
		{"array element", `{"data":{"tags":["big"]}}`, true},
		{"array no element", `{"data":{"tags":["small"]}}`, false},
		{"$or first", `{"data":{"$or":[{"type":["order"]},{"price":[{"numeric":[">",100]}]}]}}`, true},
		{"$or none", `{"data":{"$or":[{"type":["refund"]},{"price":[{"numeric":[">",100]}]}]}}`, false},
		{"field missing", `{"data":{"nothere":["x"]}}`, false},
	}
	rec := mustObject(t, record)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewFilter([]string{tt.pattern})
			if err != nil {
				t.Fatalf("NewFilter(%s): %v", tt.pattern, err)
			}
			if got := f.Match(rec); got != tt.want {
				t.Errorf("Match(%s) = %v, want %v", tt.pattern, got, tt.want)
			}
		})
	}
}

func TestFilterAnyPatternPasses(t *testing.T) {
	f, err := NewFilter([]string{`{"data":{"type":["refund"]}}`, `{"data":{"type":["order"]}}`})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Match(mustObject(t, `{"data":{"type":"order"}}`)) {
		t.Error("a record matching the second pattern was dropped")
	}
	if f.Match(mustObject(t, `{"data":{"type":"other"}}`)) {
		t.Error("a record matching no pattern passed")
	}
	var none *Filter
	if !none.Match(mustObject(t, `{}`)) {
		t.Error("no filter must pass every record")
	}
}

func TestFilterDataThatIsNotJSON(t *testing.T) {
	f, err := NewFilter([]string{`{"data":{"type":["order"]}}`})
	if err != nil {
		t.Fatal(err)
	}
	if f.Match(map[string]any{"data": notJSON{}}) {
		t.Error("a JSON pattern on data matched data that is not JSON; Lambda drops such records")
	}
	meta, err := NewFilter([]string{`{"partitionKey":["k"]}`})
	if err != nil {
		t.Fatal(err)
	}
	if !meta.Match(map[string]any{"partitionKey": "k", "data": notJSON{}}) {
		t.Error("a metadata-only pattern must still match a record whose data is not JSON")
	}
	// SQS: a plain-string pattern on body against a plain body, and against JSON.
	plain, err := NewFilter([]string{`{"body":["hello"]}`})
	if err != nil {
		t.Fatal(err)
	}
	if !plain.Match(map[string]any{"body": "hello"}) {
		t.Error("plain body pattern did not match plain body")
	}
	if plain.Match(mustObject(t, `{"body":{"hello":1}}`)) {
		t.Error("plain body pattern matched a JSON body; Lambda drops it")
	}
}

func TestFilterRejectsBadPatterns(t *testing.T) {
	for _, p := range []string{
		`not json`,
		`["a"]`,
		`{"data":"x"}`,
		`{"data":{"a":[]}}`,
		`{"data":{"a":[{"wildcard-ish":"x"}]}}`,
		`{"data":{"a":[{"numeric":[">"]}]}}`,
		`{"data":{"a":[{"numeric":["~",1]}]}}`,
		`{"data":{"a":[{"prefix":1}]}}`,
		`{"data":{"a":[{"exists":"yes"}]}}`,
		`{"$or":[{"a":["x"]}]}`,
	} {
		if _, err := NewFilter([]string{p}); err == nil {
			t.Errorf("NewFilter(%s): want an error", p)
		}
	}
}

func mustObject(t *testing.T, s string) map[string]any {
	t.Helper()
	v, ok := decodeJSON([]byte(s))
	m, isObj := v.(map[string]any)
	if !ok || !isObj {
		t.Fatalf("bad test JSON %s", s)
	}
	return m
}
