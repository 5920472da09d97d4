package quarantine

import (
	"encoding/json"
	"errors"
	"fmt"
)

// OnFailureRecord is the invocation record Lambda sends to an event source
// mapping's on-failure destination (SQS or SNS). Exactly one of
// KinesisBatchInfo and DDBStreamBatchInfo is set.
type OnFailureRecord struct {
	RequestContext     RequestContext  `json:"requestContext"`
	ResponseContext    ResponseContext `json:"responseContext"`
	Version            string          `json:"version"`
	Timestamp          string          `json:"timestamp"` // when Lambda gave up, RFC 3339
	KinesisBatchInfo   *BatchInfo      `json:"KinesisBatchInfo,omitempty"`
	DDBStreamBatchInfo *BatchInfo      `json:"DDBStreamBatchInfo,omitempty"`
}

// RequestContext says which function failed and why Lambda gave up.
type RequestContext struct {
	RequestID string `json:"requestId"`
	// FunctionArn is the consumer's ARN.
	FunctionArn string `json:"functionArn"`
	// Condition is why the batch was discarded, for example
	// RetryAttemptsExhausted (MaximumRetryAttempts) or
	// MaximumRecordAgeExceeded (MaximumRecordAgeInSeconds). It is stored as
	// sent, whatever it says.
	Condition              string `json:"condition"`
	ApproximateInvokeCount int    `json:"approximateInvokeCount"`
}

// ResponseContext is the last invocation's outcome.
type ResponseContext struct {
	StatusCode      int    `json:"statusCode"`
	ExecutedVersion string `json:"executedVersion"`
	// FunctionError is "Unhandled", "Handled" or empty (the function
	// answered but reported batch item failures).
	FunctionError    string `json:"functionError,omitempty"`
	PayloadTruncated bool   `json:"payloadTruncated,omitempty"`
}

// BatchInfo locates the failed batch in its stream; the same shape for
// Kinesis (KinesisBatchInfo) and DynamoDB Streams (DDBStreamBatchInfo).
type BatchInfo struct {
	ShardID                         string `json:"shardId"`
	StartSequenceNumber             string `json:"startSequenceNumber"`
	EndSequenceNumber               string `json:"endSequenceNumber"`
	ApproximateArrivalOfFirstRecord string `json:"approximateArrivalOfFirstRecord"`
	ApproximateArrivalOfLastRecord  string `json:"approximateArrivalOfLastRecord"`
	BatchSize                       int    `json:"batchSize"`
	StreamArn                       string `json:"streamArn"`
}

// Source is the quarantine table's partition key for the batch's shard:
// "<streamArn>/<shardId>".
func (b *BatchInfo) Source() string { return b.StreamArn + "/" + b.ShardID }

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
