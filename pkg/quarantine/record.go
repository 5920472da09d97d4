package quarantine

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tributary-dev/tributary/pkg/onfailure"
)

// OnFailureRecord is Lambda's on-failure invocation record (package onfailure).
type OnFailureRecord = onfailure.Record

// RequestContext says which function failed and why Lambda gave up.
type RequestContext = onfailure.RequestContext

// ResponseContext is the last invocation's outcome.
type ResponseContext = onfailure.ResponseContext

// BatchInfo locates the failed batch in its stream; its Source is the
// quarantine table's partition key for the batch's shard.
type BatchInfo = onfailure.BatchInfo

// Kind says which stream service an on-failure record is about.
type Kind int

// The kinds of on-failure record.
const (
	Kinesis Kind = iota + 1
	DynamoDBStreams
)

// ParseError is a message body that is not a usable on-failure record; Field
// names the JSON member at fault ("" for the whole body).
type ParseError struct {
	Field  string
	Reason string
}

func (e *ParseError) Error() string {
	if e.Field == "" {
		return "not a Lambda on-failure record: " + e.Reason
	}
	return fmt.Sprintf("not a Lambda on-failure record: %s: %s", e.Field, e.Reason)
}

// Parse decodes and checks an on-failure record, returning which kind it is
// and its batch info. Errors are *ParseError.
func Parse(body []byte) (*OnFailureRecord, Kind, *BatchInfo, error) {
	var r OnFailureRecord
	if err := json.Unmarshal(body, &r); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, 0, nil, &ParseError{Field: te.Field, Reason: fmt.Sprintf("must be a %s, not %s", te.Type.Kind(), te.Value)}
		}
		return nil, 0, nil, &ParseError{Reason: "body is not a JSON object: " + err.Error()}
	}
	var (
		kind   Kind
		info   *BatchInfo
		prefix string
	)
	switch {
	case r.KinesisBatchInfo != nil && r.DDBStreamBatchInfo != nil:
		return nil, 0, nil, &ParseError{Field: "KinesisBatchInfo", Reason: "both KinesisBatchInfo and DDBStreamBatchInfo are set"}
	case r.KinesisBatchInfo != nil:
		kind, info, prefix = Kinesis, r.KinesisBatchInfo, "KinesisBatchInfo"
	case r.DDBStreamBatchInfo != nil:
		kind, info, prefix = DynamoDBStreams, r.DDBStreamBatchInfo, "DDBStreamBatchInfo"
	default:
		return nil, 0, nil, &ParseError{Field: "KinesisBatchInfo", Reason: "neither KinesisBatchInfo nor DDBStreamBatchInfo is present"}
	}
	for _, f := range []struct{ name, v string }{
		{"streamArn", info.StreamArn}, {"shardId", info.ShardID},
		{"startSequenceNumber", info.StartSequenceNumber}, {"endSequenceNumber", info.EndSequenceNumber},
	} {
		if f.v == "" {
			return nil, 0, nil, &ParseError{Field: prefix + "." + f.name, Reason: "is required"}
		}
	}
	if !digits(info.StartSequenceNumber) {
		return nil, 0, nil, &ParseError{Field: prefix + ".startSequenceNumber", Reason: fmt.Sprintf("%q is not a sequence number", info.StartSequenceNumber)}
	}
	if !digits(info.EndSequenceNumber) {
		return nil, 0, nil, &ParseError{Field: prefix + ".endSequenceNumber", Reason: fmt.Sprintf("%q is not a sequence number", info.EndSequenceNumber)}
	}
	return &r, kind, info, nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
