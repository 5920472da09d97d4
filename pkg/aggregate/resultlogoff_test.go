package aggregate_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/aggregate"
)

// With outputs.log false no result is logged — not by the flush that
// creates a window the carry held, nor by the publisher of a listed
// window or a correction, nor by a session's finalize, nor by the ticker —
// and the results on the stream are the same as with the lines on.
func TestNoResultLinesWithOutputsLogOff(t *testing.T) {
	for _, path := range []string{perBatch, perInterval} {
		t.Run(path, func(t *testing.T) {
			stream := map[bool]string{}
			for _, logged := range []bool{true, false} {
				cfg := fmt.Sprintf(`{"name":"quiet","key":"key","value":"data.v",
				  "windows":[{"kind":"tumbling","size":"1m"},{"kind":"hopping","size":"2m","advance":"1m"},{"kind":"session","gap":"10s"}],
				  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"correct","allowedLateness":"10m",
				  "partitionKeyIsGroupingKey":true,"outputs":{"table":true,"stream":true,"log":%t}}`, logged)
				base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
				clock := base
				now := func() time.Time { return clock }
				var logs lockedBuffer
				p, out := pipelineOn(t, cfg, viewsAt(now), aggregate.WithClock(now),
					aggregate.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
				f := &feed{t: t, p: p, base: base, path: path, clock: &clock}
				f.batch(at{"a", 1, 1}, at{"a", 3, 2})
				f.batch(at{"a", 30, 4})
				f.batch(at{"b", 70, 8})  // closes [0s,1m) and the first sessions
				f.batch(at{"a", 20, 16}) // late: a correction, sessions merged
				f.batch(at{"b", 200, 32})
				f.tick(300 * time.Second)
				f.tick(400 * time.Second)
				var results []string
				for _, k := range []string{"a", "b"} {
					results = append(results, out.of(k, base)...)
				}
				stream[logged] = strings.Join(results, "\n")
				lines := logs.resultLines(t)
				switch {
				case logged && len(lines) == 0:
					t.Fatalf("log on: no result line, results on the stream:\n%s", stream[logged])
				case !logged && len(lines) > 0:
					t.Errorf("log off: %d result lines, the first %v", len(lines), lines[0])
				}
			}
			if stream[true] != stream[false] || !strings.Contains(stream[true], "correction") || !strings.Contains(stream[true], "[1s,13s)") {
				t.Errorf("results on the stream with the log on:\n%s\nwith it off:\n%s\nwant the same, a correction and the session [1s,13s) among them", stream[true], stream[false])
			}
		})
	}
}
