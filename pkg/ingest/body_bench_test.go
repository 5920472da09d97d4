package ingest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchBody is 500 events as producers send them, ~150 KB.
func benchBody() []byte {
	evs := make([]string, MaxEvents)
	for i := range evs {
		evs[i] = ev(fmt.Sprintf("evt-%06d", i), fmt.Sprintf("user-%03d", i%97), fmt.Sprintf(`,"data":{"path":"/p/%d","ms":%d,"tags":["a","b"],"ua":"Mozilla/5.0 (X11; Linux x86_64)"}`, i%20, i))
	}
	return []byte("[" + strings.Join(evs, ",") + "]")
}

// BenchmarkSplitBody is the scanner's pass (UTF-8, duplicate keys, depth)
// next to what it replaced, encoding/json splitting the array.
func BenchmarkSplitBody(b *testing.B) {
	body := benchBody()
	b.Run("scanner", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := splitBody(body, MaxEvents); err != nil {
				b.Fatal(err.reason)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var raws []json.RawMessage
			if err := json.Unmarshal(body, &raws); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse-and-validate", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			raws, _ := splitBody(body, MaxEvents)
			if _, errs := parseEvents(raws, DefaultMaxEventAge); len(errs) > 0 {
				b.Fatal(errs[0])
			}
		}
	})
}
