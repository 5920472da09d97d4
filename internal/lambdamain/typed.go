package lambdamain

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Typed is f as lambda.Start runs a handler of an event type E, but a
// payload that is not a JSON object (an array, a string: nothing an event
// source mapping sends) fails naming what it is and what the function
// takes (want: stream.EventSQS, ...; a *stream.EventShapeError), where
// aws-lambda-go's decode fails with encoding/json's words about the Go
// type ("cannot unmarshal array into Go value of type events.SQSEvent").
// A member of the wrong type fails naming its path and what it must be
// (stream.DecodeEvent: "not a Kinesis event: Records: must be a JSON array,
// not a string"; "not a function URL request: body: must be a JSON string,
// not a number"). Anything else is decoded and answered as aws-lambda-go
// does: encoding/json into E, the response without HTML escaping or a
// trailing newline.
func Typed[E, R any](want string, f func(context.Context, E) (R, error)) lambda.Handler {
	return typed[E, R]{want: want, f: f}
}

type typed[E, R any] struct {
	want string
	f    func(context.Context, E) (R, error)
}

func (t typed[E, R]) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	if err := stream.CheckEventObject(payload, t.want); err != nil {
		return nil, err
	}
	var ev E
	if err := stream.DecodeEvent(payload, &ev, t.want); err != nil {
		return nil, err
	}
	resp, err := t.f(ctx, ev)
	if err != nil {
		return nil, err
	}
	return strictjson.Marshal(resp)
}
