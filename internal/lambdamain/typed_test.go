package lambdamain

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/stream/streamtest"
)

// TestTypedSaysWhatTheEventIs: a payload that is not a JSON object fails
// naming what it is and the event the function takes; any other is run
// and answered byte for byte as lambda.Start runs the handler itself (the
// oracle: aws-lambda-go's own handler), its error included.
func TestTypedSaysWhatTheEventIs(t *testing.T) {
	handle := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		for _, r := range ev.Records {
			if r.Body == "fail" {
				return resp, errors.New("a failure of the handler's own")
			}
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId + "<&>"})
		}
		return resp, nil
	}
	h := Typed(stream.EventSQS, handle)
	for _, tc := range []struct{ raw, is string }{{`[1]`, "an array"}, {`"x"`, "a string"}, {`7`, "a number"}} {
		_, err := h.Invoke(context.Background(), []byte(tc.raw))
		var se *stream.EventShapeError
		if !errors.As(err, &se) || !strings.HasPrefix(err.Error(), "not an SQS event: the event is "+tc.is+", not a JSON object") {
			t.Errorf("%s: %v; want it refused naming %s and the SQS event", tc.raw, err, tc.is)
		}
	}
	oracle := lambda.NewHandler(handle)
	for _, raw := range []string{string(streamtest.SampleEvent(stream.SourceSQS)), `{}`, `null`, `{"Records":[{"messageId":"m1","body":"fail"}]}`} {
		got, err := h.Invoke(context.Background(), []byte(raw))
		want, wantErr := oracle.Invoke(context.Background(), []byte(raw))
		if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("%s: %s, %v; want %s, %v as aws-lambda-go answers", raw, got, err, want, wantErr)
		}
	}
}

// TestTypedNamesAMemberOfTheWrongType: a test event whose member has the
// wrong JSON type fails naming the member's path (with the record's index)
// and what it must be, for every event Typed decodes, where encoding/json
// named the Go type ("cannot unmarshal string into Go value of type
// []events.KinesisEventRecord").
func TestTypedNamesAMemberOfTheWrongType(t *testing.T) {
	kinesis := Typed(stream.EventKinesis, func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
		return events.KinesisEventResponse{}, nil
	})
	sqs := Typed(stream.EventSQS, func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	})
	ddb := Typed(stream.EventDynamoDB, func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		return events.DynamoDBEventResponse{}, nil
	})
	url := Typed(stream.EventFunctionURL, func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		return events.LambdaFunctionURLResponse{}, nil
	})
	for _, tc := range []struct {
		name string
		h    lambda.Handler
		raw  string
		want string
	}{
		{"Kinesis Records a string", kinesis, `{"Records":"nope"}`, "not a Kinesis event: Records: must be a JSON array, not a string"},
		{"Kinesis data a number", kinesis, `{"Records":[{"kinesis":{"data":"YQ=="}},{"kinesis":{"data":42}}]}`, "not a Kinesis event: Records[1].kinesis.data: must be a JSON string (base64), not a number"},
		{"SQS body an object", sqs, `{"Records":[{"messageId":"m1","body":{}}]}`, "not an SQS event: Records[0].body: must be a JSON string, not an object"},
		{"DynamoDB Records an object", ddb, `{"Records":{}}`, "not a DynamoDB stream event: Records: must be a JSON array, not an object"},
		{"URL body a number", url, `{"rawPath":"/","body":42}`, "not a function URL request: body: must be a JSON string, not a number"},
		{"URL headers an array", url, `{"headers":[1,2]}`, "not a function URL request: headers: must be a JSON object, not an array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.h.Invoke(context.Background(), []byte(tc.raw))
			var se *stream.EventShapeError
			if !errors.As(err, &se) || err.Error() != tc.want {
				t.Errorf("%s: %v; want an *EventShapeError %q", tc.raw, err, tc.want)
			}
		})
	}
}
