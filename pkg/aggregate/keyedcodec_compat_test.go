package aggregate

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/tributary-dev/tributary/pkg/window"
)

// storedKeyedStateV2 is a keyed state as version 2 of the encoding wrote it
// (no thresholds, no Frozen time): items already in DynamoDB hold these
// bytes, so they must still decode.
const storedKeyedStateV2 = "02070900008aa0abfef9620a000001000000000000044006bb82030dbc2bf403808080808080802000020100000000000040c3006201000000000000008000c697010159f3f8c21f6ea501066ca202c88e5402016180a0abfef962e0d403c801030102030162010c0100"

// storedKeyedStateV3 is the same state as version 3 wrote it, two of its
// points late (with thresholds) and a Frozen time, its emitted windows
// under ids of its own ("a", "b": they decode under their bounds' ids).
const storedKeyedStateV3 = "03070900008aa0abfef96216e807000001000000000000044006bb82030dbc2bf403808080808080804000020300000000000040c3fa01006201000000000000008000c697010159f3f8c21f6ea501066ca202c88e5402016180a0abfef962e0d403c801030102030162010c0100c0d8adfef962"

func storedKeyedBuf() *keyedBuf {
	return &keyedBuf{
		Points: []point{
			{T: -5, V: 0, Th: noThreshold}, {T: 1_700_000_000_000, V: -3, Th: 1_700_000_001_000}, {T: 1_700_000_000_000, V: 2.5, D: distinctHash([]byte("u1")), Th: noThreshold},
			{T: 1_700_000_000_250, V: 1 << 52, Th: noThreshold}, {T: 1_700_000_000_251, V: -(1 << 53), Th: 1_700_000_000_501}, {T: 1_700_000_000_300, V: math.Copysign(0, -1), Th: noThreshold},
			{T: 1_700_000_009_999, V: 1e-300, D: distinctHash([]byte("u2")), Th: noThreshold},
		},
		Emitted: map[string]emitted{
			window.Of(-1, 5).ID():                                {Start: -1, End: 5, Rev: 1},
			window.Of(1_700_000_000_000, 1_700_000_030_000).ID(): {Start: 1_700_000_000_000, End: 1_700_000_030_000, Rev: 200, Blob: []byte{1, 2, 3}},
		},
		Frozen: 1_700_000_020_000,
	}
}

// storedKeyedState is the same state as version 5 writes it: the encoding
// must not change while the version stays 5.
const storedKeyedState = "0501070900008aa0abfef96216e807000001000000000000044006bb82030dbc2bf403808080808080804000020300000000000040c3fa01006201000000000000008000c697010159f3f8c21f6ea501066ca202c88e5402010c010080a0abfef962e0d403c80103010203c0d8adfef962"

func TestStoredKeyedStateStillDecodes(t *testing.T) {
	want := storedKeyedBuf()
	if got := hex.EncodeToString(encodeKeyed(nil, want)); got != storedKeyedState {
		t.Fatalf("encoding changed:\n got %s\nwant %s", got, storedKeyedState)
	}
	// Version 2 held no thresholds: its points decode as on time, and its
	// emitted windows as frozen (Frozen at the latest end among them).
	v2 := storedKeyedBuf()
	for i := range v2.Points {
		v2.Points[i].Th = noThreshold
	}
	v2.Frozen = 1_700_000_030_000
	for _, tt := range []struct {
		name, blob string
		want       *keyedBuf
	}{{"version 2", storedKeyedStateV2, v2}, {"version 3", storedKeyedStateV3, want}, {"version 5", storedKeyedState, want}} {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := hex.DecodeString(tt.blob)
			got, err := decodeKeyed(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Points) != len(tt.want.Points) {
				t.Fatalf("stored state decodes to %d points, want %d", len(got.Points), len(tt.want.Points))
			}
			for i, w := range tt.want.Points {
				if g := got.Points[i]; g.T != w.T || g.Th != w.Th || math.Float64bits(g.V) != math.Float64bits(w.V) || string(g.D) != string(w.D) {
					t.Errorf("point %d: got %+v, want %+v", i, g, w)
				}
			}
			if fmt.Sprint(got.Emitted) != fmt.Sprint(tt.want.Emitted) || got.Frozen != tt.want.Frozen {
				t.Errorf("emitted %v frozen %d, want %v frozen %d", got.Emitted, got.Frozen, tt.want.Emitted, tt.want.Frozen)
			}
			for _, bad := range [][]byte{b[:len(b)-1], append(b[:len(b):len(b)], 0), {b[0], 0xff}} {
				if _, err := decodeKeyed(bad); !errors.Is(err, errKeyedEncoding) {
					t.Errorf("decodeKeyed(%x): %v, want errKeyedEncoding", bad, err)
				}
			}
		})
	}
}

// TestKeyedStateRefusesForgedLengths: a blob whose lengths claim more than
// it holds is refused as malformed without allocating for the claim (the
// item is read back from a table others can write).
func TestKeyedStateRefusesForgedLengths(t *testing.T) {
	uv := func(x uint64) []byte { return binary.AppendUvarint(nil, x) }
	point := []byte{keyedVersion, keyedHasDistinct, 1, 0, 0} // one point at time 0, value 0, then its distinct value
	for _, tt := range []struct {
		name string
		blob []byte
	}{
		{"distinct value of 1 TiB", append(append(point, uv(1<<40)...), 1, 2, 3)},
		{"distinct value past int", append(point, uv(math.MaxUint64)...)},
		{"emitted blob of 4 EiB", append(append(point, 0, 1, 0, 0, 1), uv(1<<62)...)},
		{"version 3: emitted blob of 4 EiB", append([]byte{keyedVersion3, 1, 0, 0, 0, 1, 1, 'w', 0, 0, 1}, uv(1<<62)...)},
		{"float of 3 bytes", []byte{keyedVersion, 0, 1, 0, valueFloat, 0, 0, 0}},
		{"point count past the blob", append([]byte{keyedVersion, 0}, uv(1<<40)...)},
		{"version 3: distinct value of 1 TiB", append(append([]byte{keyedVersion3, 1, 0, 0}, uv(1<<40)...), 1, 2, 3)},
		{"version 3: point count past the blob", append([]byte{keyedVersion3}, uv(1<<40)...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := decodeKeyed(tt.blob)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, errKeyedEncoding) {
				t.Fatalf("decodeKeyed(%x): %v, want errKeyedEncoding", tt.blob, err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("decoding a %d-byte blob allocated %d bytes", len(tt.blob), n)
			}
		})
	}
}
