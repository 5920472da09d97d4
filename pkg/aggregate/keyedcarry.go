package aggregate

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// On the per-interval path a session or sliding window's records ride in
// Lambda's tumbling window state with the partial aggregates, and are
// folded into their keyed state once per key at the interval's flush: one
// write per key and kind per interval instead of one per invocation that
// meets the key. Each point keeps the close time it arrived at, so the fold
// at the flush judges it as a fold at its arrival would have: the shard's
// watermark moves only at the flush, and the ticker's idle advance is held
// at the earliest carried point (stateHold). Past carryBudget the points
// are folded at once, as before, so the state stays far inside Lambda's
// 1 MB.

// stateCarried prefixes a carried entry's key: k|<kind>|<key> → base64 of
// the points in arrival order (encodeCarried).
const stateCarried = "k|"

// carryBudget bounds the carried points' share of the window state (the
// encoded entries, keys included); the partials and the dedupe claims
// (pendingStateBudget) share the rest of Lambda's 1 MB.
const carryBudget = 256 << 10

// carriedPoint is a point waiting for the flush. Counted marks a record
// already counted in LateDropped, or known as redelivered, in the
// invocation that read it: the fold does not count it again.
type carriedPoint struct {
	point
	Counted bool
}

// carried is an interval's carried points by key and kind.
type carried map[keyedKey][]carriedPoint

// decodeCarried reads the carried points of an interval's state.
func decodeCarried(st map[string]string) (carried, int, error) {
	out := carried{}
	size := 0
	for k, v := range st {
		if !strings.HasPrefix(k, stateCarried) {
			continue
		}
		kind, key, ok := strings.Cut(k[len(stateCarried):], "|")
		if !ok {
			return nil, 0, fmt.Errorf("aggregate: window state entry %q is malformed", k)
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, 0, fmt.Errorf("aggregate: window state entry %q: %w", k, err)
		}
		pts, err := decodeCarriedPoints(b)
		if err != nil {
			return nil, 0, fmt.Errorf("aggregate: window state entry %q: %w", k, err)
		}
		out[keyedKey{key: key, kind: kind}] = pts
		size += len(k) + len(v)
	}
	return out, size, nil
}

// encode adds the carried points to an interval's state and returns the
// bytes they take there.
func (c carried) encode(st map[string]string) int {
	size := 0
	var b []byte
	for k, pts := range c {
		b = b[:0]
		for i := range pts {
			b = appendCarriedPoint(b, &pts[i])
		}
		name := stateCarried + k.kind + "|" + k.key
		v := base64.StdEncoding.EncodeToString(b)
		st[name] = v
		size += len(name) + len(v)
	}
	return size
}

// earliest is the earliest event time carried (zero if none).
func (c carried) earliest() time.Time {
	var first int64
	found := false
	for _, pts := range c {
		for i := range pts {
			if !found || pts[i].T < first {
				first, found = pts[i].T, true
			}
		}
	}
	if !found {
		return time.Time{}
	}
	return time.UnixMilli(first).UTC()
}

// perKey is the most points any keyed kind carries for each grouping key.
func (c carried) perKey() map[string]int {
	out := map[string]int{}
	for k, pts := range c {
		out[k.key] = max(out[k.key], len(pts))
	}
	return out
}

// appendCarriedPoint encodes one point: its sequence number, event time,
// value, close time, distinct hash and whether it was counted.
func appendCarriedPoint(b []byte, p *carriedPoint) []byte {
	b = binary.AppendUvarint(b, uint64(len(p.Seq)))
	b = append(b, p.Seq...)
	b = binary.AppendVarint(b, p.T)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.V))
	b = binary.AppendVarint(b, p.Th)
	b = binary.AppendUvarint(b, uint64(len(p.D)))
	b = append(b, p.D...)
	flag := byte(0)
	if p.Counted {
		flag = 1
	}
	return append(b, flag)
}

var errCarriedTruncated = errors.New("carried points truncated")

func decodeCarriedPoints(b []byte) ([]carriedPoint, error) {
	var out []carriedPoint
	for len(b) > 0 {
		var p carriedPoint
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, errCarriedTruncated
		}
		p.Seq, b = string(b[k:k+int(n)]), b[k+int(n):]
		t, k := binary.Varint(b)
		if k <= 0 || len(b)-k < 8 {
			return nil, errCarriedTruncated
		}
		p.T, b = t, b[k:]
		p.V, b = math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:]
		th, k := binary.Varint(b)
		if k <= 0 {
			return nil, errCarriedTruncated
		}
		p.Th, b = th, b[k:]
		n, k = binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n+1 {
			return nil, errCarriedTruncated
		}
		if n > 0 {
			p.D = append([]byte(nil), b[k:k+int(n)]...)
		}
		b = b[k+int(n):]
		p.Counted, b = b[0] == 1, b[1:]
		out = append(out, p)
	}
	return out, nil
}
