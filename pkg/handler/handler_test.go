package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

var (
	db     *dynamodb.Client
	awsCfg aws.Config
	kin    *kinesis.Client
	names  atomic.Int64
	quiet  = slog.New(slog.NewTextHandler(io.Discard, nil))
)

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(cfg aws.Config) {
		db, kin, awsCfg = dynamodb.NewFromConfig(cfg), kinesis.NewFromConfig(cfg), cfg
	}))
}

func name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, names.Add(1)) }

var base = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// setup creates a state table, a quarantine table and an output stream and
// returns the Config of a handler named after the test.
func setup(t testing.TB) handler.Config {
	t.Helper()
	ctx := context.Background()
	cfg := handler.Config{Name: name("h"), StateTable: name("state"), OutputStream: name("out"), QuarantineTable: name("quarantine"), DynamoDB: db, Kinesis: kin}
	if err := state.CreateTable(ctx, db, cfg.StateTable); err != nil {
		t.Fatal(err)
	}
	if err := setaside.CreateTable(ctx, db, cfg.QuarantineTable); err != nil {
		t.Fatal(err)
	}
	keyedtest.CreateStream(t, kin, cfg.OutputStream, 1)
	return cfg
}

// rec is one input record: its sequence number on shard 0 and envelope.
type rec struct {
	seq int
	env stream.Envelope
}

func request(id, key string, sec float64, data string) stream.Envelope {
	at := base.Add(time.Duration(sec * float64(time.Second)))
	return stream.Envelope{ID: id, Type: "request", Key: key, OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(data)}
}

func kinesisRecords(recs []rec) []events.KinesisEventRecord {
	out := make([]events.KinesisEventRecord, len(recs))
	for i, r := range recs {
		data, _ := json.Marshal(r.env)
		seq := strconv.Itoa(r.seq)
		out[i] = events.KinesisEventRecord{EventID: "shardId-000000000000:" + seq, EventSource: "aws:kinesis", EventName: "aws:kinesis:record",
			EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/events",
			Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: r.env.Key, Data: data,
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: r.env.ReceivedAt}}}
	}
	return out
}

// results reads the output stream: the distinct results by id, failing t if
// one id came with two contents; n is the number of records read.
func results(t *testing.T, stream string) (byID map[string]handler.Result, n int) {
	t.Helper()
	byID = map[string]handler.Result{}
	raw := map[string]string{}
	for _, b := range keyedtest.ReadAll(t, kin, stream) {
		n++
		var r handler.Result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("output %s: %v", b, err)
		}
		if prev, ok := raw[r.ID]; ok && prev != string(b) {
			t.Errorf("result %s emitted with two contents:\n%s\n%s", r.ID, prev, b)
		}
		raw[r.ID] = string(b)
		byID[r.ID] = r
	}
	return byID, n
}

func describe(byID map[string]handler.Result) []string {
	var out []string
	for _, r := range byID {
		out = append(out, fmt.Sprintf("%s %s %d %s", r.Key, r.WindowStart.Format("15:04:05"), r.Records, r.Result))
	}
	sort.Strings(out)
	return out
}

func mustBatch(t *testing.T, h *handler.Handler, recs []events.KinesisEventRecord) {
	t.Helper()
	resp, err := h.HandleBatch(context.Background(), events.KinesisEvent{Records: recs})
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch: %+v %v; want every record reported processed", resp, err)
	}
}

// TestExactlyOnce sends a batch with a producer's copy, a poison record, a
// record that is not an envelope and another type's event, three times
// (whole, then its first half bisected, then whole again: Lambda's
// retries), then a record that moves the watermark past the first window
// and a late one. Each window's final result is on the output stream once,
// counting each distinct record once; the poison record is set aside naming
// data.ms, the garbage as unparseable, the late record is counted, and
// the rest of the batch is applied.
func TestExactlyOnce(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	h, err := handler.NewWindowed[Tally](cfg, selectLatency, handler.WithWindow(time.Minute), handler.WithOutOfOrderness(5*time.Second),
		handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	first := []rec{
		{1, request("r1", "/a", 1, `{"ms":10}`)},
		{2, request("r2", "/a", 2, `{"ms":20}`)},
		{3, request("r1", "/a", 1, `{"ms":10}`)}, // the producer sent r1 again
		{4, request("r3", "/b", 3, `{"ms":7}`)},
		{5, request("r4", "/a", 4, `{"ms":-5}`)}, // poison: data.ms
		{6, request("c1", "/a", 5, `{}`)},
		{8, request("r5", "/a", 30, `{"ms":30}`)},
	}
	first[5].env.Type = "click" // another type: skipped
	krecs := kinesisRecords(first)
	garbage := krecs[0]
	garbage.Kinesis.SequenceNumber, garbage.EventID, garbage.Kinesis.Data = "7", "shardId-000000000000:7", []byte("not an envelope")
	krecs = append(krecs[:6], append([]events.KinesisEventRecord{garbage}, krecs[6:]...)...)

	mustBatch(t, h, krecs)
	mustBatch(t, h, krecs[:4])
	mustBatch(t, h, krecs)
	if byID, _ := results(t, cfg.OutputStream); len(byID) != 0 {
		t.Fatalf("results before the watermark passed the window: %v", describe(byID))
	}
	// The watermark moves to 10:01:05 (10:01:10 − 5s): the first minute
	// closes, for /a and for /b (whose key is not in this batch); the
	// record at 10:00:50 is then late.
	mustBatch(t, h, kinesisRecords([]rec{{9, request("r6", "/a", 70, `{"ms":1}`)}, {10, request("r7", "/a", 50, `{"ms":99}`)}}))

	byID, n := results(t, cfg.OutputStream)
	got := strings.Join(describe(byID), "\n")
	want := strings.Join([]string{
		`/a 10:00:00 3 {"N":3,"Sum":60,"Max":30,"Distinct":3}`,
		`/b 10:00:00 1 {"N":1,"Sum":7,"Max":7,"Distinct":1}`,
	}, "\n")
	if got != want || n != 2 {
		t.Fatalf("results (%d records):\n%s\nwant, once each:\n%s", n, got, want)
	}
	for id, r := range byID {
		if wantID := cfg.Name + "/" + r.Key + "/" + r.WindowStart.Format("2006-01-02T15:04:05.000Z07:00") + "/" + r.WindowEnd.Format("2006-01-02T15:04:05.000Z07:00"); id != wantID || !r.Final || r.Name != cfg.Name || r.Type != handler.ResultType {
			t.Errorf("result %+v: want id %s, final, name %s", r, wantID, cfg.Name)
		}
	}
	// Stats count each delivery: the batch came three times.
	if st := h.Stats(); st.Duplicates == 0 || st.Late != 1 || st.SetAside == 0 {
		t.Errorf("stats %+v: want duplicates and records set aside counted, 1 late", st)
	}
	if scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(cfg.QuarantineTable)}); err != nil || scan.Count != 2 {
		t.Fatalf("quarantine: %v items, %v; want 2 (the poison record and the garbage), each once", scan.Count, err)
	}
	source := garbage.EventSourceArn + "/shardId-000000000000"
	for _, c := range []struct{ seq, field, kind, reason string }{
		{"5", "data.ms", setaside.KindInvalid, "-5 is not a whole number"},
		{"7", "", setaside.KindUnparseable, ""},
	} {
		it, err := setaside.Load(ctx, db, cfg.QuarantineTable, source, c.seq)
		if err != nil || it == nil {
			t.Fatalf("record %s not set aside: %v", c.seq, err)
		}
		if it.Field != c.field || it.Category != c.kind || !strings.Contains(it.Reason, c.reason) {
			t.Errorf("record %s set aside as field %q kind %q reason %q; want %q, %q, a reason with %q", c.seq, it.Field, it.Category, it.Reason, c.field, c.kind, c.reason)
		}
	}

	// The idle shard: the tick advances the watermark by processing time
	// and the second minute's result goes out, once, however often it runs.
	for _, at := range []time.Time{base.Add(time.Hour), base.Add(2 * time.Hour), base.Add(3 * time.Hour)} {
		if _, err := h.Tick(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	byID, n = results(t, cfg.OutputStream)
	if got := describe(byID); n != 3 || len(got) != 3 || got[1] != `/a 10:01:00 1 {"N":1,"Sum":1,"Max":1,"Distinct":1}` {
		t.Fatalf("after the tick (%d records): %q; want the second minute of /a once more", n, got)
	}
}
