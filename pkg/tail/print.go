package tail

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/cli"
)

// Record is one record read from a shard.
type Record struct {
	Shard, SequenceNumber, PartitionKey string
	// Arrived is when Kinesis accepted it (ApproximateArrivalTimestamp).
	Arrived time.Time
	Data    []byte

	doc           any
	tried, isJSON bool
}

// decoded is the record's data as JSON, decoded once; ok is false when the
// data is not one JSON value.
func (r *Record) decoded() (doc any, ok bool) {
	if !r.tried {
		r.doc, r.isJSON = decodeJSON(r.Data)
		r.tried = true
	}
	return r.doc, r.isJSON
}

// Format is how records are printed.
type Format int

// The formats.
const (
	// Pretty: a header line (shard, sequence number, partition key,
	// arrival, size), then the data as indented JSON (or, when it is not
	// JSON, quoted), then a blank line. A record cut at the printer's
	// limit is shown as it is, or quoted when it holds control characters.
	Pretty Format = iota
	// JSONLines: one JSON object a line, for jq: shard, sequenceNumber,
	// partitionKey, arrived, bytes and data (the record's JSON value), or
	// dataBase64 when the data is not JSON; a record longer than the
	// printer's limit has truncated true and dataText, its first bytes.
	JSONLines
	// Raw: the data's bytes as they are, then a newline.
	Raw
)

// Bounds of what one record prints.
const (
	// DefaultMaxBytes is how much of a record's data is printed unless
	// told otherwise.
	DefaultMaxBytes = 64 << 10
	// MaxRecordBytes is the most a printer prints of one record: a
	// Kinesis record holds at most 10 MiB.
	MaxRecordBytes = 10 << 20
)

// Printer writes records in a Format, at most MaxBytes of each record's
// data.
type Printer struct {
	W        io.Writer
	Format   Format
	MaxBytes int
	// Truncated counts the records whose data was cut.
	Truncated int
}

// jsonLine is a record in the JSONLines format.
type jsonLine struct {
	Shard          string          `json:"shard"`
	SequenceNumber string          `json:"sequenceNumber"`
	PartitionKey   string          `json:"partitionKey"`
	Arrived        string          `json:"arrived"`
	Bytes          int             `json:"bytes"`
	Data           json.RawMessage `json:"data,omitempty"`
	DataBase64     string          `json:"dataBase64,omitempty"`
	Truncated      bool            `json:"truncated,omitempty"`
	DataText       *string         `json:"dataText,omitempty"`
}

// Print writes r.
func (p *Printer) Print(r *Record) error {
	limit := p.MaxBytes
	if limit <= 0 || limit > MaxRecordBytes {
		limit = DefaultMaxBytes
	}
	long := len(r.Data) > limit
	if long {
		p.Truncated++
	}
	switch p.Format {
	case Raw:
		b := r.Data
		if long {
			b = b[:limit]
		}
		if _, err := p.W.Write(b); err != nil {
			return err
		}
		_, err := io.WriteString(p.W, "\n")
		return err
	case JSONLines:
		l := jsonLine{Shard: r.Shard, SequenceNumber: r.SequenceNumber, PartitionKey: r.PartitionKey,
			Arrived: r.Arrived.UTC().Format(time.RFC3339Nano), Bytes: len(r.Data)}
		switch {
		case long:
			s := string(bytes.ToValidUTF8(r.Data[:limit], nil))
			l.Truncated, l.DataText = true, &s
		case json.Valid(r.Data):
			var c bytes.Buffer
			if err := json.Compact(&c, r.Data); err != nil {
				return err
			}
			l.Data = c.Bytes()
		default:
			l.DataBase64 = base64.StdEncoding.EncodeToString(r.Data)
		}
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		_, err = p.W.Write(append(b, '\n'))
		return err
	default:
		var b bytes.Buffer
		fmt.Fprintf(&b, "── %s  %s  key %s  arrived %s  %d bytes\n", r.Shard, r.SequenceNumber, quoteIfNeeded(r.PartitionKey),
			r.Arrived.UTC().Format("2006-01-02T15:04:05.000Z07:00"), len(r.Data))
		switch {
		case long && cli.HasControl(r.Data[:limit]):
			// Whoever put the record chose its bytes: what a terminal
			// would take as a control sequence is quoted, as it is in a
			// short record, never written as it is.
			q, used := quotePrefix(r.Data, limit)
			b.WriteString("(quoted) " + q)
			fmt.Fprintf(&b, "\n… %d more bytes not shown (-max-bytes %d)\n", len(r.Data)-used, limit)
		case long:
			b.Write(bytes.ToValidUTF8(r.Data[:limit], []byte("\uFFFD")))
			fmt.Fprintf(&b, "\n… %d more bytes not shown (-max-bytes %d)\n", len(r.Data)-limit, limit)
		default:
			// Indenting (two spaces a level) or quoting can make the shown
			// text many times the data: deeply nested arrays under the
			// limit printed 64 times their size. What is shown is cut at
			// the limit too.
			var d bytes.Buffer
			if json.Valid(r.Data) {
				if err := json.Indent(&d, bytes.TrimSpace(r.Data), "", "  "); err != nil {
					return err
				}
			} else {
				d.WriteString("(not JSON) " + cli.QuoteData(r.Data))
			}
			if d.Len() > limit {
				p.Truncated++
				b.Write(bytes.ToValidUTF8(d.Bytes()[:limit], []byte("\uFFFD")))
				fmt.Fprintf(&b, "\n… %d more bytes of the shown text not shown (the record's %d bytes shown indented or quoted; -max-bytes %d)\n", d.Len()-limit, len(r.Data), limit)
			} else {
				b.Write(d.Bytes())
				b.WriteByte('\n')
			}
		}
		b.WriteByte('\n')
		_, err := p.W.Write(b.Bytes())
		return err
	}
}

// quoteIfNeeded quotes a key with spaces, quotes or characters that are
// not printable, so that the header stays one readable line.
func quoteIfNeeded(s string) string {
	for _, c := range s {
		if c <= ' ' || c == '"' || c == 0x7f || !strconv.IsPrint(c) {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// quotePrefix quotes as much of b from its start as fits in limit bytes
// of quoted text (at least one character), and says how many bytes of b
// that is.
func quotePrefix(b []byte, limit int) (string, int) {
	out := []byte{'"'}
	var one []byte
	used := 0
	for used < len(b) {
		_, size := utf8.DecodeRune(b[used:])
		one = strconv.AppendQuote(one[:0], string(b[used:used+size]))
		piece := one[1 : len(one)-1]
		if used > 0 && len(out)+len(piece)+1 > limit {
			break
		}
		out = append(out, piece...)
		used += size
	}
	return string(append(out, '"')), used
}
