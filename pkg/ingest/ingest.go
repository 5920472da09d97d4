package ingest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Kinesis limits the handler respects.
const (
	// MaxRecordBytes is the stream's default maximum record size (data plus
	// partition key); a bigger event is refused with 413, naming it.
	MaxRecordBytes = 1 << 20
	// maxBatchRecords and maxBatchBytes bound one PutRecords call.
	maxBatchRecords = 500
	maxBatchBytes   = 5 << 20
)

// Error codes Kinesis returns per entry.
const (
	codeThroughput = "ProvisionedThroughputExceededException"
	codeInternal   = "InternalFailure"
)

// recordPutter is what the handler needs of Kinesis.
type recordPutter interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

var _ recordPutter = (*kinesis.Client)(nil)

// Handler is the ingest function's handler. Build it with New.
type Handler struct {
	stream      string
	kinesis     recordPutter
	now         func() time.Time
	sleep       func(ctx context.Context, d time.Duration) error
	jitter      func(n int64) int64
	maxAttempts int
	baseDelay   time.Duration
	maxDelay    time.Duration
	metrics     *metrics.Logger
	log         *slog.Logger
	routes      map[string]Policy
	dropSample  int
	dropSeq     atomic.Uint64 // dropped events seen, for 1-in-N logging
	// mono is the clock retry budgets are measured with (time.Now; tests
	// advance a fake one in sleep).
	mono func() time.Time
	// bufferWait bounds Buffer's retries when ctx has no deadline (outside
	// Lambda).
	bufferWait time.Duration
}

// deadlineMargin is the time kept before the invoke deadline to answer.
const deadlineMargin = 500 * time.Millisecond

// Option configures a Handler.
type Option func(*Handler)

// WithClock sets the server clock that stamps receivedAt.
func WithClock(now func() time.Time) Option { return func(h *Handler) { h.now = now } }

// WithRetry sets how many times PutRecords is tried for an entry in all
// (at least 1) and the backoff: before try n a random delay in
// [0, min(ceiling, base·2ⁿ⁻¹)) ("full jitter").
func WithRetry(attempts int, base, ceiling time.Duration) Option {
	return func(h *Handler) {
		h.maxAttempts = max(attempts, 1)
		h.baseDelay, h.maxDelay = base, ceiling
	}
}

// WithMetrics sets where EMF metrics go (nil: nowhere).
func WithMetrics(m *metrics.Logger) Option { return func(h *Handler) { h.metrics = m } }

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithBufferWait bounds how long the Buffer policy retries when the
// request's context has no deadline (default 10s). In Lambda the invoke
// deadline minus a 500ms margin bounds it.
func WithBufferWait(d time.Duration) Option { return func(h *Handler) { h.bufferWait = d } }

// New returns a handler writing to the Kinesis stream named streamName.
// By default an entry is tried 4 times with backoff base 50ms, cap 1s
// (Backpressure and Drop), every path but "/" is unknown, "/" gets
// Backpressure, and 1 in 100 dropped events is logged.
func New(client recordPutter, streamName string, opts ...Option) *Handler {
	h := &Handler{
		stream:      streamName,
		kinesis:     client,
		now:         time.Now,
		sleep:       sleepCtx,
		jitter:      rand.Int64N,
		maxAttempts: 4,
		baseDelay:   50 * time.Millisecond,
		maxDelay:    time.Second,
		log:         slog.Default(),
		routes:      DefaultRoutes(),
		dropSample:  defaultDropSample,
		mono:        time.Now,
		bufferWait:  10 * time.Second,
	}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Response is the body of a 202, 429 or 503 answer: one result per event of
// the request, in request order.
type Response struct {
	Accepted int      `json:"accepted"`
	Dropped  int      `json:"dropped,omitempty"`
	Results  []Result `json:"results"`
}

// Result is one event's outcome: SequenceNumber and ShardID when it is on
// the stream; Error when it is not and should be resent; Dropped when the
// route's policy is Drop and the event was dropped under throttling (do not
// resend it).
type Result struct {
	ID             string `json:"id"`
	SequenceNumber string `json:"sequenceNumber,omitempty"`
	ShardID        string `json:"shardId,omitempty"`
	Error          string `json:"error,omitempty"`
	Dropped        bool   `json:"dropped,omitempty"`
}

// ErrorResponse is the body of a 4xx answer for a request nothing of which
// was written.
type ErrorResponse struct {
	Error  string       `json:"error"`
	Errors []EventError `json:"errors,omitempty"`
}

// EventError says which event of the request is refused and why.
type EventError struct {
	Index  int    `json:"index"`
	ID     string `json:"id,omitempty"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
}

func (e EventError) String() string {
	id := ""
	if e.ID != "" {
		id = fmt.Sprintf(" (id %q)", e.ID)
	}
	if e.Field == "" {
		return fmt.Sprintf("event %d%s: %s", e.Index, id, e.Reason)
	}
	return fmt.Sprintf("event %d%s: %s: %s", e.Index, id, e.Field, e.Reason)
}

// Handle answers one Function URL request.
func (h *Handler) Handle(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	defer func() {
		if err := h.metrics.Flush(); err != nil {
			h.log.Error("metrics flush", "err", err)
		}
	}()
	path := req.RawPath
	if path == "" {
		path = req.RequestContext.HTTP.Path
	}
	if path == "" {
		path = "/"
	}
	policy, ok := h.routes[path]
	if !ok {
		return reply(http.StatusNotFound, ErrorResponse{Error: fmt.Sprintf("path %q is not a route; known routes: %s", path, routeList(h.routes))}), nil
	}
	if m := req.RequestContext.HTTP.Method; m != "" && m != http.MethodPost {
		r := reply(http.StatusMethodNotAllowed, ErrorResponse{Error: fmt.Sprintf("method %s: only POST is accepted", m)})
		r.Headers["Allow"] = http.MethodPost
		return r, nil
	}
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return reply(http.StatusBadRequest, ErrorResponse{Error: "body: marked base64 but is not valid base64"}), nil
		}
		body = b
	}
	envs, errs := parseBody(body)
	h.metrics.Add("EventsIn", metrics.Count, float64(len(envs)))
	if len(errs) > 0 {
		h.metrics.Add("EventsRejected", metrics.Count, float64(max(len(envs), 1)))
		h.log.Info("request refused", "reason", errs[0].String(), "invalidEvents", len(errs))
		return reply(http.StatusBadRequest, ErrorResponse{Error: errs[0].String(), Errors: errs}), nil
	}

	receivedAt := h.now().UTC()
	entries := make([]types.PutRecordsRequestEntry, len(envs))
	var tooBig []EventError
	for i := range envs {
		envs[i].ReceivedAt = receivedAt
		data, err := json.Marshal(&envs[i])
		if err != nil { // json.RawMessage data was validated on the way in
			return reply(http.StatusInternalServerError, ErrorResponse{Error: fmt.Sprintf("event %d: encoding: %v", i, err)}), nil
		}
		if size := len(data) + len(envs[i].Key); size > MaxRecordBytes {
			tooBig = append(tooBig, EventError{Index: i, ID: envs[i].ID, Field: "data",
				Reason: fmt.Sprintf("the record would be %d bytes; a stream record holds at most %d (1 MiB) including the key", size, MaxRecordBytes)})
		}
		entries[i] = types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(envs[i].Key)}
	}
	if len(tooBig) > 0 {
		h.metrics.Add("EventsRejected", metrics.Count, float64(len(envs)))
		return reply(http.StatusRequestEntityTooLarge, ErrorResponse{Error: tooBig[0].String(), Errors: tooBig}), nil
	}

	results, throttledOnly := h.put(ctx, policy, envs, entries)
	resp := Response{Results: results}
	for _, r := range results {
		switch {
		case r.Dropped:
			resp.Dropped++
		case r.Error == "":
			resp.Accepted++
		}
	}
	failed := len(results) - resp.Accepted - resp.Dropped
	h.metrics.Add("Accepted", metrics.Count, float64(resp.Accepted))
	h.metrics.Add("Dropped", metrics.Count, float64(resp.Dropped))
	h.metrics.Add("EventsFailed", metrics.Count, float64(failed))
	if failed == 0 {
		return reply(http.StatusAccepted, resp), nil
	}
	status := http.StatusServiceUnavailable
	if throttledOnly && policy != Buffer {
		status = http.StatusTooManyRequests
	}
	h.log.Warn("events not written", "route", path, "policy", string(policy), "failed", failed, "accepted", resp.Accepted, "dropped", resp.Dropped, "status", status)
	r := reply(status, resp)
	r.Headers["Retry-After"] = "1"
	return r, nil
}

// parseBody reads one envelope or an array of them, validating each.
func parseBody(body []byte) ([]stream.Envelope, []EventError) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, []EventError{{Index: 0, Reason: "the body is empty; send one envelope or a JSON array of envelopes"}}
	}
	var raws []json.RawMessage
	if body[0] == '[' {
		if err := json.Unmarshal(body, &raws); err != nil {
			return nil, []EventError{{Index: 0, Reason: "the body is not a valid JSON array: " + err.Error()}}
		}
		if len(raws) == 0 {
			return nil, []EventError{{Index: 0, Reason: "the array is empty"}}
		}
	} else {
		raws = []json.RawMessage{body}
	}
	envs := make([]stream.Envelope, len(raws))
	var errs []EventError
	for i, raw := range raws {
		err := stream.Unmarshal(raw, &envs[i])
		if err == nil {
			err = envs[i].Validate()
		}
		if err != nil {
			ee := EventError{Index: i, ID: envs[i].ID, Reason: err.Error()}
			var fe *stream.FieldError
			if errors.As(err, &fe) {
				ee.Field, ee.Reason = fe.Field, fe.Reason
			}
			if ee.ID == "" {
				ee.ID = peekID(raw)
			}
			errs = append(errs, ee)
		}
	}
	return envs, errs
}

// peekID finds the id of an event that did not decode, so the error can
// still name it.
func peekID(raw []byte) string {
	var v struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	if s, ok := v.ID.(string); ok {
		return s
	}
	return ""
}

// failure is an entry that did not get onto the stream (yet).
type failure struct {
	code, message string
	retryable     bool
}

// put writes entries, retrying failed ones as policy says, and returns one
// result per entry and whether every failure left (not dropped) was
// throttling.
//
// Backpressure and Drop try an entry at most maxAttempts times; Buffer tries
// until the retry budget runs out: the context's deadline minus
// deadlineMargin, or bufferWait when there is no deadline. No policy sleeps
// past that budget. Drop does not retry a throttled entry: it drops it.
func (h *Handler) put(ctx context.Context, policy Policy, envs []stream.Envelope, entries []types.PutRecordsRequestEntry) ([]Result, bool) {
	results := make([]Result, len(entries))
	for i := range envs {
		results[i].ID = envs[i].ID
	}
	pending := make([]int, len(entries))
	for i := range pending {
		pending[i] = i
	}
	budgetEnd, bounded := time.Time{}, false
	if dl, ok := ctx.Deadline(); ok {
		budgetEnd, bounded = h.mono().Add(time.Until(dl)-deadlineMargin), true
	} else if policy == Buffer {
		budgetEnd, bounded = h.mono().Add(h.bufferWait), true
	}
	failures := map[int]failure{}
	throttles, retries := 0, 0
	for attempt := 1; ; attempt++ {
		var retry []int
		for _, idx := range pending {
			delete(failures, idx)
		}
		for _, chunk := range chunks(pending, entries) {
			failed := h.putChunk(ctx, chunk, entries, results)
			for _, idx := range slices.Sorted(maps.Keys(failed)) { // request order
				f := failed[idx]
				if throttled(f.code) {
					throttles++
					if policy == Drop {
						h.drop(&envs[idx], &results[idx], f)
						continue
					}
				}
				failures[idx] = f
				if f.retryable {
					retry = append(retry, idx)
				}
			}
		}
		slices.Sort(retry) // resend in request order
		if len(retry) == 0 || (policy != Buffer && attempt >= h.maxAttempts) {
			break
		}
		d := h.backoff(attempt)
		if bounded && budgetEnd.Sub(h.mono()) < d {
			break // no time left to try again: answer with what we have
		}
		if err := h.sleep(ctx, d); err != nil {
			break
		}
		retries += len(retry)
		pending = retry
	}
	h.metrics.Add("Throttles", metrics.Count, float64(throttles))
	h.metrics.Add("Retries", metrics.Count, float64(retries))
	throttledOnly := len(failures) > 0
	for idx, f := range failures {
		results[idx].Error = f.code + ": " + f.message
		if !throttled(f.code) {
			throttledOnly = false
		}
	}
	return results, throttledOnly
}

// drop marks the event dropped and logs 1 in dropSample dropped events.
func (h *Handler) drop(e *stream.Envelope, r *Result, f failure) {
	r.Dropped = true
	if (h.dropSeq.Add(1)-1)%uint64(h.dropSample) == 0 {
		h.log.Warn("event dropped", "id", e.ID, "key", e.Key, "type", e.Type,
			"reason", f.code+": "+f.message, "sampledOneIn", h.dropSample)
	}
}

// throttled reports whether an error code says Kinesis (or KMS for an
// encrypted stream) is throttling.
func throttled(code string) bool {
	return code == codeThroughput || strings.Contains(code, "Throttl")
}

// putChunk sends one PutRecords call for the entries at idxs, fills results
// for those that landed and returns the failures by entry index.
func (h *Handler) putChunk(ctx context.Context, idxs []int, entries []types.PutRecordsRequestEntry, results []Result) map[int]failure {
	in := &kinesis.PutRecordsInput{StreamName: aws.String(h.stream), Records: make([]types.PutRecordsRequestEntry, len(idxs))}
	for i, idx := range idxs {
		in.Records[i] = entries[idx]
	}
	out, err := h.kinesis.PutRecords(ctx, in)
	failed := map[int]failure{}
	if err != nil {
		f := callFailure(err)
		for _, idx := range idxs {
			failed[idx] = f
		}
		return failed
	}
	for i, idx := range idxs {
		if i >= len(out.Records) {
			failed[idx] = failure{code: codeInternal, message: "PutRecords returned no result for this record", retryable: true}
			continue
		}
		r := out.Records[i]
		if r.ErrorCode != nil {
			failed[idx] = failure{code: *r.ErrorCode, message: aws.ToString(r.ErrorMessage), retryable: true}
			continue
		}
		results[idx].SequenceNumber = aws.ToString(r.SequenceNumber)
		results[idx].ShardID = aws.ToString(r.ShardId)
	}
	return failed
}

// callFailure classifies an error of the whole PutRecords call (after the
// SDK's own retries): throttling and server faults may pass, client faults
// (a missing stream, access denied) will not.
func callFailure(err error) failure {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		retryable := ae.ErrorFault() != smithy.FaultClient ||
			code == codeThroughput || strings.Contains(code, "Throttl") || code == "LimitExceededException"
		return failure{code: code, message: ae.ErrorMessage(), retryable: retryable}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return failure{code: "Timeout", message: err.Error()}
	}
	return failure{code: codeInternal, message: err.Error(), retryable: true}
}

// chunks splits idxs into groups that fit one PutRecords call.
func chunks(idxs []int, entries []types.PutRecordsRequestEntry) [][]int {
	var out [][]int
	var cur []int
	size := 0
	for _, idx := range idxs {
		n := len(entries[idx].Data) + len(aws.ToString(entries[idx].PartitionKey))
		if len(cur) == maxBatchRecords || (len(cur) > 0 && size+n > maxBatchBytes) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, idx)
		size += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func (h *Handler) backoff(attempt int) time.Duration {
	ceiling := h.baseDelay << (attempt - 1)
	if ceiling > h.maxDelay || ceiling <= 0 {
		ceiling = h.maxDelay
	}
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(h.jitter(int64(ceiling)))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func reply(status int, body any) events.LambdaFunctionURLResponse {
	b, err := json.Marshal(body)
	if err != nil {
		b = []byte(`{"error":"encoding the response failed"}`)
		status = http.StatusInternalServerError
	}
	return events.LambdaFunctionURLResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(b),
	}
}
