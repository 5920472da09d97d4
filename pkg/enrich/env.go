package enrich

import (
	"fmt"
	"time"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// EnvDedupeHorizon is the environment variable functions/enrich reads the
// dedupe horizon from: a Go duration, "0s" turns suppression of producer
// copies off (the stack sets the pipeline's dedupeHorizon, "1h" by default).
const EnvDedupeHorizon = "DEDUPE_HORIZON"

// DefaultDedupeHorizon is the horizon when EnvDedupeHorizon is unset, the
// stack's default.
const DefaultDedupeHorizon = time.Hour

// MaxDedupeHorizon bounds the horizon as a pipeline's, join's or CEP
// file's dedupeHorizon is bounded: the events stream's longest retention.
const MaxDedupeHorizon = 7 * 24 * time.Hour

// DedupeHorizonFromEnv reads EnvDedupeHorizon with lookup (os.LookupEnv):
// DefaultDedupeHorizon when unset or empty; a value that is not a duration
// from 0s to MaxDedupeHorizon is an error naming the variable.
func DedupeHorizonFromEnv(lookup func(string) (string, bool)) (time.Duration, error) {
	v, _ := lookup(EnvDedupeHorizon)
	if v == "" {
		return DefaultDedupeHorizon, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > MaxDedupeHorizon {
		return 0, fmt.Errorf("environment variable %s: %s is not a duration from 0s (no suppression of copies) to %s, such as 1h",
			EnvDedupeHorizon, strictjson.QuoteCut(v, 64), "168h")
	}
	return d, nil
}
