package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Totals are what one window must hold: how many events it counted, the
// sum and the largest of their values.
type Totals struct {
	Count    int
	Sum, Max float64
}

// Expected maps each (key, window start) to what its window must hold.
type Expected map[WindowKey]Totals

// Count is the number of events over every window.
func (e Expected) Count() int {
	n := 0
	for _, t := range e {
		n += t.Count
	}
	return n
}

// Keys returns the keys of e, sorted.
func (e Expected) Keys() []string {
	c := Counts{}
	for k, t := range e {
		c[k] = t.Count
	}
	return c.Keys()
}

// Checkouts describes the checkout events `make local` sends for a second
// pipeline next to the page views: events of type "checkout" keyed by
// region, data.amount a number of cents.
type Checkouts struct {
	Regions []string
	Minutes int       // event-time minutes, ending at the minute before Now
	Max     int       // at most this many checkouts per region and minute
	Seed    uint64    // same seed, same events
	Now     time.Time // server time the events are generated against
}

// Generate returns the envelopes to send, in event-time order, and what
// each (region, minute) window must hold. In order, because a pipeline with
// latePolicy "drop" drops a record that reaches its shard after the
// watermark passed its window: shuffled minutes would lose some. Events sit
// in the middle of their minute, so network delay cannot move them across
// a minute boundary.
func (c Checkouts) Generate() ([]stream.Envelope, Expected) {
	rng := rand.New(rand.NewPCG(c.Seed, c.Seed^0x5851f42d4c957f2d))
	start := c.Now.UTC().Truncate(time.Minute).Add(-time.Duration(c.Minutes) * time.Minute)
	want := Expected{}
	type timed struct {
		at  time.Time
		env stream.Envelope
	}
	var evs []timed
	for _, region := range c.Regions {
		for m := 0; m < c.Minutes; m++ {
			minute := start.Add(time.Duration(m) * time.Minute)
			n := 1 + rng.IntN(c.Max)
			k := WindowKey{region, minute.Format(time.RFC3339)}
			t := want[k]
			for i := 0; i < n; i++ {
				at := minute.Add(15*time.Second + time.Duration(rng.IntN(30_000))*time.Millisecond)
				cents := 100 + rng.IntN(49_900) // 1.00 to 499.99
				t.Count++
				t.Sum += float64(cents)
				t.Max = max(t.Max, float64(cents))
				evs = append(evs, timed{at, stream.Envelope{
					ID: fmt.Sprintf("checkout-%s-%d-%d", region, m, i), Type: "checkout", Key: region,
					OccurredAt: at, SentAt: c.Now,
					Data: json.RawMessage(fmt.Sprintf(`{"amount":%d,"currency":"EUR","items":%d}`, cents, 1+rng.IntN(5))),
				}})
			}
			want[k] = t
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	out := make([]stream.Envelope, len(evs))
	for i, e := range evs {
		out[i] = e.env
	}
	return out, want
}

// totalsOf turns views into per (key, window start) totals, of the fields
// aggregates computes.
func totalsOf(vs []state.View, aggregates agg.Aggregate) Expected {
	got := Expected{}
	for _, v := range vs {
		k := WindowKey{v.Key, v.Window.Start.UTC().Format(time.RFC3339)}
		t := got[k]
		t.Count += int(v.Result.Count)
		t.Sum += v.Result.Sum
		t.Max = max(t.Max, v.Result.Max)
		got[k] = masked(t, aggregates)
	}
	return got
}

// differs reports whether got holds other totals than want: a window
// missing, counted or summed otherwise, or one nobody sent to.
func differs(want, got Expected) bool {
	if len(got) != len(want) {
		return true
	}
	for k, w := range want {
		if got[k] != w {
			return true
		}
	}
	return false
}

// WaitTotals polls until keys' windows hold exactly want (count, sum and
// max of every window) or ctx ends; it returns the windows last read.
func (w *Windows) WaitTotals(ctx context.Context, want Expected, from, to time.Time, progress io.Writer) ([]state.View, error) {
	keys := want.Keys()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	status := newStatusLine(progress)
	defer status.Done()
	for {
		vs, err := w.Read(ctx, keys, from, to)
		if err != nil {
			return nil, err
		}
		got := totalsOf(vs, w.Pipeline.Aggregates.Aggregates)
		status.Set("    the %s windows hold %d of the %d events sent", w.Pipeline.Name, got.Count(), want.Count())
		if !differs(want, got) {
			return vs, nil
		}
		select {
		case <-ctx.Done():
			return vs, fmt.Errorf("waiting for pipeline %s's windows in %s: %w", w.Pipeline.Name, w.Table, ctx.Err())
		case <-tick.C:
		}
	}
}

// PrintTotals writes a pipeline's windows next to what was sent — count,
// sum and max checked, mean and the quantile estimates shown — and returns
// the number of windows that differ (missing, or holding other values).
func PrintTotals(out io.Writer, w *Windows, want Expected, vs []state.View) int {
	sort.Slice(vs, func(i, j int) bool {
		if vs[i].Key != vs[j].Key {
			return vs[i].Key < vs[j].Key
		}
		return vs[i].Window.Start.Before(vs[j].Window.Start)
	})
	var qs []string
	if w.Pipeline.Aggregates.Aggregates.Has(agg.Quantiles) {
		for _, q := range w.Pipeline.Aggregates.Quantiles {
			qs = append(qs, agg.QuantileName(q))
		}
	}
	value := w.Pipeline.Value.String()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "KEY\tWINDOW (%s, event time)\tSENT\tCOUNT\tSENT SUM\tSUM\tSENT MAX\tMAX\tMEAN", w.Kind())
	for _, q := range qs {
		fmt.Fprintf(tw, "\t%s", q)
	}
	fmt.Fprintf(tw, "\tSTATE\tREVISION\t\n")
	a := w.Pipeline.Aggregates.Aggregates
	got := totalsOf(vs, a)
	bad := 0
	for _, v := range vs {
		k := WindowKey{v.Key, v.Window.Start.UTC().Format(time.RFC3339)}
		mark := ""
		if want[k] != got[k] {
			mark = "MISMATCH"
			bad++
		}
		st := "open"
		if v.Final {
			st = "final"
		}
		fmt.Fprintf(tw, "%s\t%s–%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", v.Key, v.Window.Start.Format("15:04"), v.Window.End.Format("15:04"),
			shown(a, agg.Count, "%.0f", float64(want[k].Count)), shown(a, agg.Count, "%.0f", float64(v.Result.Count)),
			shown(a, agg.Sum, "%.0f", want[k].Sum), shown(a, agg.Sum, "%.0f", v.Result.Sum),
			shown(a, agg.Max, "%.0f", want[k].Max), shown(a, agg.Max, "%.0f", v.Result.Max),
			shown(a, agg.Mean, "%.1f", v.Result.Mean))
		for _, q := range qs {
			fmt.Fprintf(tw, "\t%.0f", v.Result.Quantiles[q])
		}
		fmt.Fprintf(tw, "\t%s\t%d\t%s\n", st, v.Revision, mark)
	}
	for _, k := range sortedWindowKeys(want) {
		if _, ok := got[k]; !ok {
			fmt.Fprintf(tw, "%s\t%s\t%d\t0\t%.0f\t\t%.0f\t\t\t", k.Key, k.Window, want[k].Count, want[k].Sum, want[k].Max)
			for range qs {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, "missing\t\tMISMATCH\n")
			bad++
		}
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t%.0f\t%.0f\t\t\t\t", want.Count(), got.Count(), sumOf(want), sumOf(got))
	for range qs {
		fmt.Fprint(tw, "\t")
	}
	fmt.Fprint(tw, "\t\t\t\n")
	_ = tw.Flush()
	fmt.Fprintf(out, "  (values are %s; COUNT, SUM and MAX must equal what was sent; %s; - is a value the pipeline does not compute)\n", value, quantileNote(qs))
	return bad
}

// shown formats v when the pipeline computes aggregate x, else "-".
func shown(a, x agg.Aggregate, format string, v float64) string {
	if !a.Has(x) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func quantileNote(qs []string) string {
	if len(qs) == 0 {
		return "MEAN, where computed, is SUM/COUNT"
	}
	return "MEAN, where computed, is SUM/COUNT, the quantiles DDSketch estimates within 1 % of a value of the window"
}

func sumOf(e Expected) float64 {
	var s float64
	for _, t := range e {
		s += t.Sum
	}
	return s
}

func sortedWindowKeys(e Expected) []WindowKey {
	ks := make([]WindowKey, 0, len(e))
	for k := range e {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].Key != ks[j].Key {
			return ks[i].Key < ks[j].Key
		}
		return ks[i].Window < ks[j].Window
	})
	return ks
}
