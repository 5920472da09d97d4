package state

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/window"
)

// Result pages. A window a shard's carry held to its close is created
// final with every record of it in one write (Update.Fresh). Written one
// item per key, each such result is billed a whole write unit for half a
// KB, most of it names; ApplyFresh writes the results of all the keys of
// one page bucket (PageBucket) that one flush closes in one window as one
// page item instead: a page is the fresh items of its keys, in one write.
//
// A page is written once, whole, by the flush (or tick) that closes its
// window, conditioned on no page being there: pk
// "~page#<pipeline>#<kind>#<bucket>", sk "<window id>|<shard>|<part>".
// It holds each key's encoded state, the shard's fence (the highest
// sequence number its entries hold) and the lowest, and the number its
// creating write drew (as a fresh item does): the write that created it
// logs its results; one that meets it, its records applied, sends them
// again (Result.Resend). A bucket whose entries outgrow a page is cut into
// parts by bytes, in key order, the same cut for the same entries, written
// part 0 first, so a writer whose part 0 is refused writes no other.
//
// A key's entry is its window's revision 1, published. Everything that
// changes a window after (a late record's correction, a retraction) is a
// per-key item: a write marked Update.Paged that finds no item looks for
// the key's entry and, finding it, first creates the item the fresh write
// would have created (final, revision 1, marked fresh, the page's fence),
// then goes on as a write meeting that item does. Readers (Query,
// PublishedRevision) take a window's per-key item over its page entry.

const (
	pagePrefix = "~page#"

	attrEntries = "entries" // the page's entries (encodeEntries)
	attrShard   = "shard"   // the shard whose flush wrote the page
	attrLowest  = "lo"      // the fence of the lowest record its entries hold
	attrPart    = "part"    // this part's number, from 0
	attrPartsOf = "partsOf" // how many parts the page has
	attrNKeys   = "nkeys"   // how many entries this part holds

	// PageBuckets is how many buckets a pipeline's pages of one window
	// kind are kept in: a key's page is found from the key alone.
	PageBuckets = 8

	// pagePartBytes bounds a page part's entries: about 900 keys of a
	// window of a few records, read whole by a late record's lookup.
	pagePartBytes = 64 << 10
)

// PageBucket is the bucket key's pages are in: FNV-1a of the key, modulo
// PageBuckets. Stored: it never changes.
func PageBucket(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % PageBuckets)
}

func pagePK(pipeline, kind string, bucket int) string {
	return pagePrefix + pipeline + "#" + kind + "#" + strconv.Itoa(bucket)
}

func pageSK(w window.Window, shard string, part int) string {
	return fmt.Sprintf("%s|%s|%03d", w.ID(), shard, part)
}

// IsPageItem reports whether item is a result page (ApplyFresh).
func IsPageItem(item map[string]types.AttributeValue) bool {
	return strings.HasPrefix(stringAttr(item, attrPK), pagePrefix)
}

// pageEntry is one key's result in a page: its encoded state.
type pageEntry struct {
	key   string
	state []byte
	count uint64
}

// encodeEntries is entries (sorted by key) as a page stores them: for each,
// the key's and the state's lengths (uvarint) and bytes.
func encodeEntries(entries []pageEntry) []byte {
	n := 0
	for _, e := range entries {
		n += 2*binary.MaxVarintLen32 + len(e.key) + len(e.state)
	}
	b := make([]byte, 0, n)
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e.key)))
		b = append(b, e.key...)
		b = binary.AppendUvarint(b, uint64(len(e.state)))
		b = append(b, e.state...)
	}
	return b
}

// entryBytes is what e takes in encodeEntries.
func entryBytes(e pageEntry) int {
	return uvarintLen(len(e.key)) + len(e.key) + uvarintLen(len(e.state)) + len(e.state)
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// decodeEntries reads encodeEntries' bytes; an error says where they stop
// making sense. The states are not decoded (the caller decodes the one it
// wants).
func decodeEntries(b []byte) ([]pageEntry, error) {
	var out []pageEntry
	for off := 0; off < len(b); {
		k, n := binary.Uvarint(b[off:])
		if n <= 0 || k > uint64(len(b)-off-n) {
			return nil, fmt.Errorf("entry %d: a key length at byte %d past the %d bytes", len(out), off, len(b))
		}
		off += n
		key := string(b[off : off+int(k)])
		off += int(k)
		s, n := binary.Uvarint(b[off:])
		if n <= 0 || s > uint64(len(b)-off-n) {
			return nil, fmt.Errorf("entry %d (key %q): a state length at byte %d past the %d bytes", len(out), key, off, len(b))
		}
		off += n
		out = append(out, pageEntry{key: key, state: b[off : off+int(s)]})
		off += int(s)
	}
	for i := 1; i < len(out); i++ {
		if out[i-1].key >= out[i].key {
			return nil, fmt.Errorf("entry %d: key %q after %q, want keys in order, once each", i, out[i].key, out[i-1].key)
		}
	}
	return out, nil
}

// entryOf is key's entry among es (sorted by key), if it has one.
func entryOf(es []pageEntry, key string) (pageEntry, bool) {
	j, ok := slices.BinarySearchFunc(es, key, func(e pageEntry, k string) int { return strings.Compare(e.key, k) })
	if !ok {
		return pageEntry{}, false
	}
	return es[j], true
}

// cutParts cuts entries (sorted by key) into page parts of at most
// pagePartBytes each (an entry larger than that alone in its part): the
// same cut for the same entries.
func cutParts(entries []pageEntry) [][]pageEntry {
	var parts [][]pageEntry
	start, size := 0, 0
	for i, e := range entries {
		n := entryBytes(e)
		if i > start && size+n > pagePartBytes {
			parts = append(parts, entries[start:i])
			start, size = i, 0
		}
		size += n
	}
	return append(parts, entries[start:])
}

// Slots of the page write's shape.
const (
	pslotFence = iota
	pslotPipeline
	pslotKind
	pslotStart
	pslotEnd
	pslotShard
	pslotEntries
	pslotCount
	pslotNKeys
	pslotLowest
	pslotPart
	pslotPartsOf
	pslotFreshBy
	pslotFinalAt
	pslotExpiresAt
	pageSlots
)

// pageShapes are the forms of a page's write: it creates the page, final,
// or is refused (ALL_OLD) when one is there. variantExpires sets the TTL.
var pageShapes = shapeSet{build: func(variant uint) expression.Builder {
	upd := expression.Set(fenceName, slot(pslotFence)).
		Set(expression.Name(attrPipeline), slot(pslotPipeline)).
		Set(expression.Name(attrKind), slot(pslotKind)).
		Set(expression.Name(attrStart), slot(pslotStart)).
		Set(expression.Name(attrEnd), slot(pslotEnd)).
		Set(expression.Name(attrShard), slot(pslotShard)).
		Set(expression.Name(attrEntries), slot(pslotEntries)).
		Set(expression.Name(attrCount), slot(pslotCount)).
		Set(expression.Name(attrNKeys), slot(pslotNKeys)).
		Set(expression.Name(attrLowest), slot(pslotLowest)).
		Set(expression.Name(attrPart), slot(pslotPart)).
		Set(expression.Name(attrPartsOf), slot(pslotPartsOf)).
		Set(expression.Name(attrFresh), slot(pslotFreshBy)).
		Set(expression.Name(attrStatus), expression.Value(statusFinal)).
		Set(expression.Name(attrRevision), expression.Value(1)).
		Set(expression.Name(attrFinalAt), slot(pslotFinalAt)).
		Set(expression.Name(attrUpdatedAt), slot(pslotFinalAt))
	if variant&variantExpires != 0 {
		upd = upd.Set(expression.Name(attrExpiresAt), slot(pslotExpiresAt))
	}
	return expression.NewBuilder().WithUpdate(upd).WithCondition(expression.AttributeNotExists(expression.Name(attrPK)))
}}

// freshGroup is the fresh updates of one page: one kind, window and bucket.
type freshGroup struct {
	kind   string
	win    window.Window
	bucket int
	idx    []int // into the updates, sorted by key
}

// ApplyFresh is Apply for updates that each close a fresh window
// (Update.Fresh, Update.CloseBy, a partial: a window a shard's carry held
// to its close), written as result pages: the results of the keys of one
// bucket and window in one write. Its results are Apply's, one per update
// in order: Closed, Publish and Marked for a window this call created; a
// Duplicate with Resend for one a page held already (a flush or tick sent
// again). ErrPartialOverlap says a page there holds some of the records
// and not all (the ticker closed the window meanwhile): the caller reads
// its carry again, as for Apply. With an error, the results of the pages
// written before it are filled in (Outcome not zero), the others zero.
func (v *Views) ApplyFresh(ctx context.Context, shard string, us []*Update) ([]Result, error) {
	results := make([]Result, len(us))
	type groupKey struct { // a window by its instants: times from elsewhere may differ in location
		kind       string
		start, end int64
		bucket     int
	}
	groups := map[groupKey]*freshGroup{}
	var order []*freshGroup
	for i, u := range us {
		if !u.Fresh || !u.closes() || u.Partial == nil || len(u.Entries) > 0 {
			return nil, fmt.Errorf("state: ApplyFresh of %s %s: a fresh write closing its window with an interval's partial is wanted", u.Key, SortKey(u.Kind, u.Window))
		}
		k := groupKey{kind: u.Kind, start: u.Window.Start.UnixMilli(), end: u.Window.End.UnixMilli(), bucket: PageBucket(u.Key)}
		g := groups[k]
		if g == nil {
			g = &freshGroup{kind: u.Kind, win: u.Window, bucket: k.bucket}
			groups[k] = g
			order = append(order, g)
		}
		g.idx = append(g.idx, i)
	}
	for _, g := range order {
		slices.SortFunc(g.idx, func(a, b int) int { return strings.Compare(us[a].Key, us[b].Key) })
		for j := 1; j < len(g.idx); j++ {
			if us[g.idx[j]].Key == us[g.idx[j-1]].Key {
				return nil, fmt.Errorf("state: ApplyFresh: key %q twice in %s", us[g.idx[j]].Key, SortKey(g.kind, g.win))
			}
		}
		if err := v.writePage(ctx, shard, us, g, results); err != nil {
			// The results of the pages written before come back with
			// the error: the caller logs those it created (their
			// lines are this call's to write).
			return results, &WriteError{Pipeline: us[g.idx[0]].Pipeline, Key: pagePK(us[g.idx[0]].Pipeline, g.kind, g.bucket), Window: SortKey(g.kind, g.win), Err: err}
		}
	}
	return results, nil
}

// writePage writes group g's page, part by part, and fills its updates'
// results.
func (v *Views) writePage(ctx context.Context, shard string, us []*Update, g *freshGroup, results []Result) error {
	first := us[g.idx[0]]
	entries := make([]pageEntry, len(g.idx))
	var maxF, minF string
	for j, i := range g.idx {
		u := us[i]
		blob, err := u.Partial.MarshalBinary()
		if err != nil {
			return err
		}
		entries[j] = pageEntry{key: u.Key, state: blob, count: u.Partial.Count()}
		lo, err := Fence(u.MinSeq)
		if err != nil {
			return err
		}
		hi, err := Fence(u.MaxSeq)
		if err != nil {
			return err
		}
		if maxF == "" || hi > maxF {
			maxF = hi
		}
		if minF == "" || lo < minF {
			minF = lo
		}
	}
	parts := cutParts(entries)
	mark := drawMark()

	byKey := make(map[string]int, len(g.idx)) // key → index into us
	for _, i := range g.idx {
		byKey[us[i].Key] = i
	}
	for p, part := range parts {
		created, met, err := v.putPagePart(ctx, shard, first, g, part, p, len(parts), minF, maxF, mark)
		if err != nil {
			return err
		}
		if created {
			for _, e := range part {
				i := byKey[e.key]
				view := pagedView(us[i].Pipeline, us[i].Key, us[i].Kind, us[i].Window, us[i].Partial.Result(), timeText(v.now()))
				results[i] = Result{Outcome: Applied, Applied: int(e.count), Closed: true, Publish: &view, Marked: true}
			}
			continue
		}
		// A page there with every record of ours: a flush or tick sent
		// again, or the ticker's and a flush's closes of one window.
		// Each of our keys is in one of its parts.
		if err := v.resendFromPage(ctx, shard, us, g, part, met, byKey, results); err != nil {
			return err
		}
	}
	results[g.idx[0]].Writes = len(parts) // the page's requests, counted once
	return nil
}

// putPagePart writes one part of g's page. created says this write (or
// its request sent again) made it; otherwise met is the part there, every
// record of ours applied in it, or the error says why not.
func (v *Views) putPagePart(ctx context.Context, shard string, u *Update, g *freshGroup, part []pageEntry, p, partsOf int, minF, maxF string, mark int64) (created bool, met map[string]types.AttributeValue, err error) {
	var count uint64
	for _, e := range part {
		count += e.count
	}
	var slots [pageSlots]types.AttributeValue
	slots[pslotFence] = sharedS(maxF)
	slots[pslotPipeline] = sharedS(u.Pipeline)
	slots[pslotKind] = sharedS(g.kind)
	slots[pslotStart] = timeAV(g.win.Start)
	slots[pslotEnd] = timeAV(g.win.End)
	slots[pslotShard] = sharedS(shard)
	slots[pslotEntries] = avB(encodeEntries(part))
	slots[pslotCount] = avUint(count)
	slots[pslotNKeys] = avInt(int64(len(part)))
	slots[pslotLowest] = avS(minF)
	slots[pslotPart] = avInt(int64(p))
	slots[pslotPartsOf] = avInt(int64(partsOf))
	slots[pslotFreshBy] = avInt(mark)
	slots[pslotFinalAt] = timeAV(v.now())
	var variant uint
	if v.retention > 0 {
		variant |= variantExpires
		slots[pslotExpiresAt] = avInt(g.win.End.Add(v.retention).Unix())
	}
	s, err := pageShapes.get(variant)
	if err != nil {
		return false, nil, err
	}
	_, err = v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           v.tableName,
		Key:                                 itemKey(pagePK(u.Pipeline, g.kind, g.bucket), pageSK(g.win, shard, p)),
		UpdateExpression:                    s.update,
		ConditionExpression:                 s.condition,
		ExpressionAttributeNames:            s.namesFor(shard),
		ExpressionAttributeValues:           s.valuesFor(slots[:]),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return true, nil, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return false, nil, err
	}
	old := ccf.Item
	if markedBy(old, attrFresh, mark) {
		return true, nil, nil // our request sent again, its answer lost
	}
	fence := stringAttr(old, fenceAttr(shard))
	switch {
	case fence >= maxF:
		return false, old, nil
	case fence >= minF:
		return false, nil, ErrPartialOverlap
	default:
		return false, nil, fmt.Errorf("page part %d there holds records up to %s only, below the %s this write starts at", p, fence, minF)
	}
}

// resendFromPage fills the results of part's keys from the page there:
// met (the part of the same number), else any part of the page.
func (v *Views) resendFromPage(ctx context.Context, shard string, us []*Update, g *freshGroup, part []pageEntry, met map[string]types.AttributeValue, byKey map[string]int, results []Result) error {
	found, err := entriesOf(met)
	if err != nil {
		return err
	}
	lookup := func(key string) (pageEntry, bool) { return entryOf(found, key) }
	for _, e := range part {
		if _, ok := lookup(e.key); !ok {
			// Cut elsewhere (another writer's keys): read the whole page.
			all, complete, err := v.pageParts(ctx, us[byKey[e.key]].Pipeline, g.kind, g.bucket, g.win, shard)
			if err != nil {
				return err
			}
			if !complete {
				return fmt.Errorf("%w: the page of %s %s on %s is being written (not all its parts are there yet)", ErrPartialOverlap, g.kind, g.win.ID(), shard)
			}
			found = all
			break
		}
	}
	for _, e := range part {
		pe, ok := lookup(e.key)
		if !ok {
			return fmt.Errorf("the page of %s %s on %s holds records up to ours and not key %q", g.kind, g.win.ID(), shard, e.key)
		}
		i := byKey[e.key]
		st, err := v.spec.Decode(pe.state)
		if err != nil {
			return fmt.Errorf("the page of %s %s on %s, entry %q: %w", g.kind, g.win.ID(), shard, e.key, err)
		}
		view := pagedView(us[i].Pipeline, us[i].Key, us[i].Kind, us[i].Window, st.Result(), stringAttr(met, attrUpdatedAt))
		results[i] = Result{Outcome: Duplicate, Skipped: int(e.count), Resend: &view}
	}
	return nil
}

// entriesOf decodes a page item's entries.
func entriesOf(item map[string]types.AttributeValue) ([]pageEntry, error) {
	b, ok := item[attrEntries].(*types.AttributeValueMemberB)
	if !ok {
		return nil, fmt.Errorf("state: page %s has no entries", itemName(item))
	}
	es, err := decodeEntries(b.Value)
	if err != nil {
		return nil, fmt.Errorf("state: page %s: %w", itemName(item), err)
	}
	return es, nil
}

// pageParts reads every part shard wrote of a page and returns their
// entries merged in key order; complete says every part is there.
func (v *Views) pageParts(ctx context.Context, pipeline, kind string, bucket int, w window.Window, shard string) (entries []pageEntry, complete bool, err error) {
	kc := expression.Key(attrPK).Equal(expression.Value(pagePK(pipeline, kind, bucket))).
		And(expression.Key(attrSK).BeginsWith(w.ID() + "|" + shard + "|"))
	parts, want := 0, 0
	err = v.queryItems(ctx, kc, func(it map[string]types.AttributeValue) error {
		es, err := entriesOf(it)
		if err != nil {
			return err
		}
		parts++
		want = intAttr(it, attrPartsOf)
		entries = append(entries, es...)
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	slices.SortFunc(entries, func(a, b pageEntry) int { return strings.Compare(a.key, b.key) })
	return entries, parts > 0 && parts == want, nil
}

// pagedView is the view of key's window w of kind as a page entry holds
// it: final, revision 1, published, named by the per-key item it stands
// for.
func pagedView(pipeline, key, kind string, w window.Window, r agg.Result, updatedAt string) View {
	return View{Pipeline: pipeline, Key: key, Kind: kind, Window: w, Final: true, Revision: 1,
		Result: r, UpdatedAt: updatedAt, Ref: Ref{PK: PartitionKey(pipeline, key), SK: SortKey(kind, w)}}
}

// pagedEntry is a key's entry in a page, with what a write needs to stand
// for the fresh item it replaces: the shard that wrote it, its fence.
type pagedEntry struct {
	state        []byte
	shard, fence string
}

// findEntry looks for key's window w of kind in the pipeline's pages,
// whichever shard wrote it. found is false when no page holds it.
func (v *Views) findEntry(ctx context.Context, pipeline, key, kind string, w window.Window) (e pagedEntry, found bool, err error) {
	kc := expression.Key(attrPK).Equal(expression.Value(pagePK(pipeline, kind, PageBucket(key)))).
		And(expression.Key(attrSK).BeginsWith(w.ID() + "|"))
	err = v.queryItems(ctx, kc, func(it map[string]types.AttributeValue) error {
		es, err := entriesOf(it)
		if err != nil {
			return err
		}
		entry, ok := entryOf(es, key)
		if !ok {
			return nil
		}
		shard := stringAttr(it, attrShard)
		if found {
			return fmt.Errorf("state: key %q of %s %s is in the pages of two shards, %s and %s", key, kind, w.ID(), e.shard, shard)
		}
		e, found = pagedEntry{state: entry.state, shard: shard, fence: stringAttr(it, fenceAttr(shard))}, true
		return nil
	})
	return e, found, err
}

// fromPage is the item u's window has once its page entry stands as one
// (materialize), or nil when no page holds it.
func (v *Views) fromPage(ctx context.Context, u *Update) (map[string]types.AttributeValue, error) {
	e, found, err := v.findEntry(ctx, u.Pipeline, u.Key, u.Kind, u.Window)
	if err != nil || !found {
		return nil, err
	}
	return v.materialize(ctx, u, e)
}

// materialize creates the item u's window has in a page (e): the one the
// fresh write would have made, final at revision 1, marked fresh, fenced
// at the page's fence on the shard that wrote it, so that u's write goes
// on as one meeting that item. It returns the item there afterwards: the
// one it made, or the one another writer made first.
func (v *Views) materialize(ctx context.Context, u *Update, e pagedEntry) (map[string]types.AttributeValue, error) {
	st, err := v.spec.Decode(e.state)
	if err != nil {
		return nil, fmt.Errorf("page entry: %w", err)
	}
	seed := &Update{Pipeline: u.Pipeline, Key: u.Key, Kind: u.Kind, Window: u.Window, OpenIn: u.OpenIn, CloseBy: u.Window.End, Fresh: true}
	if seed.OpenIn == "" {
		seed.OpenIn = "~page" // closes() asks for one; a fresh write lists nothing
	}
	in, err := v.updateInput(e.shard, seed, e.state, int(st.Count()), e.fence, e.fence, "", false, drawMark())
	if err != nil {
		return nil, err
	}
	in.ReturnValues = types.ReturnValueAllNew
	item, _, err := v.writeOrMeet(ctx, in)
	return item, err
}

// writeOrMeet makes the conditional write in (ReturnValues ALL_NEW, and
// ALL_OLD on a refusal) and returns the item as it is after: the one it
// wrote (made), or the one that refused it (another writer came first).
func (v *Views) writeOrMeet(ctx context.Context, in *dynamodb.UpdateItemInput) (item map[string]types.AttributeValue, made bool, err error) {
	out, err := v.db.UpdateItem(ctx, in)
	if err == nil {
		return out.Attributes, true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && len(ccf.Item) > 0 {
		return ccf.Item, false, nil
	}
	return nil, false, err
}

// pagesPerWindow bounds the pages a query of one key reads
// (QueryBounded): pages hold many keys' results, and a key absent from a
// range's windows is looked for in each of its bucket's pages. A query of
// Limit windows reads at most pagesPerWindow pages for each (a window has
// a page for each shard and part that wrote it), and says there may be
// more (Bound's more) when it stops short of the range's end.
const pagesPerWindow = 4

// pagedKind reports whether windows of kind may be in result pages: a
// tumbling or hopping window's, not a session's or sliding window's.
func pagedKind(kind string) bool {
	return strings.HasPrefix(kind, "tumbling:") || strings.HasPrefix(kind, "hopping:")
}

// pageViews returns key's windows of kind in pages that start in [from,
// to), in start order (reverse with latest), stopping once it has want of
// them or has read maxPages pages; cut is then the start of the last page
// read (windows past it in the direction read are unknown), zero when it
// read every page of the range.
func (v *Views) pageViews(ctx context.Context, pipeline, key, kind string, from, to time.Time, latest bool, want, maxPages int) (views []View, cut time.Time, err error) {
	lo := window.Window{Start: from, End: from}.ID()
	hi := window.Window{Start: to, End: to}.ID()
	kc := expression.Key(attrPK).Equal(expression.Value(pagePK(pipeline, kind, PageBucket(key)))).
		And(expression.Key(attrSK).Between(expression.Value(lo), expression.Value(hi)))
	ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, time.Time{}, err
	}
	in := &dynamodb.QueryInput{
		TableName: v.tableName, ConsistentRead: aws.Bool(true), ScanIndexForward: aws.Bool(!latest),
		KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	}
	read := 0
	for {
		in.Limit = aws.Int32(int32(maxPages - read))
		page, err := v.db.Query(ctx, in)
		if err != nil {
			return nil, time.Time{}, err
		}
		for _, it := range page.Items {
			read++
			start, err := itemTime(it, attrStart)
			if err != nil {
				return nil, time.Time{}, err
			}
			if !start.Before(to) {
				continue
			}
			view, ok, err := v.pageView(it, pipeline, key, kind, start)
			if err != nil {
				return nil, time.Time{}, err
			}
			if ok {
				views = append(views, view)
				if len(views) == want {
					return views, start, nil
				}
			}
			if read == maxPages {
				return views, start, nil
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return views, time.Time{}, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// pageView is key's window in page it (starting at start), if it has one.
func (v *Views) pageView(it map[string]types.AttributeValue, pipeline, key, kind string, start time.Time) (View, bool, error) {
	es, err := entriesOf(it)
	if err != nil {
		return View{}, false, err
	}
	entry, ok := entryOf(es, key)
	if !ok {
		return View{}, false, nil
	}
	end, err := itemTime(it, attrEnd)
	if err != nil {
		return View{}, false, err
	}
	st, err := v.spec.Decode(entry.state)
	if err != nil {
		return View{}, false, fmt.Errorf("state: page %s entry %q: %w", itemName(it), key, err)
	}
	return pagedView(pipeline, key, kind, window.Window{Start: start, End: end}, st.Result(), stringAttr(it, attrUpdatedAt)), true, nil
}

// withPages merges key's windows in pages into views (its per-key items'
// windows, in the direction read, at most want): a window's item stands
// over its page entry. more says the range holds windows past the ones
// returned (at most limit).
func (v *Views) withPages(ctx context.Context, views []View, pipeline, key, kind string, from, to time.Time, b Bound) ([]View, bool, error) {
	if !pagedKind(kind) {
		if len(views) > b.Limit {
			return views[:b.Limit], true, nil
		}
		return views, false, nil
	}
	want := b.Limit + 1
	pv, cut, err := v.pageViews(ctx, pipeline, key, kind, from, to, b.Latest, want, pagesPerWindow*want)
	if err != nil {
		return nil, false, fmt.Errorf("state: query %s/%s pages: %w", pipeline, key, err)
	}
	if len(pv) == 0 && cut.IsZero() {
		if len(views) > b.Limit {
			return views[:b.Limit], true, nil
		}
		return views, false, nil
	}
	// A window's final item (a correction's) stands over its page entry;
	// an open one is what a carry's flush that died wrote before it
	// (Update.Spill), and the page's result stands over it.
	byWindow := make(map[[2]int64]int, len(views))
	for i, vw := range views {
		byWindow[[2]int64{vw.Window.Start.UnixMilli(), vw.Window.End.UnixMilli()}] = i
	}
	for _, vw := range pv {
		i, ok := byWindow[[2]int64{vw.Window.Start.UnixMilli(), vw.Window.End.UnixMilli()}]
		switch {
		case !ok:
			views = append(views, vw)
		case !views[i].Final:
			views[i] = vw
		}
	}
	cmp := func(a, b View) int {
		if c := a.Window.Start.Compare(b.Window.Start); c != 0 {
			return c
		}
		return a.Window.End.Compare(b.Window.End)
	}
	if b.Latest {
		slices.SortFunc(views, func(a, b View) int { return cmp(b, a) })
	} else {
		slices.SortFunc(views, cmp)
	}
	more := false
	if !cut.IsZero() {
		// The read stopped in the window starting at cut: its other
		// pages, and those past it, are unread. What it returns ends
		// before it, and there is more.
		n := 0
		for n < len(views) && (b.Latest && views[n].Window.Start.After(cut) || !b.Latest && views[n].Window.Start.Before(cut)) {
			n++
		}
		views, more = views[:n], true
	}
	if len(views) > b.Limit {
		views, more = views[:b.Limit], true
	}
	return views, more, nil
}

// pagedRevision is PublishedRevision of a window with no item: 1 when a
// page holds it (a page is published as it is written), else none.
func (v *Views) pagedRevision(ctx context.Context, ref Ref) (revision int, exists bool, err error) {
	pipeline, key, ok := strings.Cut(ref.PK, "#") // pipeline names have no '#'
	kind, id, ok2 := strings.Cut(ref.SK, "|")
	if !ok || !ok2 {
		return 0, false, nil // not a window's item: keyed state, ledger
	}
	w, err := window.ParseID(id)
	if err != nil {
		return 0, false, nil
	}
	_, found, err := v.findEntry(ctx, pipeline, key, kind, w)
	if err != nil || !found {
		return 0, false, err
	}
	return 1, true, nil
}

// finalizeSpilled is Finalize of the open window item (marked spilled, as
// read): the page's result when a page holds the window (supersede), else
// the item made final as any is.
func (v *Views) finalizeSpilled(ctx context.Context, ref Ref, item map[string]types.AttributeValue) (View, bool, error) {
	pipeline, key, kind := stringAttr(item, attrPipeline), stringAttr(item, attrKey), stringAttr(item, attrKind)
	start, err := itemTime(item, attrStart)
	if err != nil {
		return View{}, false, err
	}
	end, err := itemTime(item, attrEnd)
	if err != nil {
		return View{}, false, err
	}
	w := window.Window{Start: start, End: end}
	e, found, err := v.findEntry(ctx, pipeline, key, kind, w)
	if err != nil {
		return View{}, false, fmt.Errorf("state: finalize %s %s: %w", ref.PK, ref.SK, err)
	}
	if !found {
		return v.finalize(ctx, ref, finalizeAnyOpen)
	}
	var got map[string]types.AttributeValue
	made := false // this call made it final, as a correction
	if holdsOnlyUpTo(item, e.shard, e.fence) {
		// Every record the item holds is in the page: the item becomes
		// the page's result, published already (View.Fresh).
		got, err = v.supersede(ctx, ref, e)
	} else {
		// Records after the page's (a late one, applied open): final as
		// a correction of the page's result.
		got, made, err = v.correctPage(ctx, ref, e)
	}
	if err != nil {
		return View{}, false, fmt.Errorf("state: finalize %s %s: %w", ref.PK, ref.SK, err)
	}
	view, err := v.view(got)
	return view, !made, err
}

// holdsOnlyUpTo reports whether item's records are all from shard and at
// or below fence: it holds no record the page fenced there does not.
func holdsOnlyUpTo(item map[string]types.AttributeValue, shard, fence string) bool {
	for name, av := range item {
		if !strings.HasPrefix(name, "f_") {
			continue
		}
		s, ok := av.(*types.AttributeValueMemberS)
		if !ok || name != fenceAttr(shard) || s.Value > fence {
			return false
		}
	}
	return true
}

// correctPageShape makes an open window item final at revision 2, a
// correction of the page entry's result (slot 0, kept as its previous
// value; slot 1, finalAt), listed until published as any correction is.
var correctPageShape = shapeSet{build: func(uint) expression.Builder {
	return expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(attrStatus), expression.Value(statusFinal)).
			Set(expression.Name(attrRevision), expression.Value(2)).
			Set(expression.Name(attrPrevious), slot(0)).
			Set(expression.Name(attrFinalAt), slot(1)).
			Add(expression.Name(attrVersion), expression.Value(1))).
		WithCondition(expression.Equal(expression.Name(attrStatus), expression.Value(statusOpen)).
			And(expression.AttributeExists(expression.Name(attrOpenIn))))
}}

// correctPage is finalizeSpilled's write for an item holding records past
// its page's: the item as it is, final at revision 2, correcting the page.
// made says this call's write did it.
func (v *Views) correctPage(ctx context.Context, ref Ref, e pagedEntry) (item map[string]types.AttributeValue, made bool, err error) {
	s, err := correctPageShape.get(0)
	if err != nil {
		return nil, false, err
	}
	return v.writeOrMeet(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: itemKey(ref.PK, ref.SK),
		UpdateExpression: s.update, ConditionExpression: s.condition,
		ExpressionAttributeNames: s.names, ExpressionAttributeValues: s.valuesFor([]types.AttributeValue{avB(e.state), timeAV(v.now())}),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
}

// closeSpilled ends an Apply whose closing write met a window marked
// spilled and added its records open (res; item, as written):
// finalizeSpilled makes it final, or the page's result, which then goes
// to the stream again (Resend).
func (v *Views) closeSpilled(ctx context.Context, u *Update, res Result, item map[string]types.AttributeValue) (Result, error) {
	view, already, err := v.finalizeSpilled(ctx, Ref{PK: PartitionKey(u.Pipeline, u.Key), SK: SortKey(u.Kind, u.Window)}, item)
	res.Writes++
	if err != nil {
		return res, err
	}
	switch {
	case view.Pending:
		res.Closed, res.Publish = !already, &view
	case view.Fresh:
		res.Resend = &view
	}
	return res, nil
}

// Slots of supersede's write.
const (
	sslotParts = iota
	sslotCount
	sslotFence
	sslotFreshBy
	sslotFinalAt
)

// supersedeShape makes an open window item the page entry's result (its
// state, count and shard's fence), final at revision 1, fresh and
// unlisted, as the page's write would have made it.
var supersedeShape = shapeSet{build: func(uint) expression.Builder {
	return expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(attrParts), slot(sslotParts)).
			Set(expression.Name(attrNParts), expression.Value(1)).
			Set(expression.Name(attrCount), slot(sslotCount)).
			Set(fenceName, slot(sslotFence)).
			Set(expression.Name(attrFresh), slot(sslotFreshBy)).
			Set(expression.Name(attrStatus), expression.Value(statusFinal)).
			Set(expression.Name(attrRevision), expression.Value(1)).
			Set(expression.Name(attrFinalAt), slot(sslotFinalAt)).
			Remove(expression.Name(attrOpenIn)).
			Add(expression.Name(attrVersion), expression.Value(1))).
		WithCondition(expression.Equal(expression.Name(attrStatus), expression.Value(statusOpen)))
}}

// supersede makes the open item ref the page entry e's result, and returns
// the item as it is then (another finalize may have come first).
func (v *Views) supersede(ctx context.Context, ref Ref, e pagedEntry) (map[string]types.AttributeValue, error) {
	st, err := v.spec.Decode(e.state)
	if err != nil {
		return nil, fmt.Errorf("page entry: %w", err)
	}
	s, err := supersedeShape.get(0)
	if err != nil {
		return nil, err
	}
	slots := []types.AttributeValue{avList1(e.state), avUint(st.Count()), avS(e.fence), avInt(drawMark()), timeAV(v.now())}
	item, _, err := v.writeOrMeet(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: itemKey(ref.PK, ref.SK),
		UpdateExpression: s.update, ConditionExpression: s.condition,
		ExpressionAttributeNames: s.namesFor(e.shard), ExpressionAttributeValues: s.valuesFor(slots),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return item, err
}

// PageItemKeys returns the keys whose results a result page item holds
// (one read with its entries attribute), or nil for any other item.
func PageItemKeys(item map[string]types.AttributeValue) ([]string, error) {
	if !IsPageItem(item) {
		return nil, nil
	}
	es, err := entriesOf(item)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(es))
	for i, e := range es {
		keys[i] = e.key
	}
	return keys, nil
}

// attrPagedThrough, on a shard's watermark item, is the fence of the last
// record a carried flush of the shard may have written in result pages
// (MarkPaged): stored before the pages, so that code of another write
// path (a mapping moved to per batch, a carry no longer kept) knows which
// records' windows to look for in pages (Update.Paged), though the flush
// died before its carry said what it closed.
const attrPagedThrough = "pagedThrough"

// pagedThroughShape is MarkPaged's write (slot 0, the fence), unless a
// later one is stored.
var pagedThroughShape = shapeSet{build: func(uint) expression.Builder {
	name := expression.Name(attrPagedThrough)
	return expression.NewBuilder().
		WithUpdate(expression.Set(name, slot(0))).
		WithCondition(expression.AttributeNotExists(name).Or(expression.LessThan(name, slot(0))))
}}

// MarkPaged records on shard's watermark item that records up to seq may
// be in result pages: one small conditional write, before a carried flush
// writes its pages.
func (v *Views) MarkPaged(ctx context.Context, pipeline, shard, seq string) error {
	f, err := Fence(seq)
	if err != nil {
		return err
	}
	if _, err := v.updateShardItem(ctx, pipeline, shard, &pagedThroughShape, []types.AttributeValue{avS(f)}); err != nil {
		return fmt.Errorf("state: marking %s %s paged through %s: %w", pipeline, shard, seq, err)
	}
	return nil
}

// PagedThrough is the fence MarkPaged stored for shard ("": none): a
// record at or below it may have its windows in result pages.
func (v *Views) PagedThrough(ctx context.Context, pipeline, shard string) (string, error) {
	out, err := v.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: v.tableName, Key: itemKey(watermarkPK(pipeline), shard), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#p"), ExpressionAttributeNames: map[string]string{"#p": attrPagedThrough}})
	if err != nil {
		return "", fmt.Errorf("state: reading %s %s's paged bound: %w", pipeline, shard, err)
	}
	return stringAttr(out.Item, attrPagedThrough), nil
}

// SeqAtOrBelow reports whether the sequence number seq is at or below
// fence (a Fence; "": none is).
func SeqAtOrBelow(seq, fence string) bool {
	if fence == "" {
		return false
	}
	f, err := Fence(seq)
	return err == nil && f <= fence
}
