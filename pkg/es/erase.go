package es

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The audit trail of erasures: one aggregate per subject.
const (
	// ErasureAggregateType is the aggregate type of erasure audit events.
	ErasureAggregateType = "erasure"
	// TypePersonalDataErased is the audit event Erase appends.
	TypePersonalDataErased = "PersonalDataErased"
	// maxErasureListed bounds the event ids an audit event lists (the rest
	// are counted), so it stays well under DynamoDB's item limit.
	maxErasureListed = 2000
	maxSubjectLength = 64
	maxReasonLength  = 1000
	// maxByLength bounds who erased (an operator's name or email).
	maxByLength = 256
)

// eraseAPI is what Erase needs of DynamoDB besides the store's calls.
type eraseAPI interface {
	storeAPI
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ eraseAPI = (*dynamodb.Client)(nil)

// Erasure is a request to erase a subject's personal data.
type Erasure struct {
	// Subject is whose data (the events' AttrSubject, a customer id).
	Subject string
	// Reason says why (a request's reference); it is kept in the audit
	// event, so it must not itself be personal data.
	Reason string
	// By is who erased (an operator).
	By string
}

// ErasureResult is what Erase did.
type ErasureResult struct {
	// ID marks the erased events (AttrErasure) and names the erasure in
	// its audit event.
	ID string
	// Erased are the events whose personal data was removed now.
	Erased []string
	// AlreadyErased counts the subject's events erased before.
	AlreadyErased int
	// Completed are events an earlier run erased without appending its
	// audit event (it stopped in between); this run's audit event lists
	// them and names those runs (Completes).
	Completed []string
	// Completes are the ids of those earlier runs.
	Completes []string
	// Audit is the audit event appended (nil in a dry run or when there was
	// nothing to erase).
	Audit *Event
}

// NamespaceSeparator separates the kind of an aggregate the event store
// makes for itself from the id it is about: ErasureAggregate("cust-5") is
// "erasure#cust-5". No aggregate id a command can name holds it
// (CheckAggregateID allows letters, digits and - _ . : only, and the
// executor checks every command's aggregate), so the store's own
// aggregates and a domain's can never be the same one, whatever ids users
// choose — and no id a user could already have is taken from them.
const NamespaceSeparator = "#"

// ErasureAggregate is the aggregate holding subject's erasure audit trail,
// in the store's own namespace (NamespaceSeparator).
func ErasureAggregate(subject string) string {
	return ErasureAggregateType + NamespaceSeparator + subject
}

// LegacyErasureAggregate is where Erase appended subject's audit trail
// before it had a namespace of its own: "erasure:<subject>", an id a show
// may also have (the audit event was then appended into the show, which
// the executor now passes over: see Executor.Fold). ErasureTrail reads it.
func LegacyErasureAggregate(subject string) string { return ErasureAggregateType + ":" + subject }

// ErasureTrail is subject's erasure audit events, oldest first: those
// appended at LegacyErasureAggregate(subject) before the namespace
// existed — only the events of type ErasureAggregateType there, since that
// aggregate may be another's — then those at ErasureAggregate(subject).
func ErasureTrail(ctx context.Context, s *Store, subject string) ([]Event, error) {
	if err := checkName(subject, maxSubjectLength); err != nil {
		return nil, Invalid("subject", "%v", err)
	}
	legacy, err := s.Events(ctx, LegacyErasureAggregate(subject), 0, 0)
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, e := range legacy {
		if e.AggregateType == ErasureAggregateType && e.Type == TypePersonalDataErased {
			out = append(out, e)
		}
	}
	current, err := s.Events(ctx, ErasureAggregate(subject), 0, 0)
	if err != nil {
		return nil, err
	}
	return append(out, current...), nil
}

// misplacedAudit says whether e is an erasure audit event in an aggregate
// that is not an erasure trail: one Erase appended into an aggregate whose
// id was LegacyErasureAggregate(subject) before the namespace existed.
func misplacedAudit(e *Event, aggregateType string) bool {
	return e.AggregateType == ErasureAggregateType && e.Type == TypePersonalDataErased && aggregateType != ErasureAggregateType
}

// Erase removes the personal data of subject from every event that holds
// some (found by SubjectIndex), and nothing else: each such event loses its
// AttrPersonal attribute and gains AttrErasedAt and AttrErasure, with an
// UpdateItem conditioned on the personal data being there. Then it appends
// a PersonalDataErased event to ErasureAggregate(subject) listing the
// events, the reason and who asked: the erasure is audited in the log
// itself. Running it again erases what a crashed run left and appends a new
// audit event only if it erased something or finds events an earlier run
// erased without its audit event (it stopped in between): those it lists
// too, so no erasure goes unaudited. With dryRun it only lists, changing
// nothing: the events still holding personal data (Erased) and those an
// earlier run erased without its audit event (Completed), which the run
// would audit; it needs no By.
//
// It is the one path in this package that changes an event. The stack
// grants it to no function: an operator runs it (cmd/eventstore erase).
// The publisher sees each erasure as a MODIFY that only removed personal
// data, which it does not publish (the published records never held any).
func Erase(ctx context.Context, db eraseAPI, t Tables, er Erasure, now time.Time, dryRun bool) (*ErasureResult, error) {
	if err := checkName(er.Subject, maxSubjectLength); err != nil {
		return nil, Invalid("subject", "%v", err)
	}
	if er.Reason == "" || len(er.Reason) > maxReasonLength {
		return nil, Invalid("reason", "is required (at most %d bytes): the audit event keeps it", maxReasonLength)
	}
	// A dry run appends no audit event: it needs no By, but one given is
	// still bounded.
	if (er.By == "" && !dryRun) || len(er.By) > maxByLength {
		return nil, Invalid("by", "is required (at most %d bytes): the audit event names who erased", maxByLength)
	}
	now = now.UTC()
	res := &ErasureResult{ID: ErasureAggregate(er.Subject) + "@" + now.Format(time.RFC3339Nano)}
	keys, err := subjectEvents(ctx, db, t.Events, er.Subject)
	if err != nil {
		return nil, err
	}
	// earlier: the events erased before, by erasure id.
	earlier := map[string][]string{}
	for _, k := range keys {
		name := k.id + "/" + k.version
		if dryRun {
			// The index keeps an erased event (its subject stays): list
			// only what still holds personal data, and which erasure
			// erased the rest (one that stopped before its audit event
			// is audited by the run the dry run stands for).
			holds, by, err := personalState(ctx, db, t.Events, k)
			if err != nil {
				return nil, fmt.Errorf("es: reading event %s: %w", name, err)
			}
			if holds {
				res.Erased = append(res.Erased, name)
				continue
			}
			res.AlreadyErased++
			if by != "" {
				earlier[by] = append(earlier[by], name)
			}
			continue
		}
		upd := expression.Remove(expression.Name(AttrPersonal)).
			Set(expression.Name(AttrErasedAt), expression.Value(now.Format(time.RFC3339Nano))).
			Set(expression.Name(AttrErasure), expression.Value(res.ID))
		e, err := expression.NewBuilder().WithUpdate(upd).WithCondition(expression.AttributeExists(expression.Name(AttrPersonal))).Build()
		if err != nil {
			return nil, fmt.Errorf("es: erasure of %s: %w", name, err)
		}
		key := map[string]types.AttributeValue{AttrAggregateID: &types.AttributeValueMemberS{Value: k.id},
			AttrVersion: &types.AttributeValueMemberN{Value: k.version}}
		_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(t.Events), Key: key,
			UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &ccf):
			res.AlreadyErased++
			by, err := erasedBy(ctx, db, t.Events, key, ccf.Item)
			if err != nil {
				return res, fmt.Errorf("es: reading which erasure erased event %s: %w", name, err)
			}
			if by != "" {
				earlier[by] = append(earlier[by], name)
			}
		case err != nil:
			return res, fmt.Errorf("es: erasing the personal data of event %s (%d of %d erased so far; run it again to finish): %w", name, len(res.Erased), len(keys), err)
		default:
			res.Erased = append(res.Erased, name)
		}
	}
	store := NewStore(db, t)
	if len(earlier) > 0 {
		// An earlier run that stopped before its audit event: its events
		// are audited by this run's.
		trail, err := ErasureTrail(ctx, store, er.Subject)
		if err != nil {
			return res, err
		}
		for _, e := range trail {
			delete(earlier, e.CommandID)
			var d struct {
				Completes []string `json:"completes"`
			}
			if json.Unmarshal(e.Data, &d) == nil {
				for _, id := range d.Completes {
					delete(earlier, id)
				}
			}
		}
		res.Completes = slices.Sorted(maps.Keys(earlier))
		for _, id := range res.Completes {
			res.Completed = append(res.Completed, earlier[id]...)
		}
	}
	if dryRun || (len(res.Erased) == 0 && len(res.Completed) == 0) {
		return res, nil
	}
	listed := append(slices.Clone(res.Erased), res.Completed...)
	count := len(listed)
	if len(listed) > maxErasureListed {
		listed = listed[:maxErasureListed]
	}
	audit := map[string]any{"erasure": res.ID, "subject": er.Subject, "reason": er.Reason, "by": er.By,
		"events": listed, "eventCount": count}
	if len(res.Completes) > 0 {
		audit["completes"] = res.Completes
	}
	data, err := marshal(audit)
	if err != nil {
		return res, err
	}
	agg := ErasureAggregate(er.Subject)
	for attempt := 0; attempt < DefaultMaxAttempts; attempt++ {
		v, err := store.Version(ctx, agg)
		if err != nil {
			return res, err
		}
		ev := Event{AggregateType: ErasureAggregateType, AggregateID: agg, Version: v + 1, Type: TypePersonalDataErased,
			Data: data, CommandID: res.ID, RecordedAt: now}
		err = store.Append(ctx, Append{AggregateID: agg, Expected: v, Events: []Event{ev}})
		var conflict *ConflictError
		if errors.As(err, &conflict) || errors.Is(err, ErrContended) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("es: the personal data is erased, but the audit event was not appended (run it again to append it): %w", err)
		}
		res.Audit = &ev
		return res, nil
	}
	return res, fmt.Errorf("es: the personal data is erased, but the audit event kept losing to other appends to %s (run it again)", agg)
}

// erasedBy is the erasure id (AttrErasure) of an erased event: from item,
// the event as the failed condition returned it, or read.
func erasedBy(ctx context.Context, db storeAPI, table string, key, item map[string]types.AttributeValue) (string, error) {
	if len(item) == 0 {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true),
			ProjectionExpression: aws.String("#e"), ExpressionAttributeNames: map[string]string{"#e": AttrErasure}})
		if err != nil {
			return "", err
		}
		item = out.Item
	}
	if s, ok := item[AttrErasure].(*types.AttributeValueMemberS); ok {
		return s.Value, nil
	}
	return "", nil
}

// personalState reports whether the event at k still holds personal data
// and, if not, which erasure erased it ("" when none is recorded): a
// consistent read of those two attributes alone.
func personalState(ctx context.Context, db storeAPI, table string, k eventKey) (holds bool, erasedBy string, err error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{AttrAggregateID: &types.AttributeValueMemberS{Value: k.id},
			AttrVersion: &types.AttributeValueMemberN{Value: k.version}},
		ProjectionExpression: aws.String("#p, #e"), ExpressionAttributeNames: map[string]string{"#p": AttrPersonal, "#e": AttrErasure}})
	if err != nil {
		return false, "", err
	}
	if _, ok := out.Item[AttrPersonal]; ok {
		return true, "", nil
	}
	if s, ok := out.Item[AttrErasure].(*types.AttributeValueMemberS); ok {
		erasedBy = s.Value
	}
	return false, erasedBy, nil
}

type eventKey struct{ id, version string }

// subjectEvents lists the keys of subject's events from SubjectIndex.
func subjectEvents(ctx context.Context, db storeAPI, table, subject string) ([]eventKey, error) {
	e, err := expression.NewBuilder().WithKeyCondition(expression.Key(AttrSubject).Equal(expression.Value(subject))).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{TableName: aws.String(table), IndexName: aws.String(SubjectIndex),
		KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
	var out []eventKey
	for {
		page, err := db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("es: listing the events of subject %s: %w", subject, err)
		}
		for _, it := range page.Items {
			id, ok1 := it[AttrAggregateID].(*types.AttributeValueMemberS)
			v, ok2 := it[AttrVersion].(*types.AttributeValueMemberN)
			if ok1 && ok2 {
				out = append(out, eventKey{id.Value, v.Value})
			}
		}
		if page.LastEvaluatedKey == nil {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}
