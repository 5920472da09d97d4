package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Namespace is the CloudWatch namespace of every Tributary metric.
const Namespace = "Tributary"

// Unit is a CloudWatch metric unit.
type Unit string

// The units Tributary uses (any CloudWatch unit name works).
const (
	Count        Unit = "Count"
	Milliseconds Unit = "Milliseconds"
	Seconds      Unit = "Seconds"
	Bytes        Unit = "Bytes"
	None         Unit = "None"
)

// EMF's and CloudWatch's limits. A document that breaks one is dropped
// by CloudWatch without a word, so Flush keeps within them: a directive
// holds at most 100 metrics and a metric at most 100 values (EMF), a
// dimension set at most 30 dimensions, and one document is one log event,
// which CloudWatch Logs takes up to 256 KB (a longer one is truncated and
// is no longer JSON). Names and values follow CloudWatch's Dimension and
// Metric rules (checkName).
const (
	maxMetrics       = 100
	maxValues        = 100
	maxDimensions    = 30
	maxDocumentBytes = 256 << 10
	// maxMetricName and maxDimensionName are CloudWatch's longest metric
	// and dimension names, maxDimensionValue its longest dimension value.
	maxMetricName     = 255
	maxDimensionName  = 255
	maxDimensionValue = 1024
	// minMagnitude and maxMagnitude bound the values CloudWatch takes
	// (besides 0): it refuses one outside them.
	minMagnitude = 8.515920e-109
	maxMagnitude = 1.174271e+108
)

type metric struct {
	name   string
	unit   Unit
	sum    bool // Add: one summed value; Observe: a list of values
	values []float64
}

// Logger collects metric values for one function and writes them as an EMF
// document on Flush. It is safe for concurrent use. A nil *Logger discards
// everything, so handlers work without metrics configured.
type Logger struct {
	mu       sync.Mutex
	w        io.Writer
	function string
	dims     []dimension // beyond Function, in order
	dimErrs  []error     // the dimensions left out, said on every Flush
	now      func() time.Time
	metrics  []*metric
}

// PipelineDimension is the dimension naming the pipeline file a function
// runs (WithDimension(PipelineDimension, name)): an aggregation's aggregate
// and ticker, a join's join function, a CEP file's detect function.
const PipelineDimension = "Pipeline"

// dimension is one dimension a Logger adds beyond Function.
type dimension struct{ name, value string }

// Option configures a Logger.
type Option func(*Logger)

// WithDimension adds the dimension name=value: each document then carries
// the one dimension set ["Function", name] (one series per value, for
// example per pipeline when several functions run the same binary), not
// ["Function"] as well: CloudWatch bills each set of a metric as a custom
// metric of its own ($0.30 a month), and the stack's alarms and dashboards
// read a pipeline's functions by both dimensions, so a rollup under
// Function alone doubled what such a function's metrics cost for a series
// nothing read (SEARCH or metric math sums pipelines when wanted). Several
// WithDimension options make one set ["Function", name1, name2, …]. A name
// already used (Function, "_aws", an earlier dimension) or empty is
// ignored, as is a metric of that name on Flush. A name or value
// CloudWatch refuses (not ASCII, a control character, blank, a name over
// 255 characters or starting with ':', a value over 1,024) and a
// dimension past EMF's 30 are left out, and every Flush returns an error
// naming them: the metrics are still written, under Function.
func WithDimension(name, value string) Option {
	return func(l *Logger) {
		if name == "" || name == "Function" || name == "_aws" || l.isDimension(name) {
			return
		}
		if err := checkName("dimension", name, maxDimensionName); err != nil || strings.HasPrefix(name, ":") {
			if err == nil {
				err = fmt.Errorf("dimension %q: CloudWatch refuses a name starting with ':'", name)
			}
			l.dimErrs = append(l.dimErrs, fmt.Errorf("metrics: %w; the dimension is left out", err))
			return
		}
		if err := checkName("dimension "+name+": value", value, maxDimensionValue); err != nil {
			l.dimErrs = append(l.dimErrs, fmt.Errorf("metrics: %w; the dimension is left out", err))
			return
		}
		if 1+len(l.dims) >= maxDimensions {
			l.dimErrs = append(l.dimErrs, fmt.Errorf("metrics: dimension %s: EMF takes at most %d dimensions in a set (Function and %d more); the dimension is left out",
				name, maxDimensions, maxDimensions-1))
			return
		}
		l.dims = append(l.dims, dimension{name, value})
	}
}

// maxEcho bounds what an error repeats of a name or value.
const maxEcho = 64

// checkName reports whether s is a name (or dimension value) CloudWatch
// takes: 1 to max characters of printable ASCII, not all spaces. what
// names it in the error.
func checkName(what, s string, max int) error {
	echo := s
	if len(echo) > maxEcho {
		echo = echo[:maxEcho] + "…"
	}
	switch {
	case len(s) > max:
		return fmt.Errorf("%s %q is %d characters; CloudWatch takes at most %d", what, echo, len(s), max)
	case strings.TrimSpace(s) == "":
		return fmt.Errorf("%s %q: CloudWatch refuses an empty or blank one", what, echo)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return fmt.Errorf("%s %q: CloudWatch takes printable ASCII only", what, echo)
		}
	}
	return nil
}

func (l *Logger) isDimension(name string) bool {
	for _, d := range l.dims {
		if d.name == name {
			return true
		}
	}
	return false
}

// New returns a Logger writing to w (os.Stdout in a function) with dimension
// Function=function, and any dimensions the options add.
func New(w io.Writer, function string, opts ...Option) *Logger {
	l := &Logger{w: w, function: function, now: time.Now}
	for _, o := range opts {
		o(l)
	}
	return l
}

// WithClock sets the clock Flush stamps documents with (for tests) and
// returns l.
func (l *Logger) WithClock(now func() time.Time) *Logger {
	l.now = now
	return l
}

func (l *Logger) get(name string, unit Unit, sum bool) *metric {
	for _, m := range l.metrics {
		if m.name == name {
			return m
		}
	}
	m := &metric{name: name, unit: unit, sum: sum}
	l.metrics = append(l.metrics, m)
	return m
}

// Add adds v to the metric name, a counter-style value summed until Flush.
// Add(name, unit, 0) declares the metric so that Flush writes 0 rather than
// nothing (an alarm on it then sees a data point).
func (l *Logger) Add(name string, unit Unit, v float64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.get(name, unit, true)
	if len(m.values) == 0 {
		m.values = append(m.values, 0)
	}
	m.values[0] += v
}

// Observe records one value of a distribution (a latency, a size); Flush
// writes every value observed since the last Flush.
func (l *Logger) Observe(name string, unit Unit, v float64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.get(name, unit, false)
	m.values = append(m.values, v)
}

// Flush writes what was collected as EMF, one line per document, and starts
// afresh. It writes one document unless that would break an EMF or log
// event limit (more than 100 metrics, a metric with more than 100 values,
// over 256 KB), then as many as needed, each value once. It writes nothing
// when nothing was collected. A metric CloudWatch would refuse (a value
// that is NaN, infinite or out of CloudWatch's range; a name that is not
// 1 to 255 characters of printable ASCII) is an error naming it and is not
// written; the rest is. A dimension WithDimension left out is an error on
// every Flush.
func (l *Logger) Flush() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	ms := l.metrics
	l.metrics = nil
	now := l.now()
	l.mu.Unlock()
	if len(ms) == 0 {
		return nil
	}
	errs := append([]error(nil), l.dimErrs...)
	if err := checkName("function (dimension Function)", l.function, maxDimensionValue); err != nil {
		return errors.Join(append(errs, fmt.Errorf("metrics: %w; no metric written", err))...)
	}
	kept := ms[:0]
	for _, m := range ms {
		if m.name == "Function" || m.name == "_aws" || l.isDimension(m.name) {
			errs = append(errs, fmt.Errorf("metrics: metric name %q is not allowed", m.name))
			continue
		}
		if err := checkName("metric name", m.name, maxMetricName); err != nil {
			errs = append(errs, fmt.Errorf("metrics: %w; not written", err))
			continue
		}
		ok := true
		for _, v := range m.values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				errs = append(errs, fmt.Errorf("metrics: metric %s has value %v, which EMF cannot carry", m.name, v))
				ok = false
				break
			}
			if a := math.Abs(v); a != 0 && (a < minMagnitude || a > maxMagnitude) {
				errs = append(errs, fmt.Errorf("metrics: metric %s has value %v, outside what CloudWatch takes (%g to %g either side of 0)", m.name, v, minMagnitude, maxMagnitude))
				ok = false
				break
			}
		}
		if ok && len(m.values) > 0 {
			kept = append(kept, m)
		}
	}
	var buf bytes.Buffer
	for _, doc := range l.pack(kept) {
		l.document(&buf, now, doc)
	}
	if buf.Len() > 0 {
		if _, err := l.w.Write(buf.Bytes()); err != nil {
			errs = append(errs, fmt.Errorf("metrics: write: %w", err))
		}
	}
	return errors.Join(errs...)
}

// part is up to maxValues values of one metric, in one document.
type part struct {
	m      *metric
	values []float64
}

// pack splits ms into documents: first the first 100 values of every
// metric, then the next 100 of those that have more, and so on, a new
// document whenever one would pass 100 metrics, hold a metric twice or pass
// maxDocumentBytes. One part always fits: 100 values of at most 24 bytes,
// a name of at most 255 and the dimensions' 30 KB at most.
func (l *Logger) pack(ms []*metric) [][]part {
	fixed := l.fixedBytes()
	var docs [][]part
	var cur []part
	size := fixed
	in := map[*metric]bool{}
	for n := 0; ; n++ {
		more := false
		for _, m := range ms {
			if len(m.values) <= n*maxValues {
				continue
			}
			more = true
			p := part{m: m, values: m.values[n*maxValues : min(len(m.values), (n+1)*maxValues)]}
			ps := partBytes(p)
			if len(cur) > 0 && (len(cur) == maxMetrics || in[m] || size+ps > maxDocumentBytes) {
				docs, cur, size, in = append(docs, cur), nil, fixed, map[*metric]bool{}
			}
			cur, size, in[m] = append(cur, p), size+ps, true
		}
		if !more {
			break
		}
	}
	if len(cur) > 0 {
		docs = append(docs, cur)
	}
	return docs
}

// fixedBytes is the size of a document with no metric in it: the
// directive, the dimensions and the line's end.
func (l *Logger) fixedBytes() int {
	var buf bytes.Buffer
	l.document(&buf, time.UnixMilli(math.MaxInt64/2), nil)
	return buf.Len()
}

// partBytes is what p adds to a document: its definition, its member and
// the two commas.
func partBytes(p part) int {
	var buf bytes.Buffer
	writeDefinition(&buf, p.m)
	writeMember(&buf, p)
	return buf.Len() + 2
}

// document appends one EMF line with the parts ps.
func (l *Logger) document(buf *bytes.Buffer, now time.Time, ps []part) {
	buf.WriteString(`{"_aws":{"Timestamp":`)
	buf.WriteString(strconv.FormatInt(now.UnixMilli(), 10))
	buf.WriteString(`,"CloudWatchMetrics":[{"Namespace":`)
	writeString(buf, Namespace)
	buf.WriteString(`,"Dimensions":[["Function"`)
	for _, d := range l.dims {
		buf.WriteByte(',')
		writeString(buf, d.name)
	}
	buf.WriteString(`]],"Metrics":[`)
	for i, p := range ps {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeDefinition(buf, p.m)
	}
	buf.WriteString(`]}]},"Function":`)
	writeString(buf, l.function)
	for _, d := range l.dims {
		buf.WriteByte(',')
		writeString(buf, d.name)
		buf.WriteByte(':')
		writeString(buf, d.value)
	}
	for _, p := range ps {
		buf.WriteByte(',')
		writeMember(buf, p)
	}
	buf.WriteString("}\n")
}

func writeDefinition(buf *bytes.Buffer, m *metric) {
	buf.WriteString(`{"Name":`)
	writeString(buf, m.name)
	buf.WriteString(`,"Unit":`)
	writeString(buf, string(m.unit))
	buf.WriteByte('}')
}

func writeMember(buf *bytes.Buffer, p part) {
	writeString(buf, p.m.name)
	buf.WriteByte(':')
	if p.m.sum || len(p.values) == 1 {
		writeNumber(buf, p.values[0])
		return
	}
	buf.WriteByte('[')
	for i, v := range p.values {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeNumber(buf, v)
	}
	buf.WriteByte(']')
}

func writeString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	buf.Write(b)
}

func writeNumber(buf *bytes.Buffer, v float64) {
	buf.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
}
