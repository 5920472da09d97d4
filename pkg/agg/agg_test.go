package agg

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
)

func mustSpec(t testing.TB, names ...string) *Spec {
	t.Helper()
	s, err := NewSpec(names, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var allNames = []string{"count", "sum", "min", "max", "mean", "distinct", "quantiles"}

func TestNewSpec(t *testing.T) {
	tests := []struct {
		names     []string
		quantiles []float64
		want      string // error; "" for none
	}{
		{[]string{"count", "median"}, nil, `aggregates[1]: "median" is not an aggregate: want one of count, sum, min, max, mean, distinct, quantiles`},
		{[]string{"sum", "sum"}, nil, `aggregates[1]: "sum" is listed twice`},
		{[]string{"quantiles"}, []float64{0.5, 1}, `quantiles[1]: 1 is not between 0 and 1 (exclusive); use min and max for the ends`},
		{[]string{"quantiles"}, []float64{0}, `quantiles[0]: 0 is not between 0 and 1 (exclusive); use min and max for the ends`},
		{[]string{"quantiles"}, []float64{math.NaN()}, `quantiles[0]: NaN is not between 0 and 1 (exclusive); use min and max for the ends`},
		{[]string{"quantiles"}, []float64{0.9, 0.9}, `quantiles[1]: 0.9 is listed twice`},
		{[]string{"sum"}, []float64{0.9}, `quantiles: listed but the quantiles aggregate is off`},
		{allNames, nil, ""},
	}
	for _, tt := range tests {
		_, err := NewSpec(tt.names, tt.quantiles)
		if (err == nil) != (tt.want == "") || (err != nil && err.Error() != tt.want) {
			t.Errorf("NewSpec(%v, %v) = %v, want %q", tt.names, tt.quantiles, err, tt.want)
		}
	}
	s := mustSpec(t)
	if s.Aggregates != Count {
		t.Errorf("no aggregates listed = %s, want count", s.Aggregates)
	}
	s = mustSpec(t, "quantiles", "distinct")
	if !slices.Equal(s.Quantiles, DefaultQuantiles) || s.DistinctPrecision != DefaultDistinctPrecision {
		t.Errorf("defaults not filled: %+v", s)
	}
	bad := &Spec{Aggregates: Distinct, DistinctPrecision: 19}
	if err := bad.Validate(); err == nil || err.Error() != "distinctPrecision: 19 is not between 4 and 18" {
		t.Errorf("precision 19: %v", err)
	}
}

func TestQuantileName(t *testing.T) {
	for q, want := range map[float64]string{0.5: "p50", 0.9: "p90", 0.99: "p99", 0.999: "p99.9", 0.29: "p29", 0.001: "p0.1", 0.25: "p25"} {
		if got := QuantileName(q); got != want {
			t.Errorf("QuantileName(%v) = %q, want %q", q, got, want)
		}
	}
}

func TestResult(t *testing.T) {
	s := mustSpec(t, allNames...)
	st := s.New()
	values := []float64{3, -1, 10, 4, 4}
	for i, v := range values {
		st.Add(v, []byte("user-"+strconv.Itoa(i%3)))
	}
	r := st.Result()
	if r.Count != 5 || r.Sum != 20 || r.Min != -1 || r.Max != 10 || r.Mean != 4 || r.Distinct != 3 {
		t.Fatalf("Result = %+v", r)
	}
	if got := r.Quantiles["p50"]; math.Abs(got-4) > 0.04 {
		t.Errorf("p50 = %v, want 4 ±1%%", got)
	}
	// DDSketch answers with the value at rank q·(n−1), rounded down: 3.96 → 4.
	if got := r.Quantiles["p99"]; math.Abs(got-4) > 0.04 {
		t.Errorf("p99 = %v, want 4 ±1%%", got)
	}

	// Estimates are clamped to the exact extremes: one value is reported as
	// itself, not as its bucket's representative.
	one := mustSpec(t, "quantiles").New()
	one.Add(123.456, nil)
	for name, v := range one.Result().Quantiles {
		if v != 123.456 {
			t.Errorf("%s of a single 123.456 = %v", name, v)
		}
	}
}

// TestQuantileAndDistinctAccuracy checks the sketches' guarantees on 10,000
// values: quantiles within 1% of the true value at that rank, distinct within
// 3 standard errors (3 × 1.04/√2^12 ≈ 4.9% at the default precision, 2.4% at
// 14).
func TestQuantileAndDistinctAccuracy(t *testing.T) {
	for _, p := range []struct {
		precision uint8
		maxError  float64
	}{{DefaultDistinctPrecision, 0.049}, {14, 0.024}} {
		s := mustSpec(t, "distinct", "quantiles")
		s.Quantiles = []float64{0.1, 0.5, 0.9, 0.99, 0.999}
		s.DistinctPrecision = p.precision
		st := s.New()
		r := rand.New(rand.NewPCG(1, 2))
		values := make([]float64, 10_000)
		for i := range values {
			values[i] = math.Exp(r.NormFloat64()*2) * 100 // long-tailed, like latencies
			st.Add(values[i], []byte("user-"+strconv.Itoa(i)))
		}
		slices.Sort(values)
		res := st.Result()
		for _, q := range s.Quantiles {
			exact := values[int(q*float64(len(values)-1))]
			got := res.Quantiles[QuantileName(q)]
			if math.Abs(got-exact) > RelativeAccuracy*exact {
				t.Errorf("%s = %v, exact %v: off by more than 1%%", QuantileName(q), got, exact)
			}
		}
		if d := math.Abs(float64(res.Distinct)-10_000) / 10_000; d > p.maxError {
			t.Errorf("precision %d: distinct = %d for 10000 values (%.1f%% off)", p.precision, res.Distinct, d*100)
		}
	}
}

// randomStates splits random values among n states and also adds all of
// them to one state.
func randomStates(r *rand.Rand, s *Spec, n, values int) ([]*State, *State) {
	parts := make([]*State, n)
	for i := range parts {
		parts[i] = s.New()
	}
	whole := s.New()
	for range values {
		v := float64(r.IntN(2000) - 1000) // integers: sums are exact in any order
		d := []byte("k" + strconv.Itoa(r.IntN(values/2+1)))
		parts[r.IntN(n)].Add(v, d)
		whole.Add(v, d)
	}
	return parts, whole
}

func merged(t *testing.T, states ...*State) *State {
	t.Helper()
	out := states[0].Spec().New()
	for _, st := range states {
		if err := out.Merge(st); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestMergeIsAssociativeAndCommutative(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	specs := []*Spec{mustSpec(t, "count", "sum", "min", "max", "mean"), mustSpec(t, allNames...)}
	for round := range 60 {
		s := specs[round%len(specs)]
		// From a handful of values (sparse sketches) to many (dense).
		n := []int{5, 200, 3000, 40_000}[round%4]
		parts, whole := randomStates(r, s, 3, n)
		a, b, c := parts[0], parts[1], parts[2]
		ab := merged(t, a, b)
		abc1 := merged(t, ab, c) // (a+b)+c
		bc := merged(t, b, c)
		abc2 := merged(t, a, bc)              // a+(b+c)
		abc3 := merged(t, c, b, a)            // c+b+a
		abc4 := merged(t, merged(t, c, a), b) // (c+a)+b
		want := whole.Result()
		for i, got := range []*State{abc1, abc2, abc3, abc4} {
			if g := got.Result(); !reflect.DeepEqual(g, want) {
				t.Fatalf("round %d (%d values), grouping %d:\n got %+v\nwant %+v", round, n, i, g, want)
			}
		}
		// Merging an empty state changes nothing, on either side.
		if g := merged(t, s.New(), a, s.New()).Result(); !reflect.DeepEqual(g, a.Result()) {
			t.Fatalf("merging empty states changed %+v into %+v", a.Result(), g)
		}
	}
}

func TestMergeLeavesOtherAlone(t *testing.T) {
	s := mustSpec(t, allNames...)
	a, b := s.New(), s.New()
	a.Add(1, []byte("x"))
	b.Add(2, []byte("y"))
	before := b.Result()
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	a.Add(3, []byte("z"))
	if err := a.Merge(b); err != nil { // merging twice double counts; that is the caller's business
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b.Result(), before) {
		t.Fatalf("Merge changed its argument: %+v, was %+v", b.Result(), before)
	}
}

func TestMergeSpecMismatch(t *testing.T) {
	a, b := mustSpec(t, "count").New(), mustSpec(t, "count", "sum").New()
	if err := a.Merge(b); !errors.Is(err, ErrSpecMismatch) {
		t.Fatalf("Merge(count, count+sum) = %v, want ErrSpecMismatch", err)
	}
}

func TestEncodingRoundTrips(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	specs := []*Spec{
		mustSpec(t, "count"),
		mustSpec(t, "count", "sum", "min", "max"),
		mustSpec(t, "mean"),
		mustSpec(t, "distinct"),
		mustSpec(t, "quantiles"),
		mustSpec(t, allNames...),
	}
	for _, s := range specs {
		for _, n := range []int{0, 1, 100, 30_000} {
			t.Run(fmt.Sprintf("%s/%d", s.Aggregates, n), func(t *testing.T) {
				st := s.New()
				for range n {
					st.Add(r.Float64()*1000-500, []byte(strconv.Itoa(r.IntN(n+1))))
				}
				want := st.Result()
				b, err := st.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				back, err := s.Decode(b)
				if err != nil {
					t.Fatal(err)
				}
				if got := back.Result(); !reflect.DeepEqual(got, want) {
					t.Fatalf("binary round trip:\n got %+v\nwant %+v", got, want)
				}
				text, err := st.MarshalText()
				if err != nil {
					t.Fatal(err)
				}
				fromText, err := s.DecodeString(string(text))
				if err != nil {
					t.Fatal(err)
				}
				if got := fromText.Result(); !reflect.DeepEqual(got, want) {
					t.Fatalf("text round trip:\n got %+v\nwant %+v", got, want)
				}
				// A decoded state keeps aggregating like the original.
				back.Add(7, []byte("new"))
				st.Add(7, []byte("new"))
				if !reflect.DeepEqual(back.Result(), st.Result()) {
					t.Fatalf("decoded state diverged after Add: %+v vs %+v", back.Result(), st.Result())
				}
				// No prefix of an encoding decodes, and none panics.
				step := max(1, len(b)/200)
				for i := 0; i < len(b); i += step {
					if _, err := s.Decode(b[:i]); err == nil {
						t.Fatalf("%d of %d bytes decoded", i, len(b))
					}
				}
				if _, err := s.Decode(append(b, 0)); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("trailing byte: %v, want ErrCorrupt", err)
				}
				// The compact encoding decodes to the same state, and no
				// prefix of it decodes either.
				compact, err := st.AppendCompact(nil)
				if err != nil {
					t.Fatal(err)
				}
				fromCompact, err := s.Decode(compact)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := fromCompact.Result(), st.Result(); !reflect.DeepEqual(got, want) {
					t.Fatalf("compact round trip:\n got %+v\nwant %+v", got, want)
				}
				for i := 0; i < len(compact); i += step {
					if _, err := s.Decode(compact[:i]); err == nil {
						t.Fatalf("%d of %d compact bytes decoded", i, len(compact))
					}
				}
			})
		}
	}
}

// The compact encoding writes integer sums and extremes as varints: a
// partial of a few millisecond values, as a window state carries one per
// key and pane, is half the size. Fractions, −0 and values past 2^53 keep
// their 8 bytes and their exact bits.
func TestCompactEncodingKeepsIntegersShort(t *testing.T) {
	s := mustSpec(t, "count", "sum", "min", "max", "mean", "quantiles")
	cases := []struct {
		name   string
		values []float64
		saved  int // bytes fewer than AppendBinary's, at least (−1: the flags byte more at most)
	}{
		{"milliseconds", []float64{1210, 87, 4031}, 16},
		{"negative integers", []float64{-3, -70000}, 16},
		{"fractions", []float64{0.5, 2.25}, -1},
		{"negative zero", []float64{math.Copysign(0, -1)}, -1},
		{"beyond 2^53", []float64{1 << 60, -(1 << 60)}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := s.New()
			for _, v := range c.values {
				st.Add(v, nil)
			}
			full, _ := st.MarshalBinary()
			compact, err := st.AppendCompact(nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(full)-len(compact) < c.saved {
				t.Errorf("compact %d bytes, full %d: want at least %d fewer", len(compact), len(full), c.saved)
			}
			back, err := s.Decode(compact)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []struct {
				name      string
				got, want float64
			}{{"sum", back.sum, st.sum}, {"min", back.min, st.min}, {"max", back.max, st.max}} {
				if math.Float64bits(f.got) != math.Float64bits(f.want) {
					t.Errorf("%s: decoded %v (bits %#x), want %v (bits %#x)", f.name, f.got, math.Float64bits(f.got), f.want, math.Float64bits(f.want))
				}
			}
		})
	}
	// Flags it never writes are refused.
	small := mustSpec(t, "count", "sum")
	st := small.New()
	st.Add(1, nil)
	b, _ := st.AppendCompact(nil)
	b[3] |= 0x08 // the flags byte: after version, aggregates and count, a byte each
	if _, err := small.Decode(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unknown flag: %v, want ErrCorrupt", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	st := mustSpec(t, "count", "sum").New()
	st.Add(1, nil)
	b, _ := st.MarshalBinary()
	if _, err := mustSpec(t, "count").Decode(b); !errors.Is(err, ErrSpecMismatch) || err.Error() != "agg: states have different aggregates: the state holds count+sum, the spec wants count" {
		t.Fatalf("decode with another spec: %v", err)
	}
	if _, err := mustSpec(t, "count").Decode([]byte{9}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unknown version: %v", err)
	}
	if _, err := mustSpec(t, "count").DecodeString("not base64!"); err == nil {
		t.Fatal("bad base64 decoded")
	}
	if err := new(State).UnmarshalBinary(b); err == nil {
		t.Fatal("a State without a Spec decoded")
	}
	// A corrupt sketch is an error, not a panic.
	d := mustSpec(t, "distinct").New()
	d.Add(0, []byte("x"))
	db, _ := d.MarshalBinary()
	db[len(db)-3] ^= 0xff
	db[4] = 99 // the HyperLogLog precision byte
	if _, err := d.Spec().Decode(db); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt sketch: %v", err)
	}
}

// TestStateSize reports encoded sizes (DynamoDB items are at most 400 KB,
// Lambda's tumbling-window state at most 1 MB for all keys and windows of a
// shard) and holds them to budgets.
func TestStateSize(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	p14 := mustSpec(t, "count", "sum", "min", "max", "distinct")
	p14.DistinctPrecision = 14
	tests := []struct {
		spec   *Spec
		n      int
		budget int
	}{
		{mustSpec(t, "count", "sum", "min", "max"), 10_000, 30},
		{mustSpec(t, "count", "sum", "min", "max", "quantiles"), 10_000, 2_000},
		{mustSpec(t, "count", "sum", "min", "max", "distinct"), 100, 700},
		{mustSpec(t, "count", "sum", "min", "max", "distinct"), 10_000, 4_200},
		{p14, 10_000, 17_000},
		{mustSpec(t, allNames...), 100, 900},
		{mustSpec(t, allNames...), 10_000, 5_000},
	}
	for _, tt := range tests {
		st := tt.spec.New()
		for i := range tt.n {
			st.Add(math.Exp(r.NormFloat64())*200, []byte("user-"+strconv.Itoa(i)))
		}
		b, err := st.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		text, _ := st.MarshalText()
		t.Logf("%-44s p=%d after %5d values: %6d bytes binary, %6d base64", st.Spec().Aggregates, st.Spec().DistinctPrecision, tt.n, len(b), len(text))
		if len(b) > tt.budget {
			t.Errorf("%s after %d values is %d bytes, budget %d", st.Spec().Aggregates, tt.n, len(b), tt.budget)
		}
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	st := mustSpec(t, "count", "sum", "min", "max", "mean").New()
	v := 0.0
	if n := testing.AllocsPerRun(1000, func() { v++; st.Add(v, nil) }); n != 0 {
		t.Fatalf("Add allocates %v times per call", n)
	}
}

func TestResultJSON(t *testing.T) {
	s := mustSpec(t, "count", "sum", "min", "mean", "distinct", "quantiles")
	s.Quantiles = []float64{0.5}
	st := s.New()
	empty, err := json.Marshal(st.Result())
	if err != nil {
		t.Fatal(err)
	}
	if string(empty) != `{"count":0,"sum":0,"distinct":0}` {
		t.Errorf("empty result = %s", empty)
	}
	st.Add(2, []byte("a"))
	st.Add(4, []byte("a"))
	got, err := json.Marshal(st.Result())
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"count":2,"sum":6,"min":2,"mean":3,"distinct":1,"quantiles":{"p50":2}}`
	if string(got) != want {
		t.Errorf("result = %s, want %s", got, want)
	}
	var back Result
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if back.Aggregates != s.Aggregates || !reflect.DeepEqual(back, st.Result()) {
		t.Errorf("JSON round trip: %+v, want %+v", back, st.Result())
	}
}
