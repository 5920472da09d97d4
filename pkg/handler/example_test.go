package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
)

// A Selector refuses an event naming the field at fault: the record is set
// aside with that field and reason, and the batch goes on.
func ExampleRefuse() {
	_, _, err := selectLatency(&handler.Event{Type: "request", Key: "/a", Data: json.RawMessage(`{"ms":-5}`)})
	fmt.Println(err)
	_, _, err = selectLatency(&handler.Event{Type: "click"})
	fmt.Println(err == handler.ErrSkip)
	// Output:
	// data.ms: -5 is not a whole number of milliseconds 0–60000
	// true
}

// Check your aggregate's merge laws in its tests.
func ExampleCheckMergeLaws() {
	err := handler.CheckMergeLaws[Tally]([]int64{5, 1, 5, 9, 0, 3}, 100, 1)
	fmt.Println("Tally:", err)
	err = handler.CheckMergeLaws[lastWins]([]int64{5, 1, 5, 9, 0, 3}, 100, 1)
	fmt.Println("lastWins fails:", err != nil)
	// Output:
	// Tally: <nil>
	// lastWins fails: true
}

// A windowed aggregation of latencies per key, one-minute windows. Here the
// clients are the tests' stand-in's; in a function's main, FromEnv (or
// WindowedFromEnv) builds them from the environment and lambda.Start(h)
// runs the handler.
func ExampleNewWindowed() {
	ctx := context.Background()
	cfg := handler.Config{Name: "latency", StateTable: name("state"), OutputStream: name("out"), QuarantineTable: name("quarantine"),
		DynamoDB: db, Kinesis: kin}
	_ = state.CreateTable(ctx, db, cfg.StateTable)
	_ = setaside.CreateTable(ctx, db, cfg.QuarantineTable)
	_, _ = kin.CreateStream(ctx, kinCreate(cfg.OutputStream))

	h, err := handler.NewWindowed[Tally](cfg, selectLatency,
		handler.WithWindow(time.Minute), handler.WithOutOfOrderness(5*time.Second), handler.WithMetrics(nil), handler.WithLogger(quiet))
	if err != nil {
		fmt.Println(err)
		return
	}
	batch := kinesisRecords([]rec{
		{1, request("r1", "/a", 1, `{"ms":10}`)},
		{2, request("r1", "/a", 1, `{"ms":10}`)}, // the producer's copy
		{3, request("r2", "/a", 20, `{"ms":30}`)},
		{4, request("r3", "/a", 66, `{"ms":1}`)}, // the watermark passes 10:01:00
	})
	for range 2 { // Lambda delivers the batch twice
		resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: batch})
		fmt.Println(len(resp.BatchItemFailures), err)
	}
	for _, r := range readResults(cfg.OutputStream) {
		fmt.Println(r)
	}
	// Output:
	// 0 <nil>
	// 0 <nil>
	// {"id":"latency//a/2026-11-29T10:00:00.000Z/2026-11-29T10:01:00.000Z","type":"final","name":"latency","key":"/a","windowStart":"2026-11-29T10:00:00Z","windowEnd":"2026-11-29T10:01:00Z","revision":1,"records":2,"final":true,"result":{"N":2,"Sum":40,"Max":30,"Distinct":2}}
}

// An SQS function running a task once per event id: a copy of an event
// gets the stored result, a refused task is set aside on the queue's
// dead-letter queue with its reason, anything else is retried by SQS.
// (Compiled, not run: it needs the function's environment.)
func ExampleTasksFromEnv() {
	h, err := handler.TasksFromEnv("orders", func(ctx context.Context, ev *handler.Event) ([]byte, error) {
		var order struct{ Qty int }
		if err := json.Unmarshal(ev.Data, &order); err != nil || order.Qty <= 0 {
			return nil, handler.Refuse("data.qty", "must be a positive whole number")
		}
		return json.Marshal(map[string]int{"reserved": order.Qty})
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = h.Handle // lambda.Start(h.Handle)
}
