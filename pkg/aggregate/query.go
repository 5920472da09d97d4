package aggregate

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// Windows returns key's windows of one kind that start in [from, to), as
// WindowsBounded does: all of them, or, when there are more than
// state.MaxQueryWindows, an error wrapping state.ErrTooManyWindows.
func (p *Processor) Windows(ctx context.Context, key, kind string, from, to time.Time) ([]state.View, error) {
	views, more, err := p.WindowsBounded(ctx, key, kind, from, to, state.MaxQueryWindows)
	if err != nil {
		return nil, err
	}
	if more {
		return nil, fmt.Errorf("aggregate: %s windows of key %q: %w (%d)", kind, key, state.ErrTooManyWindows, state.MaxQueryWindows)
	}
	return views, nil
}

// WindowsBounded returns the first limit of key's windows of one kind that
// start in [from, to), in start order (then end), and whether there are
// more: final ones (with their revision) as stored, and open ones with their
// running value. For tumbling and hopping windows both are window items;
// session and sliding windows that are still open live in the key's keyed
// state and are computed from it here (a read, no write). It reads at most
// limit+1 window items, besides retracted sessions it skips
// (state.Views.QueryBounded), and the keyed state.
func (p *Processor) WindowsBounded(ctx context.Context, key, kind string, from, to time.Time, limit int) ([]state.View, bool, error) {
	views, more, err := p.views.QueryBounded(ctx, p.cfg.Name, key, kind, from, to, state.Bound{Limit: limit})
	if err != nil {
		return nil, false, err
	}
	if more && len(views) == 0 {
		return views, more, nil
	}
	// Past the last window read, when there are more stored, an open
	// window may be one of those not read (stored, so not open), and at
	// least limit windows come before it anyway.
	open, err := p.open(ctx, key, kind, from, to, views, func(w window.Window) bool {
		return !more || windowBefore(w, views[len(views)-1].Window)
	})
	if err != nil {
		return nil, false, err
	}
	views = append(views, open...)
	sort.SliceStable(views, func(i, j int) bool { return windowBefore(views[i].Window, views[j].Window) })
	if len(views) > limit {
		views, more = views[:limit], true
	}
	return views, more, nil
}

// WindowsLatest is WindowsBounded for the last limit windows of the range
// (state.Bound.Latest), in start order, and whether there are earlier
// ones: what a page showing a key's recent windows reads. Open session and
// sliding windows, computed from the key's keyed state, are the latest of
// a key's windows and are among them.
func (p *Processor) WindowsLatest(ctx context.Context, key, kind string, from, to time.Time, limit int) ([]state.View, bool, error) {
	views, more, err := p.views.QueryBounded(ctx, p.cfg.Name, key, kind, from, to, state.Bound{Limit: limit, Latest: true})
	if err != nil {
		return nil, false, err
	}
	open, err := p.open(ctx, key, kind, from, to, views, func(window.Window) bool { return true })
	if err != nil {
		return nil, false, err
	}
	views = append(views, open...)
	sort.SliceStable(views, func(i, j int) bool { return windowBefore(views[i].Window, views[j].Window) })
	if len(views) > limit {
		views, more = views[len(views)-limit:], true
	}
	return views, more, nil
}

// open is key's windows of kind that start in [from, to), are not among
// stored and that take says to, with their running value: session and
// sliding windows from the key's keyed state (openKeyed), tumbling and
// hopping windows from the shards' carries (openCarried).
func (p *Processor) open(ctx context.Context, key, kind string, from, to time.Time, stored []state.View, take func(window.Window) bool) ([]state.View, error) {
	open, err := p.openKeyed(ctx, key, kind, from, to, stored, take)
	if err != nil || len(open) > 0 {
		return open, err
	}
	return p.openCarried(ctx, key, kind, from, to, stored, take)
}

// openCarried is key's tumbling or hopping windows of kind that start in
// [from, to), are not among stored and that take says to, which a shard's
// carry holds (carry.go): open, with the running value of the records
// flushed so far. A window a flush wrote open (a carry that was full)
// shows what was written.
func (p *Processor) openCarried(ctx context.Context, key, kind string, from, to time.Time, stored []state.View, take func(window.Window) bool) ([]state.View, error) {
	ws, ok := p.specOf(kind)
	if !ok || isKeyedKind(ws.Kind) || !p.carries() {
		return nil, nil
	}
	carries, err := p.views.Carries(ctx, p.cfg.Name)
	if err != nil {
		return nil, err
	}
	have := windowIDs(stored)
	var open []state.View
	for _, sc := range carries {
		if len(sc.Data) == 0 {
			continue
		}
		c := shardCarry{shard: sc.Shard, sets: map[setKey]*partial{}}
		if err := p.decodeCarry(sc.Data, &c); err != nil {
			return nil, fmt.Errorf("aggregate: the carry of %s %s: %w", p.cfg.Name, sc.Shard, err)
		}
		mine := map[setKey]*partial{}
		for k, pt := range c.sets {
			if k.key == key && k.kind == kind {
				mine[k] = pt
			}
		}
		for k, pt := range windowPartials(mine, p.advance) {
			w := k.win
			if !w.End.After(c.closed) || have[w.ID()] || w.Start.Before(from) || !w.Start.Before(to) || !take(w) {
				continue
			}
			have[w.ID()] = true
			open = append(open, state.View{Pipeline: p.cfg.Name, Key: key, Kind: kind, Window: w, Result: pt.st.Result()})
		}
	}
	return open, nil
}

// openKeyed is key's session or sliding windows of kind that start in
// [from, to), are not among stored and not emitted (open), and that take
// says to: each with its running value, computed from the key's keyed
// state (a read, no write). Other kinds have none.
func (p *Processor) openKeyed(ctx context.Context, key, kind string, from, to time.Time, stored []state.View, take func(window.Window) bool) ([]state.View, error) {
	ws, ok := p.specOf(kind)
	if !ok || !isKeyedKind(ws.Kind) {
		return nil, nil
	}
	ks, err := p.views.LoadKeyed(ctx, state.KeyedRef{Pipeline: p.cfg.Name, Key: key, Kind: kind}, "")
	if err != nil {
		return nil, err
	}
	buf, err := decodeKeyed(ks.Blob)
	if err != nil {
		return nil, err
	}
	have := windowIDs(stored)
	var open []state.View
	for _, kw := range keyedWindows(ws, buf) {
		w := kw.w
		if have[w.ID()] || w.Start.Before(from) || !w.Start.Before(to) || !take(w) {
			continue
		}
		if _, emitted := buf.Emitted[w.ID()]; emitted {
			continue // final, stored (or being written)
		}
		st, err := kw.value(p.cfg.Aggregates, buf.Points)
		if err != nil {
			return nil, err
		}
		open = append(open, state.View{Pipeline: p.cfg.Name, Key: key, Kind: kind, Window: w, Result: st.Result()})
	}
	return open, nil
}

// windowIDs is the set of stored's window ids.
func windowIDs(stored []state.View) map[string]bool {
	have := make(map[string]bool, len(stored))
	for _, v := range stored {
		have[v.Window.ID()] = true
	}
	return have
}

// windowBefore orders windows by start, then end: the order of their
// sort keys in the views table.
func windowBefore(a, b window.Window) bool {
	if !a.Start.Equal(b.Start) {
		return a.Start.Before(b.Start)
	}
	return a.End.Before(b.End)
}
