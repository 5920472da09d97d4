package local

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Sample is sample traffic for any pipeline, made from its config, so that
// `make local` runs and checks a pipeline file a user adds: events of the
// pipeline's first event type, Keys keys ("<pipeline>-1", …) at its key
// path, a whole number from 1 to 1000 at its value path and a distinct
// value at its distinct path; 1 to Max events per key in each of the last
// Windows windows of its first window (tumbling), in the middle half of
// the window and in event-time order (a pipeline that drops late records
// loses none).
type Sample struct {
	Pipeline *pipeline.Config
	Keys     int
	Windows  int
	Max      int
	Seed     uint64
	Now      time.Time // server time the events are generated against
}

// Checkable says whether make local can send the pipeline sample traffic
// and check its windows exactly, or why not: it must read named event types
// that no other part of the demo sends (taken), its first window must be
// tumbling, and it must compute count, sum or max.
func Checkable(cfg *pipeline.Config, taken []string) (bool, string) {
	switch {
	case len(cfg.EventTypes) == 0:
		return false, "it reads every event type, so the other demos' events count in it too"
	case slices.ContainsFunc(cfg.EventTypes, func(t string) bool { return slices.Contains(taken, t) }):
		return false, fmt.Sprintf("the demo sends events of its types (%s) for its own checks", strings.Join(cfg.EventTypes, ", "))
	case cfg.Windows[0].Kind != pipeline.Tumbling:
		return false, fmt.Sprintf("its first window is %s; the check reads tumbling windows", cfg.Windows[0].Kind)
	case !cfg.Aggregates.Aggregates.Has(agg.Count) && !cfg.Aggregates.Aggregates.Has(agg.Sum) && !cfg.Aggregates.Aggregates.Has(agg.Max):
		return false, "it computes none of count, sum and max, which the check compares"
	}
	return true, ""
}

// Generate returns the envelopes to send, in event-time order, what each
// (key, window start) must hold (the fields the pipeline computes), and
// the earliest window start.
func (s Sample) Generate() ([]stream.Envelope, Expected, time.Time) {
	cfg := s.Pipeline
	rng := rand.New(rand.NewPCG(s.Seed, s.Seed^0x2545f4914f6cdd1d))
	ws := cfg.Windows[0]
	size := ws.Size
	typ := cfg.EventTypes[0]
	want := Expected{}
	var out []stream.Envelope
	var first time.Time
	for k := s.Windows; k >= 1; k-- {
		win := ws.Tumbling().AppendWindows(nil, s.Now.UTC().Add(-time.Duration(k)*size))[0]
		if first.IsZero() {
			first = win.Start
		}
		var evs []stream.Envelope
		for key := 1; key <= s.Keys; key++ {
			name := fmt.Sprintf("%s-%d", cfg.Name, key)
			if cfg.Key.String() == "type" {
				name = typ
			}
			n := 1 + rng.IntN(s.Max)
			for i := 0; i < n; i++ {
				at := win.Start.Add(size/4 + time.Duration(rng.Int64N(int64(size/2))))
				at = at.Truncate(time.Millisecond)
				v := 1 + rng.IntN(1000)
				data := map[string]any{}
				setPath(data, cfg.Key, name)
				setPath(data, cfg.Value, v)
				setPath(data, cfg.Distinct, fmt.Sprintf("d-%d", rng.IntN(50)))
				b, _ := json.Marshal(data) // strings and numbers always marshal
				id := fmt.Sprintf("%s-%d-%d-%d", cfg.Name, k, key, i)
				evs = append(evs, stream.Envelope{ID: id, Type: typ, Key: name, OccurredAt: at, SentAt: s.Now, Data: b})
				wk := WindowKey{name, win.Start.UTC().Format(time.RFC3339)}
				t := want[wk]
				t.Count++
				if !cfg.Value.IsZero() {
					t.Sum += float64(v)
					t.Max = max(t.Max, float64(v))
				}
				want[wk] = t
			}
		}
		slices.SortStableFunc(evs, func(a, b stream.Envelope) int { return a.OccurredAt.Compare(b.OccurredAt) })
		out = append(out, evs...)
	}
	for k, t := range want {
		want[k] = masked(t, cfg.Aggregates.Aggregates)
	}
	return out, want, first
}

// setPath sets a data path ("data.order.total") in data to v; other paths
// (key, type, id) are envelope fields, set by the caller.
func setPath(data map[string]any, p pipeline.Path, v any) {
	rest, ok := strings.CutPrefix(p.String(), "data.")
	if !ok {
		return
	}
	fields := strings.Split(rest, ".")
	m := data
	for _, f := range fields[:len(fields)-1] {
		next, ok := m[f].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[f] = next
		}
		m = next
	}
	m[fields[len(fields)-1]] = v
}

// masked keeps the totals a pipeline's aggregates compute.
func masked(t Totals, a agg.Aggregate) Totals {
	if !a.Has(agg.Count) {
		t.Count = 0
	}
	if !a.Has(agg.Sum) {
		t.Sum = 0
	}
	if !a.Has(agg.Max) {
		t.Max = 0
	}
	return t
}
