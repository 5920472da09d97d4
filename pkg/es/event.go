package es

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/setaside"
)

// Attributes of an event item. The events table's keys are AttrAggregateID
// (partition, S) and AttrVersion (sort, N).
const (
	AttrAggregateID   = "aggregateId"
	AttrVersion       = "version"
	AttrAggregateType = "aggregateType"
	AttrType          = "type"
	// AttrData is the event's data as JSON text (S): kept as it was
	// decided, byte for byte, so a replay reads what was written.
	AttrData      = "data"
	AttrCommandID = "commandId"
	// AttrRecordedAt is when the command was executed (RFC 3339 with
	// nanoseconds, the command function's clock).
	AttrRecordedAt = "recordedAt"
	// AttrPersonal is the personal data that goes with the event (JSON
	// text), apart from AttrData: never published, removed by Erase, and
	// never kept in a copy set aside or quarantined (it is the attribute
	// setaside.PersonalAttribute, which those copies lose).
	AttrPersonal = setaside.PersonalAttribute
	// AttrSubject is whose personal data AttrPersonal is (the index
	// SubjectIndex finds a subject's events for Erase).
	AttrSubject = "subject"
	// AttrErasedAt and AttrErasure mark an event whose personal data Erase
	// removed: when, and the erasure's id (its audit event).
	AttrErasedAt = "erasedAt"
	AttrErasure  = "erasure"
)

// SubjectIndex is the events table's sparse index on AttrSubject (keys
// only): only events that carry personal data are in it.
const SubjectIndex = "subject"

// Bounds of an event's identity.
const (
	// MaxAggregateIDLength keeps the id usable as a Kinesis partition key
	// (256) with room for the "/<version>" of a published record's id.
	MaxAggregateIDLength = 128
	// MaxTypeLength bounds an event or command type.
	MaxTypeLength = 64
)

// Event is one recorded event of an aggregate.
type Event struct {
	AggregateType string
	AggregateID   string
	Version       int64
	Type          string
	// Data is the event's data as JSON.
	Data json.RawMessage
	// CommandID is the command that produced it.
	CommandID  string
	RecordedAt time.Time
	// Personal is the personal data that goes with it (JSON), nil when it
	// has none or it was erased; Subject is whose it is.
	Personal json.RawMessage
	Subject  string
	// ErasedAt is when its personal data was erased (zero if never).
	ErasedAt time.Time
}

// ID is the event's identity, "<aggregateId>/<version>": the id of its
// published record.
func (e *Event) ID() string { return e.AggregateID + "/" + strconv.FormatInt(e.Version, 10) }

// Item is the event as an item of the events table.
func (e *Event) Item() map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		AttrAggregateID:   &types.AttributeValueMemberS{Value: e.AggregateID},
		AttrVersion:       &types.AttributeValueMemberN{Value: strconv.FormatInt(e.Version, 10)},
		AttrAggregateType: &types.AttributeValueMemberS{Value: e.AggregateType},
		AttrType:          &types.AttributeValueMemberS{Value: e.Type},
		AttrData:          &types.AttributeValueMemberS{Value: string(e.Data)},
		AttrCommandID:     &types.AttributeValueMemberS{Value: e.CommandID},
		AttrRecordedAt:    &types.AttributeValueMemberS{Value: e.RecordedAt.UTC().Format(time.RFC3339Nano)},
	}
	if len(e.Personal) > 0 {
		item[AttrPersonal] = &types.AttributeValueMemberS{Value: string(e.Personal)}
	}
	if e.Subject != "" {
		item[AttrSubject] = &types.AttributeValueMemberS{Value: e.Subject}
	}
	return item
}

// ItemError is an item of the events table that is not an event as this
// package writes them; Attr names the attribute.
type ItemError struct {
	Attr   string
	Reason string
}

func (e *ItemError) Error() string { return fmt.Sprintf("event item: %s: %s", e.Attr, e.Reason) }

// EventFromItem reads an event item. Its error is an *ItemError.
func EventFromItem(item map[string]types.AttributeValue) (Event, error) {
	var e Event
	var err error
	str := func(name string, required bool) string {
		if err != nil {
			return ""
		}
		v, ok := item[name]
		if !ok {
			if required {
				err = &ItemError{Attr: name, Reason: "is missing"}
			}
			return ""
		}
		s, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			err = &ItemError{Attr: name, Reason: "is not a string (S) attribute"}
			return ""
		}
		if required && s.Value == "" {
			err = &ItemError{Attr: name, Reason: "is empty"}
		}
		return s.Value
	}
	e.AggregateID = str(AttrAggregateID, true)
	e.AggregateType = str(AttrAggregateType, true)
	e.Type = str(AttrType, true)
	data := str(AttrData, true)
	e.CommandID = str(AttrCommandID, false)
	recorded := str(AttrRecordedAt, true)
	personal := str(AttrPersonal, false)
	e.Subject = str(AttrSubject, false)
	erased := str(AttrErasedAt, false)
	if err != nil {
		return Event{}, err
	}
	n, ok := item[AttrVersion].(*types.AttributeValueMemberN)
	if !ok {
		return Event{}, &ItemError{Attr: AttrVersion, Reason: "is missing or not a number (N) attribute"}
	}
	if e.Version, err = strconv.ParseInt(n.Value, 10, 64); err != nil || e.Version < 1 {
		return Event{}, &ItemError{Attr: AttrVersion, Reason: fmt.Sprintf("%q is not a version (a whole number from 1)", n.Value)}
	}
	if !json.Valid([]byte(data)) {
		return Event{}, &ItemError{Attr: AttrData, Reason: "is not JSON"}
	}
	e.Data = json.RawMessage(data)
	if e.RecordedAt, err = time.Parse(time.RFC3339Nano, recorded); err != nil {
		return Event{}, &ItemError{Attr: AttrRecordedAt, Reason: fmt.Sprintf("%q is not an RFC 3339 time", recorded)}
	}
	if personal != "" {
		if !json.Valid([]byte(personal)) {
			return Event{}, &ItemError{Attr: AttrPersonal, Reason: "is not JSON"}
		}
		e.Personal = json.RawMessage(personal)
	}
	if erased != "" {
		if e.ErasedAt, err = time.Parse(time.RFC3339Nano, erased); err != nil {
			return Event{}, &ItemError{Attr: AttrErasedAt, Reason: fmt.Sprintf("%q is not an RFC 3339 time", erased)}
		}
	}
	return e, nil
}

// CheckAggregateID says what is wrong with id as an aggregate id: empty,
// longer than MaxAggregateIDLength, or a character other than a letter, a
// digit or one of - _ . : (ids become keys, record ids and URL paths).
func CheckAggregateID(id string) error {
	return checkName(id, MaxAggregateIDLength)
}

// checkName is CheckAggregateID's rule with another length.
func checkName(s string, max int) error {
	if s == "" {
		return fmt.Errorf("is required")
	}
	if len(s) > max {
		return fmt.Errorf("is %d characters, more than %d", len(s), max)
	}
	for i, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			// The character as sent: 'ö', not the first byte of its UTF-8
			// ('Ã'); a byte that is not UTF-8 as a byte.
			if c == utf8.RuneError && len(s[i:]) > 0 {
				if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
					return fmt.Errorf("%q: byte %#x is not allowed (not UTF-8; letters, digits, - _ . : only)", s, s[i])
				}
			}
			return fmt.Errorf("%q: character %q is not allowed (letters, digits, - _ . : only)", s, c)
		}
	}
	return nil
}
