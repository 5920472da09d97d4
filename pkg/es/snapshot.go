package es

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attributes of a snapshot item (the snapshots table, partition key
// AttrAggregateID).
const (
	AttrSchema  = "schema"
	AttrState   = "state"
	AttrTakenAt = "takenAt"
)

// DefaultSnapshotEvery is how many versions apart the executor snapshots an
// aggregate: a load reads a snapshot and at most this many events (plus the
// last command's), one Query page for events of a few hundred bytes. A
// snapshot costs its command's transaction one more item (write units for
// the state's size, twice, as transactions are billed).
const DefaultSnapshotEvery = 25

// Snapshot is an aggregate's state at a version, as the decider encodes it
// (JSON), kept so a load need not read the whole log.
type Snapshot struct {
	AggregateID string
	Version     int64
	// Schema names the state's encoding (Decider.StateSchema); a snapshot
	// of another schema is ignored and the log read from the start.
	Schema  string
	State   json.RawMessage
	TakenAt time.Time
}

// Item is the snapshot as an item of the snapshots table.
func (s *Snapshot) Item() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrAggregateID: &types.AttributeValueMemberS{Value: s.AggregateID},
		AttrVersion:     &types.AttributeValueMemberN{Value: strconv.FormatInt(s.Version, 10)},
		AttrSchema:      &types.AttributeValueMemberS{Value: s.Schema},
		AttrState:       &types.AttributeValueMemberS{Value: string(s.State)},
		AttrTakenAt:     &types.AttributeValueMemberS{Value: s.TakenAt.UTC().Format(time.RFC3339Nano)},
	}
}

// Snapshot reads aggregateID's snapshot (consistently), or nil; always
// nil for a store without a snapshots table (loads read the whole log).
func (s *Store) Snapshot(ctx context.Context, aggregateID string) (*Snapshot, error) {
	if s.t.Snapshots == "" {
		return nil, nil
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.t.Snapshots), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{AttrAggregateID: &types.AttributeValueMemberS{Value: aggregateID}}})
	if err != nil {
		return nil, fmt.Errorf("es: reading the snapshot of %s: %w", aggregateID, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	snap := &Snapshot{AggregateID: aggregateID}
	if snap.Version, err = numberAttr(out.Item, AttrVersion); err != nil {
		return nil, fmt.Errorf("es: snapshot of %s: %w", aggregateID, err)
	}
	schema, ok1 := out.Item[AttrSchema].(*types.AttributeValueMemberS)
	state, ok2 := out.Item[AttrState].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 || !json.Valid([]byte(state.Value)) {
		return nil, fmt.Errorf("es: snapshot of %s: %w", aggregateID, &ItemError{Attr: AttrState, Reason: "schema or state missing, or the state is not JSON"})
	}
	snap.Schema, snap.State = schema.Value, json.RawMessage(state.Value)
	if t, ok := out.Item[AttrTakenAt].(*types.AttributeValueMemberS); ok {
		snap.TakenAt, _ = time.Parse(time.RFC3339Nano, t.Value)
	}
	return snap, nil
}

// snapshotDue reports whether an append from version `from` to `to`
// crosses a multiple of every.
func snapshotDue(from, to int64, every int) bool {
	if every <= 0 {
		return false
	}
	return from/int64(every) != to/int64(every)
}
