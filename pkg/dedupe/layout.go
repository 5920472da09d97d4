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
// naming the layout that last took over its claims and since when. The
// first Judge of a process reads it; a process of the other layout writes
// its own with the wall clock, so every ledger of the pipeline is young
// (reads the other layout) for the horizon and an hour from the change,
// whichever way it went and however old the ledger.

// Layout attribute names of the marker item.
const (
	attrLayout      = "layout"
	attrLayoutSince = "since"
)

// WithLayoutMarker names the pipeline's layout marker item (see above).
// Without it a ledger is young only by its own age.
func WithLayoutMarker(key map[string]types.AttributeValue) Option {
	return func(l *Ledger) { l.marker = &layoutMarker{key: key} }
}

// layoutMarker is what a process knows of the marker: read once.
type layoutMarker struct {
	key   map[string]types.AttributeValue
	mu    sync.Mutex // one reading at a time
	read  atomic.Bool
	since atomic.Uint32 // when this layout took over, Unix seconds
}

// layoutName is the marker's name for l's layout.
func (l *Ledger) layoutName() string {
	if l.ranges {
		return "range"
	}
	return "key"
}

// readLayout reads the layout marker once per process, writing this
// ledger's layout and the wall clock there when it names the other one or
// none (a first deploy, or one of code from before the marker: when the
// layout last changed is not known, so it is taken as now). A marker that
// changes under the write is read again. Not with s.l.mu held.
func (l *Ledger) readLayout(ctx context.Context) error {
	m := l.marker
	if m == nil || l.prev == nil || m.read.Load() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.read.Load() {
		return nil
	}
	mine := l.layoutName()
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		item, err := l.getMarker(ctx)
		if err != nil {
			return fmt.Errorf("dedupe: reading the ledger layout marker: %w", err)
		}
		layout, since := layoutOf(item)
		if item != nil && layout == mine {
			m.since.Store(since)
			m.read.Store(true)
			return nil
		}
		now := uint32(max(0, l.now().Unix()))
		in := &dynamodb.PutItemInput{TableName: aws.String(l.table), Item: l.markerItem(mine, now),
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
		m.since.Store(now)
		m.read.Store(true)
		return nil
	}
	return ErrConflict
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
// or unreadable, which a write replaces).
func layoutOf(item map[string]types.AttributeValue) (string, uint32) {
	s, _ := item[attrLayout].(*types.AttributeValueMemberS)
	n, _ := item[attrLayoutSince].(*types.AttributeValueMemberN)
	if s == nil || n == nil {
		return "", 0
	}
	since, err := strconv.ParseUint(n.Value, 10, 32)
	if err != nil {
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
