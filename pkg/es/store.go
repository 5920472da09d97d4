package es

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/limits"
)

// Tables names the event store's tables.
type Tables struct {
	// Events: partition key aggregateId (S), sort key version (N), a
	// stream (NEW_AND_OLD_IMAGES), the sparse index SubjectIndex.
	Events string
	// Snapshots: partition key aggregateId (S).
	Snapshots string
	// Commands: partition key id (S), time to live on expiresAt.
	Commands string
}

// storeAPI is what the store needs of DynamoDB.
type storeAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ storeAPI = (*dynamodb.Client)(nil)

// Store is the event store: append, load, and the command records.
type Store struct {
	db storeAPI
	t  Tables
}

// NewStore returns the store kept in tables t.
func NewStore(db storeAPI, t Tables) *Store { return &Store{db: db, t: t} }

// Tables are the store's tables.
func (s *Store) Tables() Tables { return s.t }

// ConflictError is an append that lost: the aggregate is no longer at the
// version the events were decided on. Current is its version now.
type ConflictError struct {
	AggregateID       string
	Expected, Current int64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("aggregate %s is at version %d, not %d: another command appended first", e.AggregateID, e.Current, e.Expected)
}

// DuplicateCommandError is an append whose command id was already
// recorded: the command ran before. Record is its first answer.
type DuplicateCommandError struct{ Record *CommandRecord }

func (e *DuplicateCommandError) Error() string {
	return fmt.Sprintf("command %s was already executed (%s, version %d)", e.Record.ID, e.Record.Status, e.Record.Version)
}

// ErrContended is a transaction DynamoDB cancelled because another
// transaction was writing one of its items at the same moment
// (TransactionConflict): transient, decide again on a fresh read.
var ErrContended = errors.New("es: another transaction was writing the same items (TransactionConflict)")

// ErrAheadOfLog is a load or an append that a snapshot or view item
// refused because it records a later version than the log holds: the
// events table was restored to an earlier point, or items were written by
// hand. No retry changes it; the snapshots past the log must be deleted
// (a rebuild reads the state through them) and the views rebuilt from the
// log.
var ErrAheadOfLog = errors.New("es: a view or snapshot item is ahead of the event log (the events table restored to an earlier point?): no retry succeeds until the aggregate's snapshots past its last version are deleted and the views are rebuilt from the log (eventstore rebuild)")

// DamagedLogError is an aggregate's event log holding what no command
// writes: an item that is not an event as this package writes them (Field
// names its attribute), a version missing between two events, or an event
// the domain's state cannot take. Commands write only events they decided
// and no function may change one, so it came from a hand outside the code;
// no retry changes it. Its Error says what an operator does.
type DamagedLogError struct {
	AggregateID string
	// Version is the damaged event's version (0: the item's version
	// itself is unreadable; Field is then AttrVersion).
	Version int64
	// Field is the item's attribute at fault ("data"), or "" when the
	// item reads as an event but the log cannot hold it there.
	Field string
	// Follows is, for a version missing, the version of the event found
	// after the gap: the item to take away if no command wrote it.
	Follows int64
	Err     error
}

func (e *DamagedLogError) Error() string {
	at := "at an item whose version cannot be read"
	if e.Version > 0 {
		at = fmt.Sprintf("at version %d", e.Version)
	}
	what := e.Err.Error()
	if e.Field != "" {
		var ie *ItemError
		if errors.As(e.Err, &ie) {
			what = ie.Reason
		}
		what = "attribute " + e.Field + ": " + what
	}
	fix := "put it back as it was from the events table's point-in-time recovery (restore the table as of before the damage into a new table, copy the item), " +
		"or delete it if no command ever wrote that version"
	if e.Follows > 0 {
		fix = fmt.Sprintf("put version %d back from the events table's point-in-time recovery (restore the table as of before the damage into a new table, copy the item), "+
			"or, if no command ever wrote version %d, delete the item at version %d, which follows the gap", e.Version, e.Follows, e.Follows)
	}
	return fmt.Sprintf("es: the event log of %s is damaged %s (%s): no command writes that, so no retry succeeds. "+
		"An operator repairs the log with their own credentials (no function may change an event): %s; then send the command again. "+
		"publish sets the deletion aside as a change to an immutable event (make setaside lists it): expected after this repair", e.AggregateID, at, what, fix)
}

func (e *DamagedLogError) Unwrap() error { return e.Err }

// damagedItem is the *DamagedLogError of item, one of aggregateID's, that
// EventFromItem refused with err.
func damagedItem(aggregateID string, item map[string]types.AttributeValue, err error) error {
	d := &DamagedLogError{AggregateID: aggregateID, Err: err}
	if v, verr := numberAttr(item, AttrVersion); verr == nil && v > 0 {
		d.Version = v
	}
	var ie *ItemError
	if errors.As(err, &ie) {
		d.Field = ie.Attr
	}
	return d
}

// TooLargeError is an item of an append over DynamoDB's item limit. Item
// says which ("event 3 (SeatsReserved)", "the snapshot", ...).
type TooLargeError struct {
	Item string
	Err  *limits.TooLargeError
}

func (e *TooLargeError) Error() string { return fmt.Sprintf("%s: %v", e.Item, e.Err) }

// TransactionTooLargeError is an append one TransactWriteItems cannot
// hold: more than limits.DynamoDBTransactionItems items (events, record,
// views and snapshot), or more than limits.DynamoDBTransactionBytes in
// all. No retry can write it: the command must ask for fewer or smaller
// events.
type TransactionTooLargeError struct {
	AggregateID string
	Items       int
	Bytes       int
}

func (e *TransactionTooLargeError) Error() string {
	return fmt.Sprintf("the append to %s is %d items of %d bytes in all; one DynamoDB transaction holds at most %d items and %d bytes",
		e.AggregateID, e.Items, e.Bytes, limits.DynamoDBTransactionItems, limits.DynamoDBTransactionBytes)
}

// transactionBytes is the size DynamoDB counts against
// limits.DynamoDBTransactionBytes: each Put's item, and the key of each
// other action.
func transactionBytes(items []types.TransactWriteItem) int {
	n := 0
	for _, it := range items {
		switch {
		case it.Put != nil:
			n += limits.ItemSize(it.Put.Item)
		case it.Update != nil:
			n += limits.ItemSize(it.Update.Key)
		case it.Delete != nil:
			n += limits.ItemSize(it.Delete.Key)
		case it.ConditionCheck != nil:
			n += limits.ItemSize(it.ConditionCheck.Key)
		}
	}
	return n
}

// Load reads an aggregate for a command: its snapshot, when there is one of
// this schema, and every event after it, with consistent reads (a command
// decides on the latest state). snap is nil without a usable snapshot.
//
// The query starts at the snapshot's own version, so the same request
// checks that the log holds it: a snapshot past the log's end (the events
// table restored to an earlier point) is ErrAheadOfLog. Deciding on it
// would append after versions the log no longer has, a gap no load,
// projection or rebuild could cross.
func (s *Store) Load(ctx context.Context, aggregateID, schema string) (snap *Snapshot, tail []Event, err error) {
	snap, err = s.Snapshot(ctx, aggregateID)
	if err != nil {
		return nil, nil, err
	}
	if snap != nil && snap.Schema != schema {
		snap = nil // another encoding of the state: read the whole log
	}
	if snap == nil {
		tail, err = s.Events(ctx, aggregateID, 0, 0)
		if err != nil {
			return nil, nil, err
		}
		return nil, tail, nil
	}
	tail, err = s.Events(ctx, aggregateID, snap.Version-1, 0)
	if err != nil {
		return nil, nil, err
	}
	if len(tail) == 0 {
		top, err := s.Version(ctx, aggregateID)
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("the snapshot of %s is at version %d, but its log ends at version %d (delete the snapshot): %w",
			aggregateID, snap.Version, top, ErrAheadOfLog)
	}
	return snap, tail[1:], nil
}

// Events reads aggregateID's events with versions after `after` up to upTo
// (0: all), in order, with consistent reads.
func (s *Store) Events(ctx context.Context, aggregateID string, after, upTo int64) ([]Event, error) {
	cond := expression.Key(AttrAggregateID).Equal(expression.Value(aggregateID))
	switch {
	case upTo > 0:
		cond = cond.And(expression.Key(AttrVersion).Between(expression.Value(after+1), expression.Value(upTo)))
	case after > 0:
		cond = cond.And(expression.Key(AttrVersion).GreaterThan(expression.Value(after)))
	}
	e, err := expression.NewBuilder().WithKeyCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("es: events query of %s: %w", aggregateID, err)
	}
	in := &dynamodb.QueryInput{TableName: aws.String(s.t.Events), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), ConsistentRead: aws.Bool(true)}
	var out []Event
	for {
		page, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("es: reading the events of %s after version %d: %w", aggregateID, after, err)
		}
		for _, it := range page.Items {
			ev, err := EventFromItem(it)
			if err != nil {
				return nil, damagedItem(aggregateID, it, err)
			}
			out = append(out, ev)
		}
		if page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	want := after + 1
	for _, ev := range out {
		if ev.Version != want {
			return nil, &DamagedLogError{AggregateID: aggregateID, Version: want, Follows: ev.Version,
				Err: fmt.Errorf("version %d is missing: the log jumps from version %d to %d", want, want-1, ev.Version)}
		}
		want++
	}
	return out, nil
}

// Version is aggregateID's latest version (0 if it has no events), read
// consistently.
func (s *Store) Version(ctx context.Context, aggregateID string) (int64, error) {
	e, err := expression.NewBuilder().
		WithKeyCondition(expression.Key(AttrAggregateID).Equal(expression.Value(aggregateID))).
		WithProjection(expression.NamesList(expression.Name(AttrVersion))).Build()
	if err != nil {
		return 0, fmt.Errorf("es: version query of %s: %w", aggregateID, err)
	}
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(s.t.Events), KeyConditionExpression: e.KeyCondition(),
		ProjectionExpression: e.Projection(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ScanIndexForward: aws.Bool(false), Limit: aws.Int32(1), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0, fmt.Errorf("es: reading the version of %s: %w", aggregateID, err)
	}
	if len(out.Items) == 0 {
		return 0, nil
	}
	return numberAttr(out.Items[0], AttrVersion)
}

func numberAttr(item map[string]types.AttributeValue, name string) (int64, error) {
	n, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, &ItemError{Attr: name, Reason: "is missing or not a number (N) attribute"}
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, &ItemError{Attr: name, Reason: fmt.Sprintf("%q is not a whole number", n.Value)}
	}
	return v, nil
}

// Append is one command's append: its events, its record, and the items
// that go in the same transaction.
type Append struct {
	AggregateID string
	// Expected is the version the events follow (0: a new aggregate); the
	// events carry versions Expected+1, Expected+2, ….
	Expected int64
	Events   []Event
	// Command is the command's record, put only if no record has its id.
	Command *CommandRecord
	// Views are items of views written with the events (WithSyncView).
	Views []types.TransactWriteItem
	// Snapshot, when set, replaces the aggregate's snapshot if older.
	Snapshot *Snapshot
}

// Append writes a's events, record, views and snapshot in one
// TransactWriteItems: all or nothing. Each event is put only if its
// version is not taken, so of two appends decided on the same version one
// fails with a *ConflictError naming the current version. A command id
// already recorded fails it with a *DuplicateCommandError carrying the
// first answer. ErrContended (retry on a fresh read), *TooLargeError (an
// item over DynamoDB's limit), *TransactionTooLargeError (more than one
// transaction holds), and other errors wrapped.
func (s *Store) Append(ctx context.Context, a Append) error {
	if len(a.Events) == 0 {
		return errors.New("es: an append needs at least one event")
	}
	var items []types.TransactWriteItem
	check := func(what string, item map[string]types.AttributeValue) error {
		if err := limits.CheckItem(item); err != nil {
			var tl *limits.TooLargeError
			if errors.As(err, &tl) {
				return &TooLargeError{Item: what, Err: tl}
			}
			return fmt.Errorf("es: %s: %w", what, err)
		}
		return nil
	}
	if a.Command != nil {
		item := a.Command.Item()
		if err := check("the command record", item); err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.t.Commands), Item: item,
			ConditionExpression:                 aws.String(recordCondition),
			ExpressionAttributeNames:            recordNames,
			ExpressionAttributeValues:           recordValues(a.Command.RecordedAt),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}})
	}
	for i := range a.Events {
		ev := &a.Events[i]
		if ev.AggregateID != a.AggregateID || ev.Version != a.Expected+int64(i)+1 {
			return fmt.Errorf("es: event %d of the append is %s, want %s/%d", i, ev.ID(), a.AggregateID, a.Expected+int64(i)+1)
		}
		item := ev.Item()
		if err := check(fmt.Sprintf("event %s (%s)", ev.ID(), ev.Type), item); err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.t.Events), Item: item,
			ConditionExpression:      aws.String("attribute_not_exists(#v)"),
			ExpressionAttributeNames: map[string]string{"#v": AttrVersion}}})
	}
	for i, v := range a.Views {
		if v.Put != nil {
			if err := check(fmt.Sprintf("view item %d", i), v.Put.Item); err != nil {
				return err
			}
		}
		items = append(items, v)
	}
	if a.Snapshot != nil {
		item := a.Snapshot.Item()
		if err := check("the snapshot", item); err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.t.Snapshots), Item: item,
			ConditionExpression:       aws.String("attribute_not_exists(#v) OR #v < :v"),
			ExpressionAttributeNames:  map[string]string{"#v": AttrVersion},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: strconv.FormatInt(a.Snapshot.Version, 10)}}}})
	}
	if size := transactionBytes(items); len(items) > limits.DynamoDBTransactionItems || size > limits.DynamoDBTransactionBytes {
		return &TransactionTooLargeError{AggregateID: a.AggregateID, Items: len(items), Bytes: size}
	}
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return fmt.Errorf("es: appending %d events to %s at version %d: %w", len(a.Events), a.AggregateID, a.Expected+1, err)
	}
	reasons := tce.CancellationReasons
	code := func(i int) string {
		if i < len(reasons) {
			return aws.ToString(reasons[i].Code)
		}
		return ""
	}
	if a.Command != nil && code(0) == "ConditionalCheckFailed" {
		if item := reasons[0].Item; len(item) > 0 {
			rec, err := CommandRecordFromItem(item)
			if err != nil {
				return fmt.Errorf("es: command %s: %w", a.Command.ID, err)
			}
			return &DuplicateCommandError{Record: rec}
		}
		rec, err := s.Record(ctx, a.Command.ID)
		if err != nil {
			return err
		}
		if rec != nil {
			return &DuplicateCommandError{Record: rec}
		}
		return ErrContended // the record expired meanwhile: decide afresh
	}
	var other []string
	lost := false
	for i := range items {
		switch c := code(i); c {
		case "", "None":
		case "ConditionalCheckFailed":
			lost = true
		case "TransactionConflict":
			return ErrContended
		default:
			other = append(other, fmt.Sprintf("item %d: %s %s", i, c, aws.ToString(reasons[i].Message)))
		}
	}
	if lost && len(other) == 0 {
		current, err := s.Version(ctx, a.AggregateID)
		if err != nil {
			return err
		}
		if current != a.Expected {
			return &ConflictError{AggregateID: a.AggregateID, Expected: a.Expected, Current: current}
		}
		return fmt.Errorf("appending to %s at version %d: %w", a.AggregateID, a.Expected+1, ErrAheadOfLog)
	}
	return fmt.Errorf("es: appending %d events to %s at version %d: cancelled (%s): %w", len(a.Events), a.AggregateID, a.Expected+1, strings.Join(other, "; "), err)
}

// recordCondition puts a command record only over none, or over one past
// its horizon that the time to live has not removed yet (DynamoDB deletes
// expired items within a few days, not at once).
const recordCondition = "attribute_not_exists(#id) OR #exp < :now"

var recordNames = map[string]string{"#id": AttrCommandRecordID, "#exp": AttrExpiresAt}

func recordValues(now time.Time) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{":now": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Unix(), 10)}}
}

// Record is the command record with id, or nil, read consistently.
func (s *Store) Record(ctx context.Context, id string) (*CommandRecord, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.t.Commands), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{AttrCommandRecordID: &types.AttributeValueMemberS{Value: id}}})
	if err != nil {
		return nil, fmt.Errorf("es: reading the record of command %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	rec, err := CommandRecordFromItem(out.Item)
	if err != nil {
		return nil, fmt.Errorf("es: command %s: %w", id, err)
	}
	if !rec.ExpiresAt.IsZero() && time.Now().After(rec.ExpiresAt) {
		return nil, nil // expired, not yet removed by the time to live
	}
	return rec, nil
}

// PutRecord stores r unless a record with its id exists; then it returns
// that one (and stores nothing).
func (s *Store) PutRecord(ctx context.Context, r *CommandRecord) (existing *CommandRecord, err error) {
	item := r.Item()
	if err := limits.CheckItem(item); err != nil {
		return nil, fmt.Errorf("es: the record of command %s: %w", r.ID, err)
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.t.Commands), Item: item,
		ConditionExpression:                 aws.String(recordCondition),
		ExpressionAttributeNames:            recordNames,
		ExpressionAttributeValues:           recordValues(r.RecordedAt),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) > 0 {
			return CommandRecordFromItem(ccf.Item)
		}
		return s.Record(ctx, r.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("es: storing the record of command %s: %w", r.ID, err)
	}
	return nil, nil
}
