package stream

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// AppendKinesisEventResponse appends r as JSON: byte for byte what
// lambda.Start's encoder writes for it (encoding/json, HTML not escaped),
// without the trailing newline. A handler that returns its response as
// bytes (a lambda.Handler) spares the runtime's reflection-driven encoder.
func AppendKinesisEventResponse(b []byte, r *events.KinesisEventResponse) []byte {
	b = append(b, `{"batchItemFailures":`...)
	b = appendItemFailures(b, r.BatchItemFailures)
	return append(b, '}')
}

// AppendKinesisTimeWindowEventResponse appends r as JSON, as
// AppendKinesisEventResponse does: the state with its keys sorted, then
// the failures.
func AppendKinesisTimeWindowEventResponse(b []byte, r *events.KinesisTimeWindowEventResponse) []byte {
	b = append(b, `{"state":`...)
	if r.State == nil {
		b = append(b, "null"...)
	} else {
		keys := make([]string, 0, len(r.State))
		for k := range r.State {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, r.State[k])
		}
		b = append(b, '}')
	}
	b = append(b, `,"batchItemFailures":`...)
	b = appendItemFailures(b, r.BatchItemFailures)
	return append(b, '}')
}

func appendItemFailures(b []byte, fs []events.KinesisBatchItemFailure) []byte {
	if fs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"itemIdentifier":`...)
		b = appendJSONString(b, fs[i].ItemIdentifier)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendJSONString appends s quoted as encoding/json quotes a string
// without HTML escaping: \" \\ \b \f \n \r \t, other control bytes as
// \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) { // skip plain bytes eight at a time
			m := specialBytes(binary.LittleEndian.Uint64([]byte(s[i : i+8])))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
