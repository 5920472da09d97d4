package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// maxMistakes bounds the mistakes one error lists; the rest are counted
// ("… and 5 more"). A file of 64 KB could hold thousands of unknown
// fields, and the first twenty say what to fix first.
const maxMistakes = 20

// mistakes collects the independent mistakes of one document, so that its
// author fixes them all in one go rather than one a run. Each check runs
// only when what it reads was read without a mistake (ok): a mistake that
// follows from another (a duration checked against one that did not
// parse, a required field absent because its name is misspelt) would send
// the author after the wrong field.
type mistakes struct {
	list []mistake
	// at holds the fields with a mistake and those a misspelling leaves
	// absent (a "nmae" for "name"), and within every field holding one
	// of them, so that ok costs the length of its fields whatever the
	// number of mistakes (a file of 64 KB may hold thousands).
	at, within map[string]bool
	// more counts mistakes found but not kept, past maxMistakes in one
	// object.
	more int
	// order is the position of each top-level field in the document.
	order map[string]int
}

type mistake struct {
	err *ConfigError
	// root is the top-level field the mistake is under, for its order.
	root string
}

func newMistakes(doc []byte) *mistakes {
	m := &mistakes{order: map[string]int{}, at: map[string]bool{}, within: map[string]bool{}}
	for i, k := range keysInOrder(doc) {
		m.order[k] = i
	}
	return m
}

// add records err, a *ConfigError on a field of the document, and reports
// whether there was one.
func (m *mistakes) add(err error) bool {
	if err == nil {
		return false
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		ce = NewConfigError("", err.Error())
	}
	root := ce.Field
	if i := strings.IndexAny(root, ".["); i >= 0 {
		root = root[:i]
	}
	m.list = append(m.list, mistake{err: ce, root: root})
	m.stop(ce.Field)
	return true
}

// stop records that what reads field, or a field in it, is not checked.
func (m *mistakes) stop(field string) {
	m.at[field] = true
	m.within[field] = true
	for i := range len(field) {
		if field[i] == '.' || field[i] == '[' {
			m.within[field[:i]] = true
		}
	}
}

// ok reports whether no mistake was found in, around or for want of any of
// fields: "windows[1]" is not ok after a mistake in "windows[1].size" nor
// after one in "windows".
func (m *mistakes) ok(fields ...string) bool {
	for _, f := range fields {
		if m.within[f] {
			return false
		}
		for i := range len(f) {
			if (f[i] == '.' || f[i] == '[') && m.at[f[:i]] {
				return false
			}
		}
	}
	return true
}

// err is nil when no mistake was found, the one *ConfigError when one was,
// else an error listing them in the document's order (its top-level
// fields', a mistake about an absent field last), as "3 mistakes:" and one
// indented line each, which errors.As reads as its first *ConfigError.
func (m *mistakes) err() error {
	if len(m.list) == 0 {
		return nil
	}
	pos := func(x mistake) int {
		if i, ok := m.order[x.root]; ok {
			return i
		}
		return len(m.order)
	}
	slices.SortStableFunc(m.list, func(a, b mistake) int { return pos(a) - pos(b) })
	if len(m.list) == 1 && m.more == 0 {
		return m.list[0].err
	}
	e := &configErrors{more: m.more}
	for i, x := range m.list {
		if i == maxMistakes {
			e.more += len(m.list) - i
			break
		}
		e.errs = append(e.errs, x.err)
	}
	return e
}

// configErrors is a document's mistakes, at most maxMistakes of them, and
// how many more there are. Unwrap gives each *ConfigError, the first
// first, so that errors.As finds it.
type configErrors struct {
	errs []*ConfigError
	more int
}

// Error is "3 mistakes:" and a line for each, indented, naming its field:
// a caller's prefix ("pipelines/orders.json: ") reads as the head of the
// list.
func (e *configErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d mistakes:", len(e.errs)+e.more)
	for _, ce := range e.errs {
		b.WriteString("\n  ")
		b.WriteString(ce.Error())
	}
	if e.more > 0 {
		fmt.Fprintf(&b, "\n  … and %d more", e.more)
	}
	return b.String()
}

// Unwrap is each mistake, in order.
func (e *configErrors) Unwrap() []error {
	out := make([]error, len(e.errs))
	for i, ce := range e.errs {
		out[i] = ce
	}
	return out
}

// keysInOrder is the members' names of the JSON object doc, in the order
// written (nil when doc is no object).
func keysInOrder(doc []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
}

// unknown records ce, on a field the document should not hold under
// top-level field root; unset is the known field it seems a misspelling of
// when the document lacks that one ("" if none), whose readers are then
// not checked.
func (m *mistakes) unknown(root string, ce *ConfigError, unset string) {
	m.list = append(m.list, mistake{err: ce, root: root})
	if unset != "" {
		m.stop(unset)
	}
}
