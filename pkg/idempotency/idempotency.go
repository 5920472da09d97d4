package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Record statuses, as Powertools writes them.
const (
	StatusInProgress = "INPROGRESS"
	StatusCompleted  = "COMPLETED"
)

// Attribute names of a persistence record (Powertools' defaults).
const (
	AttrID                   = "id"
	AttrStatus               = "status"
	AttrExpiration           = "expiration"             // N, epoch seconds: the table's TTL attribute
	AttrInProgressExpiration = "in_progress_expiration" // N, epoch milliseconds
	AttrData                 = "data"                   // S, the stored result
	AttrValidation           = "validation"             // S, the payload hash
)

// Defaults for Config fields left zero.
const (
	DefaultExpires = time.Hour
	// DefaultInProgress is how long an INPROGRESS record locks its key when
	// the context has no deadline (Lambda's longest timeout).
	DefaultInProgress = 15 * time.Minute
)

// MaxResultBytes bounds the result a COMPLETED record keeps. A DynamoDB
// item holds at most 400 KB, and a record whose result did not fit could
// not be marked COMPLETED at all: its key would unlock when the INPROGRESS
// record expired and the side effect run again at every retry. A larger
// result is returned to the call that ran fn but not kept; a duplicate call
// gets none (nil).
const MaxResultBytes = 350 << 10

// completionTimeout is the least time the COMPLETED mark and the delete
// after a failed fn get, which run even when ctx has ended: both are single
// small writes.
const completionTimeout = 2 * time.Second

// completionContext is the context of the write that follows fn: it outlives
// a cancelled ctx, and ends at ctx's deadline or completionTimeout from now,
// whichever is later. A slow table (throttled, or a busy stand-in) gets the
// invocation's time left, not 2 s: a mark that gives up leaves the side
// effect unrecorded, its message redelivered after the queue's visibility
// timeout, and the key locked until then.
func completionContext(ctx context.Context) (context.Context, context.CancelFunc) {
	until := time.Now().Add(completionTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.After(until) {
		until = dl
	}
	return context.WithDeadline(context.WithoutCancel(ctx), until)
}

// ErrInProgress means another invocation holds the key: it is running the
// function for the same payload now, and its INPROGRESS record has not
// expired. Report the message failed; its redelivery finds the result.
var ErrInProgress = errors.New("idempotency: another invocation is processing this key")

// PayloadMismatchError is a payload whose key has a record written for a
// different payload (its validation hash differs): the stored result belongs
// to someone else, so it is not returned and the function is not run.
type PayloadMismatchError struct {
	// Key is the idempotency key (the record's id).
	Key string
	// Path is Config.ValidationPath.
	Path string
	// KeyPath is Config.KeyPath: what the sender changes to send other work.
	KeyPath string
	// Until is when the stored record expires (zero: not known), after
	// which the key may name other work.
	Until time.Time
}

func (e *PayloadMismatchError) Error() string {
	what := "the key"
	if e.KeyPath != "" {
		what = "payload field " + e.KeyPath
	}
	until := ""
	if !e.Until.IsZero() {
		until = " until " + e.Until.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("idempotency: key %s: payload field %s differs from the one its stored result was computed for: %s names one piece of work%s; "+
		"send other work under a new value of %s, and a retry with the same %s as the first", e.Key, e.Path, what, until, what, e.Path)
}

// PersistenceError is a failed request to the idempotency table.
type PersistenceError struct {
	// Op is what was being done: "save in progress", "save completed",
	// "delete", "read".
	Op  string
	Key string
	Err error
}

func (e *PersistenceError) Error() string {
	return fmt.Sprintf("idempotency: %s record %s: %v", e.Op, e.Key, e.Err)
}

func (e *PersistenceError) Unwrap() error { return e.Err }

// recordStore is what a Store needs of DynamoDB.
type recordStore interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

var _ recordStore = (*dynamodb.Client)(nil)

// Config says how keys are made and how long records live.
type Config struct {
	// FunctionName prefixes every key ("<FunctionName>#<sha256>"), so that
	// functions can share a table. Required.
	FunctionName string
	// KeyPath is the dotted JSON path of the part of the payload that
	// identifies it ("body", "data.orderId"); "" means the whole payload.
	KeyPath string
	// ValidationPath, when set, is the part of the payload whose hash is
	// stored with the record and compared on every later call with the same
	// key (Powertools' payload validation). A part that is missing or
	// null is compared as null.
	ValidationPath string
	// RequireKey makes a payload without KeyPath an error (*KeyError).
	// Without it, as Powertools does by default, such a payload runs the
	// function without idempotency.
	RequireKey bool
	// Expires is how long a COMPLETED record is kept (its TTL);
	// DefaultExpires if zero.
	Expires time.Duration
	// InProgress is how long an INPROGRESS record locks its key when the
	// context has no deadline; DefaultInProgress if zero. With a deadline,
	// the lock ends at the deadline.
	InProgress time.Duration
}

// Store runs functions idempotently over one DynamoDB table whose partition
// key is id (S) and whose TTL attribute is expiration. It is safe for
// concurrent use.
type Store struct {
	db    recordStore
	table string
	cfg   Config
	now   func() time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock records are stamped and compared with (tests).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns a Store over table. It fails when cfg.FunctionName is empty.
func New(db recordStore, table string, cfg Config, opts ...Option) (*Store, error) {
	if cfg.FunctionName == "" {
		return nil, errors.New("idempotency: Config.FunctionName is required (it prefixes every key)")
	}
	if table == "" {
		return nil, errors.New("idempotency: the table name is required")
	}
	if cfg.Expires <= 0 {
		cfg.Expires = DefaultExpires
	}
	if cfg.InProgress <= 0 {
		cfg.InProgress = DefaultInProgress
	}
	s := &Store{db: db, table: table, cfg: cfg, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Key is the idempotency key of payload: "<FunctionName>#<sha256 of the
// KeyPath part>".
func (s *Store) Key(payload []byte) (string, error) {
	h, err := hashPath(payload, s.cfg.KeyPath)
	if err != nil {
		return "", err
	}
	return s.cfg.FunctionName + "#" + h, nil
}

// Do runs fn once per idempotency key of payload and returns its result.
//
//   - First call for the key: an INPROGRESS record is written (locking the
//     key until ctx's deadline), fn runs, and its result is stored as
//     COMPLETED for Config.Expires (a result over MaxResultBytes is not
//     kept, the COMPLETED mark is). If fn fails the record is deleted and
//     fn's error returned, so that a retry runs fn again.
//   - Key COMPLETED and not expired: the stored result, fn does not run.
//   - Key INPROGRESS and its lock not expired: ErrInProgress.
//   - Record of a different payload (ValidationPath): *PayloadMismatchError.
//
// If fn succeeded but the COMPLETED mark could not be written, Do returns a
// *PersistenceError; the key stays locked until the INPROGRESS record
// expires, and then a retry runs fn again.
func (s *Store) Do(ctx context.Context, payload []byte, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	key, err := s.Key(payload)
	if err != nil {
		var ke *KeyError
		if errors.As(err, &ke) && !s.cfg.RequireKey && s.cfg.KeyPath != "" {
			return fn(ctx)
		}
		return nil, err
	}
	var validation string
	if s.cfg.ValidationPath != "" {
		if validation, err = validationHash(payload, s.cfg.ValidationPath); err != nil {
			return nil, err
		}
	}

	now := s.now()
	lock := now.Add(s.cfg.InProgress)
	if dl, ok := ctx.Deadline(); ok {
		lock = dl
	}
	item := map[string]types.AttributeValue{
		AttrID:                   &types.AttributeValueMemberS{Value: key},
		AttrStatus:               &types.AttributeValueMemberS{Value: StatusInProgress},
		AttrExpiration:           number(now.Add(s.cfg.Expires).Unix()),
		AttrInProgressExpiration: number(lock.UnixMilli()),
	}
	if validation != "" {
		item[AttrValidation] = &types.AttributeValueMemberS{Value: validation}
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item:      item,
		ConditionExpression: aws.String("attribute_not_exists(#id) OR #exp < :now OR " +
			"(#status = :inprogress AND attribute_exists(#ipexp) AND #ipexp < :nowms)"),
		ExpressionAttributeNames: map[string]string{
			"#id": AttrID, "#exp": AttrExpiration, "#status": AttrStatus, "#ipexp": AttrInProgressExpiration,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now":        number(now.Unix()),
			":nowms":      number(now.UnixMilli()),
			":inprogress": &types.AttributeValueMemberS{Value: StatusInProgress},
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return nil, &PersistenceError{Op: "save in progress", Key: key, Err: err}
		}
		old := ccf.Item
		if old == nil {
			// An endpoint that does not return the item: read it.
			if old, err = s.read(ctx, key); err != nil {
				return nil, err
			}
			if old == nil { // deleted in between: the caller retries later
				return nil, ErrInProgress
			}
		}
		return s.existing(key, validation, old)
	}

	result, fnErr := fn(ctx)
	if fnErr != nil {
		// Delete with a context that outlives a cancelled ctx: a record left
		// behind would lock the key until its deadline for nothing.
		dctx, cancel := completionContext(ctx)
		defer cancel()
		// Only the record this call wrote: once its lock has expired another
		// invocation may hold the key, and deleting its record would let a
		// third run the side effect beside it.
		_, err := s.db.DeleteItem(dctx, &dynamodb.DeleteItemInput{
			TableName:           aws.String(s.table),
			Key:                 map[string]types.AttributeValue{AttrID: &types.AttributeValueMemberS{Value: key}},
			ConditionExpression: aws.String("#status = :inprogress AND #ipexp = :lock"),
			ExpressionAttributeNames: map[string]string{
				"#status": AttrStatus, "#ipexp": AttrInProgressExpiration,
			},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":inprogress": &types.AttributeValueMemberS{Value: StatusInProgress},
				":lock":       item[AttrInProgressExpiration],
			},
		})
		var ccf *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &ccf) {
			return nil, errors.Join(fnErr, &PersistenceError{Op: "delete", Key: key, Err: err})
		}
		return nil, fnErr
	}

	names := map[string]string{"#status": AttrStatus, "#exp": AttrExpiration, "#ipexp": AttrInProgressExpiration}
	values := map[string]types.AttributeValue{
		":completed": &types.AttributeValueMemberS{Value: StatusCompleted},
		":exp":       number(s.now().Add(s.cfg.Expires).Unix()),
	}
	update := "SET #status = :completed, #exp = :exp"
	if result != nil && len(result) <= MaxResultBytes {
		names["#data"] = AttrData
		values[":data"] = &types.AttributeValueMemberS{Value: string(result)}
		update += ", #data = :data"
	}
	update += " REMOVE #ipexp"
	// The side effect happened: mark it even if ctx ended meanwhile (the
	// invoke deadline's margin), or a retry would run fn again.
	cctx, cancel := completionContext(ctx)
	defer cancel()
	if _, err := s.db.UpdateItem(cctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       map[string]types.AttributeValue{AttrID: &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:          aws.String(update),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}); err != nil {
		return nil, &PersistenceError{Op: "save completed", Key: key, Err: err}
	}
	return result, nil
}

// existing decides what a call gets when key already has a live record.
func (s *Store) existing(key, validation string, old map[string]types.AttributeValue) ([]byte, error) {
	if validation != "" {
		if v, ok := old[AttrValidation].(*types.AttributeValueMemberS); ok && v.Value != validation {
			pm := &PayloadMismatchError{Key: key, Path: s.cfg.ValidationPath, KeyPath: s.cfg.KeyPath}
			if n, ok := old[AttrExpiration].(*types.AttributeValueMemberN); ok {
				if sec, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
					pm.Until = time.Unix(sec, 0)
				}
			}
			return nil, pm
		}
	}
	status, _ := old[AttrStatus].(*types.AttributeValueMemberS)
	if status == nil || status.Value != StatusCompleted {
		return nil, ErrInProgress
	}
	if d, ok := old[AttrData].(*types.AttributeValueMemberS); ok {
		return []byte(d.Value), nil
	}
	return nil, nil
}

func (s *Store) read(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            map[string]types.AttributeValue{AttrID: &types.AttributeValueMemberS{Value: key}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, &PersistenceError{Op: "read", Key: key, Err: err}
	}
	return out.Item, nil
}

func number(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
