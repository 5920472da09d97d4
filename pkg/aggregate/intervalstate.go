package aggregate

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/tributary-dev/tributary/internal/binenc"
	"github.com/tributary-dev/tributary/pkg/window"
)

// The partials an interval carries are one entry of its window state,
// statePartials, written by appendPartials. Lambda carries at most 1 MB of
// state a shard and ends the interval early past it (a flush, at the cost
// of one): an entry per (key, window) as in the first format (statePartial,
// still read) took some 240 bytes a partial, mostly a window id, two
// 56-digit sequence numbers sharing 52 digits and a key repeated per
// window, so 5,000 keys a shard (1,000 events a second over 10,000 keys)
// overflowed it within seconds. This one takes some 60 bytes a key and
// pane, in base64, where the first took 480 (2,000 keys of the stack's
// pipeline with two records each, TestIntervalStateOfTheStacksPipeline-
// IsSmallPerKey):
//
//	head      appendStateHeader: version (1), the window kinds, base (the
//	          earliest window start) and how many keys
//	uvarint   per kind, its windows' size in ms (that of its first partial)
//	then, per key:
//	uvarint   length, the key
//	uvarint   partials; each:
//	  byte      flags (partialCopy, partialOneSeq, partialSeconds, partialOtherSize)
//	  uvarint   kind: an index into the kinds above
//	  uvarint   first window's start − base, ms (with partialSeconds: s)
//	  uvarint   with partialOtherSize: the window's size in ms, if not its kind's
//	  uvarint   windows (setKey.n)
//	  with partialCopy: uvarint index of an earlier partial of the key whose
//	                    sequence numbers and aggregate it has (a tumbling
//	                    window and the hopping pane it coincides with)
//	  else:     maxSeq against the state's stateSeq, then minSeq against
//	            maxSeq unless partialOneSeq (appendSeq), then uvarint length
//	            and the aggregate (agg.State.AppendCompact)
//
// all in unpadded standard base64. The first format's reader cuts its
// name, "p||", into an empty kind with no window id after it and refuses
// it as malformed: code from before it fails the invocation and Lambda
// retries it, rather than reading the state without its partials and
// losing them.
const (
	statePartials   = "p||"
	partialsVersion = 1
)

// Flags of an encoded partial.
const (
	partialCopy      = 1 << iota // the same as an earlier partial of the key
	partialOneSeq                // minSeq is maxSeq
	partialSeconds               // the start is in whole seconds from the base
	partialOtherSize             // the window's size follows: not its kind's
)

// appendPartials appends the partials' entry (before base64) to b; ref is
// the state's stateSeq, which every sequence number in it is at most and
// shares most digits with.
func appendPartials(b []byte, partials map[setKey]*partial, ref string) []byte {
	return appendPartialsIn(b, partials, nil, ref)
}

// appendPartialsIn is appendPartials writing the partials in order when it
// is not nil (their keys, each once), in the map's order otherwise: a
// carry's are sorted, so a flush sent again writes the same bytes.
func appendPartialsIn(b []byte, partials map[setKey]*partial, order []setKey, ref string) []byte {
	// The partials grouped by key, each group a list threaded through
	// next: a key's tumbling window is compared for a copy only with the
	// key's hopping panes.
	type entry struct {
		k    setKey
		pt   *partial
		next int // the key's next entry, or −1
	}
	kinds := map[string]int{}
	var kindIDs []string
	var kindSizes []int64                             // ms
	groups := make(map[string]int, len(partials)/2+1) // key → index in heads
	entries := make([]entry, 0, len(partials))
	var heads, tails []int
	base := int64(0)
	add := func(k setKey, pt *partial) {
		if _, ok := kinds[k.kind]; !ok {
			kinds[k.kind] = len(kindIDs)
			kindIDs = append(kindIDs, k.kind)
			kindSizes = append(kindSizes, k.win.End.Sub(k.win.Start).Milliseconds())
		}
		if s := k.win.Start.UnixMilli(); len(entries) == 0 || s < base {
			base = s
		}
		entries = append(entries, entry{k: k, pt: pt, next: -1})
		i := len(entries) - 1
		if g, ok := groups[k.key]; ok {
			entries[tails[g]].next, tails[g] = i, i
			return
		}
		groups[k.key] = len(heads)
		heads, tails = append(heads, i), append(tails, i)
	}
	if order != nil {
		for _, k := range order {
			add(k, partials[k])
		}
	} else {
		for k, pt := range partials {
			add(k, pt)
		}
	}
	// The keys follow their count in the head, which is known once they
	// are written (a key none of whose aggregates encodes is left out):
	// they are written to keyed, then after the head.
	var keyed []byte
	written := 0
	// A key's aggregates, encoded before its partials are written: a copy
	// is found by comparing them.
	type encoded struct {
		e          *entry
		start, end int // its aggregate in arena
		copyOf     int // an earlier encoded of the key it equals, or −1
	}
	var arena []byte
	var enc []encoded
	for _, head := range heads {
		arena, enc = arena[:0], enc[:0]
		for i := head; i >= 0; i = entries[i].next {
			e := &entries[i]
			start := len(arena)
			var err error
			if arena, err = e.pt.st.AppendCompact(arena); err != nil {
				// A state that cannot be encoded is not carried, as in the
				// first format (none can fail today).
				arena = arena[:start]
				continue
			}
			x := encoded{e: e, start: start, end: len(arena), copyOf: -1}
			for j := range enc {
				o := &enc[j]
				if o.copyOf < 0 && o.e.pt.minSeq == e.pt.minSeq && o.e.pt.maxSeq == e.pt.maxSeq &&
					bytes.Equal(arena[o.start:o.end], arena[x.start:x.end]) {
					x.copyOf = j
					break
				}
			}
			enc = append(enc, x)
		}
		if len(enc) == 0 {
			continue
		}
		written++
		key := entries[head].k.key
		keyed = binary.AppendUvarint(keyed, uint64(len(key)))
		keyed = append(keyed, key...)
		keyed = binary.AppendUvarint(keyed, uint64(len(enc)))
		for _, x := range enc {
			k, pt := &x.e.k, x.e.pt
			var flags byte
			if x.copyOf >= 0 {
				flags |= partialCopy
			}
			if pt.minSeq == pt.maxSeq {
				flags |= partialOneSeq
			}
			kind := kinds[k.kind]
			from, size := k.win.Start.UnixMilli()-base, k.win.End.Sub(k.win.Start).Milliseconds()
			if from%1000 == 0 {
				flags |= partialSeconds
				from /= 1000
			}
			if size != kindSizes[kind] {
				flags |= partialOtherSize
			}
			keyed = append(keyed, flags)
			keyed = binary.AppendUvarint(keyed, uint64(kind))
			keyed = binary.AppendUvarint(keyed, uint64(from))
			if flags&partialOtherSize != 0 {
				keyed = binary.AppendUvarint(keyed, uint64(size))
			}
			keyed = binary.AppendUvarint(keyed, uint64(k.n))
			if x.copyOf >= 0 {
				keyed = binary.AppendUvarint(keyed, uint64(x.copyOf))
				continue
			}
			keyed = appendSeq(keyed, pt.maxSeq, ref)
			if flags&partialOneSeq == 0 {
				keyed = appendSeq(keyed, pt.minSeq, pt.maxSeq)
			}
			keyed = binary.AppendUvarint(keyed, uint64(x.end-x.start))
			keyed = append(keyed, arena[x.start:x.end]...)
		}
	}
	b = appendStateHeader(b, partialsVersion, kindIDs, base, written)
	for _, size := range kindSizes {
		b = binary.AppendUvarint(b, uint64(size))
	}
	return append(b, keyed...)
}

// decodePartialsEntry reads what appendPartials wrote into out, refusing
// anything it could not have written; ref is the state's stateSeq.
func (p *Processor) decodePartialsEntry(b []byte, ref string, out map[setKey]*partial) error {
	r := binenc.NewReader(b, errStateTruncated)
	kindIDs, base, keys, err := readStateHeader(&r, partialsVersion)
	if err != nil {
		return err
	}
	kindSizes := make([]uint64, len(kindIDs))
	maxN := make([]uint64, len(kindIDs)) // the most windows a partial of each kind is for
	for i, id := range kindIDs {
		kindSizes[i], maxN[i] = r.Uvarint(), p.windowsPerRecord(id)+1
	}
	if r.Err() != nil {
		return r.Err()
	}
	// The keys and the unpacked sequence numbers are gathered in text and
	// made one string at the end, which each is a part of: one allocation,
	// not one a partial.
	type decoded struct {
		k            setKey
		keyAt        [2]int // the key in text
		minAt, maxAt [2]int // the sequence numbers in text
		body         []byte // the aggregate
	}
	var text []byte
	var all []decoded
	refBytes := []byte(ref)
	for range keys {
		key := r.LenBytes()
		keyAt := [2]int{len(text), len(text) + len(key)}
		text = append(text, key...)
		count := r.Uvarint()
		if r.Err() == nil && (count == 0 || count > uint64(r.Len())) {
			return fmt.Errorf("key %q: %d partials in %d bytes", key, count, r.Len())
		}
		first := len(all)
		for i := range count {
			flags := r.Byte()
			if flags&^(partialCopy|partialOneSeq|partialSeconds|partialOtherSize) != 0 {
				return fmt.Errorf("key %q, partial %d: unknown flags %#x", key, i, flags)
			}
			kind, start := r.Uvarint(), r.Uvarint()
			if r.Err() == nil && kind >= uint64(len(kindIDs)) {
				return fmt.Errorf("key %q, partial %d: window kind %d of %d", key, i, kind, len(kindIDs))
			}
			if flags&partialSeconds != 0 {
				if start > uint64(maxPartialWindow)/1000 {
					return fmt.Errorf("key %q, partial %d: window from %d s is out of range", key, i, start)
				}
				start *= 1000
			}
			var size uint64
			if flags&partialOtherSize != 0 {
				size = r.Uvarint()
			} else if r.Err() == nil {
				size = kindSizes[kind]
			}
			n := r.Uvarint()
			if r.Err() != nil {
				return r.Err()
			}
			if start > uint64(maxPartialWindow) || size == 0 || size > uint64(maxPartialWindow) {
				return fmt.Errorf("key %q, partial %d: window from %d ms for %d ms is out of range", key, i, start, size)
			}
			id := kindIDs[kind]
			if n == 0 || n > maxN[kind] {
				return fmt.Errorf("key %q, partial %d: %d windows, want 1 to %d", key, i, n, maxN[kind])
			}
			from := time.UnixMilli(base + int64(start)).UTC()
			d := decoded{k: setKey{upKey{kind: id, win: window.Window{Start: from, End: from.Add(time.Duration(size) * time.Millisecond)}}, int(n)}, keyAt: keyAt}
			if flags&partialCopy != 0 {
				j := r.Uvarint()
				if r.Err() != nil {
					return r.Err()
				}
				if j >= uint64(len(all)-first) {
					return fmt.Errorf("key %q, partial %d: a copy of partial %d", key, i, j)
				}
				o := &all[first+int(j)]
				d.minAt, d.maxAt, d.body = o.minAt, o.maxAt, o.body
				all = append(all, d)
				continue
			}
			var err error
			start0 := len(text)
			if text, err = readSeq(&r, text, refBytes); err != nil {
				return fmt.Errorf("key %q, partial %d: %w", key, i, err)
			}
			d.maxAt = [2]int{start0, len(text)}
			d.minAt = d.maxAt
			if flags&partialOneSeq == 0 {
				start1 := len(text)
				if text, err = readSeq(&r, text, text[start0:start1]); err != nil {
					return fmt.Errorf("key %q, partial %d: %w", key, i, err)
				}
				d.minAt = [2]int{start1, len(text)}
			}
			if d.body = r.LenBytes(); r.Err() != nil {
				return r.Err()
			}
			all = append(all, d)
		}
	}
	if r.Err() != nil {
		return r.Err()
	}
	if r.Len() > 0 {
		return fmt.Errorf("%d bytes after the last key", r.Len())
	}
	strs := string(text)
	slab := make([]partial, len(all)) // one allocation for every partial
	for i := range all {
		d := &all[i]
		d.k.key = strs[d.keyAt[0]:d.keyAt[1]]
		if _, ok := out[d.k]; ok {
			return fmt.Errorf("key %q: the partial of %s windows from %s is there twice", d.k.key, d.k.kind, d.k.win.ID())
		}
		pt := &slab[i]
		pt.own = *p.cfg.Aggregates.New()
		pt.st = &pt.own
		if err := pt.st.SetBinary(d.body); err != nil {
			return fmt.Errorf("key %q, %s windows from %s: %w", d.k.key, d.k.kind, d.k.win.ID(), err)
		}
		pt.minSeq, pt.maxSeq = strs[d.minAt[0]:d.minAt[1]], strs[d.maxAt[0]:d.maxAt[1]]
		out[d.k] = pt
	}
	return nil
}

// encodePartials is appendPartials as the state's entry.
func encodePartials(partials map[setKey]*partial, ref string) string {
	return base64.RawStdEncoding.EncodeToString(appendPartials(nil, partials, ref))
}
