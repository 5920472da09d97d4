package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/stream"
)

// WindowKey names one per-key, per-minute count.
type WindowKey struct {
	Key    string
	Window string // RFC3339 minute start, UTC
}

// Counts maps each (key, minute) to a count.
type Counts map[WindowKey]int

// Total is the sum of all counts.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Traffic describes the sample events `make local` sends.
type Traffic struct {
	Keys    int       // distinct entity keys
	Minutes int       // event-time minutes, ending at the minute before Now
	Max     int       // at most this many events per key and minute
	Seed    uint64    // same seed, same events
	Now     time.Time // server time the events are generated against
	// SkewedKeys get a device clock this far off, to show clock correction.
	Skew time.Duration
}

// Generate returns the envelopes to send and the counts the pipeline must end with.
// Events sit in the middle of their minute so that network delay cannot move
// them across a minute boundary; a quarter of the keys come from devices whose
// clock is off by Skew, which the event-time correction must undo.
func (t Traffic) Generate() ([]stream.Envelope, Counts) {
	rng := rand.New(rand.NewPCG(t.Seed, t.Seed^0x9e3779b97f4a7c15))
	start := t.Now.UTC().Truncate(time.Minute).Add(-time.Duration(t.Minutes) * time.Minute)
	want := Counts{}
	var out []stream.Envelope
	for k := 0; k < t.Keys; k++ {
		key := fmt.Sprintf("user-%02d", k)
		skew := time.Duration(0)
		if k%4 == 3 {
			skew = t.Skew
		}
		for m := 0; m < t.Minutes; m++ {
			minute := start.Add(time.Duration(m) * time.Minute)
			n := 1 + rng.IntN(t.Max)
			want[WindowKey{key, minute.Format(time.RFC3339)}] += n
			for i := 0; i < n; i++ {
				trueTime := minute.Add(15*time.Second + time.Duration(rng.IntN(30_000))*time.Millisecond)
				out = append(out, stream.Envelope{
					ID:         fmt.Sprintf("%s-%d-%d", key, m, i),
					Type:       "page_view",
					Key:        key,
					OccurredAt: trueTime.Add(skew),
					// sentAt is stamped by the device clock just before sending; see Send.
					SentAt: t.Now.Add(skew),
					Data: json.RawMessage(fmt.Sprintf(`{"page":"/p/%d","ms":%d,"deviceClockOffsetSeconds":%d}`,
						rng.IntN(20), 50+rng.IntN(2000), int(skew.Seconds()))),
				})
			}
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, want
}

// Send posts envelopes to the ingest function URL in batches and returns how
// many were accepted. Generate stamps sentAt for "now"; send right after it.
func Send(ctx context.Context, url string, evs []stream.Envelope, batch int, progress io.Writer) (int, error) {
	accepted := 0
	status := newStatusLine(progress)
	defer status.Done()
	for i := 0; i < len(evs); i += batch {
		chunk := evs[i:min(i+batch, len(evs))]
		body, err := json.Marshal(chunk)
		if err != nil {
			return accepted, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return accepted, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return accepted, fmt.Errorf("posting events %d..%d to %s: %w", i, i+len(chunk)-1, url, err)
		}
		respBody, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return accepted, fmt.Errorf("posting events %d..%d: ingest answered %d: %s", i, i+len(chunk)-1, resp.StatusCode, strings.TrimSpace(string(respBody)))
		}
		var r struct {
			Accepted int `json:"accepted"`
		}
		if err := json.Unmarshal(respBody, &r); err != nil {
			return accepted, fmt.Errorf("ingest response: %w: %s", err, respBody)
		}
		accepted += r.Accepted
		status.Set("    sent %d/%d events", accepted, len(evs))
	}
	return accepted, nil
}

// PutRaw writes data straight onto a stream, as a producer that bypasses
// ingest would, and returns the record's sequence number.
func PutRaw(ctx context.Context, cfg aws.Config, streamName, partitionKey string, data []byte) (string, error) {
	out, err := kinesis.NewFromConfig(cfg).PutRecord(ctx, &kinesis.PutRecordInput{
		StreamName: aws.String(streamName), PartitionKey: aws.String(partitionKey), Data: data,
	})
	if err != nil {
		return "", fmt.Errorf("putting a raw record on %s: %w", streamName, err)
	}
	return aws.ToString(out.SequenceNumber), nil
}

// QuarantinedRecord is one item of the quarantine table: a record a
// function set aside (Kind "set-aside": Function, Field, Reason) or one of
// a range Lambda gave up on (Kind "record": Condition, FunctionError).
type QuarantinedRecord struct {
	Source         string `dynamodbav:"source"`
	SequenceNumber string `dynamodbav:"sequenceNumber"`
	Kind           string `dynamodbav:"kind"`
	Data           []byte `dynamodbav:"data"`
	Condition      string `dynamodbav:"condition"`
	FunctionError  string `dynamodbav:"functionError"`
	Function       string `dynamodbav:"function"`
	Field          string `dynamodbav:"field"`
	Reason         string `dynamodbav:"reason"`
}

// WaitQuarantined polls the quarantine table until it holds the record with sequence number seq.
func WaitQuarantined(ctx context.Context, cfg aws.Config, table, seq string) ([]QuarantinedRecord, error) {
	client := dynamodb.NewFromConfig(cfg)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("scanning %s: %w", table, err)
		}
		var recs []QuarantinedRecord
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &recs); err != nil {
			return nil, fmt.Errorf("reading %s: %w", table, err)
		}
		for _, r := range recs {
			if r.SequenceNumber == seq {
				return recs, nil
			}
		}
		select {
		case <-ctx.Done():
			return recs, fmt.Errorf("waiting for record %s in %s: %w", seq, table, ctx.Err())
		case <-tick.C:
		}
	}
}

// FollowerEvents are valid events in the current minute for user-00.
func FollowerEvents(now time.Time, n int) []stream.Envelope {
	var out []stream.Envelope
	for i := 0; i < n; i++ {
		t := now.Add(-time.Duration(i+1) * time.Second)
		out = append(out, stream.Envelope{ID: fmt.Sprintf("follower-%d", i), Type: "page_view", Key: "user-00",
			OccurredAt: t, SentAt: t, ReceivedAt: t, Data: json.RawMessage(fmt.Sprintf(`{"page":"/f","ms":%d}`, 100+i))})
	}
	return out
}

// LateEvent is an on-time-looking event whose window, the first of t's
// (t generated at now), closed minutes ago. Its sentAt is the time LateEvent
// is called, so send it right away: ingest adds receivedAt − sentAt to its
// occurredAt, and a sentAt from long before the send would move the event
// into a later window.
func LateEvent(t Traffic, now time.Time) stream.Envelope {
	at := now.Truncate(time.Minute).Add(-time.Duration(t.Minutes)*time.Minute + 20*time.Second)
	return stream.Envelope{ID: "late-1", Type: "page_view", Key: "user-01", OccurredAt: at, SentAt: time.Now().UTC(), Data: json.RawMessage(`{"page":"/late","ms":999}`)}
}

// PutPoisonAndFollowers writes, in one PutRecords, a malformed record and
// then followers, as a producer that bypasses ingest would, and returns the
// malformed record's sequence number.
func PutPoisonAndFollowers(ctx context.Context, cfg aws.Config, streamName string, followers []stream.Envelope) (string, error) {
	entries := []ktypes.PutRecordsRequestEntry{{
		Data:         []byte(`{"id":"broken-1","key":"user-00","occurredAt":"yesterday"}`),
		PartitionKey: aws.String("user-00"),
	}}
	for _, e := range followers {
		b, err := json.Marshal(e)
		if err != nil {
			return "", err
		}
		entries = append(entries, ktypes.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(e.Key)})
	}
	out, err := kinesis.NewFromConfig(cfg).PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(streamName), Records: entries})
	if err != nil {
		return "", fmt.Errorf("putting records on %s: %w", streamName, err)
	}
	for _, r := range out.Records {
		if r.ErrorCode != nil {
			return "", fmt.Errorf("putting records on %s: %s", streamName, aws.ToString(r.ErrorMessage))
		}
	}
	return aws.ToString(out.Records[0].SequenceNumber), nil
}

// Resent is what ResendAndCheck saw.
type Resent struct {
	Events    int // copies sent
	Delivered int // records aggregate got, copies included, since before the resend
}

// ResendAndCheck plays a producer that resends evs (the same bytes: same
// ids, content and sentAt), as after a timeout: it posts them to ingest,
// waits until aggregate's mapping has delivered the copies, and then
// requires that keys' windows still hold exactly want — each copy
// suppressed by its event id.
func (w *Windows) ResendAndCheck(ctx context.Context, stats *Stats, url string, evs []stream.Envelope, want Counts, from, to time.Time) (Resent, error) {
	before := stats.Of(w.Function).Records
	if _, err := Send(ctx, url, evs, len(evs), io.Discard); err != nil {
		return Resent{}, err
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for stats.Of(w.Function).Records < before+len(evs) {
		select {
		case <-ctx.Done():
			return Resent{}, fmt.Errorf("waiting for aggregate to receive %d resent events: %w", len(evs), ctx.Err())
		case <-tick.C:
		}
	}
	// The batch that delivered them has returned; its writes are done.
	vs, err := w.Read(ctx, want.Keys(), from, to)
	if err != nil {
		return Resent{}, err
	}
	got := Counted(vs)
	for k, n := range want {
		if got[k] != n {
			return Resent{}, fmt.Errorf("after the resend, %s %s holds %d, want %d: a copy was counted", k.Key, k.Window, got[k], n)
		}
	}
	return Resent{Events: len(evs), Delivered: stats.Of(w.Function).Records - before}, nil
}

// Post sends evs to the ingest function URL in one request, with an
// Idempotency-Key header when key is not empty, and returns the answer's
// status and body as they came.
func Post(ctx context.Context, url string, evs []stream.Envelope, key string) (int, []byte, error) {
	body, err := json.Marshal(evs)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("posting %d events to %s: %w", len(evs), url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
