package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/idempotency"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/stream"
)

func body(taskID, input string, rounds int) string {
	return fmt.Sprintf(`{"id":"evt-%s","type":"task","key":"%s","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:01Z","data":{"taskId":%q,"input":%q,"rounds":%d}}`,
		taskID, taskID, taskID, input, rounds)
}

func message(id, body, group string) events.SQSMessage {
	m := events.SQSMessage{MessageId: id, Body: body, Attributes: map[string]string{"SentTimestamp": "1795946401000"}}
	if group != "" {
		m.Attributes["MessageGroupId"] = group
	}
	return m
}

// fixture is a handler on fresh tables of the shared stand-in.
type fixture struct {
	db      *dynamodb.Client
	results string
	store   *idempotency.Store
	h       *Handler
	emf     *bytes.Buffer
	logs    *bytes.Buffer
}

var tableSeq atomic.Int64

func newFixture(t *testing.T, db *dynamodb.Client) *fixture {
	t.Helper()
	ctx := context.Background()
	n := tableSeq.Add(1)
	idemTable, results := fmt.Sprintf("idem%d", n), fmt.Sprintf("results%d", n)
	if err := idempotency.CreateTable(ctx, db, idemTable); err != nil {
		t.Fatal(err)
	}
	if err := CreateResultsTable(ctx, db, results); err != nil {
		t.Fatal(err)
	}
	store, err := idempotency.New(db, idemTable, IdempotencyConfig("worker"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, results: results, store: store, emf: &bytes.Buffer{}, logs: &bytes.Buffer{}}
	f.h = New(store, db, results, WithMetrics(metrics.New(f.emf, "worker")),
		WithLogger(slog.New(slog.NewJSONHandler(f.logs, nil))))
	return f
}

func (f *fixture) handle(t *testing.T, msgs ...events.SQSMessage) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := f.h.Handle(ctx, events.SQSEvent{Records: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if resp.BatchItemFailures == nil {
		t.Fatal("BatchItemFailures is nil; Lambda wants an empty list for success")
	}
	var ids []string
	for _, b := range resp.BatchItemFailures {
		ids = append(ids, b.ItemIdentifier)
	}
	return ids
}

// executions is how often task's side effect ran (0: never).
func (f *fixture) executions(t *testing.T, task string) int {
	t.Helper()
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(f.results), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{AttrTaskID: &types.AttributeValueMemberS{Value: task}},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := out.Item[AttrExecutions].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	var v int
	fmt.Sscan(n.Value, &v)
	return v
}

// metric sums name over the EMF documents written so far.
func (f *fixture) metric(t *testing.T, name string) float64 {
	t.Helper()
	var sum float64
	for _, line := range strings.Split(strings.TrimSpace(f.emf.String()), "\n") {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("EMF line %q: %v", line, err)
		}
		v, _ := doc[name].(float64)
		sum += v
	}
	return sum
}

func TestHandler(t *testing.T) {
	srv := standintest.Start(t)
	db := dynamodb.NewFromConfig(standintest.Config(t, srv))
	cases := []struct {
		name string
		run  func(t *testing.T, f *fixture)
	}{
		{"duplicate task runs once", testDuplicateRunsOnce},
		{"redelivered batch runs nothing again", testRedeliveryRunsNothingAgain},
		{"poison messages are reported and logged", testPoison},
		{"task in progress elsewhere is reported failed", testInProgress},
		{"task id reused with other data is refused", testTaskIDReused},
		{"FIFO failure fails the rest of its group", testFIFO},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newFixture(t, db)) })
	}
}

func testDuplicateRunsOnce(t *testing.T, f *fixture) {
	b := body("t-1", "hello", 1000)
	if fails := f.handle(t, message("m1", b, ""), message("m2", b, ""), message("m3", body("t-2", "x", 1), "")); len(fails) != 0 {
		t.Fatalf("failures %v, want none", fails)
	}
	if n := f.executions(t, "t-1"); n != 1 {
		t.Errorf("t-1's side effect ran %d times, want 1", n)
	}
	if n := f.executions(t, "t-2"); n != 1 {
		t.Errorf("t-2's side effect ran %d times, want 1", n)
	}
	for name, want := range map[string]float64{"MessagesIn": 3, "Processed": 2, "Duplicates": 1, "InProgress": 0, "Failures": 0} {
		if got := f.metric(t, name); got != want {
			t.Errorf("metric %s = %v, want %v", name, got, want)
		}
	}
}

func testRedeliveryRunsNothingAgain(t *testing.T, f *fixture) {
	msgs := []events.SQSMessage{message("m1", body("t-1", "a", 10), ""), message("m2", body("t-2", "b", 10), "")}
	for range 3 {
		if fails := f.handle(t, msgs...); len(fails) != 0 {
			t.Fatalf("failures %v", fails)
		}
	}
	if a, b := f.executions(t, "t-1"), f.executions(t, "t-2"); a != 1 || b != 1 {
		t.Errorf("executions %d, %d after three deliveries; want 1, 1", a, b)
	}
	if got := f.metric(t, "Duplicates"); got != 4 {
		t.Errorf("Duplicates = %v, want 4", got)
	}
}

func testPoison(t *testing.T, f *fixture) {
	fails := f.handle(t,
		message("bad-json", "{not json", ""),
		message("bad-type", strings.Replace(body("t-3", "a", 1), `"type":"task"`, `"type":"page_view"`, 1), ""),
		message("bad-rounds", body("t-4", "a", 0), ""),
		message("good", body("t-5", "a", 1), ""),
		// The idempotency key is taken by its exact path (data.taskId)
		// and the task from the decoded data: read case-folded, these
		// would key one task and run another, or never find their key.
		message("two-spellings", strings.Replace(body("t-8", "a", 1), `"taskId":"t-8"`, `"taskId":"t-8","TASKID":"t-9"`, 1), ""),
		message("other-case", strings.Replace(body("t-9", "a", 1), `"taskId"`, `"TaskID"`, 1), ""),
		message("id-twice", strings.Replace(body("t-9", "a", 1), `"id":"evt-t-9"`, `"id":"evt-t-9","ID":"evt-other"`, 1), ""),
		// A task id ingest would refuse as an event's id or key.
		message("nul-id", strings.Replace(body("t-10", "a", 1), `"taskId":"t-10"`, `"taskId":"t-10\u0000"`, 1), ""),
		// A task id that shows as "t-5" in every log and listing, but
		// would be a second task beside it.
		message("bom-id", strings.Replace(body("t-11", "a", 1), `"taskId":"t-11"`, `"taskId":"\ufefft-5"`, 1), ""),
	)
	if want := []string{"bad-json", "bad-type", "bad-rounds", "two-spellings", "other-case", "id-twice", "nul-id", "bom-id"}; !slices.Equal(fails, want) {
		t.Fatalf("failures %v, want %v", fails, want)
	}
	if n := f.executions(t, "t-10\x00"); n != 0 {
		t.Errorf("the task whose id holds a NUL ran %d times; want it refused", n)
	}
	if n := f.executions(t, "\ufefft-5"); n != 0 {
		t.Errorf("the task whose id starts with a byte order mark ran %d times; want it refused", n)
	}
	logs := f.logs.String()
	for _, want := range []string{`"messageId":"bad-json"`, `field type`, `field data.rounds: must be a whole number from 1 to 5000000, not 0`, `field data.TASKID: unknown field`, `field data.TaskID: unknown field`, `field ID: unknown field`,
		`field data.taskId: holds control character U+0000 at byte 4`, `field data.taskId: holds invisible character U+FEFF at byte 0`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs do not mention %s:\n%s", want, logs)
		}
	}
	if f.executions(t, "t-5") != 1 || f.executions(t, "t-3") != 0 || f.executions(t, "t-8") != 0 || f.executions(t, "t-9") != 0 {
		t.Error("the good message did not run once, or a poison one ran")
	}
	if got := f.metric(t, "Failures"); got != 8 {
		t.Errorf("Failures = %v, want 8", got)
	}
}

func testInProgress(t *testing.T, f *fixture) {
	b := body("t-6", "a", 1)
	// Another invocation holds t-6: its record is INPROGRESS until a minute
	// from now.
	release := make(chan struct{})
	started := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := f.store.Do(context.Background(), []byte(b), func(context.Context) ([]byte, error) {
			close(started)
			<-release
			return []byte(`{}`), nil
		})
		done <- err
	}()
	<-started
	fails := f.handle(t, message("m1", b, ""))
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fails, []string{"m1"}) {
		t.Fatalf("failures %v, want [m1]", fails)
	}
	if f.executions(t, "t-6") != 0 {
		t.Error("the worker ran a task another invocation holds")
	}
	if got := f.metric(t, "InProgress"); got != 1 {
		t.Errorf("InProgress = %v, want 1", got)
	}
}

func testTaskIDReused(t *testing.T, f *fixture) {
	if fails := f.handle(t, message("m1", body("t-7", "first", 1), "")); len(fails) != 0 {
		t.Fatal(fails)
	}
	fails := f.handle(t, message("m2", body("t-7", "second", 1), ""))
	if !slices.Equal(fails, []string{"m2"}) {
		t.Fatalf("failures %v, want [m2]", fails)
	}
	if !strings.Contains(f.logs.String(), "message m2: task t-7") {
		t.Errorf("the refusal does not name the message and task:\n%s", f.logs.String())
	}
	if f.executions(t, "t-7") != 1 {
		t.Error("the reused task id ran again")
	}
}

func testFIFO(t *testing.T, f *fixture) {
	fails := f.handle(t,
		message("a1", body("fa-1", "x", 1), "A"),
		message("b1", body("fb-1", "x", 1), "B"),
		message("a2", "{poison", "A"),
		message("b2", body("fb-2", "x", 1), "B"),
		message("a3", body("fa-3", "x", 1), "A"),
	)
	if want := []string{"a2", "a3"}; !slices.Equal(fails, want) {
		t.Fatalf("failures %v, want %v", fails, want)
	}
	for task, want := range map[string]int{"fa-1": 1, "fb-1": 1, "fb-2": 1, "fa-3": 0} {
		if got := f.executions(t, task); got != want {
			t.Errorf("%s ran %d times, want %d", task, got, want)
		}
	}
	// a3 comes back with a2 until SQS moves both to the dead-letter queue,
	// a3 with no fault of its own: its line names the message it waits on.
	var held map[string]any
	for _, line := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		if strings.Contains(line, `"messageId":"a3"`) {
			if err := json.Unmarshal([]byte(line), &held); err != nil {
				t.Fatal(err)
			}
		}
	}
	if held["blockedBy"] != "a2" || held["group"] != "A" {
		t.Errorf("a3's log line %v; want it to name the message it is held behind (blockedBy a2) and its group A", held)
	}
}

func TestDecodeTask(t *testing.T) {
	tests := []struct {
		name, data, typ, field string
	}{
		{"ok", `{"taskId":"t","input":"x","rounds":3}`, "task", ""},
		{"wrong type", `{"taskId":"t","rounds":3}`, "other", "type"},
		{"no data", ``, "task", "data"},
		{"data not an object", `[1]`, "task", "data"},
		{"no task id", `{"rounds":3}`, "task", "data.taskId"},
		{"too many rounds", `{"taskId":"t","rounds":9000000}`, "task", "data.rounds"},
		{"task id in another case", `{"TaskID":"t","rounds":3}`, "task", "data.TaskID"},
		{"unknown field", `{"taskId":"t","rounds":3,"priority":1}`, "task", "data.priority"},
		{"unknown field that reads as a path", `{"taskId":"t","rounds":3,"a.b":1}`, "task", `data["a.b"]`},
		{"unknown field holding ESC", `{"taskId":"t","rounds":3,"\u001b[2J":1}`, "task", `data["\x1b[2J"]`},
		{"task id twice", `{"taskId":"t","taskId":"u","rounds":3}`, "task", "data.taskId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := stream.Envelope{Type: tt.typ, Data: json.RawMessage(tt.data)}
			_, err := DecodeTask("m-9", &env)
			var te *TaskError
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("err %v, want none", err)
			case tt.field != "" && (!errors.As(err, &te) || te.Field != tt.field || te.MessageID != "m-9"):
				t.Errorf("err %v, want a TaskError for field %s of message m-9", err, tt.field)
			}
		})
	}
}

// TestDecodeTaskSaysWhy: a refused task names the field and says what it
// takes — rounds quote their own range (1 to MaxRounds), not an int's, and
// a task id (or the id it waits for) holding a control character is
// refused as ingest refuses one in an event's id, type or key.
func TestDecodeTaskSaysWhy(t *testing.T) {
	const rounds = "must be a whole number from 1 to 5000000, not "
	for _, tt := range []struct {
		name, data, field, reason string
	}{
		{"a fraction", `{"taskId":"t","rounds":1.5}`, "data.rounds", rounds + "1.5"},
		{"past a float64", `{"taskId":"t","rounds":1e400}`, "data.rounds", rounds + "1e400"},
		{"past an int64", `{"taskId":"t","rounds":99999999999999999999}`, "data.rounds", rounds + "99999999999999999999"},
		{"1.0", `{"taskId":"t","rounds":1.0}`, "data.rounds", rounds + "1.0"},
		{"-0", `{"taskId":"t","rounds":-0}`, "data.rounds", rounds + "-0"},
		{"0", `{"taskId":"t","rounds":0}`, "data.rounds", rounds + "0"},
		{"too many", `{"taskId":"t","rounds":5000001}`, "data.rounds", rounds + "5000001"},
		{"a string", `{"taskId":"t","rounds":"3"}`, "data.rounds", rounds + "a string"},
		{"missing", `{"taskId":"t"}`, "data.rounds", "is required: must be a whole number from 1 to 5000000"},
		{"a NUL in the task id", `{"taskId":"t\u0000x","rounds":3}`, "data.taskId", "holds control character U+0000 at byte 1; identifiers are printable text"},
		{"a DEL in the task waited for", `{"taskId":"t","rounds":3,"after":"a\u007f"}`, "data.after", "holds control character U+007F at byte 1; identifiers are printable text"},
		// Shown as nothing or breaking the line: two task ids that look
		// the same in every log, or a log line cut in two.
		{"a byte order mark in the task id", `{"taskId":"\ufefft-1","rounds":3}`, "data.taskId", "holds invisible character U+FEFF at byte 0; identifiers are printable text"},
		{"a line separator in the task waited for", `{"taskId":"t","rounds":3,"after":"t-1\u2028"}`, "data.after", "holds line separator U+2028 at byte 3; identifiers are printable text"},
		{"a right-to-left override in the task id", `{"taskId":"t-\u202e1","rounds":3}`, "data.taskId", "holds bidirectional control U+202E at byte 2; identifiers are printable text"},
		// Sent empty, after read as naming no task: the task ran at once.
		{"after empty", `{"taskId":"t","rounds":3,"after":""}`, "data.after", "is empty: name the task whose result this one waits for, or leave after out"},
		{"a task id of white space", `{"taskId":"   ","rounds":3}`, "data.taskId", "is blank (only white space): a task id must hold a character other than white space"},
		{"after of white space", `{"taskId":"t","rounds":3,"after":" "}`, "data.after", "is blank (only white space): name the task whose result this one waits for, or leave after out"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := stream.Envelope{Type: TaskType, Data: json.RawMessage(tt.data)}
			_, err := DecodeTask("m-9", &env)
			var te *TaskError
			if !errors.As(err, &te) || te.Field != tt.field || te.Reason != tt.reason {
				t.Errorf("err %v; want a TaskError for field %s: %s", err, tt.field, tt.reason)
			}
		})
	}
	// The bounds themselves are tasks.
	for _, data := range []string{`{"taskId":"t","rounds":1}`, `{"taskId":"t","rounds":5000000}`} {
		if task, err := DecodeTask("m-9", &stream.Envelope{Type: TaskType, Data: json.RawMessage(data)}); err != nil || task.Rounds < 1 {
			t.Errorf("%s: %+v, %v; want a task", data, task, err)
		}
	}
}

// TestDependencyErrorSaysWhatHappensNext: the reason logged on each receive
// of a task waiting for its dependency says the queue's last receive only on
// that receive; before it, that the message comes back (a user told "the
// queue's last; redrive this message" on receive 1 of 5 looked for it in
// the DLQ, where it was not).
func TestDependencyErrorSaysWhatHappensNext(t *testing.T) {
	for _, tc := range []struct {
		name          string
		receive, max  int
		want, notWant string
	}{
		{"first of five", 1, 5, "on receive 1 of 5: redelivered after the visibility timeout; still missing on receive 5, it goes to the dead-letter queue", "the queue's last"},
		{"last of five", 5, 5, "on receive 5 of 5, the queue's last; run it, then redrive this message", "redelivered"},
		{"maxReceiveCount unknown", 2, 0, "has no result in table results; run it, then redrive this message", "receive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := &DependencyError{MessageID: "m1", TaskID: "t2", Missing: "t1", Table: "results", Receive: tc.receive, MaxReceives: tc.max}
			if got := err.Error(); !strings.Contains(got, tc.want) || strings.Contains(got, tc.notWant) {
				t.Errorf("Error() = %q\nwant it to say %q and not %q", got, tc.want, tc.notWant)
			}
		})
	}
}
