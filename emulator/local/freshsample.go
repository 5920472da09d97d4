package local

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
	"github.com/tributary-dev/tributary/pkg/worker"
)

// SampleShard is the shard id FreshSample gives a sample's Kinesis records
// (and the shard of an on-failure record's batch): state.SampleShard, a
// shard id no stream has. Package state keys fences and watermarks on the
// shard id (the fence attribute f_<shard>, the watermark item
// <pipeline>/<shard>, the open-windows index <pipeline>#<shard>), so what
// the records leave is the sample shard's own, never a real shard's, and
// replay's positions leave it out.
const SampleShard = state.SampleShard

// maxSamplePositions bounds the positions one sample may carry: each gets a
// six-digit rank after the invocation's nanosecond time.
const maxSamplePositions = 1_000_000

// Rewrite is one kind of change FreshSample made to a sample: every member
// at Path (a JSON path, [] standing for every element) changed as What says.
type Rewrite struct {
	Path  string
	Count int
	What  string
}

func (r Rewrite) String() string {
	if r.Count == 1 {
		return fmt.Sprintf("%s: %s", r.Path, r.What)
	}
	return fmt.Sprintf("%s (%d): %s", r.Path, r.Count, r.What)
}

// FreshSample rewrites a sample event — a file of events/ as the console's
// Test tab sends it — so that sending it to a running local stack cannot
// corrupt what the stack holds. The samples carry fixed times (2026-11-29)
// and fixed positions (shardId-000000000000 and sequence numbers 4960…):
// sent as they are, a sample's sequence numbers become a real shard's
// fence (its later records, compared as numbers, would be skipped as
// applied) and its times a watermark days behind.
//
// FreshSample moves every time the sample carries by one whole number of
// minutes, so that its latest time falls in the minute before now and
// records that shared a minute still do: the envelope times (occurredAt,
// sentAt, receivedAt) inside Kinesis data, SQS bodies and function URL
// bodies, Kinesis approximateArrivalTimestamp, DynamoDB
// ApproximateCreationDateTime, SQS SentTimestamp and
// ApproximateFirstReceiveTimestamp, a function URL request's time, timeEpoch
// and X-Tributary-Timestamp, an EventBridge event's time, a tumbling window,
// and an on-failure record's times. Values that are not times (a poison
// sample's "yesterday") stay as they are.
//
// It gives every position a namespace no real one has: Kinesis records go
// to SampleShard; sequence numbers (Kinesis, DynamoDB Streams, SQS FIFO, an
// on-failure record's range) become now's Unix nanoseconds followed by the
// sample's rank of the number (six digits), so they keep their order, grow
// from one invocation to the next and are compared as numbers; DynamoDB
// eventIDs and SQS messageIds become random ones; an Idempotency-Key
// header gets a new key (the old one with other times would be refused as
// another body).
//
// It gives every event id a fresh value (envelopeIDs): the envelope ids
// inside Kinesis data, SQS bodies and function URL bodies, a task's taskId
// and after, and a FIFO message's MessageDeduplicationId get one suffix
// new at each invocation, so the consumers' ledgers count each invocation
// instead of setting its records aside as ids reused with other content,
// while ids the sample repeats stay equal. Ids that name an entity's
// version (event sourcing's, cdc's) and ids of what is no envelope (a
// command, a rule) are kept. A payload of no known event type (snapshot's {"table": …})
// comes back unchanged, without rewrites.
//
// It returns the rewritten payload and one Rewrite per kind of change, in
// the order of the payload.
func FreshSample(payload []byte, now time.Time) ([]byte, []Rewrite, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, nil, fmt.Errorf("sample: not a JSON document: %w", err)
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return payload, nil, nil
	}
	f := &freshener{now: now, seqs: map[string]string{}, idSuffix: idSeparator + randomHex(idTokenBytes)}
	switch sourceOf(root) {
	case sourceKinesis:
		f.kinesis(root)
	case sourceDynamoDB:
		f.dynamodb(root)
	case sourceSQS:
		f.sqs(root)
	case sourceFunctionURL:
		f.functionURL(root)
	case sourceSchedule:
		f.timeAt(root, "time", "time", rfc3339)
	default:
		return payload, nil, nil
	}
	if err := f.finish(); err != nil {
		return nil, nil, err
	}
	out, err := marshalSample(root)
	if err != nil {
		return nil, nil, err
	}
	return out, f.rewrites(), nil
}

// sampleSource is the kind of event a sample is, as FreshSample tells
// them apart.
type sampleSource int

const (
	sourceOther sampleSource = iota
	sourceKinesis
	sourceDynamoDB
	sourceSQS
	sourceFunctionURL
	sourceSchedule
)

func sourceOf(root map[string]any) sampleSource {
	switch {
	case recordsOf(root, "aws:kinesis") != nil:
		return sourceKinesis
	case recordsOf(root, "aws:dynamodb") != nil:
		return sourceDynamoDB
	case recordsOf(root, "aws:sqs") != nil:
		return sourceSQS
	case root["requestContext"] != nil && root["rawPath"] != nil:
		return sourceFunctionURL
	case root["detail-type"] != nil && root["source"] != nil:
		return sourceSchedule
	}
	return sourceOther
}

// sampleSafety says, per kind of sample, why its fresh copy cannot move a
// running stack's positions or watermarks: every kind is rewritten, none
// refused (docs/local.md says the same).
var sampleSafety = map[sampleSource]string{
	sourceKinesis: "Kinesis sample: rewritten, never refused. Its records go to shard " + SampleShard +
		", which no stream has: the fences and watermark they leave are that shard's own, and replay's positions leave it out",
	sourceDynamoDB: "DynamoDB Streams sample: rewritten, never refused when its images carry a version attribute. Its consumers keep no position of the table's stream; " +
		"new sequence numbers and eventIDs make it a delivery of its own (cdc takes a change's version from the item's version attribute, which the samples carry; " +
		"a change without one is refused for cdc against a running stack)",
	sourceSQS: "SQS sample: rewritten, never refused. Queues have no position; new message ids (and FIFO sequence numbers) make it a delivery of its own",
	sourceFunctionURL: "function URL sample: rewritten, never refused. It is a request like any other: its events are accepted at now, " +
		"under a new Idempotency-Key",
	sourceSchedule: "schedule sample: its time is now, as the stack's own schedule would send it",
}

// SampleSafety says what kind of event a sample is and why its fresh copy
// (FreshSample) cannot corrupt a running stack, for make invoke to print;
// "" for a payload of no known event type (sent as it is).
func SampleSafety(payload []byte) string {
	var root map[string]any
	if json.Unmarshal(payload, &root) != nil {
		return ""
	}
	return sampleSafety[sourceOf(root)]
}

// recordsOf returns the sample's Records when the first one comes from
// source ("aws:kinesis", "aws:dynamodb", "aws:sqs"; SQS spells the member
// eventSource too).
func recordsOf(root map[string]any, source string) []any {
	recs, _ := root["Records"].([]any)
	if len(recs) == 0 {
		return nil
	}
	first, _ := recs[0].(map[string]any)
	if s, _ := first["eventSource"].(string); s != source {
		return nil
	}
	return recs
}

// timeFormat is how a member spells a time.
type timeFormat int

const (
	rfc3339     timeFormat = iota // "2026-11-29T10:41:12.4Z"
	epochSec                      // 1795948872.4 (a number)
	epochSecStr                   // "1795948869"
	epochMsStr                    // "1795949000000"
	epochMs                       // 1795948869000 (a number)
	clfTime                       // "29/Nov/2026:10:41:09 +0000" (a function URL's requestContext.time)
)

const clfLayout = "02/Jan/2006:15:04:05 -0700"

// timeSlot is one time in the sample: where it is and how it is spelled.
type timeSlot struct {
	obj    map[string]any
	key    string
	path   string
	format timeFormat
	at     time.Time
}

// seqSlot is one sequence number in the sample.
type seqSlot struct {
	obj    map[string]any
	key    string
	path   string
	prefix string // kept before the number (an eventID's "<shard>:")
	seq    string
}

type freshener struct {
	now   time.Time
	times []timeSlot
	seqs  map[string]string // original → new, filled by finish
	slots []seqSlot
	// nested re-encodes a document decoded from a member (Kinesis data, a
	// body) once its times are moved.
	nested []func() error
	// notes are the rewrites that are not times or sequence numbers, by
	// path, in order.
	notes []Rewrite
	// shift is how far finish moved the times.
	shift time.Duration
	// idSuffix is appended to every event id and task id the sample
	// carries: one for the whole sample, new at each invocation.
	idSuffix string
	// ids counts the ids rewritten (nested documents with one are written
	// back).
	ids int
	// errs are ids that cannot take the suffix.
	errs []error
}

func (f *freshener) note(path, what string) {
	for i := range f.notes {
		if f.notes[i].Path == path && f.notes[i].What == what {
			f.notes[i].Count++
			return
		}
	}
	f.notes = append(f.notes, Rewrite{Path: path, Count: 1, What: what})
}

// timeAt registers obj[key] as a time when it is one in format.
func (f *freshener) timeAt(obj map[string]any, key, path string, format timeFormat) {
	v, ok := obj[key]
	if !ok {
		return
	}
	var at time.Time
	switch format {
	case rfc3339, epochSecStr, epochMsStr, clfTime:
		s, ok := v.(string)
		if !ok {
			return
		}
		var err error
		switch format {
		case rfc3339:
			at, err = time.Parse(time.RFC3339Nano, s)
		case clfTime:
			at, err = time.Parse(clfLayout, s)
		default:
			var n int64
			n, err = strconv.ParseInt(s, 10, 64)
			if format == epochSecStr {
				at = time.Unix(n, 0)
			} else {
				at = time.UnixMilli(n)
			}
		}
		if err != nil {
			return
		}
	case epochSec, epochMs:
		n, ok := v.(json.Number)
		if !ok {
			return
		}
		x, err := n.Float64()
		if err != nil || math.IsInf(x, 0) || x < 0 {
			return
		}
		if format == epochSec {
			sec, frac := math.Modf(x)
			at = time.Unix(int64(sec), int64(math.Round(frac*1e3))*int64(time.Millisecond))
		} else {
			at = time.UnixMilli(int64(x))
		}
	}
	f.times = append(f.times, timeSlot{obj: obj, key: key, path: path, format: format, at: at})
}

// envelopes registers the envelope times of a document decoded from a
// record's data or a body, at any depth (a batch is an array of envelopes;
// rules' /test body holds them under "events"), and gives its envelopes
// and tasks fresh ids (envelopeIDs).
func (f *freshener) envelopes(doc any, path string) {
	switch t := doc.(type) {
	case map[string]any:
		for _, k := range []string{"occurredAt", "sentAt", "receivedAt"} {
			f.timeAt(t, k, path+"."+k, rfc3339)
		}
		f.envelopeIDs(t, path)
		for _, k := range sortedKeys(t) {
			switch t[k].(type) {
			case map[string]any, []any:
				f.envelopes(t[k], path+"."+k)
			}
		}
	case []any:
		for _, e := range t {
			f.envelopes(e, path+"[]")
		}
	}
}

// idSeparator and idTokenBytes make a fresh id: the sample's id, then
// idSeparator and idTokenBytes random bytes in hex, one token per
// invocation.
const (
	idSeparator  = "~"
	idTokenBytes = 5
)

// envelopeIDs gives obj, when it is an envelope (an id, a type and an
// occurredAt), a fresh id: the consumers suppress an id they accepted
// before (the aggregate, enrich, join and CEP ledgers judge an event by its
// key and id), and this copy's times differ from the last one's, so the
// sample's id again would be set aside as an id reused with other content
// (duplicate-conflict) instead of counted. Every id gets the invocation's
// one suffix, so ids the sample repeats (a producer's retry, a FIFO
// message's deduplication id) stay equal to each other and different ids
// stay different. A task's data.taskId, the worker's idempotency key, and
// data.after, the task it waits for, get it too.
//
// Kept: an id that names an entity's version ("<aggregateId>/<version>" of
// event sourcing, "<table>/<key>/<version>" of cdc, data.version being the
// number after the last slash): its consumers order it by that version,
// not by a ledger of ids, and a new one would name a version that does
// not exist. Objects that are no envelope (a command's id, a rule's id)
// are kept too: a command sent again is a replay, as the sample shows.
func (f *freshener) envelopeIDs(obj map[string]any, path string) {
	id, ok := obj["id"].(string)
	if !ok || id == "" {
		return
	}
	if _, ok := obj["type"].(string); !ok {
		return
	}
	if _, ok := obj["occurredAt"]; !ok {
		return
	}
	data, _ := obj["data"].(map[string]any)
	if versionedID(id, data) {
		f.note(path+".id", "kept: <entity>/<version>, an id its consumers order by version, not a delivery's")
		return
	}
	f.freshID(obj, "id", path+".id")
	if obj["type"] == worker.TaskType && data != nil {
		f.freshID(data, "taskId", path+".data.taskId")
		f.freshID(data, "after", path+".data.after")
	}
}

// versionedID reports whether id ends in "/<data.version>".
func versionedID(id string, data map[string]any) bool {
	v, ok := data["version"].(json.Number)
	i := strings.LastIndexByte(id, '/')
	return ok && i >= 0 && id[i+1:] == v.String()
}

// freshID appends the invocation's suffix to the string obj[key].
func (f *freshener) freshID(obj map[string]any, key, path string) {
	old, ok := obj[key].(string)
	if !ok || old == "" {
		return
	}
	fresh := old + f.idSuffix
	if len(fresh) > stream.MaxIDLength {
		f.errs = append(f.errs, fmt.Errorf("sample: %s %q: %d bytes with the fresh suffix %q; ids are at most %d", path, old, len(fresh), f.idSuffix, stream.MaxIDLength))
		return
	}
	obj[key] = fresh
	f.ids++
	// One line a path, its first id as the example: a line an id would
	// repeat itself for a sample of many.
	for i := range f.notes {
		if f.notes[i].Path == path && strings.HasPrefix(f.notes[i].What, idNote) {
			f.notes[i].Count++
			return
		}
	}
	f.notes = append(f.notes, Rewrite{Path: path, Count: 1, What: fmt.Sprintf("%s%s (%s → %s), new for this invocation (one suffix: ids the sample repeats stay repeated)",
		idNote, f.idSuffix, strictjson.QuoteCut(old, 40), strictjson.QuoteCut(fresh, 40+len(f.idSuffix)))})
}

// idNote begins the rewrite line of a path's ids.
const idNote = "each id gets the suffix "

// seqAt registers obj[key] as a sequence number (after prefix).
func (f *freshener) seqAt(obj map[string]any, key, path, prefix string) {
	s, ok := obj[key].(string)
	if !ok {
		return
	}
	seq, ok := strings.CutPrefix(s, prefix)
	if !ok || seq == "" || strings.Trim(seq, "0123456789") != "" {
		return
	}
	f.seqs[seq] = ""
	f.slots = append(f.slots, seqSlot{obj: obj, key: key, path: path, prefix: prefix, seq: seq})
}

// embedded decodes the JSON document in obj[key] (base64 when b64) and
// registers its envelope times; the document is written back by finish.
// A value that is not JSON (a poison record's bytes), or that the one
// strict reader refuses (a key twice, text that is not UTF-8: a hostile
// sample, sent to see it set aside), is left alone byte for byte: decoded
// and written back it would lose what makes it what it is.
func (f *freshener) embedded(obj map[string]any, key, path string, b64 bool) any {
	s, ok := obj[key].(string)
	if !ok {
		return nil
	}
	raw := []byte(s)
	if b64 {
		var err error
		if raw, err = base64.StdEncoding.DecodeString(s); err != nil {
			return nil
		}
	}
	if strictjson.Check(raw, strictjson.Options{MaxBytes: len(raw) + 1}) != nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil || dec.More() {
		return nil
	}
	times, ids := len(f.times), f.ids
	f.envelopes(doc, path)
	if len(f.times) == times && f.ids == ids {
		return doc
	}
	f.nested = append(f.nested, func() error {
		out, err := marshalSample(doc)
		if err != nil {
			return fmt.Errorf("sample: %s: %w", path, err)
		}
		if b64 {
			obj[key] = base64.StdEncoding.EncodeToString(out)
		} else {
			obj[key] = string(out)
		}
		return nil
	})
	return doc
}

func (f *freshener) kinesis(root map[string]any) {
	for _, r := range recordsOf(root, "aws:kinesis") {
		rec, _ := r.(map[string]any)
		if rec == nil {
			continue
		}
		if id, ok := rec["eventID"].(string); ok {
			if shard, _, ok := strings.Cut(id, ":"); ok {
				f.seqAt(rec, "eventID", "Records[].eventID", shard+":")
			}
		}
		k, _ := rec["kinesis"].(map[string]any)
		if k == nil {
			continue
		}
		f.seqAt(k, "sequenceNumber", "Records[].kinesis.sequenceNumber", "")
		f.timeAt(k, "approximateArrivalTimestamp", "Records[].kinesis.approximateArrivalTimestamp", epochSec)
		f.embedded(k, "data", "Records[].kinesis.data", true)
	}
	// A tumbling-window invocation: its shard and window.
	if s, ok := root["shardId"].(string); ok && s != SampleShard {
		root["shardId"] = SampleShard
		f.note("shardId", fmt.Sprintf("%s → %s (a shard no stream has)", s, SampleShard))
	}
	if w, ok := root["window"].(map[string]any); ok {
		f.timeAt(w, "start", "window.start", rfc3339)
		f.timeAt(w, "end", "window.end", rfc3339)
	}
}

func (f *freshener) dynamodb(root map[string]any) {
	for _, r := range recordsOf(root, "aws:dynamodb") {
		rec, _ := r.(map[string]any)
		if rec == nil {
			continue
		}
		if _, ok := rec["eventID"].(string); ok {
			rec["eventID"] = randomHex(16)
			f.note("Records[].eventID", "a new random id")
		}
		d, _ := rec["dynamodb"].(map[string]any)
		if d == nil {
			continue
		}
		f.seqAt(d, "SequenceNumber", "Records[].dynamodb.SequenceNumber", "")
		f.timeAt(d, "ApproximateCreationDateTime", "Records[].dynamodb.ApproximateCreationDateTime", epochSec)
	}
}

func (f *freshener) sqs(root map[string]any) {
	for _, r := range recordsOf(root, "aws:sqs") {
		rec, _ := r.(map[string]any)
		if rec == nil {
			continue
		}
		if _, ok := rec["messageId"].(string); ok {
			rec["messageId"] = newRequestID()
			f.note("Records[].messageId", "a new random id")
		}
		if a, ok := rec["attributes"].(map[string]any); ok {
			f.timeAt(a, "SentTimestamp", "Records[].attributes.SentTimestamp", epochMsStr)
			f.timeAt(a, "ApproximateFirstReceiveTimestamp", "Records[].attributes.ApproximateFirstReceiveTimestamp", epochMsStr)
			f.seqAt(a, "SequenceNumber", "Records[].attributes.SequenceNumber", "")
		}
		body := f.embedded(rec, "body", "Records[].body", false)
		// A FIFO message's deduplication id is its envelope's id: the
		// same suffix keeps them one.
		if a, ok := rec["attributes"].(map[string]any); ok {
			f.freshID(a, "MessageDeduplicationId", "Records[].attributes.MessageDeduplicationId")
		}
		// Lambda's on-failure record names a batch by shard and sequence
		// range: the quarantine function reads those records back, so a
		// real shard's would be set aside as failed.
		b, _ := body.(map[string]any)
		if b == nil {
			continue
		}
		for _, info := range []string{"KinesisBatchInfo", "DDBStreamBatchInfo"} {
			bi, _ := b[info].(map[string]any)
			if bi == nil {
				continue
			}
			path := "Records[].body." + info
			if s, ok := bi["shardId"].(string); ok && s != SampleShard {
				bi["shardId"] = SampleShard
				f.note(path+".shardId", fmt.Sprintf("%s → %s (a shard no stream has)", s, SampleShard))
			}
			f.seqAt(bi, "startSequenceNumber", path+".startSequenceNumber", "")
			f.seqAt(bi, "endSequenceNumber", path+".endSequenceNumber", "")
			f.timeAt(bi, "approximateArrivalOfFirstRecord", path+".approximateArrivalOfFirstRecord", rfc3339)
			f.timeAt(bi, "approximateArrivalOfLastRecord", path+".approximateArrivalOfLastRecord", rfc3339)
		}
		if b["KinesisBatchInfo"] != nil || b["DDBStreamBatchInfo"] != nil {
			f.timeAt(b, "timestamp", "Records[].body.timestamp", rfc3339)
			f.rewriteBody(rec, "body", b)
		}
	}
}

// rewriteBody makes sure rec[key] is written back from doc (an on-failure
// record may carry positions but no envelope time).
func (f *freshener) rewriteBody(rec map[string]any, key string, doc any) {
	f.nested = append(f.nested, func() error {
		out, err := marshalSample(doc)
		if err != nil {
			return err
		}
		rec[key] = string(out)
		return nil
	})
}

func (f *freshener) functionURL(root map[string]any) {
	if rc, ok := root["requestContext"].(map[string]any); ok {
		f.timeAt(rc, "time", "requestContext.time", clfTime)
		f.timeAt(rc, "timeEpoch", "requestContext.timeEpoch", epochMs)
	}
	if h, ok := root["headers"].(map[string]any); ok {
		for _, k := range sortedKeys(h) {
			switch strings.ToLower(k) {
			case "x-tributary-timestamp":
				f.timeAt(h, k, "headers."+k, epochSecStr)
			case "x-tributary-signature":
				f.note("headers."+k, "kept: it no longer matches the rewritten body and time (a stack deployed with AWS_IAM, as the local one is, does not check it; with -c tributary:ingestAuth=HMAC the request is a 401)")
			case "idempotency-key":
				old, _ := h[k].(string)
				key := newRequestID()
				if strings.HasPrefix(old, `"`) {
					key = `"` + key + `"`
				}
				h[k] = key
				f.note("headers."+k, fmt.Sprintf("%s → %s (a key belongs to one body: the rewritten one is another)", old, key))
			}
		}
	}
	b64, _ := root["isBase64Encoded"].(bool)
	f.embedded(root, "body", "body", b64)
}

// finish moves the times, numbers the sequence numbers and writes the
// decoded documents back.
func (f *freshener) finish() error {
	if len(f.errs) > 0 {
		return errors.Join(f.errs...)
	}
	if len(f.seqs) >= maxSamplePositions {
		return fmt.Errorf("sample: %d sequence numbers; at most %d are renumbered", len(f.seqs), maxSamplePositions-1)
	}
	if len(f.times) > 0 {
		latest := f.times[0].at
		for _, t := range f.times[1:] {
			if t.at.After(latest) {
				latest = t.at
			}
		}
		// Whole minutes, rounded down: the latest time lands in the
		// minute up to now, never after it.
		shift := f.now.Sub(latest)
		if m := shift.Truncate(time.Minute); m > shift {
			shift = m - time.Minute
		} else {
			shift = m
		}
		for _, t := range f.times {
			setTime(t, t.at.Add(shift))
		}
		f.shift = shift
	}
	if len(f.seqs) > 0 {
		originals := make([]string, 0, len(f.seqs))
		for s := range f.seqs {
			originals = append(originals, s)
		}
		slices.SortFunc(originals, compareDecimal)
		base := strconv.FormatInt(f.now.UnixNano(), 10)
		for i, s := range originals {
			f.seqs[s] = fmt.Sprintf("%s%06d", base, i)
		}
		for _, s := range f.slots {
			prefix := s.prefix
			if s.key == "eventID" && prefix != "" {
				prefix = SampleShard + ":"
			}
			s.obj[s.key] = prefix + f.seqs[s.seq]
		}
	}
	for _, n := range f.nested {
		if err := n(); err != nil {
			return err
		}
	}
	return nil
}

func setTime(t timeSlot, at time.Time) {
	switch t.format {
	case rfc3339:
		t.obj[t.key] = at.UTC().Format(time.RFC3339Nano)
	case clfTime:
		t.obj[t.key] = at.UTC().Format(clfLayout)
	case epochSecStr:
		t.obj[t.key] = strconv.FormatInt(at.Unix(), 10)
	case epochMsStr:
		t.obj[t.key] = strconv.FormatInt(at.UnixMilli(), 10)
	case epochMs:
		t.obj[t.key] = json.Number(strconv.FormatInt(at.UnixMilli(), 10))
	case epochSec:
		t.obj[t.key] = json.Number(strconv.FormatFloat(float64(at.UnixMilli())/1e3, 'f', -1, 64))
	}
}

// rewrites lists what finish did, one line per path: the times, then the
// positions, then the rest.
func (f *freshener) rewrites() []Rewrite {
	var out []Rewrite
	at := map[string]int{}
	add := func(path, what string) *Rewrite {
		if i, ok := at[path+"\x00"+what]; ok {
			out[i].Count++
			return &out[i]
		}
		at[path+"\x00"+what] = len(out)
		out = append(out, Rewrite{Path: path, Count: 1, What: what})
		return &out[len(out)-1]
	}
	for _, t := range f.times {
		add(t.path, fmt.Sprintf("moved %s, the latest into the minute before now", fmtShift(f.shift)))
	}
	// Sequence numbers: the range each path got.
	ranges := map[string][2]string{}
	for _, s := range f.slots {
		n := f.seqs[s.seq]
		r, ok := ranges[s.path]
		if !ok || compareDecimal(n, r[0]) < 0 {
			r[0] = n
		}
		if !ok || compareDecimal(n, r[1]) > 0 {
			r[1] = n
		}
		ranges[s.path] = r
		add(s.path, "")
	}
	for i := range out {
		r, ok := ranges[out[i].Path]
		if !ok || out[i].What != "" {
			continue
		}
		span := r[0]
		if r[1] != r[0] {
			span += "…" + r[1]
		}
		out[i].What = "renumbered " + span + " (now's Unix nanoseconds and the sample's order)"
		if strings.HasSuffix(out[i].Path, "eventID") {
			out[i].What = SampleShard + ":<sequence number>, a shard no stream has, numbered as sequenceNumber"
		}
	}
	for _, n := range f.notes {
		for range n.Count {
			add(n.Path, n.What)
		}
	}
	return out
}

// fmtShift says a whole number of minutes as days, hours and minutes
// ("+2d14h51m").
func fmtShift(d time.Duration) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	mins := int64(d / time.Minute)
	days, hours, m := mins/(24*60), mins/60%24, mins%60
	var b strings.Builder
	b.WriteString(sign)
	if days > 0 {
		fmt.Fprintf(&b, "%dd", days)
	}
	if hours > 0 {
		fmt.Fprintf(&b, "%dh", hours)
	}
	if m > 0 || mins == 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	return b.String()
}

// compareDecimal orders decimal strings as the numbers they spell.
func compareDecimal(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func marshalSample(doc any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
