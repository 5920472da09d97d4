package enrich_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/enrich"
)

// DEDUPE_HORIZON: unset is the stack's default; a value outside 0–168h,
// negative or not a duration fails the cold start naming the variable and
// the range, as a pipeline's, join's or CEP file's dedupeHorizon does.
func TestDedupeHorizonFromEnv(t *testing.T) {
	for _, c := range []struct {
		name, value string
		set         bool
		want        time.Duration
		wantErr     bool
	}{
		{"unset", "", false, time.Hour, false},
		{"empty", "", true, time.Hour, false},
		{"the stack's", "1h", true, time.Hour, false},
		{"off", "0s", true, 0, false},
		{"a week", "168h", true, 168 * time.Hour, false},
		{"a year", "8760h", true, 0, true},
		{"negative", "-1h", true, 0, true},
		{"not a duration", "1 hour", true, 0, true},
		{"a number without unit", "3600", true, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) {
				if k == enrich.EnvDedupeHorizon && c.set {
					return c.value, true
				}
				return "", false
			}
			got, err := enrich.DedupeHorizonFromEnv(lookup)
			switch {
			case c.wantErr && (err == nil || !strings.Contains(err.Error(), "DEDUPE_HORIZON") || !strings.Contains(err.Error(), "168h")):
				t.Errorf("%q: %v, %v; want an error naming DEDUPE_HORIZON and its range", c.value, got, err)
			case !c.wantErr && (err != nil || got != c.want):
				t.Errorf("%q: %v, %v; want %v", c.value, got, err, c.want)
			}
		})
	}
}
