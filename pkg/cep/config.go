package cep

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// EnvVar is the environment variable LoadConfig reads the config from.
const EnvVar = "CEP_CONFIG"

// When a rule takes effect. The function re-reads the rules table whenever
// its copy is older than RefreshInterval (before a batch or a tick), so a
// copy is never more than RefreshInterval old when it judges an event. A
// rule added (or enabled) at time T applies to every event that reaches the
// events stream at or after T + ActivationDelay — ActivationDelay is
// RefreshInterval plus ClockSlack for the clocks of the writer, Kinesis and
// Lambda — and to no event before it; disabled or deleted at T, it reads no
// event arriving at or after T + ActivationDelay. The rule is judged by the
// event's arrival time on the stream, which every redelivery carries
// unchanged, so a retried batch meets the same rules.
const (
	RefreshInterval = 5 * time.Second
	ClockSlack      = 5 * time.Second
	ActivationDelay = RefreshInterval + ClockSlack
)

// Timing is when rule changes take effect where detect and rules run:
// detect re-reads the rules whenever its copy is older than Refresh, and a
// change made at T applies from T + ActivationDelay (Refresh + ClockSlack).
// On AWS it is DefaultTiming; the local runner, whose stand-in, functions
// and clocks are one machine's, shortens it (TimingEnvVar) so that its demo
// does not wait 10 s for each change.
type Timing struct {
	Refresh, ClockSlack time.Duration
}

// DefaultTiming is RefreshInterval and ClockSlack.
var DefaultTiming = Timing{Refresh: RefreshInterval, ClockSlack: ClockSlack}

// ActivationDelay is how long after a change it applies.
func (t Timing) ActivationDelay() time.Duration { return t.Refresh + t.ClockSlack }

// TimingEnvVar is the environment variable TimingFromEnv reads: a Go
// duration that is both the refresh and the clock slack, from
// MinRefresh to RefreshInterval. Detect and rules must be given the same
// (the local runner sets it on both); the stack leaves it unset.
const TimingEnvVar = "CEP_RULES_REFRESH"

// MinRefresh is the shortest refresh TimingEnvVar may ask for: each
// refresh is a read of the rules table's version item.
const MinRefresh = 100 * time.Millisecond

// TimingFromEnv is DefaultTiming, or the timing TimingEnvVar gives; a value
// that is not a duration from MinRefresh to RefreshInterval is an error
// naming the variable.
func TimingFromEnv(lookup func(string) (string, bool)) (Timing, error) {
	v, ok := lookup(TimingEnvVar)
	if !ok || v == "" {
		return DefaultTiming, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < MinRefresh || d > RefreshInterval {
		return Timing{}, fmt.Errorf("cep: %s=%q: want a duration from %s to %s (the rules' refresh and clock slack)", TimingEnvVar, v, MinRefresh, RefreshInterval)
	}
	return Timing{Refresh: d, ClockSlack: d}, nil
}

// Config is the CEP function's declared config.
type Config struct {
	// Name names its state items and watermarks.
	Name string
	// OutOfOrderness is the watermark's allowance: events are matched in
	// event-time order once the watermark (the newest event time of the
	// shard minus it) has passed them; an event older than the watermark
	// when it arrives is late.
	OutOfOrderness time.Duration
	// IdleTimeout is how long a shard may see no newer event time before
	// the tick advances its watermark by processing time.
	IdleTimeout time.Duration
	// DedupeHorizon is how long an event id suppresses a producer's copies;
	// 0 turns it off.
	DedupeHorizon time.Duration
}

// configJSON is a CEP file of pipelines/ (kind "cep"; its fields are
// pipeline.FieldNames(pipeline.KindCEP), which the tests hold it to).
type configJSON struct {
	Schema         string  `json:"$schema"` // for editors; ignored
	Kind           string  `json:"kind"`
	Name           string  `json:"name"`
	OutOfOrderness string  `json:"outOfOrderness"`
	IdleTimeout    string  `json:"idleTimeout"`
	DedupeHorizon  *string `json:"dedupeHorizon"`
}

var configName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// LoadConfig reads CEP_CONFIG.
func LoadConfig() (*Config, error) { return ConfigFromEnv(os.LookupEnv) }

// ConfigFromEnv is LoadConfig with a given lookup.
func ConfigFromEnv(lookup func(string) (string, bool)) (*Config, error) {
	v, ok := lookup(EnvVar)
	if !ok || v == "" {
		return nil, fmt.Errorf("%s: not set: want the CEP function's JSON config", EnvVar)
	}
	c, err := ParseConfig([]byte(v))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvVar, err)
	}
	return c, nil
}

// ParseConfig parses the CEP config, a CEP file of pipelines/ (the stack
// passes it whole as CEP_CONFIG; a "$schema" string is ignored):
//
//	kind            "cep" (or absent)
//	name            required; letters, digits, - and _, at most 64
//	outOfOrderness  watermark allowance (default "0s"), at most 1h
//	idleTimeout     default "1m"
//	dedupeHorizon   default "1h", at most 168h; "0s": off
func ParseConfig(doc []byte) (*Config, error) {
	var raw configJSON
	if err := strictjson.Decode(doc, &raw, strictjson.Options{Name: "config"}); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return nil, pipeline.NewConfigError(se.Path, se.Reason)
		}
		return nil, pipeline.NewConfigError("", err.Error())
	}
	if raw.Kind != "" && raw.Kind != string(pipeline.KindCEP) {
		return nil, pipeline.NewConfigError("kind", fmt.Sprintf("%q: a CEP file has kind %q", raw.Kind, pipeline.KindCEP))
	}
	if !configName.MatchString(raw.Name) {
		return nil, pipeline.NewConfigError("name", fmt.Sprintf("%q must be 1 to 64 letters, digits, '-' or '_'", raw.Name))
	}
	c := &Config{Name: raw.Name, IdleTimeout: time.Minute, DedupeHorizon: time.Hour}
	dur := func(field, s string, def, maxD time.Duration) (time.Duration, error) {
		if s == "" {
			return def, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || d > maxD || d%time.Millisecond != 0 {
			return 0, pipeline.NewConfigError(field, fmt.Sprintf("%q: want a whole number of milliseconds from 0s to %s, such as \"5s\"", s, maxD))
		}
		return d, nil
	}
	var err error
	if c.OutOfOrderness, err = dur("outOfOrderness", raw.OutOfOrderness, 0, time.Hour); err != nil {
		return nil, err
	}
	if c.IdleTimeout, err = dur("idleTimeout", raw.IdleTimeout, time.Minute, 24*time.Hour); err != nil {
		return nil, err
	}
	if c.IdleTimeout == 0 {
		return nil, pipeline.NewConfigError("idleTimeout", "must be above zero")
	}
	if raw.DedupeHorizon != nil {
		if c.DedupeHorizon, err = dur("dedupeHorizon", *raw.DedupeHorizon, 0, 7*24*time.Hour); err != nil {
			return nil, err
		}
		if *raw.DedupeHorizon == "" || c.DedupeHorizon%time.Second != 0 {
			return nil, pipeline.NewConfigError("dedupeHorizon", "want a whole number of seconds such as \"1h\", or \"0s\" to turn suppression of copies off")
		}
	}
	return c, nil
}

// hashParts is 32 hex digits of a hash of parts (each length-prefixed, so
// no two lists of parts hash alike by concatenation).
func hashParts(parts []string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s|", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
