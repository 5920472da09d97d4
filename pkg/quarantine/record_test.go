package quarantine

import (
	"errors"
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

func TestParse(t *testing.T) {
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
		{name: "not JSON", body: "hello", wantErr: true},
		{name: "no batch info", body: `{"requestContext":{},"version":"1.0"}`, wantErr: true, wantField: "KinesisBatchInfo"},
		{name: "no shard", body: `{"KinesisBatchInfo":{"startSequenceNumber":"1","endSequenceNumber":"2","streamArn":"arn:aws:kinesis:us-east-1:1:stream/s"}}`, wantErr: true, wantField: "KinesisBatchInfo.shardId"},
		{name: "sequence number not digits", body: `{"KinesisBatchInfo":{"shardId":"s","startSequenceNumber":"abc","endSequenceNumber":"2","streamArn":"arn:aws:kinesis:us-east-1:1:stream/s"}}`, wantErr: true, wantField: "KinesisBatchInfo.startSequenceNumber"},
		{name: "batchSize a string", body: `{"KinesisBatchInfo":{"shardId":"s","startSequenceNumber":"1","endSequenceNumber":"2","batchSize":"two","streamArn":"arn:aws:kinesis:us-east-1:1:stream/s"}}`, wantErr: true, wantField: "KinesisBatchInfo.batchSize"},
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
					t.Errorf("field %q, want %q (%v)", pe.Field, tt.wantField, err)
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
