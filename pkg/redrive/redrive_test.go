package redrive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// client talks to one moto shared by every test of the package; each test
// makes its own queues.
var client *sqs.Client

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(cfg aws.Config) { client = sqs.NewFromConfig(cfg) }))
}

var queueSeq atomic.Int64

// newQueue creates a queue with a name unique to this run; fifo adds ".fifo".
func newQueue(t *testing.T, fifo bool, attrs map[string]string) string {
	t.Helper()
	name := fmt.Sprintf("q%d", queueSeq.Add(1))
	a := map[string]string{}
	for k, v := range attrs {
		a[k] = v
	}
	if fifo {
		name += ".fifo"
		a["FifoQueue"] = "true"
	}
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: a})
	if err != nil {
		t.Fatalf("creating queue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}

func queueArn(t *testing.T, url string) string {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes[string(types.QueueAttributeNameQueueArn)]
}

// sourceWithDLQ creates a DLQ and a source queue whose redrive policy sends a
// message there after one receive.
func sourceWithDLQ(t *testing.T, fifo bool) (source, dlq string) {
	t.Helper()
	dlq = newQueue(t, fifo, nil)
	policy, _ := json.Marshal(map[string]any{"deadLetterTargetArn": queueArn(t, dlq), "maxReceiveCount": 1})
	source = newQueue(t, fifo, map[string]string{"RedrivePolicy": string(policy)})
	return source, dlq
}

// msg is a message as a test sends it and expects it back.
type msg struct {
	body  string
	group string
	attrs map[string]types.MessageAttributeValue
}

func attrsFor(i int) map[string]types.MessageAttributeValue {
	return map[string]types.MessageAttributeValue{
		"orderId":  {DataType: aws.String("String"), StringValue: aws.String("order-" + strconv.Itoa(i))},
		"attempt":  {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(i % 3))},
		"checksum": {DataType: aws.String("Binary"), BinaryValue: []byte{byte(i), 0xff, 0x00}},
	}
}

func sendAll(t *testing.T, url string, msgs []msg) {
	t.Helper()
	for i, m := range msgs {
		in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(m.body), MessageAttributes: m.attrs}
		if m.group != "" {
			in.MessageGroupId = aws.String(m.group)
			in.MessageDeduplicationId = aws.String("orig-" + strconv.Itoa(i))
		}
		if _, err := client.SendMessage(context.Background(), in); err != nil {
			t.Fatalf("sending %q: %v", m.body, err)
		}
	}
}

// failIntoDLQ sends msgs to source and receives them without deleting until
// the redrive policy (maxReceiveCount 1) has moved every one to dlq.
func failIntoDLQ(t *testing.T, source, dlq string, msgs []msg) {
	t.Helper()
	sendAll(t, source, msgs)
	deadline := time.Now().Add(10 * time.Second)
	for counts(t, dlq).visible < len(msgs) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d messages reached the DLQ", counts(t, dlq).visible, len(msgs))
		}
		// A consumer that fails: receive, then give the messages back at once
		// (a zero VisibilityTimeout on the receive itself is not sent by the SDK).
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(source), MaxNumberOfMessages: 10,
		})
		if err != nil {
			t.Fatal(err)
		}
		var handles []string
		for _, m := range out.Messages {
			handles = append(handles, aws.ToString(m.ReceiptHandle))
		}
		if err := testRedriver(client).release(context.Background(), source, handles); err != nil {
			t.Fatal(err)
		}
	}
}

type queueCounts struct{ visible, hidden int }

func (c queueCounts) total() int { return c.visible + c.hidden }

func counts(t *testing.T, url string) queueCounts {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	h, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return queueCounts{visible: v, hidden: h}
}

// drain receives and deletes every visible message of url, in the order
// received.
func drain(t *testing.T, url string) []types.Message {
	t.Helper()
	var all []types.Message
	for {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 30,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return all
		}
		for _, m := range out.Messages {
			all = append(all, m)
			if _, err := client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// testRedriver is a Redriver with short polls so a drained queue is noticed at once.
func testRedriver(c Client) *Redriver {
	r := New(c)
	r.WaitTime = 0
	return r
}

func numbered(n int, prefix string) []msg {
	msgs := make([]msg, n)
	for i := range msgs {
		msgs[i] = msg{body: fmt.Sprintf(`{"id":"%s-%d"}`, prefix, i), attrs: attrsFor(i)}
	}
	return msgs
}

func bodies(msgs []types.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = aws.ToString(m.Body)
	}
	sort.Strings(out)
	return out
}

func wantBodies(msgs []msg) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.body
	}
	sort.Strings(out)
	return out
}

func sameAttrs(got, want map[string]types.MessageAttributeValue) bool {
	if len(got) != len(want) {
		return false
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || aws.ToString(g.DataType) != aws.ToString(w.DataType) ||
			aws.ToString(g.StringValue) != aws.ToString(w.StringValue) || !bytes.Equal(g.BinaryValue, w.BinaryValue) {
			return false
		}
	}
	return true
}

func TestMoveReturnsEveryMessageWithBodyAndAttributes(t *testing.T) {
	t.Parallel()
	source, dlq := sourceWithDLQ(t, false)
	sent := numbered(25, "move")
	failIntoDLQ(t, source, dlq, sent)

	var progress bytes.Buffer
	r := testRedriver(client)
	r.Progress = &progress
	res, err := r.Move(context.Background(), dlq, source, 0)
	if err != nil {
		t.Fatalf("Move: %v", err)
	}
	if res.Moved != 25 || len(res.Failed) != 0 || len(res.NotDeleted) != 0 {
		t.Errorf("Move = %+v, want 25 moved, none failed", res)
	}
	if got := res.String(); got != "moved 25, failed 0" {
		t.Errorf("summary = %q", got)
	}
	if !strings.Contains(progress.String(), "moved 10/≈25\n") || !strings.HasSuffix(progress.String(), "moved 25/≈25\n") {
		t.Errorf("progress = %q, want lines like moved 10/≈25 ending at moved 25/≈25", progress.String())
	}
	if c := counts(t, dlq); c.total() != 0 {
		t.Errorf("DLQ still holds %+v messages", c)
	}
	got := drain(t, source)
	if g, w := bodies(got), wantBodies(sent); strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("source bodies = %v, want %v", g, w)
	}
	want := map[string]msg{}
	for _, m := range sent {
		want[m.body] = m
	}
	for _, m := range got {
		if w := want[aws.ToString(m.Body)]; !sameAttrs(m.MessageAttributes, w.attrs) {
			t.Errorf("message %s attributes = %v, want %v", aws.ToString(m.Body), m.MessageAttributes, w.attrs)
		}
	}
}

func TestMoveStopsAfterMax(t *testing.T) {
	t.Parallel()
	source, dlq := sourceWithDLQ(t, false)
	sendAll(t, dlq, numbered(23, "max"))
	res, err := testRedriver(client).Move(context.Background(), dlq, source, 13)
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 13 {
		t.Errorf("moved %d, want 13", res.Moved)
	}
	if s, d := counts(t, source).total(), counts(t, dlq).visible; s != 13 || d != 10 {
		t.Errorf("source has %d, DLQ has %d visible; want 13 and 10", s, d)
	}
}

func TestMoveSplitsBatchesOverTheSizeLimit(t *testing.T) {
	t.Parallel()
	source, dlq := sourceWithDLQ(t, false)
	big := make([]msg, 10) // 10 × 60 KiB: one receive, too big for one SendMessageBatch
	for i := range big {
		big[i] = msg{body: fmt.Sprintf("%02d", i) + strings.Repeat("x", 60*1024)}
	}
	sendAll(t, dlq, big)
	res, err := testRedriver(client).Move(context.Background(), dlq, source, 0)
	if err != nil || res.Moved != 10 {
		t.Fatalf("Move = %+v, %v; want 10 moved", res, err)
	}
	if g, w := bodies(drain(t, source)), wantBodies(big); strings.Join(g, "") != strings.Join(w, "") {
		t.Errorf("bodies changed on the way (got %d messages)", len(g))
	}
}

func TestMoveFIFOKeepsGroupOrder(t *testing.T) {
	t.Parallel()
	source, dlq := sourceWithDLQ(t, true)
	var sent []msg
	for i := range 8 {
		for _, g := range []string{"a", "b", "c"} {
			sent = append(sent, msg{body: fmt.Sprintf("%s-%d", g, i), group: g, attrs: attrsFor(i)})
		}
	}
	failIntoDLQ(t, source, dlq, sent)

	res, err := testRedriver(client).Move(context.Background(), dlq, source, 0)
	if err != nil || res.Moved != len(sent) {
		t.Fatalf("Move = %+v, %v; want %d moved", res, err, len(sent))
	}
	next := map[string]int{}
	got := drain(t, source)
	for _, m := range got {
		g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		want := fmt.Sprintf("%s-%d", g, next[g])
		if aws.ToString(m.Body) != want {
			t.Errorf("group %q: got %s, want %s next", g, aws.ToString(m.Body), want)
		}
		next[g]++
	}
	if len(got) != len(sent) {
		t.Errorf("source received %d messages, want %d", len(got), len(sent))
	}
}

func TestMoveInterruptedBetweenBatchesLosesNothing(t *testing.T) {
	t.Parallel()
	source, dlq := sourceWithDLQ(t, false)
	sent := numbered(35, "cancel")
	failIntoDLQ(t, source, dlq, sent)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := testRedriver(client)
	r.AfterBatch = func(Result) { cancel() } // Ctrl-C right after the first batch
	res, err := r.Move(ctx, dlq, source, 0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Move err = %v, want context.Canceled", err)
	}
	if res.Moved != 10 {
		t.Errorf("moved %d before stopping, want one batch of 10", res.Moved)
	}
	if s, d := counts(t, source).total(), counts(t, dlq).total(); s+d != len(sent) || s != 10 {
		t.Errorf("source %d + DLQ %d, want 10 + 25", s, d)
	}

	// The next run moves the rest.
	res, err = testRedriver(client).Move(context.Background(), dlq, source, 0)
	if err != nil || res.Moved != 25 {
		t.Fatalf("second Move = %+v, %v; want 25 moved", res, err)
	}
	if g, w := bodies(drain(t, source)), wantBodies(sent); strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Errorf("after two runs source holds %v, want %v", g, w)
	}
}

// failDeletes is a real client whose DeleteMessageBatch fails, as if the tool
// died between sending a batch and deleting it.
type failDeletes struct{ Client }

func (failDeletes) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return nil, errors.New("connection reset")
}

func TestMoveCrashAfterSendSendsAgainButLosesNothing(t *testing.T) {
	t.Parallel()
	source, dlq := sourceWithDLQ(t, false)
	sent := numbered(15, "crash")
	sendAll(t, dlq, sent)

	r := testRedriver(failDeletes{client})
	r.VisibilityTimeout = time.Second
	res, err := r.Move(context.Background(), dlq, source, 0)
	if err == nil || !strings.Contains(err.Error(), "will be sent again") {
		t.Fatalf("Move err = %v, want the failed delete reported", err)
	}
	if res.Moved != 0 || len(res.NotDeleted) != 10 {
		t.Errorf("Move = %+v, want 0 moved and the 10 sent ids in NotDeleted", res)
	}
	if d := counts(t, dlq).total(); d != len(sent) {
		t.Errorf("DLQ holds %d, want all %d still there", d, len(sent))
	}

	time.Sleep(1100 * time.Millisecond) // the crashed batch becomes visible again
	res, err = testRedriver(client).Move(context.Background(), dlq, source, 0)
	if err != nil || res.Moved != 15 {
		t.Fatalf("second Move = %+v, %v; want 15 moved", res, err)
	}
	got := bodies(drain(t, source))
	seen := map[string]int{}
	for _, b := range got {
		seen[b]++
	}
	for _, m := range sent {
		if seen[m.body] == 0 {
			t.Errorf("%s lost", m.body)
		}
	}
	if len(got) != 25 { // the first batch twice: at-least-once, as documented
		t.Errorf("source holds %d messages, want 15 + 10 duplicates", len(got))
	}
}

// refuseBodies is a real client that makes moto refuse chosen entries of a
// SendMessageBatch (an out-of-range DelaySeconds is the per-entry failure
// moto reports), so a partial failure comes from the endpoint itself.
type refuseBodies struct {
	Client
	refuse map[string]bool
}

func (c refuseBodies) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	for i, e := range in.Entries {
		if c.refuse[aws.ToString(e.MessageBody)] {
			in.Entries[i].DelaySeconds = 901
		}
	}
	return c.Client.SendMessageBatch(ctx, in, opts...)
}

func TestMovePartialFailureLeavesRefusedMessagesInTheDLQ(t *testing.T) {
	t.Parallel()
	source, dlq := sourceWithDLQ(t, false)
	sent := numbered(12, "partial")
	failIntoDLQ(t, source, dlq, sent)
	refuse := map[string]bool{sent[3].body: true, sent[8].body: true}

	res, err := testRedriver(refuseBodies{client, refuse}).Move(context.Background(), dlq, source, 0)
	if err != nil {
		t.Fatalf("Move: %v", err)
	}
	if res.Moved != 10 || len(res.Failed) != 2 {
		t.Fatalf("Move = %+v, want 10 moved and 2 failed", res)
	}
	if got := res.String(); got != "moved 10, failed 2" {
		t.Errorf("summary = %q", got)
	}
	for _, f := range res.Failed {
		if f.MessageID == "" || f.Code == "" {
			t.Errorf("failure %+v does not name the message and the reason", f)
		}
	}
	// The refused messages are back in the DLQ and visible at once.
	left := drain(t, dlq)
	if g := bodies(left); len(g) != 2 || !refuse[g[0]] || !refuse[g[1]] {
		t.Errorf("DLQ holds %v, want the 2 refused messages", g)
	}
	ids := map[string]bool{}
	for _, m := range left {
		ids[aws.ToString(m.MessageId)] = true
	}
	for _, f := range res.Failed {
		if !ids[f.MessageID] {
			t.Errorf("reported failure %s is not one of the messages left in the DLQ", f.MessageID)
		}
	}
	if s := counts(t, source).total(); s != 10 {
		t.Errorf("source holds %d, want 10", s)
	}
}

func TestDryRunPrintsAndLeavesTheDLQ(t *testing.T) {
	t.Parallel()
	source, dlq := sourceWithDLQ(t, false)
	sent := numbered(12, "dry")
	sent[0].body = `{"id":"dry-long","pad":"` + strings.Repeat("é", 300) + `"}`
	failIntoDLQ(t, source, dlq, sent)

	var out bytes.Buffer
	n, err := testRedriver(client).DryRun(context.Background(), dlq, 0, &out)
	if err != nil || n != 12 {
		t.Fatalf("DryRun = %d, %v; want 12", n, err)
	}
	text := out.String()
	for _, want := range []string{
		"dlqReceives=2", // ApproximateReceiveCount: the failed receive, then the dry run's own
		"sent=" + time.Now().UTC().Format("2006-01-02"), // SentTimestamp as a date
		`attribute orderId (String) = "order-5"`,
		"attribute checksum (Binary) = <3 bytes>",
		`body (15 bytes): {"id":"dry-11"}`,
		"more bytes)", // the long body is cut
		"12 message(s) listed (≈12 in the DLQ); nothing was moved",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("dry-run output lacks %q:\n%s", want, text)
		}
	}
	if c := strings.Count("\n"+text, "\nmessage "); c != 12 {
		t.Errorf("printed %d messages, want 12", c)
	}
	// Visible again at once: nothing moved, nothing hidden.
	if c := counts(t, dlq); c.visible != 12 || c.hidden != 0 {
		t.Errorf("DLQ after dry run = %+v, want 12 visible", c)
	}
	if s := counts(t, source).total(); s != 0 {
		t.Errorf("source holds %d after a dry run", s)
	}

	out.Reset()
	if n, err := testRedriver(client).DryRun(context.Background(), dlq, 5, &out); err != nil || n != 5 {
		t.Errorf("DryRun with max 5 = %d, %v", n, err)
	}
	if c := counts(t, dlq); c.visible != 12 {
		t.Errorf("DLQ after dry run with max = %+v, want 12 visible", c)
	}
}

// TestDryRunIsBounded: with no -max a dry run lists DryRunDefault
// messages and says how many more the DLQ holds; past MaxDryRun it is
// refused, having received nothing.
func TestDryRunIsBounded(t *testing.T) {
	t.Parallel()
	dlq := newQueue(t, false, nil)
	sendAll(t, dlq, numbered(DryRunDefault+15, "many"))
	var out bytes.Buffer
	n, err := testRedriver(client).DryRun(context.Background(), dlq, 0, &out)
	if err != nil || n != DryRunDefault {
		t.Fatalf("DryRun = %d, %v; want %d", n, err, DryRunDefault)
	}
	if want := fmt.Sprintf("… about 15 more not listed: -max lists up to %d", MaxDryRun); !strings.Contains(out.String(), want) {
		t.Errorf("dry-run output lacks %q:\n%s", want, out.String()[max(0, out.Len()-300):])
	}
	if c := counts(t, dlq); c.visible != DryRunDefault+15 {
		t.Errorf("DLQ after the dry run = %+v, want every message visible", c)
	}
	if _, err := testRedriver(client).DryRun(context.Background(), dlq, MaxDryRun+1, &out); err == nil {
		t.Errorf("DryRun of %d: no error, want the bound refused", MaxDryRun+1)
	}
}

func TestSourceQueue(t *testing.T) {
	t.Parallel()
	oneSource, oneDLQ := sourceWithDLQ(t, false)

	sharedDLQ := newQueue(t, false, nil)
	policy, _ := json.Marshal(map[string]any{"deadLetterTargetArn": queueArn(t, sharedDLQ), "maxReceiveCount": 3})
	a := newQueue(t, false, map[string]string{"RedrivePolicy": string(policy)})
	b := newQueue(t, false, map[string]string{"RedrivePolicy": string(policy)})

	orphan := newQueue(t, false, nil)

	tests := []struct {
		name       string
		dlq        string
		want       string
		candidates []string
		wantErr    error
		wantMsg    string
	}{
		{name: "one source", dlq: oneDLQ, want: oneSource},
		{name: "two sources", dlq: sharedDLQ, candidates: []string{a, b}},
		{name: "no source", dlq: orphan, wantErr: ErrNoSourceQueue},
		// A source queue given as -dlq (the queue a user wants to redrive
		// "into"): the answer names its DLQ, not -to, which cannot help.
		{name: "a source given as the DLQ", dlq: oneSource, wantErr: ErrRefused,
			wantMsg: "give its DLQ, " + oneDLQ[strings.LastIndex(oneDLQ, "/")+1:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := testRedriver(client).SourceQueue(context.Background(), tt.dlq)
			var amb *AmbiguousSourceError
			switch {
			case tt.candidates != nil:
				if !errors.As(err, &amb) {
					t.Fatalf("SourceQueue = %q, %v; want an AmbiguousSourceError", got, err)
				}
				sort.Strings(amb.Candidates)
				sort.Strings(tt.candidates)
				if strings.Join(amb.Candidates, " ") != strings.Join(tt.candidates, " ") {
					t.Errorf("candidates = %v, want %v", amb.Candidates, tt.candidates)
				}
				for _, c := range tt.candidates {
					if !strings.Contains(err.Error(), c) {
						t.Errorf("error %q does not name %s", err, c)
					}
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("SourceQueue = %q, %v; want %v", got, err, tt.wantErr)
				}
				if err != nil && !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("SourceQueue error %q does not say %q", err, tt.wantMsg)
				}
			default:
				if err != nil || got != tt.want {
					t.Errorf("SourceQueue = %q, %v; want %q", got, err, tt.want)
				}
			}
		})
	}
}

func TestQueueURL(t *testing.T) {
	t.Parallel()
	url := newQueue(t, false, nil)
	name := url[strings.LastIndex(url, "/")+1:]
	r := testRedriver(client)
	if got, err := r.QueueURL(context.Background(), name); err != nil || got != url {
		t.Errorf("QueueURL(%q) = %q, %v; want %q", name, got, err, url)
	}
	if got, err := r.QueueURL(context.Background(), url); err != nil || got != url {
		t.Errorf("QueueURL(url) = %q, %v", got, err)
	}
	if _, err := r.QueueURL(context.Background(), "no-such-queue"); err == nil || !strings.Contains(err.Error(), `"no-such-queue" does not exist`) {
		t.Errorf("QueueURL(missing) err = %v, want it to name the queue", err)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456789… (3 more bytes)"},
		{"ééééé", 3, "é… (8 more bytes)"}, // never cuts inside a rune
		{"anything", 0, "anything"},
	}
	for _, tt := range tests {
		if got := truncate(tt.in, tt.limit); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
		}
	}
}

func TestChunkBySize(t *testing.T) {
	t.Parallel()
	entry := func(n int) types.SendMessageBatchRequestEntry {
		return types.SendMessageBatchRequestEntry{MessageBody: aws.String(strings.Repeat("x", n))}
	}
	tests := []struct {
		name  string
		sizes []int
		want  []int // entries per chunk
	}{
		{"small ones share a call", []int{10, 10, 10}, []int{3}},
		{"split at the limit", []int{100 * 1024, 100 * 1024, 100 * 1024}, []int{2, 1}},
		{"exactly the limit fits", []int{128 * 1024, 128 * 1024}, []int{2}},
		{"an oversized one goes alone", []int{10, 300 * 1024, 10}, []int{1, 1, 1}},
		{"nothing", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var entries []types.SendMessageBatchRequestEntry
			for _, s := range tt.sizes {
				entries = append(entries, entry(s))
			}
			var got []int
			for _, c := range chunkBySize(entries) {
				got = append(got, len(c))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("chunks = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDeadLetterReasonShownThenDroppedOnMove: a message a consumer
// dead-lettered with its reason shows the reason in a dry run; moved back,
// it carries the producer's attributes but none of the dead-letter ones.
func TestDeadLetterReasonShownThenDroppedOnMove(t *testing.T) {
	t.Parallel()
	source, dlq := sourceWithDLQ(t, false)
	attrs := attrsFor(1)
	attrs[AttrReason] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("message m-1: task t-1: field data.after: task t-0 has no result")}
	attrs[AttrSourceQueue] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(queueArn(t, source))}
	attrs[AttrReceiveCount] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String("1")}
	sendAll(t, dlq, []msg{{body: `{"id":"dl-1"}`, attrs: attrs}, {body: `{"id":"dl-2"}`, attrs: attrsFor(2)}})

	var out bytes.Buffer
	if n, err := testRedriver(client).DryRun(context.Background(), dlq, 0, &out); err != nil || n != 2 {
		t.Fatalf("DryRun = %d, %v; want 2", n, err)
	}
	for _, want := range []string{
		"reason: message m-1: task t-1: field data.after: task t-0 has no result",
		"reason: not recorded (SQS moved it after maxReceiveCount receives",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run lacks %q:\n%s", want, out.String())
		}
	}
	if res, err := testRedriver(client).Move(context.Background(), dlq, source, 0); err != nil || res.Moved != 2 {
		t.Fatalf("Move = %v, %v; want 2 moved", res, err)
	}
	for _, m := range drain(t, source) {
		want := attrsFor(2)
		if aws.ToString(m.Body) == `{"id":"dl-1"}` {
			want = attrsFor(1)
		}
		if !sameAttrs(m.MessageAttributes, want) {
			t.Errorf("message %s came back with attributes %v, want the producer's only: %v", aws.ToString(m.Body), m.MessageAttributes, want)
		}
	}
}

// TestMoveRefusesTheWrongDirection: a redrive whose -to does not name the
// DLQ in its redrive policy — the two swapped, an unrelated queue, another
// queue's DLQ, the DLQ itself — is refused before anything is received:
// both queues keep their messages, none received. A dry run of a source
// queue (not a DLQ, with a redrive policy) is refused too, since its
// receives would count towards maxReceiveCount.
func TestMoveRefusesTheWrongDirection(t *testing.T) {
	t.Parallel()
	source, dlq := sourceWithDLQ(t, false)
	otherSource, _ := sourceWithDLQ(t, false)
	plain := newQueue(t, false, nil)
	sendAll(t, dlq, numbered(3, "dead"))
	sendAll(t, source, numbered(2, "live"))
	for _, c := range []struct {
		name, dlq, to string
		reversed      bool
		say           string
	}{
		{"swapped", source, dlq, true, "the wrong way round"},
		{"to a queue without a redrive policy", dlq, plain, false, "has no redrive policy"},
		{"to a queue with another DLQ", dlq, otherSource, false, "as its dead-letter queue, not"},
		{"to itself", dlq, dlq, false, "the same queue"},
	} {
		res, err := testRedriver(client).Move(context.Background(), c.dlq, c.to, 0)
		var de *DirectionError
		if !errors.As(err, &de) || !errors.Is(err, ErrRefused) || de.Reversed != c.reversed || !strings.Contains(err.Error(), c.say) {
			t.Errorf("%s: %+v %v; want a DirectionError (reversed %v) saying %q", c.name, res, err, c.reversed, c.say)
		}
		if res.Moved != 0 {
			t.Errorf("%s: moved %d", c.name, res.Moved)
		}
	}
	var out bytes.Buffer
	if _, err := testRedriver(client).DryRun(context.Background(), source, 0, &out); !errors.Is(err, ErrRefused) || out.Len() != 0 {
		t.Errorf("dry run of the source queue: %v %q; want a refusal and nothing listed", err, out.String())
	}
	if c := counts(t, dlq); c.visible != 3 || c.hidden != 0 {
		t.Errorf("DLQ %+v after refused moves, want 3 visible", c)
	}
	if c := counts(t, source); c.visible != 2 || c.hidden != 0 {
		t.Errorf("source %+v after refused moves, want 2 visible", c)
	}
	for _, m := range drain(t, source) {
		if n := m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]; n != "1" {
			t.Errorf("source message %s received %s times: a refused command received it", aws.ToString(m.MessageId), n)
		}
	}
	if c := counts(t, plain); c.total() != 0 {
		t.Errorf("the unrelated queue received %d messages", c.total())
	}
}

// TestMoveRefusesWhatTheSourceCannotTake: a message in the DLQ larger than
// the source queue's MaximumMessageSize (the stack's DLQs take 1 MiB, their
// sources 256 KiB) is refused by id, named with its size and the source's,
// and stays in the DLQ; the others move.
func TestMoveRefusesWhatTheSourceCannotTake(t *testing.T) {
	t.Parallel()
	dlq := newQueue(t, false, map[string]string{"MaximumMessageSize": "8192"})
	policy, _ := json.Marshal(map[string]any{"deadLetterTargetArn": queueArn(t, dlq), "maxReceiveCount": 1})
	source := newQueue(t, false, map[string]string{"RedrivePolicy": string(policy), "MaximumMessageSize": "1024"})
	sendAll(t, dlq, []msg{{body: "small-1"}, {body: strings.Repeat("b", 2000)}, {body: "small-2"}})
	res, err := testRedriver(client).Move(context.Background(), dlq, source, 0)
	if err != nil {
		t.Fatalf("Move: %v", err)
	}
	if res.Moved != 2 || len(res.Failed) != 1 || res.Failed[0].Code != "MessageTooLarge" || !strings.Contains(res.Failed[0].Reason, "MaximumMessageSize of 1024") {
		t.Fatalf("Move = %+v; want 2 moved and the 2,000-byte message refused naming the source's limit", res)
	}
	if g := bodies(drain(t, dlq)); len(g) != 1 || len(g[0]) != 2000 {
		t.Errorf("DLQ holds %d messages; want the large one left there", len(g))
	}
}

// TestMoveEndsWhenOnlyRefusedMessagesComeBack: a refused message stays in
// the DLQ, hidden only for VisibilityTimeout; when it comes back into view
// before the DLQ looks drained (a long poll longer than the visibility,
// or thousands of refused messages taking longer than it to go through),
// receiving it again must not count as progress, or Move never ends.
func TestMoveEndsWhenOnlyRefusedMessagesComeBack(t *testing.T) {
	t.Parallel()
	dlq := newQueue(t, false, map[string]string{"MaximumMessageSize": "8192"})
	policy, _ := json.Marshal(map[string]any{"deadLetterTargetArn": queueArn(t, dlq), "maxReceiveCount": 1})
	source := newQueue(t, false, map[string]string{"RedrivePolicy": string(policy), "MaximumMessageSize": "1024"})
	sendAll(t, dlq, []msg{{body: "small-1"}, {body: strings.Repeat("b", 2000)}})
	r := testRedriver(client)
	r.VisibilityTimeout = time.Second
	r.WaitTime = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := r.Move(ctx, dlq, source, 0)
	if err != nil {
		t.Fatalf("Move: %v (moved %d, failed %d): it did not end while the refused message kept coming back", err, res.Moved, len(res.Failed))
	}
	if res.Moved != 1 || len(res.Failed) != 1 || res.Failed[0].Code != "MessageTooLarge" {
		t.Fatalf("Move = %+v; want the small message moved and the large one refused once", res)
	}
	if g := bodies(drain(t, dlq)); len(g) != 1 || len(g[0]) != 2000 {
		t.Errorf("DLQ holds %d messages; want the large one left there", len(g))
	}
}

// recordSends is the real client, keeping each SendMessageBatch entry it
// sends: moto stores a trace header sent with SendMessage but drops one
// sent in a batch, so what Move sends is read on the way out.
type recordSends struct {
	Client
	sent *[]types.SendMessageBatchRequestEntry
}

func (c recordSends) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	*c.sent = append(*c.sent, in.Entries...)
	return c.Client.SendMessageBatch(ctx, in, opts...)
}

// TestMoveKeepsTheTraceHeader: a message's X-Ray trace header (the one
// system attribute a sender may set) goes back with it, so its trace
// continues where it failed.
func TestMoveKeepsTheTraceHeader(t *testing.T) {
	t.Parallel()
	source, dlq := sourceWithDLQ(t, false)
	const trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String("traced"),
		MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{
			"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(trace)}}}); err != nil {
		t.Fatal(err)
	}
	sendAll(t, dlq, []msg{{body: "untraced"}})
	var sent []types.SendMessageBatchRequestEntry
	res, err := testRedriver(recordSends{client, &sent}).Move(context.Background(), dlq, source, 0)
	if err != nil || res.Moved != 2 {
		t.Fatalf("Move = %+v, %v; want 2 moved", res, err)
	}
	for _, e := range sent {
		got, ok := e.MessageSystemAttributes["AWSTraceHeader"]
		switch aws.ToString(e.MessageBody) {
		case "traced":
			if !ok || aws.ToString(got.StringValue) != trace || aws.ToString(got.DataType) != "String" {
				t.Errorf("the traced message went back with system attributes %+v; want its AWSTraceHeader %s", e.MessageSystemAttributes, trace)
			}
		case "untraced":
			if len(e.MessageSystemAttributes) != 0 {
				t.Errorf("the untraced message went back with system attributes %+v; want none", e.MessageSystemAttributes)
			}
		}
	}
}

// TestMoveKeepsAFIFOGroupBehindARefusedMessage: on a FIFO DLQ, a message
// the source refuses (too large for it) holds back the rest of its group,
// named HeldBehindRefused, so the source never gets the group out of order;
// other groups move. A run with a limit says about how many messages it
// left in the DLQ without receiving them.
func TestMoveKeepsAFIFOGroupBehindARefusedMessage(t *testing.T) {
	t.Parallel()
	dlq := newQueue(t, true, map[string]string{"MaximumMessageSize": "8192"})
	policy, _ := json.Marshal(map[string]any{"deadLetterTargetArn": queueArn(t, dlq), "maxReceiveCount": 1})
	source := newQueue(t, true, map[string]string{"RedrivePolicy": string(policy), "MaximumMessageSize": "1024"})
	sendAll(t, dlq, []msg{{body: strings.Repeat("b", 2000), group: "g"}, {body: "g-2", group: "g"}, {body: "g-3", group: "g"}, {body: "h-1", group: "h"}})
	res, err := testRedriver(client).Move(context.Background(), dlq, source, 0)
	if err != nil {
		t.Fatalf("Move: %v", err)
	}
	codes := map[string]int{}
	for _, f := range res.Failed {
		codes[f.Code]++
	}
	if res.Moved != 1 || codes["MessageTooLarge"] != 1 || codes["HeldBehindRefused"] != 2 || res.Left != 3 {
		t.Fatalf("Move = moved %d, failed %v, left %d; want h-1 moved, the large one refused, g-2 and g-3 held behind it, 3 left", res.Moved, codes, res.Left)
	}
	if got := bodies(drain(t, source)); len(got) != 1 || got[0] != "h-1" {
		t.Errorf("source got %v; want h-1 alone (g's order kept)", got)
	}

	dlq2 := newQueue(t, false, nil)
	policy2, _ := json.Marshal(map[string]any{"deadLetterTargetArn": queueArn(t, dlq2), "maxReceiveCount": 1})
	source2 := newQueue(t, false, map[string]string{"RedrivePolicy": string(policy2)})
	sendAll(t, dlq2, []msg{{body: "a"}, {body: "b"}, {body: "c"}, {body: "d"}})
	res, err = testRedriver(client).Move(context.Background(), dlq2, source2, 1)
	if err != nil || res.Moved != 1 || res.Left != 3 {
		t.Fatalf("Move with limit 1 = %+v, %v; want 1 moved and 3 left", res, err)
	}
	if s := res.String(); !strings.Contains(s, "the DLQ still reports about 3 more") {
		t.Errorf("summary %q; want it to say about 3 more are still in the DLQ", s)
	}
}

// failingConsumer consumes source until ctx ends, as a deployed consumer
// whose fix has not shipped would: a body starting "ok" is processed
// (deleted), any other fails again. deadLetter says how it reaches the DLQ
// again: sent there by the consumer itself with a reason (package worker's
// way), or given back until SQS moves it after maxReceiveCount.
func failingConsumer(ctx context.Context, t *testing.T, source, dlq string, deadLetter bool) {
	for ctx.Err() == nil {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(source), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			continue
		}
		for _, m := range out.Messages {
			ok := strings.HasPrefix(aws.ToString(m.Body), "ok")
			if !ok && !deadLetter {
				_ = testRedriver(client).release(ctx, source, []string{aws.ToString(m.ReceiptHandle)})
				continue
			}
			if !ok {
				attrs := map[string]types.MessageAttributeValue{}
				for k, v := range m.MessageAttributes {
					attrs[k] = v
				}
				attrs[AttrReason] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("field data.rounds: 0, want 1 to 5000000")}
				if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: m.Body, MessageAttributes: attrs}); err != nil {
					continue
				}
			}
			_, _ = client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(source), ReceiptHandle: m.ReceiptHandle})
		}
	}
}

// TestMoveLeavesAMessageThatFailsAgain: a message whose cause is not yet
// fixed comes back to the DLQ while the run goes on. Moving it again would
// never end (the consumer sends it straight back, a new message each time)
// and run the failing work over and over; it is moved once, then left in
// the DLQ, named, and the run ends.
func TestMoveLeavesAMessageThatFailsAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		deadLetter bool
	}{
		{"dead-lettered by the consumer", true},
		{"moved by SQS after maxReceiveCount", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			source, dlq := sourceWithDLQ(t, false)
			poison := msg{body: `{"id":"still-poison"}`, attrs: attrsFor(1)}
			sendAll(t, dlq, []msg{poison, {body: "ok-1"}, {body: "ok-2"}})
			consumerCtx, stopConsumer := context.WithCancel(context.Background())
			consumerDone := make(chan struct{})
			go func() { defer close(consumerDone); failingConsumer(consumerCtx, t, source, dlq, tc.deadLetter) }()

			r := testRedriver(client)
			r.WaitTime = 2 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := r.Move(ctx, dlq, source, 0)
			stopConsumer()
			<-consumerDone
			if err != nil {
				t.Fatalf("Move: %v after moving %d: it kept moving the message that fails again", err, res.Moved)
			}
			if res.Moved != 3 {
				t.Errorf("moved %d, want 3: each message once", res.Moved)
			}
			if len(res.Failed) != 1 || res.Failed[0].Code != "FailedAgain" || !strings.Contains(res.Failed[0].Reason, "fix") {
				t.Errorf("Failed = %+v, want the poison message named once as FailedAgain", res.Failed)
			}
			if s := res.String(); !strings.Contains(s, "1 of the failed were moved and came back failing again") {
				t.Errorf("summary %q does not say the failed message was moved too", s)
			}
			left := drain(t, dlq)
			if g := bodies(left); len(g) != 1 || g[0] != poison.body {
				t.Errorf("DLQ holds %v, want the poison message left there once", g)
			}
			if len(left) == 1 && res.Failed[0].MessageID != aws.ToString(left[0].MessageId) {
				t.Errorf("failure names %s, but the DLQ holds %s", res.Failed[0].MessageID, aws.ToString(left[0].MessageId))
			}
		})
	}
}
