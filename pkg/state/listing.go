package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/window"
)

// Window listings: how a finalize finds the tumbling and hopping windows a
// shard wrote. One listing item per (openIn, window kind, window) holds the
// keys that have that window, in a string set, so a flush that writes one
// window for 500 keys lists them with one write of a few KB, where listing
// each window item in the open-windows index cost two index write units per
// key and window (an entry put when the window opens, deleted when its
// result is published): 0.667 of 3.2 write units an event of the deployed
// pipeline. Window items keep openIn (listed until published) but not
// openUntil, so they stay out of the index; keyed states still use it.
//
// A listing is written after the window writes it lists, so a key found in
// a listing has its window written: a finalize that reads the listing,
// finalizes and publishes each window it names, then deletes it on the
// condition that no write added to it since it was read, never deletes a
// key whose window it did not see. A process that dies between the window
// write and the listing fails its batch, whose retry finds the window
// applied (fenced) and lists it again; a batch that exhausts its retries
// lists its windows when its records are redriven.
const (
	listingPrefix = "~open#" // a listing's pk: ~open#<openIn>; pipeline names never start with "~"
	attrKeys      = "keys"   // the listed keys (SS)
	attrAdds      = "adds"   // writes the listing has had (N): the delete's condition
	attrBytes     = "bytes"  // the keys' bytes the writes added (N): a chunk's fill

	// listingChunkBytes is how many bytes of keys one write adds at most,
	// and listingFullBytes how full a chunk may be before a write goes to
	// the next: DynamoDB bills a write by the whole item (1 KB a unit), so
	// a listing is kept small, and far under the 400 KB item limit.
	listingChunkBytes = 16 << 10
	listingFullBytes  = 48 << 10
	listingMaxChunks  = 1000
)

// ErrNoWindow is Finalize on a window item that does not exist (its
// retention expired it before a finalize reached its listing).
var ErrNoWindow = errors.New("state: no such window")

// Listing is one listing item: keys that have the window w of kind, listed
// for finalization under openIn.
type Listing struct {
	OpenIn string
	Kind   string
	Window window.Window
	Keys   []string
	sk     string
	adds   string // the adds attribute as read: the delete's condition
}

// Refs are the window items the listing names, for pipeline.
func (l *Listing) Refs(pipeline string) []Ref {
	refs := make([]Ref, len(l.Keys))
	sk := SortKey(l.Kind, l.Window)
	for i, k := range l.Keys {
		refs[i] = Ref{PK: PartitionKey(pipeline, k), SK: sk}
	}
	return refs
}

// listingSK is a listing chunk's sort key: the window's end first, so a
// Query on the end finds the windows a watermark makes final.
func listingSK(kind string, w window.Window, chunk int) string {
	var b strings.Builder
	b.Grow(len(TimeLayout) + len(kind) + window.IDLength + 8)
	b.WriteString(timeText(w.End))
	b.WriteByte('|')
	b.WriteString(kind)
	b.WriteByte('|')
	var id [window.IDLength]byte
	b.Write(w.AppendID(id[:0]))
	b.WriteByte('|')
	b.WriteString(strconv.Itoa(chunk))
	return b.String()
}

// parseListingSK is listingSK's inverse.
func parseListingSK(sk string) (kind string, w window.Window, err error) {
	parts := strings.Split(sk, "|")
	if len(parts) != 4 {
		return "", window.Window{}, fmt.Errorf("state: listing %q: want end|kind|window|chunk", sk)
	}
	if _, err := strconv.Atoi(parts[3]); err != nil {
		return "", window.Window{}, fmt.Errorf("state: listing %q: chunk: %w", sk, err)
	}
	w, err = window.ParseID(parts[2])
	if err != nil {
		return "", window.Window{}, fmt.Errorf("state: listing %q: %w", sk, err)
	}
	return parts[1], w, nil
}

// listingChunks remembers, per listing, the first chunk found with room,
// so that a writer does not probe full chunks again (a refused
// conditional write is billed too). It forgets everything past
// listingChunksKept listings: a new window's listing is never full yet, so
// only probes are lost.
type listingChunks struct {
	m sync.Map
	n atomic.Int64
}

const listingChunksKept = 4096

func (c *listingChunks) first(pk, kind string, w window.Window) int {
	if v, ok := c.m.Load(listingChunkKey{pk, kind, w}); ok {
		return v.(int)
	}
	return 0
}

func (c *listingChunks) full(pk, kind string, w window.Window, chunk int) {
	if _, had := c.m.Swap(listingChunkKey{pk, kind, w}, chunk+1); !had && c.n.Add(1) > listingChunksKept {
		c.m.Clear()
		c.n.Store(0)
	}
}

type listingChunkKey struct {
	pk, kind string
	w        window.Window
}

// ListWindow lists keys as having window w of kind under openIn, after
// their window writes: a finalize at or after w's end finds them. Keys are
// added to the listing in groups of at most listingChunkBytes, each to the
// first chunk with room. It returns the writes it made.
func (v *Views) ListWindow(ctx context.Context, openIn, kind string, w window.Window, keys []string) (int, error) {
	pk := listingPrefix + openIn
	writes := 0
	for len(keys) > 0 {
		n, size := 0, 0
		for n < len(keys) && (n == 0 || size+len(keys[n]) <= listingChunkBytes) {
			size += len(keys[n])
			n++
		}
		group := keys[:n]
		keys = keys[n:]
		for chunk := v.chunks.first(pk, kind, w); ; chunk++ {
			if chunk >= listingMaxChunks {
				return writes, fmt.Errorf("state: listing %s %s %s: %d chunks full", openIn, kind, w.ID(), listingMaxChunks)
			}
			err := v.addToListing(ctx, pk, listingSK(kind, w, chunk), group, size, w)
			writes++
			var ccf *types.ConditionalCheckFailedException
			if errors.As(err, &ccf) {
				v.chunks.full(pk, kind, w, chunk)
				continue
			}
			if err != nil {
				return writes, fmt.Errorf("state: listing %s %s %s: %w", openIn, kind, w.ID(), err)
			}
			break
		}
	}
	return writes, nil
}

func (v *Views) addToListing(ctx context.Context, pk, sk string, keys []string, size int, w window.Window) error {
	var variant uint
	slots := [listingSlots]types.AttributeValue{
		&types.AttributeValueMemberSS{Value: keys}, avInt(int64(size)), avInt(int64(listingFullBytes - size)), nil,
	}
	if v.retention > 0 {
		variant, slots[3] = 1, avInt(w.End.Add(v.retention).Unix())
	}
	s, err := listingShapes.get(variant)
	if err != nil {
		return err
	}
	_, err = v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: itemKey(pk, sk),
		UpdateExpression: s.update, ConditionExpression: s.condition,
		ExpressionAttributeNames: s.names, ExpressionAttributeValues: s.valuesFor(slots[:]),
	})
	return err
}

// listingShapes are addToListing's write: the keys (slot 0) added, with
// their bytes (slot 1), to a chunk with room for them (its bytes at most
// slot 2); variant 1 also sets the expiry (slot 3).
var listingShapes = shapeSet{build: func(variant uint) expression.Builder {
	upd := expression.Add(expression.Name(attrKeys), slot(0)).
		Add(expression.Name(attrAdds), expression.Value(1)).
		Add(expression.Name(attrBytes), slot(1))
	if variant != 0 {
		upd = upd.Set(expression.Name(attrExpiresAt), slot(3))
	}
	room := expression.AttributeNotExists(expression.Name(attrBytes)).
		Or(expression.LessThanEqual(expression.Name(attrBytes), slot(2)))
	return expression.NewBuilder().WithUpdate(upd).WithCondition(room)
}}

const listingSlots = 4

// Listings returns the listings under openIn of windows that end at or
// before until: the ones a watermark at until makes final.
func (v *Views) Listings(ctx context.Context, openIn string, until time.Time) ([]Listing, error) {
	// Every sort key of a window ending at until begins with its end and
	// "|", which sorts below "}".
	kc := expression.Key(attrPK).Equal(expression.Value(listingPrefix + openIn)).
		And(expression.Key(attrSK).LessThan(expression.Value(timeText(until) + "}")))
	var out []Listing
	err := v.queryItems(ctx, kc, func(it map[string]types.AttributeValue) error {
		sk := stringAttr(it, attrSK)
		kind, w, err := parseListingSK(sk)
		if err != nil {
			return err
		}
		l := Listing{OpenIn: openIn, Kind: kind, Window: w, sk: sk}
		if ss, ok := it[attrKeys].(*types.AttributeValueMemberSS); ok {
			l.Keys = ss.Value
		}
		if n, ok := it[attrAdds].(*types.AttributeValueMemberN); ok {
			l.adds = n.Value
		}
		out = append(out, l)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("state: listings of %s: %w", openIn, err)
	}
	return out, nil
}

// DropListing deletes a listing whose windows are all published, unless a
// write added to it since it was read: then it stays, and the next
// finalize reads it again. It returns the writes it made.
func (v *Views) DropListing(ctx context.Context, l Listing) (int, error) {
	cond := expression.AttributeNotExists(expression.Name(attrAdds))
	if l.adds != "" {
		cond = expression.Equal(expression.Name(attrAdds), expression.Value(&types.AttributeValueMemberN{Value: l.adds}))
	}
	ex, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return 0, err
	}
	_, err = v.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: v.tableName, Key: itemKey(listingPrefix+l.OpenIn, l.sk),
		ConditionExpression: ex.Condition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return 1, nil
	}
	if err != nil {
		return 1, fmt.Errorf("state: dropping listing %s %s: %w", l.OpenIn, l.sk, err)
	}
	return 1, nil
}
