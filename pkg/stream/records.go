package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// PoisonRecordError is a record that cannot become a valid envelope. It names
// the record (Kinesis sequence number, SQS message id or DynamoDB stream event
// id) and the field; Err is the cause, usually a *FieldError.
type PoisonRecordError struct {
	RecordID string
	Field    string
	Err      error
}

func (e *PoisonRecordError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("record %s: %v", e.RecordID, e.Err)
	}
	var fe *FieldError
	if errors.As(e.Err, &fe) && fe.Field == e.Field {
		return fmt.Sprintf("record %s: field %s: %s", e.RecordID, e.Field, fe.Reason)
	}
	return fmt.Sprintf("record %s: field %s: %v", e.RecordID, e.Field, e.Err)
}

func (e *PoisonRecordError) Unwrap() error { return e.Err }

func poison(id, prefix string, err error) error {
	pe := &PoisonRecordError{RecordID: id, Err: err}
	var fe *FieldError
	if errors.As(err, &fe) {
		pe.Field = fe.Field
		if prefix != "" {
			pe.Field = joinField(prefix, fe.Field)
		}
	} else {
		pe.Field = prefix
	}
	return pe
}

// joinField is field, a path as the strict reader writes one (a key that
// is no identifier a bracketed step: ["a.b"]), under prefix.
func joinField(prefix, field string) string {
	return strictjson.JoinPath(prefix, field)
}

// decodeValid unmarshals and validates data, and stamps or checks its
// receivedAt against arrival (stampArrival).
func decodeValid(data []byte, arrival time.Time, e *Envelope) error {
	if err := UnmarshalExact(data, e); err != nil {
		return notUTF8(data, err)
	}
	if err := checkJSON(data); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return err
	}
	return stampArrival(e, arrival)
}

// notUTF8 is err, a refusal of data by a decoder, unless the strict reader
// names the refusal better: data that is not UTF-8, which it calls by its
// name at its byte ("invalid UTF-8 at byte 0 of the record (byte 0xff)")
// where encoding/json says "invalid character 'ÿ'", and nesting 10,000
// deep, which encoding/json refuses as "exceeded max depth" before the
// strict reader's 64 levels could name the place (data.x[0]…). Only a
// refused record pays for the look.
func notUTF8(data []byte, err error) error {
	if err == nil {
		return nil
	}
	if !utf8.Valid(data) {
		if serr := checkJSON(data); serr != nil {
			return serr
		}
		return err
	}
	var se *strictjson.Error
	if errors.As(strictjson.Check(data, strictjson.Options{MaxBytes: max(len(data), 1), Name: "record"}), &se) && se.Kind == strictjson.Depth {
		return &FieldError{Field: se.Path, Reason: se.Reason}
	}
	return err
}

// MaxReceivedLead is how far an envelope's receivedAt may be after the time
// the service it came through (Kinesis, SQS, DynamoDB Streams) took the
// record in. Ingest stamps receivedAt just before it writes the record, so
// only the skew between two servers' clocks (and DynamoDB Streams' arrival
// times, cut to the second) puts it after that; a later one is a producer
// writing straight to the stream with its own. Taken, it would be an event
// time from the future that moves its shard's watermark past every other
// key's events, dropping theirs as late under latePolicy "drop": this bound
// is the most one record can move it ahead of the service's clock.
const MaxReceivedLead = 5 * time.Second

// stampArrival gives an envelope without receivedAt the record's arrival
// time (an event written straight to the stream or queue, not through
// ingest: the service's arrival time is then the closest server clock
// reading there is), and refuses a receivedAt more than MaxReceivedLead
// after it. A zero arrival (a hand-made event) checks nothing, nor does
// one outside [EarliestTime, LatestTime), which no service gives (an
// approximateArrivalTimestamp of 1e20 in a hand-made event): compared with
// it, receivedAt was said to be 2562047h after an arrival it preceded. The
// event time the times then give is held to the envelope's range
// (checkEventTime).
func stampArrival(e *Envelope, arrival time.Time) error {
	switch {
	case arrival.IsZero() || arrival.Before(EarliestTime) || !arrival.Before(LatestTime):
	case e.ReceivedAt.IsZero():
		e.ReceivedAt = arrival.UTC()
	case e.ReceivedAt.Sub(arrival) > MaxReceivedLead:
		lead := e.ReceivedAt.Sub(arrival)
		if shown := lead.Round(time.Millisecond); shown > MaxReceivedLead {
			lead = shown // "5.4s", never a rounded "5s" past a bound of 5s
		}
		return &FieldError{Field: "receivedAt", Reason: fmt.Sprintf(
			"%s is %s after the record reached the service (%s); receivedAt is a server's clock reading, at most %s after it",
			e.ReceivedAt.Format(time.RFC3339Nano), lead, arrival.UTC().Format(time.RFC3339Nano), MaxReceivedLead)}
	}
	return checkEventTime(e)
}

// checkEventTime refuses an envelope whose event time (occurredAt
// corrected by receivedAt − sentAt) is outside [EarliestTime, LatestTime):
// each time in range, a sentAt centuries after occurredAt still gives one
// out of it, which no window holds (ingest refuses such an event by its
// age; one written straight to the stream was dropped as late, not set
// aside). sentAt is named: it is what moves the event time.
func checkEventTime(e *Envelope) error {
	t := e.EventTime()
	if !t.Before(EarliestTime) && t.Before(LatestTime) {
		return nil
	}
	return &FieldError{Field: "sentAt", Reason: fmt.Sprintf(
		"%s is %s after occurredAt %s, which with receivedAt %s makes the event time %s, outside %s to %s: the producer's clock, or the record, is wrong",
		e.SentAt.Format(time.RFC3339Nano), e.SentAt.Sub(e.OccurredAt).Round(time.Second), e.OccurredAt.Format(time.RFC3339Nano),
		e.ReceivedAt.Format(time.RFC3339Nano), t.Format(time.RFC3339Nano), EarliestTime.Format(time.RFC3339), LatestTime.Format(time.RFC3339))}
}

// DecodeKinesis decodes and validates the envelope in a Kinesis record (whose
// data aws-lambda-go has already base64-decoded) into e. An envelope without
// receivedAt gets the record's approximate arrival time. A failure is a
// *PoisonRecordError with RecordID = the sequence number and Field the
// envelope field ("" for the whole data).
func DecodeKinesis(rec *events.KinesisEventRecord, e *Envelope) error {
	err := decodeValid(rec.Kinesis.Data, rec.Kinesis.ApproximateArrivalTimestamp.Time, e)
	if err == nil {
		err = checkPartitionKey(e, rec.Kinesis.PartitionKey)
	}
	if err != nil {
		return poison(rec.Kinesis.SequenceNumber, "", err)
	}
	return nil
}

// checkPartitionKey refuses an envelope whose key is not the partition key
// its record was put with (a producer writing to the stream itself with a
// key of its own): one key's records would be spread over shards, where
// every consumer takes a key's records to be on one shard, in order.
func checkPartitionKey(e *Envelope, partitionKey string) error {
	if partitionKey == "" || partitionKey == e.Key {
		return nil
	}
	return &FieldError{Field: "key", Reason: fmt.Sprintf("%q is not the record's partition key %q: put each event with its key as the partition key, as ingest does, so that one key's events are on one shard, in order",
		cutKey(e.Key), cutKey(partitionKey))}
}

// cutKey bounds a key quoted in a reason (a key is at most 256 characters).
func cutKey(k string) string {
	if len(k) > 64 {
		return k[:64] + "…"
	}
	return k
}

// DecodeSQS decodes and validates the envelope in an SQS message body into e.
// An envelope without receivedAt gets the message's SentTimestamp (when SQS
// accepted it). A failure is a *PoisonRecordError with RecordID = message id.
func DecodeSQS(msg *events.SQSMessage, e *Envelope) error {
	if err := decodeValid([]byte(msg.Body), sqsArrival(msg), e); err != nil {
		return poison(msg.MessageId, "", err)
	}
	return nil
}

// DecodeSQSExact is DecodeSQS for a body from outside, which the caller
// holds as bytes (msg.Body's, read once for its own checks too): a key that
// is not one of the envelope's fields spelt exactly is refused
// (UnmarshalExact), in the one pass that decodes a well-formed envelope,
// and what DecodeSQS refuses (the strict reader: a key twice, text that is
// not UTF-8, named at its place) is refused too.
func DecodeSQSExact(msg *events.SQSMessage, body []byte, e *Envelope) error {
	err := notUTF8(body, UnmarshalExact(body, e))
	if err == nil {
		err = checkJSON(body)
	}
	if err == nil {
		err = e.Validate()
	}
	if err == nil {
		err = stampArrival(e, sqsArrival(msg))
	}
	if err != nil {
		return poison(msg.MessageId, "", err)
	}
	return nil
}

// sqsArrival is when SQS accepted msg (its SentTimestamp), zero when the
// attribute is missing.
func sqsArrival(msg *events.SQSMessage) time.Time {
	if ms, err := strconv.ParseInt(msg.Attributes["SentTimestamp"], 10, 64); err == nil {
		return time.UnixMilli(ms)
	}
	return time.Time{}
}

// DecodeDynamoDB decodes and validates the envelope held in a DynamoDB stream
// record's NewImage into e: id, type, key and the times are S attributes;
// data is either an S attribute holding JSON text or any other attribute
// type, converted to JSON (M → object, L → array, N → number, BOOL, NULL,
// sets → arrays, B → base64 string). An envelope without receivedAt gets the
// record's ApproximateCreationDateTime. A record without NewImage (REMOVE, or
// a KEYS_ONLY / OLD_IMAGE stream) is poison for this decoder: filter such
// records out before decoding. A failure is a *PoisonRecordError with
// RecordID = the event id and Field prefixed "dynamodb.NewImage".
func DecodeDynamoDB(rec *events.DynamoDBEventRecord, e *Envelope) error {
	const prefix = "dynamodb.NewImage"
	img := rec.Change.NewImage
	if img == nil {
		return &PoisonRecordError{RecordID: rec.EventID, Field: prefix,
			Err: &FieldError{Field: prefix, Reason: fmt.Sprintf("is missing (eventName %s, StreamViewType %s): the stream must carry new images", rec.EventName, rec.Change.StreamViewType)}}
	}
	w := map[string]any{}
	for name, av := range img {
		switch name {
		case "id", "type", "key", "occurredAt", "sentAt", "receivedAt":
			if av.DataType() != events.DataTypeString {
				return &PoisonRecordError{RecordID: rec.EventID, Field: joinField(prefix, name),
					Err: &FieldError{Field: name, Reason: "must be an S (string) attribute"}}
			}
			w[name] = av.String()
		case "data":
			if av.DataType() == events.DataTypeString {
				w[name] = json.RawMessage(av.String())
				if !json.Valid([]byte(av.String())) {
					return &PoisonRecordError{RecordID: rec.EventID, Field: joinField(prefix, name),
						Err: &FieldError{Field: name, Reason: "is an S attribute that does not hold JSON text"}}
				}
				continue
			}
			v, err := AttributeJSON(av)
			if err != nil {
				return &PoisonRecordError{RecordID: rec.EventID, Field: joinField(prefix, name), Err: &FieldError{Field: name, Reason: err.Error()}}
			}
			w[name] = v
		}
	}
	b, err := json.Marshal(w)
	if err != nil {
		return poison(rec.EventID, prefix, err)
	}
	if err := decodeValid(b, rec.Change.ApproximateCreationDateTime.Time, e); err != nil {
		return poison(rec.EventID, prefix, err)
	}
	return nil
}
