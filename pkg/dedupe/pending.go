package dedupe

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"sort"
)

// EncodePending encodes the claims an interval carries (Session.Pending) for
// Lambda's window state: AppendPending's bytes, base64. The output is
// deterministic (keys in order).
func EncodePending(p map[string][]Entry) string {
	if len(p) == 0 {
		return ""
	}
	return base64.StdEncoding.EncodeToString(AppendPending(nil, p))
}

// AppendPending appends claims to b, per key in key order: its length, the
// key and its entries. What a window state carries as base64, and what an
// interval that outgrows the state keeps in a DynamoDB item as bytes.
func AppendPending(b []byte, p map[string][]Entry) []byte {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(p[k])))
		b = appendEntries(b, p[k])
	}
	return b
}

// PendingBytes is how many bytes AppendPending takes for key's claims.
func PendingBytes(key string, claims int) int {
	return uvarintLen(uint64(len(key))) + len(key) + uvarintLen(uint64(claims)) + claims*entrySize
}

func uvarintLen(n uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], n)
}

// DecodePending decodes what EncodePending wrote.
func DecodePending(s string) (map[string][]Entry, error) {
	if s == "" {
		return map[string][]Entry{}, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("dedupe: pending claims: %w", err)
	}
	return ReadPending(b)
}

// ReadPending reads what AppendPending wrote, refusing anything it could
// not have written.
func ReadPending(b []byte) (map[string][]Entry, error) {
	out := map[string][]Entry{}
	prev, first := "", true
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return nil, fmt.Errorf("%w: a key runs past the end", errEntries)
		}
		key := string(b[w : w+int(n)])
		if !first && key <= prev {
			return nil, fmt.Errorf("%w: key %q after %q (AppendPending writes each key once, in order)", errEntries, key, prev)
		}
		prev, first = key, false
		b = b[w+int(n):]
		cnt, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w)/entrySize < cnt {
			return nil, fmt.Errorf("%w: key %q's entries run past the end", errEntries, key)
		}
		b = b[w:]
		es, err := decodeEntries(nil, b[:int(cnt)*entrySize])
		if err != nil {
			return nil, err
		}
		out[key] = es
		b = b[int(cnt)*entrySize:]
	}
	return out, nil
}

// EncodedPendingSize is how many bytes EncodePending uses for n claims,
// keys aside: what the window state budget counts.
func EncodedPendingSize(n int) int { return (n*entrySize + 2) / 3 * 4 }
