package agg

import (
	"fmt"
	"math"
	"testing"
)

// TestMaxEncodedBytes fills sketches as far as values can make them grow —
// every quantile bin from the smallest float64 to 2^53 on both signs, and
// far more distinct values than registers — and checks the bound holds.
func TestMaxEncodedBytes(t *testing.T) {
	for _, p := range []uint8{4, 12, 16, 18} {
		s, err := NewSpec([]string{"count", "sum", "min", "max", "mean", "distinct", "quantiles"}, []float64{0.5, 0.99})
		if err != nil {
			t.Fatal(err)
		}
		s.DistinctPrecision = p
		st := s.New()
		for v := math.SmallestNonzeroFloat64; v < 1<<53; v = max(v*(1+RelativeAccuracy), math.Nextafter(v, math.Inf(1))) {
			st.Add(v, nil)
			st.Add(-v, nil)
		}
		st.Add(1<<53, nil)
		st.Add(-(1 << 53), nil)
		for i := 0; i < 4<<p; i++ {
			st.Add(0, []byte(fmt.Sprint("user-", i)))
		}
		b, err := st.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > s.MaxEncodedBytes() {
			t.Errorf("precision %d: encoded %d bytes, bound %d", p, len(b), s.MaxEncodedBytes())
		}
		t.Logf("precision %d: %d bytes of at most %d", p, len(b), s.MaxEncodedBytes())
	}
}
