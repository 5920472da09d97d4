package join

import "sort"

// The join of one key, as a pure state machine: no AWS, no clock. The
// handler feeds it each record with the shard's watermark just before that
// record (so its decisions do not depend on how Lambda cut the batches) and
// stores the state it leaves in one DynamoDB item per key.
//
// A record joins the other side's records that are still open when it
// arrives; a record's window closes when the watermark passes its event
// time + Within (left) or + Before (right), and then — never earlier — a
// left (left and outer joins) or right (outer join) record that joined
// nothing is emitted as unmatched. A record that arrives after its own
// window closed is late and dropped. So each left record ends with either
// one joined record per match or exactly one unmatched record, never both.

// Side is which input a record is from.
type Side uint8

// The sides.
const (
	SideLeft Side = iota
	SideRight
)

// rec is one buffered record of a key.
type rec struct {
	n       uint32 // ordinal in the key's state: outbox entries refer to it
	side    Side
	matched bool
	closed  bool // its window has closed; kept only while the outbox refers to it
	t       int64
	id      string
	data    []byte // compact JSON, nil when the event had none
}

// rate is one window of the derived click-through rate: left records whose
// window closed, and how many of them joined.
type rate struct {
	start         int64
	left, matched uint32
}

type outKind uint8

const (
	outJoined outKind = iota + 1
	outLeftOnly
	outRightOnly
	outRate
)

// outRef is one output of the last fold, by reference to the records it
// is made of, so that the state stores each record once however many
// outputs name it.
type outRef struct {
	kind outKind
	l, r uint32
	rate rate
}

// keyState is one join key's state: its open records of both sides (and
// the records closed by the last fold that its outputs name), its open
// rate windows, and the outputs of the last fold (the outbox).
type keyState struct {
	next  uint32
	recs  []rec // by event time, then arrival
	rates []rate
	out   []outRef

	// Not stored: the key (its outputs carry it), and the size on the
	// stream of the outputs added since the outbox was last compacted
	// (a fold starts from an empty outbox: the runner sends and compacts
	// it first).
	key      string
	outBytes int
	// refused is what the last record add refused for its outputs made.
	refused struct{ matches, bytes int }
}

// fate is what add did with a record.
type fate uint8

const (
	added fate = iota + 1
	late
	overBudget
	// tooManyOutputs: the record would make more joined records than
	// Limits.MaxOutputBytes (keyState.refused says how many).
	tooManyOutputs
)

// Limits bound a key's state so that its item always fits in DynamoDB's
// 400 KB: see the package doc.
type Limits struct {
	// MaxRecordData bounds one record's data (compact JSON); a bigger
	// record is set aside.
	MaxRecordData int
	// MaxOpenBytes bounds the encoded size of a key's open records; a
	// record that would take it past is set aside.
	MaxOpenBytes int
	// FoldBytes ends a key's fold early (the rest of its records are
	// reported and come again) once its state with the fold's outputs
	// (their size on the stream) reaches this size.
	FoldBytes int
	// MaxOutputBytes bounds the size on the stream of the joined records
	// one record makes (it joins every open record of the other side); a
	// record that would make more is set aside. A fold's outputs are put
	// in one go, and again whole on a retry, so they must be what the
	// joins stream takes in one try: with FoldBytes, at most about
	// FoldBytes + MaxOutputBytes, under the 1 MiB a second a shard takes.
	// 0 is DefaultLimits' value.
	MaxOutputBytes int
}

// DefaultLimits keep a key's item under 250 KB and a fold's outputs under
// 704 KiB.
var DefaultLimits = Limits{MaxRecordData: 16 << 10, MaxOpenBytes: 128 << 10, FoldBytes: 192 << 10, MaxOutputBytes: 512 << 10}

func (l Limits) maxOutputBytes() int {
	if l.MaxOutputBytes == 0 {
		return DefaultLimits.MaxOutputBytes
	}
	return l.MaxOutputBytes
}

func (c *Config) ms() (within, before, rateWindow int64) {
	return c.Within.Milliseconds(), c.Before.Milliseconds(), c.RateWindow.Milliseconds()
}

// closeAt is the watermark (Unix ms) at which r's window is closed.
func (c *Config) closeAt(side Side, t int64) int64 {
	within, before, _ := c.ms()
	if side == SideLeft {
		return t + within + 1
	}
	return t + before + 1
}

// joins reports whether a left record at lt and a right record at rt join.
func (c *Config) joins(lt, rt int64) bool {
	within, before, _ := c.ms()
	return rt >= lt-before && rt <= lt+within
}

// rateStart is the start of the rate window holding t.
func (c *Config) rateStart(t int64) int64 {
	_, _, size := c.ms()
	s := t - t%size
	if t < 0 && t%size != 0 {
		s -= size
	}
	return s
}

// rateFinalAt is the watermark at which rate window start is final: every
// left record in it has closed, and any later one would be late.
func (c *Config) rateFinalAt(start int64) int64 {
	within, _, size := c.ms()
	return start + size + within
}

// advance closes what the watermark wm (Unix ms) has passed: unmatched
// records are emitted per the kind, closed left records are counted in
// their rate window, and final rate windows are emitted.
func (c *Config) advance(st *keyState, wm int64) {
	for i := range st.recs {
		r := &st.recs[i]
		if r.closed || c.closeAt(r.side, r.t) > wm {
			continue
		}
		r.closed = true
		if r.side == SideLeft {
			if !r.matched && c.Kind != Inner {
				c.addOutput(st, outRef{kind: outLeftOnly, l: r.n}, r, nil)
			}
			if c.RateWindow > 0 {
				st.countRate(c.rateStart(r.t), r.matched)
			}
		} else if !r.matched && c.Kind == Outer {
			c.addOutput(st, outRef{kind: outRightOnly, r: r.n}, nil, r)
		}
	}
	if len(st.rates) > 0 {
		kept := st.rates[:0]
		for _, rt := range st.rates {
			if c.rateFinalAt(rt.start) <= wm {
				c.addOutput(st, outRef{kind: outRate, rate: rt}, nil, nil)
				continue
			}
			kept = append(kept, rt)
		}
		st.rates = kept
	}
}

// addOutput adds o, made of l and r, to the outbox.
func (c *Config) addOutput(st *keyState, o outRef, l, r *rec) {
	st.out = append(st.out, o)
	st.outBytes += c.outputSize(st.key, o, l, r)
}

func (st *keyState) countRate(start int64, matched bool) {
	i := sort.Search(len(st.rates), func(i int) bool { return st.rates[i].start >= start })
	if i == len(st.rates) || st.rates[i].start != start {
		st.rates = append(st.rates, rate{})
		copy(st.rates[i+1:], st.rates[i:])
		st.rates[i] = rate{start: start}
	}
	st.rates[i].left++
	if matched {
		st.rates[i].matched++
	}
}

// add folds a record in at the watermark wm just before it: closes what
// wm passed, drops the record if its own window has closed, sets it aside
// if the key's open records would outgrow lim or its joined records
// would be more than lim lets one record make, and otherwise joins it with
// every open record of the other side and buffers it.
func (c *Config) add(st *keyState, r rec, wm int64, lim Limits) fate {
	c.advance(st, wm)
	if c.closeAt(r.side, r.t) <= wm {
		return late
	}
	if st.openBytes()+recBytes(&r) > lim.MaxOpenBytes {
		return overBudget
	}
	r.n = st.next
	var matches []int
	size, most := 0, lim.maxOutputBytes()
	for i := range st.recs {
		o := &st.recs[i]
		if o.closed || o.side == r.side {
			continue
		}
		l, rr := o, &r
		if r.side == SideLeft {
			l, rr = &r, o
		}
		if !c.joins(l.t, rr.t) {
			continue
		}
		if size <= most { // past it, the record is refused: only count
			size += c.outputSize(st.key, outRef{kind: outJoined, l: l.n, r: rr.n}, l, rr)
		}
		matches = append(matches, i)
	}
	if size > most {
		st.refused.matches, st.refused.bytes = len(matches), size // at least
		return tooManyOutputs
	}
	st.next++
	for _, i := range matches {
		o := &st.recs[i]
		if r.side == SideRight {
			st.out = append(st.out, outRef{kind: outJoined, l: o.n, r: r.n})
		} else {
			st.out = append(st.out, outRef{kind: outJoined, l: r.n, r: o.n})
		}
		o.matched, r.matched = true, true
	}
	st.outBytes += size
	i := sort.Search(len(st.recs), func(i int) bool { return st.recs[i].t > r.t })
	st.recs = append(st.recs, rec{})
	copy(st.recs[i+1:], st.recs[i:])
	st.recs[i] = r
	return added
}

// compact drops what only the last outbox needed: closed records and the
// outbox itself. Call it once the outbox is known to be on the stream.
func (st *keyState) compact() {
	kept := st.recs[:0]
	for _, r := range st.recs {
		if !r.closed {
			kept = append(kept, r)
		}
	}
	st.recs = kept
	st.out = st.out[:0]
	st.outBytes = 0
	if len(st.recs) == 0 && len(st.rates) == 0 {
		st.next = 0
	}
}

// openBytes is the encoded size of the open records.
func (st *keyState) openBytes() int {
	n := 0
	for i := range st.recs {
		if !st.recs[i].closed {
			n += recBytes(&st.recs[i])
		}
	}
	return n
}

// nextDue is the watermark (Unix ms) at which the state next has something
// to close, or 0 when nothing is open.
func (c *Config) nextDue(st *keyState) int64 {
	var due int64
	for i := range st.recs {
		r := &st.recs[i]
		if r.closed {
			continue
		}
		if at := c.closeAt(r.side, r.t); due == 0 || at < due {
			due = at
		}
	}
	for _, rt := range st.rates {
		if at := c.rateFinalAt(rt.start); due == 0 || at < due {
			due = at
		}
	}
	return due
}
