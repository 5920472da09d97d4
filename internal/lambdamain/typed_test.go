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
	for _, raw := range []string{string(streamtest.SampleEvent(stream.SourceSQS)), `{}`, `null`, `{"Records":[{"messageId":"m1","body":"fail"}]}`, `{"Records":"no"}`} {
		got, err := h.Invoke(context.Background(), []byte(raw))
		want, wantErr := oracle.Invoke(context.Background(), []byte(raw))
		if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("%s: %s, %v; want %s, %v as aws-lambda-go answers", raw, got, err, want, wantErr)
		}
	}
}
