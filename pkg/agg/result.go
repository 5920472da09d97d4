package agg

import (
	"encoding/json"
	"math"
)

// Result is a state's values, as a pipeline outputs them. Only the
// aggregates in Aggregates are set (the others are zero) and appear in JSON;
// of an empty
// state (count 0) only count, sum (0) and distinct (0) appear: min, max, mean
// and quantiles of nothing are absent, not zero.
type Result struct {
	Aggregates Aggregate          `json:"-"`
	Count      uint64             `json:"count"`
	Sum        float64            `json:"sum"`
	Min        float64            `json:"min"`
	Max        float64            `json:"max"`
	Mean       float64            `json:"mean"`
	Distinct   uint64             `json:"distinct"`
	Quantiles  map[string]float64 `json:"quantiles,omitempty"` // "p50", "p99.9" (QuantileName)
}

// Result computes st's values. Quantile estimates are clamped to the exact
// min and max.
func (st *State) Result() Result {
	a := st.spec.Aggregates
	r := Result{Aggregates: a}
	if a&Count != 0 {
		r.Count = st.count
	}
	if a&Sum != 0 {
		r.Sum = st.sum
	}
	if st.count > 0 {
		if a&Min != 0 {
			r.Min = st.min
		}
		if a&Max != 0 {
			r.Max = st.max
		}
		if a&Mean != 0 {
			r.Mean = st.sum / float64(st.count)
		}
	}
	if a&Distinct != 0 && st.distinct != nil {
		r.Distinct = st.distinct.Estimate()
	}
	if a&Quantiles != 0 && st.quant != nil && !st.quant.isEmpty() {
		r.Quantiles = make(map[string]float64, len(st.spec.Quantiles))
		for _, q := range st.spec.Quantiles {
			v, err := st.quant.valueAtQuantile(q)
			if err != nil {
				continue // only for an empty sketch or q outside [0, 1], ruled out above
			}
			r.Quantiles[QuantileName(q)] = math.Min(math.Max(v, st.min), st.max)
		}
	}
	return r
}

// resultJSON is Result with absent values.
type resultJSON struct {
	Count     *uint64            `json:"count,omitempty"`
	Sum       *float64           `json:"sum,omitempty"`
	Min       *float64           `json:"min,omitempty"`
	Max       *float64           `json:"max,omitempty"`
	Mean      *float64           `json:"mean,omitempty"`
	Distinct  *uint64            `json:"distinct,omitempty"`
	Quantiles map[string]float64 `json:"quantiles,omitempty"`
}

// MarshalJSON writes the aggregates in r.Aggregates, for example
// {"count":3,"sum":42,"quantiles":{"p50":14}}.
func (r Result) MarshalJSON() ([]byte, error) {
	var j resultJSON
	a := r.Aggregates
	if a&Count != 0 {
		j.Count = &r.Count
	}
	if a&Sum != 0 {
		j.Sum = &r.Sum
	}
	if a&Distinct != 0 {
		j.Distinct = &r.Distinct
	}
	if r.Count > 0 {
		if a&Min != 0 {
			j.Min = &r.Min
		}
		if a&Max != 0 {
			j.Max = &r.Max
		}
		if a&Mean != 0 {
			j.Mean = &r.Mean
		}
		if a&Quantiles != 0 {
			j.Quantiles = r.Quantiles
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads MarshalJSON's form; Aggregates becomes the set of
// fields present (so min, max, mean and quantiles of an empty result are
// not in it).
func (r *Result) UnmarshalJSON(b []byte) error {
	var j resultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Result{Quantiles: j.Quantiles}
	set := func(bit Aggregate, present bool) {
		if present {
			r.Aggregates |= bit
		}
	}
	if set(Count, j.Count != nil); j.Count != nil {
		r.Count = *j.Count
	}
	if set(Sum, j.Sum != nil); j.Sum != nil {
		r.Sum = *j.Sum
	}
	if set(Min, j.Min != nil); j.Min != nil {
		r.Min = *j.Min
	}
	if set(Max, j.Max != nil); j.Max != nil {
		r.Max = *j.Max
	}
	if set(Mean, j.Mean != nil); j.Mean != nil {
		r.Mean = *j.Mean
	}
	if set(Distinct, j.Distinct != nil); j.Distinct != nil {
		r.Distinct = *j.Distinct
	}
	set(Quantiles, j.Quantiles != nil)
	return nil
}
