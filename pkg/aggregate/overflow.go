package aggregate

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/state"
)

// Interval overflow (state.PutOverflow). An invocation whose claims or
// points outgrow their share of the window state (carriedBudget) writes
// them as overflow items of the shard, the bytes of many keys in each, and
// names the items in the state it returns; the invocations after it judge
// their records against those claims too, and the flush folds those points
// and commits those claims with the rest, one write per key as when the
// state holds them all. Before, the claims were committed and the points
// folded at once, a write per key with some at most invocations once a
// shard had a few thousand keys.

// stateOverflow names the interval's overflow items, comma separated,
// oldest first. It sits under the stateCarried prefix with no kind
// separator: code from before overflow refuses the state (a malformed
// entry) and Lambda retries the invocation, rather than the code dropping
// what the items hold.
const stateOverflow = stateCarried + "~ovf"

// Kinds of overflow item, its first byte.
const (
	overflowClaims = 'c' // dedupe.AppendPending's bytes
	overflowPoints = 'p' // the base sequence number, then carried.append's bytes
)

// overflowPartBytes bounds the bytes of one overflow item: a share
// larger than that is cut by keys.
var overflowPartBytes = 256 << 10

// maxOverflowName bounds a name read from a state: a sequence number (at
// most 128 digits), its kind and a hash.
const maxOverflowName = 168

// maxKeyBytes bounds a grouping key's bytes in an overflow item (Kinesis
// partition keys are at most 256 characters of UTF-8).
const maxKeyBytes = 1024

// overflowCheaper reports whether writing bytes of claims or points of
// keys keys as overflow costs fewer write units than a write per key now
// (a ledger head or a keyed state, a unit or more each): true while the
// keys average under a KB. Busy keys, hundreds of records each, are
// written per key as before: an overflow item would bill their bytes, and
// the flush again.
func overflowCheaper(bytes, keys int) bool { return bytes < keys<<10 }

// overflow is an interval's overflow items, in the order they were
// written. An invocation looks up its own keys in them (claimsOf,
// pointsOf); the flush takes them all.
type overflow []overflowPart

// claimsOf is the claims of keys (every key when keys is nil), each key's
// in the order they were written.
func (o overflow) claimsOf(keys map[string]bool) map[string][]dedupe.Entry {
	if len(o) == 0 {
		return nil
	}
	out := map[string][]dedupe.Entry{}
	for _, part := range o {
		if keys == nil {
			for k, es := range part.claims {
				out[k] = append(out[k], es...)
			}
			continue
		}
		for k := range keys {
			if es, ok := part.claims[k]; ok {
				out[k] = append(out[k], es...)
			}
		}
	}
	return out
}

// holdsPoints reports whether the items hold points: the interval writes
// its points there from then on, never folding them before the flush (a
// fold moves the key's fence past the points it folds, and the flush's,
// meeting older points in an item, would take them for redeliveries).
func (o overflow) holdsPoints() bool {
	for _, part := range o {
		if len(part.points) > 0 {
			return true
		}
	}
	return false
}

// pointsOf is the points of the grouping keys keys (every key when keys
// is nil), each key's in arrival order.
func (o overflow) pointsOf(keys map[string]bool) carried {
	out := carried{}
	for _, part := range o {
		for k, pts := range part.points {
			if keys == nil || keys[k.key] {
				out[k] = append(out[k], pts...)
			}
		}
	}
	return out
}

// overflowPart is one overflow item, decoded; never changed once made (a
// process keeps it for the invocations after).
type overflowPart struct {
	claims map[string][]dedupe.Entry
	points carried
	bytes  int
}

// overflowNames reads the names a state holds.
func overflowNames(st map[string]string) ([]string, error) {
	v, ok := st[stateOverflow]
	if !ok {
		return nil, nil
	}
	names := strings.Split(v, ",")
	for _, n := range names {
		if n == "" || len(n) > maxOverflowName || strings.ContainsAny(n, "|#") {
			return nil, fmt.Errorf("aggregate: window state %q: overflow name %q is not one this function writes", stateOverflow, n)
		}
	}
	return names, nil
}

// loadOverflow reads the overflow items names (the process's copy of each
// when it has one) and merges them in order.
func (p *Processor) loadOverflow(ctx context.Context, shard string, names []string) (overflow, error) {
	if len(names) == 0 {
		return nil, nil
	}
	parts := make(overflow, len(names))
	errs := make([]error, len(names))
	parallel(len(names), p.concurrency, func(i int) {
		if part, ok := p.keptOverflow(shard, names[i]); ok {
			parts[i] = part
			return
		}
		b, err := p.views.Overflow(ctx, p.cfg.Name, shard, names[i])
		if err == nil {
			parts[i], err = decodeOverflow(b)
		}
		if err == nil && p.ledger != nil {
			// Claims an item of code from before the hash ranges holds per key.
			parts[i].claims = p.ledger.Regroup(parts[i].claims)
		}
		if err != nil {
			errs[i] = fmt.Errorf("aggregate: overflow %s of %s: %w", names[i], shard, err)
			return
		}
		p.keepOverflow(shard, names[i], parts[i])
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// decodeOverflow reads an overflow item's bytes, refusing anything
// writeOverflow could not have written.
func decodeOverflow(b []byte) (overflowPart, error) {
	part := overflowPart{bytes: len(b)}
	if len(b) == 0 {
		return part, fmt.Errorf("an empty overflow item")
	}
	switch b[0] {
	case overflowClaims:
		claims, err := dedupe.ReadPending(b[1:])
		if err != nil {
			return part, err
		}
		part.claims = claims
	case overflowPoints:
		n, w := binary.Uvarint(b[1:])
		if w <= 0 || n == 0 || n > maxCarriedSeq || uint64(len(b)-1-w) < n {
			return part, fmt.Errorf("overflow points: a base sequence number of %d digits", n)
		}
		ref := string(b[1+w : 1+w+int(n)])
		part.points = carried{}
		if err := decodeCarriedAll(b[1+w+int(n):], ref, part.points); err != nil {
			return part, fmt.Errorf("overflow points: %w", err)
		}
	default:
		return part, fmt.Errorf("an overflow item of kind %q", b[0])
	}
	return part, nil
}

// writeOverflowClaims writes claims as overflow items of shard and returns
// their names; at is the last record the invocation accumulated.
func (p *Processor) writeOverflowClaims(ctx context.Context, shard, at string, claims map[string][]dedupe.Entry) ([]string, error) {
	var names []string
	// A key with more claims than a part holds has them cut into parts
	// of their own, in order (claimsOf joins a key's claims across parts).
	per := max(1, (overflowPartBytes-1-2*binary.MaxVarintLen64-maxKeyBytes)/dedupe.PendingBytes("", 1))
	rest := make(map[string][]dedupe.Entry, len(claims))
	for _, k := range slices.Sorted(maps.Keys(claims)) {
		es := claims[k]
		for len(es) > per {
			part := map[string][]dedupe.Entry{k: es[:per:per]}
			b := dedupe.AppendPending([]byte{overflowClaims}, part)
			name, err := p.putOverflow(ctx, shard, at, overflowClaims, b, overflowPart{claims: part, bytes: len(b)})
			if err != nil {
				return nil, err
			}
			names = append(names, name)
			es = es[per:]
		}
		rest[k] = es
	}
	claims = rest
	keys := slices.Sorted(maps.Keys(claims))
	for len(keys) > 0 {
		n, size := 0, 1
		for n < len(keys) && (n == 0 || size+dedupe.PendingBytes(keys[n], len(claims[keys[n]])) <= overflowPartBytes) {
			size += dedupe.PendingBytes(keys[n], len(claims[keys[n]]))
			n++
		}
		part := make(map[string][]dedupe.Entry, n)
		for _, k := range keys[:n] {
			part[k] = claims[k]
		}
		keys = keys[n:]
		b := dedupe.AppendPending(append(make([]byte, 0, size), overflowClaims), part)
		name, err := p.putOverflow(ctx, shard, at, overflowClaims, b, overflowPart{claims: part, bytes: len(b)})
		if err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// writeOverflowPoints writes points as overflow items of shard, each
// key's points against ref (the state's stateSeq), and returns their
// names; a share past overflowPartBytes is cut in two by keys.
func (p *Processor) writeOverflowPoints(ctx context.Context, shard, at, ref string, points carried) ([]string, error) {
	if len(points) == 0 {
		return nil, nil
	}
	b := binary.AppendUvarint([]byte{overflowPoints}, uint64(len(ref)))
	b = points.append(append(b, ref...), ref)
	if len(b) > overflowPartBytes && len(points) == 1 {
		// One key's points past a part: cut in two, in arrival order
		// (pointsOf joins a key's points across parts in order).
		for k, pts := range points {
			if len(pts) > 1 {
				h := len(pts) / 2
				first, err := p.writeOverflowPoints(ctx, shard, at, ref, carried{k: pts[:h:h]})
				if err != nil {
					return nil, err
				}
				second, err := p.writeOverflowPoints(ctx, shard, at, ref, carried{k: pts[h:]})
				return append(first, second...), err
			}
		}
	}
	if len(b) > overflowPartBytes && len(points) > 1 {
		keys := slices.SortedFunc(maps.Keys(points), func(a, b keyedKey) int {
			return strings.Compare(a.key+"|"+a.kind, b.key+"|"+b.kind)
		})
		half, rest := carried{}, carried{}
		for i, k := range keys {
			if i < len(keys)/2 {
				half[k] = points[k]
			} else {
				rest[k] = points[k]
			}
		}
		first, err := p.writeOverflowPoints(ctx, shard, at, ref, half)
		if err != nil {
			return nil, err
		}
		second, err := p.writeOverflowPoints(ctx, shard, at, ref, rest)
		return append(first, second...), err
	}
	name, err := p.putOverflow(ctx, shard, at, overflowPoints, b, overflowPart{points: points, bytes: len(b)})
	if err != nil {
		return nil, err
	}
	return []string{name}, nil
}

// putOverflow writes one overflow item, named by at, its kind and a hash
// of its bytes (the same name, the same bytes: a process's copy is never
// stale), and keeps part, its decoded form.
func (p *Processor) putOverflow(ctx context.Context, shard, at string, kind byte, b []byte, part overflowPart) (string, error) {
	if len(b) > state.MaxOverflowBytes {
		return "", fmt.Errorf("aggregate: an overflow item of %d bytes, past %d: one key's share of the window state is larger than an item", len(b), state.MaxOverflowBytes)
	}
	sum := sha256.Sum256(b)
	name := fmt.Sprintf("%s.%c.%x", at, kind, sum[:16])
	if err := p.views.PutOverflow(ctx, p.cfg.Name, shard, name, b); err != nil {
		return "", err
	}
	p.metrics.Add("WriteRequests", metrics.Count, 1)
	p.keepOverflow(shard, name, part)
	return name, nil
}

// keptOverflow is the process's copy of an overflow item.
func (p *Processor) keptOverflow(shard, name string) (overflowPart, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	part, ok := p.overflowKept[shard+"/"+name]
	return part, ok
}

// keepOverflow keeps a copy of an overflow item for the invocations after
// (at most maxOverflowKept bytes: past it the copies are let go).
func (p *Processor) keepOverflow(shard, name string, part overflowPart) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.overflowKept == nil || p.overflowKeptBytes+part.bytes > maxOverflowKept {
		p.overflowKept, p.overflowKeptBytes = map[string]overflowPart{}, 0
	}
	p.overflowKept[shard+"/"+name] = part
	p.overflowKeptBytes += part.bytes
}

// forgetOverflow lets go of the copies of shard's overflow items: its
// interval has flushed.
func (p *Processor) forgetOverflow(shard string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, part := range p.overflowKept {
		if strings.HasPrefix(k, shard+"/") {
			delete(p.overflowKept, k)
			p.overflowKeptBytes -= part.bytes
		}
	}
}

// maxOverflowKept bounds the bytes of overflow items a process keeps.
const maxOverflowKept = 64 << 20

// withOverflowClaims is carried with ovf's claims (overflow.claimsOf)
// before each key's own: the claims an interval made so far, to judge
// against.
func withOverflowClaims(carried, ovf map[string][]dedupe.Entry) map[string][]dedupe.Entry {
	if len(ovf) == 0 {
		return carried
	}
	out := make(map[string][]dedupe.Entry, len(carried)+len(ovf))
	for k, es := range carried {
		out[k] = es
	}
	for k, es := range ovf {
		out[k] = append(slices.Clip(es), out[k]...)
	}
	return out
}

// withoutOverflowClaims drops from pending the claims ovf holds: they are
// in an overflow item already, not the state.
func withoutOverflowClaims(pending, ovf map[string][]dedupe.Entry) map[string][]dedupe.Entry {
	for k, es := range ovf {
		have, ok := pending[k]
		if !ok {
			continue
		}
		// Whole entries, not ids: a copy past the horizon of a claim in an
		// item makes a claim of its own, under the same id, that the
		// state carries.
		spilled := make(map[dedupe.Entry]bool, len(es))
		for _, e := range es {
			spilled[e] = true
		}
		left := make([]dedupe.Entry, 0, len(have))
		for _, e := range have {
			if !spilled[e] {
				left = append(left, e)
			}
		}
		if len(left) == 0 {
			delete(pending, k)
		} else {
			pending[k] = left
		}
	}
	return pending
}

// withOverflowPoints is keep with ovf's points of each key before its own
// (arrival order), in new slices.
func withOverflowPoints(keep, ovf carried) carried {
	if len(ovf) == 0 {
		return keep
	}
	out := make(carried, len(keep)+len(ovf))
	for k, pts := range ovf {
		out[k] = slices.Clip(pts)
	}
	for k, pts := range keep {
		out[k] = append(out[k], pts...)
	}
	return out
}
