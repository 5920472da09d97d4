package cep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/ddbtable"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// The rules table: partition key "id" (a string), one item per rule:
//
//	id          the rule's id
//	definition  the rule as submitted (compact JSON)
//	status      active, disabled or deleted
//	intervals   JSON [{"from": ..., "until": ...}]: the arrival times the rule reads
//	version     bumped by every change (changes are conditional on it)
//	createdAt, updatedAt
//	expiresAt   deleted rules only: when DynamoDB's TTL removes the tombstone
//
// and one item, id "#version", whose version every change bumps in the same
// transaction: a running function reads it (one small read) to know whether
// its copy of the rules is current, and scans the rules only when it moved.
//
// A deleted rule stays as a tombstone for TombstoneTTL, so retried batches
// and replays meet the rule as it was, and its id is not reused meanwhile.

// storeAPI is what Store needs of DynamoDB.
type storeAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ storeAPI = (*dynamodb.Client)(nil)

// Bounds of the rules table.
const (
	// MaxRules bounds the rules (tombstones included) a function loads and
	// indexes on every refresh.
	MaxRules = 2000
	// TombstoneTTL is how long a deleted rule is kept: past the events
	// stream's longest default retention (7 days) and a day.
	TombstoneTTL = 8 * 24 * time.Hour
	// MaxIntervals bounds the stretches of time a rule has read events in
	// (Intervals: one more each time it is enabled again), so its item
	// stays far below DynamoDB's 400 KB (an interval is some 70 bytes)
	// and can always be disabled and deleted.
	MaxIntervals = 500
)

// Errors a rules command can meet.
var (
	ErrNotFound = errors.New("cep: no such rule")
	ErrExists   = errors.New("cep: a rule with this id exists")
	ErrTooMany  = fmt.Errorf("cep: the rules table holds %d rules (deleted ones count until their tombstone expires)", MaxRules)
)

// StateError is a change the rule's status does not allow (disabling a
// disabled rule, enabling a deleted one).
type StateError struct{ ID, Status, Want string }

func (e *StateError) Error() string {
	return fmt.Sprintf("cep: rule %q is %s: cannot %s it", e.ID, e.Status, e.Want)
}

// Store keeps rules in a DynamoDB table.
type Store struct {
	db    storeAPI
	table string
	now   func() time.Time
	log   *slog.Logger

	// maxRules is MaxRules (tests lower it); counted is called by Add
	// between counting the rules and writing (tests race it there).
	maxRules int
	counted  func()

	timing Timing
}

// NewStore returns the store of table; now is the clock changes are stamped
// with (nil: time.Now).
func NewStore(db storeAPI, table string, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, table: table, now: now, log: slog.New(slog.DiscardHandler), maxRules: MaxRules, timing: DefaultTiming}
}

// WithTiming stamps changes to apply t.ActivationDelay() after they are
// made (DefaultTiming unless set): the detect functions reading the table
// must refresh by the same t.
func (s *Store) WithTiming(t Timing) *Store { s.timing = t; return s }

// ActivationDelay is how long after a change it applies.
func (s *Store) ActivationDelay() time.Duration { return s.timing.ActivationDelay() }

// WithLogger logs rules that cannot be loaded.
func (s *Store) WithLogger(l *slog.Logger) *Store { s.log = l; return s }

// Table is the table's name.
func (s *Store) Table() string { return s.table }

// versionID is the id of the item holding the rules' version: not a rule
// id (those are letters, digits, '-' and '_').
const versionID = "#version"

const (
	attrID         = "id"
	attrDefinition = "definition"
	attrStatus     = "status"
	attrIntervals  = "intervals"
	attrVersion    = "version"
	attrCreatedAt  = "createdAt"
	attrUpdatedAt  = "updatedAt"
	attrExpiresAt  = "expiresAt"
)

// TTLAttribute is the rules table's time-to-live attribute.
const TTLAttribute = attrExpiresAt

// CreateRulesTable creates a rules table (for tests and tools; the stack
// declares it).
func CreateRulesTable(ctx context.Context, db ddbtable.Creator, name string) error {
	if err := ddbtable.Create(ctx, db, name, attrID, ""); err != nil {
		return fmt.Errorf("cep: rules table: %w", err)
	}
	return nil
}

// addAttempts is how many times Add counts and writes again when another
// change to the rules came between the two.
const addAttempts = 8

// Add stores a new rule, active for events arriving from now +
// ActivationDelay on. The rules are counted against MaxRules at the version
// the write is conditioned on, so two adds at once cannot both take the
// last place: the one whose count another change overtook counts again.
//
// Adding again what is stored (a client retrying after a timeout, a
// command run twice) is done already: an active rule of that id whose
// definition means the same (Rule.differs: parsed, not byte for byte) is
// answered with added false and nothing written, so neither the rules'
// version nor when the rule applies moves. Any other rule of that id
// (another definition, disabled, deleted and kept as a tombstone) is
// ErrExists saying which.
func (s *Store) Add(ctx context.Context, r *Rule) (sr *StoredRule, added bool, err error) {
	for attempt := 1; ; attempt++ {
		sr, added, err := s.add(ctx, r)
		if !errors.Is(err, errVersionMoved) {
			return sr, added, err
		}
		if attempt == addAttempts {
			return nil, false, fmt.Errorf("cep: adding rule %q: the rules changed under each of %d attempts to count them; try again", r.ID, attempt)
		}
	}
}

func (s *Store) add(ctx context.Context, r *Rule) (*StoredRule, bool, error) {
	// The version first: a change after it moves it, and the write below
	// is conditioned on it; every change before it is in the (consistent)
	// scan.
	version, err := s.Version(ctx)
	if err != nil {
		return nil, false, err
	}
	// Every rule item counts, one that no longer parses too: past
	// MaxRules items List, and so detect, would refuse the table.
	rules, items, err := s.list(ctx)
	if err != nil {
		return nil, false, err
	}
	// A rule of this id first: adding again what is stored is done
	// already, even in a full table.
	for _, sr := range rules {
		if sr.Rule.ID == r.ID {
			return stored(sr, r)
		}
	}
	if items >= s.maxRules {
		return nil, false, ErrTooMany
	}
	if s.counted != nil {
		s.counted()
	}
	now := s.now().UTC()
	sr := &StoredRule{Rule: r, Status: StatusActive, Intervals: []Interval{{From: now.Add(s.timing.ActivationDelay())}}, Version: 1, CreatedAt: now, UpdatedAt: now}
	item, err := itemOf(sr)
	if err != nil {
		return nil, false, err
	}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(attrID))).Build()
	if err != nil {
		return nil, false, err
	}
	err = s.writeAt(ctx, &types.Put{TableName: aws.String(s.table), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names()}, &version)
	if errors.Is(err, errCondition) {
		// Added meanwhile (the same command's first attempt still
		// running, say), or an item that no longer parses.
		if sr, gerr := s.Get(ctx, r.ID); gerr == nil {
			return stored(sr, r)
		}
		return nil, false, fmt.Errorf("%w: %q (a deleted rule's id is kept for %d days)", ErrExists, r.ID, TombstoneTTL/(24*time.Hour))
	}
	if err != nil && !errors.Is(err, errVersionMoved) {
		return nil, false, fmt.Errorf("cep: adding rule %q: %w", r.ID, err)
	}
	return sr, err == nil, err
}

// stored answers adding r when sr holds its id: sr when it is r, active;
// ErrExists saying why not otherwise.
func stored(sr *StoredRule, r *Rule) (*StoredRule, bool, error) {
	switch part := sr.Rule.differs(r); {
	case sr.Status == StatusDeleted:
		return nil, false, fmt.Errorf("%w: %q, deleted (a deleted rule's id is kept for %d days): add it under another id", ErrExists, r.ID, TombstoneTTL/(24*time.Hour))
	case part != "":
		return nil, false, fmt.Errorf("%w: %q, with another definition: its %s differs (delete it and add this one under another id)", ErrExists, r.ID, part)
	case sr.Status != StatusActive:
		return nil, false, fmt.Errorf("%w: %q, with this definition, %s: enable it instead", ErrExists, r.ID, sr.Status)
	}
	return sr, false, nil
}

// errCondition is a transaction refused by the rule item's condition, and
// errVersionMoved one refused because the rules' version is no longer the
// one the writer read.
var (
	errCondition    = errors.New("cep: the rule changed")
	errVersionMoved = errors.New("cep: the rules changed")
)

// write puts a rule item and bumps the rules' version, in one transaction.
func (s *Store) write(ctx context.Context, put *types.Put) error { return s.writeAt(ctx, put, nil) }

// writeAt is write that, given a version, bumps it only from that version
// (errVersionMoved otherwise).
func (s *Store) writeAt(ctx context.Context, put *types.Put, version *int64) error {
	b := expression.NewBuilder().WithUpdate(expression.Add(expression.Name(attrVersion), expression.Value(1)))
	if version != nil {
		at := expression.AttributeNotExists(expression.Name(attrVersion))
		if *version != 0 {
			at = expression.Equal(expression.Name(attrVersion), expression.Value(*version))
		}
		b = b.WithCondition(at)
	}
	bump, err := b.Build()
	if err != nil {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: put},
		{Update: &types.Update{TableName: aws.String(s.table), Key: map[string]types.AttributeValue{attrID: &types.AttributeValueMemberS{Value: versionID}},
			UpdateExpression: bump.Update(), ConditionExpression: bump.Condition(),
			ExpressionAttributeNames: bump.Names(), ExpressionAttributeValues: bump.Values()}},
	}})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		reasons := tce.CancellationReasons
		if len(reasons) > 0 && aws.ToString(reasons[0].Code) == "ConditionalCheckFailed" {
			return errCondition
		}
		if len(reasons) > 1 && aws.ToString(reasons[1].Code) == "ConditionalCheckFailed" {
			return errVersionMoved
		}
	}
	return err
}

// Version is the rules' version: it changes with every change to a rule.
func (s *Store) Version(ctx context.Context) (int64, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{attrID: &types.AttributeValueMemberS{Value: versionID}}})
	if err != nil {
		return 0, fmt.Errorf("cep: reading the rules' version in %s: %w", s.table, err)
	}
	v, ok := out.Item[attrVersion].(*types.AttributeValueMemberN)
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(v.Value, 10, 64)
}

// Get reads one rule. An id that is no rule's is quoted cut in the error
// (it comes from a request's path).
func (s *Store) Get(ctx context.Context, id string) (*StoredRule, error) {
	if id == versionID || !idPattern.MatchString(id) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, strictjson.QuoteCut(id, maxEchoBytes))
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{attrID: &types.AttributeValueMemberS{Value: id}}})
	if err != nil {
		return nil, fmt.Errorf("cep: reading rule %q: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return fromItem(out.Item)
}

// List reads every rule (a strongly consistent scan), sorted by id. A
// rule whose stored definition no longer parses is logged and left out. A
// table holding more items than a rules table can (MaxRules and the
// version) is refused once the scan passes that many, not read to its end.
func (s *Store) List(ctx context.Context) ([]*StoredRule, error) {
	out, _, err := s.list(ctx)
	return out, err
}

// list is List, and how many rule items the table holds, those that no
// longer parse included: what Add counts against MaxRules, since List
// refuses a table of more.
func (s *Store) list(ctx context.Context) ([]*StoredRule, int, error) {
	var out []*StoredRule
	items := 0
	var start map[string]types.AttributeValue
	read := 0
	for {
		page, err := s.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true), ExclusiveStartKey: start})
		if err != nil {
			return nil, 0, fmt.Errorf("cep: listing the rules in %s: %w", s.table, err)
		}
		// A rules table holds at most maxRules rules and its version item:
		// more is another table (rules list -table <the events table>),
		// not read to its end.
		if read += len(page.Items); read > s.maxRules+1 {
			return nil, 0, fmt.Errorf("cep: listing the rules in %s: it holds more than %d items, more than a rules table does (%d rules, deleted ones included, and its version): is it the rules table?", s.table, s.maxRules+1, s.maxRules)
		}
		for _, it := range page.Items {
			if id, ok := it[attrID].(*types.AttributeValueMemberS); ok && id.Value == versionID {
				continue
			}
			items++
			sr, err := fromItem(it)
			if err != nil {
				s.log.Error("a stored rule cannot be loaded: left out", "table", s.table, "error", err.Error())
				continue
			}
			out = append(out, sr)
		}
		if len(page.LastEvaluatedKey) == 0 {
			break
		}
		start = page.LastEvaluatedKey
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rule.ID < out[j].Rule.ID })
	return out, items, nil
}

// Disable stops a rule: it reads no event arriving from now +
// ActivationDelay on, and emits nothing once that time has passed.
func (s *Store) Disable(ctx context.Context, id string) (*StoredRule, error) {
	return s.change(ctx, id, "disable", func(sr *StoredRule, now time.Time) error {
		if sr.Status != StatusActive {
			return &StateError{ID: id, Status: sr.Status, Want: "disable"}
		}
		sr.Status = StatusDisabled
		closeInterval(sr, now.Add(s.timing.ActivationDelay()))
		return nil
	})
}

// Enable starts a disabled rule again, for events arriving from now +
// ActivationDelay on.
func (s *Store) Enable(ctx context.Context, id string) (*StoredRule, error) {
	return s.change(ctx, id, "enable", func(sr *StoredRule, now time.Time) error {
		if sr.Status != StatusDisabled {
			return &StateError{ID: id, Status: sr.Status, Want: "enable"}
		}
		if len(sr.Intervals) >= MaxIntervals {
			return &RuleError{Part: "intervals", Reason: fmt.Sprintf(
				"rule %q has been enabled %d times, the most its item keeps (each stretch of time it read events is kept, so a replay runs it where it ran); add it again under a new id", id, len(sr.Intervals))}
		}
		sr.Status = StatusActive
		from := now.Add(s.timing.ActivationDelay())
		if n := len(sr.Intervals); n > 0 && sr.Intervals[n-1].Until.After(from) {
			from = sr.Intervals[n-1].Until
		}
		sr.Intervals = append(sr.Intervals, Interval{From: from})
		return nil
	})
}

// Delete stops a rule as Disable does and marks it deleted; DynamoDB
// removes it TombstoneTTL later.
func (s *Store) Delete(ctx context.Context, id string) (*StoredRule, error) {
	return s.change(ctx, id, "delete", func(sr *StoredRule, now time.Time) error {
		if sr.Status == StatusDeleted {
			return &StateError{ID: id, Status: sr.Status, Want: "delete"}
		}
		sr.Status = StatusDeleted
		closeInterval(sr, now.Add(s.timing.ActivationDelay()))
		return nil
	})
}

// closeInterval ends sr's open interval at until (a change's time plus the
// activation delay).
func closeInterval(sr *StoredRule, until time.Time) {
	n := len(sr.Intervals)
	if n == 0 || !sr.Intervals[n-1].Until.IsZero() {
		return
	}
	if until.Before(sr.Intervals[n-1].From) {
		until = sr.Intervals[n-1].From // disabled before it began: an empty interval
	}
	sr.Intervals[n-1].Until = until
}

// change applies f to a rule with a write conditional on its version,
// reading it again if another change came first.
func (s *Store) change(ctx context.Context, id, what string, f func(sr *StoredRule, now time.Time) error) (*StoredRule, error) {
	for attempt := 0; attempt < 5; attempt++ {
		sr, err := s.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		now := s.now().UTC()
		prev := sr.Version
		if err := f(sr, now); err != nil {
			return nil, err
		}
		sr.Version, sr.UpdatedAt = prev+1, now
		item, err := itemOf(sr)
		if err != nil {
			return nil, err
		}
		if sr.Status == StatusDeleted {
			item[attrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(TombstoneTTL).Unix(), 10)}
		}
		cond, err := expression.NewBuilder().WithCondition(expression.Equal(expression.Name(attrVersion), expression.Value(prev))).Build()
		if err != nil {
			return nil, err
		}
		err = s.write(ctx, &types.Put{TableName: aws.String(s.table), Item: item,
			ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()})
		if errors.Is(err, errCondition) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cep: %s rule %q: %w", what, id, err)
		}
		return sr, nil
	}
	return nil, fmt.Errorf("cep: %s rule %q: it kept changing under the write; try again", what, id)
}

func itemOf(sr *StoredRule) (map[string]types.AttributeValue, error) {
	iv, err := json.Marshal(sr.Intervals)
	if err != nil {
		return nil, err
	}
	return map[string]types.AttributeValue{
		attrID:         &types.AttributeValueMemberS{Value: sr.Rule.ID},
		attrDefinition: &types.AttributeValueMemberS{Value: string(sr.Rule.Source)},
		attrStatus:     &types.AttributeValueMemberS{Value: sr.Status},
		attrIntervals:  &types.AttributeValueMemberS{Value: string(iv)},
		attrVersion:    &types.AttributeValueMemberN{Value: strconv.Itoa(sr.Version)},
		attrCreatedAt:  &types.AttributeValueMemberS{Value: sr.CreatedAt.Format(time.RFC3339Nano)},
		attrUpdatedAt:  &types.AttributeValueMemberS{Value: sr.UpdatedAt.Format(time.RFC3339Nano)},
	}, nil
}

func fromItem(it map[string]types.AttributeValue) (*StoredRule, error) {
	str := func(name string) string {
		if v, ok := it[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	id := str(attrID)
	// A rule added before ParseRule refused control, line-breaking and
	// invisible characters in its types and keys still loads, so it can be
	// listed and deleted.
	r, err := parseRule([]byte(str(attrDefinition)), true)
	if err != nil {
		return nil, fmt.Errorf("rule %q: %w", id, err)
	}
	sr := &StoredRule{Rule: r, Status: str(attrStatus)}
	if err := json.Unmarshal([]byte(str(attrIntervals)), &sr.Intervals); err != nil {
		return nil, fmt.Errorf("rule %q: intervals: %w", id, err)
	}
	if v, ok := it[attrVersion].(*types.AttributeValueMemberN); ok {
		sr.Version, _ = strconv.Atoi(v.Value)
	}
	sr.CreatedAt, _ = time.Parse(time.RFC3339Nano, str(attrCreatedAt))
	sr.UpdatedAt, _ = time.Parse(time.RFC3339Nano, str(attrUpdatedAt))
	return sr, nil
}

// RuleView is a rule as the management API and cmd/rules show it.
type RuleView struct {
	ID         string          `json:"id"`
	Status     string          `json:"status"`
	ActiveNow  bool            `json:"activeNow"`
	Definition json.RawMessage `json:"definition"`
	Intervals  []Interval      `json:"intervals"`
	Version    int             `json:"version"`
	CreatedAt  time.Time       `json:"createdAt"`
	UpdatedAt  time.Time       `json:"updatedAt"`
}

// View is sr as shown to a user at now.
func (sr *StoredRule) View(now time.Time) RuleView {
	return RuleView{ID: sr.Rule.ID, Status: sr.Status, ActiveNow: sr.ActiveAt(now), Definition: sr.Rule.Source,
		Intervals: sr.Intervals, Version: sr.Version, CreatedAt: sr.CreatedAt, UpdatedAt: sr.UpdatedAt}
}
