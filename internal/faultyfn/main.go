package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

// Fault modes.
const (
	modeNone        = ""
	modeItemFailure = "itemfailure"
	modeError       = "error"
	modeCrash       = "crash"
)

type handler struct {
	mode string
	out  *json.Encoder
}

func main() {
	mode := os.Getenv("FAULT_MODE")
	switch mode {
	case modeNone, modeItemFailure, modeError, modeCrash:
	default:
		fmt.Fprintf(os.Stderr, "faultyfn: FAULT_MODE %q: want itemfailure, error, crash or empty\n", mode)
		os.Exit(2)
	}
	h := &handler{mode: mode, out: json.NewEncoder(os.Stdout)}
	lambda.Start(h.Handle)
}

// shape is just enough of every supported payload to tell them apart.
type shape struct {
	Records []struct {
		EventSource string `json:"eventSource"`
	} `json:"Records"`
	Window *json.RawMessage `json:"window"`
	// EventSourceARN is set on tumbling-window events, which may carry no records.
	EventSourceARN string `json:"eventSourceARN"`
	Do             string `json:"do"`
}

// invocation is the line logged for every event.
type invocation struct {
	Source          string            `json:"source"`
	Size            int               `json:"size"`
	First           string            `json:"first,omitempty"`
	Last            string            `json:"last,omitempty"`
	IDs             []string          `json:"ids"`
	Poison          []string          `json:"poison,omitempty"`
	Window          *events.Window    `json:"window,omitempty"`
	State           map[string]string `json:"state,omitempty"`
	Final           bool              `json:"final,omitempty"`
	TerminatedEarly bool              `json:"terminatedEarly,omitempty"`
	Shard           string            `json:"shardId,omitempty"`
}

// Handle answers one invocation.
func (h *handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var s shape
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("faultyfn: payload is not a JSON object: %w", err)
	}
	if s.Do != "" {
		return h.command(ctx, raw, s.Do)
	}
	source := ""
	if len(s.Records) > 0 {
		source = s.Records[0].EventSource
	} else if s.Window != nil {
		if len(s.EventSourceARN) > 12 && s.EventSourceARN[:12] == "arn:aws:dyna" {
			source = "aws:dynamodb"
		} else {
			source = "aws:kinesis"
		}
	}
	switch {
	case source == "aws:kinesis" && s.Window != nil:
		var ev events.KinesisTimeWindowEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, err
		}
		inv, poison := kinesisRecords(ev.Records)
		return h.window(inv, poison, ev.TimeWindowProperties, len(ev.Records))
	case source == "aws:dynamodb" && s.Window != nil:
		var ev events.DynamoDBTimeWindowEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, err
		}
		inv, poison := dynamoRecords(ev.Records)
		return h.window(inv, poison, ev.TimeWindowProperties, len(ev.Records))
	case source == "aws:kinesis":
		var ev events.KinesisEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, err
		}
		inv, poison := kinesisRecords(ev.Records)
		failures, err := h.apply(inv, poison)
		if err != nil {
			return nil, err
		}
		resp := events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{}}
		for _, id := range failures {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.KinesisBatchItemFailure{ItemIdentifier: id})
		}
		return resp, nil
	case source == "aws:dynamodb":
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, err
		}
		inv, poison := dynamoRecords(ev.Records)
		failures, err := h.apply(inv, poison)
		if err != nil {
			return nil, err
		}
		resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
		for _, id := range failures {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: id})
		}
		return resp, nil
	case source == "aws:sqs":
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, err
		}
		inv := invocation{Source: source}
		var poison []string
		for _, m := range ev.Records {
			inv.IDs = append(inv.IDs, m.MessageId)
			if isPoison([]byte(m.Body)) {
				poison = append(poison, m.MessageId)
			}
		}
		failures, err := h.apply(inv, poison)
		if err != nil {
			return nil, err
		}
		resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		for _, id := range failures {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
		return resp, nil
	}
	return nil, fmt.Errorf("faultyfn: unknown payload shape (eventSource %q)", source)
}

func kinesisRecords(rs []events.KinesisEventRecord) (invocation, []string) {
	inv := invocation{Source: "aws:kinesis", IDs: []string{}}
	var poison []string
	for _, r := range rs {
		inv.IDs = append(inv.IDs, r.Kinesis.SequenceNumber)
		if isPoison(r.Kinesis.Data) {
			poison = append(poison, r.Kinesis.SequenceNumber)
		}
	}
	return inv, poison
}

func dynamoRecords(rs []events.DynamoDBEventRecord) (invocation, []string) {
	inv := invocation{Source: "aws:dynamodb", IDs: []string{}}
	var poison []string
	for _, r := range rs {
		inv.IDs = append(inv.IDs, r.Change.SequenceNumber)
		if p, ok := r.Change.NewImage["poison"]; ok && p.DataType() == events.DataTypeBoolean && p.Boolean() {
			poison = append(poison, r.Change.SequenceNumber)
		}
	}
	return inv, poison
}

func isPoison(data []byte) bool {
	var v struct {
		Poison bool `json:"poison"`
	}
	return json.Unmarshal(data, &v) == nil && v.Poison
}

// apply logs the invocation and fails the way the mode says; it returns the
// item failures to report.
func (h *handler) apply(inv invocation, poison []string) ([]string, error) {
	inv.Size = len(inv.IDs)
	if inv.Size > 0 {
		inv.First, inv.Last = inv.IDs[0], inv.IDs[inv.Size-1]
	}
	inv.Poison = poison
	_ = h.out.Encode(map[string]invocation{"invocation": inv})
	if len(poison) == 0 {
		return nil, nil
	}
	switch h.mode {
	case modeItemFailure:
		return poison, nil
	case modeError:
		return nil, fmt.Errorf("faultyfn: batch holds %d poison record(s), first %s", len(poison), poison[0])
	case modeCrash:
		os.Stdout.Sync()
		os.Exit(1)
	}
	return nil, nil
}

// window handles a tumbling-window event: the state counts records seen in
// the window ("count") and invocations ("invokes").
func (h *handler) window(inv invocation, poison []string, p events.TimeWindowProperties, n int) (any, error) {
	inv.Window = &p.Window
	inv.State = map[string]string{}
	for k, v := range p.State {
		if k != "pad" { // FAULT_STATE_PAD's filler is not worth logging
			inv.State[k] = v
		}
	}
	inv.Final = p.IsFinalInvokeForWindow
	inv.TerminatedEarly = p.IsWindowTerminatedEarly
	inv.Shard = p.ShardID
	failures, err := h.apply(inv, poison)
	if err != nil {
		return nil, err
	}
	count, _ := strconv.Atoi(p.State["count"])
	invokes, _ := strconv.Atoi(p.State["invokes"])
	state := map[string]string{"count": strconv.Itoa(count + n), "invokes": strconv.Itoa(invokes + 1)}
	if pad, _ := strconv.Atoi(os.Getenv("FAULT_STATE_PAD")); pad > 0 {
		state["pad"] = strings.Repeat("x", pad)
	}
	resp := events.KinesisTimeWindowEventResponse{
		TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: state},
		BatchItemFailures:                 []events.KinesisBatchItemFailure{},
	}
	for _, id := range failures {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.KinesisBatchItemFailure{ItemIdentifier: id})
	}
	return resp, nil
}

// allocated keeps what "alloc" allocated reachable until the process exits.
var allocated [][]byte

// command runs one emulator test command.
func (h *handler) command(_ context.Context, raw json.RawMessage, do string) (any, error) {
	var c struct {
		MS   int    `json:"ms"`
		MB   int    `json:"mb"`
		Name string `json:"name"`
	}
	_ = json.Unmarshal(raw, &c)
	fmt.Printf("faultyfn: command %s\n", do)
	switch do {
	case "echo":
		return raw, nil
	case "error":
		return nil, errors.New("faultyfn: asked to fail")
	case "panic":
		panic("faultyfn: asked to panic")
	case "exit":
		os.Stdout.Sync()
		os.Exit(3)
	case "sleep":
		// Deliberately deaf to ctx: a timeout test needs a handler that overruns.
		time.Sleep(time.Duration(c.MS) * time.Millisecond)
		return map[string]int{"slept": c.MS}, nil
	case "env":
		return map[string]string{c.Name: os.Getenv(c.Name)}, nil
	case "pid":
		return map[string]int{"pid": os.Getpid()}, nil
	case "alloc":
		// Touch every page so that the memory is resident (peak memory tests).
		b := make([]byte, min(max(c.MB, 0), 512)<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		allocated = append(allocated, b)
		return map[string]int{"mb": len(b) >> 20}, nil
	}
	return nil, fmt.Errorf("faultyfn: unknown command %q", do)
}
