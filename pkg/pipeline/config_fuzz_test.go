package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
	"github.com/tributary-dev/tributary/pkg/window"
)

// FuzzParse: whatever the document, Parse either returns a config that
// holds every rule Parse documents (and can be used: windows assigned,
// records extracted), or a *ConfigError that names the field at fault, and
// it does the same on a second call. It never panics.
func FuzzParse(f *testing.F) {
	infra, err := os.ReadFile(filepath.Join("..", "..", "pipelines", "pageviews.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(infra)
	f.Add(with(nil))
	for _, changes := range []map[string]any{
		{"windows": windows(w{"kind": "sliding", "difference": "10s"}, w{"kind": "session", "gap": "30m"}), "partitionKeyIsGroupingKey": true},
		{"windows": windows(w{"kind": "tumbling", "size": "24h", "offset": "-5h"}), "latePolicy": "drop", "allowedLateness": nil},
		{"aggregates": []any{"min", "max", "mean"}, "distinct": nil, "quantiles": []any{0.25, 0.75}},
		{"aggregates": []any{"count", "distinct"}, "value": nil, "distinctPrecision": 14},
		{"key": "key", "parallelizationFactor": 10},
		{"key": "type", "eventTypes": []any{"a", "b"}, "outputs": w{"stream": true, "table": false}},
		{"windows": windows(w{"kind": "hopping", "size": "2m", "advance": "45s"})},
		{"agregates": []any{"sum"}},
	} {
		f.Add(with(changes))
	}
	for _, s := range []string{
		`{"name": "n", "windows": [{"kind": "session", "gap": "30m"}]}`,
		`{"name": "n", "key": "data.region", "partitionKeyIsGroupingKey": true, "parallelizationFactor": 4, "windows": [{"kind": "tumbling", "size": "1m"}]}`,
		`{"name":`, `[]`, `null`, `{}`, `{"":0}`, `{"windows":[{"":1}]}`, `{"name":"n","windows":[{"kind":"tumbling","size":"1500us"}]}`,
		`{"name":"n","windows":[{"kind":"tumbling","size":"1m"}],"quantiles":[0.5]}`,
		`{"name":"n","windows":[{"kind":"tumbling","size":"1m"},{"kind":"tumbling","size":"60s"}]}`,
		`{"name":"n","windows":[{"kind":"tumbling","size":"9223372036s"}],"outOfOrderness":"2562047h"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := Parse(doc)
		c2, err2 := Parse(doc)
		if !reflect.DeepEqual(c, c2) || fmt.Sprint(err) != fmt.Sprint(err2) {
			t.Fatalf("Parse(%q) differs between two calls: %v / %v", doc, err, err2)
		}
		if err != nil {
			if msg := checkConfigError(doc, err); msg != "" {
				t.Fatalf("Parse(%q): error %q: %s", doc, err, msg)
			}
			return
		}
		if msg := checkConfig(c); msg != "" {
			t.Fatalf("Parse(%q) accepted a config that breaks its rules: %s\n%+v", doc, msg, c)
		}
	})
}

// checkConfigError says what is wrong with err as Parse's error for doc
// ("" if nothing): it must be a *ConfigError with a reason, naming a field
// of the config (or a field the document has that the config does not),
// and naming none only when the document is not a JSON object; or, for
// several mistakes, a list of such errors, one a line under a count, at
// most maxMistakes of them, the first the one errors.As finds.
func checkConfigError(doc []byte, err error) string {
	var first *ConfigError
	if !errors.As(err, &first) {
		return fmt.Sprintf("is %T, not a *ConfigError", err)
	}
	errs := mistakesOf(err)
	if len(errs) == 0 || errs[0] != first {
		return "errors.As does not find its first mistake"
	}
	lines := strings.Split(err.Error(), "\n")
	if len(errs) == 1 {
		if _, many := err.(*configErrors); many {
			return "lists one mistake"
		}
		lines = []string{"  " + lines[0]}
	} else if len(errs) > maxMistakes || !strings.HasSuffix(lines[0], " mistakes:") || len(lines) < len(errs)+1 {
		return "is not a count and a line for each mistake"
	} else {
		lines = lines[1:]
	}
	for i, ce := range errs {
		if msg := checkMistake(doc, ce, lines[i], len(errs) > 1); msg != "" {
			return fmt.Sprintf("mistake %d: %s", i, msg)
		}
	}
	return ""
}

// checkMistake is checkConfigError for one mistake, ce, written as line.
func checkMistake(doc []byte, ce *ConfigError, line string, many bool) string {
	if ce.Reason == "" {
		return "has no reason"
	}
	// The strict reader scans in order and names the first place it
	// refuses (a key twice, at any depth, as a path such as [""][0][""];
	// text that is not UTF-8, as no field), even in a document cut off
	// after it.
	var se *strictjson.Error
	if err := strictjson.Check(doc, strictjson.Options{MaxBytes: MaxFileBytes}); errors.As(err, &se) && strictjson.Cut(se.Path, maxFieldEcho) == ce.Field {
		want := "  " + ce.Reason
		if ce.Field != "" {
			want = "  " + ce.Field + ": " + ce.Reason
		}
		if line != want {
			return "does not start with its field"
		}
		return ""
	}
	var top map[string]json.RawMessage
	isObject := json.Unmarshal(doc, &top) == nil && top != nil
	if ce.Field == "" {
		if isObject || many {
			return "names no field, but the document is an object"
		}
		return ""
	}
	if !isObject {
		return fmt.Sprintf("names field %q, but the document is not an object", ce.Field)
	}
	if line != "  "+ce.Field+": "+ce.Reason {
		return "does not start with its field"
	}
	for k := range top { // an unknown field, named as written or quoted, cut when long
		for _, name := range []string{k, strconv.Quote(k)} {
			if ce.Field == name || ce.Field == strictjson.Cut(name, maxFieldEcho) {
				return ""
			}
		}
	}
	root := ce.Field
	if i := strings.IndexAny(root, ".["); i >= 0 {
		root = root[:i]
	}
	if !slices.Contains(topFields, root) {
		return fmt.Sprintf("names %q, which is neither a config field nor in the document", ce.Field)
	}
	return ""
}

// checkConfig says which documented rule c breaks ("" if none), and uses
// it as the functions do.
func checkConfig(c *Config) string {
	switch {
	case !namePattern.MatchString(c.Name):
		return "name"
	case slices.Contains(c.EventTypes, ""):
		return "an empty event type"
	case c.Aggregates == nil:
		return "no aggregates"
	case c.Key.IsZero() || c.Key.src == fromID:
		return "grouping key " + c.Key.String()
	case c.Aggregates.Aggregates.NeedsValue() != !c.Value.IsZero():
		return "value set without an aggregate that needs it, or missing"
	case !c.Value.IsZero() && c.Value.src != fromData:
		return "value not in data"
	case len(c.Windows) == 0:
		return "no windows"
	case c.OutOfOrderness < 0 || c.OutOfOrderness%window.Resolution != 0:
		return "outOfOrderness"
	case c.IdleTimeout <= 0 || c.IdleTimeout%window.Resolution != 0:
		return "idleTimeout"
	case !c.Outputs.Table && !c.Outputs.Stream:
		return "no outputs"
	case c.ParallelizationFactor < 1 || c.ParallelizationFactor > MaxParallelizationFactor:
		return "parallelizationFactor"
	case c.ParallelizationFactor > 1 && !c.Key.IsPartitionKey() && !c.PartitionKeyIsGroupingKey:
		return "parallelization without repartitioning"
	}
	spec := *c.Aggregates
	if err := spec.Validate(); err != nil {
		return "aggregates: " + err.Error()
	}
	if err := c.Late.Validate(); err != nil {
		return "late rule: " + err.Error()
	}
	if c.Late.AllowedLateness%window.Resolution != 0 {
		return "allowedLateness"
	}
	ids := map[string]bool{}
	at := time.Date(2026, 11, 29, 10, 41, 7, 250e6, time.UTC)
	for i, ws := range c.Windows {
		if ids[ws.ID()] {
			return fmt.Sprintf("windows[%d] repeats a window", i)
		}
		ids[ws.ID()] = true
		var err error
		var got []window.Window
		switch ws.Kind {
		case Tumbling:
			err = ws.Tumbling().Validate()
			got = ws.Tumbling().AppendWindows(nil, at)
		case Hopping:
			err = ws.Hopping().Validate()
			if err == nil && (ws.Advance > ws.Size || ws.Size%ws.Advance != 0) {
				err = errors.New("advance does not divide size")
			}
			if err == nil {
				got = ws.Hopping().AppendWindows(nil, at)
			}
		case Sliding:
			err = ws.Sliding().Validate()
		case Session:
			err = ws.Session().Validate()
		default:
			err = fmt.Errorf("kind %d", ws.Kind)
		}
		if err != nil {
			return fmt.Sprintf("windows[%d]: %v", i, err)
		}
		for _, d := range []time.Duration{ws.Size, ws.Advance, ws.Difference, ws.Gap, ws.Offset} {
			if d%window.Resolution != 0 {
				return fmt.Sprintf("windows[%d]: %s is not whole milliseconds", i, d)
			}
		}
		if (ws.Kind == Tumbling || ws.Kind == Hopping) && len(got) == 0 {
			return fmt.Sprintf("windows[%d] assigns %s to no window", i, at)
		}
	}
	// A record the functions would read: extracting from it does not
	// panic, and fails only with a *stream.PoisonRecordError.
	c.NewWatermark()
	env := stream.Envelope{ID: "e", Type: "t", Key: "k", OccurredAt: at, SentAt: at,
		Data: json.RawMessage(`{"region":"eu","total":12.5,"customer":"c-1","ms":3,"a":{"b":[1]}}`)}
	if _, _, _, err := c.Extract(&env); err != nil {
		var pe *stream.PoisonRecordError
		if !errors.As(err, &pe) || pe.Field == "" {
			return fmt.Sprintf("Extract fails with %v, not a poison error naming a field", err)
		}
	}
	return ""
}
