package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/stream"
)

var serverNow = time.Date(2026, 11, 29, 10, 41, 9, 123456789, time.UTC)

func post(body string) events.LambdaFunctionURLRequest {
	r := events.LambdaFunctionURLRequest{Body: body}
	r.RequestContext.HTTP.Method = http.MethodPost
	return r
}

func envelopeJSON(id, key string) string {
	return fmt.Sprintf(`{"id":%q,"type":"page_view","key":%q,"occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z","data":{"path":"/pricing"}}`, id, key)
}

// TestHandleWritesToTheStream runs the handler against the stand-in: every
// event lands on the stream with its key as partition key and receivedAt
// stamped from the server clock, and the answer counts them.
func TestHandleWritesToTheStream(t *testing.T) {
	srv := standintest.Start(t)
	client := kinesis.NewFromConfig(standintest.Config(t, srv))
	ctx := context.Background()
	const name = "events"
	if _, err := client.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	h := New(client, name, WithClock(func() time.Time { return serverNow }))

	// White space inside an id or key, even at its ends, is the producer's
	// to choose (only a blank one is refused): they are taken as sent.
	body := "[" + envelopeJSON("e-1", "user-1") + "," + envelopeJSON(" order 42 ", "user 2") + "," + envelopeJSON("e-3", "user-1") + "]"
	resp, err := h.Handle(ctx, post(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
	}
	var got Response
	if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Events != 3 || got.Accepted != 3 || got.Failed != 0 || len(got.Failures) != 0 {
		t.Fatalf("response %s, want 3 events accepted and no failures", resp.Body)
	}
	seen := map[string]bool{}

	found := 0
	shards, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards.Shards {
		it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs.Records {
			found++
			var e stream.Envelope
			if err := stream.Unmarshal(rec.Data, &e); err != nil {
				t.Fatalf("record %s: %v", aws.ToString(rec.SequenceNumber), err)
			}
			if aws.ToString(rec.PartitionKey) != e.Key {
				t.Errorf("record %s: partition key %q, envelope key %q", e.ID, aws.ToString(rec.PartitionKey), e.Key)
			}
			if !e.ReceivedAt.Equal(serverNow) {
				t.Errorf("record %s: receivedAt %s, want the server clock %s", e.ID, e.ReceivedAt, serverNow)
			}
			if !strings.Contains(string(rec.Data), `"receivedAt":"2026-11-29T10:41:09.123456789Z"`) {
				t.Errorf("receivedAt is not RFC3339Nano UTC: %s", rec.Data)
			}
			if string(e.Data) != `{"path":"/pricing"}` {
				t.Errorf("data = %s", e.Data)
			}
			if seen[e.ID] {
				t.Errorf("record %s is on the stream twice", e.ID)
			}
			seen[e.ID] = true
		}
	}
	if found != 3 || !seen["e-1"] || !seen[" order 42 "] || !seen["e-3"] {
		t.Errorf("found %d records on the stream, ids %v; want 3: e-1, \" order 42 \", e-3", found, seen)
	}
}

// refusingPutter fails the test if the handler writes anything.
type refusingPutter struct{ t *testing.T }

func (p refusingPutter) PutRecords(context.Context, *kinesis.PutRecordsInput, ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	p.t.Error("PutRecords called for a request that must be refused")
	return nil, errors.New("refused")
}

func TestHandleRefusesInvalidRequests(t *testing.T) {
	big := fmt.Sprintf(`{"id":"big-1","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z","data":"%s"}`, strings.Repeat("x", MaxRecordBytes))
	tests := []struct {
		name      string
		req       events.LambdaFunctionURLRequest
		status    int
		wantIndex int
		wantID    string
		wantField string
		wantText  string // in the error message
	}{
		{name: "missing key in a single event", req: post(`{"id":"e-9","type":"t","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`),
			status: 400, wantIndex: 0, wantID: "e-9", wantField: "key", wantText: `events[0].key: is required (event id "e-9")`},
		{name: "bad time in the third event of a batch", req: post("[" + envelopeJSON("a", "k") + "," + envelopeJSON("b", "k") + `,{"id":"c","type":"t","key":"k","occurredAt":"yesterday","sentAt":"2026-11-29T07:41:08Z"}]`),
			status: 400, wantIndex: 2, wantID: "c", wantField: "occurredAt", wantText: `events[2].occurredAt: "yesterday" is not an RFC 3339 time`},
		{name: "id of the wrong type", req: post(`[` + envelopeJSON("a", "k") + `,{"id":12,"type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}]`),
			status: 400, wantIndex: 1, wantField: "id", wantText: "events[1].id: must be a string"},
		// docs/events.md's example: the event is named by its exactly
		// spelt id, never by the value of a key in another case, whichever
		// comes last.
		{name: "id and ID", req: post(`{"id":"a","ID":"b","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`),
			status: 400, wantIndex: 0, wantID: "a", wantField: "ID", wantText: `events[0].ID: unknown field; did you mean "id"? (names are case-sensitive; known: id, type, key, occurredAt, sentAt, receivedAt, data) (event id "a")`},
		{name: "ID before id", req: post(`{"ID":"b","id":"a","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`),
			status: 400, wantIndex: 0, wantID: "a", wantField: "ID", wantText: `(event id "a")`},
		{name: "only a differently spelt id", req: post(`{"Id":"b","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`),
			status: 400, wantIndex: 0, wantID: "", wantField: "Id", wantText: `events[0].Id: unknown field; did you mean "id"?`},
		{name: "not JSON", req: post(`{"id":`), status: 400, wantIndex: 0, wantField: "id", wantText: "events[0].id: not valid JSON: the body ends at byte 6"},
		{name: "empty body", req: post(" "), status: 400, wantText: "empty"},
		{name: "empty array", req: post("[]"), status: 400, wantText: "empty"},
		{name: "bad base64", req: events.LambdaFunctionURLRequest{Body: "%%%", IsBase64Encoded: true}, status: 400, wantText: "base64"},
		{name: "GET", req: events.LambdaFunctionURLRequest{RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "GET"}}}, status: 405, wantText: "only POST"},
		{name: "record over 1 MiB", req: post("[" + envelopeJSON("a", "k") + "," + big + "]"), status: 413, wantIndex: 1, wantID: "big-1", wantField: "data", wantText: `events[1].data: the record would be`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(refusingPutter{t}, "events")
			resp, err := h.Handle(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, resp.Body)
			}
			var er ErrorResponse
			if err := json.Unmarshal([]byte(resp.Body), &er); err != nil {
				t.Fatalf("body %q: %v", resp.Body, err)
			}
			if !strings.Contains(er.Error, tt.wantText) {
				t.Errorf("error %q does not contain %q", er.Error, tt.wantText)
			}
			if tt.wantField == "" {
				return
			}
			if len(er.Errors) == 0 {
				t.Fatalf("no per-event errors: %s", resp.Body)
			}
			e := er.Errors[0]
			if e.Index != tt.wantIndex || e.ID != tt.wantID || e.Field != tt.wantField {
				t.Errorf("errors[0] = %+v, want index %d id %q field %q", e, tt.wantIndex, tt.wantID, tt.wantField)
			}
		})
	}
}

// scriptedPutter answers PutRecords from a script: call n fails the entries
// whose event ids are in fail[n] with the given code. It is the one fake in
// these tests: a real endpoint cannot be made to throttle some entries.
type scriptedPutter struct {
	mu     sync.Mutex
	fail   []map[string]string // per call: event id -> error code
	always map[string]string   // every call after those in fail
	calls  [][]string          // event ids sent per call
	err    []error             // per call: whole-call error
}

func (p *scriptedPutter) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.calls)
	var ids []string
	out := &kinesis.PutRecordsOutput{}
	for i, e := range in.Records {
		var env stream.Envelope
		_ = stream.Unmarshal(e.Data, &env)
		ids = append(ids, env.ID)
		var r types.PutRecordsResultEntry
		script := p.always
		if n < len(p.fail) {
			script = p.fail[n]
		}
		if script[env.ID] != "" {
			r.ErrorCode = aws.String(script[env.ID])
			r.ErrorMessage = aws.String("scripted failure")
			out.FailedRecordCount = aws.Int32(aws.ToInt32(out.FailedRecordCount) + 1)
		} else {
			r.SequenceNumber = aws.String(fmt.Sprintf("%d%03d", n+1, i))
			r.ShardId = aws.String("shardId-000000000000")
		}
		out.Records = append(out.Records, r)
	}
	p.calls = append(p.calls, ids)
	if n < len(p.err) && p.err[n] != nil {
		return nil, p.err[n]
	}
	return out, nil
}

func TestHandleRetriesOnlyFailedEntries(t *testing.T) {
	const throttled = "ProvisionedThroughputExceededException"
	tests := []struct {
		name         string
		putter       *scriptedPutter
		status       int
		wantCalls    [][]string
		wantAccepted int
		wantFailed   map[string]string // id -> error substring
	}{
		{
			name: "partial failures heal on retry",
			putter: &scriptedPutter{fail: []map[string]string{
				{"b": throttled, "c": "InternalFailure"},
				{"c": throttled},
			}},
			status:       202,
			wantCalls:    [][]string{{"a", "b", "c"}, {"b", "c"}, {"c"}},
			wantAccepted: 3,
		},
		{
			name: "throttled to the end: 429 naming the events",
			putter: &scriptedPutter{fail: []map[string]string{
				{"b": throttled}, {"b": throttled}, {"b": throttled}, {"b": throttled},
			}},
			status:       429,
			wantCalls:    [][]string{{"a", "b", "c"}, {"b"}, {"b"}, {"b"}},
			wantAccepted: 2,
			wantFailed:   map[string]string{"b": throttled},
		},
		{
			name: "internal failures to the end: 503",
			putter: &scriptedPutter{fail: []map[string]string{
				{"a": "InternalFailure", "c": throttled}, {"a": "InternalFailure"}, {"a": "InternalFailure"}, {"a": "InternalFailure"},
			}},
			status:       503,
			wantCalls:    [][]string{{"a", "b", "c"}, {"a", "c"}, {"a"}, {"a"}},
			wantAccepted: 2,
			wantFailed:   map[string]string{"a": "InternalFailure"},
		},
		{
			name:         "missing stream is not retried",
			putter:       &scriptedPutter{err: []error{&smithy.GenericAPIError{Code: "ResourceNotFoundException", Message: "Stream events not found", Fault: smithy.FaultClient}}},
			status:       503,
			wantCalls:    [][]string{{"a", "b", "c"}},
			wantAccepted: 0,
			wantFailed:   map[string]string{"a": "ResourceNotFoundException", "b": "ResourceNotFoundException", "c": "ResourceNotFoundException"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(tt.putter, "events", WithClock(func() time.Time { return serverNow }))
			var slept []time.Duration
			h.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
			h.jitter = func(n int64) int64 { return n - 1 } // the top of the jitter range
			body := "[" + envelopeJSON("a", "k1") + "," + envelopeJSON("b", "k2") + "," + envelopeJSON("c", "k3") + "]"
			resp, err := h.Handle(context.Background(), post(body))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.status, resp.Body)
			}
			if fmt.Sprint(tt.putter.calls) != fmt.Sprint(tt.wantCalls) {
				t.Errorf("calls %v, want %v", tt.putter.calls, tt.wantCalls)
			}
			for i, d := range slept {
				if ceiling := 50 * time.Millisecond << i; d >= ceiling {
					t.Errorf("backoff %d = %s, want below %s", i, d, ceiling)
				}
			}
			var got Response
			if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
				t.Fatal(err)
			}
			if got.Events != 3 || got.Accepted != tt.wantAccepted || got.Failed != len(tt.wantFailed) || len(got.Failures) != len(tt.wantFailed) {
				t.Errorf("accepted %d failed %d of %d, want %d and %d of 3: %s", got.Accepted, got.Failed, got.Events, tt.wantAccepted, len(tt.wantFailed), resp.Body)
			}
			ids := []string{"a", "b", "c"}
			last := -1
			for _, f := range got.Failures {
				if f.Index <= last {
					t.Errorf("failures %+v are not in request order", got.Failures)
				}
				last = f.Index
				want, shouldFail := tt.wantFailed[ids[f.Index]]
				if !shouldFail || !strings.Contains(f.Error, want) || f.Dropped {
					t.Errorf("failure %+v (event %s), want error %q", f, ids[f.Index], want)
				}
			}
			if tt.status != 202 && resp.Headers["Retry-After"] == "" {
				t.Error("no Retry-After on a retryable failure")
			}
		})
	}
}

func TestHandleStopsRetryingAtTheDeadline(t *testing.T) {
	p := &scriptedPutter{fail: []map[string]string{{"a": "InternalFailure"}, {"a": "InternalFailure"}}}
	h := New(p, "events")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	resp, _ := h.Handle(ctx, post(envelopeJSON("a", "k")))
	if resp.StatusCode != 503 || len(p.calls) != 1 {
		t.Errorf("status %d after %d calls; want 503 after 1 (no time left to retry)", resp.StatusCode, len(p.calls))
	}
}

func TestHandleBase64Body(t *testing.T) {
	p := &scriptedPutter{}
	h := New(p, "events")
	req := post(base64.StdEncoding.EncodeToString([]byte(envelopeJSON("a", "k"))))
	req.IsBase64Encoded = true
	resp, _ := h.Handle(context.Background(), req)
	if resp.StatusCode != 202 || len(p.calls) != 1 {
		t.Errorf("status %d: %s", resp.StatusCode, resp.Body)
	}
}

func TestChunksRespectPutRecordsLimits(t *testing.T) {
	entries := make([]types.PutRecordsRequestEntry, 1203)
	idxs := make([]int, len(entries))
	for i := range entries {
		entries[i] = types.PutRecordsRequestEntry{Data: make([]byte, 10), PartitionKey: aws.String("k")}
		idxs[i] = i
	}
	// Twelve records of 900 KiB: at most five fit in 5 MiB.
	for i := 0; i < 12; i++ {
		entries[i].Data = make([]byte, 900<<10)
	}
	cs := chunks(idxs, entries)
	total := 0
	for _, c := range cs {
		size := 0
		for _, idx := range c {
			size += len(entries[idx].Data) + 1
		}
		if len(c) > maxBatchRecords || size > maxBatchBytes {
			t.Errorf("chunk of %d records, %d bytes, over the PutRecords limits", len(c), size)
		}
		total += len(c)
	}
	if total != len(entries) {
		t.Errorf("chunks hold %d entries, want %d", total, len(entries))
	}
}

// TestPeekIDTakesOnlyTheExactlySpeltID: an event that did not decode is
// named by its "id" alone; a key in another case is not an id, and an "id"
// given twice with different values names no event.
func TestPeekIDTakesOnlyTheExactlySpeltID(t *testing.T) {
	tests := []struct {
		raw       string
		id        string
		ambiguous bool
	}{
		{`{"id":"a","ID":"b"}`, "a", false},
		{`{"ID":"b","id":"a"}`, "a", false},
		{`{"Id":"b","iD":"c"}`, "", false},
		{`{"\u0069d":"a","ID":"b"}`, "a", false},
		{`{"data":{"id":"inner"},"id":"a"}`, "a", false},
		{`{"data":{"id":"inner"}}`, "", false},
		{`{"id":12}`, "", false},
		{`{"id":"a","id":"b"}`, "", true},
		{`{"id":"a","id":"a"}`, "a", false},
		{`[{"id":"a"}]`, "", false},
		{`{"id":`, "", false},
	}
	for _, tt := range tests {
		id, ambiguous := peekID([]byte(tt.raw))
		if id != tt.id || ambiguous != tt.ambiguous {
			t.Errorf("peekID(%s) = %q, %v; want %q, %v", tt.raw, id, ambiguous, tt.id, tt.ambiguous)
		}
	}
}

// TestHandleRefusesCompressedBodies: the API takes the body uncompressed.
// A request with a Content-Encoding it does not take is a 415 naming the
// header (RFC 9110 section 15.5.16, with Accept-Encoding: identity), and a
// gzip body sent without the header is a 400 saying it is gzip, where both
// used to get "must be one envelope…" with no hint why.
func TestHandleRefusesCompressedBodies(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte(envelopeJSON("a", "k"))); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	gzipped := func(headers map[string]string) events.LambdaFunctionURLRequest {
		r := post(base64.StdEncoding.EncodeToString(gz.Bytes()))
		r.IsBase64Encoded = true
		r.Headers = headers
		return r
	}
	tests := []struct {
		name     string
		req      events.LambdaFunctionURLRequest
		status   int
		wantText string
	}{
		{"gzip with its header", gzipped(map[string]string{"content-encoding": "gzip"}), http.StatusUnsupportedMediaType,
			"Content-Encoding: gzip: the body must be sent uncompressed (identity); send it without Content-Encoding"},
		{"header spelt in capitals", gzipped(map[string]string{"Content-Encoding": "GZIP"}), http.StatusUnsupportedMediaType, "Content-Encoding: GZIP:"},
		{"a list of codings", gzipped(map[string]string{"content-encoding": "identity, br"}), http.StatusUnsupportedMediaType, "Content-Encoding: identity, br:"},
		{"gzip without the header", gzipped(nil), http.StatusBadRequest,
			"body: starts with the gzip magic bytes (1F 8B): the body must be sent uncompressed; send the JSON itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(refusingPutter{t}, "events")
			resp, err := h.Handle(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || !strings.Contains(resp.Body, tt.wantText) {
				t.Errorf("status %d %s, want %d with %q", resp.StatusCode, resp.Body, tt.status, tt.wantText)
			}
			if tt.status == http.StatusUnsupportedMediaType && resp.Headers["Accept-Encoding"] != "identity" {
				t.Errorf("Accept-Encoding %q, want identity (the codings the API takes)", resp.Headers["Accept-Encoding"])
			}
		})
	}
	// identity is no coding at all: the request is taken.
	for _, enc := range []string{"identity", "Identity", ""} {
		p := &scriptedPutter{}
		h := New(p, "events", WithClock(func() time.Time { return serverNow }))
		r := post(envelopeJSON("a", "k"))
		r.Headers = map[string]string{"content-encoding": enc}
		if resp, _ := h.Handle(context.Background(), r); resp.StatusCode != http.StatusAccepted {
			t.Errorf("Content-Encoding %q: status %d %s, want 202", enc, resp.StatusCode, resp.Body)
		}
	}
}
