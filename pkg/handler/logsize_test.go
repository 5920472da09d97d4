package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// maxLogLine is the most bytes a test accepts of one log line, whatever
// the record: CloudWatch bills each byte ingested, and a set-aside line
// carries a reason of up to 4 KB.
const maxLogLine = 8 << 10

// logLines is a JSON logger writing to memory, and a func returning its
// lines.
func logLines() (*slog.Logger, func() []string) {
	var mu sync.Mutex
	var buf bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	})
	return slog.New(slog.NewJSONHandler(w, nil)), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Split(strings.TrimSpace(buf.String()), "\n")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// checkLines fails t for every line over maxLogLine.
func checkLines(t *testing.T, lines []string) {
	t.Helper()
	for _, l := range lines {
		if len(l) > maxLogLine {
			t.Errorf("a log line of %d bytes, over %d: %.300s…", len(l), maxLogLine, l)
		}
	}
}

// bigData is a record's data of about 100 KB: what a hostile producer
// sends, and what a user's code may echo in an error or a panic.
var bigData = `{"note":"` + strings.Repeat("x", 100<<10) + `"}`

// TestSelectorPanicLogLineIsBounded: a Selector that panics with the
// record's data in its message (panic(fmt.Sprintf("cannot read %s",
// ev.Data))) logs the panic once per attempt of the batch. The line must
// not carry the whole record: each log byte is billed, and Lambda cuts a
// log event at 256 KB.
func TestSelectorPanicLogLineIsBounded(t *testing.T) {
	cfg := setupOnMemdb(t)
	log, lines := logLines()
	sel := func(ev *handler.Event) (string, int64, error) {
		if strings.Contains(string(ev.Data), "note") {
			panic(fmt.Sprintf("cannot read %s", ev.Data))
		}
		return selectLatency(ev)
	}
	h, err := handler.NewWindowed[Tally](cfg, sel, handler.WithLogger(log), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	mustBatch(t, h, kinesisRecords([]rec{{100, request("e0", "/r", 1, `{"ms":5}`)}, {101, request("e1", "/r", 2, bigData)}}))
	got := lines()
	if !strings.Contains(strings.Join(got, "\n"), "panicked") {
		t.Fatalf("no line names the panic: %.500q", got)
	}
	checkLines(t, got)
}

// TestTaskErrorLogLinesAreBounded: a TaskFunc whose error or panic echoes
// the message's data — retried (logged on every receive until the DLQ),
// refused (logged as it goes to the dead-letter queue) or with no queue to
// set it aside on — logs a line of bounded size, not the message (up to
// 1 MiB on SQS).
func TestTaskErrorLogLinesAreBounded(t *testing.T) {
	ctx := context.Background()
	sq := sqs.NewFromConfig(awsCfg)
	table, _, srcARN := taskQueues(t, sq)
	fn := func(ctx context.Context, ev *handler.Event) ([]byte, error) {
		switch ev.ID {
		case "transient":
			return nil, fmt.Errorf("charging %s: %w", ev.Data, errors.New("timed out"))
		case "refused":
			return nil, handler.Refuse("data.note", "%s is not a note", ev.Data)
		default:
			panic(fmt.Sprintf("cannot read %s", ev.Data))
		}
	}
	for _, tc := range []struct {
		name string
		sqs  handler.DeadLetterSender
	}{{"with a dead-letter queue", sq}, {"without one", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			log, lines := logLines()
			h, err := handler.NewTasks(handler.TasksConfig{Name: "orders", IdempotencyTable: table, DynamoDB: db, SQS: tc.sqs}, fn,
				handler.WithLogger(log), handler.WithMetrics(nil))
			if err != nil {
				t.Fatal(err)
			}
			var batch []events.SQSMessage
			for i, id := range []string{"transient", "refused", "panics"} {
				body, _ := json.Marshal(stream.Envelope{ID: id, Type: "order", Key: "k", OccurredAt: base, SentAt: base, ReceivedAt: base,
					Data: json.RawMessage(bigData)})
				batch = append(batch, events.SQSMessage{MessageId: fmt.Sprint("m", i+1), Body: string(body), EventSource: "aws:sqs",
					EventSourceARN: srcARN, Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
			}
			if _, err := h.Handle(ctx, events.SQSEvent{Records: batch}); err != nil {
				t.Fatal(err)
			}
			got := lines()
			if len(got) < 3 {
				t.Fatalf("%d log lines, want one per message: %.500q", len(got), got)
			}
			checkLines(t, got)
		})
	}
}
