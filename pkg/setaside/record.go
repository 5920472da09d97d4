package setaside

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Kinds of record set aside: short categories for logs, queries and
// dashboards (the metric itself has only the Function dimension).
const (
	KindUnparseable       = "unparseable"        // not the format the function reads
	KindInvalid           = "invalid"            // parses, but a field is missing or has a wrong type or value
	KindOverflow          = "overflow"           // a value would make an aggregate non-finite
	KindStateBudget       = "state-budget"       // a key's state would exceed its item budget
	KindStateUnreadable   = "state-unreadable"   // the key's stored state does not decode
	KindOutputTooLarge    = "output-too-large"   // an output would exceed a service limit (Kinesis 1 MiB, DynamoDB 400 KB)
	KindDuplicateConflict = "duplicate-conflict" // an id reused with other data
	KindFanOutLimit       = "fan-out-limit"      // an input would touch more items than the function's documented bound
	KindNotInLog          = "not-in-log"         // a published event the event store does not hold: the views apply the store's
)

// Categories are the kinds above, for a tool that checks one it is given.
var Categories = []string{KindUnparseable, KindInvalid, KindOverflow, KindStateBudget, KindStateUnreadable,
	KindOutputTooLarge, KindDuplicateConflict, KindFanOutLimit, KindNotInLog}

// Record is one input record a function gives up on because it can never
// succeed.
type Record struct {
	// Function is the function setting it aside; the Sink's (WithFunction)
	// when empty.
	Function string
	// Source is the event source ARN (Kinesis stream, DynamoDB stream) or
	// queue. Required.
	Source string
	// Shard is the record's shard ("" when the event does not say, as for
	// DynamoDB Streams).
	Shard string
	// Sequence is the record's sequence number (Kinesis, DynamoDB Streams)
	// or message id (SQS). Required.
	Sequence string
	// PartitionKey is the Kinesis partition key, if any.
	PartitionKey string
	// EventID and EventName are a DynamoDB stream record's, if any.
	EventID, EventName string
	// ArrivedAt is the approximate arrival (Kinesis), creation (DynamoDB
	// Streams) or send (SQS) time.
	ArrivedAt time.Time
	// Data is the record as received: Kinesis data bytes, a DynamoDB stream
	// record as JSON (as Lambda delivers it), an SQS message body.
	Data []byte
	// Field is the field at fault, for example "data.ms" or
	// "dynamodb.NewImage.bio"; "" for the whole record.
	Field string
	// Reason says what is wrong, naming the field and the limit.
	Reason string
	// Kind is a short category (KindUnparseable, KindOverflow, ...).
	Kind string
	// Rule, when not nil, is what Field must hold for the function to
	// read the record (a pipeline's value: a finite number within
	// ±pipeline.MaxValue): a record put back corrected is held to it.
	Rule *Rule
	// IDTaken says the function took the record's event id in its dedupe
	// ledger before it set the record aside (CEP folded it for the rules
	// that read it, and set it aside for a sum rule that could not add
	// its value): a copy put back is dropped by the function as a
	// producer's copy, or set aside as duplicate-conflict when it was
	// changed, so no put-back reaches it (package putback refuses it).
	IDTaken bool
	// Redacted lists the fields removed from Data because they hold
	// personal data (FromDynamoDB sets it; see PersonalAttribute).
	Redacted []string
}

// source is the quarantine table's partition key of r.
func (r *Record) source() string {
	if r.Source == "" || r.Shard == "" {
		return r.Source
	}
	return r.Source + "/" + r.Shard
}

// FromKinesis is the Record of a record of a Lambda Kinesis event (Field,
// Reason and Kind left to the caller).
func FromKinesis(rec *events.KinesisEventRecord) Record {
	shard, _, ok := strings.Cut(rec.EventID, ":")
	if !ok {
		shard = ""
	}
	return Record{Source: rec.EventSourceArn, Shard: shard, Sequence: rec.Kinesis.SequenceNumber,
		PartitionKey: rec.Kinesis.PartitionKey, ArrivedAt: rec.Kinesis.ApproximateArrivalTimestamp.Time, Data: rec.Kinesis.Data}
}

// FromDynamoDB is the Record of a record of a Lambda DynamoDB Streams
// event: its data is the record as JSON without personal data
// (DynamoDBData: the images lose PersonalAttribute, listed in Redacted), in
// the shape Lambda delivers it (so it can be replayed into the function),
// with no HTML escaping. rec is not changed. The event does not name the
// shard: the source is the stream ARN.
func FromDynamoDB(rec *events.DynamoDBEventRecord) Record {
	r := Record{Source: rec.EventSourceArn, Sequence: rec.Change.SequenceNumber, EventID: rec.EventID,
		EventName: rec.EventName, ArrivedAt: rec.Change.ApproximateCreationDateTime.Time}
	data, removed, err := DynamoDBData(rec)
	if err != nil {
		// An attribute value the JSON encoder refuses: keep what can be
		// kept, and say so in the data itself.
		kept, _ := Redact(rec)
		data = fmt.Appendf(nil, "record not encodable as JSON (%v): %+v", err, kept)
	}
	r.Data, r.Redacted = data, removed
	if r.Sequence == "" && rec.EventID != "" {
		r.Sequence = "eventID:" + rec.EventID
	}
	return r
}

// FromSQS is the Record of an SQS message: the body is its data and the
// message id its sequence.
func FromSQS(msg *events.SQSMessage) Record {
	r := Record{Source: msg.EventSourceARN, Sequence: msg.MessageId, Data: []byte(msg.Body)}
	if ms, err := strconv.ParseInt(msg.Attributes["SentTimestamp"], 10, 64); err == nil {
		r.ArrivedAt = time.UnixMilli(ms).UTC()
	}
	return r
}

// MarshalJSON is json.Marshal without HTML escaping: '<', '>' and '&' stay
// one byte each instead of six ("\u003c"), so data full of markup keeps its
// size. Values whose own MarshalJSON escapes them (the Lambda events
// library's DynamoDB attribute values call json.Marshal) are unescaped too.
// There is no trailing newline.
func MarshalJSON(v any) ([]byte, error) {
	b, err := strictjson.Marshal(v)
	if err != nil {
		return nil, err
	}
	return UnescapeHTML(b), nil
}

// UnescapeHTML replaces the escapes \u003c, \u003e and \u0026 in valid
// JSON with the characters they stand for ('<', '>', '&'), which JSON
// allows unescaped; an escaped backslash followed by "u003c" is left as it
// is. The result decodes to the same value.
func UnescapeHTML(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u00`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' || i+1 >= len(b) {
			out = append(out, c)
			continue
		}
		if b[i+1] == 'u' && i+5 < len(b) {
			switch strings.ToLower(string(b[i+2 : i+6])) {
			case "003c":
				out, i = append(out, '<'), i+5
				continue
			case "003e":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		out = append(out, c, b[i+1]) // an escape: its second byte is not a backslash that starts one
		i++
	}
	return out
}
