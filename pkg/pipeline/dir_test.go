package pipeline_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

func doc(name string) string {
	return `{"name": "` + name + `", "windows": [{"kind": "tumbling", "size": "1m"}]}`
}

func joinDoc(name string) string {
	return `{"kind": "join", "name": "` + name + `", "left": "order", "right": "payment", "within": "10m"}`
}

func TestLoadDir(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		// wantNames, in order, for a valid directory; else wantErr are
		// substrings of the error.
		wantNames []string
		wantKinds []pipeline.Kind // if set
		wantErr   []string
	}{
		{
			name:      "sorted by file name, schema and other files skipped",
			files:     map[string]string{"b.json": doc("b"), "a.json": doc("a"), "pipeline.schema.json": `{"type": "object"}`, "README.md": "#", "a.json.bak": "x"},
			wantNames: []string{"a", "b"},
		},
		{
			name:      "$schema accepted",
			files:     map[string]string{"a.json": `{"$schema": "./pipeline.schema.json", "name": "a", "windows": [{"kind": "tumbling", "size": "1m"}]}`},
			wantNames: []string{"a"},
		},
		{
			name:    "empty dir",
			files:   map[string]string{"pipeline.schema.json": `{}`},
			wantErr: []string{"no pipeline files"},
		},
		{
			name:    "name is not the file's",
			files:   map[string]string{"orders.json": doc("checkouts")},
			wantErr: []string{"orders.json: name: ", `"checkouts" is not the file's name`},
		},
		{
			name:    "names differ only in case",
			files:   map[string]string{"Orders.json": doc("Orders"), "orders.json": doc("orders")},
			wantErr: []string{"orders.json: name: ", "Orders.json"},
		},
		{
			// Parse takes it; the aggregate function would refuse it at init.
			name:    "session window without partitionKeyIsGroupingKey",
			files:   map[string]string{"s.json": `{"name": "s", "windows": [{"kind": "tumbling", "size": "1m"}, {"kind": "session", "gap": "30s"}]}`},
			wantErr: []string{"s.json: windows[1].kind: ", "session windows need each key's records on one shard", "partitionKeyIsGroupingKey"},
		},
		{
			name:      "sliding window with partitionKeyIsGroupingKey",
			files:     map[string]string{"s.json": `{"name": "s", "windows": [{"kind": "sliding", "difference": "30s"}], "partitionKeyIsGroupingKey": true}`},
			wantNames: []string{"s"},
		},
		{
			name:    "bad field names file and field",
			files:   map[string]string{"a.json": doc("a"), "checkouts.json": `{"name": "checkouts", "windows": [{"kind": "tumbling", "size": "1x"}]}`},
			wantErr: []string{"checkouts.json: windows[0].size: ", `"1x"`},
		},
		{
			name:    "unknown field",
			files:   map[string]string{"a.json": `{"name": "a", "windows": [{"kind": "tumbling", "size": "1m"}], "window": []}`},
			wantErr: []string{"a.json: window: unknown field"},
		},
		{
			name:      "every kind, sorted by file name",
			files:     map[string]string{"b.json": doc("b"), "a.json": `{"kind": "aggregate", "name": "a", "windows": [{"kind": "tumbling", "size": "1m"}]}`, "orders-payments.json": joinDoc("orders-payments"), "detect.json": `{"kind": "cep", "name": "detect", "outOfOrderness": "2s"}`},
			wantNames: []string{"a", "b", "detect", "orders-payments"},
			wantKinds: []pipeline.Kind{pipeline.KindAggregate, pipeline.KindAggregate, pipeline.KindCEP, pipeline.KindJoin},
		},
		{
			name:    "a join file's bad duration names file and field",
			files:   map[string]string{"a.json": doc("a"), "orders-payments.json": `{"kind": "join", "name": "orders-payments", "left": "order", "right": "payment", "within": "10 minutes"}`},
			wantErr: []string{"orders-payments.json: within: ", `"10 minutes" is not a duration`},
		},
		{
			name:    "a join file's missing field",
			files:   map[string]string{"orders-payments.json": `{"kind": "join", "name": "orders-payments", "left": "order", "within": "10m"}`},
			wantErr: []string{"orders-payments.json: right: required"},
		},
		{
			name:    "a join file's unknown field",
			files:   map[string]string{"orders-payments.json": `{"kind": "join", "name": "orders-payments", "left": "order", "right": "payment", "within": "10m", "windows": []}`},
			wantErr: []string{"orders-payments.json: windows: unknown field"},
		},
		{
			name:    "a join file's join type",
			files:   map[string]string{"orders-payments.json": `{"kind": "join", "name": "orders-payments", "left": "order", "right": "payment", "within": "10m", "joinType": "full"}`},
			wantErr: []string{"orders-payments.json: joinType: ", "inner, left or outer"},
		},
		{
			name:    "a join file's key",
			files:   map[string]string{"orders-payments.json": `{"kind": "join", "name": "orders-payments", "left": "order", "right": "payment", "within": "10m", "key": "type"}`},
			wantErr: []string{"orders-payments.json: key: ", "is not a join key"},
		},
		{
			name:    "a join file's name is the file's",
			files:   map[string]string{"orders.json": joinDoc("orders-payments")},
			wantErr: []string{"orders.json: name: ", `"orders-payments" is not the file's name`},
		},
		{
			name:    "a cep file's type",
			files:   map[string]string{"detect.json": `{"kind": "cep", "name": "detect", "partitionKeyIsJoinKey": true}`},
			wantErr: []string{"detect.json: partitionKeyIsJoinKey: unknown field"},
		},
		{
			name:    "a cep file's duration a number",
			files:   map[string]string{"detect.json": `{"kind": "cep", "name": "detect", "idleTimeout": 20}`},
			wantErr: []string{"detect.json: idleTimeout: must be a duration string"},
		},
		{
			name:    "unknown kind",
			files:   map[string]string{"a.json": `{"kind": "joins", "name": "a"}`},
			wantErr: []string{"a.json: kind: ", `did you mean "join"`},
		},
		{
			name:    "an aggregation with a join's fields",
			files:   map[string]string{"a.json": `{"name": "a", "left": "order", "windows": [{"kind": "tumbling", "size": "1m"}]}`},
			wantErr: []string{"a.json: left: unknown field"},
		},
		{
			name:    "$schema not a string",
			files:   map[string]string{"a.json": `{"$schema": 1, "name": "a", "windows": [{"kind": "tumbling", "size": "1m"}]}`},
			wantErr: []string{"a.json: $schema: must be a string"},
		},
		{
			name:    "not JSON",
			files:   map[string]string{"a.json": `{"name": "a",`},
			wantErr: []string{"a.json: not valid JSON"},
		},
		{
			name:    "too large for PIPELINE_CONFIG",
			files:   map[string]string{"a.json": `{"name": "a", "eventTypes": [` + eventTypes(pipeline.MaxConfigBytes/200) + `], "windows": [{"kind": "tumbling", "size": "1m"}]}`},
			wantErr: []string{"a.json: ", "more than 3072"},
		},
		{
			name:    "too large a file",
			files:   map[string]string{"a.json": doc("a") + strings.Repeat(" ", pipeline.MaxFileBytes)},
			wantErr: []string{"a.json: more than 65536 bytes"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			files, err := pipeline.LoadDir(dir)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("LoadDir = %d files, want an error containing %q", len(files), tt.wantErr)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("LoadDir error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadDir: %v", err)
			}
			var names []string
			var kinds []pipeline.Kind
			for _, f := range files {
				names = append(names, f.Name)
				kinds = append(kinds, f.Kind)
				if want := filepath.Join(dir, f.Name+".json"); f.Path != want {
					t.Errorf("Path = %s, want %s", f.Path, want)
				}
				// JSON is the file compacted, and reads as the same file.
				if strings.ContainsAny(string(f.JSON), "\n\t") || strings.Contains(string(f.JSON), `": `) {
					t.Errorf("%s: JSON is not compacted: %s", f.Path, f.JSON)
				}
				if again, err := pipeline.NewFile(f.Path, f.JSON); err != nil || again.Name != f.Name || again.Kind != f.Kind {
					t.Errorf("%s: NewFile(JSON) = %+v, %v", f.Path, again, err)
				}
				if (f.Config != nil) != (f.Kind == pipeline.KindAggregate) {
					t.Errorf("%s: kind %s with Config %v: only an aggregation has one", f.Path, f.Kind, f.Config)
				}
			}
			if !slices.Equal(names, tt.wantNames) {
				t.Errorf("names = %v, want %v", names, tt.wantNames)
			}
			if tt.wantKinds != nil && !slices.Equal(kinds, tt.wantKinds) {
				t.Errorf("kinds = %v, want %v", kinds, tt.wantKinds)
			}
		})
	}
}

func TestLoadDirMissing(t *testing.T) {
	_, err := pipeline.LoadDir(filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadDir of a missing dir = %v, want ErrNotExist", err)
	}
}

// A field error keeps its *ConfigError under the file's name, so a caller
// can tell the field.
func TestLoadDirConfigError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte(`{"name": "a", "windows": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := pipeline.LoadDir(dir)
	var ce *pipeline.ConfigError
	if !errors.As(err, &ce) || ce.Field != "windows" {
		t.Errorf("LoadDir = %v, want a *ConfigError on windows", err)
	}
}

// TestLoadDirNamesEveryBadFile: a directory with two bad files and a good
// one names both bad files with their fields in one error, in the files'
// order, so a user fixes them in one round; the first file's
// *ConfigError is still found.
func TestLoadDirNamesEveryBadFile(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"a.json": `{"name": "a", "windows": []}`,
		"b.json": doc("b"),
		"c.json": `{"name": "c", "windows": [{"kind": "tumbling", "size": "1m"}], "outOfOrderness": "5x"}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := pipeline.LoadDir(dir)
	if err == nil {
		t.Fatal("LoadDir of two bad files: no error")
	}
	msg := err.Error()
	a, c := strings.Index(msg, "a.json: windows"), strings.Index(msg, "c.json: outOfOrderness")
	if a < 0 || c < 0 || a > c || strings.Contains(msg, "b.json") {
		t.Errorf("LoadDir = %q, want a.json's windows then c.json's outOfOrderness named, and not b.json", msg)
	}
	var ce *pipeline.ConfigError
	if !errors.As(err, &ce) || ce.Field != "windows" {
		t.Errorf("LoadDir = %v, want the first file's *ConfigError on windows", err)
	}
}

// TestNewFileRefusesNamesOfSeparatorsOnly: the stack names a pipeline's
// constructs and outputs by its name's letters and digits; a name of '-'
// and '_' only left none, and cdk synth failed deep in the construct tree
// without naming the file. It is refused naming the file and the field.
func TestNewFileRefusesNamesOfSeparatorsOnly(t *testing.T) {
	for _, doc := range []string{
		`{"name": "_", "windows": [{"kind": "tumbling", "size": "1m"}]}`,
		`{"kind": "join", "name": "--", "left": "search", "right": "click", "within": "30s"}`,
		`{"kind": "cep", "name": "_-_"}`,
	} {
		var m struct{ Name string }
		if err := json.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("pipelines", m.Name+".json")
		_, err := pipeline.NewFile(path, []byte(doc))
		var ce *pipeline.ConfigError
		if !errors.As(err, &ce) || ce.Field != "name" || !strings.HasPrefix(err.Error(), path+": name: ") || !strings.Contains(err.Error(), "letter or digit") {
			t.Errorf("NewFile(%s) = %v, want an error naming %s and its name", doc, err, path)
		}
	}
	if _, err := pipeline.NewFile("pipelines/_a-1.json", []byte(`{"name": "_a-1", "windows": [{"kind": "tumbling", "size": "1m"}]}`)); err != nil {
		t.Errorf("a name with a letter: %v", err)
	}
}

// TestNewFileNamesAByteOrderMark: a file saved by an editor that starts
// UTF-8 with a byte order mark used to be refused as "invalid character
// 'ï'" at column 1, a character the file does not seem to hold.
func TestNewFileNamesAByteOrderMark(t *testing.T) {
	bom := "\xef\xbb\xbf" + doc("p")
	_, err := pipeline.NewFile("pipelines/p.json", []byte(bom))
	if err == nil || !strings.HasPrefix(err.Error(), "pipelines/p.json: ") || !strings.Contains(err.Error(), "byte order mark") {
		t.Errorf("NewFile = %v, want an error naming the file and its byte order mark", err)
	}
}

// The pipelines the repository ships (what the stack deploys; links in
// testdata/shipped-pipelines, so that a pipeline you add does not change
// what this test expects) load, and every aggregation is a config the
// aggregate function runs.
func TestRepoPipelines(t *testing.T) {
	files, err := pipeline.LoadDir(filepath.Join("..", "..", "testdata", "shipped-pipelines"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range pipeline.OfKind(files, pipeline.KindAggregate) {
		names = append(names, f.Name)
		checkDeployable(t, f.Path, f.JSON)
	}
	if want := []string{"checkouts", "pageviews"}; !slices.Equal(names, want) {
		t.Errorf("aggregations = %v, want %v", names, want)
	}
	// The join and CEP files: packages join and cep parse them
	// (their infra_config_test.go).
	var others []string
	for _, f := range files {
		if f.Kind != pipeline.KindAggregate {
			others = append(others, string(f.Kind)+" "+f.Name)
		}
	}
	if want := []string{"cep detect", "join search-click"}; !slices.Equal(others, want) {
		t.Errorf("other files = %v, want %v", others, want)
	}
}

// eventTypes is n different event types of 200 characters, as JSON array
// elements.
func eventTypes(n int) string {
	ts := make([]string, n)
	for i := range ts {
		ts[i] = fmt.Sprintf("%q", fmt.Sprintf("%03d", i)+strings.Repeat("x", 197))
	}
	return strings.Join(ts, ", ")
}
