package join

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/durationtext"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// EnvVar is the environment variable Load reads the join's config from.
const EnvVar = "JOIN_CONFIG"

// Kind is how unmatched records are treated: Kafka Streams' join, leftJoin
// and outerJoin.
type Kind uint8

// The join kinds.
const (
	// Inner emits a joined record per matching pair, nothing for a record
	// that never matched.
	Inner Kind = iota + 1
	// Left also emits a left record that never matched, once its window
	// has closed: the notes' "search that got no click".
	Left
	// Outer emits unmatched records of both sides once their windows close.
	Outer
)

var kindNames = [...]string{Inner: "inner", Left: "left", Outer: "outer"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Defaults and bounds of the config.
const (
	DefaultIdleTimeout   = time.Minute
	DefaultDedupeHorizon = time.Hour
	MaxDedupeHorizon     = 7 * 24 * time.Hour
	// MaxWindow bounds within + before + allowedLateness: a buffered
	// record is kept that long at most, and the state of a busy key
	// must fit in one item.
	MaxWindow = 24 * time.Hour
	// maxOpenRateWindows bounds the rate windows a key keeps open (about
	// within / rateWindow), so they fit in its item.
	maxOpenRateWindows = 1000
)

// Config is a parsed, validated join: records of type Left and of type
// Right with the same join key are joined when the right record's event
// time is within [left − Before, left + Within].
type Config struct {
	// Name names the join: its state items, its watermarks and its output
	// records' ids.
	Name string
	// Left and Right are the event types of the two sides ("search",
	// "click").
	Left, Right string
	// Key is the join key: the envelope's key (the partition key) or a
	// data field that producers also use as the envelope key.
	Key pipeline.Path
	// Within is how long after a left record a right record still joins
	// it; Before how long before it (0: a click never joins a later
	// search). Both bounds are inclusive.
	Within, Before time.Duration
	Kind           Kind
	// AllowedLateness is how far behind the newest event time of its shard
	// a record may be and still join (Kafka Streams' grace period): the
	// watermark is the newest event time minus AllowedLateness, a left
	// record's window closes once the watermark passes its time + Within
	// (a right record's, its time + Before), and a record whose window has
	// already closed when it arrives is late: dropped and counted.
	AllowedLateness time.Duration
	// IdleTimeout is how long a shard may see no new event time before the
	// tick advances its watermark by processing time.
	IdleTimeout time.Duration
	// RateWindow is the tumbling window (by the left record's event time)
	// of the derived click-through rate: per key and window, left records
	// that joined at least once out of all left records. 0: none.
	RateWindow time.Duration
	// DedupeHorizon is how long an event id suppresses a producer's copies
	// (package dedupe); 0 turns it off.
	DedupeHorizon time.Duration
}

// cfgErr is a *pipeline.ConfigError naming field, bounded.
func cfgErr(field, format string, args ...any) error {
	return pipeline.NewConfigError(field, fmt.Sprintf(format, args...))
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// rawConfig is the JSON document: a join file of pipelines/ (kind "join";
// its fields are pipeline.FieldNames(pipeline.KindJoin), which the tests
// hold this struct to).
type rawConfig struct {
	Schema                string  `json:"$schema"` // for editors; ignored
	Kind                  string  `json:"kind"`
	Name                  string  `json:"name"`
	Left                  string  `json:"left"`
	Right                 string  `json:"right"`
	Key                   string  `json:"key"`
	Within                string  `json:"within"`
	Before                string  `json:"before"`
	JoinType              string  `json:"joinType"`
	AllowedLateness       string  `json:"allowedLateness"`
	IdleTimeout           string  `json:"idleTimeout"`
	RateWindow            string  `json:"rateWindow"`
	DedupeHorizon         *string `json:"dedupeHorizon"`
	PartitionKeyIsJoinKey bool    `json:"partitionKeyIsJoinKey"`
}

// Load reads and parses the config in JOIN_CONFIG; errors start with the
// variable's name.
func Load() (*Config, error) { return FromEnv(os.LookupEnv) }

// FromEnv is Load with a given environment lookup.
func FromEnv(lookup func(string) (string, bool)) (*Config, error) {
	v, ok := lookup(EnvVar)
	if !ok || v == "" {
		return nil, fmt.Errorf("%s: not set: want the join's JSON config", EnvVar)
	}
	c, err := Parse([]byte(v))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvVar, err)
	}
	return c, nil
}

// Parse parses and validates a JSON join config, a join file of pipelines/
// (the stack passes it whole as JOIN_CONFIG):
//
//	kind             "join" (or absent)
//	name             required; letters, digits, - and _, at most 64
//	left, right      required: the two event types ("search", "click"); different
//	key              the join key: "key" (default, the partition key) or "data.<field>"
//	                   (then partitionKeyIsJoinKey must say producers use it as the key)
//	within           required: how long after a left record a right one joins it ("10m")
//	before           how long before it a right record still joins (default "0s")
//	joinType         "inner", "left" (default) or "outer"
//	allowedLateness  grace period after a window's end for out-of-order records (default "0s")
//	idleTimeout      an idle shard's watermark moves by processing time after this (default "1m", at most 24h)
//	rateWindow       tumbling window of the click-through rate per key ("1m"; absent: none)
//	dedupeHorizon    how long an event id suppresses copies (default "1h", at most 168h; "0s": off)
//
// The document is read by package strictjson: text that is not UTF-8, a key
// twice, unknown fields (with a did-you-mean) and values of the wrong type
// are refused; a top-level "$schema" string is accepted and ignored. Errors
// are *pipeline.ConfigError naming the field.
func Parse(doc []byte) (*Config, error) {
	var raw rawConfig
	if err := strictjson.Decode(doc, &raw, strictjson.Options{Name: "config"}); err != nil {
		return nil, jsonError(err)
	}
	c := &Config{Name: raw.Name, Left: raw.Left, Right: raw.Right}
	switch {
	case raw.Kind != "" && raw.Kind != string(pipeline.KindJoin):
		return nil, cfgErr("kind", "%q: a join's file has kind %q", raw.Kind, pipeline.KindJoin)
	case raw.Name == "":
		return nil, cfgErr("name", "required")
	case !namePattern.MatchString(raw.Name):
		return nil, cfgErr("name", "%q must be 1 to 64 letters, digits, '-' or '_'", raw.Name)
	case raw.Left == "":
		return nil, cfgErr("left", "required: the event type of the left side, for example \"search\"")
	case raw.Right == "":
		return nil, cfgErr("right", "required: the event type of the right side, for example \"click\"")
	case raw.Left == raw.Right:
		return nil, cfgErr("right", "%q is the left type too: a self-join needs the two sides told apart by type", raw.Right)
	case utf8.RuneCountInString(raw.Left) > stream.MaxTypeLength:
		return nil, cfgErr("left", "is longer than an event type can be (%d characters)", stream.MaxTypeLength)
	case utf8.RuneCountInString(raw.Right) > stream.MaxTypeLength:
		return nil, cfgErr("right", "is longer than an event type can be (%d characters)", stream.MaxTypeLength)
	}
	for _, side := range []struct{ field, typ string }{{"left", raw.Left}, {"right", raw.Right}} {
		if u, found := stream.FirstUnprintable(side.typ); found {
			return nil, cfgErr(side.field, "holds %v: no event's type can (ingest refuses it), so this side would never be read", u)
		}
	}
	if raw.Key == "" {
		raw.Key = "key"
	}
	var err error
	if c.Key, err = pipeline.ParsePath(raw.Key); err != nil {
		return nil, cfgErr("key", "%v", err)
	}
	switch {
	case raw.Key == "type" || raw.Key == "id" || raw.Key == "data":
		return nil, cfgErr("key", "%q cannot be a join key: want \"key\" or \"data.<field>\"", raw.Key)
	case !c.Key.IsPartitionKey() && !raw.PartitionKeyIsJoinKey:
		return nil, cfgErr("partitionKeyIsJoinKey", "joining by %s needs both sides of a join key on one shard, in order: producers must use it as the envelope key, and say so with partitionKeyIsJoinKey: true", raw.Key)
	}
	if raw.Within == "" {
		return nil, cfgErr("within", "required: how long after a %s a %s still joins it, for example \"10m\"", raw.Left, raw.Right)
	}
	if c.Within, err = duration("within", raw.Within); err != nil {
		return nil, err
	}
	if c.Within <= 0 {
		return nil, cfgErr("within", "%s: must be above zero", raw.Within)
	}
	if c.Before, err = duration("before", raw.Before); err != nil {
		return nil, err
	}
	switch raw.JoinType {
	case "", "left":
		c.Kind = Left
	case "inner":
		c.Kind = Inner
	case "outer":
		c.Kind = Outer
	default:
		return nil, cfgErr("joinType", "%q: want \"inner\", \"left\" or \"outer\"", raw.JoinType)
	}
	if c.AllowedLateness, err = duration("allowedLateness", raw.AllowedLateness); err != nil {
		return nil, err
	}
	// Each bounded first, so the sum cannot wrap: "2562047h" twice adds
	// up to a negative duration, which no bound above catches.
	for _, d := range []struct {
		field string
		d     time.Duration
	}{{"within", c.Within}, {"before", c.Before}, {"allowedLateness", c.AllowedLateness}} {
		if d.d > MaxWindow {
			return nil, cfgErr(d.field, "%s: a record is buffered at least that long, at most %s", d.d, MaxWindow)
		}
	}
	if w := c.Within + c.Before + c.AllowedLateness; w > MaxWindow {
		return nil, cfgErr("within", "within + before + allowedLateness is %s; a record is buffered that long, at most %s", w, MaxWindow)
	}
	c.IdleTimeout = DefaultIdleTimeout
	if raw.IdleTimeout != "" {
		if c.IdleTimeout, err = duration("idleTimeout", raw.IdleTimeout); err != nil {
			return nil, err
		}
		if c.IdleTimeout <= 0 {
			return nil, cfgErr("idleTimeout", "%s: must be above zero", raw.IdleTimeout)
		}
		// A key's item expires StateExpiry (8 days) after its last write:
		// an idle shard must close its keys' records long before.
		if c.IdleTimeout > MaxWindow {
			return nil, cfgErr("idleTimeout", "%s: an idle shard's records wait that long to close, at most %s", raw.IdleTimeout, MaxWindow)
		}
	}
	if c.RateWindow, err = duration("rateWindow", raw.RateWindow); err != nil {
		return nil, err
	}
	if c.RateWindow != 0 && (c.RateWindow < time.Second || c.RateWindow%time.Millisecond != 0 || c.RateWindow > MaxWindow) {
		return nil, cfgErr("rateWindow", "%s: must be a whole number of milliseconds from 1s to %s", raw.RateWindow, MaxWindow)
	}
	if c.RateWindow != 0 && c.Within/c.RateWindow > maxOpenRateWindows {
		return nil, cfgErr("rateWindow", "%s is under 1/%d of within (%s): a key would keep more than %d rate windows open", raw.RateWindow, maxOpenRateWindows, c.Within, maxOpenRateWindows)
	}
	c.DedupeHorizon = DefaultDedupeHorizon
	if raw.DedupeHorizon != nil {
		if *raw.DedupeHorizon == "" {
			return nil, cfgErr("dedupeHorizon", "is empty: want a duration such as \"1h\", or \"0s\" to turn suppression of copies off")
		}
		if c.DedupeHorizon, err = duration("dedupeHorizon", *raw.DedupeHorizon); err != nil {
			return nil, err
		}
		switch {
		case c.DedupeHorizon > MaxDedupeHorizon:
			return nil, cfgErr("dedupeHorizon", "%s is longer than %s", *raw.DedupeHorizon, MaxDedupeHorizon)
		case c.DedupeHorizon%time.Second != 0:
			return nil, cfgErr("dedupeHorizon", "%s is not a whole number of seconds", *raw.DedupeHorizon)
		}
	}
	return c, nil
}

// duration parses a Go duration that must not be negative ("" is 0).
func duration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := durationtext.Parse(s)
	if errors.Is(err, durationtext.ErrTooLong) {
		return 0, cfgErr(field, "%s is %v", s, err)
	}
	if err != nil {
		return 0, cfgErr(field, "%q is not a duration such as \"90s\" or \"10m\"", s)
	}
	if d < 0 {
		return 0, cfgErr(field, "%s is negative", s)
	}
	if d%time.Millisecond != 0 {
		return 0, cfgErr(field, "%s is not a whole number of milliseconds (event times are kept to the millisecond)", s)
	}
	return d, nil
}

// jsonError turns a strictjson refusal into a *pipeline.ConfigError naming the
// field.
func jsonError(err error) error {
	var se *strictjson.Error
	if errors.As(err, &se) {
		return pipeline.NewConfigError(se.Path, se.Reason)
	}
	return cfgErr("", "%v", err)
}
