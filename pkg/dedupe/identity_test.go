package dedupe

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// The identities and fingerprints are stored in ledgers and carried in
// Lambda's window state: they must stay what they were, byte for byte.
// These are the definitions as first written (one streaming hash each).
func refIdentityOf(key, id string) Identity {
	h := sha256.New()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(key)))
	h.Write(n[:])
	h.Write([]byte(key))
	h.Write([]byte(id))
	var out Identity
	copy(out[:], h.Sum(nil))
	return out
}

func refClaimOf(shard, seq string) Fingerprint {
	h := sha256.New()
	h.Write([]byte(shard))
	h.Write([]byte{0})
	h.Write([]byte(seq))
	var out Fingerprint
	copy(out[:], h.Sum(nil))
	return out
}

// refSpellingOf is ContentOf as first written, SpellingOf now: the data
// less the white space outside strings. Claims made before ContentOf read
// data as a value hold it; ContentOf is it over the data's canonical
// spelling.
func refSpellingOf(typ string, occurredAt time.Time, data []byte) Fingerprint {
	h := sha256.New()
	h.Write([]byte(typ))
	var t [9]byte
	if !occurredAt.IsZero() {
		t[0] = 1
		binary.BigEndian.PutUint64(t[1:], uint64(occurredAt.UnixNano()))
	}
	h.Write(t[:])
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		}
		h.Write([]byte{c})
	}
	var fp Fingerprint
	copy(fp[:], h.Sum(nil))
	return fp
}

func TestHashesAreStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	str := func(n int) string {
		const chars = "ab \"\\\t{}:,0123456789é"
		var b strings.Builder
		for range n {
			b.WriteByte(chars[rng.IntN(len(chars))])
		}
		return b.String()
	}
	for i := range 2000 {
		n := []int{0, 1, 20, 60, 123, 124, 130, 500, 503, 520, 2000}[i%11]
		key, id, data := str(n), str(rng.IntN(n+1)), str(n)
		at := time.Time{}
		if i%3 != 0 {
			at = time.Unix(int64(rng.Uint32()), int64(rng.IntN(1e9)))
		}
		if got, want := IdentityOf(key, id), refIdentityOf(key, id); got != want {
			t.Fatalf("IdentityOf(%q, %q) = %v, want %v", key, id, got, want)
		}
		if got, want := ClaimOf(key, id), refClaimOf(key, id); got != want {
			t.Fatalf("ClaimOf(%q, %q) = %x, want %x", key, id, got, want)
		}
		if got, want := SpellingOf(id, at, []byte(data)), refSpellingOf(id, at, []byte(data)); got != want {
			t.Fatalf("SpellingOf(%q, %v, %q) = %x, want %x", id, at, data, got, want)
		}
		// Mostly not JSON: fingerprinted as spelt.
		want := refSpellingOf(id, at, []byte(data))
		if canonical, ok := strictjson.AppendCanonical(nil, []byte(data)); ok {
			want = refSpellingOf(id, at, canonical)
		}
		if got := ContentOf(id, at, []byte(data)); got != want {
			t.Fatalf("ContentOf(%q, %v, %q) = %x, want %x", id, at, data, got, want)
		}
	}
	// JSON, spelt otherwise than canonically.
	for i := range 2000 {
		v := map[string]any{str(rng.IntN(8)): str(rng.IntN(30)), str(rng.IntN(8)): []any{float64(i), str(3), nil}}
		data, err := json.MarshalIndent(v, "", strings.Repeat(" ", i%3))
		if err != nil {
			t.Fatal(err)
		}
		canonical, ok := strictjson.AppendCanonical(nil, data)
		if !ok {
			t.Fatalf("AppendCanonical refuses %s", data)
		}
		content, spelling := ContentsOf("t", time.Unix(int64(i), 0), data)
		if want := refSpellingOf("t", time.Unix(int64(i), 0), canonical); content != want {
			t.Fatalf("ContentOf(%s) = %x, want %x, the fingerprint of %s", data, content, want, canonical)
		}
		wantSpelling := refSpellingOf("t", time.Unix(int64(i), 0), data)
		if wantSpelling == content {
			wantSpelling = Fingerprint{}
		}
		if spelling != wantSpelling {
			t.Fatalf("ContentsOf(%s) spelling = %x, want %x", data, spelling, wantSpelling)
		}
	}
}

// A record's three hashes allocate nothing when its fields are short.
func TestHashesDoNotAllocate(t *testing.T) {
	data := []byte(`{"path":"/pricing","ms":120}`)
	at := time.Unix(1796208060, 0)
	if n := testing.AllocsPerRun(100, func() {
		_ = IdentityOf("user-0001", "evt-123456")
		_ = ClaimOf("shardId-000000000000", "49601189658422359378836298521827638475320189010000000001")
		_, _ = ContentsOf("page_view", at, data)
	}); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}
