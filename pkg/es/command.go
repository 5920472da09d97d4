package es

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Bounds of a command as sent.
const (
	// MaxCommandBytes bounds a command's JSON: a command is a request, not
	// a bulk load.
	MaxCommandBytes = 64 << 10
	// MaxCommandIDLength bounds a command id (a UUID is 36).
	MaxCommandIDLength = 128
	// maxEchoBytes bounds what an answer repeats of a name or value it
	// refuses: a command is up to 64 KiB, an answer a few hundred bytes.
	maxEchoBytes = 200
)

// Command is a request to change one aggregate: it may still be refused.
type Command struct {
	// ID identifies the command: a retry carries the same id and gets the
	// first answer back. Ids are global (use a UUID).
	ID   string
	Type string
	// AggregateID is the aggregate the command is for.
	AggregateID string
	// ExpectedVersion, when set, is the version the sender read: the
	// command is refused as a conflict if the aggregate has moved on.
	ExpectedVersion *int64
	// Data is the command's data (JSON).
	Data json.RawMessage
}

// InvalidError is a command that is malformed as sent: a missing or
// mistyped field, a value out of its bounds. Field is its JSON path, for
// example "data.seats[2]". It is answered 400 and not remembered.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Invalid returns an *InvalidError.
func Invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Refusal is a well-formed command the aggregate's state does not allow:
// the seat is taken, the reservation is not active. Field is the command
// field at fault. It is answered 422 and remembered under the command id.
type Refusal struct {
	Field  string
	Reason string
}

func (r *Refusal) Error() string {
	if r.Field == "" {
		return "refused: " + r.Reason
	}
	return "refused: " + r.Field + ": " + r.Reason
}

// Refuse returns a *Refusal.
func Refuse(field, format string, args ...any) error {
	return &Refusal{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ParseCommand reads a command's JSON: {"id", "type", <aggregateField>,
// "expectedVersion" (optional), "data"}. The body is read by package
// strictjson first (valid UTF-8 with no lone surrogate, no key twice in any
// object, data included, nested at most strictjson.MaxDepth deep), so the
// data a decider reads is the data that was sent. Unknown fields, a second
// copy of a field, text that is not UTF-8 and values out of bounds are an
// *InvalidError naming the field.
func ParseCommand(body []byte, aggregateField string) (Command, error) {
	if len(body) > MaxCommandBytes {
		return Command{}, Invalid("", "the command is %d bytes, more than %d", len(body), MaxCommandBytes)
	}
	if err := strictjson.Check(body, strictjson.Options{MaxBytes: MaxCommandBytes, Name: "command"}); err != nil {
		return Command{}, invalidJSON("", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return Command{}, Invalid("", "must be a JSON object: {\"id\", \"type\", %q, \"expectedVersion\", \"data\"}", aggregateField)
	}
	known := []string{"id", "type", aggregateField, "expectedVersion", "data"}
	for k := range raw {
		if !slices.Contains(known, k) {
			hint := ""
			if near := strictjson.Nearest(k, known); near != "" {
				hint = fmt.Sprintf("; did you mean %q?", near)
			}
			return Command{}, Invalid(strictjson.Cut(k, maxEchoBytes), "is not a field of a command%s (id, type, %s, expectedVersion, data)", hint, aggregateField)
		}
	}
	var c Command
	str := func(field string, max int) (string, error) {
		v, ok := raw[field]
		if !ok {
			return "", Invalid(field, "is required")
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", Invalid(field, "must be a string")
		}
		if err := checkName(s, max); err != nil {
			return "", Invalid(field, "%v", err)
		}
		return s, nil
	}
	var err error
	if c.ID, err = str("id", MaxCommandIDLength); err != nil {
		return Command{}, err
	}
	if c.Type, err = str("type", MaxTypeLength); err != nil {
		return Command{}, err
	}
	if c.AggregateID, err = str(aggregateField, MaxAggregateIDLength); err != nil {
		return Command{}, err
	}
	if v, ok := raw["expectedVersion"]; ok && string(v) != "null" {
		n, reason := strictjson.WholeNumber(v, 0, math.MaxInt64)
		if reason != "" {
			return Command{}, Invalid("expectedVersion", "%s (0: the aggregate does not exist yet)", reason)
		}
		c.ExpectedVersion = &n
	}
	data, ok := raw["data"]
	if !ok || string(data) == "null" {
		data = json.RawMessage("{}")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return Command{}, Invalid("data", "is not JSON: %v", err)
	}
	c.Data = compact.Bytes()
	return c, nil
}

// DecodeData decodes a command's data into v with package strictjson: a
// field of data that v's type does not have ("data.holder.nmae: unknown
// field; did you mean \"name\"?") or a value of the wrong type is an
// *InvalidError naming it under "data". Deciders call it so that nothing a
// sender wrote is dropped in silence.
func DecodeData(data json.RawMessage, v any) error {
	if err := strictjson.Decode(data, v, strictjson.Options{MaxBytes: MaxCommandBytes, Name: "command"}); err != nil {
		return invalidJSON("data", err)
	}
	return nil
}

// invalidJSON is a strictjson refusal as an *InvalidError, its path under
// prefix.
func invalidJSON(prefix string, err error) error {
	var se *strictjson.Error
	if errors.As(err, &se) {
		return &InvalidError{Field: strictjson.JoinPath(prefix, se.Path), Reason: se.Reason}
	}
	return Invalid(prefix, "%v", err)
}

// Fingerprint is the SHA-256, in hex, of what the command asks for: its
// type, aggregate, expected version and data, the data read as a JSON
// value, so that a retry is the same command however it spells it. Object
// keys may come in any order, white space and string escapes do not count;
// each of timeFields (top-level fields of the data that the command's type
// reads as RFC 3339 times: TimedCommands) counts as the instant it names,
// so "z" for "Z" or an offset for UTC is the same time; a number counts as
// written, as a decider reads it (a whole number has one spelling: 2.0 and
// 2e0 are refused, not read as 2). A command id sent again with another
// fingerprint is another command under a reused id. Data strict JSON does
// not accept (a Command built without ParseCommand) is hashed as it is.
func (c *Command) Fingerprint(timeFields ...string) string {
	data, ok := valueSpelling(c.Data, timeFields)
	if !ok {
		data = c.Data
	}
	return c.hash(data)
}

// SpellingFingerprint is the fingerprint command records were given before
// Fingerprint read the data as a JSON value: the same fields hashed the
// same way, the data as ParseCommand keeps it (compacted), so that key
// order and spelling count. A record that holds it still matches a retry
// of its command sent the same way (RecordedAs). For data already in the
// one spelling Fingerprint hashes it is Fingerprint.
func (c *Command) SpellingFingerprint() string { return c.hash(c.Data) }

// RecordedAs reports whether a command record's fingerprint, stored, is
// this command's, fp being c.Fingerprint(its time fields...): stored is fp,
// or it is SpellingFingerprint, what records written before the change to
// Fingerprint hold. Either way the data are equal as values: both hash
// the same fields around the data, and Fingerprint's spelling of the data
// is its own spelling again, so a spelling hash that equals a value hash
// was a value's one spelling.
func (c *Command) RecordedAs(stored, fp string) bool {
	return stored == fp || stored == c.SpellingFingerprint()
}

// hash is the SHA-256, in hex, of the command's type, aggregate and
// expected version ("-": none), a line each, followed by data.
func (c *Command) hash(data []byte) string {
	h := sha256.New()
	expected := "-"
	if c.ExpectedVersion != nil {
		expected = strconv.FormatInt(*c.ExpectedVersion, 10)
	}
	fmt.Fprintf(h, "%s\n%s\n%s\n", c.Type, c.AggregateID, expected)
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// valueSpelling is data, a JSON value strictjson accepts, in one spelling
// of its value: no white space, object keys sorted, strings escaped as
// strictjson.Marshal escapes them, numbers as written, and each of
// timeFields (a top-level field of an object) that is an RFC 3339 time as
// stream.ParseTime reads one written in UTC to the nanosecond
// (time.RFC3339Nano: no trailing zeros); a time field that is no time is
// kept as written. The result is its own spelling again. ok is false when
// strictjson refuses data. Without time fields it is
// strictjson.AppendCanonical's spelling, which the dedupe ledger
// fingerprints an event's data in (TestFingerprintSpellsDataCanonically).
func valueSpelling(data json.RawMessage, timeFields []string) (spelling []byte, ok bool) {
	if strictjson.Check(data, strictjson.Options{MaxBytes: MaxCommandBytes, Name: "command"}) != nil {
		return nil, false
	}
	// Checked: one value, valid UTF-8, no key twice (which copy a decoder
	// keeps is then no question), nested a bounded depth.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // a number as written: json.Number keeps its text
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if obj, isObject := v.(map[string]any); isObject {
		for _, f := range timeFields {
			if s, isString := obj[f].(string); isString {
				if t, err := stream.ParseTime(f, s); err == nil {
					obj[f] = t.UTC().Format(time.RFC3339Nano)
				}
			}
		}
	}
	// encoding/json writes a map's keys sorted.
	b, err := strictjson.Marshal(v)
	if err != nil {
		return nil, false
	}
	return b, true
}

// Attributes of a command record (the commands table: partition key
// AttrCommandRecordID, time to live on AttrExpiresAt).
const (
	AttrCommandRecordID = "id"
	AttrFingerprint     = "fingerprint"
	AttrStatus          = "status"
	AttrHTTPStatus      = "httpStatus"
	AttrBody            = "body"
	AttrExpiresAt       = "expiresAt"
)

// Outcomes of a command.
const (
	StatusAccepted = "accepted"
	StatusRefused  = "refused"
	StatusConflict = "conflict"
	StatusInvalid  = "invalid"
)

// DefaultCommandHorizon is how long a command id is remembered: a retry
// within it gets the first answer. Clients retry within seconds or minutes;
// a day covers a client offline overnight (as ingest's Idempotency-Key).
const DefaultCommandHorizon = 24 * time.Hour

// CommandRecord is the first answer to a command, kept under its id.
type CommandRecord struct {
	ID          string
	Fingerprint string
	Status      string
	HTTPStatus  int
	// Body is the answer as sent.
	Body        []byte
	AggregateID string
	// Version is the aggregate's version after the command (accepted), or
	// the version it was refused at.
	Version    int64
	RecordedAt time.Time
	ExpiresAt  time.Time
}

// Item is the record as an item of the commands table.
func (r *CommandRecord) Item() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrCommandRecordID: &types.AttributeValueMemberS{Value: r.ID},
		AttrFingerprint:     &types.AttributeValueMemberS{Value: r.Fingerprint},
		AttrStatus:          &types.AttributeValueMemberS{Value: r.Status},
		AttrHTTPStatus:      &types.AttributeValueMemberN{Value: strconv.Itoa(r.HTTPStatus)},
		AttrBody:            &types.AttributeValueMemberS{Value: string(r.Body)},
		AttrAggregateID:     &types.AttributeValueMemberS{Value: r.AggregateID},
		AttrVersion:         &types.AttributeValueMemberN{Value: strconv.FormatInt(r.Version, 10)},
		AttrRecordedAt:      &types.AttributeValueMemberS{Value: r.RecordedAt.UTC().Format(time.RFC3339Nano)},
		AttrExpiresAt:       &types.AttributeValueMemberN{Value: strconv.FormatInt(r.ExpiresAt.Unix(), 10)},
	}
}

// CommandRecordFromItem reads a command record. Its error is an *ItemError.
func CommandRecordFromItem(item map[string]types.AttributeValue) (*CommandRecord, error) {
	r := &CommandRecord{}
	for _, f := range []struct {
		name string
		dst  *string
	}{{AttrCommandRecordID, &r.ID}, {AttrFingerprint, &r.Fingerprint}, {AttrStatus, &r.Status}, {AttrAggregateID, &r.AggregateID}} {
		s, ok := item[f.name].(*types.AttributeValueMemberS)
		if !ok {
			return nil, &ItemError{Attr: f.name, Reason: "is missing or not a string (S) attribute"}
		}
		*f.dst = s.Value
	}
	body, ok := item[AttrBody].(*types.AttributeValueMemberS)
	if !ok {
		return nil, &ItemError{Attr: AttrBody, Reason: "is missing or not a string (S) attribute"}
	}
	r.Body = []byte(body.Value)
	for _, f := range []struct {
		name string
		dst  *int64
	}{{AttrHTTPStatus, nil}, {AttrVersion, &r.Version}, {AttrExpiresAt, nil}} {
		n, ok := item[f.name].(*types.AttributeValueMemberN)
		if !ok {
			return nil, &ItemError{Attr: f.name, Reason: "is missing or not a number (N) attribute"}
		}
		v, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return nil, &ItemError{Attr: f.name, Reason: fmt.Sprintf("%q is not a whole number", n.Value)}
		}
		switch f.name {
		case AttrHTTPStatus:
			r.HTTPStatus = int(v)
		case AttrExpiresAt:
			r.ExpiresAt = time.Unix(v, 0).UTC()
		default:
			*f.dst = v
		}
	}
	if s, ok := item[AttrRecordedAt].(*types.AttributeValueMemberS); ok {
		r.RecordedAt, _ = time.Parse(time.RFC3339Nano, s.Value)
	}
	return r, nil
}
