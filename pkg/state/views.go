package state

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/strictjson"
	"github.com/tributary-dev/tributary/pkg/window"
)

// itemStore is what Views needs of DynamoDB.
type itemStore interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

var _ itemStore = (*dynamodb.Client)(nil)

// Item attribute names. The table's keys are pk (S) and sk (S); the sparse
// index OpenIndex (openIn, openUntil) lists keyed states with windows not
// yet final (and window items from before window listings).
const (
	attrPK        = "pk"
	attrSK        = "sk"
	attrPipeline  = "pipeline"
	attrKey       = "key"
	attrKind      = "kind"
	attrStart     = "windowStart"
	attrEnd       = "windowEnd"
	attrCount     = "count"
	attrParts     = "parts"
	attrNParts    = "nparts"
	attrVersion   = "ver"
	attrStatus    = "status"
	attrRevision  = "revision"
	attrOpenIn    = "openIn"
	attrOpenUntil = "openUntil"
	attrUpdatedAt = "updatedAt"
	attrFinalAt   = "finalAt"
	attrExpiresAt = "expiresAt"
	// attrPrevious is a pending correction's previous value (the encoded
	// state the window held before it), kept until the correction is
	// published (UnlistRevision removes it).
	attrPrevious = "previous"
	// attrFresh marks a window created final and marked published by a
	// fresh write (Update.Fresh), whose result may not be on the stream
	// yet (its sender may have died): a write that meets it, its records
	// applied, hands it back to be sent again (Result.Resend). A
	// correction removes it. Its value is a number the creating write drew
	// at random: the write's own request sent again by the SDK (its answer
	// lost: a connection reset) meets the item it created, and knows it as
	// its own by that number, so it is still the write that created it.
	attrFresh = "fresh"
	// attrUnlistedBy is the number the write that unlisted a window drew
	// (UnlistRevision).
	attrUnlistedBy = "unlistedBy"
	// attrSpill marks a window written open by a carry's flush before its
	// carry was stored (Update.Spill).
	attrSpill = "carrySpill"

	statusOpen  = "open"
	statusFinal = "final"

	// OpenIndex is the name of the sparse global secondary index of open windows.
	OpenIndex = "open"
)

// TimeLayout formats window bounds in items: sortable, millisecond, UTC.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Views is the exactly-once store of window results. Safe for concurrent use.
type Views struct {
	db        itemStore
	table     string
	tableName *string // table, for requests (read-only)
	spec      *agg.Spec
	retention time.Duration
	compactAt int
	attempts  int
	now       func() time.Time

	// keyedExpiry sets a keyed state item's TTL this long after its last
	// write (WithKeyedExpiry); 0 keeps it.
	keyedExpiry time.Duration

	// chunks remembers the first listing chunk with room (ListWindow).
	chunks listingChunks

	// partials are cleared states of spec, for the per-batch path's
	// partials and for reading an item's parts (agg.State.Clear keeps a
	// quantile sketch's memory).
	partials sync.Pool
}

// Option configures Views.
type Option func(*Views)

// WithRetention expires items this long after their window ends (TTL attribute
// expiresAt); 0 keeps them.
func WithRetention(d time.Duration) Option { return func(v *Views) { v.retention = d } }

// WithCompactAt compacts an item's parts once its list reaches n (default 16).
func WithCompactAt(n int) Option { return func(v *Views) { v.compactAt = n } }

// WithClock sets the clock used for updatedAt.
func WithClock(now func() time.Time) Option { return func(v *Views) { v.now = now } }

// NewViews returns a store over table for aggregates of spec.
func NewViews(db itemStore, table string, spec *agg.Spec, opts ...Option) *Views {
	v := &Views{db: db, table: table, tableName: aws.String(table), spec: spec, compactAt: 16, attempts: 8, now: time.Now}
	v.partials.New = func() any { return spec.New() }
	for _, o := range opts {
		o(v)
	}
	return v
}

// Entry is one record's input to an aggregate.
type Entry struct {
	Seq      string // the record's sequence number in its shard
	Value    float64
	Distinct []byte
}

// Update is one batch's (or one interval's) contribution to one window of one key.
type Update struct {
	Pipeline, Key string
	Kind          string // the window spec's ID, e.g. "tumbling:1m0s"
	Window        window.Window
	// OpenIn is where this window is listed until its result is published
	// (typically "<pipeline>#<shard>"); the caller lists it there for the
	// finalize (ListWindow) once the write is made.
	OpenIn string

	// Entries, in ascending sequence order: the per-batch path.
	Entries []Entry
	// Partial with its sequence range: the per-interval path (Entries empty).
	Partial        *agg.State
	MinSeq, MaxSeq string

	// CorrectIfFinal applies the update to a final window as a correction
	// (late policy correct, within the allowed lateness); otherwise an update
	// that meets a final window is dropped as late.
	CorrectIfFinal bool

	// CloseBy is the watermark the caller commits once this write and the
	// others of its flush succeed (zero: none known). A window that ends by
	// it is made final by this write, as Finalize would make it right
	// after: one write instead of two. Its result comes back in
	// Result.Publish, listed (OpenIn is required) until it is published.
	CloseBy time.Time

	// Fresh says the caller holds every record of the window in this
	// update and knows of no item for it (a window a shard's carry held,
	// closing). A write that closes it then creates the item, final and
	// not listed, its result taken as published: the caller puts it on
	// the output stream (Result.Publish with Result.Marked) and marks
	// nothing, one write where there were two. Only if the window has no
	// item: one there is written to as without Fresh.
	Fresh bool

	// Paged says the window may be in a result page (ApplyFresh): a
	// window a shard's carry held, final by this write (a late record's
	// write). A write that finds no item looks for the key's page entry
	// and, finding it, makes the item the fresh write would have made
	// before it goes on, so the page's result is corrected, or the write
	// dropped as late, as if the item had been there.
	Paged bool

	// Spill says the write is of a window a shard's carry holds, written
	// open before the carry that says so is stored (a flush keeping its
	// carry small): a flush that dies after it and is sent again may
	// keep the window in the carry after all and close it in a page. The
	// item is marked, and Finalize looks for such a page before it makes
	// the item final.
	Spill bool
}

// closes reports whether u's write makes its window final (Update.CloseBy).
func (u *Update) closes() bool {
	return !u.CloseBy.IsZero() && u.OpenIn != "" && !u.Window.End.After(u.CloseBy)
}

// Outcome says what Apply did.
type Outcome uint8

const (
	// Applied: every record was new and is now counted.
	Applied Outcome = iota + 1
	// Duplicate: every record had been applied before; nothing changed.
	Duplicate
	// PartlyApplied: some records had been applied before; the rest are now.
	PartlyApplied
	// Corrected: the window was final; the update applied as a correction.
	Corrected
	// LateDropped: the window was final and the update was not a correction.
	LateDropped
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Duplicate:
		return "duplicate"
	case PartlyApplied:
		return "partly-applied"
	case Corrected:
		return "corrected"
	case LateDropped:
		return "late-dropped"
	}
	return "unknown"
}

// Result is what one Apply did.
type Result struct {
	Outcome Outcome
	// Applied and Skipped count records (per batch) or partial counts (per interval).
	Applied, Skipped int
	// Revision of the window after a correction.
	Revision int
	// Previous and Current values, set for Corrected.
	Previous, Current *agg.Result
	// Writes counts the UpdateItem requests made (compaction included).
	Writes int
	// Closed: this write made the window final (Update.CloseBy); its
	// result is Publish.
	Closed bool
	// Publish is a final window's result that is not yet known to be on the
	// output stream (the window is final and still listed in the
	// open-windows index): the correction this write made (Corrected), or
	// one this write found (a retried batch meeting its correction already
	// applied, a final result whose emission failed). The caller puts it on
	// the output stream and then calls UnlistRevision.
	Publish *View
	// Marked says Publish is marked published already: this write created
	// the window (Update.Fresh, Closed). The caller logs it, puts it on
	// the output stream and calls no UnlistRevision.
	Marked bool
	// Resend is a window a fresh write created, met by this write (a
	// retry, a spill, a correction, which the item's records came to
	// again): its result, marked published, may not be on the stream (its
	// sender may have died), and goes there again under the same id,
	// before Publish and not logged again.
	Resend *View
}

// SortKey is the item's sort key: window kind, then window id, so one key's
// windows of one kind are contiguous and ordered by start.
func SortKey(kind string, w window.Window) string { return kind + "|" + w.ID() }

// PartitionKey is the item's partition key.
func PartitionKey(pipeline, key string) string { return pipeline + "#" + key }

// Apply adds u to its item exactly once, whatever Lambda redelivered before.
func (v *Views) Apply(ctx context.Context, shard string, u *Update) (Result, error) {
	res, err := v.apply(ctx, shard, u)
	if err != nil {
		return res, &WriteError{Pipeline: u.Pipeline, Key: u.Key, Window: SortKey(u.Kind, u.Window), Err: err}
	}
	return res, nil
}

func (v *Views) apply(ctx context.Context, shard string, u *Update) (Result, error) {
	var res Result
	perInterval := len(u.Entries) == 0
	if perInterval && u.Partial == nil {
		return res, errors.New("update has neither entries nor a partial")
	}
	minSeq, maxSeq := u.MinSeq, u.MaxSeq
	if !perInterval {
		minSeq, maxSeq = u.Entries[0].Seq, u.Entries[len(u.Entries)-1].Seq
	}
	minF, err := sharedFence(minSeq)
	if err != nil {
		return res, err
	}
	maxF, err := sharedFence(maxSeq)
	if err != nil {
		return res, err
	}
	total := len(u.Entries)
	if perInterval {
		total = int(u.Partial.Count())
	}

	entries := u.Entries
	var batchPartial *agg.State // the per-batch path's partial, reused by each attempt and the next Apply
	if !perInterval {
		batchPartial = v.partials.Get().(*agg.State)
		defer func() {
			batchPartial.Clear()
			v.partials.Put(batchPartial)
		}()
	}
	knownFence, fenceKnown := "", false // fence seen on the item (retry path)
	var freshBy int64                   // a create's number (attrFresh; 0: not a create): the item created, unless one is there
	if u.Fresh && u.closes() {
		freshBy = drawMark()
	}
	correction, revision := false, 0
	closeAfter := false                     // a spilled window's records added open, then Finalize
	var old map[string]types.AttributeValue // the item as the last failed condition returned it
	for attempt := 0; attempt < v.attempts; attempt++ {
		partial := u.Partial
		if !perInterval {
			if fenceKnown {
				entries = after(entries, knownFence)
				if len(entries) == 0 {
					res.Outcome, res.Skipped = Duplicate, total
					res.Publish, res.Resend, err = v.toSend(old)
					return res, err
				}
				if minF, err = sharedFence(entries[0].Seq); err != nil {
					return res, err
				}
			}
			partial = batchPartial
			partial.Clear()
			for i := range entries {
				partial.Add(entries[i].Value, entries[i].Distinct)
			}
		}
		blob, err := partial.MarshalBinary()
		if err != nil {
			return res, err
		}
		var in *dynamodb.UpdateItemInput
		if correction {
			in, err = v.correctionInput(shard, u, old, partial, maxF, knownFence, revision)
		} else {
			in, err = v.updateInput(shard, u, blob, int(partial.Count()), minF, maxF, knownFence, fenceKnown, freshBy)
		}
		if err != nil {
			return res, err
		}
		if closeAfter {
			in.ReturnValues = types.ReturnValueAllNew // the item, for finalizeSpilled
		}
		out, err := v.db.UpdateItem(ctx, in)
		res.Writes++
		if err == nil {
			applied := len(entries)
			if perInterval {
				applied = total
			}
			res.Applied, res.Skipped = applied, total-applied
			res.Outcome = Applied
			if res.Skipped > 0 {
				res.Outcome = PartlyApplied
			}
			if correction {
				// The output is computed from the item as written, as
				// Finalize computes it for whoever publishes it later.
				view, err := v.view(out.Attributes)
				if err != nil {
					return res, err
				}
				res.Outcome, res.Revision = Corrected, view.Revision
				res.Previous, res.Current, res.Publish = view.Previous, &view.Result, &view
				return res, nil
			}
			if u.closes() {
				view, err := v.view(out.Attributes)
				if err != nil {
					return res, err
				}
				res.Closed, res.Publish, res.Marked = true, &view, freshBy != 0
			}
			res.Writes += v.maybeCompact(ctx, in.Key, out.Attributes)
			if closeAfter {
				return v.closeSpilled(ctx, u, res, out.Attributes)
			}
			return res, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			if limits.IsItemTooLarge(err) && attempt < v.attempts-1 {
				// Concurrent writers grew the item past what compaction
				// allows for: compact it from a read, then append again.
				n, cerr := v.compactNow(ctx, in.Key)
				res.Writes += n
				if cerr != nil {
					return res, errors.Join(err, cerr)
				}
				continue
			}
			return res, err
		}
		// The retry path: DynamoDB handed back the item as it was.
		old = ccf.Item
		if len(old) == 0 && u.Paged {
			// No item: the window's result may be in a page.
			if old, err = v.fromPage(ctx, u); err != nil {
				return res, err
			}
			res.Writes++ // a page entry's item made, or found made
			if old == nil {
				unpaged := *u // none: created as any window is
				unpaged.Paged = false
				u = &unpaged
				res.Writes--
				continue
			}
		}
		if freshBy != 0 && markedBy(old, attrFresh, freshBy) && stringAttr(old, attrStatus) == statusFinal {
			// The item this create made: its answer was lost and the SDK
			// sent it again. This write created it, so it is the one
			// that has it logged (Marked), not one that met it.
			view, err := v.view(old)
			if err != nil {
				return res, err
			}
			res.Outcome, res.Applied = Applied, total
			res.Closed, res.Publish, res.Marked = true, &view, true
			return res, nil
		}
		freshBy = 0
		fence := stringAttr(old, fenceAttr(shard))
		if fence != "" && fence >= maxF {
			res.Outcome, res.Skipped = Duplicate, total
			res.Publish, res.Resend, err = v.toSend(old)
			return res, err
		}
		if perInterval && fence != "" && fence >= minF {
			return res, ErrPartialOverlap
		}
		knownFence, fenceKnown = fence, true
		if stringAttr(old, attrStatus) == statusFinal {
			if res.Publish, res.Resend, err = v.toSend(old); err != nil {
				return res, err
			}
			if !u.CorrectIfFinal {
				res.Outcome = LateDropped
				return res, nil
			}
			if res.Publish != nil {
				// One revision at a time: the result the window holds is
				// published before a correction replaces it.
				return res, ErrUnpublished
			}
			if u.OpenIn == "" {
				return res, errors.New("a correction needs Update.OpenIn, the index partition that lists it until it is published")
			}
			correction = true
			revision = intAttr(old, attrRevision)
		} else {
			correction = false
			if _, spilled := old[attrSpill]; spilled && u.closes() {
				// Written open by a carry's flush that may have died
				// after closing the window in a page: the records are
				// added open, and Finalize decides (finalizeSpilled).
				open := *u
				open.CloseBy = time.Time{}
				u, closeAfter = &open, true
			}
		}
	}
	return res, ErrConflict
}

// toSend is what a write that meets the final window old hands back to be
// sent: its result if not yet known to be on the stream (listed:
// unpublished), or, for a window a fresh write created and nothing
// corrected since, that result to send again (resend).
func (v *Views) toSend(old map[string]types.AttributeValue) (publish, resend *View, err error) {
	if publish, err = v.unpublished(old); err != nil || publish != nil {
		return publish, nil, err
	}
	if _, fresh := old[attrFresh]; !fresh || stringAttr(old, attrStatus) != statusFinal {
		return nil, nil, nil
	}
	view, err := v.view(old)
	if err != nil {
		return nil, nil, err
	}
	return nil, &view, nil
}

// after returns the entries above fence.
func after(entries []Entry, fence string) []Entry {
	if fence == "" {
		return entries
	}
	for i := range entries {
		f, err := Fence(entries[i].Seq)
		if err == nil && f > fence {
			return entries[i:]
		}
	}
	return nil
}

// Slots of the window writes' shapes, the values a call fills in: the
// shard's new fence (the batch's highest sequence number); the item's
// names, bounds, update time and expiry; the parts appended (an update) or
// set (a correction) and the records they add to count; the fence the
// write is conditioned on (below it on the first try, equal to it on the
// retry path); the open-windows index partition and sort key; and a
// correction's previous value, its new revision and the one it is
// conditioned on; and when a write that closes its window made it final.
const (
	slotFence = iota
	slotPipeline
	slotKey
	slotKind
	slotStart
	slotEnd
	slotUpdatedAt
	slotExpiresAt
	slotParts
	slotCount
	slotFenceWas
	slotOpenIn
	slotPrevious
	slotRevision
	slotRevisionWas
	slotFinalAt
	slotFreshBy
	windowSlots
)

// The fence a window update is conditioned on.
const (
	fenceFirst = iota // nothing known: no fence, or one below the batch's first record
	fenceNone         // known to be absent (the retry path)
	fenceEqual        // known: exactly this one (the retry path)

	fenceBits = 3 // the variant bits the fence condition takes
)

// Variant bits of the window writes' shapes besides the fence condition.
const (
	variantOpen    = 4   // sets openIn: listed until published
	variantExpires = 8   // sets the TTL attribute (WithRetention)
	variantClose   = 16  // makes the window final (Update.CloseBy)
	variantCreate  = 32  // only if the window has no item (Update.Fresh)
	variantPaged   = 64  // only if the window has an item, open (Update.Paged, none seen yet)
	variantSpill   = 128 // marks the item (Update.Spill)
)

// updateShapes are the forms of updateInput's write.
var updateShapes = shapeSet{build: func(variant uint) expression.Builder {
	f := fenceName
	upd := identityUpdate(variant&variantExpires != 0).
		Set(expression.Name(attrParts), expression.ListAppend(
			expression.IfNotExists(expression.Name(attrParts), expression.Value([]any{})),
			slot(slotParts))).
		Add(expression.Name(attrCount), slot(slotCount)).
		Add(expression.Name(attrNParts), expression.Value(1)).
		Add(expression.Name(attrVersion), expression.Value(1))

	var fenceCond expression.ConditionBuilder
	switch variant & fenceBits {
	case fenceFirst:
		fenceCond = expression.AttributeNotExists(f).Or(expression.LessThan(f, slot(slotFenceWas)))
	case fenceNone:
		fenceCond = expression.AttributeNotExists(f)
	default:
		fenceCond = expression.Equal(f, slot(slotFenceWas))
	}
	status := expression.Name(attrStatus)
	cond := fenceCond.And(expression.AttributeNotExists(status).Or(expression.Equal(status, expression.Value(statusOpen))))
	if variant&variantPaged != 0 {
		// No item: refused, to look in the pages first (Update.Paged).
		cond = fenceCond.And(expression.Equal(status, expression.Value(statusOpen)))
	}
	if variant&variantSpill != 0 {
		upd = upd.Set(expression.Name(attrSpill), expression.Value(true))
	}
	if variant&variantCreate != 0 {
		cond = expression.AttributeNotExists(status) // every window write sets it
		upd = upd.Set(expression.Name(attrFresh), slot(slotFreshBy))
	}
	if variant&variantClose != 0 && variant&variantCreate == 0 {
		// Not a window a carry's flush spilled: whether a page closed
		// it decides (finalizeSpilled).
		cond = cond.And(expression.AttributeNotExists(expression.Name(attrSpill)))
	}
	if variant&variantClose != 0 {
		// Final at once, as Finalize would make it (the condition holds
		// only for an open window, at revision 0).
		upd = upd.Set(status, expression.Value(statusFinal)).
			Set(expression.Name(attrRevision), expression.Value(1)).
			Set(expression.Name(attrFinalAt), slot(slotFinalAt))
	} else {
		upd = upd.Set(status, expression.Value(statusOpen)).
			Set(expression.Name(attrRevision), expression.IfNotExists(expression.Name(attrRevision), expression.Value(0)))
	}
	if variant&variantOpen != 0 {
		// Listed until published; found by its listing (ListWindow), not
		// the open-windows index, which needs openUntil too.
		upd = upd.Set(expression.Name(attrOpenIn), slot(slotOpenIn))
	}
	return expression.NewBuilder().WithUpdate(upd).WithCondition(cond)
}}

// correctionShapes are the forms of correctionInput's write.
var correctionShapes = shapeSet{build: func(variant uint) expression.Builder {
	f := fenceName
	upd := identityUpdate(variant&variantExpires != 0).
		Set(expression.Name(attrParts), slot(slotParts)).
		Set(expression.Name(attrNParts), expression.Value(1)).
		Set(expression.Name(attrPrevious), slot(slotPrevious)).
		Set(expression.Name(attrRevision), slot(slotRevision)).
		Set(expression.Name(attrOpenIn), slot(slotOpenIn)).
		Remove(expression.Name(attrFresh)).
		Add(expression.Name(attrCount), slot(slotCount)).
		Add(expression.Name(attrVersion), expression.Value(1))
	fenceCond := expression.AttributeNotExists(f)
	if variant&fenceBits == fenceEqual {
		fenceCond = expression.Equal(f, slot(slotFenceWas))
	}
	cond := fenceCond.And(expression.Equal(expression.Name(attrStatus), expression.Value(statusFinal))).
		And(expression.Equal(expression.Name(attrRevision), slot(slotRevisionWas))).
		And(expression.AttributeNotExists(expression.Name(attrOpenIn)))
	return expression.NewBuilder().WithUpdate(upd).WithCondition(cond)
}}

// identityUpdate sets what every window write sets: the shard's fence, the
// item's names and bounds, its update time and (expires) its expiry.
func identityUpdate(expires bool) expression.UpdateBuilder {
	upd := expression.Set(fenceName, slot(slotFence)).
		Set(expression.Name(attrPipeline), slot(slotPipeline)).
		Set(expression.Name(attrKey), slot(slotKey)).
		Set(expression.Name(attrKind), slot(slotKind)).
		Set(expression.Name(attrStart), slot(slotStart)).
		Set(expression.Name(attrEnd), slot(slotEnd)).
		Set(expression.Name(attrUpdatedAt), slot(slotUpdatedAt))
	if expires {
		upd = upd.Set(expression.Name(attrExpiresAt), slot(slotExpiresAt))
	}
	return upd
}

func (v *Views) updateInput(shard string, u *Update, blob []byte, n int, minF, maxF, knownFence string, fenceKnown bool, freshBy int64) (*dynamodb.UpdateItemInput, error) {
	fresh := freshBy != 0
	var slots [windowSlots]types.AttributeValue
	variant := v.identity(slots[:], u, maxF)
	slots[slotParts] = avList1(blob)
	slots[slotCount] = avInt(int64(n))
	switch {
	case !fenceKnown:
		variant |= fenceFirst
		slots[slotFenceWas] = sharedS(minF)
	case knownFence == "":
		variant |= fenceNone
	default:
		variant |= fenceEqual
		slots[slotFenceWas] = avS(knownFence)
	}
	if u.OpenIn != "" && !fresh {
		variant |= variantOpen
		slots[slotOpenIn] = sharedS(u.OpenIn)
	}
	if fresh {
		variant |= variantCreate
		slots[slotFreshBy] = avInt(freshBy)
	} else if u.Paged && !fenceKnown {
		variant |= variantPaged
	}
	if u.Spill {
		variant |= variantSpill
	}
	returned := types.ReturnValueUpdatedNew
	if u.closes() {
		// The whole item, to make the final result from.
		variant |= variantClose
		slots[slotFinalAt] = timeAV(v.now())
		returned = types.ReturnValueAllNew
	}
	s, err := updateShapes.get(variant)
	if err != nil {
		return nil, err
	}
	return v.input(s, shard, u, slots[:], returned), nil
}

// correctionInput is the write that applies partial to the final window
// old describes (at revision, its fence from shard knownFence) as a
// correction. It replaces the parts with their merge and partial's, keeps
// the value the window held as the pending correction's previous value and
// lists the window (openIn), all in the one conditional
// write: the correction and its pending output exist together or not at
// all. The item then holds at most two merged states (current and
// previous), which the item budget allows for (pipeline.MaxStateBytes).
func (v *Views) correctionInput(shard string, u *Update, old map[string]types.AttributeValue, partial *agg.State, maxF, knownFence string, revision int) (*dynamodb.UpdateItemInput, error) {
	prev, err := v.merged(old)
	if err != nil {
		return nil, err
	}
	prevBlob, err := prev.MarshalBinary()
	if err != nil {
		return nil, err
	}
	cur := prev.Clone()
	if err := cur.Merge(partial); err != nil {
		return nil, err
	}
	curBlob, err := cur.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if n := len(prevBlob) + len(curBlob) + itemOverheadBytes; n > WindowItemBudget {
		return nil, fmt.Errorf("a correction's item would take %d bytes, over the %d-byte window item budget", n, WindowItemBudget)
	}
	var slots [windowSlots]types.AttributeValue
	variant := v.identity(slots[:], u, maxF)
	slots[slotParts] = avList1(curBlob)
	slots[slotPrevious] = avB(prevBlob)
	slots[slotRevision] = avInt(int64(revision + 1))
	slots[slotOpenIn] = sharedS(u.OpenIn)
	slots[slotCount] = avUint(partial.Count())
	slots[slotRevisionWas] = avInt(int64(revision))
	if knownFence != "" {
		variant |= fenceEqual
		slots[slotFenceWas] = avS(knownFence)
	}
	s, err := correctionShapes.get(variant)
	if err != nil {
		return nil, err
	}
	return v.input(s, shard, u, slots[:], types.ReturnValueAllNew), nil
}

// identity fills what every write of u sets (identityUpdate): the shard's
// fence, the item's names and bounds, its update time and expiry. It
// returns the shape variant bits that say so.
func (v *Views) identity(slots []types.AttributeValue, u *Update, maxF string) uint {
	slots[slotFence] = sharedS(maxF)
	slots[slotPipeline] = sharedS(u.Pipeline)
	slots[slotKey] = sharedS(u.Key)
	slots[slotKind] = sharedS(u.Kind)
	slots[slotStart] = timeAV(u.Window.Start)
	slots[slotEnd] = timeAV(u.Window.End)
	slots[slotUpdatedAt] = timeAV(v.now())
	if v.retention > 0 {
		slots[slotExpiresAt] = avInt(u.Window.End.Add(v.retention).Unix())
		return variantExpires
	}
	return 0
}

// input is the UpdateItem request of u made from shape s and its values.
func (v *Views) input(s *shape, shard string, u *Update, slots []types.AttributeValue, returnValues types.ReturnValue) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                           v.tableName,
		Key:                                 windowKey(u.Pipeline, u.Key, u.Kind, u.Window),
		UpdateExpression:                    s.update,
		ConditionExpression:                 s.condition,
		ExpressionAttributeNames:            s.namesFor(shard),
		ExpressionAttributeValues:           s.valuesFor(slots),
		ReturnValues:                        returnValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// compactBytes is the parts' size past which an item is compacted: with one
// more part of the largest size the spec can encode, it stays within
// WindowItemBudget (with room for the item's other attributes).
func (v *Views) compactBytes() int {
	return WindowItemBudget - itemOverheadBytes - v.spec.MaxEncodedBytes()
}

// WindowItemBudget is the size a window item is kept under: DynamoDB's 400
// KB less a margin (the stand-in refuses items a little sooner than AWS).
const WindowItemBudget = limits.DynamoDBItemBytes - 10<<10

// itemOverheadBytes bounds a window item's attributes besides its parts:
// keys, times, status, the per-shard fences of the shards writing it.
const itemOverheadBytes = 8 << 10

func partsBytes(attrs map[string]types.AttributeValue) int {
	list, _ := attrs[attrParts].(*types.AttributeValueMemberL)
	if list == nil {
		return 0
	}
	n := 0
	for _, p := range list.Value {
		if b, ok := p.(*types.AttributeValueMemberB); ok {
			n += len(b.Value)
		}
	}
	return n
}

// maybeCompact replaces a parts list grown long (compactAt parts) or big
// (compactBytes) with its merge, conditioned on the version the write just
// produced, so a concurrent write is never lost; if the condition fails the
// next write tries again. It returns writes made.
func (v *Views) maybeCompact(ctx context.Context, key map[string]types.AttributeValue, attrs map[string]types.AttributeValue) int {
	if (v.compactAt <= 0 || intAttr(attrs, attrNParts) < v.compactAt) && partsBytes(attrs) < v.compactBytes() {
		return 0
	}
	return v.forceCompact(ctx, key, attrs)
}

// forceCompact replaces the parts of the item attrs describe with their
// merge, conditioned on its version. It returns writes made.
func (v *Views) forceCompact(ctx context.Context, key map[string]types.AttributeValue, attrs map[string]types.AttributeValue) int {
	merged, err := v.merged(attrs)
	if err != nil {
		return 0
	}
	blob, err := merged.MarshalBinary()
	if err != nil {
		return 0
	}
	s, err := compactShape.get(0)
	if err != nil {
		return 0
	}
	ver := intAttr(attrs, attrVersion)
	slots := [compactSlots]types.AttributeValue{avList1(blob), avInt(int64(ver + 1)), avInt(int64(ver))}
	_, _ = v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: key,
		UpdateExpression: s.update, ConditionExpression: s.condition,
		ExpressionAttributeNames: s.names, ExpressionAttributeValues: s.valuesFor(slots[:]),
	})
	return 1
}

// compactShape is forceCompact's write: the parts replaced by their merge
// (slot 0), the version (slot 1) if it is still the one read (slot 2).
var compactShape = shapeSet{build: func(uint) expression.Builder {
	return expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(attrParts), slot(0)).
			Set(expression.Name(attrNParts), expression.Value(1)).
			Set(expression.Name(attrVersion), slot(1))).
		WithCondition(expression.Equal(expression.Name(attrVersion), slot(2)))
}}

const compactSlots = 3

// compactNow reads an item and replaces its parts with their merge
// (conditioned on its version). It returns writes made.
func (v *Views) compactNow(ctx context.Context, key map[string]types.AttributeValue) (int, error) {
	out, err := v.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: v.tableName, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0, fmt.Errorf("state: reading an item to compact it: %w", err)
	}
	if len(out.Item) == 0 {
		return 0, nil
	}
	return v.forceCompact(ctx, key, out.Item), nil
}

// maxItemKeyEcho bounds each of pk and sk an error quotes: more than the
// longest pk a pipeline and key make (64 + 1 + 4×256 bytes), so the item
// can be looked up, and less than a key DynamoDB takes (2048 bytes).
const maxItemKeyEcho = 1100

// itemName names an item by its keys, quoted and bounded, for an error an
// operator follows to the item: `pk "orders#eu" sk "tumbling:1m0s|..."`.
func itemName(item map[string]types.AttributeValue) string {
	return "pk " + strictjson.QuoteCut(stringAttr(item, attrPK), maxItemKeyEcho) +
		" sk " + strictjson.QuoteCut(stringAttr(item, attrSK), maxItemKeyEcho)
}

// merged merges an item's parts; an error names the item (itemName).
func (v *Views) merged(item map[string]types.AttributeValue) (*agg.State, error) {
	st := v.spec.New()
	list, _ := item[attrParts].(*types.AttributeValueMemberL)
	if list == nil {
		return st, nil
	}
	// Each part is read into one scratch state in turn and merged from it.
	part := v.partials.Get().(*agg.State)
	defer func() {
		part.Clear()
		v.partials.Put(part)
	}()
	for i, p := range list.Value {
		b, ok := p.(*types.AttributeValueMemberB)
		if !ok {
			return nil, fmt.Errorf("state: item %s: part %d is not binary", itemName(item), i)
		}
		if err := part.SetBinary(b.Value); err != nil {
			return nil, fmt.Errorf("state: item %s: part %d: %w", itemName(item), i, err)
		}
		if err := st.Merge(part); err != nil {
			return nil, fmt.Errorf("state: item %s: part %d: %w", itemName(item), i, err)
		}
	}
	return st, nil
}

func itemKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: pk},
		attrSK: &types.AttributeValueMemberS{Value: sk},
	}
}

func stringAttr(item map[string]types.AttributeValue, name string) string {
	if s, ok := item[name].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// drawMark draws the number a write leaves in an item (attrFresh,
// attrUnlistedBy) to know its own change when the SDK sends it again after
// its answer was lost: never 0, what intAttr reads of no number.
func drawMark() int64 { return 1 + rand.Int64N(math.MaxInt64-1) }

// markedBy says item holds the number mark in name: the write that drew it
// changed the item.
func markedBy(item map[string]types.AttributeValue, name string, mark int64) bool {
	return int64(intAttr(item, name)) == mark
}

func intAttr(item map[string]types.AttributeValue, name string) int {
	if n, ok := item[name].(*types.AttributeValueMemberN); ok {
		i, _ := strconv.Atoi(n.Value)
		return i
	}
	return 0
}
