package join

import "testing"

// FuzzDecodeState: a join state blob, whatever it holds, decodes or is
// refused; it never panics, and what decodes encodes back the same.
func FuzzDecodeState(f *testing.F) {
	f.Add(encodeState(nil, &keyState{next: 2, recs: []rec{{n: 1, id: "s", t: 5, data: []byte(`{}`)}}, out: []outRef{{kind: outLeftOnly, l: 1}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeState(b)
		if err != nil {
			return
		}
		if _, err := decodeState(encodeState(nil, st)); err != nil {
			t.Fatalf("re-encoding a decoded state: %v", err)
		}
	})
}
