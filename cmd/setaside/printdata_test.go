package main

import (
	"bytes"
	"strings"
	"testing"
)

// A set-aside record's data is printed as it is only when it is text a
// terminal shows: a producer's escape sequence (a record set aside because
// it is not JSON) set the terminal's title, cleared the screen and printed
// its own text; it is quoted now, as make tail quotes it.
func TestPrintDataQuotesWhatATerminalWouldActOn(t *testing.T) {
	for _, tt := range []struct {
		name, data string
		want       []string
	}{
		{"JSON", "{\"id\":\"e1\",\n\"data\":{\"ms\":\"5\"}}", []string{"    {\"id\":\"e1\",\n", "    \"data\":{\"ms\":\"5\"}}\n"}},
		{"an escape sequence", "\x1b]0;PWNED\x07\x1b[2J\x1b[31mFAKE: all records applied\x1b[0m",
			[]string{`    (quoted) "\x1b]0;PWNED\a\x1b[2J\x1b[31mFAKE: all records applied\x1b[0m"` + "\n"}},
		{"a carriage return", "ok\rFAKE", []string{`    (quoted) "ok\rFAKE"`}},
		{"a C1 control", "a\u009bb", []string{`(quoted) "a\u009bb"`}},
		{"not UTF-8", "\x00\xff\xfe", []string{"    (quoted) base64 AP/+\n"}},
		{"long, cut and said so", strings.Repeat("\x1b", maxShown+10), []string{`(quoted) "\x1b\x1b`, "…(10 more bytes; -data-only prints them all)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			printData(&b, []byte(tt.data))
			got := b.String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("printData(%q) printed %q; want %q in it", tt.data, got, w)
				}
			}
			if strings.ContainsAny(got, "\x1b\x07\r\u009b") || len(got) > 5*maxShown {
				t.Errorf("printData(%q) printed %q: a control character, or unbounded", tt.data, got)
			}
		})
	}
}
