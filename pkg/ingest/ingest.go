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
	"github.com/tributary-dev/tributary/pkg/strictjson"
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
	// maxEventAge refuses events older than it when sent (0: no limit).
	maxEventAge time.Duration
	// maxResponse bounds a 202/429/503 body (MaxResponseBytes).
	maxResponse int
	// requests keeps idempotency records; nil: the Idempotency-Key header
	// is refused.
	requests   *RequestStore
	idemExpiry time.Duration
	// signatures checks signed requests; nil: requests are not signed
	// (AWS_IAM auth is the function URL's business).
	signatures *signatureCheck
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

// WithMaxEventAge sets how old an event may be when sent (sentAt −
// occurredAt) before it is refused; DefaultMaxEventAge by default, 0 for no
// limit.
func WithMaxEventAge(d time.Duration) Option { return func(h *Handler) { h.maxEventAge = max(d, 0) } }

// WithIdempotency makes the handler honour the Idempotency-Key header with
// records in store, each kept for expiry after its request's last answer
// (DefaultIdempotencyExpiry if zero). Without it a request carrying the
// header is refused (400), since it could not be honoured.
func WithIdempotency(store *RequestStore, expiry time.Duration) Option {
	return func(h *Handler) {
		if expiry <= 0 {
			expiry = DefaultIdempotencyExpiry
		}
		h.requests, h.idemExpiry = store, expiry
	}
}

// SecretSource gives the secrets a request signature may be made with, the
// current one first; SecretsManagerSecret is the deployed one.
type SecretSource interface {
	Secrets(ctx context.Context) ([][]byte, error)
	// Refresh re-reads the secrets if the last read is older than the
	// source's minimum interval, and reports whether it did.
	Refresh(ctx context.Context) ([][]byte, bool, error)
}

// WithSignedRequests makes the handler refuse (401) every request without a
// valid X-Tributary-Signature under one of secrets' secrets and a
// timestamp within MaxClockSkew. With WithIdempotency, a signed request
// without an Idempotency-Key is deduplicated by its signature for twice
// MaxClockSkew, so a replay within the window writes nothing.
func WithSignedRequests(secrets SecretSource) Option {
	return func(h *Handler) { h.signatures = &signatureCheck{secrets: secrets, now: h.now} }
}

// New returns a handler writing to the Kinesis stream named streamName.
// By default an entry is tried 4 times with backoff base 50ms, cap 1s
// (Backpressure and Drop), every path but "/" is unknown, "/" gets
// Backpressure, 1 in 100 dropped events is logged, events older than
// DefaultMaxEventAge are refused, requests are not signed, and the
// Idempotency-Key header is refused (no records are kept).
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
		maxEventAge: DefaultMaxEventAge,
		maxResponse: MaxResponseBytes,
	}
	for _, o := range opts {
		o(h)
	}
	if h.signatures != nil {
		h.signatures.now = h.now // WithClock may come after WithSignedRequests
	}
	return h
}

// Handle answers one Function URL request.
func (h *Handler) Handle(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	defer func() {
		if err := h.metrics.Flush(); err != nil {
			h.log.Error("metrics flush", "err", err)
		}
	}()
	return h.handle(ctx, req), nil
}

func (h *Handler) handle(ctx context.Context, req events.LambdaFunctionURLRequest) events.LambdaFunctionURLResponse {
	path := req.RawPath
	if path == "" {
		path = req.RequestContext.HTTP.Path
	}
	if path == "" {
		path = "/"
	}
	if n := invocationSize(req); n > MaxRequestBytes {
		return problem(http.StatusRequestEntityTooLarge, "the request is %d bytes as Lambda receives it (body and headers); Lambda accepts at most %d (6 MB) per invocation: send fewer events per request", n, MaxRequestBytes)
	}
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return problem(http.StatusBadRequest, "body: marked base64 but is not valid base64")
		}
		body = b
	}
	rawKey, hasKey := header(req.Headers, HeaderIdempotencyKey)
	signature := ""
	if h.signatures != nil {
		sig, err := h.signatures.verify(ctx, req.Headers, path, rawKey, body)
		var ae *authError
		switch {
		case errors.As(err, &ae):
			h.metrics.Add("AuthFailures", metrics.Count, 1)
			// Before routing: the path is anyone's, cut as the 404 cuts it.
			h.log.Info("request refused: signature", "reason", ae.Error(), "path", cutText(path, 128))
			return problem(http.StatusUnauthorized, "%s", ae.Error())
		case err != nil:
			h.log.Error("signing secret unavailable", "err", err)
			r := problem(http.StatusServiceUnavailable, "the signing secret cannot be read, so the signature cannot be checked; nothing was written: retry later")
			r.Headers["Retry-After"] = "1"
			return r
		}
		signature = sig
	}
	policy, ok := h.routes[path]
	if !ok {
		return problem(http.StatusNotFound, "path %q is not a route; known routes: %s", cutText(path, 128), routeList(h.routes))
	}
	if m := req.RequestContext.HTTP.Method; m != "" && m != http.MethodPost {
		r := problem(http.StatusMethodNotAllowed, "method %s: only POST is accepted", cutText(m, 16))
		r.Headers["Allow"] = http.MethodPost
		return r
	}
	// No route takes a query parameter: one sent (?dryRun=true) is
	// refused before anything is written, never ignored.
	if name, msg := strictjson.UnknownParameter(req.QueryStringParameters, "POST "+path); name != "" {
		h.metrics.Add("EventsRejected", metrics.Count, 1)
		h.log.Info("request refused", "status", http.StatusBadRequest, "field", name, "reason", cutText(msg, MaxErrorTextBytes))
		return problem(http.StatusBadRequest, "%s", msg)
	}
	// The body is taken as sent: a compressed one is refused naming the
	// header (415, RFC 9110 section 15.5.16), before it would be read as
	// JSON and refused as "not one envelope".
	if msg, compressed := strictjson.CompressedBody(req.Headers); compressed {
		h.metrics.Add("EventsRejected", metrics.Count, 1)
		h.log.Info("request refused", "status", http.StatusUnsupportedMediaType, "field", "Content-Encoding", "reason", msg)
		r := problem(http.StatusUnsupportedMediaType, "%s", msg)
		r.Headers["Accept-Encoding"] = "identity"
		return r
	}
	var idemKey string
	if hasKey {
		k, err := parseIdempotencyKey(rawKey)
		if err != nil {
			return problem(http.StatusBadRequest, "%s header: %v", HeaderIdempotencyKey, err)
		}
		if h.requests == nil {
			return problem(http.StatusBadRequest, "%s header: this deployment keeps no idempotency records (INGEST_IDEMPOTENCY_TABLE is not set), so the header cannot be honoured; nothing was written", HeaderIdempotencyKey)
		}
		idemKey = k
	}

	raws, berr := splitBody(body, MaxEvents)
	if berr != nil {
		h.metrics.Add("EventsRejected", metrics.Count, 1)
		h.log.Info("request refused", "status", berr.status, "index", berr.elem, "field", berr.field, "reason", cutText(berr.reason, MaxErrorTextBytes))
		if berr.elem < 0 {
			return problem(berr.status, "body: %s", berr.reason)
		}
		return refuse(berr.status, []EventError{{Index: berr.elem, Field: berr.field, Reason: berr.reason}})
	}
	envs, errs := parseEvents(raws, h.maxEventAge)
	h.metrics.Add("EventsIn", metrics.Count, float64(len(envs)))
	if len(errs) > 0 {
		h.metrics.Add("EventsRejected", metrics.Count, float64(len(envs)))
		h.log.Info("request refused", "reason", errs[0].bounded().String(), "invalidEvents", len(errs))
		return refuse(http.StatusBadRequest, errs)
	}

	receivedAt := h.now().UTC()
	entries, tooBig, err := stamp(envs, receivedAt)
	if err != nil {
		return h.notStamped(err)
	}
	if len(tooBig) > 0 {
		h.metrics.Add("EventsRejected", metrics.Count, float64(len(envs)))
		return refuse(http.StatusRequestEntityTooLarge, tooBig)
	}

	// Idempotency: a keyed request (or, when requests are signed, any
	// request, keyed by its signature) claims its record before writing.
	var c *claim
	expires := h.idemExpiry
	if h.requests != nil && (idemKey != "" || signature != "") {
		id := recordID(callerOf(req, h.signatures != nil), path, idemKey)
		if idemKey == "" {
			id, expires = recordID("signature", path, signature), 2*MaxClockSkew
		}
		got, err := h.requests.Claim(ctx, id, fingerprint(body), receivedAt, h.lockUntil(ctx), expires)
		if err != nil {
			h.metrics.Add("IdempotencyStoreErrors", metrics.Count, 1)
			h.log.Error("idempotency record not claimed", "err", err)
			r := problem(http.StatusServiceUnavailable, "the idempotency record of this request cannot be read or written; nothing was written: retry later with the same %s", HeaderIdempotencyKey)
			r.Headers["Retry-After"] = "1"
			return r
		}
		switch got.kind {
		case claimReplay:
			h.metrics.Add("Replayed", metrics.Count, 1)
			r := events.LambdaFunctionURLResponse{StatusCode: got.stored.Status, Headers: got.stored.Headers, Body: got.stored.Body}
			if r.Headers == nil {
				r.Headers = map[string]string{}
			}
			r.Headers[HeaderReplayed] = "true"
			return r
		case claimInFlight:
			h.metrics.Add("IdempotencyConflicts", metrics.Count, 1)
			until := ""
			if !got.lockedUntil.IsZero() {
				until = " (its lock ends by " + got.lockedUntil.UTC().Format(time.RFC3339) + ")"
			}
			what := fmt.Sprintf("%s %q: a request with this key", HeaderIdempotencyKey, cutText(idemKey, 64))
			if idemKey == "" {
				what = "a request with this signature"
			}
			r := problem(http.StatusConflict, "%s is still being processed%s; nothing was written: retry after it has been answered to get its answer", what, until)
			r.Headers["Retry-After"] = "1"
			return r
		case claimMismatch:
			h.metrics.Add("IdempotencyMismatches", metrics.Count, 1)
			return problem(http.StatusUnprocessableEntity, "%s %q was used for a request with a different body (its SHA-256 differs); a key belongs to one request: send a new key with a new request. Nothing was written", HeaderIdempotencyKey, cutText(idemKey, 64))
		}
		c = &got
		if !c.receivedAt.Equal(receivedAt) {
			// A retry of a request an earlier try received: its body, sentAt
			// included, is that try's, so its events are stamped with that
			// try's receivedAt. With this one's, an event resent an hour later
			// would have its event time (occurredAt + receivedAt − sentAt)
			// moved an hour late. The earlier try checked these records'
			// sizes with that time.
			if entries, _, err = stamp(envs, c.receivedAt); err != nil {
				return h.notStamped(err)
			}
		}
	}

	pending := make([]int, len(entries))
	for i := range pending {
		pending[i] = i
	}
	var prev Response
	if c != nil && c.kind == claimResume {
		// The same body (its fingerprint matched), so the same events;
		// an index past them would be a damaged record.
		pending = slices.DeleteFunc(slices.Clone(c.pending), func(i int) bool { return i >= len(entries) })
		if err := json.Unmarshal([]byte(c.stored.Body), &prev); err != nil {
			h.log.Error("stored partial answer does not decode; counting from scratch", "err", err)
		}
		h.metrics.Add("Resumed", metrics.Count, 1)
	}
	outs, throttledOnly := h.put(ctx, policy, envs, entries, pending)
	resp, left := summarize(len(envs), prev, pending, outs)
	h.metrics.Add("Accepted", metrics.Count, float64(len(pending)-countDropped(outs, pending)-len(left)))
	h.metrics.Add("Dropped", metrics.Count, float64(countDropped(outs, pending)))
	h.metrics.Add("EventsFailed", metrics.Count, float64(len(left)))
	status := http.StatusAccepted
	if len(left) > 0 {
		status = http.StatusServiceUnavailable
		if throttledOnly && policy != Buffer {
			status = http.StatusTooManyRequests
		}
		h.log.Warn("events not written", "route", path, "policy", string(policy), "failed", len(left), "accepted", resp.Accepted, "dropped", resp.Dropped, "status", status)
	}
	r := rawReply(status, encodeResponse(resp, h.maxResponse))
	if status != http.StatusAccepted {
		r.Headers["Retry-After"] = "1"
	}
	if c != nil {
		// The events are written: store the answer even if ctx has ended.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completionTimeout)
		defer cancel()
		err := h.requests.Complete(sctx, *c, storedResponse{Status: r.StatusCode, Headers: r.Headers, Body: r.Body}, left, expires)
		if err != nil {
			// The answer still goes out; a retry finds the key locked until
			// the lock's deadline, and then writes again the events this
			// try was given: all of them for a first try, the pending ones
			// for a resume (the record keeps them).
			h.metrics.Add("IdempotencyStoreErrors", metrics.Count, 1)
			h.log.Error("idempotency answer not stored", "err", err, "record", c.id)
		}
	}
	return r
}

// notStamped is the answer when a validated event does not encode again
// (stamp's error): a fault of ingest's own, not of the request, so it is
// logged as one and answered 500, nothing written.
func (h *Handler) notStamped(err error) events.LambdaFunctionURLResponse {
	h.log.Error("events not encoded for the stream: nothing written", "err", err)
	return problem(http.StatusInternalServerError, "%v", err)
}

// stamp sets every event's receivedAt and encodes it as a stream record,
// and returns the records and the events whose record would exceed
// MaxRecordBytes.
func stamp(envs []stream.Envelope, receivedAt time.Time) ([]types.PutRecordsRequestEntry, []EventError, error) {
	entries := make([]types.PutRecordsRequestEntry, len(envs))
	var tooBig []EventError
	for i := range envs {
		envs[i].ReceivedAt = receivedAt
		// Not HTML-escaped: '<', '>' and '&' stay one byte each, so data
		// full of markup is as big on the stream as it was sent.
		data, err := marshal(&envs[i])
		if err != nil { // json.RawMessage data was validated on the way in
			return nil, nil, fmt.Errorf("events[%d]: encoding: %w", i, err)
		}
		if size := len(data) + len(envs[i].Key); size > MaxRecordBytes {
			tooBig = append(tooBig, EventError{Index: i, ID: envs[i].ID, Field: "data",
				Reason: fmt.Sprintf("the record would be %d bytes; a stream record holds at most %d (1 MiB) including the key", size, MaxRecordBytes)})
		}
		entries[i] = types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(envs[i].Key)}
	}
	return entries, tooBig, nil
}

// completionTimeout bounds storing an answer after the events are written.
const completionTimeout = 2 * time.Second

// lockUntil is when a request's hold on its idempotency key ends: its invoke
// deadline, after which Lambda has stopped it.
func (h *Handler) lockUntil(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(defaultLock)
}

// callerOf is who sent the request, to scope its idempotency key: the IAM
// principal under AWS_IAM auth, "signed" for signed requests.
func callerOf(req events.LambdaFunctionURLRequest, signed bool) string {
	if a := req.RequestContext.Authorizer; a != nil && a.IAM != nil {
		if a.IAM.UserARN != "" {
			return "iam:" + a.IAM.UserARN
		}
		return "iam:" + a.IAM.AccountID + ":" + a.IAM.CallerID
	}
	if signed {
		return "signed"
	}
	return "anonymous"
}

// invocationSize is how much of Lambda's invocation payload limit a request
// takes: its body as Lambda hands it over, its headers, and an allowance for
// the rest of the event.
func invocationSize(req events.LambdaFunctionURLRequest) int {
	n := len(req.Body) + len(req.RawQueryString) + requestContextAllowance
	for k, v := range req.Headers {
		n += len(k) + len(v) + 6 // "k":"v",
	}
	return n
}

// summarize is the answer for a request of n events after the entries at
// pending were tried (outs), on top of prev (the stored answer of an
// earlier try of the same request; zero for a first try), and the indexes
// still not on the stream.
func summarize(n int, prev Response, pending []int, outs []outcome) (Response, []int) {
	r := Response{Events: n, Dropped: prev.Dropped}
	for _, f := range prev.Failures {
		if f.Dropped {
			r.Failures = append(r.Failures, f)
		}
	}
	var left []int
	for _, idx := range pending {
		switch o := outs[idx]; {
		case o.dropped:
			r.Dropped++
			r.Failures = append(r.Failures, Failure{Index: idx, Error: o.err, Dropped: true})
		case o.err != "":
			left = append(left, idx)
			r.Failures = append(r.Failures, Failure{Index: idx, Error: o.err})
		}
	}
	slices.SortFunc(r.Failures, func(a, b Failure) int { return a.Index - b.Index })
	r.Failed = len(left)
	r.Accepted = n - r.Dropped - r.Failed
	return r, left
}

func countDropped(outs []outcome, idxs []int) int {
	n := 0
	for _, i := range idxs {
		if outs[i].dropped {
			n++
		}
	}
	return n
}

// peekID finds the id of an event that did not decode, so the error can
// still name it: the string value of the top-level key spelt exactly "id".
// A key in another case ("ID") is never taken for it (that is the mix-up the
// refusal is about); ambiguous is set when "id" is there more than once
// with different values (strictjson.Split refuses a duplicate key before
// this runs, so only a caller without that check sees it), and id is then "".
func peekID(raw []byte) (id string, ambiguous bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	found := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		if k, _ := t.(string); k != "id" {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = "" // not a string: no id to name
		}
		if found && s != id {
			return "", true
		}
		id, found = s, true
	}
	return id, false
}

// failure is an entry that did not get onto the stream (yet).
type failure struct {
	code, message string
	retryable     bool
}

// outcome is what became of one entry: on the stream (neither field set),
// dropped, or failed with err.
type outcome struct {
	err     string
	dropped bool
}

// put writes the entries at pending, retrying failed ones as policy says, and
// returns one outcome per entry (entries not in pending are left zero) and
// whether every failure left (not dropped) was throttling.
//
// Backpressure and Drop try an entry at most maxAttempts times; Buffer tries
// until the retry budget runs out: the context's deadline minus
// deadlineMargin, or bufferWait when there is no deadline. No policy sleeps
// past that budget. Drop does not retry a throttled entry: it drops it.
func (h *Handler) put(ctx context.Context, policy Policy, envs []stream.Envelope, entries []types.PutRecordsRequestEntry, pending []int) ([]outcome, bool) {
	results := make([]outcome, len(entries))
	pending = slices.Clone(pending)
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
			failed := h.putChunk(ctx, chunk, entries)
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
		results[idx].err = errorText(f.code, f.message)
		if !throttled(f.code) {
			throttledOnly = false
		}
	}
	return results, throttledOnly
}

// drop marks the event dropped and logs 1 in dropSample dropped events.
func (h *Handler) drop(e *stream.Envelope, r *outcome, f failure) {
	r.dropped, r.err = true, errorText(f.code, f.message)
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

// putChunk sends one PutRecords call for the entries at idxs and returns the
// failures by entry index.
func (h *Handler) putChunk(ctx context.Context, idxs []int, entries []types.PutRecordsRequestEntry) map[int]failure {
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
