package aggregate

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// listedWindow is one window a batch or a flush writes for some keys, which
// a listing names for the finalize (state.ListWindow).
type listedWindow struct {
	kind string
	win  window.Window
}

// listWindows lists the windows a batch or a flush has written, for the
// finalize: one listing write per window (per 16 KB of keys), where each
// window item used to enter the open-windows index (and leave it when
// published), two index write units per key and window. It returns the
// windows whose listing failed: a window written but not listed would
// never be finalized, so their records are retried, and the retry, finding
// them applied, lists them.
func (p *Processor) listWindows(ctx context.Context, shard string, keys map[listedWindow][]string) map[listedWindow]error {
	wins := make([]listedWindow, 0, len(keys))
	for w := range keys {
		wins = append(wins, w)
	}
	var (
		mu     sync.Mutex
		failed map[listedWindow]error
		writes int
	)
	openIn := p.openIn(shard)
	parallel(len(wins), p.concurrency, func(i int) {
		w := wins[i]
		ks := keys[w]
		sort.Strings(ks) // the same keys make the same groups on a retry
		n, err := p.views.ListWindow(ctx, openIn, w.kind, w.win, ks)
		mu.Lock()
		defer mu.Unlock()
		writes += n
		if err != nil {
			if failed == nil {
				failed = map[listedWindow]error{}
			}
			failed[w] = err
		}
	})
	p.metrics.Add("WriteRequests", metrics.Count, float64(writes))
	return failed
}

// due is what a finalize at until looks at: the keyed states and
// (from before window listings) window items the open-windows index lists
// under the shard, the window items its listings name, and those listings.
func (p *Processor) due(ctx context.Context, shard string, until time.Time) ([]state.Ref, []state.Listing, error) {
	refs, err := p.views.OpenWindows(ctx, p.openIn(shard), until)
	if err != nil {
		return nil, nil, err
	}
	listings, err := p.views.Listings(ctx, p.openIn(shard), until)
	if err != nil {
		return nil, nil, err
	}
	seen := make(map[state.Ref]bool, len(refs))
	for _, r := range refs {
		seen[r] = true
	}
	for i := range listings {
		for _, r := range listings[i].Refs(p.cfg.Name) {
			if !seen[r] {
				seen[r] = true
				refs = append(refs, r)
			}
		}
	}
	return refs, listings, nil
}

// dropListings deletes listings whose windows are all published.
func (p *Processor) dropListings(ctx context.Context, listings []state.Listing) error {
	var (
		mu       sync.Mutex
		firstErr error
		writes   int
	)
	parallel(len(listings), p.concurrency, func(i int) {
		n, err := p.views.DropListing(ctx, listings[i])
		mu.Lock()
		defer mu.Unlock()
		writes += n
		if err != nil && firstErr == nil {
			firstErr = err
		}
	})
	p.metrics.Add("WriteRequests", metrics.Count, float64(writes))
	return firstErr
}

// isNoWindow reports a listed window whose item was never written.
func isNoWindow(err error) bool { return errors.Is(err, state.ErrNoWindow) }
