package cli

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/pkg/stream"
)

// HasControl reports whether b holds a character a terminal may act on
// rather than show: a C0 control other than newline and tab (carriage
// return too, which would write over the line), DEL, or a C1 control.
// A record's bytes are whoever put it's choice: the commands that print
// one quote it when this holds, so an escape sequence never reaches the
// terminal.
func HasControl(b []byte) bool {
	for _, c := range string(b) {
		if c < ' ' && c != '\n' && c != '\t' || c >= 0x7f && c < 0xa0 {
			return true
		}
	}
	return false
}

// QuoteData shows data that is not to be printed as it is: quoted text
// when it is UTF-8, else "base64 " and its base64.
func QuoteData(b []byte) string {
	if utf8.Valid(b) {
		return strconv.Quote(string(b))
	}
	return "base64 " + base64.StdEncoding.EncodeToString(b)
}

// Shown is s, one value of a line a command prints (a set-aside item's
// field or reason), as it may reach a terminal: s itself when it holds no
// character that a terminal acts on or that hides or reorders the text
// around it (stream.FirstUnprintable: control characters, line breaks,
// bidirectional controls, invisible characters), else s quoted, each such
// character escaped ("\x1b[2J", "\u202e"). What a table holds was
// written by a function, but may repeat what a producer chose (an item
// written before the functions named a key as a path step holds the key
// raw): printed as it is, an escape sequence there would retitle or clear
// the operator's terminal.
func Shown(s string) string {
	if _, found := stream.FirstUnprintable(s); !found && utf8.ValidString(s) {
		return s
	}
	return strconv.Quote(s)
}
