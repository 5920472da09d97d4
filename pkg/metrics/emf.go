package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
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

// EMF limits: a directive holds at most 100 metrics and a metric at most 100
// values.
const (
	maxMetrics = 100
	maxValues  = 100
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
// two dimension sets, ["Function"] (what function-wide alarms and widgets
// use) and ["Function", name] (one series per value, for example per
// pipeline when several functions run the same binary). Several
// WithDimension options make one set ["Function", name1, name2, …]. A name
// already used (Function, "_aws", an earlier dimension) or empty is
// ignored, as is a metric of that name on Flush.
func WithDimension(name, value string) Option {
	return func(l *Logger) {
		if name == "" || name == "Function" || name == "_aws" || l.isDimension(name) {
			return
		}
		l.dims = append(l.dims, dimension{name, value})
	}
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
// afresh. It writes one document unless a metric observed more than 100
// values (EMF's limit), then as many as needed. It writes nothing when
// nothing was collected. A metric with a NaN or infinite value (not JSON) is
// an error and is not written; the rest is.
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
	if len(ms) > maxMetrics {
		return fmt.Errorf("metrics: %d metrics in one flush; EMF allows at most %d", len(ms), maxMetrics)
	}
	var bad error
	kept := ms[:0]
	for _, m := range ms {
		if m.name == "" || m.name == "Function" || m.name == "_aws" || l.isDimension(m.name) {
			bad = fmt.Errorf("metrics: metric name %q is not allowed", m.name)
			continue
		}
		ok := true
		for _, v := range m.values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				bad = fmt.Errorf("metrics: metric %s has value %v, which EMF cannot carry", m.name, v)
				ok = false
				break
			}
		}
		if ok && len(m.values) > 0 {
			kept = append(kept, m)
		}
	}
	var buf bytes.Buffer
	for part := 0; ; part++ {
		var in []*metric
		for _, m := range kept {
			if len(m.values) > part*maxValues {
				in = append(in, m)
			}
		}
		if len(in) == 0 {
			break
		}
		l.document(&buf, now, in, part)
	}
	if buf.Len() > 0 {
		if _, err := l.w.Write(buf.Bytes()); err != nil {
			return fmt.Errorf("metrics: write: %w", err)
		}
	}
	return bad
}

// document appends one EMF line with the values part*100..part*100+99 of ms.
func (l *Logger) document(buf *bytes.Buffer, now time.Time, ms []*metric, part int) {
	buf.WriteString(`{"_aws":{"Timestamp":`)
	buf.WriteString(strconv.FormatInt(now.UnixMilli(), 10))
	buf.WriteString(`,"CloudWatchMetrics":[{"Namespace":`)
	writeString(buf, Namespace)
	buf.WriteString(`,"Dimensions":[["Function"]`)
	if len(l.dims) > 0 {
		buf.WriteString(`,["Function"`)
		for _, d := range l.dims {
			buf.WriteByte(',')
			writeString(buf, d.name)
		}
		buf.WriteByte(']')
	}
	buf.WriteString(`],"Metrics":[`)
	for i, m := range ms {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"Name":`)
		writeString(buf, m.name)
		buf.WriteString(`,"Unit":`)
		writeString(buf, string(m.unit))
		buf.WriteByte('}')
	}
	buf.WriteString(`]}]},"Function":`)
	writeString(buf, l.function)
	for _, d := range l.dims {
		buf.WriteByte(',')
		writeString(buf, d.name)
		buf.WriteByte(':')
		writeString(buf, d.value)
	}
	for _, m := range ms {
		buf.WriteByte(',')
		writeString(buf, m.name)
		buf.WriteByte(':')
		vs := m.values[part*maxValues : min(len(m.values), (part+1)*maxValues)]
		if m.sum || len(vs) == 1 {
			writeNumber(buf, vs[0])
			continue
		}
		buf.WriteByte('[')
		for i, v := range vs {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeNumber(buf, v)
		}
		buf.WriteByte(']')
	}
	buf.WriteString("}\n")
}

func writeString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	buf.Write(b)
}

func writeNumber(buf *bytes.Buffer, v float64) {
	buf.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
}
