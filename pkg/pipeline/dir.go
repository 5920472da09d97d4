package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tributary-dev/tributary/pkg/limits"
)

// Bounds on a pipeline file.
const (
	// MaxFileBytes bounds a pipeline file as read from disk, whitespace
	// and a "$schema" included.
	MaxFileBytes = 64 << 10
	// MaxConfigBytes bounds a pipeline's compacted JSON, which the stack
	// hands to its functions as PIPELINE_CONFIG: Lambda allows 4 KB for
	// all of a function's environment variables together, and the table,
	// parameter and stream names share them.
	MaxConfigBytes = 3 << 10
)

// SchemaSuffix ends the name of a JSON Schema file in a pipelines
// directory (pipeline.schema.json), which LoadDir skips.
const SchemaSuffix = ".schema.json"

// File is one pipeline file of a directory: where it was read from, its
// kind and name, its parsed config (an aggregation's; nil for the other
// kinds, which packages join and cep parse from JSON) and its JSON,
// compacted, as the functions receive it (PIPELINE_CONFIG, JOIN_CONFIG or
// CEP_CONFIG).
type File struct {
	Path   string
	Kind   Kind
	Name   string
	Config *Config
	JSON   []byte
}

// NewFile parses doc, the contents of the pipeline file at path, by its
// kind ("kind": aggregate when absent, join or cep; an aggregation with
// Parse and CheckKeyedWindows, a join or CEP file against its table in
// schema.go), and checks
// that its name holds a letter or digit and is the file's base name
// ("checkouts.json" declares "name": "checkouts") and that its compacted JSON fits in MaxConfigBytes. Errors
// start with path and name the field, for example
//
//	pipelines/checkouts.json: windows[0].size: "1x" is not a duration such as "90s", "5m" or "1h30m"
//	pipelines/orders-payments.json: within: required: How long after a left record ...
//
// and, for a file with several mistakes (of its parse or its kind's table,
// and of these checks), every one, under the file's name, as Parse lists
// them:
//
//	pipelines/checkouts.json: 2 mistakes:
//	  name: "checkout" is not the file's name: want "checkouts", or rename the file to checkout.json
//	  windows[0].size: "1x" is not a duration such as "90s", "5m" or "1h30m"
func NewFile(path string, doc []byte) (File, error) {
	if len(doc) > MaxFileBytes {
		return File{}, fmt.Errorf("%s: %d bytes, more than %d: a pipeline file is a small JSON object", path, len(doc), MaxFileBytes)
	}
	if bytes.HasPrefix(doc, []byte("\xef\xbb\xbf")) {
		// Some editors save UTF-8 so; the JSON reader would report an
		// "invalid character 'ï'" the file does not seem to hold.
		return File{}, fmt.Errorf("%s: %w", path, &ConfigError{
			Reason: "starts with a UTF-8 byte order mark (EF BB BF): save it as UTF-8 without one"})
	}
	kind, err := fileKind(doc)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	f := File{Path: path, Kind: kind}
	// The file's mistakes, its parse's and those below, are reported
	// together.
	var m *mistakes
	if kind == KindAggregate {
		if f.Config, m, err = parse(doc); err == nil {
			f.Name = f.Config.Name
			f.Config.checkKeyedWindows(m)
		}
	} else {
		f.Name, m, err = checkOperator(kind, doc)
	}
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	base := strings.TrimSuffix(filepath.Base(path), ".json")
	switch {
	case !m.ok("name"):
	case strings.Trim(f.Name, "-_") == "":
		// The stack names the file's constructs and outputs by the
		// name's letters and digits ("Pageviews", "PageviewsDashboardName").
		m.add(&ConfigError{Field: "name",
			Reason: fmt.Sprintf("%q has no letter or digit: the stack names the pipeline's resources and outputs by them", f.Name)})
	case f.Name != base:
		m.add(&ConfigError{Field: "name",
			Reason: fmt.Sprintf("%q is not the file's name: want %q, or rename the file to %s.json", f.Name, base, f.Name)})
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		// strictjson accepted it, so it is valid JSON; keep the error anyway.
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	if compact.Len() > MaxConfigBytes {
		m.add(&ConfigError{
			Reason: fmt.Sprintf("%d bytes compacted, more than %d: the functions receive it in an environment variable, and Lambda allows 4 KB for all of them", compact.Len(), MaxConfigBytes)})
	}
	if err := m.err(); err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	f.JSON = compact.Bytes()
	return f, nil
}

// OfKind returns the files of kind k, in their order.
func OfKind(files []File, k Kind) []File {
	var out []File
	for _, f := range files {
		if f.Kind == k {
			out = append(out, f)
		}
	}
	return out
}

// LoadDir reads every pipeline file in dir, of every kind (OfKind picks
// one): each *.json file but the JSON Schema (*.schema.json), in the order
// of their names, each parsed with NewFile. It refuses a directory with no
// pipeline file and two files whose names differ only in case (they would collide on a file system
// that ignores case, and in the names the stack derives from them). Every
// bad file is named in one error (at most maxBadFiles), with its mistakes'
// fields; errors.As finds the first file's *ConfigError.
func LoadDir(dir string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("pipelines directory: %w", err)
	}
	var files []File
	var bad []error
	seen := map[string]string{} // lower-case name -> path
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasSuffix(name, SchemaSuffix) || e.IsDir() {
			continue
		}
		path := filepath.Join(dir, name)
		doc, err := readBounded(path)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		f, err := NewFile(path, doc)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		key := strings.ToLower(f.Name)
		if other, ok := seen[key]; ok {
			bad = append(bad, fmt.Errorf("%s: %w", path, &ConfigError{Field: "name",
				Reason: fmt.Sprintf("%q is also the pipeline of %s (names must differ in more than case)", f.Name, other)}))
			continue
		}
		seen[key] = path
		files = append(files, f)
	}
	if len(bad) > 0 {
		return nil, badFiles(bad)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no pipeline files: want one <name>.json per pipeline", dir)
	}
	return files, nil
}

// maxBadFiles bounds the files one LoadDir error names.
const maxBadFiles = 20

// badFiles is the error of a directory whose files in bad failed, each
// named with its mistakes, in the files' order: at most maxBadFiles, then
// how many more. errors.As finds the first file's.
func badFiles(bad []error) error {
	if len(bad) == 1 {
		return bad[0]
	}
	if len(bad) > maxBadFiles {
		bad = append(bad[:maxBadFiles:maxBadFiles], fmt.Errorf("… and %d more files", len(bad)-maxBadFiles))
	}
	return errors.Join(bad...)
}

// readBounded reads the file at path, refusing one larger than
// MaxFileBytes without reading it all.
func readBounded(path string) ([]byte, error) {
	doc, over, err := limits.ReadFileAtMost(path, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if over {
		return nil, fmt.Errorf("%s: more than %d bytes: a pipeline file is a small JSON object", path, MaxFileBytes)
	}
	return doc, nil
}
