package pipeline

import (
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/window"
)

// BenchmarkRecordPath is one record's way through an aggregate function's
// pure part: decode the envelope (stream.Unmarshal), extract key and value,
// assign the tumbling window, decide lateness, add to the (key, window)
// state. records/s/core = 1e9 / ns/op.
func BenchmarkRecordPath(b *testing.B) {
	c := mustParse(b, `{"name": "p", "value": "data.total", "aggregates": ["count", "sum", "min", "max"],
		"windows": [{"kind": "tumbling", "size": "1m"}], "outOfOrderness": "5s"}`)
	const n = 1024
	recs := make([][]byte, n)
	base := time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)
	for i := range recs {
		at := base.Add(time.Duration(i) * 50 * time.Millisecond)
		recs[i] = fmt.Appendf(nil, `{"id":"evt-%d","type":"order_placed","key":"customer-%d","occurredAt":%q,"sentAt":%q,"receivedAt":%q,"data":{"total":%d.5,"currency":"EUR"}}`,
			i, i%50, at.Format(time.RFC3339Nano), at.Add(time.Second).Format(time.RFC3339Nano), at.Add(1200*time.Millisecond).Format(time.RFC3339Nano), i%100)
	}
	type groupKey struct {
		key string
		w   window.Window
	}
	tumbling := c.Windows[0].Tumbling()
	wm := c.NewWatermark()
	var env stream.Envelope
	var d window.Decision
	ws := make([]window.Window, 0, 1)
	states := map[groupKey]*agg.State{}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := stream.Unmarshal(recs[i%n], &env); err != nil {
			b.Fatal(err)
		}
		key, value, distinct, err := c.Extract(&env)
		if err != nil {
			b.Fatal(err)
		}
		at := env.EventTime()
		wm.Observe(at)
		ws = tumbling.AppendWindows(ws[:0], at)
		c.Late.Decide(&d, wm, ws)
		for _, w := range d.Open {
			st := states[groupKey{key, w}]
			if st == nil {
				st = c.Aggregates.New()
				states[groupKey{key, w}] = st
			}
			st.Add(value, distinct)
		}
	}
}
