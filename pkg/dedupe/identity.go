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
// its data, with JSON whitespace outside strings ignored (a producer that
// re-encodes the same data with other spacing sends the same content). The
// times stamped on the way (sentAt, receivedAt) are not content: a retry
// changes them.
func ContentOf(typ string, occurredAt time.Time, data []byte) Fingerprint {
	// SHA-256(type ‖ [1 ‖ occurredAt in Unix ns, 8 bytes big endian, or 9
	// zero bytes] ‖ data without the whitespace outside strings), hashed
	// from a buffer on the stack when it fits.
	var buf [512]byte
	b := buf[:0]
	if len(typ)+9+len(data) > len(buf) {
		b = make([]byte, 0, len(typ)+9+len(data))
	}
	b = append(b, typ...)
	var t [9]byte
	if !occurredAt.IsZero() {
		t[0] = 1
		binary.BigEndian.PutUint64(t[1:], uint64(occurredAt.UnixNano()))
	}
	b = append(b, t[:]...)
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
		b = append(b, c)
	}
	sum := sha256.Sum256(b)
	var fp Fingerprint
	copy(fp[:], sum[:])
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
