package results

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/state"
)

// TimeFormat is how the tables and lines write times: RFC 3339 in UTC,
// with a fraction of a second only when there is one (session windows
// start at an event's time).
const TimeFormat = time.RFC3339Nano

func formatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// column is one value column of a table: its heading and how to read it
// from a result ("-" when the window has no such value).
type column struct {
	head  string
	value func(r agg.Result) string
}

// columns are the value columns of spec's aggregates, in the order a
// reader looks for them: count, sum, mean, min, max, the quantiles,
// distinct.
func columns(spec *agg.Spec) []column {
	a := spec.Aggregates
	var cols []column
	counted := func(f func(r agg.Result) float64) func(r agg.Result) string {
		return func(r agg.Result) string {
			if r.Count == 0 {
				return "-"
			}
			return FormatNumber(f(r))
		}
	}
	if a.Has(agg.Count) {
		cols = append(cols, column{"COUNT", func(r agg.Result) string { return strconv.FormatUint(r.Count, 10) }})
	}
	if a.Has(agg.Sum) {
		cols = append(cols, column{"SUM", func(r agg.Result) string { return FormatNumber(r.Sum) }})
	}
	if a.Has(agg.Mean) {
		cols = append(cols, column{"MEAN", counted(func(r agg.Result) float64 { return r.Mean })})
	}
	if a.Has(agg.Min) {
		cols = append(cols, column{"MIN", counted(func(r agg.Result) float64 { return r.Min })})
	}
	if a.Has(agg.Max) {
		cols = append(cols, column{"MAX", counted(func(r agg.Result) float64 { return r.Max })})
	}
	if a.Has(agg.Quantiles) {
		for _, q := range spec.Quantiles {
			name := agg.QuantileName(q)
			cols = append(cols, column{strings.ToUpper(name), func(r agg.Result) string {
				v, ok := r.Quantiles[name]
				if !ok || r.Count == 0 {
					return "-"
				}
				return FormatNumber(v)
			}})
		}
	}
	if a.Has(agg.Distinct) {
		cols = append(cols, column{"DISTINCT", func(r agg.Result) string { return strconv.FormatUint(r.Distinct, 10) }})
	}
	return cols
}

// FormatNumber writes v for a person: whole numbers without a fraction,
// others to three decimals (trailing zeros dropped), very large or very
// small ones in exponent form.
func FormatNumber(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 1e15 || math.Abs(v) < 1e-3:
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Status is how a table names a window's state: open (still changing,
// revision 0) or final.
func Status(v state.View) string {
	if v.Final {
		return "final"
	}
	return "open"
}

// WriteTable writes views (as Reader.Windows orders them) as one aligned
// table per window kind: start, end, status, revision ("-" while open),
// then the values of spec's aggregates. Writing nothing for no views is the
// caller's to explain.
func WriteTable(w io.Writer, spec *agg.Spec, views []state.View) error {
	cols := columns(spec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	kind := ""
	for i, v := range views {
		if i == 0 || v.Kind != kind {
			kind = v.Kind
			if i > 0 {
				fmt.Fprintln(tw)
			}
			n := 0
			for _, o := range views[i:] {
				if o.Kind != kind {
					break
				}
				n++
			}
			fmt.Fprintf(tw, "%s  (%d %s)\n", kind, n, plural(n, "window", "windows"))
			heads := []string{"START", "END", "STATUS", "REV"}
			for _, c := range cols {
				heads = append(heads, c.head)
			}
			fmt.Fprintln(tw, strings.Join(heads, "\t"))
		}
		rev := "-"
		if v.Final {
			rev = strconv.Itoa(v.Revision)
		}
		row := []string{formatTime(v.Window.Start), formatTime(v.Window.End), Status(v), rev}
		for _, c := range cols {
			row = append(row, c.value(v.Result))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// WindowJSON is one window as WriteJSON writes it, a line each.
type WindowJSON struct {
	Pipeline string     `json:"pipeline"`
	Key      string     `json:"key"`
	Window   string     `json:"window"` // the window kind, tumbling:1m0s
	Start    string     `json:"start"`
	End      string     `json:"end"`
	Status   string     `json:"status"` // open or final
	Revision int        `json:"revision"`
	Result   agg.Result `json:"result"`
}

// WriteJSON writes each view as one WindowJSON line.
func WriteJSON(w io.Writer, views []state.View) error {
	enc := json.NewEncoder(w)
	for _, v := range views {
		if err := enc.Encode(WindowJSON{Pipeline: v.Pipeline, Key: v.Key, Window: v.Kind,
			Start: formatTime(v.Window.Start), End: formatTime(v.Window.End), Status: Status(v), Revision: v.Revision, Result: v.Result}); err != nil {
			return err
		}
	}
	return nil
}

// FormatOutput writes one record of the WindowResults stream on one line:
// its type, key, window, revision and values, and for a correction or a
// retraction the value it replaces ("was: ...").
//
//	final       key=user-1 tumbling:1m0s 2026-11-29T10:00:00Z..2026-11-29T10:01:00Z rev=1 count=4 sum=520 mean=130
//	correction  key=user-1 tumbling:1m0s 2026-11-29T10:00:00Z..2026-11-29T10:01:00Z rev=2 count=5 sum=1020 mean=204 was: count=4 sum=520 mean=130
func FormatOutput(o aggregate.Output) string {
	var b strings.Builder
	// The record is whoever put it on the stream's: every text in it is
	// quoted unless plain (QuoteKey), not the key alone.
	fmt.Fprintf(&b, "%-10s  key=%s %s %s..%s rev=%d", QuoteKey(o.Kind), QuoteKey(o.Key), QuoteKey(o.Window), formatTime(o.Start), formatTime(o.End), o.Revision)
	if vals := values(o.Result); vals != "" {
		b.WriteString(" " + vals)
	}
	if o.Previous != nil {
		b.WriteString(" was: " + values(*o.Previous))
	}
	return b.String()
}

// values writes r's aggregates as name=value pairs, in the table's order.
func values(r agg.Result) string {
	a := r.Aggregates
	var parts []string
	add := func(name string, v string) { parts = append(parts, name+"="+v) }
	if a.Has(agg.Count) {
		add("count", strconv.FormatUint(r.Count, 10))
	}
	if a.Has(agg.Sum) {
		add("sum", FormatNumber(r.Sum))
	}
	if a.Has(agg.Mean) {
		add("mean", FormatNumber(r.Mean))
	}
	if a.Has(agg.Min) {
		add("min", FormatNumber(r.Min))
	}
	if a.Has(agg.Max) {
		add("max", FormatNumber(r.Max))
	}
	names := make([]string, 0, len(r.Quantiles))
	for n := range r.Quantiles {
		names = append(names, n)
	}
	slices.SortFunc(names, func(x, y string) int {
		fx, _ := strconv.ParseFloat(strings.TrimPrefix(x, "p"), 64)
		fy, _ := strconv.ParseFloat(strings.TrimPrefix(y, "p"), 64)
		switch {
		case fx < fy:
			return -1
		case fx > fy:
			return 1
		}
		return strings.Compare(x, y)
	})
	for _, n := range names {
		add(QuoteKey(n), FormatNumber(r.Quantiles[n]))
	}
	if a.Has(agg.Distinct) {
		add("distinct", strconv.FormatUint(r.Distinct, 10))
	}
	return strings.Join(parts, " ")
}

// QuoteKey writes a key as is when it is plain (printable UTF-8, no space,
// quote or '='), quoted otherwise, so a key can never forge a line's
// fields or reach the terminal as a control sequence, and a byte that is
// not UTF-8 shows as itself (\xff), not as the U+FFFD of another key.
func QuoteKey(k string) string {
	if k == "" {
		return `""`
	}
	for _, r := range k {
		if r == utf8.RuneError || !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' || r == '=' || r == '\\' {
			return strconv.Quote(k)
		}
	}
	return k
}
