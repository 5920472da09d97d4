package projection_test

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/emulator/rie"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

func createQuarantine(ctx context.Context, db *dynamodb.Client, name string) error {
	return setaside.CreateTable(ctx, db, name)
}

func newSink(db *dynamodb.Client, table string) *setaside.Sink { return setaside.New(db, table) }

func loadSetAside(ctx context.Context, db *dynamodb.Client, table string, r events.KinesisEventRecord) (*setaside.Item, error) {
	shard, _, _ := strings.Cut(r.EventID, ":")
	return setaside.Load(ctx, db, table, r.EventSourceArn+"/"+shard, r.Kinesis.SequenceNumber)
}

// invoker runs a handler in this process as the event source mappings'
// function (package eventsource), the payload decoded as Lambda would.
type invoker[E, R any] func(ctx context.Context, ev E) (R, error)

func (f invoker[E, R]) Invoke(ctx context.Context, payload []byte) (rie.Result, error) {
	var ev E
	if err := json.Unmarshal(payload, &ev); err != nil {
		return rie.Result{FunctionError: rie.Unhandled, Payload: []byte(`{"errorMessage":"` + err.Error() + `"}`)}, nil
	}
	resp, err := f(ctx, ev)
	if err != nil {
		b, _ := json.Marshal(map[string]string{"errorMessage": err.Error(), "errorType": "error"})
		return rie.Result{FunctionError: rie.Unhandled, Payload: b}, nil
	}
	b, err := json.Marshal(resp)
	return rie.Result{Payload: b}, err
}
