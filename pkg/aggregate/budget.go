package aggregate

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// A key's session and sliding windows are computed from its recent points,
// kept in one keyed state item per window kind (keyed.go). A key that keeps
// sending without the pause that closes its session (or a flood within a
// sliding window's reach) would grow that item past DynamoDB's limit, and
// every batch would then fail on it: the shard would stop. So a batch whose
// points would take a key's state past MaxKeyedStateBytes has that key's
// records set aside — in every window kind, so no window counts a record the
// others do not — with a reason naming the key; the key takes records again
// once finalization prunes the points its windows no longer need.

// overBudget returns, per grouping key whose keyed state cannot take this
// batch's records, why. It reads the states the warm cache lacks (the cache
// then serves the fold). A point is counted at its largest encoding, so the
// check is conservative by a few kilobytes at most.
func (p *Processor) overBudget(ctx context.Context, c *collector) (map[string]string, error) {
	var kinds []string
	for _, ws := range p.cfg.Windows {
		if isKeyedKind(ws.Kind) {
			kinds = append(kinds, ws.ID())
		}
	}
	if len(kinds) == 0 {
		return nil, nil
	}
	counts := map[string]int{}
	for i := range c.decoded {
		if c.applies(i) {
			counts[c.decoded[i].key]++
		}
	}
	for key := range counts {
		counts[key] += c.carriedPerKey[key] // carried to the flush, in no state yet
	}
	// The states the warm cache lacks are read at the handler's write
	// concurrency, not one after another: a carried invocation meets
	// hundreds of keys new to this container, and one read at a time
	// (about 4 ms each) made it wait a second (BENCH keepup).
	type check struct {
		key  string
		kind string
		n    int
		size int
		err  error
	}
	checks := make([]check, 0, len(counts)*len(kinds))
	for key, n := range counts {
		for _, kind := range kinds {
			checks = append(checks, check{key: key, kind: kind, n: n})
		}
	}
	parallel(len(checks), p.concurrency, func(i int) {
		k := &checks[i]
		ref := state.KeyedRef{Pipeline: p.cfg.Name, Key: k.key, Kind: k.kind}
		k.size, k.err = p.keyedSize(ctx, ref, c.shard)
		if k.err == nil && k.size+k.n*pointBytesMax > MaxKeyedStateBytes {
			// Over by the copy: read the state before setting records
			// aside. The copy may be older than a prune another
			// writer (the ticker) saved since, and no save of this
			// batch's would find that out: its records never reach one.
			p.forgetKeyed(ref, c.shard)
			k.size, k.err = p.keyedSize(ctx, ref, c.shard)
		}
	})
	var over map[string]string
	for _, k := range checks {
		if k.err != nil {
			return nil, k.err
		}
		if _, done := over[k.key]; done || k.size+k.n*pointBytesMax <= MaxKeyedStateBytes {
			continue
		}
		if fits, err := p.sessionFits(c, k.key, k.kind, k.size); err != nil {
			return nil, err
		} else if fits {
			continue // its runs are held as their aggregates (sessionfold.go)
		}
		if over == nil {
			over = map[string]string{}
		}
		over[k.key] = fmt.Sprintf("the %s state of key %q holds %d bytes of points; %d more records would take it past its %d-byte budget (one DynamoDB item): the key's records are set aside until its windows close and the points they no longer need are pruned",
			k.kind, k.key, k.size, k.n, MaxKeyedStateBytes)
	}
	return over, nil
}

// keyedSize is the encoded size of a keyed state: from the warm copy, or
// read (and kept for the fold).
func (p *Processor) keyedSize(ctx context.Context, ref state.KeyedRef, shard string) (int, error) {
	if c, ok := p.keptKeyed(ctx, ref, shard); ok {
		return len(c.Blob), nil
	}
	ks, err := p.views.LoadKeyed(ctx, ref, shard)
	if err != nil {
		return 0, err
	}
	if _, err := decodeKeyed(ks.Blob); err != nil {
		return 0, err
	}
	p.rememberKeyed(ref, shard, ks)
	return len(ks.Blob), nil
}

// sessionFits reports whether a session state of size bytes takes the
// records of key in c (this invocation's and those carried to its flush)
// once its runs are held as their aggregates, as its fold holds them past
// sessionFoldBytes (sessionBound). Each record gets the close time it will
// be routed at, as routing gives it (the watermark as the records before
// it leave it).
func (p *Processor) sessionFits(c *collector, key, kind string, size int) (bool, error) {
	ws, ok := p.specOf(kind)
	if !ok || ws.Kind != pipeline.Session {
		return false, nil
	}
	var fresh []point
	for _, pt := range c.carried[keyedKey{key: key, kind: kind}] {
		fresh = append(fresh, pt.point)
	}
	wm := *c.wm
	for i := range c.decoded {
		if !c.applies(i) {
			continue
		}
		d := &c.decoded[i]
		if d.key == key {
			fresh = append(fresh, point{T: d.et.UnixMilli(), V: d.value, D: distinctHash(d.distinct), Th: p.thresholdAt(&wm, d.et)})
		}
		wm.Observe(d.et)
	}
	bound, err := sessionBound(p.cfg.Aggregates, ws.Gap.Milliseconds(), fresh)
	if err != nil {
		return false, err
	}
	return size+bound <= MaxKeyedStateBytes, nil
}
