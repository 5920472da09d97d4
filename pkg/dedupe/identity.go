package dedupe

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Identity is an event's identity: SHA-256 of its key and id, 128 bits.
type Identity [16]byte

// String is the identity in hex, for logs.
func (id Identity) String() string { return hex.EncodeToString(id[:]) }

// Fingerprint is 64 bits of SHA-256 over something: a claiming record's
// position or an event's content. Two different ones agree with probability
// 2⁻⁶⁴.
type Fingerprint [8]byte

// Entry is one claim: an identity, the record that claimed it, its content,
// and when that record arrived (Unix seconds).
type Entry struct {
	ID      Identity
	Content Fingerprint
	Claim   Fingerprint
	Arrival uint32
}

// entrySize is an Entry's encoded size.
const entrySize = 16 + 8 + 8 + 4

// IdentityOf returns the identity of the event with key and id.
func IdentityOf(key, id string) Identity {
	// SHA-256(len(key) as 4 bytes big endian ‖ key ‖ id), in a buffer on
	// the stack when it fits: this runs for every record.
	var buf [128]byte
	b := buf[:0]
	if 4+len(key)+len(id) > len(buf) {
		b = make([]byte, 0, 4+len(key)+len(id))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)))
	b = append(append(b, key...), id...)
	sum := sha256.Sum256(b)
	var out Identity
	copy(out[:], sum[:])
	return out
}

// ClaimOf fingerprints a record's position: its shard and sequence number.
func ClaimOf(shard, seq string) Fingerprint {
	// SHA-256(shard ‖ 0 ‖ seq).
	var buf [128]byte
	b := buf[:0]
	if len(shard)+1+len(seq) > len(buf) {
		b = make([]byte, 0, len(shard)+1+len(seq))
	}
	b = append(append(append(b, shard...), 0), seq...)
	sum := sha256.Sum256(b)
	var out Fingerprint
	copy(out[:], sum[:])
	return out
}

// ContentOf fingerprints what an event says: its type, when it occurred and
// its data, the data read as a JSON value (strictjson.AppendCanonical: key
// order, white space and string escapes do not count, as they do not for
// es.Command.Fingerprint), so a producer that re-encodes the same data —
// its keys in another order, "Z\u00fcrich" for "Zürich", "\/" for "/" —
// sends the same content, and its retry is a Duplicate, not a Conflict.
// Data the strict reader refuses (a consumer sets such a record aside
// before it is judged) is fingerprinted as SpellingOf does. The times
// stamped on the way (sentAt, receivedAt) are not content: a retry
// changes them.
func ContentOf(typ string, occurredAt time.Time, data []byte) Fingerprint {
	content, _ := ContentsOf(typ, occurredAt, data)
	return content
}

// ContentsOf is ContentOf, and the fingerprint a claim made before
// ContentOf read data as a value holds for the same event (SpellingOf),
// zero when it is content: data spelt canonically already, keys sorted and
// nothing escaped that need not be, has one fingerprint. A candidate
// carries both (Candidate.Spelling), so that the copy of an event claimed
// before the deploy that changed ContentOf is still a Duplicate within the
// ledger's horizon.
func ContentsOf(typ string, occurredAt time.Time, data []byte) (content, spelling Fingerprint) {
	// SHA-256(type ‖ [1 ‖ occurredAt in Unix ns, 8 bytes big endian, or 9
	// zero bytes] ‖ data), data canonical; hashed from a buffer on the
	// stack when it fits (the canonical form needs up to twice the data's
	// bytes while an object is sorted).
	var buf [1024]byte
	b := buf[:0]
	if n := len(typ) + 9 + 2*len(data); n > len(buf) {
		b = make([]byte, 0, n)
	}
	b = appendHead(b, typ, occurredAt)
	head := len(b)
	b, ok := strictjson.AppendCanonical(b, data)
	if !ok {
		b = appendSpelling(b[:head], data)
		return sum(b), Fingerprint{}
	}
	content = sum(b)
	if sameSpelling(b[head:], data) {
		return content, Fingerprint{}
	}
	return content, sum(appendSpelling(b[:head], data))
}

// SpellingOf is the content fingerprint ContentOf gave before it read data
// as a value: the data as written, less the white space outside strings.
// Claims made by a version before that hold it.
func SpellingOf(typ string, occurredAt time.Time, data []byte) Fingerprint {
	var buf [512]byte
	b := buf[:0]
	if len(typ)+9+len(data) > len(buf) {
		b = make([]byte, 0, len(typ)+9+len(data))
	}
	return sum(appendSpelling(appendHead(b, typ, occurredAt), data))
}

// appendHead appends what a content fingerprint hashes before the data:
// type ‖ [1 ‖ occurredAt in Unix ns, 8 bytes big endian, or 9 zero bytes].
func appendHead(b []byte, typ string, occurredAt time.Time) []byte {
	b = append(b, typ...)
	var t [9]byte
	if !occurredAt.IsZero() {
		t[0] = 1
		binary.BigEndian.PutUint64(t[1:], uint64(occurredAt.UnixNano()))
	}
	return append(b, t[:]...)
}

// spelling tells, byte by byte, which of a JSON text's bytes its old
// spelling kept: all but the white space outside strings.
type spelling struct{ inString, escaped bool }

// keeps reports whether the spelling keeps c, the text's next byte.
func (s *spelling) keeps(c byte) bool {
	switch {
	case s.inString:
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
		}
	case c == '"':
		s.inString = true
	case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		return false
	}
	return true
}

// appendSpelling appends data without the white space outside strings.
func appendSpelling(b, data []byte) []byte {
	var sp spelling
	for _, c := range data {
		if sp.keeps(c) {
			b = append(b, c)
		}
	}
	return b
}

// sameSpelling reports whether data, less the white space outside strings
// (appendSpelling), is canonical, without writing it out.
func sameSpelling(canonical, data []byte) bool {
	var sp spelling
	i := 0
	for _, c := range data {
		if !sp.keeps(c) {
			continue
		}
		if i == len(canonical) || canonical[i] != c {
			return false
		}
		i++
	}
	return i == len(canonical)
}

func sum(b []byte) Fingerprint {
	s := sha256.Sum256(b)
	var fp Fingerprint
	copy(fp[:], s[:])
	return fp
}

// appendEntries encodes entries, fixed width each.
func appendEntries(b []byte, es []Entry) []byte {
	for i := range es {
		e := &es[i]
		b = append(b, e.ID[:]...)
		b = append(b, e.Content[:]...)
		b = append(b, e.Claim[:]...)
		b = binary.BigEndian.AppendUint32(b, e.Arrival)
	}
	return b
}

var errEntries = errors.New("dedupe: malformed entries")

// decodeEntries decodes what appendEntries wrote, appending to dst.
func decodeEntries(dst []Entry, b []byte) ([]Entry, error) {
	if len(b)%entrySize != 0 {
		return dst, fmt.Errorf("%w: %d bytes is not a multiple of %d", errEntries, len(b), entrySize)
	}
	for ; len(b) > 0; b = b[entrySize:] {
		var e Entry
		copy(e.ID[:], b[0:16])
		copy(e.Content[:], b[16:24])
		copy(e.Claim[:], b[24:32])
		e.Arrival = binary.BigEndian.Uint32(b[32:36])
		dst = append(dst, e)
	}
	return dst, nil
}
