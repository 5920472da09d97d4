package agg

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Aggregate is a set of aggregates, one bit each.
type Aggregate uint16

// The aggregates a Spec can turn on.
const (
	Count Aggregate = 1 << iota
	Sum
	Min
	Max
	Mean
	Distinct
	Quantiles

	all = Count | Sum | Min | Max | Mean | Distinct | Quantiles
)

var aggregateNames = [...]string{"count", "sum", "min", "max", "mean", "distinct", "quantiles"}

// Names lists the aggregate names ParseAggregate accepts, in bit order.
func Names() []string { return aggregateNames[:] }

// ParseAggregate parses one aggregate name: count, sum, min, max, mean,
// distinct or quantiles.
func ParseAggregate(name string) (Aggregate, error) {
	for i, n := range aggregateNames {
		if n == name {
			return 1 << i, nil
		}
	}
	return 0, fmt.Errorf("%q is not an aggregate: want one of %s", name, strings.Join(aggregateNames[:], ", "))
}

// Has reports whether a includes every aggregate of b.
func (a Aggregate) Has(b Aggregate) bool { return a&b == b }

// NeedsValue reports whether a includes an aggregate of a record's numeric
// value (sum, min, max, mean, quantiles).
func (a Aggregate) NeedsValue() bool { return a&(Sum|Min|Max|Mean|Quantiles) != 0 }

// ValueAggregates lists the names of a's aggregates that need a value.
func (a Aggregate) ValueAggregates() []string {
	return (a & (Sum | Min | Max | Mean | Quantiles)).Names()
}

// Names lists a's aggregate names in bit order.
func (a Aggregate) Names() []string {
	var out []string
	for i, n := range aggregateNames {
		if a&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// String joins the names with "+", for example "count+sum".
func (a Aggregate) String() string {
	if a == 0 {
		return "none"
	}
	s := strings.Join(a.Names(), "+")
	if extra := a &^ all; extra != 0 {
		s += fmt.Sprintf("+0x%x", uint16(extra))
	}
	return s
}

// What a State stores for a set of aggregates: the sum for sum and mean,
// the extremes for min, max and quantiles (quantile estimates are clamped to
// them).
func (a Aggregate) keepsSum() bool      { return a&(Sum|Mean) != 0 }
func (a Aggregate) keepsExtremes() bool { return a&(Min|Max|Quantiles) != 0 }

// RelativeAccuracy is the quantile sketch's guarantee: a reported quantile
// is within 1% of a value at that rank.
const RelativeAccuracy = 0.01

// DefaultQuantiles are reported when a Spec turns quantiles on and lists none.
var DefaultQuantiles = []float64{0.5, 0.9, 0.99}

// DefaultDistinctPrecision is the HyperLogLog precision when a Spec sets
// none: 2^12 registers, a standard error of about 1.6% (1.04/√2^12), at most
// 4 KiB encoded. Precision 14 halves the error for four times the size (16
// KiB dense) and about five times the cost per distinct value while a
// sketch is sparse; Lambda's tumbling-window state, 1 MB for a shard's keys
// and windows, favours the smaller default.
const DefaultDistinctPrecision = 12

// Spec says which aggregates a pipeline computes. Build one with NewSpec, or
// fill it and call Validate, which fills the defaults. States made from one
// Spec share it; do not change it afterwards.
type Spec struct {
	Aggregates Aggregate
	// Quantiles to report, each in (0, 1); DefaultQuantiles when empty.
	Quantiles []float64
	// DistinctPrecision is the HyperLogLog precision, 4 to 18 (2^p one-byte
	// registers when dense); DefaultDistinctPrecision when 0.
	DistinctPrecision uint8
}

// NewSpec returns the validated Spec for aggregate names. An empty list means
// count only.
func NewSpec(names []string, quantiles []float64) (*Spec, error) {
	s := &Spec{Quantiles: quantiles}
	for i, n := range names {
		a, err := ParseAggregate(n)
		if err != nil {
			return nil, fmt.Errorf("aggregates[%d]: %w", i, err)
		}
		if s.Aggregates&a != 0 {
			return nil, fmt.Errorf("aggregates[%d]: %q is listed twice", i, n)
		}
		s.Aggregates |= a
	}
	if s.Aggregates == 0 {
		s.Aggregates = Count
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// Validate checks s and fills its defaults.
func (s *Spec) Validate() error {
	if s.Aggregates == 0 {
		return fmt.Errorf("aggregates: none turned on")
	}
	if extra := s.Aggregates &^ all; extra != 0 {
		return fmt.Errorf("aggregates: unknown bits 0x%x", uint16(extra))
	}
	if len(s.Quantiles) > 0 && !s.Aggregates.Has(Quantiles) {
		return fmt.Errorf("quantiles: listed but the quantiles aggregate is off")
	}
	if s.Aggregates.Has(Quantiles) && len(s.Quantiles) == 0 {
		s.Quantiles = DefaultQuantiles
	}
	seen := map[string]bool{}
	for i, q := range s.Quantiles {
		if !(q > 0 && q < 1) {
			return fmt.Errorf("quantiles[%d]: %v is not between 0 and 1 (exclusive); use min and max for the ends", i, q)
		}
		name := QuantileName(q)
		if name == "p0" || name == "p100" {
			// Named to 1e-9 of a percent: q would be labelled as min or max
			// while the sketch answers something else.
			return fmt.Errorf("quantiles[%d]: %v is named %s, which reads as min or max; give a quantile at least 1e-11 from 0 and 1, or use min and max", i, q, name)
		}
		if seen[name] {
			return fmt.Errorf("quantiles[%d]: %v is listed twice", i, q)
		}
		seen[name] = true
	}
	if s.DistinctPrecision == 0 {
		s.DistinctPrecision = DefaultDistinctPrecision
	}
	if s.DistinctPrecision < 4 || s.DistinctPrecision > 18 {
		return fmt.Errorf("distinctPrecision: %d is not between 4 and 18", s.DistinctPrecision)
	}
	return nil
}

// QuantileName is the Result key of quantile q: "p50" for 0.5, "p99.9" for
// 0.999.
func QuantileName(q float64) string {
	// Round away the binary noise of q*100 (0.29*100 = 28.999999999999996).
	return "p" + strconv.FormatFloat(math.Round(q*100*1e9)/1e9, 'f', -1, 64)
}

// Encoded-size bounds, for checking that every item holding a state fits
// DynamoDB's 400 KB (see Spec.MaxEncodedBytes).
const (
	// fixedEncodedBytes bounds the header, count, sum, min and max.
	fixedEncodedBytes = 64
	// quantilesEncodedBytes bounds the quantile sketch: values are at most
	// 2^53 in magnitude (pipeline.MaxValue) and the sketch's bins at 1%
	// relative accuracy span down to the smallest float64 on both signs;
	// every bin filled encodes in about 86 KB (TestMaxEncodedBytes).
	quantilesEncodedBytes = 96 << 10
	// distinctOverheadBytes is a dense HyperLogLog sketch's size beyond its
	// 2^p one-byte registers.
	distinctOverheadBytes = 256
)

// MaxEncodedBytes bounds the encoding of any State of s, whatever values it
// is given (values within ±2^53).
func (s *Spec) MaxEncodedBytes() int {
	n := fixedEncodedBytes
	if s.Aggregates.Has(Distinct) {
		n += 1<<s.DistinctPrecision + distinctOverheadBytes
	}
	if s.Aggregates.Has(Quantiles) {
		n += quantilesEncodedBytes
	}
	return n
}
