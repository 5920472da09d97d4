package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/durationtext"
	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
	"github.com/tributary-dev/tributary/pkg/window"
)

// EnvVar is the environment variable Load reads the config from.
const EnvVar = "PIPELINE_CONFIG"

// Defaults for fields a config leaves out.
const (
	DefaultIdleTimeout = time.Minute
	// DefaultDedupeHorizon covers producers' retries: SDK retries within
	// seconds, a 429's Retry-After, a client that timed out and resends a
	// few minutes later, with a wide margin. Longer costs more ledger
	// storage and a larger cold read per key; see package dedupe.
	DefaultDedupeHorizon = time.Hour
	// MaxDedupeHorizon bounds it: a week of one key's ids.
	MaxDedupeHorizon = 7 * 24 * time.Hour
	// DedupeLedgerKey and DedupeLedgerRange are dedupeLedger's values.
	DedupeLedgerKey   = "key"
	DedupeLedgerRange = "range"
	// MaxRangeDedupeHorizon bounds it with dedupeLedger "range": a range
	// holds at most some 32 million ids of the horizon, which at 24h is
	// 6,000 events a second over the pipeline.
	MaxRangeDedupeHorizon = 24 * time.Hour
	// MaxParallelizationFactor is Lambda's limit for Kinesis and DynamoDB
	// Streams event source mappings.
	MaxParallelizationFactor = 10
	// DefaultRetention is how long a window item stays in the views table
	// after its window ends: a week of results for the results reader and
	// the dashboard (the WindowResults stream and the logs carry them
	// too). Storage is most of what keeping them costs: at the README's
	// load (100 events a second over 1,000 keys, pipelines/pageviews.json)
	// the items of a month held for 30 days cost about $31 a month (with
	// point-in-time recovery), for 7 days about $7 (bench/load).
	DefaultRetention = 7 * 24 * time.Hour
	// MinRetention is the shortest retention; it must also exceed the
	// allowed lateness by as much, so a correction never finds its window
	// expired.
	MinRetention = 24 * time.Hour
	// MaxRetention is the longest: a year.
	MaxRetention = 365 * 24 * time.Hour
	// MaxWindowDuration bounds a window's size, advance, difference and
	// gap: a year, as long as its results are kept at most.
	MaxWindowDuration = MaxRetention
	// MaxOutOfOrderness bounds the watermark's allowance, which delays
	// every window's result: a day (later records are for allowedLateness).
	MaxOutOfOrderness = 24 * time.Hour
	// MaxIdleTimeout bounds how long an idle shard's windows wait for the
	// ticker: a day, as a join's and a CEP file's.
	MaxIdleTimeout = 24 * time.Hour
)

// MaxStateBytes bounds the encoding of one window's aggregates
// (agg.Spec.MaxEncodedBytes): a window item holds its merged state and
// one more batch's part before it is compacted, within DynamoDB's 400 KB
// less a margin (state.WindowItemBudget) and room for its other attributes.
const MaxStateBytes = (limits.DynamoDBItemBytes - 10<<10 - 8<<10) / 2

// WindowKind is one of the four kinds of windows.
type WindowKind uint8

// The window kinds.
const (
	Tumbling WindowKind = iota + 1
	Hopping
	Sliding
	Session
)

var kindNames = [...]string{Tumbling: "tumbling", Hopping: "hopping", Sliding: "sliding", Session: "session"}

// String is the kind's name in a config.
func (k WindowKind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "WindowKind(" + strconv.Itoa(int(k)) + ")"
}

// WindowSpec is one declared window. Only the durations of its kind are set:
// Size and Offset (tumbling), Size, Advance and Offset (hopping), Difference
// (sliding), Gap (session).
type WindowSpec struct {
	Kind       WindowKind
	Size       time.Duration
	Advance    time.Duration
	Difference time.Duration
	Gap        time.Duration
	Offset     time.Duration
}

// Tumbling is the assigner of a tumbling spec.
func (w WindowSpec) Tumbling() window.Tumbling {
	return window.Tumbling{Size: w.Size, Offset: w.Offset}
}

// Hopping is the assigner of a hopping spec.
func (w WindowSpec) Hopping() window.Hopping {
	return window.Hopping{Size: w.Size, Advance: w.Advance, Offset: w.Offset}
}

// Sliding is the assigner of a sliding spec.
func (w WindowSpec) Sliding() window.Sliding { return window.Sliding{Difference: w.Difference} }

// Session is the assigner of a session spec.
func (w WindowSpec) Session() window.Session { return window.Session{Gap: w.Gap} }

// ID names the spec, for keeping the windows of several specs apart (a sort
// key prefix, a metric dimension): "tumbling:1m0s", "hopping:5m0s:1m0s",
// "sliding:10s", "session:30m0s"; a non-zero offset is appended as "+1h0m0s".
func (w WindowSpec) ID() string {
	var s string
	switch w.Kind {
	case Tumbling:
		s = "tumbling:" + w.Size.String()
	case Hopping:
		s = "hopping:" + w.Size.String() + ":" + w.Advance.String()
	case Sliding:
		return "sliding:" + w.Difference.String()
	case Session:
		return "session:" + w.Gap.String()
	default:
		return w.Kind.String()
	}
	if w.Offset != 0 {
		s += "+" + w.Offset.String()
	}
	return s
}

// aligned is w with its offset normalised to [0, period), the period being
// the size of a tumbling window and the advance of a hopping one: offsets
// that differ by whole periods give the same windows. A hopping window
// advancing by its size is the tumbling window of that size.
func (w WindowSpec) aligned() WindowSpec {
	if w.Kind == Hopping && w.Advance == w.Size {
		w.Kind, w.Advance = Tumbling, 0
	}
	period := w.Size
	if w.Kind == Hopping {
		period = w.Advance
	}
	if period > 0 {
		w.Offset = (w.Offset%period + period) % period
	}
	return w
}

// Outputs says where window results go.
type Outputs struct {
	Table  bool // the results table in DynamoDB, queryable
	Stream bool // the output stream
	// Log: each final result, correction and retraction is a JSON line in
	// the function's log (CloudWatch Logs), for Logs Insights, the
	// dashboard's result widgets and the top-keys rule. Default true.
	Log bool
}

// Config is a parsed, validated pipeline.
type Config struct {
	Name string
	// EventTypes the pipeline reads; empty means all.
	EventTypes []string
	// Key is the grouping key; Value the number aggregated (unset when no
	// aggregate needs one); Distinct what distinct counts (unset unless the
	// distinct aggregate is on).
	Key, Value, Distinct Path
	Windows              []WindowSpec
	Aggregates           *agg.Spec
	// OutOfOrderness is the watermark's allowance; IdleTimeout how long a
	// shard may see no progress before processing time advances it.
	OutOfOrderness time.Duration
	IdleTimeout    time.Duration
	Late           window.LateRule
	Outputs        Outputs
	// PartitionKeyIsGroupingKey says producers put the grouping key in the
	// envelope's key (the Kinesis partition key), so one group's records
	// share a shard and arrive in order.
	PartitionKeyIsGroupingKey bool
	ParallelizationFactor     int
	// DedupeHorizon is how long an accepted event id suppresses copies of
	// the event (same key and id); 0 turns suppression by id off, leaving
	// only Lambda's redeliveries deduplicated (by sequence number).
	DedupeHorizon time.Duration
	// DedupeLedger is how the accepted ids are kept: DedupeLedgerKey (a
	// ledger a key) or DedupeLedgerRange (a ledger a hash range of keys).
	DedupeLedger string
	// Retention is how long a window item is kept after its window ends
	// (DynamoDB's TTL deletes it after).
	Retention time.Duration
}

// Matches reports whether the pipeline reads events of type t.
func (c *Config) Matches(t string) bool {
	return len(c.EventTypes) == 0 || slices.Contains(c.EventTypes, t)
}

// NewWatermark returns a fresh shard watermark with the pipeline's
// out-of-orderness.
func (c *Config) NewWatermark() *window.Watermark { return window.NewWatermark(c.OutOfOrderness) }

// CheckPartition refuses a record whose grouping key, read from its data
// (key, as Extract returned it), is not its Kinesis partition key, when the
// file says producers make them one (PartitionKeyIsGroupingKey): read from
// two shards, a key's records would be closed by two watermarks, and a
// window made final on one while the other still held some of them. The
// error is a *stream.PoisonRecordError naming the field and both keys.
// Without the declaration, or with the envelope's key as the grouping key,
// there is nothing to check.
func (c *Config) CheckPartition(env *stream.Envelope, key, partitionKey string) error {
	if !c.PartitionKeyIsGroupingKey || c.Key.src != fromData || key == partitionKey {
		return nil
	}
	return fieldError(env, c.Key, fmt.Sprintf("is %s, but the record's partition key is %s: partitionKeyIsGroupingKey says producers use the grouping key as the partition key (the envelope's key), so that each key's records are on one shard",
		strictjson.QuoteCut(key, maxEchoKey), strictjson.QuoteCut(partitionKey, maxEchoKey)))
}

// maxEchoKey bounds a key a reason quotes (an envelope's key has at most
// stream.MaxKeyLength characters; a partition key up to 256 bytes).
const maxEchoKey = 300

// Extract reads a record's grouping key, value (0 when the pipeline needs
// none) and distinct value (nil when it needs none; it may share memory
// with env and must not be modified). An error is a
// *stream.PoisonRecordError naming the record's id and the field, for
// example "record evt-42: field data.amount: must be a number, not a string".
// A grouping key read from data has 1 to stream.MaxKeyLength characters, as
// an envelope's key has: it keys the pipeline's items in DynamoDB, whose
// keys are bounded, and the results reader asks for it by name. No grouping
// key holds a control, line-breaking or invisible character
// (stream.FirstUnprintable), as ingest requires of an envelope's key.
func (c *Config) Extract(env *stream.Envelope) (key string, value float64, distinct []byte, err error) {
	if key, err = c.Key.str(env); err != nil {
		return "", 0, nil, err
	}
	if c.Key.src == fromData {
		switch {
		case key == "":
			return "", 0, nil, fieldError(env, c.Key, "is empty: a grouping key has 1 to "+strconv.Itoa(stream.MaxKeyLength)+" characters")
		}
		if n, ok := stream.KeyLength(key); !ok {
			return "", 0, nil, fieldError(env, c.Key, fmt.Sprintf("is %d characters long; a grouping key has at most %d", n, stream.MaxKeyLength))
		}
	}
	// Ingest refuses control, line-breaking and invisible characters in an
	// envelope's key and type (stream.Envelope.Validate); a key read from
	// data, or a record put on the stream past ingest, is held to the same,
	// as it keys the pipeline's items, its results' ids and log lines.
	if u, found := stream.FirstUnprintable(key); found {
		return "", 0, nil, fieldError(env, c.Key, "holds "+u.String()+"; a grouping key is printable text, as ingest requires of an envelope's key")
	}
	if !c.Value.IsZero() {
		if value, err = c.Value.number(env); err != nil {
			return "", 0, nil, err
		}
	}
	if !c.Distinct.IsZero() {
		if distinct, err = c.Distinct.bytes(env); err != nil {
			return "", 0, nil, err
		}
	}
	return key, value, distinct, nil
}

// ConfigError is a config file of pipelines/ that its parser refuses (an
// aggregate's Parse, join.Parse, cep.ParseConfig): Field is the path of the
// offending field ("windows[1].advance"; "" for the whole document). Build
// one with NewConfigError, which bounds what it repeats of the document.
// Parse and NewFile report each of a file's mistakes as one, joined (see
// Parse).
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

func cfgErr(field, format string, args ...any) error {
	return NewConfigError(field, fmt.Sprintf(format, args...))
}

// Bounds on a ConfigError, which echoes what the document holds (a name,
// a duration, an unknown field's name) and may hold 64 KB of it.
const (
	maxFieldEcho  = 256
	maxReasonEcho = 1 << 10
)

// NewConfigError is a ConfigError with field cut to 256 bytes and the
// middle of a reason past 1 KiB left out, so that the start (what was
// written) and the end (what is wanted) stay: a config file may hold 64 KB
// in one value.
func NewConfigError(field, reason string) *ConfigError {
	return &ConfigError{Field: strictjson.Cut(field, maxFieldEcho), Reason: strictjson.CutMiddle(reason, maxReasonEcho)}
}

// CheckKeyedWindows refuses what Parse accepts but the aggregate function
// cannot keep exactly once (aggregate.CheckSupported): session and sliding
// windows are computed from each key's held records, which needs every
// record of a key on one shard, so they need PartitionKeyIsGroupingKey.
// NewFile checks it, so that such a file fails synth naming the window.
func (c *Config) CheckKeyedWindows() error {
	m := newMistakes(nil)
	c.checkKeyedWindows(m)
	return m.err()
}

// checkKeyedWindows is CheckKeyedWindows, its mistake m's: the first such
// window only, as one setting fixes them all. It reads a config parse may
// have left part read: a window that did not parse is of no kind.
func (c *Config) checkKeyedWindows(m *mistakes) {
	if !m.ok("partitionKeyIsGroupingKey") || c.PartitionKeyIsGroupingKey {
		return
	}
	for i, w := range c.Windows {
		if w.Kind == Session || w.Kind == Sliding {
			m.add(cfgErr(fmt.Sprintf("windows[%d].kind", i), "%s windows need each key's records on one shard: set partitionKeyIsGroupingKey (producers put the grouping key in the envelope key)", w.Kind))
			return
		}
	}
}

// Load reads and parses the config in the PIPELINE_CONFIG environment
// variable. Errors start with the variable's name.
func Load() (*Config, error) { return FromEnv(os.LookupEnv) }

// FromEnv is Load with a given environment lookup (os.LookupEnv).
func FromEnv(lookup func(string) (string, bool)) (*Config, error) {
	v, ok := lookup(EnvVar)
	if !ok || v == "" {
		return nil, fmt.Errorf("%s: not set: want the pipeline's JSON config", EnvVar)
	}
	c, err := Parse([]byte(v))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvVar, err)
	}
	return c, nil
}

var (
	// The known fields come from the tables in schema.go, which the JSON
	// Schema is generated from.
	topFields      = fieldNames(topSpecFields)
	windowFields   = fieldNames(windowSpecFields)
	outputFields   = fieldNames(outputSpecFields)
	durationFields = durationFieldNames(topSpecFields, windowSpecFields, joinSpecFields, cepSpecFields)
	// schemaField names the JSON Schema a file follows, for editors'
	// completion; Parse accepts a string there and ignores it.
	schemaField = "$schema"
	namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// Parse parses and validates a JSON pipeline config, a windowed
// aggregation. Fields:
//
//	kind                       "aggregate" or absent (the other kinds: NewFile)
//	name                       required; letters, digits, - and _, at most 64
//	eventTypes                 event types read; empty or absent: all; no control, line-breaking or invisible characters
//	key                        grouping key path: "key" (default), "type" or "data.<field>..."
//	value                      "data.<field>...", a number; required by sum, min, max, mean, quantiles
//	distinct                   path of what distinct counts; required by distinct
//	windows                    [{kind, size, advance, difference, gap, offset}], at least one:
//	                             tumbling {size, offset?}, hopping {size, advance, offset?},
//	                             sliding {difference}, session {gap}; Go durations ("90s", "5m"), at most 8760h;
//	                             a record falls in at most MaxWindowsPerRecord of them (size/advance each hopping)
//	aggregates                 count, sum, min, max, mean, distinct, quantiles; default [count]
//	quantiles                  e.g. [0.5, 0.99]; default [0.5, 0.9, 0.99] with the quantiles aggregate
//	distinctPrecision          HyperLogLog precision 4–18; default 12
//	outOfOrderness             watermark allowance, 0 or more; default 0, at most 24h
//	idleTimeout                default 1m, at most 24h
//	latePolicy                 "drop" (default) or "correct"
//	allowedLateness            required with "correct", refused with "drop"; at most 8736h
//	                             (8760h less what retention keeps past it, below)
//	outputs                    {table, stream, log}; default {table: true}; at least one of table and stream true;
//	                             log (each result a line in the function's log) default true
//	partitionKeyIsGroupingKey  producers set key to the grouping key; default false
//	parallelizationFactor      1 (default) to 10
//	dedupeHorizon              how long an event id suppresses copies (same key and id); default 1h,
//	                             at most 168h; "0s" turns suppression by id off
//	dedupeLedger               "key" (default: a ledger a key) or "range" (a ledger a hash range of
//	                             keys; parallelizationFactor 1, dedupeHorizon at most 24h)
//	retention                  how long a window item is kept after its window ends; default 168h
//	                             (the least below if longer), at least 24h, allowedLateness + 24h and
//	                             outOfOrderness + idleTimeout + allowedLateness + 12h (a window is
//	                             final outOfOrderness + idleTimeout after its end at the latest), at
//	                             most 8760h
//
// A field left out takes its default; null, or "" for a string, is refused
// naming the field. A top-level "$schema" string (the JSON Schema an
// editor checks the file against) is accepted and ignored. The document is
// read by package strictjson first: text that is not UTF-8 (a lone surrogate escape
// included), an object with a key twice, nesting deeper than
// strictjson.MaxDepth or more than MaxFileBytes are refused naming the
// field. Unknown fields are refused, with the known field within two edits
// as a hint.
//
// Errors are *ConfigError. A document with several independent mistakes
// is refused with all of them at once, so that its author fixes them in
// one go: in the document's order (a mistake about an absent field last),
// at most 20 ("… and 5 more"), its Error "3 mistakes:" and one indented
// line each naming its field; errors.As finds the first, and Unwrap()
// []error gives each. A mistake that only follows from another is left
// out (a misspelt "nmae" is not also a missing name; an advance is not
// checked against a size that did not parse). A document that is not a
// JSON object, that strictjson refuses or of another kind is one mistake.
func Parse(doc []byte) (*Config, error) {
	c, m, err := parse(doc)
	if err != nil {
		return nil, err
	}
	if err := m.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// parse is Parse: the config as far as it was read and its mistakes, or,
// for a document that is not one object of the kind, that one error.
// NewFile adds its own checks to the mistakes.
func parse(doc []byte) (*Config, *mistakes, error) {
	if err := strictjson.Check(doc, strictjson.Options{MaxBytes: MaxFileBytes, Name: "config"}); err != nil {
		var se *strictjson.Error
		if !errors.As(err, &se) {
			return nil, nil, cfgErr("", "%v", err)
		}
		if se.Kind == strictjson.Syntax {
			// Malformed JSON is placed by line and column, as object
			// words it.
			if _, oerr := object(newMistakes(nil), "", "", doc, topFields, schemaField); oerr != nil {
				return nil, nil, oerr
			}
		}
		return nil, nil, cfgErr(se.Path, "%s", se.Reason)
	}
	m := newMistakes(doc)
	top, err := object(m, "", "", doc, topFields, schemaField)
	if err != nil {
		return nil, nil, err
	}
	// A document of another kind is that one mistake: its other fields
	// are that kind's.
	var kind string
	if err := field(top, "kind", "kind", &kind); err != nil {
		return nil, nil, err
	}
	if kind != "" && Kind(kind) != KindAggregate {
		return nil, nil, cfgErr("kind", "%q: this config declares a windowed aggregation, kind %q (pipeline.NewFile reads files of every kind)", kind, KindAggregate)
	}
	var schema string // for editors; ignored
	m.add(field(top, schemaField, schemaField, &schema))
	c := &Config{}
	var raw struct {
		name, key, value, distinct, ooo, idle, late, lateness string
		dedupe, ledger, retention                             *string
		eventTypes, aggregates                                []string
		quantiles                                             []float64
		precision                                             *int
		pkIsGroupingKey                                       bool
		pf                                                    *int
	}
	for _, f := range []struct {
		name string
		dst  any
	}{
		{"name", &raw.name}, {"key", &raw.key}, {"value", &raw.value},
		{"distinct", &raw.distinct}, {"distinctPrecision", &raw.precision}, {"outOfOrderness", &raw.ooo}, {"idleTimeout", &raw.idle},
		{"latePolicy", &raw.late}, {"allowedLateness", &raw.lateness},
		{"partitionKeyIsGroupingKey", &raw.pkIsGroupingKey}, {"parallelizationFactor", &raw.pf},
		{"dedupeHorizon", &raw.dedupe}, {"dedupeLedger", &raw.ledger}, {"retention", &raw.retention},
	} {
		m.add(field(top, f.name, f.name, f.dst))
	}
	raw.eventTypes = list[string](m, top, "eventTypes")
	raw.aggregates = list[string](m, top, "aggregates")
	raw.quantiles = list[float64](m, top, "quantiles")
	for _, f := range []struct {
		name string
		n    int
	}{{"aggregates", len(raw.aggregates)}, {"quantiles", len(raw.quantiles)}} {
		name, n := f.name, f.n
		// Given empty, each would take its default ([count], the default
		// quantiles), which the file does not say: a field takes its
		// default only when it is left out (eventTypes' empty list means
		// every type, as documented).
		if _, given := top[name]; given && n == 0 && m.ok(name) {
			m.add(cfgErr(name, "is an empty list: list at least one, or leave the field out for its default"))
		}
	}

	if m.ok("name") {
		switch {
		case raw.name == "":
			m.add(cfgErr("name", "required"))
		case !namePattern.MatchString(raw.name):
			m.add(cfgErr("name", "%q must be 1 to 64 letters, digits, '-' or '_'", raw.name))
		}
	}
	c.Name = raw.name

	for i, t := range raw.eventTypes {
		at := fmt.Sprintf("eventTypes[%d]", i)
		if !m.ok(at) {
			continue
		}
		switch u, unprintable := stream.FirstUnprintable(t); {
		case t == "":
			m.add(cfgErr(at, "is empty"))
		case utf8.RuneCountInString(t) > stream.MaxTypeLength:
			m.add(cfgErr(at, "is longer than an event type can be (%d characters): no event would match it", stream.MaxTypeLength))
		case unprintable:
			// Ingest refuses such a type (stream.Envelope.Validate): the
			// pipeline would read nothing of it, silently.
			m.add(cfgErr(at, "holds %v: no event's type can (ingest refuses it), so the pipeline would never read it", u))
		case slices.Contains(raw.eventTypes[:i], t):
			m.add(cfgErr(at, "%q is listed twice", t))
		}
	}
	c.EventTypes = raw.eventTypes

	// The aggregates decide which of value and distinct are needed; when
	// they did not parse, neither is said to be needed or unused.
	var spec *agg.Spec
	if m.ok("aggregates", "quantiles") {
		s, err := agg.NewSpec(raw.aggregates, raw.quantiles)
		if err != nil {
			// agg names the field: "aggregates[2]: ..." or "quantiles[0]: ...".
			f, reason, _ := strings.Cut(err.Error(), ": ")
			m.add(NewConfigError(f, reason))
		} else {
			spec = s
		}
	}
	if raw.precision != nil && m.ok("distinctPrecision") {
		switch {
		case *raw.precision < 4 || *raw.precision > 18:
			m.add(cfgErr("distinctPrecision", "%d is not between 4 and 18", *raw.precision))
		case spec == nil:
		case !spec.Aggregates.Has(agg.Distinct):
			m.add(cfgErr("distinctPrecision", "set but the distinct aggregate is off"))
		default:
			spec.DistinctPrecision = uint8(*raw.precision)
		}
	}
	if spec != nil && m.ok("distinctPrecision") {
		if n := spec.MaxEncodedBytes(); n > MaxStateBytes {
			field := "aggregates"
			if spec.Aggregates.Has(agg.Distinct) {
				field = "distinctPrecision"
			}
			m.add(cfgErr(field, "a window's aggregates would take up to %d bytes (distinct precision %d%s); a window item holds its merged state and one batch's part in an item, so at most %d: lower distinctPrecision",
				n, spec.DistinctPrecision, map[bool]string{true: ", quantiles on", false: ""}[spec.Aggregates.Has(agg.Quantiles)], MaxStateBytes))
		}
	}
	c.Aggregates = spec

	if raw.key == "" {
		raw.key = "key"
	}
	if m.ok("key") {
		if c.Key, err = ParsePath(raw.key); err != nil {
			m.add(cfgErr("key", "%v", err))
		} else if c.Key.src == fromID {
			m.add(cfgErr("key", "grouping by id puts every event in a group of its own; group by key, type or a data field"))
		}
	}
	if m.ok("value") {
		var needed *bool
		if spec != nil {
			needed = new(spec.Aggregates.NeedsValue())
		}
		c.Value = optionalPath(m, "value", raw.value, raw.aggregates, needed, isValueAggregate, strings.Join((agg.Sum|agg.Min|agg.Max|agg.Mean|agg.Quantiles).Names(), ", "))
		if m.ok("value") && !c.Value.IsZero() && c.Value.src != fromData {
			m.add(cfgErr("value", "%q is not in data: want \"data.<field>\", a number", raw.value))
		}
	}
	if m.ok("distinct") {
		var needed *bool
		if spec != nil {
			needed = new(spec.Aggregates.Has(agg.Distinct))
		}
		c.Distinct = optionalPath(m, "distinct", raw.distinct, raw.aggregates, needed, func(n string) bool { return n == "distinct" }, "distinct")
	}

	c.Windows = parseWindows(m, top)

	if m.ok("outOfOrderness") {
		if c.OutOfOrderness, err = duration("outOfOrderness", raw.ooo, 0, true); !m.add(err) && c.OutOfOrderness > MaxOutOfOrderness {
			m.add(cfgErr("outOfOrderness", "%s is longer than %s: every window would wait that long to be final (for later records, latePolicy \"correct\" with allowedLateness)", raw.ooo, MaxOutOfOrderness))
		}
	}
	if m.ok("idleTimeout") {
		if c.IdleTimeout, err = duration("idleTimeout", raw.idle, DefaultIdleTimeout, false); !m.add(err) && c.IdleTimeout > MaxIdleTimeout {
			m.add(cfgErr("idleTimeout", "%s is longer than %s: an idle shard's windows would wait that long to be final", raw.idle, MaxIdleTimeout))
		}
	}

	if raw.late == "" {
		raw.late = "drop"
	}
	if m.ok("latePolicy") {
		if c.Late.Policy, err = window.ParseLatePolicy(raw.late); err != nil {
			m.add(cfgErr("latePolicy", "%v", err))
		}
	}
	if m.ok("latePolicy", "allowedLateness") {
		switch {
		case c.Late.Policy == window.Drop && raw.lateness != "":
			m.add(cfgErr("allowedLateness", "only applies to latePolicy \"correct\"; late records are dropped under \"drop\""))
		case c.Late.Policy == window.Correct && raw.lateness == "":
			m.add(cfgErr("allowedLateness", "required when latePolicy is \"correct\": how long after a window is final a correction is still accepted"))
		case c.Late.Policy == window.Correct:
			if c.Late.AllowedLateness, err = duration("allowedLateness", raw.lateness, 0, false); m.add(err) {
				break
			}
			// A window is kept a day past its allowed lateness (and half a
			// day past the latest it can change, retentionFloor), for at most
			// MaxRetention.
			if past, why := c.keptPastLateness(); c.Late.AllowedLateness > MaxRetention-past && m.ok("outOfOrderness", "idleTimeout") {
				m.add(cfgErr("allowedLateness", "%s is longer than %s: a window is kept %s past its allowed lateness%s, and at most %s (retention)", raw.lateness, MaxRetention-past, past, why, MaxRetention))
			}
		}
	}

	c.Outputs = parseOutputs(m, top)

	c.PartitionKeyIsGroupingKey = raw.pkIsGroupingKey
	c.ParallelizationFactor = 1
	if raw.pf != nil {
		c.ParallelizationFactor = *raw.pf
	}
	if m.ok("parallelizationFactor") && (c.ParallelizationFactor < 1 || c.ParallelizationFactor > MaxParallelizationFactor) {
		m.add(cfgErr("parallelizationFactor", "%d is not between 1 and %d", c.ParallelizationFactor, MaxParallelizationFactor))
	}
	if m.ok("key", "parallelizationFactor", "partitionKeyIsGroupingKey") && c.ParallelizationFactor > 1 && !c.Key.IsPartitionKey() && !c.PartitionKeyIsGroupingKey {
		m.add(cfgErr("key", "grouping by %s with parallelizationFactor %d needs repartitioning: set partitionKeyIsGroupingKey or parallelizationFactor 1", c.Key, c.ParallelizationFactor))
	}
	c.DedupeHorizon = DefaultDedupeHorizon
	if raw.dedupe != nil && m.ok("dedupeHorizon") {
		c.DedupeHorizon, err = setting("dedupeHorizon", *raw.dedupe, 0, "", MaxDedupeHorizon)
		m.add(err)
	}
	c.DedupeLedger = DedupeLedgerKey
	if raw.ledger != nil && m.ok("dedupeLedger") {
		switch c.DedupeLedger = *raw.ledger; {
		case c.DedupeLedger != DedupeLedgerKey && c.DedupeLedger != DedupeLedgerRange:
			m.add(cfgErr("dedupeLedger", "%q is neither %q nor %q", c.DedupeLedger, DedupeLedgerKey, DedupeLedgerRange))
		case c.DedupeLedger != DedupeLedgerRange:
		case m.ok("parallelizationFactor") && c.ParallelizationFactor > 1:
			m.add(cfgErr("dedupeLedger", "%q needs parallelizationFactor 1, not %d: batches of one shard read side by side would meet on a range's head at every commit", DedupeLedgerRange, c.ParallelizationFactor))
		case m.ok("dedupeHorizon") && c.DedupeHorizon > MaxRangeDedupeHorizon:
			m.add(cfgErr("dedupeLedger", "%q needs a dedupeHorizon of at most %s, not %s: a range holds at most some 32 million ids of the horizon", DedupeLedgerRange, MaxRangeDedupeHorizon, c.DedupeHorizon))
		}
	}
	// Without retention, a window is kept a week, or as long as
	// retentionFloor asks when that is longer.
	c.Retention = max(DefaultRetention, c.retentionFloor())
	if raw.retention != nil && m.ok("retention") {
		c.Retention, err = setting("retention", *raw.retention, MinRetention, "the least a window is kept after it ends", MaxRetention)
		m.add(err)
	}
	// The retention's floor is checked against the durations it is made
	// of only when they and it were read.
	if m.ok("retention", "latePolicy", "allowedLateness") && c.Retention < c.Late.AllowedLateness+MinRetention {
		m.add(cfgErr("retention", "%s is shorter than allowedLateness (%s) + %s: a correction could find its window expired", c.Retention, c.Late.AllowedLateness, MinRetention))
	}
	if m.ok("retention", "latePolicy", "allowedLateness", "outOfOrderness", "idleTimeout") && c.Retention < c.retentionFloor() {
		m.add(cfgErr("retention", "%s is shorter than outOfOrderness (%s) + idleTimeout (%s) + allowedLateness (%s) + %s: a window could still be open, or take a correction, after its item expired, and its result would never be emitted",
			c.Retention, c.OutOfOrderness, c.IdleTimeout, c.Late.AllowedLateness, changeMargin))
	}
	return c, m, nil
}

// changeMargin is how long a window's item is kept, at the least, past the
// latest the window can change: its watermark may pass its end
// outOfOrderness + idleTimeout after it (an idle shard's, advanced by the
// ticker), and a correction come allowedLateness after that. The margin
// is for a function behind its shard (a backlog, a failing batch).
const changeMargin = 12 * time.Hour

// retentionFloor is the shortest retention of c: a day past its allowed
// lateness, and changeMargin past the latest a window can change. A window
// item that expired before it was final is never finalized, and its result
// never emitted.
func (c *Config) retentionFloor() time.Duration {
	past, _ := c.keptPastLateness()
	return c.Late.AllowedLateness + past
}

// keptPastLateness is how long a window is kept past its allowed lateness
// at the least, and, when its outOfOrderness and idleTimeout make that
// longer than MinRetention, a note saying why.
func (c *Config) keptPastLateness() (time.Duration, string) {
	if d := c.OutOfOrderness + c.IdleTimeout + changeMargin; d > MinRetention {
		return d, " (outOfOrderness + idleTimeout + " + changeMargin.String() + ")"
	}
	return MinRetention, ""
}

// setting reads a duration setting given as s (not empty: field refuses
// ""): a whole number of seconds from lo (why: what the lower bound is; lo
// 0 takes "0s") to hi.
func setting(field, s string, lo time.Duration, why string, hi time.Duration) (time.Duration, error) {
	d, err := duration(field, s, 0, lo == 0)
	if err != nil {
		return 0, err
	}
	switch {
	case d < lo:
		return 0, cfgErr(field, "%s is shorter than %s, %s", s, lo, why)
	case d > hi:
		return 0, cfgErr(field, "%s is longer than %s", s, hi)
	case d%time.Second != 0:
		return 0, cfgErr(field, "%s is not a whole number of seconds", s)
	}
	return d, nil
}

func isValueAggregate(n string) bool {
	a, err := agg.ParseAggregate(n)
	return err == nil && a.NeedsValue()
}

// optionalPath parses a path that is required when an aggregate needs it and
// refused otherwise; readers names the aggregates that read it. needed is
// nil when the aggregates did not parse: the path is then only parsed.
func optionalPath(m *mistakes, name, s string, aggregates []string, needed *bool, needs func(string) bool, readers string) Path {
	switch {
	case needed != nil && !*needed && s != "":
		m.add(cfgErr(name, "set but no aggregate uses it: remove it, or add an aggregate that reads it (%s)", readers))
		return Path{}
	case needed != nil && *needed && s == "":
		i := slices.IndexFunc(aggregates, needs)
		m.add(cfgErr(name, "required when aggregates include %q", aggregates[i]))
		return Path{}
	case s == "":
		return Path{}
	}
	p, err := ParsePath(s)
	if err != nil {
		m.add(cfgErr(name, "%v", err))
	}
	return p
}

// parseWindows reads the windows, each of whose mistakes is m's; the
// windows checked against each other (a duplicate, the windows a record
// falls in) are those read without a mistake.
func parseWindows(m *mistakes, top map[string]json.RawMessage) []WindowSpec {
	if !m.ok("windows") { // a misspelt "windows"
		return nil
	}
	var raws []json.RawMessage
	if m.add(field(top, "windows", "windows", &raws)) {
		return nil
	}
	if len(raws) == 0 {
		m.add(cfgErr("windows", "at least one window is required, for example [{\"kind\": \"tumbling\", \"size\": \"1m\"}]"))
		return nil
	}
	// A window with a mistake is left of no kind, so that the others keep
	// their index (checkKeyedWindows names them by it).
	specs := make([]WindowSpec, len(raws))
	var perRecord int64
	for i, r := range raws {
		path := fmt.Sprintf("windows[%d]", i)
		w, ok := parseWindow(m, path, r)
		if !ok {
			continue
		}
		if j := slices.IndexFunc(specs[:i], func(v WindowSpec) bool { return v.Kind != 0 && v.aligned() == w.aligned() }); j >= 0 {
			m.add(cfgErr(path, "is the same window as windows[%d]", j))
			continue
		}
		n := int64(1) // a tumbling window; a session or sliding kind's key state
		if w.Kind == Hopping {
			n = int64(w.Size / w.Advance)
		}
		// Past the bound once, every later window would be too: that
		// is one mistake.
		if perRecord <= MaxWindowsPerRecord {
			if perRecord += n; perRecord > MaxWindowsPerRecord {
				field, what := path, "its windows"
				if w.Kind == Hopping {
					field, what = path+".advance", fmt.Sprintf("%d windows (size %s / advance %s)", n, w.Size, w.Advance)
				}
				m.add(cfgErr(field, "a record would fall in %s, %d with the windows before it: at most %d, since each is one conditional write per key and batch; use a longer advance or fewer windows",
					what, perRecord, MaxWindowsPerRecord))
			}
		}
		specs[i] = w
	}
	return specs
}

// dividingAdvances suggests the advances nearest advance, one below and one
// above, that divide size into at most MaxWindowsPerRecord windows (whole
// seconds when size is), as "; use 40s or 1m0s", or "" when none does.
func dividingAdvances(size, advance time.Duration) string {
	unit := window.Resolution
	if size%time.Second == 0 {
		unit = time.Second
	}
	n := int64(size / unit)
	// below and above are the nearest that divide into few enough windows;
	// tooManyBelow the nearest below that divides into too many, and
	// tooManyAbove whether one above does (it is nearer than above).
	var below, above, tooManyBelow time.Duration
	tooManyAbove := false
	for i := int64(1); i*i <= n; i++ {
		if n%i != 0 {
			continue
		}
		for _, q := range [2]int64{i, n / i} {
			d := time.Duration(q) * unit
			switch {
			case d >= size:
			case n/q > MaxWindowsPerRecord && d < advance:
				tooManyBelow = max(tooManyBelow, d)
			case n/q > MaxWindowsPerRecord:
				tooManyAbove = true
			case d < advance:
				below = max(below, d)
			case above == 0 || d < above:
				above = d
			}
		}
	}
	var use []string
	for _, d := range []time.Duration{below, above} {
		if d > 0 {
			use = append(use, d.String())
		}
	}
	if len(use) == 0 {
		return ""
	}
	s := "; use " + strings.Join(use, " or ")
	if tooManyBelow > below || tooManyAbove {
		s += fmt.Sprintf(" (at most %d windows a record)", MaxWindowsPerRecord)
	}
	return s
}

// MaxWindowsPerRecord bounds the windows one record falls in, over all of a
// pipeline's windows (a hopping window counts size/advance, a tumbling
// window one, a session or sliding kind one: its key's state): the function
// writes each (key, window) a batch touches, so a record's windows are
// writes, and a hopping window of "1h" advancing by "1ms" would ask 3.6
// million of them for each record, more than an invocation can make.
const MaxWindowsPerRecord = 100

// parseWindow reads the window at path, each of whose mistakes is m's, and
// reports whether it was read without one.
func parseWindow(m *mistakes, path string, doc []byte) (WindowSpec, bool) {
	var w WindowSpec
	fields, err := object(m, "windows", path, doc, windowFields)
	if err != nil {
		m.add(err)
		return w, false
	}
	raw := map[string]string{}
	for _, name := range windowFields {
		var s string
		if !m.add(field(fields, name, path+"."+name, &s)) {
			raw[name] = s
		}
	}
	if !m.ok(path + ".kind") {
		return w, false
	}
	kind := raw["kind"]
	var uses []string
	for _, k := range windowKinds {
		if k.kind.String() == kind {
			w.Kind, uses = k.kind, k.uses
		}
	}
	switch {
	case kind == "":
		m.add(cfgErr(path+".kind", "required: %s", joinOr(windowKindNames())))
		return w, false
	case w.Kind == 0:
		m.add(cfgErr(path+".kind", "%q is not a window kind: want %s", kind, joinOr(windowKindNames())))
		return w, false
	}
	for _, name := range windowFields[1:] {
		if raw[name] != "" && !slices.Contains(uses, name) {
			m.add(cfgErr(path+"."+name, "a %s window has no %s (it takes %s)", kind, name, joinOr(uses)))
		}
	}
	dst := map[string]*time.Duration{"size": &w.Size, "advance": &w.Advance, "difference": &w.Difference, "gap": &w.Gap}
	for _, name := range uses {
		if name == "offset" || !m.ok(path+"."+name) {
			continue
		}
		if raw[name] == "" {
			m.add(cfgErr(path+"."+name, "required for a %s window", kind))
			continue
		}
		if *dst[name], err = duration(path+"."+name, raw[name], 0, false); m.add(err) {
			continue
		}
		if *dst[name] > MaxWindowDuration {
			m.add(cfgErr(path+"."+name, "%s is longer than %s, the longest a window may be", raw[name], MaxWindowDuration))
		}
	}
	if raw["offset"] != "" && m.ok(path+".offset") {
		d, err := durationtext.Parse(raw["offset"])
		switch {
		case errors.Is(err, durationtext.ErrTooLong):
			m.add(cfgErr(path+".offset", "%s is %v", raw["offset"], err))
		case err != nil:
			m.add(cfgErr(path+".offset", "%q is not a duration such as \"90s\", \"5m\" or \"-5h\"", raw["offset"]))
		case d%window.Resolution != 0:
			m.add(cfgErr(path+".offset", "%s is not a whole number of milliseconds", raw["offset"]))
		default:
			w.Offset = d
		}
	}
	if w.Kind == Hopping && m.ok(path+".size", path+".advance") {
		switch {
		case w.Advance > w.Size:
			m.add(cfgErr(path+".advance", "%s is longer than size %s: records between windows would be in none", raw["advance"], raw["size"]))
		case w.Size%w.Advance != 0:
			m.add(cfgErr(path+".advance", "%s does not divide size %s: size must be a whole number of advances%s", raw["advance"], raw["size"], dividingAdvances(w.Size, w.Advance)))
		}
	}
	if !m.ok(path) {
		return w, false
	}
	// The window package's own checks, in case they are stricter.
	var verr error
	switch w.Kind {
	case Tumbling:
		verr = w.Tumbling().Validate()
	case Hopping:
		verr = w.Hopping().Validate()
	case Sliding:
		verr = w.Sliding().Validate()
	case Session:
		verr = w.Session().Validate()
	}
	if verr != nil {
		m.add(cfgErr(path, "%v", verr))
		return w, false
	}
	return w, true
}

// parseOutputs reads outputs, each of whose mistakes is m's.
func parseOutputs(m *mistakes, top map[string]json.RawMessage) Outputs {
	if _, ok := top["outputs"]; !ok || !m.ok("outputs") {
		return Outputs{Table: true, Log: true}
	}
	var doc json.RawMessage
	if m.add(field(top, "outputs", "outputs", &doc)) {
		return Outputs{}
	}
	fields, err := object(m, "outputs", "outputs", doc, outputFields)
	if err != nil {
		m.add(err)
		return Outputs{}
	}
	o := Outputs{Log: true}
	m.add(field(fields, "table", "outputs.table", &o.Table))
	m.add(field(fields, "stream", "outputs.stream", &o.Stream))
	m.add(field(fields, "log", "outputs.log", &o.Log))
	if !o.Table && !o.Stream && m.ok("outputs") {
		m.add(cfgErr("outputs", `at least one of table and stream must be true (an outputs member replaces the default {"table": true}: to change log alone, write {"table": true, "log": false})`))
	}
	return o
}

// duration parses a Go duration that must be positive (or, with zeroOK,
// 0 or more) and a whole number of milliseconds; "" (the field left out:
// field refuses a "" given) gives def.
func duration(path, s string, def time.Duration, zeroOK bool) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := durationtext.Parse(s)
	if errors.Is(err, durationtext.ErrTooLong) {
		return 0, cfgErr(path, "%s is %v", s, err)
	}
	if err != nil {
		return 0, cfgErr(path, "%q is not a duration such as \"90s\", \"5m\" or \"1h30m\"", s)
	}
	switch {
	case d < 0 && zeroOK:
		return 0, cfgErr(path, "%s must be 0 or more", s)
	case d < 0 || (d == 0 && !zeroOK):
		return 0, cfgErr(path, "%s must be positive", s)
	case d%window.Resolution != 0:
		return 0, cfgErr(path, "%s is not a whole number of milliseconds", s)
	}
	return d, nil
}

// object decodes the JSON object doc, the field at path under top-level
// field root ("" for the document itself). When doc is no object it
// returns nil and the error; else its members, with each field not in
// known or quiet (accepted, but not listed in the error's known fields) a
// mistake of m, in the order written, at most maxMistakes of them (the
// rest counted). An unknown field within two edits of a known one the
// object lacks is named as its misspelling, and the known one left
// unchecked (m.unset): "nmae" is the mistake, not a missing "name".
func object(m *mistakes, root, path string, doc []byte, known []string, quiet ...string) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(doc, &fields); err != nil || fields == nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(doc, se.Offset)
			return nil, cfgErr(path, "not valid JSON at line %d, column %d: %v%s", line, col, se, trailingComma(doc, se.Offset))
		}
		return nil, cfgErr(path, "must be a JSON object, not %s", strictjson.TypeOf(bytes.TrimSpace(doc)))
	}
	under := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	kept := 0
	for _, k := range keysInOrder(doc) {
		if slices.Contains(known, k) || slices.Contains(quiet, k) {
			continue
		}
		if kept == maxMistakes {
			m.more++
			continue
		}
		kept++
		p := k
		if p == "" {
			p = `""` // a field with an empty name: name it as written
		}
		r := root
		if r == "" {
			r = k
		}
		near := strictjson.Nearest(k, known)
		if near == "" {
			m.unknown(r, NewConfigError(under(p), "unknown field (known: "+joinAnd(known)+")"), "")
			continue
		}
		unset := ""
		if _, ok := fields[near]; !ok {
			unset = under(near)
		}
		m.unknown(r, NewConfigError(under(p), fmt.Sprintf("unknown field; did you mean %q? (known: %s)", near, joinAnd(known))), unset)
	}
	return fields, nil
}

// lineCol is the 1-based line and column of byte offset off in doc.
// trailingComma is a hint when the syntax error at off (one past the byte
// refused) is a closing bracket or brace right after a comma, the
// mistake JSON's readers word least clearly.
func trailingComma(doc []byte, off int64) string {
	i := int(off) - 1
	if i <= 0 || i >= len(doc) || doc[i] != '}' && doc[i] != ']' {
		return ""
	}
	before := bytes.TrimRight(doc[:i], " \t\r\n")
	if len(before) == 0 || before[len(before)-1] != ',' {
		return ""
	}
	return " (a comma before it with nothing after: JSON takes no trailing comma)"
}

func lineCol(doc []byte, off int64) (line, col int) {
	if off > int64(len(doc)) {
		off = int64(len(doc))
	}
	before := doc[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, col
}

// list decodes the array top[name] element by element, each element's
// mistake m's, naming the element ("eventTypes[2]"); an element that is
// not a T is left its zero value.
func list[T any](m *mistakes, top map[string]json.RawMessage, name string) []T {
	var raws []json.RawMessage
	if !m.ok(name) || m.add(field(top, name, name, &raws)) {
		return nil
	}
	out := make([]T, len(raws))
	for i, r := range raws {
		m.add(field(map[string]json.RawMessage{"": r}, "", fmt.Sprintf("%s[%d]", name, i), &out[i]))
	}
	return out
}

// field decodes m[name] into dst if present. A field is either left out
// (its default, where it has one) or given a value: null, and "" for a
// string ($schema aside), are refused naming the field, as the JSON Schema
// refuses them, rather than read as the default — one file, one meaning,
// in the editor and in the stack.
func field(m map[string]json.RawMessage, name, path string, dst any) error {
	v, ok := m[name]
	if !ok {
		return nil
	}
	want := func(t reflect.Type) string {
		if slices.Contains(durationFields, name) {
			return "a duration string such as \"90s\" or \"5m\""
		}
		return goKind(t.String())
	}
	t := reflect.TypeOf(dst).Elem()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// refuse words the refusal of a value that is no value; an array's
	// element (name "") cannot be left out.
	refuse := func(reason, what string) error {
		if name == "" {
			return cfgErr(path, "%s", reason)
		}
		return cfgErr(path, "%s, or leave the field out (a field left out takes its default, where it has one; %s is not read as it)", reason, what)
	}
	switch string(bytes.TrimSpace(v)) {
	case "null":
		return refuse("is null: give "+want(t), "null")
	case `""`:
		if t.Kind() == reflect.String && name != schemaField {
			if name == "" {
				return cfgErr(path, "is empty")
			}
			return refuse("is empty: give "+want(t), `""`)
		}
	}
	if err := json.Unmarshal(v, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			want := want(te.Type)
			got := strictjson.TypeOf(bytes.TrimSpace(v))
			switch {
			case got == "a number" && want == "a number":
				// A number past what a float64 holds ("1e400").
				return cfgErr(path, "%s is out of range", strictjson.Cut(string(bytes.TrimSpace(v)), maxNumberShown))
			case got == "a number" && want == "a whole number":
				return cfgErr(path, "%s is not a whole number%s", strictjson.Cut(string(bytes.TrimSpace(v)), maxNumberShown), wholeRange(path))
			}
			return cfgErr(path, "must be %s, not %s", want, got)
		}
		return cfgErr(path, "%v", err)
	}
	return nil
}

func goKind(t string) string {
	switch t {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "*int", "uint8":
		return "a whole number"
	case "float64":
		return "a number"
	case "[]json.RawMessage":
		return "an array"
	case "map[string]json.RawMessage":
		return "an object"
	case "json.RawMessage": // a field read as a whole (outputs)
		return "an object"
	}
	return t
}

func joinOr(xs []string) string {
	if len(xs) == 1 {
		return xs[0]
	}
	return fmt.Sprintf("%s or %s", joinComma(xs[:len(xs)-1]), xs[len(xs)-1])
}

func joinAnd(xs []string) string { return joinComma(xs) }

func joinComma(xs []string) string {
	b := []byte{}
	for i, x := range xs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, x...)
	}
	return string(b)
}

// wholeRange is " from <min> to <max>" for a top-level whole-number field
// whose range the schema gives (parallelizationFactor: from 1 to 10), so
// a fraction or 1e400 is told the range as 0 or 11 is; "" otherwise.
func wholeRange(path string) string {
	for _, fields := range kindFields {
		for _, f := range fields {
			if f.name == path && f.typ == tInteger && f.min != nil && f.max != nil {
				return fmt.Sprintf(" from %d to %d", int64(*f.min), int64(*f.max))
			}
		}
	}
	return ""
}
