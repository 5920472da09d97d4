package join

import (
	"strings"
	"testing"
)

// TestOutOfOrderPastTheGrace holds the two differences from Kafka Streams
// that the package doc and docs/stream-joins.md state, with the shipped
// file's bounds (before 0, within 30s, allowedLateness 5s): a click more
// than 5s behind the newest event time is late, though its search is
// open; a search arriving when the newest event time is more than 5s past
// a click no longer joins it (Kafka Streams joins both).
func TestOutOfOrderPastTheGrace(t *testing.T) {
	c := mustParse(t, `{"name":"sc","left":"search","right":"click","within":"30s","joinType":"left","allowedLateness":"5s"}`)
	for _, tc := range []struct {
		name string
		recs []in
		want []string // the outputs, all records closed
	}{
		{"a click 5s behind joins", []in{left("s", 0), left("x", 10), right("c", 5)}, []string{"[s, c]", "[x, null]"}},
		{"a click 6s behind is late", []in{left("s", 0), left("x", 11), right("c", 5)}, []string{"[s, null]", "[x, null]"}},
		{"a search with the newest 5s past its click joins", []in{right("c", 10), left("x", 15), left("s", 9)}, []string{"[s, c]", "[x, null]"}},
		{"a search with the newest 6s past its click does not", []in{right("c", 10), left("x", 16), left("s", 9)}, []string{"[s, null]", "[x, null]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := drive(t, c, append(tc.recs, left("end", 1000)))
			var all []string
			for _, o := range got {
				all = append(all, o...)
			}
			if strings.Join(all, " ") != strings.Join(tc.want, " ") {
				t.Errorf("outputs %v, want %v", all, tc.want)
			}
		})
	}
}
