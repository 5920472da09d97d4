package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/window"
)

// base is a valid config; each error case changes one thing.
func base() map[string]any {
	return map[string]any{
		"name":       "orders-per-region",
		"eventTypes": []any{"order_placed"},
		"key":        "data.region",
		"value":      "data.total",
		"distinct":   "data.customer",
		"windows": []any{
			map[string]any{"kind": "tumbling", "size": "1m"},
			map[string]any{"kind": "hopping", "size": "5m", "advance": "1m"},
		},
		"aggregates":            []any{"count", "sum", "distinct", "quantiles"},
		"outOfOrderness":        "5s",
		"idleTimeout":           "30s",
		"latePolicy":            "correct",
		"allowedLateness":       "10m",
		"outputs":               map[string]any{"table": true, "stream": true},
		"parallelizationFactor": 1,
	}
}

func with(changes map[string]any) []byte {
	m := base()
	for k, v := range changes {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func windows(ws ...map[string]any) []any {
	out := make([]any, len(ws))
	for i, w := range ws {
		out[i] = w
	}
	return out
}

type w = map[string]any

func TestParseValid(t *testing.T) {
	c, err := Parse(with(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "orders-per-region" || c.Key.String() != "data.region" || c.Value.String() != "data.total" || c.Distinct.String() != "data.customer" {
		t.Errorf("names and paths: %+v", c)
	}
	wantWindows := []WindowSpec{{Kind: Tumbling, Size: time.Minute}, {Kind: Hopping, Size: 5 * time.Minute, Advance: time.Minute}}
	if !slices.Equal(c.Windows, wantWindows) {
		t.Errorf("windows = %+v", c.Windows)
	}
	if c.Windows[1].ID() != "hopping:5m0s:1m0s" || c.Windows[1].Hopping().PaneCount() != 5 {
		t.Errorf("hopping spec: %s, %d panes", c.Windows[1].ID(), c.Windows[1].Hopping().PaneCount())
	}
	if c.Aggregates.Aggregates != agg.Count|agg.Sum|agg.Distinct|agg.Quantiles || !slices.Equal(c.Aggregates.Quantiles, agg.DefaultQuantiles) {
		t.Errorf("aggregates = %+v", c.Aggregates)
	}
	if c.OutOfOrderness != 5*time.Second || c.IdleTimeout != 30*time.Second {
		t.Errorf("durations: %s %s", c.OutOfOrderness, c.IdleTimeout)
	}
	if c.Late != (window.LateRule{Policy: window.Correct, AllowedLateness: 10 * time.Minute}) {
		t.Errorf("late = %+v", c.Late)
	}
	if c.Outputs != (Outputs{Table: true, Stream: true, Log: true}) || c.ParallelizationFactor != 1 {
		t.Errorf("outputs %+v, pf %d", c.Outputs, c.ParallelizationFactor)
	}
	if !c.Matches("order_placed") || c.Matches("page_view") {
		t.Error("eventTypes filter")
	}
	if c.NewWatermark().OutOfOrderness != 5*time.Second {
		t.Error("watermark out-of-orderness")
	}
}

func TestParseDefaults(t *testing.T) {
	c, err := Parse([]byte(`{"name": "n", "windows": [{"kind": "session", "gap": "30m"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Key.IsPartitionKey() || !c.Value.IsZero() || !c.Distinct.IsZero() {
		t.Errorf("paths: key %q value %q distinct %q", c.Key, c.Value, c.Distinct)
	}
	if c.Aggregates.Aggregates != agg.Count {
		t.Errorf("aggregates = %s, want count", c.Aggregates.Aggregates)
	}
	if c.IdleTimeout != DefaultIdleTimeout || c.OutOfOrderness != 0 {
		t.Errorf("idle %s, ooo %s", c.IdleTimeout, c.OutOfOrderness)
	}
	if c.Late != (window.LateRule{Policy: window.Drop}) || c.Outputs != (Outputs{Table: true, Log: true}) || c.ParallelizationFactor != 1 {
		t.Errorf("late %+v outputs %+v pf %d", c.Late, c.Outputs, c.ParallelizationFactor)
	}
	if !c.Matches("anything") {
		t.Error("no eventTypes means all")
	}
	if c.DedupeHorizon != DefaultDedupeHorizon {
		t.Errorf("dedupeHorizon %s, want %s", c.DedupeHorizon, DefaultDedupeHorizon)
	}
	if c.Retention != DefaultRetention {
		t.Errorf("retention %s, want %s", c.Retention, DefaultRetention)
	}
	for doc, want := range map[string]time.Duration{
		`{"name": "n", "retention": "24h", "windows": [{"kind": "tumbling", "size": "1m"}]}`:                                                    MinRetention,
		`{"name": "n", "retention": "720h", "windows": [{"kind": "tumbling", "size": "1m"}]}`:                                                   30 * 24 * time.Hour,
		`{"name": "n", "retention": "8760h", "windows": [{"kind": "tumbling", "size": "1m"}]}`:                                                  MaxRetention,
		`{"name": "n", "retention": "36h", "latePolicy": "correct", "allowedLateness": "12h", "windows": [{"kind": "tumbling", "size": "1m"}]}`: 36 * time.Hour,
		// Without retention, a day past an allowed lateness longer than the default.
		`{"name": "n", "latePolicy": "correct", "allowedLateness": "150h", "windows": [{"kind": "tumbling", "size": "1m"}]}`:  174 * time.Hour,
		`{"name": "n", "latePolicy": "correct", "allowedLateness": "8736h", "windows": [{"kind": "tumbling", "size": "1m"}]}`: MaxRetention,
		// Without retention, half a day past the latest a window can change
		// when that is longer.
		`{"name": "n", "outOfOrderness": "24h", "idleTimeout": "24h", "latePolicy": "correct", "allowedLateness": "120h", "windows": [{"kind": "tumbling", "size": "1m"}]}`: 180 * time.Hour,
		`{"name": "n", "outOfOrderness": "24h", "retention": "37h", "windows": [{"kind": "tumbling", "size": "1m"}]}`:                                                       37 * time.Hour,
	} {
		if c, err := Parse([]byte(doc)); err != nil || c.Retention != want {
			t.Errorf("%s: %v, error %v; want retention %s", doc, c, err, want)
		}
	}
	for doc, want := range map[string]time.Duration{
		`{"name": "n", "dedupeHorizon": "0s", "windows": [{"kind": "tumbling", "size": "1m"}]}`:   0,
		`{"name": "n", "dedupeHorizon": "15m", "windows": [{"kind": "tumbling", "size": "1m"}]}`:  15 * time.Minute,
		`{"name": "n", "dedupeHorizon": "168h", "windows": [{"kind": "tumbling", "size": "1m"}]}`: MaxDedupeHorizon,
	} {
		if c, err := Parse([]byte(doc)); err != nil || c.DedupeHorizon != want {
			t.Errorf("%s: horizon %v, error %v; want %s", doc, c, err, want)
		}
	}
	// Grouping by the partition key is fine at any parallelization factor,
	// and so is any key the producers promise is the partition key.
	for _, doc := range []string{
		`{"name": "n", "parallelizationFactor": 10, "windows": [{"kind": "tumbling", "size": "1m"}]}`,
		`{"name": "n", "key": "data.region", "partitionKeyIsGroupingKey": true, "parallelizationFactor": 4, "windows": [{"kind": "tumbling", "size": "1m"}]}`,
		`{"name": "n", "key": "data.region", "parallelizationFactor": 1, "windows": [{"kind": "tumbling", "size": "1m"}]}`,
		`{"name": "n", "windows": [{"kind": "tumbling", "size": "24h", "offset": "-5h"}]}`,
	} {
		if _, err := Parse([]byte(doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  []byte
		want string
	}{
		// The document.
		{"not JSON", []byte(`{"name":`), "not valid JSON at line 1, column 8: unexpected end of JSON input"},
		{"a trailing comma in an object", []byte("{\"name\": \"a\",\n}"), "not valid JSON at line 2, column 1: invalid character '}' looking for beginning of object key string (a comma before it with nothing after: JSON takes no trailing comma)"},
		{"a trailing comma in a list", []byte(`{"name": "a", "aggregates": ["count", ]}`), "not valid JSON at line 1, column 39: invalid character ']' looking for beginning of value (a comma before it with nothing after: JSON takes no trailing comma)"},
		{"not an object", []byte(`[]`), "must be a JSON object, not an array"},
		{"unknown field", with(w{"agregates": []any{"sum"}}), "agregates: unknown field; did you mean \"aggregates\"? (known: kind, name, eventTypes, key, value, distinct, windows, aggregates, quantiles, distinctPrecision, outOfOrderness, idleTimeout, latePolicy, allowedLateness, outputs, partitionKeyIsGroupingKey, parallelizationFactor, dedupeHorizon, dedupeLedger, retention)"},
		// name
		{"name missing", with(w{"name": nil}), "name: required"},
		{"name not a string", with(w{"name": 5}), "name: must be a string, not a number"},
		{"name with spaces", with(w{"name": "orders per region"}), `name: "orders per region" must be 1 to 64 letters, digits, '-' or '_'`},
		// eventTypes
		{"eventTypes not an array", with(w{"eventTypes": "order_placed"}), "eventTypes: must be an array, not a string"},
		{"eventTypes element not a string", with(w{"eventTypes": []any{"a", 1}}), "eventTypes[1]: must be a string, not a number"},
		{"eventTypes empty element", with(w{"eventTypes": []any{"a", ""}}), "eventTypes[1]: is empty"},
		{"eventTypes element past 256 characters", with(w{"eventTypes": []any{"a", strings.Repeat("é", 257)}}), "eventTypes[1]: is longer than an event type can be (256 characters): no event would match it"},
		{"eventTypes duplicate", with(w{"eventTypes": []any{"a", "a"}}), `eventTypes[1]: "a" is listed twice`},
		{"eventTypes element with a tab", with(w{"eventTypes": []any{"a", "page_view\t"}}), "eventTypes[1]: holds control character U+0009 at byte 9: no event's type can (ingest refuses it), so the pipeline would never read it"},
		{"eventTypes element with a C1 control", with(w{"eventTypes": []any{"pa\u0085ge"}}), "eventTypes[0]: holds control character U+0085 at byte 2: no event's type can (ingest refuses it), so the pipeline would never read it"},
		{"eventTypes element with a byte order mark", with(w{"eventTypes": []any{"\ufeffpage_view"}}), "eventTypes[0]: holds invisible character U+FEFF at byte 0: no event's type can (ingest refuses it), so the pipeline would never read it"},
		// aggregates and quantiles
		{"unknown aggregate", with(w{"aggregates": []any{"count", "median"}}), `aggregates[1]: "median" is not an aggregate: want one of count, sum, min, max, mean, distinct, quantiles`},
		{"aggregate twice", with(w{"aggregates": []any{"sum", "sum"}}), `aggregates[1]: "sum" is listed twice`},
		{"aggregate not a string", with(w{"aggregates": []any{"sum", true}}), `aggregates[1]: must be a string, not a boolean`},
		{"quantile out of range", with(w{"quantiles": []any{0.5, 99}}), `quantiles[1]: 99 is not between 0 and 1 (exclusive); use min and max for the ends`},
		{"aggregates an empty list", with(w{"aggregates": []any{}}), "aggregates: is an empty list: list at least one, or leave the field out for its default"},
		{"quantiles an empty list", with(w{"quantiles": []any{}}), "quantiles: is an empty list: list at least one, or leave the field out for its default"},
		{"quantile named as min", with(w{"quantiles": []any{1e-300, 0.5}}), "quantiles[0]: 1e-300 is named p0, which reads as min or max; give a quantile at least 1e-11 from 0 and 1, or use min and max"},
		{"quantile named as max", with(w{"quantiles": []any{0.5, 0.9999999999999999}}), "quantiles[1]: 0.9999999999999999 is named p100, which reads as min or max; give a quantile at least 1e-11 from 0 and 1, or use min and max"},
		{"outputs null", []byte(`{"name": "n", "windows": [{"kind": "tumbling", "size": "1m"}], "outputs": null}`), "outputs: is null: give an object, or leave the field out (a field left out takes its default, where it has one; null is not read as it)"},
		{"quantiles without the aggregate", with(w{"aggregates": []any{"count"}, "value": nil, "distinct": nil, "quantiles": []any{0.5}}), `quantiles: listed but the quantiles aggregate is off`},
		{"distinctPrecision out of range", with(w{"distinctPrecision": 20}), "distinctPrecision: 20 is not between 4 and 18"},
		{"distinctPrecision not whole", with(w{"distinctPrecision": 12.5}), "distinctPrecision: 12.5 is not a whole number from 4 to 18"},
		{"parallelizationFactor out of range", []byte(`{"name": "n", "windows": [{"kind": "tumbling", "size": "1m"}], "parallelizationFactor": 1e400}`), "parallelizationFactor: 1e400 is not a whole number from 1 to 10"},
		{"quantile out of range", []byte(`{"name": "n", "windows": [{"kind": "tumbling", "size": "1m"}], "aggregates": ["quantiles"], "value": "data.ms", "quantiles": [0.5, 1e400]}`), "quantiles[1]: 1e400 is out of range"},
		// A value cut for the message says so: 40 digits alone would read
		// as a number that fits.
		{"parallelizationFactor of 50 digits", []byte(`{"name": "n", "windows": [{"kind": "tumbling", "size": "1m"}], "parallelizationFactor": ` + strings.Repeat("1", 50) + `}`), "parallelizationFactor: " + strings.Repeat("1", 40) + "… is not a whole number from 1 to 10"},
		{"parallelizationFactor a fraction", []byte(`{"name": "n", "windows": [{"kind": "tumbling", "size": "1m"}], "parallelizationFactor": 2.5}`), "parallelizationFactor: 2.5 is not a whole number from 1 to 10"},
		{"quantile of 500 digits", []byte(`{"name": "n", "windows": [{"kind": "tumbling", "size": "1m"}], "aggregates": ["quantiles"], "value": "data.ms", "quantiles": [0.5, 1` + strings.Repeat("0", 499) + `]}`), "quantiles[1]: 1" + strings.Repeat("0", 39) + "… is out of range"},
		{"distinctPrecision too large for an item", with(w{"distinctPrecision": 18}), "distinctPrecision: a window's aggregates would take up to 360768 bytes (distinct precision 18, quantiles on); a window item holds its merged state and one batch's part in an item, so at most 195584: lower distinctPrecision"},
		{"distinctPrecision 17 with quantiles", with(w{"distinctPrecision": 17}), "distinctPrecision: a window's aggregates would take up to 229696 bytes (distinct precision 17, quantiles on); a window item holds its merged state and one batch's part in an item, so at most 195584: lower distinctPrecision"},
		{"distinctPrecision without distinct", with(w{"aggregates": []any{"sum"}, "distinct": nil, "distinctPrecision": 12}), "distinctPrecision: set but the distinct aggregate is off"},
		// key, value, distinct
		{"key not a path", with(w{"key": "region"}), `key: "region" is not a path: want "key", "type", "id" or "data.<field>"`},
		{"key with an empty field", with(w{"key": "data..region"}), `key: "data..region" has an empty field name`},
		{"key is id", with(w{"key": "id"}), "key: grouping by id puts every event in a group of its own; group by key, type or a data field"},
		{"value required by sum", with(w{"value": nil}), `value: required when aggregates include "sum"`},
		{"value required by the first that needs it", with(w{"value": nil, "aggregates": []any{"count", "max", "mean"}, "distinct": nil}), `value: required when aggregates include "max"`},
		{"value not in data", with(w{"value": "key"}), `value: "key" is not in data: want "data.<field>", a number`},
		{"value unused", with(w{"aggregates": []any{"count", "distinct"}}), "value: set but no aggregate uses it: remove it, or add an aggregate that reads it (sum, min, max, mean, quantiles)"},
		{"distinct required", with(w{"distinct": nil}), `distinct: required when aggregates include "distinct"`},
		{"distinct unused", with(w{"aggregates": []any{"sum"}}), "distinct: set but no aggregate uses it: remove it, or add an aggregate that reads it (distinct)"},
		{"distinct not a path", with(w{"distinct": "customer"}), `distinct: "customer" is not a path: want "key", "type", "id" or "data.<field>"`},
		// windows
		{"windows missing", with(w{"windows": nil}), `windows: at least one window is required, for example [{"kind": "tumbling", "size": "1m"}]`},
		{"windows empty", with(w{"windows": []any{}}), `windows: at least one window is required, for example [{"kind": "tumbling", "size": "1m"}]`},
		{"windows not an array", with(w{"windows": w{}}), "windows: must be an array, not an object"},
		{"window not an object", with(w{"windows": []any{"1m"}}), "windows[0]: must be a JSON object, not a string"},
		{"window kind missing", with(w{"windows": windows(w{"size": "1m"})}), "windows[0].kind: required: tumbling, hopping, sliding or session"},
		{"window kind unknown", with(w{"windows": windows(w{"kind": "rolling", "size": "1m"})}), `windows[0].kind: "rolling" is not a window kind: want tumbling, hopping, sliding or session`},
		{"window unknown field", with(w{"windows": windows(w{"kind": "tumbling", "sise": "1m"})}), "windows[0].sise: unknown field; did you mean \"size\"? (known: kind, size, advance, difference, gap, offset)"},
		{"tumbling size missing", with(w{"windows": windows(w{"kind": "tumbling"})}), "windows[0].size: required for a tumbling window"},
		{"size not a duration", with(w{"windows": windows(w{"kind": "tumbling", "size": "1 minute"})}), `windows[0].size: "1 minute" is not a duration such as "90s", "5m" or "1h30m"`},
		{"size a number", with(w{"windows": windows(w{"kind": "tumbling", "size": 60})}), `windows[0].size: must be a duration string such as "90s" or "5m", not a number`},
		{"size zero", with(w{"windows": windows(w{"kind": "tumbling", "size": "0s"})}), "windows[0].size: 0s must be positive"},
		{"size negative", with(w{"windows": windows(w{"kind": "tumbling", "size": "-1m"})}), "windows[0].size: -1m must be positive"},
		{"size below milliseconds", with(w{"windows": windows(w{"kind": "tumbling", "size": "1500us"})}), "windows[0].size: 1500us is not a whole number of milliseconds"},
		{"tumbling with advance", with(w{"windows": windows(w{"kind": "tumbling", "size": "1m", "advance": "30s"})}), "windows[0].advance: a tumbling window has no advance (it takes size or offset)"},
		{"offset not a duration", with(w{"windows": windows(w{"kind": "tumbling", "size": "1m", "offset": "soon"})}), `windows[0].offset: "soon" is not a duration such as "90s", "5m" or "-5h"`},
		{"offset below milliseconds", with(w{"windows": windows(w{"kind": "tumbling", "size": "1m", "offset": "1us"})}), "windows[0].offset: 1us is not a whole number of milliseconds"},
		{"hopping advance does not divide size", with(w{"windows": windows(w{"kind": "tumbling", "size": "1m"}, w{"kind": "hopping", "size": "2m", "advance": "45s"})}), "windows[1].advance: 45s does not divide size 2m: size must be a whole number of advances; use 40s or 1m0s"},
		{"hopping advance between two that divide", with(w{"windows": windows(w{"kind": "hopping", "size": "10m", "advance": "3m"})}), "windows[0].advance: 3m does not divide size 10m: size must be a whole number of advances; use 2m30s or 3m20s"},
		{"hopping advance whose divisor below is too many windows", with(w{"windows": windows(w{"kind": "hopping", "size": "1h", "advance": "7s"})}), "windows[0].advance: 7s does not divide size 1h: size must be a whole number of advances; use 36s (at most 100 windows a record)"},
		{"hopping advance of a size in milliseconds", with(w{"windows": windows(w{"kind": "hopping", "size": "1001ms", "advance": "500ms"})}), "windows[0].advance: 500ms does not divide size 1001ms: size must be a whole number of advances; use 143ms"},
		{"hopping advance longer than size", with(w{"windows": windows(w{"kind": "hopping", "size": "1m", "advance": "2m"})}), "windows[0].advance: 2m is longer than size 1m: records between windows would be in none"},
		{"hopping advance missing", with(w{"windows": windows(w{"kind": "hopping", "size": "1m"})}), "windows[0].advance: required for a hopping window"},
		{"sliding difference missing", with(w{"windows": windows(w{"kind": "sliding"})}), "windows[0].difference: required for a sliding window"},
		{"sliding with size", with(w{"windows": windows(w{"kind": "sliding", "difference": "10s", "size": "10s"})}), "windows[0].size: a sliding window has no size (it takes difference)"},
		{"session gap missing", with(w{"windows": windows(w{"kind": "session"})}), "windows[0].gap: required for a session window"},
		{"session with offset", with(w{"windows": windows(w{"kind": "session", "gap": "30m", "offset": "1m"})}), "windows[0].offset: a session window has no offset (it takes gap)"},
		{"hopping window of 3.6 million windows a record", with(w{"windows": windows(w{"kind": "hopping", "size": "1h", "advance": "1ms"})}),
			"windows[0].advance: a record would fall in 3600000 windows (size 1h0m0s / advance 1ms), 3600000 with the windows before it: at most 100, since each is one conditional write per key and batch; use a longer advance or fewer windows"},
		{"hopping windows of 1,000 windows a record", with(w{"windows": windows(w{"kind": "hopping", "size": "1000m", "advance": "1m"})}),
			"windows[0].advance: a record would fall in 1000 windows (size 16h40m0s / advance 1m0s), 1000 with the windows before it: at most 100, since each is one conditional write per key and batch; use a longer advance or fewer windows"},
		{"windows past 100 a record together", with(w{"windows": windows(w{"kind": "hopping", "size": "60m", "advance": "1m"}, w{"kind": "hopping", "size": "40m", "advance": "1m"}, w{"kind": "tumbling", "size": "1m"})}),
			"windows[2]: a record would fall in its windows, 101 with the windows before it: at most 100, since each is one conditional write per key and batch; use a longer advance or fewer windows"},
		{"same window by a whole size of offset", with(w{"windows": windows(w{"kind": "tumbling", "size": "1m"}, w{"kind": "tumbling", "size": "1m", "offset": "1m"})}), "windows[1]: is the same window as windows[0]"},
		{"same window by a negative offset", with(w{"windows": windows(w{"kind": "tumbling", "size": "24h", "offset": "-5h"}, w{"kind": "tumbling", "size": "24h", "offset": "19h"})}), "windows[1]: is the same window as windows[0]"},
		{"same hopping window by a whole advance of offset", with(w{"windows": windows(w{"kind": "hopping", "size": "5m", "advance": "1m", "offset": "2m"}, w{"kind": "hopping", "size": "5m", "advance": "1m"})}), "windows[1]: is the same window as windows[0]"},
		{"hopping by its size is the tumbling window", with(w{"windows": windows(w{"kind": "tumbling", "size": "5m"}, w{"kind": "hopping", "size": "5m", "advance": "5m"})}), "windows[1]: is the same window as windows[0]"},
		{"tumbling is the hopping window by its size", with(w{"windows": windows(w{"kind": "hopping", "size": "1h", "advance": "1h", "offset": "30m"}, w{"kind": "tumbling", "size": "60m", "offset": "-30m"})}), "windows[1]: is the same window as windows[0]"},
		{"size past a year", with(w{"windows": windows(w{"kind": "tumbling", "size": "100000h"})}), "windows[0].size: 100000h is longer than 8760h0m0s, the longest a window may be"},
		{"gap past a year", with(w{"windows": windows(w{"kind": "session", "gap": "8761h"})}), "windows[0].gap: 8761h is longer than 8760h0m0s, the longest a window may be"},
		{"difference past a year", with(w{"windows": windows(w{"kind": "sliding", "difference": "2562047h"})}), "windows[0].difference: 2562047h is longer than 8760h0m0s, the longest a window may be"},
		{"outOfOrderness past a day", with(w{"outOfOrderness": "100000h"}), `outOfOrderness: 100000h is longer than 24h0m0s: every window would wait that long to be final (for later records, latePolicy "correct" with allowedLateness)`},
		{"idleTimeout past a day", with(w{"idleTimeout": "25h"}), "idleTimeout: 25h is longer than 24h0m0s: an idle shard's windows would wait that long to be final"},
		{"same window twice", with(w{"windows": windows(w{"kind": "tumbling", "size": "1m"}, w{"kind": "tumbling", "size": "60s"})}), "windows[1]: is the same window as windows[0]"},
		// durations
		{"outOfOrderness negative", with(w{"outOfOrderness": "-5s"}), "outOfOrderness: -5s must be 0 or more"},
		{"outOfOrderness empty", with(w{"outOfOrderness": ""}), "outOfOrderness: is empty: give a duration string such as \"90s\" or \"5m\", or leave the field out (a field left out takes its default, where it has one; \"\" is not read as it)"},
		{"outOfOrderness null", []byte(strings.Replace(string(with(w{"outOfOrderness": nil})), "{", `{"outOfOrderness":null,`, 1)),
			"outOfOrderness: is null: give a duration string such as \"90s\" or \"5m\", or leave the field out (a field left out takes its default, where it has one; null is not read as it)"},
		{"outOfOrderness a number", with(w{"outOfOrderness": 5}), `outOfOrderness: must be a duration string such as "90s" or "5m", not a number`},
		{"idleTimeout zero", with(w{"idleTimeout": "0s"}), "idleTimeout: 0s must be positive"},
		// late policy
		{"latePolicy unknown", with(w{"latePolicy": "ignore"}), `latePolicy: "ignore" is not a late policy: want "drop" or "correct"`},
		{"allowedLateness with drop", with(w{"latePolicy": "drop"}), `allowedLateness: only applies to latePolicy "correct"; late records are dropped under "drop"`},
		{"allowedLateness missing with correct", with(w{"allowedLateness": nil}), `allowedLateness: required when latePolicy is "correct": how long after a window is final a correction is still accepted`},
		{"allowedLateness past the longest retention", with(w{"allowedLateness": "100000h"}),
			"allowedLateness: 100000h is longer than 8736h0m0s: a window is kept 24h0m0s past its allowed lateness, and at most 8760h0m0s (retention)"},
		{"allowedLateness not a duration", with(w{"allowedLateness": "forever"}), `allowedLateness: "forever" is not a duration such as "90s", "5m" or "1h30m"`},
		{"allowedLateness too long for a duration", with(w{"allowedLateness": "9999999999h"}), `allowedLateness: 9999999999h is longer than a duration can be (2562047h47m16.854775807s, about 292 years)`},
		{"offset too long for a duration", with(w{"windows": windows(w{"kind": "tumbling", "size": "1m", "offset": "-9999999999h"})}), `windows[0].offset: -9999999999h is longer than a duration can be (2562047h47m16.854775807s, about 292 years)`},
		// outputs
		{"outputs none", with(w{"outputs": w{"table": false}}), "outputs: at least one of table and stream must be true (an outputs member replaces the default {\"table\": true}: to change log alone, write {\"table\": true, \"log\": false})"},
		{"outputs unknown", with(w{"outputs": w{"table": true, "topic": true}}), "outputs.topic: unknown field (known: table, stream, log)"},
		{"outputs not bool", with(w{"outputs": w{"table": "yes"}}), "outputs.table: must be true or false, not a string"},
		{"outputs log not bool", with(w{"outputs": w{"table": true, "log": "no"}}), "outputs.log: must be true or false, not a string"},
		{"outputs log alone", with(w{"outputs": w{"log": true}}), "outputs: at least one of table and stream must be true (an outputs member replaces the default {\"table\": true}: to change log alone, write {\"table\": true, \"log\": false})"},
		{"outputs not an object", with(w{"outputs": []any{}}), "outputs: must be a JSON object, not an array"},
		// parallelization
		{"parallelizationFactor zero", with(w{"parallelizationFactor": 0}), "parallelizationFactor: 0 is not between 1 and 10"},
		{"parallelizationFactor too big", with(w{"parallelizationFactor": 11}), "parallelizationFactor: 11 is not between 1 and 10"},
		{"partitionKeyIsGroupingKey not bool", with(w{"partitionKeyIsGroupingKey": "yes"}), "partitionKeyIsGroupingKey: must be true or false, not a string"},
		{"grouping key is not the partition key", with(w{"parallelizationFactor": 4}), "key: grouping by data.region with parallelizationFactor 4 needs repartitioning: set partitionKeyIsGroupingKey or parallelizationFactor 1"},
		// dedupe horizon
		{"dedupeHorizon empty", with(w{"dedupeHorizon": ""}), "dedupeHorizon: is empty: give a duration string such as \"90s\" or \"5m\", or leave the field out (a field left out takes its default, where it has one; \"\" is not read as it)"},
		{"dedupeHorizon negative", with(w{"dedupeHorizon": "-1h"}), "dedupeHorizon: -1h must be 0 or more"},
		{"dedupeHorizon too long", with(w{"dedupeHorizon": "169h"}), "dedupeHorizon: 169h is longer than 168h0m0s"},
		{"dedupeHorizon fraction of a second", with(w{"dedupeHorizon": "1500ms"}), "dedupeHorizon: 1500ms is not a whole number of seconds"},
		{"dedupeHorizon a number", with(w{"dedupeHorizon": 3600}), `dedupeHorizon: must be a duration string such as "90s" or "5m", not a number`},
		{"dedupeLedger unknown", with(w{"dedupeLedger": "shard"}), `dedupeLedger: "shard" is neither "key" nor "range"`},
		{"dedupeLedger range side by side", with(w{"dedupeLedger": "range", "parallelizationFactor": 2, "partitionKeyIsGroupingKey": true}), `dedupeLedger: "range" needs parallelizationFactor 1, not 2: batches of one shard read side by side would meet on a range's head at every commit`},
		{"dedupeLedger range past a day", with(w{"dedupeLedger": "range", "dedupeHorizon": "25h"}), `dedupeLedger: "range" needs a dedupeHorizon of at most 24h0m0s, not 25h0m0s: a range holds at most some 32 million ids of the horizon`},
		{"retention empty", with(w{"retention": ""}), "retention: is empty: give a duration string such as \"90s\" or \"5m\", or leave the field out (a field left out takes its default, where it has one; \"\" is not read as it)"},
		{"retention too short", with(w{"retention": "23h"}), "retention: 23h is shorter than 24h0m0s, the least a window is kept after it ends"},
		{"retention too long", with(w{"retention": "8761h"}), "retention: 8761h is longer than 8760h0m0s"},
		{"retention fraction of a second", with(w{"retention": "86400500ms"}), "retention: 86400500ms is not a whole number of seconds"},
		// A path names object fields; "items[0]" used to be taken as a
		// field's name, and every record set aside as missing it.
		{"value into an array", with(w{"value": "data.items[0].price"}),
			`value: "data.items[0].price" addresses an array element (items[0]): a path names object fields only, and array elements cannot be read`},
		{"key into an array", with(w{"key": "data.tags[*]"}),
			`key: "data.tags[*]" addresses an array element (tags[*]): a path names object fields only, and array elements cannot be read`},
		{"retention within allowedLateness", with(w{"retention": "48h", "latePolicy": "correct", "allowedLateness": "25h"}),
			"retention: 48h0m0s is shorter than allowedLateness (25h0m0s) + 24h0m0s: a correction could find its window expired"},
		// A window is final outOfOrderness + idleTimeout after its end at
		// the latest; an item that expired before is never finalized.
		{"retention within outOfOrderness", with(w{"retention": "24h", "latePolicy": nil, "allowedLateness": nil, "outOfOrderness": "24h"}),
			"retention: 24h0m0s is shorter than outOfOrderness (24h0m0s) + idleTimeout (30s) + allowedLateness (0s) + 12h0m0s: a window could still be open, or take a correction, after its item expired, and its result would never be emitted"},
		{"retention within idleTimeout and allowedLateness", with(w{"retention": "72h", "outOfOrderness": "0s", "idleTimeout": "24h", "allowedLateness": "48h"}),
			"retention: 72h0m0s is shorter than outOfOrderness (0s) + idleTimeout (24h0m0s) + allowedLateness (48h0m0s) + 12h0m0s: a window could still be open, or take a correction, after its item expired, and its result would never be emitted"},
		{"allowedLateness past the longest retention with a long outOfOrderness", with(w{"allowedLateness": "8736h", "outOfOrderness": "24h", "idleTimeout": "24h"}),
			"allowedLateness: 8736h is longer than 8700h0m0s: a window is kept 60h0m0s past its allowed lateness (outOfOrderness + idleTimeout + 12h0m0s), and at most 8760h0m0s (retention)"},

		{"grouping by type", with(w{"key": "type", "parallelizationFactor": 2}), "key: grouping by type with parallelizationFactor 2 needs repartitioning: set partitionKeyIsGroupingKey or parallelizationFactor 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(tt.doc)
			if err == nil {
				t.Fatalf("Parse(%s) accepted: %+v", tt.doc, c)
			}
			if err.Error() != tt.want {
				t.Fatalf("Parse(%s)\n  error %q\n  want  %q", tt.doc, err, tt.want)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error is %T, want *ConfigError", err)
			}
			documentLevel := tt.name == "not JSON" || tt.name == "not an object" || strings.HasPrefix(tt.name, "a trailing comma")
			if documentLevel != (ce.Field == "") || (ce.Field != "" && !strings.HasPrefix(tt.want, ce.Field+": ")) {
				t.Fatalf("Field = %q for %q", ce.Field, tt.want)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	if _, err := FromEnv(env(nil)); err == nil || err.Error() != "PIPELINE_CONFIG: not set: want the pipeline's JSON config" {
		t.Errorf("unset: %v", err)
	}
	_, err := FromEnv(env(map[string]string{EnvVar: string(with(w{"latePolicy": "later"}))}))
	if err == nil || err.Error() != `PIPELINE_CONFIG: latePolicy: "later" is not a late policy: want "drop" or "correct"` {
		t.Errorf("bad config: %v", err)
	}
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "latePolicy" {
		t.Errorf("error does not unwrap to the ConfigError: %v", err)
	}
	c, err := FromEnv(env(map[string]string{EnvVar: string(with(nil))}))
	if err != nil || c.Name != "orders-per-region" {
		t.Errorf("good config: %v", err)
	}
	t.Setenv(EnvVar, string(with(nil)))
	if c, err := Load(); err != nil || c.Name != "orders-per-region" {
		t.Errorf("Load: %v", err)
	}
}

func TestWindowSpecIDsAreDistinct(t *testing.T) {
	specs := []WindowSpec{
		{Kind: Tumbling, Size: time.Minute},
		{Kind: Tumbling, Size: time.Minute, Offset: time.Second},
		{Kind: Hopping, Size: time.Minute, Advance: time.Second},
		{Kind: Sliding, Difference: time.Minute},
		{Kind: Session, Gap: time.Minute},
	}
	ids := map[string]bool{}
	for _, s := range specs {
		ids[s.ID()] = true
	}
	if len(ids) != len(specs) {
		t.Fatalf("IDs collide: %v", slices.Collect(maps.Keys(ids)))
	}
}

// TestOffsetDocMatchesWindows: the offset's description (the JSON Schema
// editors show) says where a day's windows start for an offset; they do.
func TestOffsetDocMatchesWindows(t *testing.T) {
	var doc string
	for _, f := range windowSpecFields {
		if f.name == "offset" {
			doc = f.doc
		}
	}
	for _, tt := range []struct {
		offset    string
		startHour int
	}{{"5h", 5}, {"-5h", 19}} {
		claim := fmt.Sprintf("%q: days starting at %02d:00 UTC", tt.offset, tt.startHour)
		if !strings.Contains(doc, claim) {
			t.Errorf("the offset's description %q does not say %s", doc, claim)
		}
		c := mustParse(t, `{"name": "n", "windows": [{"kind": "tumbling", "size": "24h", "offset": "`+tt.offset+`"}]}`)
		for _, at := range []time.Time{time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC)} {
			if w := c.Windows[0].Tumbling().Assign(at); w.Start.Hour() != tt.startHour {
				t.Errorf("offset %s: the day of %s starts at %s, want %02d:00 UTC", tt.offset, at, w.Start, tt.startHour)
			}
		}
	}
}

// TestParseErrorsAreBounded: a file may hold 64 KB in one string; an
// error names the field and echoes what was written, but a bounded part
// of it, keeping what is wanted at its end.
func TestParseErrorsAreBounded(t *testing.T) {
	big := strings.Repeat("é", 30000)
	tests := []struct {
		name, doc, field, end string
	}{
		{"name", `{"name":"` + big + `","windows":[{"kind":"tumbling","size":"1m"}]}`, "name", "must be 1 to 64 letters, digits, '-' or '_'"},
		{"unknown field", `{"name":"n","` + big + `":1,"windows":[{"kind":"tumbling","size":"1m"}]}`, "éé", "dedupeHorizon, dedupeLedger, retention)"},
		{"window kind", `{"name":"n","windows":[{"kind":"` + big + `","size":"1m"}]}`, "windows[0].kind", "want tumbling, hopping, sliding or session"},
		{"size", `{"name":"n","windows":[{"kind":"tumbling","size":"` + big + `"}]}`, "windows[0].size", `is not a duration such as "90s", "5m" or "1h30m"`},
		{"offset", `{"name":"n","windows":[{"kind":"tumbling","size":"1m","offset":"` + big + `"}]}`, "windows[0].offset", `"-5h"`},
		{"size too long", `{"name":"n","windows":[{"kind":"tumbling","size":"` + strings.Repeat("9", 30000) + `h"}]}`, "windows[0].size", "is longer than a duration can be (2562047h47m16.854775807s, about 292 years)"},
		{"key", `{"name":"n","key":"` + big + `","windows":[{"kind":"tumbling","size":"1m"}]}`, "key", `"data.<field>"`},
		{"aggregate", `{"name":"n","aggregates":["` + big + `"],"windows":[{"kind":"tumbling","size":"1m"}]}`, "aggregates[0]", "quantiles"},
		{"latePolicy", `{"name":"n","latePolicy":"` + big + `","windows":[{"kind":"tumbling","size":"1m"}]}`, "latePolicy", `"correct"`},
		{"dedupeHorizon", `{"name":"n","dedupeHorizon":"` + big + `","windows":[{"kind":"tumbling","size":"1m"}]}`, "dedupeHorizon", `"1h30m"`},
		{"an output's name", `{"name":"n","outputs":{"` + big + `":true},"windows":[{"kind":"tumbling","size":"1m"}]}`, "outputs.éé", "(known: table, stream, log)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *ConfigError", err)
			}
			if n := len(err.Error()); n > 2<<10 {
				t.Errorf("error of %d bytes, want at most 2 KB: %.200s…", n, err)
			}
			if !strings.HasPrefix(ce.Field, tt.field) || !strings.HasSuffix(ce.Reason, tt.end) || !utf8.ValidString(err.Error()) {
				t.Errorf("error %.300q…%.300q: want field %s and a reason ending %q, valid UTF-8", ce.Field, ce.Reason[max(0, len(ce.Reason)-300):], tt.field, tt.end)
			}
		})
	}
}
