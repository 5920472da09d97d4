package ingest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/stream"
)

// memoryStream keeps what PutRecords sends, accepting everything: the fuzz
// target's Kinesis, since a network call per input would make fuzzing a
// crawl (the stand-in tests cover the real calls).
type memoryStream struct {
	mu      sync.Mutex
	entries []types.PutRecordsRequestEntry
}

func (m *memoryStream) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := &kinesis.PutRecordsOutput{FailedRecordCount: aws.Int32(0)}
	for i, e := range in.Records {
		m.entries = append(m.entries, e)
		out.Records = append(out.Records, types.PutRecordsResultEntry{
			SequenceNumber: aws.String(fmt.Sprintf("%056d", len(m.entries))), ShardId: aws.String(fmt.Sprintf("shardId-%012d", i%2)),
		})
	}
	return out, nil
}

// FuzzIngestRequest feeds the handler arbitrary bodies and Idempotency-Key
// values, as text or base64, and checks what must hold for any input: no
// panic; 202 only for well-formed UTF-8 JSON, with exactly the accepted
// events on the stream, each a valid envelope keyed by its key; nothing
// written otherwise; every answer JSON and bounded.
//
//	go test -run '^$' -fuzz FuzzIngestRequest -fuzztime 60s ./pkg/ingest
func FuzzIngestRequest(f *testing.F) {
	samples, _ := filepath.Glob(filepath.Join("..", "..", "events", "ingest", "*.json"))
	for _, p := range samples {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		var req events.LambdaFunctionURLRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		key, _ := header(req.Headers, HeaderIdempotencyKey)
		f.Add([]byte(req.Body), key, false)
	}
	for _, tc := range refusalCases {
		if len(tc.body) < 64<<10 {
			f.Add([]byte(tc.body), "", false)
		}
	}
	f.Add([]byte(batchOf("a", "b", "c")), `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, true)
	f.Add([]byte(ev("a", "k", `,"data":{"x":[1,2.5e3,-0.1,true,false,null,"\u00e9\ud83d\ude00"]}`)), "plain-token", false)
	f.Add([]byte(`[`+ev("a", "k", "")+`,`+ev("b", "k", "")+`]`), `"a", "b"`, false)

	f.Fuzz(func(t *testing.T, body []byte, key string, asBase64 bool) {
		mem := &memoryStream{}
		h := New(mem, "events", WithClock(func() time.Time { return serverNow }), WithLogger(slog.New(slog.DiscardHandler)), WithMaxEventAge(0))
		req := post(string(body))
		if asBase64 {
			req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
		if key != "" {
			req.Headers = map[string]string{"idempotency-key": key}
		}
		resp, err := h.Handle(context.Background(), req)
		if err != nil {
			t.Fatalf("Handle returned an error: %v", err)
		}
		if !json.Valid([]byte(resp.Body)) {
			t.Fatalf("status %d: the answer is not JSON: %q", resp.StatusCode, resp.Body)
		}
		if len(resp.Body) > MaxResponseBytes {
			t.Fatalf("status %d: the answer is %d bytes, over %d", resp.StatusCode, len(resp.Body), MaxResponseBytes)
		}
		switch resp.StatusCode {
		case http.StatusAccepted:
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if len(mem.entries) > 0 {
				t.Fatalf("status %d but %d records written: %s", resp.StatusCode, len(mem.entries), resp.Body)
			}
			var er ErrorResponse
			if err := json.Unmarshal([]byte(resp.Body), &er); err != nil || er.Error == "" {
				t.Fatalf("status %d without an error message: %s", resp.StatusCode, resp.Body)
			}
			return
		default:
			t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
		}

		// Accepted: the input was well-formed UTF-8 JSON, and the stream
		// holds exactly its events.
		if !utf8.Valid(body) || !json.Valid(body) {
			t.Fatalf("202 for a body that is not valid UTF-8 JSON: %q", body)
		}
		if key != "" {
			t.Fatalf("202 for a request with an Idempotency-Key but no records: %q", key)
		}
		var r Response
		if err := json.Unmarshal([]byte(resp.Body), &r); err != nil {
			t.Fatal(err)
		}
		if r.Accepted != len(mem.entries) || r.Events != r.Accepted || r.Accepted == 0 || r.Accepted > MaxEvents {
			t.Fatalf("answer %s but %d records written", resp.Body, len(mem.entries))
		}
		trimmed := bytes.TrimSpace(body)
		want := 1
		if trimmed[0] == '[' {
			var elems []json.RawMessage
			if err := json.Unmarshal(trimmed, &elems); err != nil {
				t.Fatalf("202 for an array encoding/json refuses: %v", err)
			}
			want = len(elems)
		}
		if r.Events != want {
			t.Fatalf("%d events accepted, the body holds %d", r.Events, want)
		}
		seen := map[string]bool{}
		for _, e := range mem.entries {
			var env stream.Envelope
			if err := stream.Unmarshal(e.Data, &env); err != nil {
				t.Fatalf("record %q does not decode: %v", e.Data, err)
			}
			if err := env.Validate(); err != nil {
				t.Fatalf("record %q is not a valid envelope: %v", e.Data, err)
			}
			if aws.ToString(e.PartitionKey) != env.Key || !env.ReceivedAt.Equal(serverNow) {
				t.Fatalf("record %q: partition key %q, receivedAt %s", e.Data, aws.ToString(e.PartitionKey), env.ReceivedAt)
			}
			if seen[env.ID] {
				t.Fatalf("id %q written twice from one request", env.ID)
			}
			seen[env.ID] = true
		}
	})
}
