package aggregate

import (
	"math"
	"testing"
)

// FuzzDecodeKeyed: a keyed state blob, whatever it holds, decodes or is
// refused; it never panics nor runs out of memory, and what decodes
// encodes to a blob that decodes to the same points.
func FuzzDecodeKeyed(f *testing.F) {
	f.Add(encodeKeyed(nil, benchKeyedBuf(3)))
	f.Add([]byte(`{"points":[{"t":5,"v":1.5,"s":"9"}],"emitted":{}}`))
	f.Add([]byte{keyedVersion, keyedHasDistinct, 1, 0, valueFloat, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 6, 1, 2, 3, 4, 5, 6, 0, 0})
	f.Add([]byte{keyedVersion3, 1, 0, valueFloat, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 6, 1, 2, 3, 4, 5, 6, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		buf, err := decodeKeyed(b)
		if err != nil {
			return
		}
		again, err := decodeKeyed(encodeKeyed(nil, buf))
		if err != nil {
			t.Fatalf("re-encoding a decoded state: %v", err)
		}
		if len(again.Points) != len(buf.Points) || len(again.Emitted) != len(buf.Emitted) || again.Frozen != buf.Frozen {
			t.Fatalf("re-encoded: %d points, %d emitted; want %d, %d", len(again.Points), len(again.Emitted), len(buf.Points), len(buf.Emitted))
		}
		for i, p := range buf.Points {
			q := again.Points[i]
			if q.T != p.T || q.Th != p.Th || string(q.D) != string(p.D) || (q.V != p.V && !(math.IsNaN(q.V) && math.IsNaN(p.V))) {
				t.Fatalf("point %d: %+v re-encoded as %+v", i, p, q)
			}
		}
	})
}
