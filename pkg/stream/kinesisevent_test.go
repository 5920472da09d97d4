package stream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// decodeKinesisStd is the reference: what the aggregate function's entry
// point did before KinesisBatch, a probe for the window and then
// encoding/json into aws-lambda-go's types.
func decodeKinesisStd(raw []byte) (ev events.KinesisTimeWindowEvent, window bool, err error) {
	var probe struct {
		Window json.RawMessage `json:"window"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return ev, false, err
	}
	if len(probe.Window) > 0 && string(probe.Window) != "null" {
		err = json.Unmarshal(raw, &ev)
		return ev, true, err
	}
	err = json.Unmarshal(raw, &ev.KinesisEvent)
	return ev, false, err
}

// compareKinesis decodes in with b and with the reference and describes
// the first difference ("" if none: both fail, or both give the same
// event).
func compareKinesis(b *KinesisBatch, in []byte) string {
	want, window, wantErr := decodeKinesisStd(in)
	gotErr := b.Decode(in)
	switch {
	case (gotErr == nil) != (wantErr == nil):
		return fmt.Sprintf("error %v, encoding/json %v", gotErr, wantErr)
	case gotErr != nil:
		var ke *KinesisEventError
		var se *EventShapeError
		if notObject := CheckEventObject(in, EventKinesis) != nil; notObject && !errors.As(gotErr, &se) {
			return fmt.Sprintf("error %T %v, want an *EventShapeError (the event is not a JSON object)", gotErr, gotErr)
		} else if !notObject && !errors.As(gotErr, &ke) {
			return fmt.Sprintf("error %T %v, want a *KinesisEventError", gotErr, gotErr)
		}
		if len(b.Records) != 0 || b.TimeWindow {
			return fmt.Sprintf("after an error the batch holds %d records (window %t)", len(b.Records), b.TimeWindow)
		}
		return ""
	case b.TimeWindow != window:
		return fmt.Sprintf("TimeWindow %t, want %t", b.TimeWindow, window)
	case !reflect.DeepEqual(b.TimeWindowProperties, want.TimeWindowProperties):
		return fmt.Sprintf("window properties %+v, want %+v", b.TimeWindowProperties, want.TimeWindowProperties)
	case len(b.Records) != len(want.Records):
		return fmt.Sprintf("%d records, want %d", len(b.Records), len(want.Records))
	}
	for i := range b.Records {
		if got := b.Records[i].EventRecord(); !reflect.DeepEqual(got, want.Records[i]) {
			return fmt.Sprintf("record %d:\n got %+v\nwant %+v", i, got, want.Records[i])
		}
		if diff := compareEnvelopes(&b.Records[i], &want.Records[i]); diff != "" {
			return fmt.Sprintf("record %d's envelope: %s", i, diff)
		}
	}
	return ""
}

// compareEnvelopes decodes r's envelope with DecodeEnvelope and want's with
// DecodeKinesis and describes the first difference ("" if none).
func compareEnvelopes(r *KinesisRecord, want *events.KinesisEventRecord) string {
	gotEnv, wantEnv := prefilled(), prefilled()
	gotErr := r.DecodeEnvelope(&gotEnv)
	wantErr := DecodeKinesis(want, &wantEnv)
	if !reflect.DeepEqual(gotErr, wantErr) {
		return fmt.Sprintf("error %v, DecodeKinesis %v", gotErr, wantErr)
	}
	return envelopeDiff(&gotEnv, &wantEnv)
}

func sampleEvents(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("../../events/aggregate/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no sample events in events/aggregate: %v", err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// lambdaRecord is one record as Lambda writes it, compact.
func lambdaRecord(seq, pk string, data []byte, arrival string) string {
	return `{"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":"` + pk + `","sequenceNumber":"` + seq +
		`","data":"` + base64.StdEncoding.EncodeToString(data) + `","approximateArrivalTimestamp":` + arrival +
		`},"eventSource":"aws:kinesis","eventVersion":"1.0","eventID":"shardId-000000000001:` + seq +
		`","eventName":"aws:kinesis:record","invokeIdentityArn":"arn:aws:iam::123456789012:role/r","awsRegion":"eu-west-1","eventSourceARN":"arn:aws:kinesis:eu-west-1:123456789012:stream/s"}`
}

const (
	seqA = "49601189658422359378836298521827638475320189012309704721"
	seqB = "49601189658422359378836298521827638475320189012309704722"
)

var kinesisTable = []struct {
	name string
	in   string
}{
	{"empty object", `{}`},
	{"no records", `{"Records":[]}`},
	{"records null", `{"Records":null}`},
	{"plain", `{"Records":[` + lambdaRecord(seqA, "user-1", []byte(`{"id":"a"}`), "1795948872.412") + `,` + lambdaRecord(seqB, "user-2", []byte("x"), "1795948873") + `]}`},
	{"pretty", "{\n  \"Records\" : [ \n" + lambdaRecord(seqA, "k", []byte("abc"), "1.5") + "\n ] \n}\n"},
	{"window", `{"Records":[` + lambdaRecord(seqA, "k", []byte("abc"), "1795948872.4") + `],"window":{"start":"2026-11-29T10:41:00Z","end":"2026-11-29T10:42:00Z"},"state":{"wm":"AAE=","seq":"` + seqA + `"},"shardId":"shardId-000000000001","eventSourceARN":"arn:aws:kinesis:eu-west-1:1:stream/s","isFinalInvokeForWindow":true,"isWindowTerminatedEarly":false}`},
	{"window first", `{"window":{"start":"2026-11-29T10:41:00+02:00","end":"2026-11-29T10:42:00.5Z"},"isFinalInvokeForWindow":false,"Records":[]}`},
	{"window empty", `{"window":{},"Records":[]}`},
	{"window null", `{"window":null,"state":{"a":"b"},"shardId":"s","Records":[]}`},
	{"window null last", `{"window":{"start":"2026-11-29T10:41:00Z"},"window":null,"Records":[]}`},
	{"window twice merges", `{"window":{"start":"2026-11-29T10:41:00Z"},"window":{"end":"2026-11-29T10:42:00Z"}}`},
	{"window bad start", `{"window":{"start":"yesterday"}}`},
	{"window null start", `{"window":{"start":null}}`},
	{"window number", `{"window":5}`},
	{"window bad but null last", `{"window":5,"window":null}`},
	{"state null", `{"window":{},"state":null}`},
	{"state empty", `{"window":{},"state":{}}`},
	{"state twice merges", `{"window":{},"state":{"a":"1","b":"2"},"state":{"b":"3","c":null}}`},
	{"state reset by null", `{"window":{},"state":{"a":"1"},"state":null,"state":{"c":"3"}}`},
	{"state bad value", `{"window":{},"state":{"a":1}}`},
	{"state bad value plain", `{"state":{"a":1},"Records":[]}`},
	{"state escapes", `{"window":{},"state":{"a\u00e9\n":"\ud83d\ude00\\","\ud800":"` + "\xff" + `"}}`},
	{"shard id number plain", `{"shardId":5,"isFinalInvokeForWindow":"yes","Records":[]}`},
	{"shard id number window", `{"window":{},"shardId":5}`},
	{"final string window", `{"window":{},"isFinalInvokeForWindow":"true"}`},
	{"final null", `{"window":{},"isFinalInvokeForWindow":true,"isFinalInvokeForWindow":null}`},
	{"folded keys", `{"RECORDS":[{"KINESIS":{"Data":"YQ==","SequenceNumber":"1","partitionkey":"p"},"EventId":"e","eventsourcearn":"arn"}],"Window":{"START":"2026-11-29T10:41:00Z"},"ShardID":"s"}`},
	{"unicode folded keys", `{"Records":[{"kinesis":{"ſequenceNumber":"1","\u212ainesisSchemaVersion":"1.0","sequenceNumber":"2"}}]}`},
	{"escaped keys", `{"\u0052ecords":[{"\u0065ventID":"e","kinesis":{"d\u0061ta":"YQ=="}}]}`},
	{"exact beats folded", `{"Records":[{"eventSourceARN":"exact","eventSourceArn":"folded"}]}`},
	{"escapes in strings", `{"Records":[{"eventID":"a\"b\\c\/d\u00e9\ud83d\ude00\ud800x","kinesis":{"partitionKey":"\t\n","sequenceNumber":"1\u0032"}}]}`},
	{"invalid utf-8", "{\"Records\":[{\"eventID\":\"a\xffb\",\"kinesis\":{\"partitionKey\":\"\xc3\"}}]}"},
	{"data escaped slash", `{"Records":[{"kinesis":{"data":"YWJj\/w=="}}]}`},
	{"data newline", `{"Records":[{"kinesis":{"data":"YWJj\nZGVm"}}]}`},
	{"data empty", `{"Records":[{"kinesis":{"data":""}}]}`},
	{"data raw newline", "{\"Records\":[{\"kinesis\":{\"data\":\"YWJj\nZGVm\"}}]}"},
	{"data raw carriage return", "{\"Records\":[{\"kinesis\":{\"data\":\"YWJj\rZGVm\"}}]}"},
	{"data escaped quote", `{"Records":[{"kinesis":{"data":"YW\"Jj"}}]}`},
	{"data unterminated", `{"Records":[{"kinesis":{"data":"YWJj`},
	{"text like the previous record's", `{"Records":[{"awsRegion":"eu-west-1","eventSource":"aws:kinesis"},{"awsRegion":"eu-west-1x","eventSource":"aws:kinesis\u0000"},{"awsRegion":"eu-west-1","eventSource":"aws\u003akinesis"},{"awsRegion":"eu-west-1"}]}`},
	{"data null", `{"Records":[{"kinesis":{"data":"YQ==","data":null}}]}`},
	{"data bad base64", `{"Records":[{"kinesis":{"data":"!!!!"}}]}`},
	{"data unpadded", `{"Records":[{"kinesis":{"data":"YQ"}}]}`},
	{"data array", `{"Records":[{"kinesis":{"data":[1,2,3]}}]}`},
	{"data number", `{"Records":[{"kinesis":{"data":5}}]}`},
	{"arrival null", `{"Records":[{"kinesis":{"approximateArrivalTimestamp":null}}]}`},
	{"arrival negative", `{"Records":[{"kinesis":{"approximateArrivalTimestamp":-1.25}}]}`},
	{"arrival exponent", `{"Records":[{"kinesis":{"approximateArrivalTimestamp":1.795948872412e9}}]}`},
	{"arrival huge", `{"Records":[{"kinesis":{"approximateArrivalTimestamp":1e300}}]}`},
	{"arrival overflow", `{"Records":[{"kinesis":{"approximateArrivalTimestamp":1e400}}]}`},
	{"arrival string", `{"Records":[{"kinesis":{"approximateArrivalTimestamp":"1795948872"}}]}`},
	{"arrival fine digits", `{"Records":[{"kinesis":{"approximateArrivalTimestamp":1795948872.123456789123}}]}`},
	{"kinesis twice merges", `{"Records":[{"kinesis":{"partitionKey":"p","data":"YQ=="},"kinesis":{"sequenceNumber":"9"}}]}`},
	{"kinesis null", `{"Records":[{"kinesis":{"partitionKey":"p"},"kinesis":null}]}`},
	{"kinesis string", `{"Records":[{"kinesis":"x"}]}`},
	{"record null", `{"Records":[null,{"eventID":"e"}]}`},
	{"record number", `{"Records":[1]}`},
	{"records twice", `{"Records":[{"eventID":"a"},{"eventID":"b"}],"Records":[{"awsRegion":"r"}]}`},
	{"records object", `{"Records":{}}`},
	{"string null keeps", `{"Records":[{"eventID":"a","eventID":null}]}`},
	{"string number", `{"Records":[{"eventID":1}]}`},
	{"unknown members", `{"x":[{"y":{}},1,"z",null,true],"Records":[{"kinesis":{"q":[1,{"a":"b"}]},"extra":{"eventID":"no"}}]}`},
	{"top null", `null`},
	{"top array", `[]`},
	{"top string", `"Records"`},
	{"empty input", ``},
	{"trailing comma", `{"Records":[],}`},
	{"trailing garbage", `{"Records":[]} x`},
	{"truncated", `{"Records":[{"eventID":"a"`},
	{"bad number", `{"Records":[{"kinesis":{"approximateArrivalTimestamp":01}}]}`},
}

// TestKinesisBatchMatchesEncodingJSON: every table event decodes as
// encoding/json decodes it into aws-lambda-go's types, or both fail.
func TestKinesisBatchMatchesEncodingJSON(t *testing.T) {
	var b KinesisBatch
	for _, tt := range kinesisTable {
		t.Run(tt.name, func(t *testing.T) {
			if diff := compareKinesis(&b, []byte(tt.in)); diff != "" {
				t.Errorf("%s\ninput %s", diff, tt.in)
			}
		})
	}
	for name, in := range sampleEvents(t) {
		t.Run(name, func(t *testing.T) {
			if diff := compareKinesis(&b, in); diff != "" {
				t.Error(diff)
			}
		})
	}
}

// TestKinesisBatchFastPath: events as Lambda sends them, and the tricky
// but well-formed ones, are decoded by the single pass, not by the
// fallback.
func TestKinesisBatchFastPath(t *testing.T) {
	fast := []string{"plain", "pretty", "window", "window first", "window null", "state twice merges", "state reset by null",
		"state escapes", "shard id number plain", "folded keys", "unicode folded keys", "escaped keys", "exact beats folded",
		"escapes in strings", "invalid utf-8", "data escaped slash", "data newline", "data empty", "data null",
		"text like the previous record's",
		"arrival null", "arrival negative", "arrival exponent", "kinesis twice merges", "record null", "unknown members"}
	inputs := map[string]string{}
	for _, tt := range kinesisTable {
		inputs[tt.name] = tt.in
	}
	for name, in := range sampleEvents(t) {
		inputs[name] = string(in)
		fast = append(fast, name)
	}
	for _, name := range fast {
		var b KinesisBatch
		if !b.decodeFast([]byte(inputs[name])) {
			t.Errorf("%s: the single pass gave up on it", name)
		}
	}
}

// TestKinesisBatchRecordFields: the values a consumer reads, from a
// sample event, checked by value rather than against encoding/json.
func TestKinesisBatchRecordFields(t *testing.T) {
	var b KinesisBatch
	if err := b.Decode(sampleEvents(t)["kinesis-tumbling-window.json"]); err != nil {
		t.Fatal(err)
	}
	if !b.TimeWindow || b.ShardID != "shardId-000000000000" || b.IsFinalInvokeForWindow || b.State == nil || len(b.State) != 0 {
		t.Errorf("window properties: TimeWindow %t, %+v", b.TimeWindow, b.TimeWindowProperties)
	}
	if want := time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC); !b.Window.Start.Equal(want) {
		t.Errorf("window start %s, want %s", b.Window.Start, want)
	}
	if len(b.Records) != 3 {
		t.Fatalf("%d records, want 3", len(b.Records))
	}
	r := b.Records[1]
	if r.SequenceNumber != "49601189658422359378836298521827638475320189012309704722" || r.PartitionKey != "user-42" ||
		r.EventID != "shardId-000000000000:"+r.SequenceNumber || r.KinesisSchemaVersion != "1.0" ||
		r.EventSourceARN != "arn:aws:kinesis:us-east-1:123456789012:stream/Tributary-Events" {
		t.Errorf("record 1: %+v", r)
	}
	if want := time.Unix(1795948901, 250000000); r.ApproximateArrivalTimestamp.Sub(want).Abs() > time.Microsecond {
		t.Errorf("arrival %s, want %s", r.ApproximateArrivalTimestamp, want)
	}
	var e Envelope
	if err := r.DecodeEnvelope(&e); err != nil {
		t.Fatal(err)
	}
	if e.ID != "evt-0002" || e.Key != "user-42" || string(e.Data) != `{"path":"/pricing","ms":800}` {
		t.Errorf("envelope %+v", e)
	}
}

// TestKinesisBatchReuse: decoding into the same batch again replaces
// everything, and what a consumer kept of the earlier batch's strings is
// unchanged.
func TestKinesisBatchReuse(t *testing.T) {
	var b KinesisBatch
	big := `{"Records":[` + lambdaRecord(seqA, "first", []byte("first data"), "1") + `,` + lambdaRecord(seqB, "second", []byte("second data"), "2") +
		`],"window":{"start":"2026-11-29T10:41:00Z"},"state":{"a":"1","b":"2"},"isFinalInvokeForWindow":true}`
	if err := b.Decode([]byte(big)); err != nil {
		t.Fatal(err)
	}
	kept := b.Records[1].PartitionKey
	keptState := b.State["a"]
	small := `{"Records":[` + lambdaRecord(seqB, "third", []byte("3"), "3") + `]}`
	if err := b.Decode([]byte(small)); err != nil {
		t.Fatal(err)
	}
	if len(b.Records) != 1 || b.Records[0].PartitionKey != "third" || string(b.Records[0].Data) != "3" {
		t.Errorf("second batch: %+v", b.Records)
	}
	if b.TimeWindow || b.State != nil || b.IsFinalInvokeForWindow || !b.Window.Start.IsZero() {
		t.Errorf("the first batch's window properties survived: %t %+v", b.TimeWindow, b.TimeWindowProperties)
	}
	if stale := b.Records[:2][1]; stale.PartitionKey != "" || stale.Data != nil {
		t.Errorf("the slot past the batch still holds the first batch's record: %+v", stale)
	}
	if kept != "second" || keptState != "1" {
		t.Errorf("strings kept from the first batch changed: %q %q", kept, keptState)
	}
	// Appending to one record's data does not reach the next record's.
	if err := b.Decode([]byte(big)); err != nil {
		t.Fatal(err)
	}
	_ = append(b.Records[0].Data, "XXXXXXXXXXXXXXXXXXXX"...)
	if string(b.Records[1].Data) != "second data" {
		t.Errorf("appending to record 0's data changed record 1's: %q", b.Records[1].Data)
	}
	// A failed decode leaves an empty batch.
	if err := b.Decode([]byte(`{"Records":[{"kinesis":{"data":"!"}}]}`)); err == nil {
		t.Fatal("bad base64 decoded")
	}
	if len(b.Records) != 0 {
		t.Errorf("%d records after a failed decode", len(b.Records))
	}
}

// TestKinesisBatchErrors: an event that fails names the record and field
// (the first bad value in the document), whichever path decoded it.
func TestKinesisBatchErrors(t *testing.T) {
	rec := func(seq string) string { return lambdaRecord(seq, "k", []byte("d"), "1") }
	tests := []struct {
		name   string
		in     string
		record int
		field  string
		msg    string
	}{
		{"bad base64", `{"Records":[` + rec("1") + `,` + rec("2") + `,{"kinesis":{"data":"!!"}}]}`, 2, "kinesis.data", "Records[2].kinesis.data: illegal base64 data"},
		{"partition key number", `{"Records":[` + rec("1") + `,{"kinesis":{"partitionKey":7}}]}`, 1, "kinesis.partitionKey", "Records[1].kinesis.partitionKey: must be a JSON string, not a number"},
		{"folded key named canonically", `{"Records":[{"KINESIS":{"SEQUENCENUMBER":7}}]}`, 0, "kinesis.sequenceNumber", "Records[0].kinesis.sequenceNumber"},
		{"arrival string", `{"Records":[{"kinesis":{"approximateArrivalTimestamp":"x"}}]}`, 0, "kinesis.approximateArrivalTimestamp", "approximateArrivalTimestamp: must be a JSON number, not a string"},
		{"event id", `{"Records":[` + rec("1") + `,` + rec("2") + `,` + rec("3") + `,{"eventID":true}]}`, 3, "eventID", "Records[3].eventID: must be a JSON string, not a boolean"},
		{"record not object", `{"Records":[` + rec("1") + `,"x"]}`, 1, "", "Records[1]: must be a JSON object, not a string"},
		{"kinesis not object", `{"Records":[{"kinesis":[]}]}`, 0, "kinesis", "Records[0].kinesis: must be a JSON object, not an array"},
		{"records not array", `{"Records":"x"}`, -1, "Records", "kinesis event: Records: must be a JSON array, not a string"},
		{"truncated in record", `{"Records":[` + rec("1") + `,` + rec("2") + `,{"eventID":"a",`, 2, "", "Records[2]: unexpected end of JSON input"},
		{"data a number", `{"Records":[` + rec("1") + `,{"kinesis":{"data":42}}]}`, 1, "kinesis.data", "kinesis event: Records[1].kinesis.data: must be a JSON string (base64), not a number"},
		{"syntax in data", `{"Records":[` + rec("1") + `,{"kinesis":{"data":"YQ==}}]}`, 1, "kinesis.data", "Records[1].kinesis.data:"},
		{"window start", `{"window":{"start":"2026-11-29"},"Records":[]}`, -1, "window.start", "window.start: parsing time"},
		{"window type", `{"window":[],"Records":[]}`, -1, "window", "window: must be a JSON object, not an array"},
		{"state value", `{"window":{},"state":{"a":1}}`, -1, "state", "state: must be a JSON string, not a number"},
		{"final", `{"window":{},"isFinalInvokeForWindow":1}`, -1, "isFinalInvokeForWindow", "isFinalInvokeForWindow: must be a JSON boolean, not a number"},
		{"not json", `{"Records":[}`, 0, "", "invalid character"},
		// An event that is not an object is an *EventShapeError saying
		// what it is (TestNonObjectEventIsRefusedSayingWhatItIs).
	}
	var b KinesisBatch
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := b.Decode([]byte(tt.in))
			var ke *KinesisEventError
			if !errors.As(err, &ke) {
				t.Fatalf("error %v, want a *KinesisEventError", err)
			}
			if ke.Record != tt.record || ke.Field != tt.field || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error record %d field %q %q, want record %d field %q containing %q", ke.Record, ke.Field, err, tt.record, tt.field, tt.msg)
			}
			if _, _, stdErr := decodeKinesisStd([]byte(tt.in)); stdErr == nil {
				t.Errorf("encoding/json decodes it")
			}
		})
	}
}

// TestKinesisBatchGenerated compares the two decoders on generated events:
// real record fields, keys in any order and case, duplicates, escapes,
// nulls, wrong types, windows and state, broken documents.
func TestKinesisBatchGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 4000
	var b, probe KinesisBatch
	var fast, errs int
	for i := range n {
		in := randomKinesisEvent(rng)
		if i%5 == 0 {
			in = mutate(rng, in)
		}
		if diff := compareKinesis(&b, in); diff != "" {
			t.Fatalf("%s\ninput %s", diff, in)
		}
		if probe.reset(); probe.decodeFast(in) {
			fast++
		}
		if b.Decode(in) != nil {
			errs++
		}
	}
	t.Logf("%d of %d decoded by the single pass, %d errors", fast, n, errs)
	if fast < n/2 {
		t.Errorf("only %d of %d inputs took the single pass", fast, n)
	}
	if errs < n/20 {
		t.Errorf("only %d of %d inputs were errors: the error paths are not exercised", errs, n)
	}
}

// TestKinesisBatchAllocs: after the first event, decoding a batch of 100
// records allocates once (the batch's strings), not per record.
func TestKinesisBatchAllocs(t *testing.T) {
	var recs []string
	for i := range 100 {
		recs = append(recs, lambdaRecord(fmt.Sprintf("4960118965842235937883629852182763847532018901230%07d", i), fmt.Sprintf("user-%d", i%7), []byte(`{"id":"e","type":"t"}`), "1795948872.412"))
	}
	for _, tt := range []struct {
		name string
		in   string
		max  float64
	}{
		{"plain", `{"Records":[` + strings.Join(recs, ",") + `]}`, 1},
		{"window", `{"Records":[` + strings.Join(recs, ",") + `],"window":{"start":"2026-11-29T10:41:00Z","end":"2026-11-29T10:42:00Z"},"state":{"a":"b"},"shardId":"s"}`, 1},
	} {
		var b KinesisBatch
		in := []byte(tt.in)
		if err := b.Decode(in); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(50, func() {
			if err := b.Decode(in); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > tt.max {
			t.Errorf("%s: Decode allocates %.1f times per batch of 100, want at most %.0f", tt.name, allocs, tt.max)
		}
	}
}

// TestDecodeEnvelopeSlowPathRecords: records the single pass did not decode
// (and so have no shared text) decode their envelopes as DecodeKinesis does.
func TestDecodeEnvelopeSlowPathRecords(t *testing.T) {
	for name, in := range sampleEvents(t) {
		ev, _, err := decodeKinesisStd(in)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ev.Records {
			var r KinesisRecord
			r.setFrom(&ev.Records[i])
			if diff := compareEnvelopes(&r, &ev.Records[i]); diff != "" {
				t.Errorf("%s record %d: %s", name, i, diff)
			}
		}
	}
}

// TestDecodeEnvelopeShares: the envelope's strings and data come from the
// batch without copying (no allocation), the strings stay as they were
// after the next Decode, and the data is the record's.
func TestDecodeEnvelopeShares(t *testing.T) {
	var b KinesisBatch
	in := sampleEvents(t)["kinesis-batch.json"]
	if err := b.Decode(in); err != nil {
		t.Fatal(err)
	}
	var e Envelope
	allocs := testing.AllocsPerRun(100, func() {
		for i := range b.Records {
			if err := b.Records[i].DecodeEnvelope(&e); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("DecodeEnvelope allocates %.1f times per batch of %d", allocs, len(b.Records))
	}
	if err := b.Records[0].DecodeEnvelope(&e); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Records[0].Data, e.Data) || &e.Data[0] != &b.Records[0].Data[bytes.Index(b.Records[0].Data, e.Data)] {
		t.Errorf("envelope data %q is not the record's bytes", e.Data)
	}
	id, key := e.ID, e.Key
	if err := b.Decode([]byte(`{"Records":[{"kinesis":{"data":"` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("z"), 600)) + `"}}]}`)); err != nil {
		t.Fatal(err)
	}
	if id != "evt-0001" || key != "user-42" {
		t.Errorf("strings changed with the next batch: %q %q", id, key)
	}
}

func FuzzKinesisEvent(f *testing.F) {
	for _, tt := range kinesisTable {
		f.Add([]byte(tt.in))
	}
	for _, in := range sampleEvents(f) {
		f.Add(in)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for range 40 {
		f.Add(randomKinesisEvent(rng))
	}
	var b KinesisBatch
	f.Fuzz(func(t *testing.T, in []byte) {
		if diff := compareKinesis(&b, in); diff != "" {
			t.Errorf("%s\ninput %q", diff, in)
		}
	})
}

// ---- generated events -------------------------------------------------------

func randomSeq(rng *rand.Rand) string {
	if rng.IntN(10) == 0 {
		return fmt.Sprint(rng.IntN(1000))
	}
	return fmt.Sprintf("4960118965842235937883629852182763847532018901%010d", rng.Int64N(1e10))
}

func randomBase64(rng *rand.Rand) string {
	b := make([]byte, rng.IntN(40))
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	s := base64.StdEncoding.EncodeToString(b)
	switch rng.IntN(40) {
	case 0, 5, 6:
		s = strings.ReplaceAll(s, "/", `\/`)
	case 1:
		if len(s) > 4 {
			s = s[:4] + `\n` + s[4:]
		}
	case 2:
		s = strings.TrimRight(s, "=")
	case 3:
		s += pick(rng, "!", "=", "A", "\xff")
	case 4, 7, 8:
		s = strings.Replace(s, "A", `\u0041`, 1)
	}
	return `"` + s + `"`
}

func randomKinesisValue(rng *rand.Rand, name string) string {
	switch {
	case rng.IntN(25) == 0:
		return "null"
	case rng.IntN(400) == 0:
		return randomValue(rng, 3)
	}
	switch name {
	case "data":
		if rng.IntN(2) == 0 {
			env := randomEnvelope(rng)
			if rng.IntN(4) != 0 { // mostly valid: every field a producer must send
				env = []byte(fmt.Sprintf(`{"id":%s,"type":"t","key":%s,"occurredAt":%s,"sentAt":"2099-01-01T00:00:00Z","data":%s}`,
					pick(rng, `"e-1"`, `"e\u002d2"`, randomStringLiteral(rng)), pick(rng, `"k"`, `"日本"`, randomStringLiteral(rng)),
					randomTimeLiteral(rng), randomValue(rng, 1)))
			}
			return `"` + base64.StdEncoding.EncodeToString(env) + `"`
		}
		return randomBase64(rng)
	case "approximateArrivalTimestamp":
		if rng.IntN(50) == 0 {
			return pick(rng, "1e400", `"1795948872"`)
		}
		return pick(rng, "1795948872.412", "1795948872", "0", "-1.5", "1.7959488724e9", "1e300", "-1e300", "123456789012345678901234567890.5", fmt.Sprintf("%d.%03d", rng.Int64N(2e9), rng.IntN(1000)))
	case "sequenceNumber":
		if rng.IntN(10) == 0 {
			return randomStringLiteral(rng)
		}
		return `"` + randomSeq(rng) + `"`
	case "eventID":
		return `"shardId-000000000000:` + randomSeq(rng) + `"`
	case "eventSourceARN", "invokeIdentityArn":
		if rng.IntN(4) == 0 {
			return randomStringLiteral(rng)
		}
		return pick(rng, `"arn:aws:kinesis:us-east-1:123456789012:stream/s"`, `"arn:aws:iam::123456789012:role/r"`)
	case "isFinalInvokeForWindow", "isWindowTerminatedEarly":
		return pick(rng, "true", "false")
	case "start", "end":
		return randomTimeLiteral(rng)
	}
	if rng.IntN(3) == 0 {
		return randomStringLiteral(rng)
	}
	return pick(rng, `"1.0"`, `"aws:kinesis"`, `"us-east-1"`, `"user-42"`, `"KMS"`, `"aws:kinesis:record"`)
}

// randomObject writes an object with some of names (sometimes twice,
// sometimes folded or escaped) and some unknown members, in any order.
func randomObject(rng *rand.Rand, names []string, value func(name string) string) string {
	type member struct{ key, value string }
	var ms []member
	for _, name := range names {
		if rng.IntN(10) == 0 {
			continue
		}
		for range 1 + rng.IntN(8)/7 {
			ms = append(ms, member{randomKey(rng, name), value(name)})
		}
	}
	for range rng.IntN(4) / 3 {
		ms = append(ms, member{pick(rng, `"x"`, `"kinesisX"`, `"eventid2"`, randomStringLiteral(rng)), randomValue(rng, 2)})
	}
	rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	var b strings.Builder
	b.WriteString("{")
	for i, m := range ms {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(ws(rng) + m.key + ws(rng) + ":" + ws(rng) + m.value + ws(rng))
	}
	b.WriteString(ws(rng) + "}")
	return b.String()
}

func randomKinesisRecord(rng *rand.Rand) string {
	if rng.IntN(40) == 0 {
		return pick(rng, "null", "1", `"r"`, "[]")
	}
	return randomObject(rng, recordNames, func(name string) string {
		if name == "kinesis" {
			if rng.IntN(30) == 0 {
				return pick(rng, "null", `"k"`, "[]", "{}")
			}
			return randomObject(rng, kinesisNames, func(name string) string { return randomKinesisValue(rng, name) })
		}
		return randomKinesisValue(rng, name)
	})
}

func randomKinesisEvent(rng *rand.Rand) []byte {
	window := rng.IntN(2) == 0
	return []byte(ws(rng) + randomObject(rng, topNames, func(name string) string {
		switch name {
		case "Records":
			if rng.IntN(30) == 0 {
				return pick(rng, "null", "{}", `"r"`)
			}
			var recs []string
			for range rng.IntN(5) {
				recs = append(recs, ws(rng)+randomKinesisRecord(rng)+ws(rng))
			}
			return "[" + strings.Join(recs, ",") + "]"
		case "window":
			switch {
			case rng.IntN(40) == 0:
				return pick(rng, "{}", "5", "[]")
			case !window:
				return "null"
			}
			return randomObject(rng, windowNames, func(name string) string { return randomKinesisValue(rng, name) })
		case "state":
			if rng.IntN(10) == 0 {
				return pick(rng, "null", "null", "null", "null", "[]", `"s"`)
			}
			var parts []string
			for range rng.IntN(4) {
				v := randomStringLiteral(rng)
				if rng.IntN(20) == 0 {
					v = pick(rng, "null", "null", "null", "1", "{}")
				}
				parts = append(parts, randomStringLiteral(rng)+":"+v)
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
		return randomKinesisValue(rng, name)
	}) + ws(rng))
}

// TestPartitionKeyIsTheKey: a record put with a partition key other than
// its envelope's key (a producer writing to the stream itself) is a
// poison record naming key, on both decoders, with a bounded reason; one
// without a partition key (a hand-made test event) is taken.
func TestPartitionKeyIsTheKey(t *testing.T) {
	env := func(key string) string {
		return `{"id":"e-1","type":"t","key":"` + key + `","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:08Z"}`
	}
	long := strings.Repeat("k", 256)
	for _, tc := range []struct {
		name, key, partitionKey string
		bad                     bool
	}{
		{"the key", "user-42", "user-42", false},
		{"no partition key", "user-42", "", false},
		{"another key", "user-42", "user-7", true},
		{"a random partition key", "user-42", "8f14e45fceea167a5a36dedd4bea2543", true},
		{"long keys", long, long[1:], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := env(tc.key)
			in := `{"Records":[{"kinesis":{"partitionKey":` + strconv.Quote(tc.partitionKey) + `,"sequenceNumber":"4960","approximateArrivalTimestamp":1796035268,"data":"` +
				base64.StdEncoding.EncodeToString([]byte(data)) + `"},"eventID":"shardId-000000000000:4960"}]}`
			var b KinesisBatch
			if err := b.Decode([]byte(in)); err != nil {
				t.Fatal(err)
			}
			var e Envelope
			rec := kinesisRecord("4960", data)
			rec.Kinesis.PartitionKey = tc.partitionKey
			for decoder, err := range map[string]error{"DecodeEnvelope": b.Records[0].DecodeEnvelope(&e), "DecodeKinesis": DecodeKinesis(&rec, &e)} {
				if !tc.bad {
					if err != nil {
						t.Errorf("%s: %v", decoder, err)
					}
					continue
				}
				var pe *PoisonRecordError
				if !errors.As(err, &pe) || pe.Field != "key" || !strings.Contains(err.Error(), "partition key") || len(err.Error()) > 400 {
					t.Errorf("%s: %v; want a poison record naming key and the partition key, bounded", decoder, err)
				}
			}
		})
	}
}
