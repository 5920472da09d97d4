package stream

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// DecodeEnvelope decodes and validates the envelope in r's data into e, as
// DecodeKinesis does for aws-lambda-go's record, with the same result and
// errors: an envelope without receivedAt gets the record's arrival time (one
// more than MaxReceivedLead after it is refused),
// and a failure is a *PoisonRecordError naming the sequence number and the
// field.
//
// Unlike DecodeKinesis it does not copy: e's ID, Type and Key are
// substrings of the batch's strings (unless they hold escapes), and e.Data
// shares r.Data's bytes, so it too is valid until the batch's next Decode.
// For records the single pass decoded, that makes it allocation-free.
func (r *KinesisRecord) DecodeEnvelope(e *Envelope) error {
	err := notUTF8(r.Data, r.decodeShared(e))
	if err == nil {
		err = checkJSON(r.Data)
	}
	if err == nil {
		err = e.Validate()
	}
	if err == nil {
		err = stampArrival(e, r.ApproximateArrivalTimestamp)
	}
	if err == nil {
		err = checkPartitionKey(e, r.PartitionKey)
	}
	if err != nil {
		return poison(r.SequenceNumber, "", err)
	}
	return nil
}

// decodeShared is UnmarshalExact on r.Data taking its strings from
// r.dataText, which holds the same bytes: the scan that finds the values
// also says whether every name is a field spelt exactly, so CheckNames runs
// only when one is not.
func (r *KinesisRecord) decodeShared(e *Envelope) error {
	data, text := r.Data, r.dataText
	if len(text) != len(data) || len(data) == 0 {
		return UnmarshalExact(data, e)
	}
	var s scanned
	if !s.scan(data) {
		return UnmarshalExact(data, e) // encoding/json's result and error
	}
	if s.inexact {
		if err := CheckNames(data); err != nil {
			return err
		}
	}
	// In decodeFast's order, so that a bad time leaves e as it does.
	var fields [fieldKey + 1]string
	for f := fieldID; f <= fieldKey; f++ {
		t := s.text[f]
		if t.flags == 0 || (t.flags == strNonASCII && utf8.Valid(data[t.start:t.end])) {
			fields[f] = text[t.start:t.end]
		} else {
			fields[f] = string(appendUnquoted(nil, data[t.start:t.end]))
		}
	}
	*e = Envelope{ID: fields[fieldID], Type: fields[fieldType], Key: fields[fieldKey]}
	var err error
	if e.OccurredAt, err = decodeTime(data, fieldOccurredAt, s.text[fieldOccurredAt]); err != nil {
		return err
	}
	if e.SentAt, err = decodeTime(data, fieldSentAt, s.text[fieldSentAt]); err != nil {
		return err
	}
	if e.ReceivedAt, err = decodeTime(data, fieldReceivedAt, s.text[fieldReceivedAt]); err != nil {
		return err
	}
	if raw := data[s.dataStart:s.dataEnd]; len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		e.Data = json.RawMessage(raw[:len(raw):len(raw)])
	}
	return nil
}
