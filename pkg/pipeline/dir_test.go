package pipeline_test

import (
	"errors"
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

func TestLoadDir(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		// wantNames, in order, for a valid directory; else wantErr are
		// substrings of the error.
		wantNames []string
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
			files:   map[string]string{"a.json": `{"name": "a", "eventTypes": ["` + strings.Repeat("x", pipeline.MaxConfigBytes) + `"], "windows": [{"kind": "tumbling", "size": "1m"}]}`},
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
			for _, f := range files {
				names = append(names, f.Config.Name)
				if want := filepath.Join(dir, f.Config.Name+".json"); f.Path != want {
					t.Errorf("Path = %s, want %s", f.Path, want)
				}
				// JSON is the file compacted, and parses to the same config.
				if strings.ContainsAny(string(f.JSON), "\n\t") || strings.Contains(string(f.JSON), `": `) {
					t.Errorf("%s: JSON is not compacted: %s", f.Path, f.JSON)
				}
				if c, err := pipeline.Parse(f.JSON); err != nil || c.Name != f.Config.Name {
					t.Errorf("%s: Parse(JSON) = %v, %v", f.Path, c, err)
				}
			}
			if !slices.Equal(names, tt.wantNames) {
				t.Errorf("names = %v, want %v", names, tt.wantNames)
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

// The repository's pipelines (what the stack deploys) load, and every one is
// a config the aggregate function runs.
func TestRepoPipelines(t *testing.T) {
	files, err := pipeline.LoadDir(filepath.Join("..", "..", "pipelines"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Config.Name)
		checkDeployable(t, f.Path, f.JSON)
	}
	if want := []string{"checkouts", "pageviews"}; !slices.Equal(names, want) {
		t.Errorf("pipelines = %v, want %v", names, want)
	}
}
