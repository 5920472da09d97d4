package dedupe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A pipeline's claims are kept in one of two layouts, a ledger a key or a
// ledger a hash range (WithRanges), and a deploy may change it either way,
// or roll a change back. A ledger reads the other layout's claims while it
// is young (WithPredecessor), and a ledger's own age cannot say when the
// layout last changed: a key whose ledger predates a range layout that
// came and went began long ago, yet the claims made while the ranges ran
// are in the ranges. The layout marker says it: one item per pipeline
// naming the layout that last took over its claims and since when. A
// process's first Judge reads it and, when it names the other layout or
// none, writes its own with the wall clock, so every ledger of the
// pipeline is young (reads the other layout) for the horizon and an hour
// from the change, whichever way it went and however old the ledger.
//
// A deploy overlaps: for up to a minute Lambda may run a shard's next
// batch in an instance of the code before it, which read the marker before
// the change. So each Judge reads the marker again (only a process's first
// read writes it): a change, by either layout, makes every ledger young
// from its next batch on. And for markerSettle after a change the other
// layout's heads are read again at each Judge rather than taken from the
// cache, then once an interval while young (predecessorTag): an instance
// of the other layout may still be claiming ids there, and an interval
// carried through the change writes its claims of the other layout there
// at its flush (Session.theirs).

// Layout attribute names of the marker item.
const (
	attrLayout      = "layout"
	attrLayoutSince = "since"
)

const (
	// markerSettle is how long after a change instances of the other
	// layout may still write claims (Lambda's overlap of a deploy, with
	// room), and how far ahead of the wall clock a marker's since may be
	// before it is taken for unreadable.
	markerSettle = 5 * time.Minute
)

// WithLayoutMarker names the pipeline's layout marker item (see above).
// Without it a ledger is young only by its own age.
func WithLayoutMarker(key map[string]types.AttributeValue) Option {
	return func(l *Ledger) { l.marker = &layoutMarker{key: key} }
}

// layoutMarker is what a process knows of the marker.
type layoutMarker struct {
	key   map[string]types.AttributeValue
	mu    sync.Mutex // one reading at a time
	read  bool       // read (or written) at least once; mu held
	since atomic.Uint32
	fresh atomic.Uint64 // numbers the tags of predecessor reads while settling
}

// The marker's names of the layouts (pipeline's dedupeLedger values).
const (
	layoutKey   = "key"
	layoutRange = "range"
)

// layoutName is the marker's name for l's layout.
func (l *Ledger) layoutName() string {
	if l.ranges {
		return layoutRange
	}
	return layoutKey
}

// readLayout reads the layout marker, strongly consistent, at each Judge:
// an instance of the code before a deploy may run the next batch of a
// shard whose last batch an instance of the other layout ran, and reading
// the marker first it finds the change (one read a batch). A process's
// first read writes this ledger's layout and the wall clock there when the
// marker names the other one or none (a first deploy, or one of code from
// before the marker: when the layout last changed is not known, so it is
// taken as now); a marker that changes under the write is read again.
// Later reads only take the marker's since when it is later than the one
// held. Not with s.l.mu held.
func (l *Ledger) readLayout(ctx context.Context) error {
	m := l.marker
	if m == nil || l.prev == nil {
		return nil
	}
	now := l.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	first := !m.read
	mine := l.layoutName()
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		item, err := l.getMarker(ctx)
		if err != nil {
			return fmt.Errorf("dedupe: reading the ledger layout marker: %w", err)
		}
		layout, since := layoutOf(item, now)
		if !first || (item != nil && layout == mine) {
			if since > m.since.Load() {
				m.since.Store(since)
			}
			m.read = true
			return nil
		}
		at := uint32(max(0, now.Unix()))
		in := &dynamodb.PutItemInput{TableName: aws.String(l.table), Item: l.markerItem(mine, at),
			ExpressionAttributeNames: map[string]string{"#l": attrLayout}}
		switch {
		case item == nil:
			in.ConditionExpression = aws.String("attribute_not_exists(#l)")
		case layout == "":
			in.ExpressionAttributeNames = nil // an unreadable marker is replaced
		default:
			// The marker as read: another process's change meanwhile is
			// read again rather than overwritten with an older view.
			in.ConditionExpression = aws.String("#l = :l AND #s = :s")
			in.ExpressionAttributeNames["#s"] = attrLayoutSince
			in.ExpressionAttributeValues = map[string]types.AttributeValue{
				":l": &types.AttributeValueMemberS{Value: layout},
				":s": &types.AttributeValueMemberN{Value: strconv.FormatUint(uint64(since), 10)},
			}
		}
		if _, err := l.db.PutItem(ctx, in); err != nil {
			var failed *types.ConditionalCheckFailedException
			if errors.As(err, &failed) {
				continue
			}
			return fmt.Errorf("dedupe: writing the ledger layout marker: %w", err)
		}
		m.since.Store(at)
		m.read = true
		return nil
	}
	return ErrConflict
}

// SeedLayout writes the pipeline's layout marker (WithLayoutMarker) as if
// this ledger's layout had taken over at since, replacing what is there:
// for a benchmark that prices a pipeline at steady state rather than in
// the minutes after a deploy, which read the other layout again.
func (l *Ledger) SeedLayout(ctx context.Context, since time.Time) error {
	if l.marker == nil {
		return errors.New("dedupe: SeedLayout of a ledger without a layout marker")
	}
	_, err := l.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(l.table), Item: l.markerItem(l.layoutName(), uint32(max(0, since.Unix())))})
	return err
}

// predecessorTag is the tag the predecessor's ledgers are read under for
// one Judge of a session tagged tag: while the layout changed less than
// markerSettle ago, a tag of its own, so their heads are read again
// (their segments only when a head changed); after that, while the change
// is younger than the horizon and an hour, the session's interval's (per
// interval: once an interval, for the claims an interval carried through
// the change commits there at its flush, up to the longest tumbling
// window later); else "settled" (each read once more, then cached: a
// ledger young by its own age, with no change of layout, has a
// predecessor nobody writes).
func (l *Ledger) predecessorTag(tag string) string {
	m := l.marker
	if m == nil {
		return ""
	}
	since := m.since.Load()
	if since == 0 {
		return "settled"
	}
	changed, now := time.Unix(int64(since), 0), l.now()
	switch {
	case !now.After(changed.Add(markerSettle)):
		return "settling " + strconv.FormatUint(m.fresh.Add(1), 10)
	case tag != "" && now.Before(changed.Add(l.horizon+ttlSlack)):
		return "interval " + tag
	default:
		return "settled"
	}
}

// getMarker reads the marker item (nil when there is none), consistently.
// Its requests, one read and at most one write a process, are not claims'
// and are left out of Stats.
func (l *Ledger) getMarker(ctx context.Context) (map[string]types.AttributeValue, error) {
	req := map[string]types.KeysAndAttributes{l.table: {ConsistentRead: aws.Bool(true), Keys: []map[string]types.AttributeValue{l.marker.key}}}
	for try := 0; ; try++ {
		if try > 0 {
			if err := sleep(ctx, backoff(try)); err != nil {
				return nil, err
			}
		}
		out, err := l.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, err
		}
		if items := out.Responses[l.table]; len(items) > 0 {
			return items[0], nil
		}
		if len(out.UnprocessedKeys) == 0 {
			return nil, nil
		}
		req = out.UnprocessedKeys
	}
}

// markerItem is the marker naming layout since since.
func (l *Ledger) markerItem(layout string, since uint32) map[string]types.AttributeValue {
	item := make(map[string]types.AttributeValue, len(l.marker.key)+2)
	for k, v := range l.marker.key {
		item[k] = v
	}
	item[attrLayout] = &types.AttributeValueMemberS{Value: layout}
	item[attrLayoutSince] = &types.AttributeValueMemberN{Value: strconv.FormatUint(uint64(since), 10)}
	return item
}

// layoutOf reads a marker item: its layout and since ("" and 0 when absent
// or unreadable, which a first read replaces). A since more than
// markerSettle ahead of now (a clock far ahead, a hand edit) is
// unreadable: it would keep every ledger young for ever.
func layoutOf(item map[string]types.AttributeValue, now time.Time) (string, uint32) {
	s, _ := item[attrLayout].(*types.AttributeValueMemberS)
	n, _ := item[attrLayoutSince].(*types.AttributeValueMemberN)
	if s == nil || n == nil || (s.Value != layoutKey && s.Value != layoutRange) {
		return "", 0
	}
	since, err := strconv.ParseUint(n.Value, 10, 32)
	if err != nil || time.Unix(int64(since), 0).After(now.Add(markerSettle)) {
		return "", 0
	}
	return s.Value, uint32(since)
}

// switchedBefore reports whether the layout changed (by the marker) less
// than the horizon and an hour before arrival: the other layout may hold a
// claim on a record that arrived then.
func (l *Ledger) switchedBefore(arrival uint32) bool {
	if l.marker == nil {
		return false
	}
	since := l.marker.since.Load()
	return since != 0 && uint64(arrival) < uint64(since)+uint64((l.horizon+ttlSlack)/time.Second)
}
