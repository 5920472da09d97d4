package agg

import (
	"strconv"
	"testing"
)

func BenchmarkAddCountSumMinMax(b *testing.B) {
	st := mustSpec(b, "count", "sum", "min", "max", "mean").New()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		st.Add(float64(i&1023), nil)
	}
}

func BenchmarkAddQuantiles(b *testing.B) {
	st := mustSpec(b, "count", "quantiles").New()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		st.Add(float64(i&1023)+0.5, nil)
	}
}

func BenchmarkAddDistinct(b *testing.B) {
	st := mustSpec(b, "count", "distinct").New()
	keys := make([][]byte, 4096)
	for i := range keys {
		keys[i] = []byte("user-" + strconv.Itoa(i))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		st.Add(0, keys[i&4095])
	}
}

func BenchmarkAddAll(b *testing.B) {
	st := mustSpec(b, allNames...).New()
	keys := make([][]byte, 4096)
	for i := range keys {
		keys[i] = []byte("user-" + strconv.Itoa(i))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		st.Add(float64(i&1023)+0.5, keys[i&4095])
	}
}

func filled(b *testing.B, n int, names ...string) *State {
	st := mustSpec(b, names...).New()
	for i := range n {
		st.Add(float64(i%1000)+0.5, []byte("user-"+strconv.Itoa(i)))
	}
	return st
}

func BenchmarkMergeCountSumMinMax(b *testing.B) {
	a, o := filled(b, 100, "count", "sum", "min", "max"), filled(b, 100, "count", "sum", "min", "max")
	b.ReportAllocs()
	for b.Loop() {
		_ = a.Merge(o)
	}
}

func BenchmarkMergeAll10k(b *testing.B) {
	a, o := filled(b, 10_000, allNames...), filled(b, 10_000, allNames...)
	b.ReportAllocs()
	for b.Loop() {
		_ = a.Merge(o)
	}
}

func BenchmarkEncodeDecodeCountSumMinMax(b *testing.B) {
	st := filled(b, 100, "count", "sum", "min", "max")
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = st.AppendBinary(buf[:0])
		if _, err := st.Spec().Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeDecodeAll10k(b *testing.B) {
	st := filled(b, 10_000, allNames...)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = st.AppendBinary(buf[:0])
		if _, err := st.Spec().Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddDistinct10kWindows adds distinct values to windows of 10,000
// distinct values each (a fresh state every 10,000 adds), so the sketch goes
// through its sparse phase and into its dense one, as a busy window's does.
func BenchmarkAddDistinct10kWindows(b *testing.B) {
	for _, p := range []uint8{12, 14} {
		b.Run("p"+strconv.Itoa(int(p)), func(b *testing.B) {
			spec := mustSpec(b, "count", "distinct")
			spec.DistinctPrecision = p
			keys := make([][]byte, 10_000)
			for i := range keys {
				keys[i] = []byte("user-" + strconv.Itoa(i))
			}
			st := spec.New()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%10_000 == 0 {
					st = spec.New()
				}
				st.Add(0, keys[i%10_000])
			}
		})
	}
}
