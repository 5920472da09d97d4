package aggregate

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchKeyedBuf is a key's buffer as a fold reads and rewrites it: points
// about 100 ms apart with whole values, every other one with a distinct
// value, one in ten with a fraction, and a few emitted windows.
func benchKeyedBuf(points int) *keyedBuf {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := &keyedBuf{Emitted: map[string]emitted{}}
	ts := int64(1_764_000_000_000)
	for i := range points {
		ts += int64(50 + rng.IntN(100))
		pt := point{T: ts, V: float64(rng.IntN(3000))}
		if i%10 == 0 {
			pt.V += 0.25
		}
		if i%2 == 0 {
			pt.D = distinctHash(fmt.Append(nil, "user-", rng.IntN(1000)))
		}
		buf.Points = append(buf.Points, pt)
	}
	for i := range 4 {
		start := ts - int64(i+1)*60_000
		buf.Emitted[fmt.Sprint("w", i)] = emitted{Start: start, End: start + 60_000, Rev: i + 1, Blob: make([]byte, 200)}
	}
	return buf
}

// BenchmarkKeyedCodec times what each fold of a keyed window state does to
// the item's blob: decode it, then encode it again.
func BenchmarkKeyedCodec(b *testing.B) {
	for _, n := range []int{100, 20_000} {
		buf := benchKeyedBuf(n)
		blob := encodeKeyed(nil, buf)
		b.Run(fmt.Sprintf("decode/%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(blob)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeKeyed(blob); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("encode/%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(blob)))
			b.ReportAllocs()
			dst := make([]byte, 0, len(blob))
			for b.Loop() {
				dst = encodeKeyed(dst[:0], buf)
			}
		})
	}
}
