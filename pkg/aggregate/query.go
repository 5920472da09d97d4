package aggregate

import (
	"context"
	"sort"
	"time"

	"github.com/tributary-dev/tributary/pkg/state"
)

// Windows returns key's windows of one kind that start in [from, to): final
// ones (with their revision) as stored, and open ones with their running
// value. For tumbling and hopping windows both are window items; session and
// sliding windows that are still open live in the key's keyed state and are
// computed from it here (a read, no write).
func (p *Processor) Windows(ctx context.Context, key, kind string, from, to time.Time) ([]state.View, error) {
	views, err := p.views.Query(ctx, p.cfg.Name, key, kind, from, to)
	if err != nil {
		return nil, err
	}
	ws, ok := p.specOf(kind)
	if !ok || !isKeyedKind(ws.Kind) {
		return views, nil
	}
	ks, err := p.views.LoadKeyed(ctx, state.KeyedRef{Pipeline: p.cfg.Name, Key: key, Kind: kind}, "")
	if err != nil {
		return nil, err
	}
	buf, err := decodeKeyed(ks.Blob)
	if err != nil {
		return nil, err
	}
	stored := map[string]bool{}
	for _, v := range views {
		stored[v.Window.ID()] = true
	}
	for _, kw := range keyedWindows(ws, buf) {
		w := kw.w
		if stored[w.ID()] || w.Start.Before(from) || !w.Start.Before(to) {
			continue
		}
		if _, emitted := buf.Emitted[w.ID()]; emitted {
			continue // final, stored (or being written)
		}
		st, err := kw.value(p.cfg.Aggregates, buf.Points)
		if err != nil {
			return nil, err
		}
		views = append(views, state.View{Pipeline: p.cfg.Name, Key: key, Kind: kind, Window: w, Result: st.Result()})
	}
	sort.Slice(views, func(i, j int) bool { return views[i].Window.Start.Before(views[j].Window.Start) })
	return views, nil
}
