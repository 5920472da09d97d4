package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// newStream starts a stand-in with a 2-shard stream and returns its client.
func newStream(t *testing.T, name string) *kinesis.Client {
	t.Helper()
	client := kinesis.NewFromConfig(standintest.Config(t, standintest.Start(t)))
	if _, err := client.CreateStream(context.Background(), &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	return client
}

// readStream returns every envelope on the stream, all shards.
func readStream(t *testing.T, client *kinesis.Client, name string) []stream.Envelope {
	t.Helper()
	ctx := context.Background()
	shards, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	var out []stream.Envelope
	for _, sh := range shards.Shards {
		it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			recs, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs.Records {
				var e stream.Envelope
				if err := stream.Unmarshal(rec.Data, &e); err != nil {
					t.Fatalf("record %s: %v", aws.ToString(rec.SequenceNumber), err)
				}
				out = append(out, e)
			}
			if len(recs.Records) == 0 {
				break
			}
			iter = recs.NextShardIterator
		}
	}
	return out
}

// TestRoutesLandOnTheStandIn posts a batch to each policy's route of a
// handler writing to the stand-in: every batch lands, each event once. One
// event comes from a phone whose clock is 5 hours behind: on the stream its
// EventTime is the true time it happened, give or take the network delay.
func TestRoutesLandOnTheStandIn(t *testing.T) {
	const name = "events"
	client := newStream(t, name)
	h := New(client, name, WithRoutes(testRoutes), WithLogger(slog.New(slog.DiscardHandler))) // the server's real clock

	var want []string
	for _, path := range []string{"/", "/metrics", "/orders"} {
		ids := []string{path + "#1", path + "#2", path + "#3"}
		resp, err := h.Handle(context.Background(), postTo(path, batchOf(ids...)))
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: status %d, %v: %s", path, resp.StatusCode, err, resp.Body)
		}
		want = append(want, ids...)
	}

	// The phone's clock reads 5h behind. The event happened 2s before it
	// was sent; the send takes some network delay to arrive.
	const skew = 5 * time.Hour
	happened := time.Now().Add(-2 * time.Second)
	device := func(t time.Time) string { return t.Add(-skew).UTC().Format(time.RFC3339Nano) }
	sent := time.Now()
	body := fmt.Sprintf(`{"id":"skewed","type":"tap","key":"phone-1","occurredAt":%q,"sentAt":%q}`, device(happened), device(sent))
	resp, err := h.Handle(context.Background(), postTo("/orders", body))
	arrived := time.Now()
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, %v: %s", resp.StatusCode, err, resp.Body)
	}
	want = append(want, "skewed")

	var got []string
	for _, e := range readStream(t, client, name) {
		got = append(got, e.ID)
		if e.ID != "skewed" {
			continue
		}
		if d := e.OccurredAt.Sub(happened) + skew; d < -time.Millisecond || d > time.Millisecond { // as sent: 5h off
			t.Errorf("occurredAt %s is not the device's reading %s", e.OccurredAt, device(happened))
		}
		if delay, off := arrived.Sub(sent), e.EventTime().Sub(happened); off < 0 || off > delay {
			t.Errorf("EventTime %s is %s off the true time %s; want within the network delay %s",
				e.EventTime().Format(time.RFC3339Nano), off, happened.UTC().Format(time.RFC3339Nano), delay)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("stream holds %v, want each of %v once", got, want)
	}
}

// throttlingPutter is the stand-in's Kinesis with throttling added: for its
// first throttleCalls calls it refuses the entries whose event id is in
// throttle (ProvisionedThroughputExceededException) and writes the rest to
// the real stream. A real endpoint cannot be made to throttle.
type throttlingPutter struct {
	real          *kinesis.Client
	throttle      map[string]bool
	throttleCalls int

	mu    sync.Mutex
	calls int
}

func (p *throttlingPutter) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	p.mu.Lock()
	p.calls++
	throttling := p.calls <= p.throttleCalls
	p.mu.Unlock()
	out := &kinesis.PutRecordsOutput{Records: make([]types.PutRecordsResultEntry, len(in.Records))}
	pass := &kinesis.PutRecordsInput{StreamName: in.StreamName}
	var passed []int
	for i, rec := range in.Records {
		var e stream.Envelope
		if err := stream.Unmarshal(rec.Data, &e); err != nil {
			return nil, err
		}
		if throttling && p.throttle[e.ID] {
			out.Records[i] = types.PutRecordsResultEntry{ErrorCode: aws.String(throughput), ErrorMessage: aws.String("Rate exceeded for shard")}
			out.FailedRecordCount = aws.Int32(aws.ToInt32(out.FailedRecordCount) + 1)
			continue
		}
		pass.Records = append(pass.Records, rec)
		passed = append(passed, i)
	}
	if len(passed) > 0 {
		res, err := p.real.PutRecords(ctx, pass, opts...)
		if err != nil {
			return nil, err
		}
		for j, i := range passed {
			out.Records[i] = res.Records[j]
		}
		out.FailedRecordCount = aws.Int32(aws.ToInt32(out.FailedRecordCount) + aws.ToInt32(res.FailedRecordCount))
	}
	return out, nil
}

// TestThrottledIngestLosesNothing: throttling outlasts the backpressure
// route's retry budget, so ingest answers 429 naming the events it did not
// accept; the producer waits Retry-After and resends only those. The stream
// ends with every event exactly once.
func TestThrottledIngestLosesNothing(t *testing.T) {
	const name = "events"
	client := newStream(t, name)
	var ids []string
	throttle := map[string]bool{}
	for i := range 20 {
		id := fmt.Sprintf("order-%02d", i)
		ids = append(ids, id)
		if i%3 == 0 {
			throttle[id] = true
		}
	}
	p := &throttlingPutter{real: client, throttle: throttle, throttleCalls: 4} // 4 = the default tries
	h := New(p, name, WithRoutes(testRoutes), WithRetry(4, time.Millisecond, 5*time.Millisecond),
		WithLogger(slog.New(slog.DiscardHandler)))

	// The producer: send, then resend what was not accepted after Retry-After.
	send := ids
	saw429 := false
	for round := 0; len(send) > 0; round++ {
		if round == 3 {
			t.Fatalf("still %d events not accepted after 3 rounds: %v", len(send), send)
		}
		resp, err := h.Handle(context.Background(), postTo("/orders", batchOf(send...)))
		if err != nil {
			t.Fatal(err)
		}
		var r Response
		if err := json.Unmarshal([]byte(resp.Body), &r); err != nil {
			t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
		}
		var again []string
		for _, f := range r.Failures {
			if !f.Dropped {
				again = append(again, send[f.Index])
			}
		}
		switch resp.StatusCode {
		case http.StatusAccepted:
		case http.StatusTooManyRequests:
			saw429 = true
			if strings.Join(again, ",") != "order-00,order-03,order-06,order-09,order-12,order-15,order-18" {
				t.Errorf("429 names %v as not accepted, want the throttled ones", again)
			}
			secs, err := strconv.Atoi(resp.Headers["Retry-After"])
			if err != nil || secs < 1 {
				t.Fatalf("Retry-After %q on a 429", resp.Headers["Retry-After"])
			}
			time.Sleep(time.Duration(secs) * time.Second)
		default:
			t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
		}
		send = again
	}
	if !saw429 {
		t.Fatal("the throttling never produced a 429: the test proves nothing")
	}

	count := map[string]int{}
	for _, e := range readStream(t, client, name) {
		count[e.ID]++
	}
	for _, id := range ids {
		if count[id] != 1 {
			t.Errorf("%s is on the stream %d times, want exactly once", id, count[id])
		}
	}
	if len(count) != len(ids) {
		t.Errorf("stream holds %d distinct ids, want %d", len(count), len(ids))
	}
}

// TestMarkupKeepsItsSizeOnTheStream: an event whose data is full of
// markup ('<', '>' and '&') goes on the stream as sent, not with each of
// those characters escaped to six bytes (\u003c): a 400 KB HTML snippet
// was refused as a record of over 1 MiB, and every such record cost the
// stream up to six times its size.
func TestMarkupKeepsItsSizeOnTheStream(t *testing.T) {
	const name = "events"
	client := newStream(t, name)
	h := New(client, name, WithClock(func() time.Time { return serverNow }))
	data := `{"html":"<p>` + strings.Repeat("<b>&amp;</b>", 400<<10/12) + `</p>"}`
	body := `{"id":"<e&1>","type":"snippet","key":"k<&>","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z","data":` + data + `}`
	resp, err := h.Handle(context.Background(), post(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d: %.300s", resp.StatusCode, resp.Body)
	}
	got := readStream(t, client, name)
	if len(got) != 1 {
		t.Fatalf("%d records on the stream, want 1", len(got))
	}
	if got[0].ID != "<e&1>" || got[0].Key != "k<&>" || string(got[0].Data) != data {
		t.Errorf("on the stream: id %q, key %q, data of %d bytes; want the event as sent (data of %d bytes)", got[0].ID, got[0].Key, len(got[0].Data), len(data))
	}
}
