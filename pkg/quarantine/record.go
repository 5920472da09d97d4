package quarantine

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/tributary-dev/tributary/pkg/onfailure"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
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

// Bounds of an on-failure record's fields. Lambda's record (AWS's
// documented shape for Kinesis and DynamoDB Streams, package onfailure) is
// under 2 KB, and each field comes from an API with its own limits; a body
// past them was not written by Lambda and can never be quarantined, so it is
// refused at parse — set aside with the field named — and never reaches an
// item DynamoDB would refuse (a "missing" item's sort key is
// "<start>-<end>", at most 1,024 bytes).
const (
	// MaxBodyBytes bounds the whole message body: SQS's largest message
	// (1 MiB), so that a body with one field far over its bound is refused
	// naming that field, not only for its size.
	MaxBodyBytes = 1 << 20
	// maxSequenceDigits: Kinesis sequence numbers match 0|([1-9]\d{0,128})
	// (at most 129 digits); DynamoDB Streams' are 21 to 40 digits.
	maxSequenceDigits = 129
	// maxArnBytes bounds streamArn and functionArn: a DynamoDB stream ARN is
	// at most 1,024 bytes; a Kinesis stream name is at most 128 characters
	// and a function ARN about 250 bytes.
	maxArnBytes = 1024
	// maxShardIDBytes: a Kinesis shard id is at most 128 characters, a
	// DynamoDB Streams one 65.
	maxShardIDBytes = 128
	// maxTimeBytes bounds timestamp and approximateArrivalOf*Record, RFC
	// 3339 times: with nanoseconds and an offset, 35 bytes.
	maxTimeBytes = 64
	// maxTextBytes bounds requestId (a UUID), condition, executedVersion,
	// functionError and version.
	maxTextBytes = 256
	// maxBatchSize is a stream event source mapping's largest BatchSize.
	maxBatchSize = 10000
)

// Parse decodes and checks an on-failure record, returning which kind it is
// and its batch info. The body is read by package strictjson, as every JSON
// entry point is: valid UTF-8, no key twice, the record's fields spelt
// exactly ("VERSION" is not "version"; a field it does not know is
// skipped), at most MaxBodyBytes; and
// every field must be within the bounds above. Errors are *ParseError,
// naming the field.
func Parse(body []byte) (*OnFailureRecord, Kind, *BatchInfo, error) {
	var r OnFailureRecord
	// Lambda writes this record and may add fields to it (its S3
	// destination's already has "payload"): a field the record does not
	// know is skipped, so a new one cannot set every message aside; a key
	// twice, or one of its fields in another case, is still refused.
	if err := strictjson.Decode(body, &r, strictjson.Options{MaxBytes: MaxBodyBytes, Name: "body", AllowUnknown: true}); err != nil {
		var se *strictjson.Error
		if !errors.As(err, &se) {
			return nil, 0, nil, &ParseError{Reason: err.Error()}
		}
		switch se.Kind {
		case strictjson.Syntax, strictjson.Encoding:
			return nil, 0, nil, &ParseError{Reason: "body is not a JSON object: " + se.Reason}
		}
		return nil, 0, nil, &ParseError{Field: se.Path, Reason: se.Reason}
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
	if err := check(&r, info, prefix, kind); err != nil {
		return nil, 0, nil, err
	}
	return &r, kind, info, nil
}

// streamArnShapes are the ARNs a batch's stream can have, by the batch's
// kind: anything else (an S3 bucket's ARN) cannot be read as the batch's
// stream, and was retried to the dead-letter queue rather than set aside.
var streamArnShapes = map[Kind]struct {
	re   *regexp.Regexp
	says string
}{
	Kinesis:         {regexp.MustCompile(`^arn:aws[a-z-]*:kinesis:[a-z0-9-]+:[0-9]{12}:stream/[A-Za-z0-9_.-]{1,128}$`), "a Kinesis stream's ARN (arn:aws:kinesis:<region>:<account>:stream/<name>)"},
	DynamoDBStreams: {regexp.MustCompile(`^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}/stream/[^/\s]+$`), "a DynamoDB stream's ARN (arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>)"},
}

// check holds r's fields to their bounds, the batch's coordinates first.
func check(r *OnFailureRecord, info *BatchInfo, prefix string, kind Kind) *ParseError {
	at := func(name string) string { return prefix + "." + name }
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"streamArn", info.StreamArn, maxArnBytes}, {"shardId", info.ShardID, maxShardIDBytes},
	} {
		if err := text(at(f.name), f.v, f.max, true); err != nil {
			return err
		}
	}
	if shape := streamArnShapes[kind]; !shape.re.MatchString(info.StreamArn) {
		return &ParseError{Field: at("streamArn"), Reason: strictjson.QuoteCut(info.StreamArn, 80) + " is not " + shape.says}
	}
	if err := sequence(at("startSequenceNumber"), info.StartSequenceNumber); err != nil {
		return err
	}
	if err := sequence(at("endSequenceNumber"), info.EndSequenceNumber); err != nil {
		return err
	}
	if stream.CompareSequence(info.StartSequenceNumber, info.EndSequenceNumber) > 0 {
		return &ParseError{Field: at("endSequenceNumber"), Reason: fmt.Sprintf("%s is before startSequenceNumber %s",
			info.EndSequenceNumber, info.StartSequenceNumber)}
	}
	if info.BatchSize < 0 || info.BatchSize > maxBatchSize {
		return &ParseError{Field: at("batchSize"), Reason: fmt.Sprintf("%d is not a batch size (0 to %d)", info.BatchSize, maxBatchSize)}
	}
	for _, f := range []struct{ name, v string }{
		{"timestamp", r.Timestamp},
		{at("approximateArrivalOfFirstRecord"), info.ApproximateArrivalOfFirstRecord},
		{at("approximateArrivalOfLastRecord"), info.ApproximateArrivalOfLastRecord},
	} {
		if err := timestamp(f.name, f.v); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"requestContext.requestId", r.RequestContext.RequestID, maxTextBytes},
		{"requestContext.functionArn", r.RequestContext.FunctionArn, maxArnBytes},
		{"requestContext.condition", r.RequestContext.Condition, maxTextBytes},
		{"responseContext.executedVersion", r.ResponseContext.ExecutedVersion, maxTextBytes},
		{"responseContext.functionError", r.ResponseContext.FunctionError, maxTextBytes},
		{"version", r.Version, maxTextBytes},
	} {
		if err := text(f.name, f.v, f.max, false); err != nil {
			return err
		}
	}
	if n := r.RequestContext.ApproximateInvokeCount; n < 0 {
		return &ParseError{Field: "requestContext.approximateInvokeCount", Reason: fmt.Sprintf("%d is negative", n)}
	}
	return nil
}

// text checks a string field's length, and that it is there if required.
func text(field, v string, max int, required bool) *ParseError {
	switch {
	case v == "" && required:
		return &ParseError{Field: field, Reason: "is required"}
	case len(v) > max:
		return &ParseError{Field: field, Reason: fmt.Sprintf("is %d bytes, over %d (%s)", len(v), max, strictjson.QuoteCut(v, 40))}
	}
	return nil
}

// sequence checks a sequence number: required, decimal digits, at most
// maxSequenceDigits.
func sequence(field, v string) *ParseError {
	switch {
	case v == "":
		return &ParseError{Field: field, Reason: "is required"}
	case !digits(v):
		return &ParseError{Field: field, Reason: strictjson.QuoteCut(v, 40) + " is not a sequence number (decimal digits)"}
	case len(v) > maxSequenceDigits:
		return &ParseError{Field: field, Reason: fmt.Sprintf("is %d digits long; a sequence number has at most %d (%s)", len(v), maxSequenceDigits, strictjson.QuoteCut(v, 40))}
	}
	return nil
}

// timestamp checks an RFC 3339 time of at most maxTimeBytes ("" is
// allowed: the fields are informative, the batch's coordinates suffice).
func timestamp(field, v string) *ParseError {
	if v == "" {
		return nil
	}
	if len(v) > maxTimeBytes {
		return &ParseError{Field: field, Reason: fmt.Sprintf("is %d bytes, over %d: not an RFC 3339 time (%s)", len(v), maxTimeBytes, strictjson.QuoteCut(v, 40))}
	}
	if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
		return &ParseError{Field: field, Reason: strictjson.QuoteCut(v, 40) + " is not an RFC 3339 time"}
	}
	return nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
