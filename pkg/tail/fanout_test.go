package tail_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/tail"
)

// fanOut is the stand-in with SubscribeToShard, which moto lacks: a
// subscription of a registered, ACTIVE consumer reads the shard with
// GetRecords and hands each read on as a SubscribeToShardEvent (with its
// continuation and how far behind it is), as Kinesis pushes them.
type fanOut struct {
	*kinesis.Client
	stream      string
	subscribes  atomic.Int32
	getRecords  atomic.Int32
	subscribers sync.WaitGroup
}

func (f *fanOut) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	f.getRecords.Add(1)
	return f.Client.GetRecords(ctx, in, opts...)
}

func (f *fanOut) Subscribe(ctx context.Context, in *kinesis.SubscribeToShardInput) (tail.EventStream, error) {
	f.subscribes.Add(1)
	c, err := f.Client.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: in.ConsumerARN})
	if err != nil {
		return nil, err
	}
	if c.ConsumerDescription.ConsumerStatus != types.ConsumerStatusActive {
		return nil, &types.ResourceInUseException{Message: aws.String("consumer not active")}
	}
	itIn := &kinesis.GetShardIteratorInput{StreamName: aws.String(f.stream), ShardId: in.ShardId, ShardIteratorType: in.StartingPosition.Type,
		Timestamp: in.StartingPosition.Timestamp, StartingSequenceNumber: in.StartingPosition.SequenceNumber}
	it, err := f.Client.GetShardIterator(ctx, itIn)
	if err != nil {
		return nil, err
	}
	r := &events{ch: make(chan types.SubscribeToShardEventStream), done: make(chan struct{})}
	f.subscribers.Add(1)
	go func() {
		defer f.subscribers.Done()
		defer close(r.ch)
		iter := it.ShardIterator
		for {
			out, err := f.Client.GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				r.err.Store(err)
				return
			}
			ev := types.SubscribeToShardEvent{Records: out.Records, MillisBehindLatest: out.MillisBehindLatest, ContinuationSequenceNumber: in.StartingPosition.SequenceNumber}
			if n := len(out.Records); n > 0 {
				ev.ContinuationSequenceNumber = out.Records[n-1].SequenceNumber
			} else if ev.ContinuationSequenceNumber == nil {
				ev.ContinuationSequenceNumber = aws.String("0")
			}
			select {
			case r.ch <- &types.SubscribeToShardEventStreamMemberSubscribeToShardEvent{Value: ev}:
			case <-r.done:
				return
			}
			in.StartingPosition.SequenceNumber = ev.ContinuationSequenceNumber
			iter = out.NextShardIterator
			select {
			case <-time.After(50 * time.Millisecond):
			case <-r.done:
				return
			}
		}
	}()
	return r, nil
}

// events is a SubscribeToShardEventStreamReader.
type events struct {
	ch        chan types.SubscribeToShardEventStream
	done      chan struct{}
	closeOnce sync.Once
	err       atomic.Value
}

func (e *events) Events() <-chan types.SubscribeToShardEventStream { return e.ch }
func (e *events) Close() error                                     { e.closeOnce.Do(func() { close(e.done) }); return nil }
func (e *events) Err() error {
	if err, ok := e.err.Load().(error); ok {
		return err
	}
	return nil
}

// firstLine is a status writer that tells when its first line is written.
type firstLine struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func newFirstLine() *firstLine { return &firstLine{ready: make(chan struct{})} }

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if bytes.IndexByte(w.buf.Bytes(), '\n') >= 0 {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

func (w *firstLine) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestFollow: a following tail prints a record put after it started, its
// consumer (when it has one) is registered while it runs, and when its
// context ends (Ctrl-C) it returns without error and leaves no consumer.
func TestFollow(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fanOut    bool
		firstLine string
	}{
		{name: "enhanced fan-out", fanOut: true, firstLine: "through its own enhanced fan-out consumer tributary-tail-"},
		{name: "polling where SubscribeToShard is missing", fanOut: false, firstLine: "by polling, at most 1 GetRecords call per shard every 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kin := kinesis.NewFromConfig(awsCfg)
			stream := newStream(t, kin, 2)
			var api tail.KinesisAPI = kin
			f := &fanOut{Client: kin, stream: stream}
			if tc.fanOut {
				api = f
			}
			put(t, kin, stream, event{ID: "before", Type: "page_view", Key: "user-1"})
			time.Sleep(5 * time.Millisecond)
			start := time.Now()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			status := newFirstLine()
			got := make(chan string, 10)
			done := make(chan error, 1)
			var sum tail.Summary
			go func() {
				var err error
				sum, err = tail.Run(ctx, api, tail.Options{Stream: stream, From: tail.Position{Type: types.ShardIteratorTypeAtTimestamp, Time: start},
					Follow: true, Status: status}, func(r *tail.Record) error {
					var e event
					_ = json.Unmarshal(r.Data, &e)
					got <- e.ID
					return nil
				})
				done <- err
			}()
			<-status.ready
			if first, _, _ := strings.Cut(status.String(), "\n"); !strings.Contains(first, tc.firstLine) {
				t.Errorf("first line of stderr %q does not say %q", first, tc.firstLine)
			}
			registered := consumers(t, kin, stream)
			if tc.fanOut && (len(registered) != 1 || !strings.HasPrefix(registered[0], tail.ConsumerPrefix)) {
				t.Errorf("while following, consumers %v, want one of its own", registered)
			}
			if !tc.fanOut && len(registered) != 0 {
				t.Errorf("a polling tail left consumers registered: %v", registered)
			}
			put(t, kin, stream, event{ID: "after-start", Type: "page_view", Key: "user-2"})
			if id := <-got; id != "after-start" {
				t.Errorf("got %q, want the record put after the start", id)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("a follow ended by its context: %v", err)
			}
			if c := consumers(t, kin, stream); len(c) != 0 {
				t.Errorf("after the tail ended, consumers %v are still registered", c)
			}
			if tc.fanOut {
				f.subscribers.Wait()
				if f.getRecords.Load() != 0 || f.subscribes.Load() == 0 {
					t.Errorf("with enhanced fan-out the tail called GetRecords %d times and SubscribeToShard %d times; want 0 and some", f.getRecords.Load(), f.subscribes.Load())
				}
				if !strings.Contains(status.String(), "deregistered consumer "+sum.Consumer) {
					t.Errorf("stderr does not say the consumer was deregistered:\n%s", status)
				}
			}
		})
	}
}

// TestStaleConsumersRemoved: consumers an earlier tail left past their
// deadline go; a live session's and other applications' stay.
func TestStaleConsumersRemoved(t *testing.T) {
	kin := kinesis.NewFromConfig(awsCfg)
	stream := newStream(t, kin, 1)
	put(t, kin, stream, event{ID: "e1", Type: "page_view", Key: "user-1"})
	d, err := kin.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	dead := tail.ConsumerPrefix + strconv.FormatInt(now.Add(-time.Hour).Unix(), 10) + "-crashed"
	live := tail.ConsumerPrefix + strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + "-running"
	for _, n := range []string{dead, live, "aggregate-consumer"} {
		if _, err := kin.RegisterStreamConsumer(context.Background(), &kinesis.RegisterStreamConsumerInput{StreamARN: d.StreamDescriptionSummary.StreamARN, ConsumerName: aws.String(n)}); err != nil {
			t.Fatal(err)
		}
	}
	var status bytes.Buffer
	got, sum := ids(t, &fanOut{Client: kin, stream: stream}, tail.Options{Stream: stream, From: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, Limit: 10, Status: &status})
	if fmt.Sprint(got) != "[e1]" {
		t.Errorf("got %v, want [e1]", got)
	}
	left := sorted(consumers(t, kin, stream))
	if want := sorted([]string{live, "aggregate-consumer"}); fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("consumers after the run %v, want %v", left, want)
	}
	if len(sum.Removed) != 1 || !strings.Contains(sum.Removed[0], dead) || !strings.Contains(status.String(), "removed consumer "+dead) {
		t.Errorf("removed %v, stderr %q: want %s named", sum.Removed, status.String(), dead)
	}
}

// TestJSONLines: -json writes one object a line that a JSON reader (jq)
// takes line by line, JSON data as a value, other data in base64.
func TestJSONLines(t *testing.T) {
	kin := kinesis.NewFromConfig(awsCfg)
	stream := newStream(t, kin, 1)
	at := put(t, kin, stream, event{ID: "e1", Type: "page_view", Key: "user 1", Data: map[string]any{"page": "/\n", "ms": 1}})
	if _, err := kin.PutRecord(context.Background(), &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte{0xff, 0x00, '\n'}}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p := &tail.Printer{W: &out, Format: tail.JSONLines, MaxBytes: tail.DefaultMaxBytes}
	if _, err := tail.Run(context.Background(), kin, tail.Options{Stream: stream, From: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, Limit: 10, PollOnly: true}, p.Print); err != nil {
		t.Fatal(err)
	}
	type line struct {
		Shard, SequenceNumber, PartitionKey, Arrived, DataBase64 string
		Bytes                                                    int
		Data                                                     *event
	}
	var lines []line
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %d %q: %v", len(lines)+1, sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out.String())
	}
	if l := lines[0]; l.Data == nil || l.Data.ID != "e1" || l.Data.Data["page"] != "/\n" || l.PartitionKey != "user 1" || l.Shard != at["e1"][0] || l.SequenceNumber != at["e1"][1] || l.Arrived == "" {
		t.Errorf("first line %+v", l)
	}
	if l := lines[1]; l.Data != nil || l.DataBase64 != "/wAK" || l.Bytes != 3 {
		t.Errorf("second line %+v, want the bytes in dataBase64", l)
	}
}

// TestSessionDeadline: a following session with a consumer ends by itself
// at its deadline (the one its consumer's name carries, after which
// another run may remove it), says so, and deregisters the consumer.
func TestSessionDeadline(t *testing.T) {
	kin := kinesis.NewFromConfig(awsCfg)
	stream := newStream(t, kin, 1)
	f := &fanOut{Client: kin, stream: stream}
	var status bytes.Buffer
	sum, err := tail.Run(context.Background(), f, tail.Options{Stream: stream, From: tail.Latest, Follow: true, MaxSession: 2 * time.Second, Status: &status},
		func(*tail.Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !sum.SessionEnded || sum.Consumer == "" {
		t.Errorf("summary %+v: want a session through a consumer that reached its deadline", sum)
	}
	if c := consumers(t, kin, stream); len(c) != 0 {
		t.Errorf("consumers %v left after the session ended", c)
	}
	f.subscribers.Wait()
}
