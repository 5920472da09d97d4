package dedupe

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
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
	h := sha256.New()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(key)))
	h.Write(n[:])
	h.Write([]byte(key))
	h.Write([]byte(id))
	var sum [sha256.Size]byte
	var out Identity
	copy(out[:], h.Sum(sum[:0]))
	return out
}

// ClaimOf fingerprints a record's position: its shard and sequence number.
func ClaimOf(shard, seq string) Fingerprint {
	h := sha256.New()
	h.Write([]byte(shard))
	h.Write([]byte{0})
	h.Write([]byte(seq))
	var sum [sha256.Size]byte
	var out Fingerprint
	copy(out[:], h.Sum(sum[:0]))
	return out
}

// ContentOf fingerprints what an event says: its type, when it occurred and
// its data, with JSON whitespace outside strings ignored (a producer that
// re-encodes the same data with other spacing sends the same content). The
// times stamped on the way (sentAt, receivedAt) are not content: a retry
// changes them.
func ContentOf(typ string, occurredAt time.Time, data []byte) Fingerprint {
	h := sha256.New()
	h.Write([]byte(typ))
	var t [9]byte
	if !occurredAt.IsZero() {
		t[0] = 1
		binary.BigEndian.PutUint64(t[1:], uint64(occurredAt.UnixNano()))
	}
	h.Write(t[:])
	var buf [256]byte
	out := buf[:0]
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
		out = append(out, c)
		if len(out) == cap(out) {
			h.Write(out)
			out = buf[:0]
		}
	}
	h.Write(out)
	var sum [sha256.Size]byte
	var fp Fingerprint
	copy(fp[:], h.Sum(sum[:0]))
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
