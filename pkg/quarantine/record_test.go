package quarantine

import (
	"errors"
	"strings"
	"testing"
)

const kinesisSample = `{
  "requestContext": {"requestId": "c9b8fa9f-5a7f-4a3e-af9c-0c604cde93a5", "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:aggregate", "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 4},
  "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
  "version": "1.0",
  "timestamp": "2026-11-29T10:43:06.021Z",
  "KinesisBatchInfo": {"shardId": "shardId-000000000001", "startSequenceNumber": "49601189658422359378836298521827638475320189012309704722",
    "endSequenceNumber": "49601189658422359378836298522902373528957594348623495186", "approximateArrivalOfFirstRecord": "2026-11-29T10:41:04.835Z",
    "approximateArrivalOfLastRecord": "2026-11-29T10:41:05.580Z", "batchSize": 2, "streamArn": "arn:aws:kinesis:us-east-1:123456789012:stream/events"}
}`

// sample is kinesisSample with old replaced by new (once, and it must be
// there).
func sample(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(kinesisSample, old) {
		t.Fatalf("%q is not in the sample", old)
	}
	return strings.Replace(kinesisSample, old, new, 1)
}

func TestParse(t *testing.T) {
	const (
		start = `"startSequenceNumber": "49601189658422359378836298521827638475320189012309704722"`
		end   = `"endSequenceNumber": "49601189658422359378836298522902373528957594348623495186"`
		ts    = `"timestamp": "2026-11-29T10:43:06.021Z"`
		first = `"approximateArrivalOfFirstRecord": "2026-11-29T10:41:04.835Z"`
	)
	digits := func(n int) string { return "1" + strings.Repeat("0", n-1) }
	tests := []struct {
		name      string
		body      string
		wantKind  Kind
		wantField string // for errors
		wantErr   bool
	}{
		{name: "Kinesis", body: kinesisSample, wantKind: Kinesis},
		{name: "DynamoDB Streams", body: `{"requestContext":{"condition":"RetryAttemptsExhausted"},"responseContext":{},"version":"1.0","timestamp":"2026-11-29T10:43:06Z",
			"DDBStreamBatchInfo":{"shardId":"shardId-00000001573689847184-864758bb","startSequenceNumber":"800000000003126276362","endSequenceNumber":"800000000003126276362","batchSize":1,"streamArn":"arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/2026-11-14T00:04:06.388"}}`,
			wantKind: DynamoDBStreams},
		{name: "timestamp without fraction, with an offset", body: sample(t, ts, `"timestamp": "2026-11-29T11:43:06+01:00"`), wantKind: Kinesis},
		{name: "arrival times absent", body: sample(t, first+",", ""), wantKind: Kinesis},

		{name: "not JSON", body: "hello", wantErr: true},
		{name: "invalid UTF-8", body: sample(t, `"1.0"`, "\"1.\xff\""), wantErr: true},
		{name: "not an object", body: `[1]`, wantErr: true},
		{name: "body over 1 MiB", body: kinesisSample + strings.Repeat(" ", MaxBodyBytes), wantErr: true},
		{name: "a key twice", body: sample(t, `"version": "1.0",`, `"version":"1.0","version":"2.0","VERSION":"3",`), wantErr: true, wantField: "version"},
		{name: "a key in another case", body: sample(t, `"version": "1.0",`, `"version":"1.0","VERSION":"3",`), wantErr: true, wantField: "VERSION"},
		{name: "a batch info key twice", body: sample(t, `"batchSize": 2,`, `"batchSize": 2, "batchSize": 3,`), wantErr: true, wantField: "KinesisBatchInfo.batchSize"},
		// Lambda may add fields to its record: one the record does not
		// know is skipped, not a reason to set every message aside.
		{name: "a field Lambda may add", body: sample(t, `"version": "1.0",`, `"version": "1.0", "payload": {"x": [1]},`), wantKind: Kinesis},
		{name: "a field in another case", body: sample(t, `"version": "1.0",`, `"version": "1.0", "Version": "2.0",`), wantErr: true, wantField: "Version"},
		{name: "no batch info", body: `{"requestContext":{},"version":"1.0"}`, wantErr: true, wantField: "KinesisBatchInfo"},
		{name: "both batch infos", body: sample(t, `"version": "1.0",`, `"version": "1.0", "DDBStreamBatchInfo": {},`), wantErr: true, wantField: "KinesisBatchInfo"},
		{name: "no shard", body: `{"KinesisBatchInfo":{"startSequenceNumber":"1","endSequenceNumber":"2","streamArn":"arn:aws:kinesis:us-east-1:123456789012:stream/s"}}`, wantErr: true, wantField: "KinesisBatchInfo.shardId"},
		{name: "sequence number not digits", body: `{"KinesisBatchInfo":{"shardId":"s","startSequenceNumber":"abc","endSequenceNumber":"2","streamArn":"arn:aws:kinesis:us-east-1:123456789012:stream/s"}}`, wantErr: true, wantField: "KinesisBatchInfo.startSequenceNumber"},
		{name: "start sequence number of 130 digits", body: sample(t, start, `"startSequenceNumber": "`+digits(130)+`"`), wantErr: true, wantField: "KinesisBatchInfo.startSequenceNumber"},
		{name: "start sequence number of 600 digits", body: sample(t, start, `"startSequenceNumber": "`+digits(600)+`"`), wantErr: true, wantField: "KinesisBatchInfo.startSequenceNumber"},
		{name: "end sequence number of 600 digits", body: sample(t, end, `"endSequenceNumber": "`+digits(600)+`"`), wantErr: true, wantField: "KinesisBatchInfo.endSequenceNumber"},
		{name: "end before start", body: sample(t, end, `"endSequenceNumber": "7"`), wantErr: true, wantField: "KinesisBatchInfo.endSequenceNumber"},
		{name: "batchSize a string", body: `{"KinesisBatchInfo":{"shardId":"s","startSequenceNumber":"1","endSequenceNumber":"2","batchSize":"two","streamArn":"arn:aws:kinesis:us-east-1:123456789012:stream/s"}}`, wantErr: true, wantField: "KinesisBatchInfo.batchSize"},
		{name: "batchSize over 10,000", body: sample(t, `"batchSize": 2`, `"batchSize": 10001`), wantErr: true, wantField: "KinesisBatchInfo.batchSize"},
		{name: "batchSize negative", body: sample(t, `"batchSize": 2`, `"batchSize": -1`), wantErr: true, wantField: "KinesisBatchInfo.batchSize"},
		{name: "timestamp of 450 KB", body: sample(t, ts, `"timestamp": "2026-11-29T10:43:06.021Z`+strings.Repeat("x", 450<<10)+`"`), wantErr: true, wantField: "timestamp"},
		{name: "timestamp not a time", body: sample(t, ts, `"timestamp": "yesterday"`), wantErr: true, wantField: "timestamp"},
		{name: "arrival of 100 KB", body: sample(t, first, `"approximateArrivalOfFirstRecord": "`+strings.Repeat("2", 100<<10)+`"`), wantErr: true, wantField: "KinesisBatchInfo.approximateArrivalOfFirstRecord"},
		{name: "stream ARN of 2 KB", body: sample(t, `"streamArn": "arn:`, `"streamArn": "arn:`+strings.Repeat("s", 2048)), wantErr: true, wantField: "KinesisBatchInfo.streamArn"},
		{name: "stream ARN not an ARN", body: sample(t, `"streamArn": "arn:`, `"streamArn": "`), wantErr: true, wantField: "KinesisBatchInfo.streamArn"},
		// An ARN, but of no stream the batch can be read from: set aside,
		// not retried to the dead-letter queue.
		{name: "stream ARN an S3 bucket's", body: sample(t, `"streamArn": "arn:aws:kinesis:us-east-1:123456789012:stream/events"`, `"streamArn": "arn:aws:s3:::bucket"`), wantErr: true, wantField: "KinesisBatchInfo.streamArn"},
		{name: "stream ARN a DynamoDB stream's in a Kinesis batch", body: sample(t, `"streamArn": "arn:aws:kinesis:us-east-1:123456789012:stream/events"`, `"streamArn": "arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/2026-11-14T00:04:06.388"`), wantErr: true, wantField: "KinesisBatchInfo.streamArn"},
		{name: "shard id of 129 bytes", body: sample(t, `"shardId": "shardId-000000000001"`, `"shardId": "`+strings.Repeat("s", 129)+`"`), wantErr: true, wantField: "KinesisBatchInfo.shardId"},
		{name: "function ARN of 100 KB", body: sample(t, `"functionArn": "arn:`, `"functionArn": "arn:`+strings.Repeat("f", 100<<10)), wantErr: true, wantField: "requestContext.functionArn"},
		{name: "condition of 300 bytes", body: sample(t, `"condition": "`, `"condition": "`+strings.Repeat("c", 300)), wantErr: true, wantField: "requestContext.condition"},
		{name: "function error of 300 bytes", body: sample(t, `"functionError": "`, `"functionError": "`+strings.Repeat("e", 300)), wantErr: true, wantField: "responseContext.functionError"},
		{name: "request id of 300 bytes", body: sample(t, `"requestId": "`, `"requestId": "`+strings.Repeat("r", 300)), wantErr: true, wantField: "requestContext.requestId"},
		{name: "version of 300 bytes", body: sample(t, `"version": "`, `"version": "`+strings.Repeat("v", 300)), wantErr: true, wantField: "version"},
		{name: "invoke count negative", body: sample(t, `"approximateInvokeCount": 4`, `"approximateInvokeCount": -4`), wantErr: true, wantField: "requestContext.approximateInvokeCount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, kind, info, err := Parse([]byte(tt.body))
			if tt.wantErr {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("error %v is not a *ParseError", err)
				}
				if pe.Field != tt.wantField {
					t.Errorf("field %q, want %q (%.300v)", pe.Field, tt.wantField, err)
				}
				if n := len(pe.Error()); n > 600 {
					t.Errorf("error is %d bytes: a reason must not repeat the value whole", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if kind != tt.wantKind || rec == nil || info == nil {
				t.Fatalf("kind %v, want %v", kind, tt.wantKind)
			}
		})
	}
	rec, _, info, _ := Parse([]byte(kinesisSample))
	if info.Source() != "arn:aws:kinesis:us-east-1:123456789012:stream/events/shardId-000000000001" || info.BatchSize != 2 ||
		rec.RequestContext.Condition != "RetryAttemptsExhausted" || rec.ResponseContext.FunctionError != "Unhandled" || rec.RequestContext.ApproximateInvokeCount != 4 {
		t.Errorf("parsed %+v %+v", rec, info)
	}
}

// TestParseLongestSequenceNumbers: a batch whose sequence numbers have
// Kinesis's largest length (129 digits) is accepted.
func TestParseLongestSequenceNumbers(t *testing.T) {
	lo, hi := "1"+strings.Repeat("0", 128), "9"+strings.Repeat("9", 128)
	body := strings.NewReplacer("49601189658422359378836298521827638475320189012309704722", lo,
		"49601189658422359378836298522902373528957594348623495186", hi).Replace(kinesisSample)
	if _, _, info, err := Parse([]byte(body)); err != nil || info.StartSequenceNumber != lo || info.EndSequenceNumber != hi {
		t.Fatalf("Parse = %v, %v", info, err)
	}
}

// TestRangeReasonNamesTheCondition: a batch given up on for its records'
// age says so, whichever name the sender gives the condition (Lambda and
// LocalStack say RecordAgeExceeded); one whose retries ran out says that.
func TestRangeReasonNamesTheCondition(t *testing.T) {
	for cond, want := range map[string]string{
		"RecordAgeExceeded":        "records older than the mapping's MaximumRecordAgeInSeconds",
		"MaximumRecordAgeExceeded": "records older than the mapping's MaximumRecordAgeInSeconds",
		"RetryAttemptsExhausted":   "batch retries exhausted (RetryAttemptsExhausted",
	} {
		rec := &OnFailureRecord{RequestContext: RequestContext{Condition: cond}}
		if got := RangeReason(rec); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want it to say %q", cond, got, want)
		}
	}
}
