package archive_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/archive"
	"github.com/tributary-dev/tributary/pkg/stream"
)

var (
	awsCfg  aws.Config
	buckets atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(c aws.Config) { awsCfg = c }))
}

const arn = "arn:aws:kinesis:us-east-1:000000000000:stream/events"

func record(shard, seq string, at time.Time, data string) events.KinesisEventRecord {
	return events.KinesisEventRecord{EventID: shard + ":" + seq, EventSourceArn: arn, EventSource: "aws:kinesis",
		Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: "k-" + seq, Data: []byte(data),
			ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: at}}}
}

// newBucket is an S3 client on the stand-in and a bucket of the test's
// own.
func newBucket(t *testing.T) (*s3.Client, string) {
	t.Helper()
	client := archive.NewS3Client(awsCfg)
	bucket := fmt.Sprintf("archive-test-%d", buckets.Add(1))
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	return client, bucket
}

// TestArchiverWritesEachShardAndHourApart: a batch of two shards that
// crosses an hour is written as one object per shard and hour, named by its
// first and last sequence numbers under the stream's prefix; the reader
// gives back every record as it was; a retried batch writes the same
// objects again.
func TestArchiverWritesEachShardAndHourApart(t *testing.T) {
	ctx := context.Background()
	client, bucket := newBucket(t)
	h := time.Date(2026, 11, 30, 9, 59, 58, 0, time.UTC)
	ev := events.KinesisEvent{Records: []events.KinesisEventRecord{
		record("shardId-000000000000", "100", h, `{"id":"a"}`),
		record("shardId-000000000001", "7", h, `{"id":"b"}`),
		record("shardId-000000000000", "250", h.Add(time.Second), `{"id":"c"}`),
		record("shardId-000000000000", "1000000000000000000000000", h.Add(3*time.Second), `{"id":"d"}`),
	}}
	a := archive.NewArchiver(client, bucket)
	for range 2 { // the second time as Lambda retries it
		if err := a.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	r := archive.NewReader(client, bucket)
	var listed []int
	idx, err := r.List(ctx, "events", h, h.Add(time.Hour), func(n int) { listed = append(listed, n) })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(listed, []int{3}) {
		t.Errorf("progress of the listing %v, want one page of 3 objects", listed)
	}
	var keys []string
	for _, shard := range []string{"shardId-000000000000", "shardId-000000000001"} {
		for _, o := range idx.Shards[shard] {
			keys = append(keys, o.Key)
		}
	}
	want := []string{
		"archive/events/dt=2026-11-30/hh=09/shardId-000000000000-100-250.jsonl.gz",
		// Linked to the record before it on the shard: the first object
		// of a chain has no link.
		"archive/events/dt=2026-11-30/hh=10/shardId-000000000000-1000000000000000000000000-1000000000000000000000000.after-2026-11-30T09-250.jsonl.gz",
		"archive/events/dt=2026-11-30/hh=09/shardId-000000000001-7-7.jsonl.gz",
	}
	if !reflect.DeepEqual(keys, want) || idx.Objects != 3 {
		t.Fatalf("objects %v (%d), want %v", keys, idx.Objects, want)
	}
	recs, err := r.Records(ctx, idx.Shards["shardId-000000000000"][0])
	if err != nil {
		t.Fatal(err)
	}
	wantRecs := []archive.Record{
		{Shard: "shardId-000000000000", Seq: "100", Arrival: h, Key: "k-100", Data: []byte(`{"id":"a"}`)},
		{Shard: "shardId-000000000000", Seq: "250", Arrival: h.Add(time.Second), Key: "k-250", Data: []byte(`{"id":"c"}`)},
	}
	if !reflect.DeepEqual(recs, wantRecs) {
		t.Errorf("records %+v, want %+v", recs, wantRecs)
	}
	start, ok, err := r.Start(ctx, "events")
	if err != nil || !ok || !start.Equal(h) {
		t.Errorf("archive start %s %t %v, want %s", start, ok, err, h)
	}
	if later, err := r.List(ctx, "events", h.Add(time.Hour), h.Add(2*time.Hour), nil); err != nil || later.Objects != 1 {
		t.Errorf("listing from 10:00: %+v %v, want the one object of hour 10", later, err)
	}
}

// TestArchiverRefusesWhatItCannotPlace: a record without a shard, a stream
// or a sequence number fails the batch, naming the field and the record.
func TestArchiverRefusesWhatItCannotPlace(t *testing.T) {
	at := time.Now()
	for _, tc := range []struct {
		rec  events.KinesisEventRecord
		want string
	}{
		{func() events.KinesisEventRecord { r := record("x", "1", at, "{}"); r.EventID = "1"; return r }(), `Records[1].eventID: "1" does not name the shard`},
		{func() events.KinesisEventRecord {
			r := record("shardId-1", "1", at, "{}")
			r.EventSourceArn = "arn:aws:sqs:x"
			return r
		}(), `Records[1].eventSourceARN "arn:aws:sqs:x"`},
		{record("shardId-1", "12a", at, "{}"), `Records[1].kinesis.sequenceNumber "12a"`},
		// A hand-made event (the console's Test tab) without an arrival
		// time: written under dt=0001-01-01, the reader would refuse the
		// whole object.
		{record("shardId-1", "2", time.Time{}, "{}"), `Records[1].kinesis.approximateArrivalTimestamp: missing`},
		{func() events.KinesisEventRecord {
			r := record("shardId-1", "1", at, "{}")
			r.EventID = strings.Repeat("x", 100_000)
			return r
		}(), `Records[1].eventID: "xxxx`},
	} {
		ev := events.KinesisEvent{Records: []events.KinesisEventRecord{record("shardId-1", "1", at, "{}"), tc.rec}}
		err := archive.NewArchiver(nil, "b").Handle(context.Background(), ev)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %.300v, want an error naming %s", err, tc.want)
		}
		if err != nil && len(err.Error()) > 1000 {
			t.Errorf("the error is %d bytes: it repeats the record whole", len(err.Error()))
		}
	}
}

// TestDecodeRefusesWhatTheArchiverDoesNotWrite: each way an object can
// differ from what the archiver writes is an *ObjectError naming it and
// saying what is wrong.
func TestDecodeRefusesWhatTheArchiverDoesNotWrite(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	good := []archive.Record{{Shard: "shardId-1", Seq: "5", Arrival: at, Data: []byte("{}")}, {Shard: "shardId-1", Seq: "9", Arrival: at, Data: []byte("{}")}}
	enc := func(recs []archive.Record) []byte { b, _ := archive.Encode(recs); return b }
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	with := func(f func(r []archive.Record)) []byte {
		r := append([]archive.Record(nil), good...)
		f(r)
		return enc(r)
	}
	key := archive.Key("events", good)
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"not gzip", []byte("plain"), "not gzip"},
		{"truncated", enc(good)[:20], "truncated or corrupt"},
		{"not JSON", gz("{\n"), "line 1 is not a record"},
		{"unknown field", gz(`{"shard":"shardId-1","seq":"5","arrival":"2026-11-30T09:00:00Z","extra":1}`), "line 1 is not a record"},
		{"a key twice", gz(`{"shard":"shardId-1","seq":"5","arrival":"2026-11-30T09:00:00Z","key":"k","key":"other","data":"e30="}`), "line 1 is not a record: key: duplicate object key"},
		{"a name in another case", gz(`{"SHARD":"shardId-1","seq":"5","arrival":"2026-11-30T09:00:00Z","data":"e30="}`), "line 1 is not a record: SHARD"},
		{"two values on a line", gz(`{"shard":"shardId-1","seq":"5","arrival":"2026-11-30T09:00:00Z","data":"e30="} {}`), "line 1 is not a record"},
		{"other shard", with(func(r []archive.Record) { r[1].Shard = "shardId-2" }), `line 2: shard "shardId-2"`},
		{"out of order", enc([]archive.Record{good[0], good[0], good[1]}), "line 2: seq 5 does not follow 5"},
		{"outside the name", with(func(r []archive.Record) { r[1].Seq = "10" }), "line 2: seq 10 is outside the name's range 5-9"},
		{"no arrival", with(func(r []archive.Record) { r[0].Arrival = time.Time{} }), "line 1: arrival is missing"},
		{"empty", gz(""), "holds no records"},
		{"short of its name", enc(good[:1]), "holds 5-5, but the name says 5-9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, ok := archive.ParseKey(key)
			if !ok {
				t.Fatalf("ParseKey(%s) failed", key)
			}
			_, err := archive.Decode(n, bytes.NewReader(tc.body))
			var oe *archive.ObjectError
			if !errors.As(err, &oe) || oe.Key != key || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an ObjectError naming %s saying %q", err, key, tc.want)
			}
		})
	}
	if recs, err := archive.Decode(must(archive.ParseKey(key)), bytes.NewReader(enc(good))); err != nil || !reflect.DeepEqual(recs, good) {
		t.Errorf("a good object: %+v %v", recs, err)
	}
}

func must(n archive.ObjectName, ok bool) archive.ObjectName {
	if !ok {
		panic("not a key")
	}
	return n
}

// TestArchiverObjectsOfAShardNeverInterleave: Kinesis does not promise
// that arrival times increase along a shard, so a batch can go 09:59:59,
// 10:00:00, 09:59:59. Each object is a run of consecutive records of one
// hour, so a shard's objects never interleave: a rebuild reads them in
// sequence order and skips an object whose records end before what it has
// read (a retried batch's), which would have skipped record 2 had it been
// filed apart from the run 1, 3 around it.
func TestArchiverObjectsOfAShardNeverInterleave(t *testing.T) {
	ctx := context.Background()
	client, bucket := newBucket(t)
	h := time.Date(2026, 11, 30, 9, 59, 59, 0, time.UTC)
	shard := "shardId-000000000000"
	ev := events.KinesisEvent{Records: []events.KinesisEventRecord{
		record(shard, "1", h, `{"id":"a"}`),
		record(shard, "2", h.Add(time.Second), `{"id":"b"}`),
		record(shard, "3", h.Add(999*time.Millisecond), `{"id":"c"}`),
		record(shard, "4", h.Add(2*time.Second), `{"id":"d"}`),
	}}
	if err := archive.NewArchiver(client, bucket).Handle(ctx, ev); err != nil {
		t.Fatal(err)
	}
	r := archive.NewReader(client, bucket)
	idx, err := r.List(ctx, "events", h, h.Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []string
	prev := ""
	for _, o := range idx.Shards[shard] {
		if prev != "" && stream.CompareSequence(o.First, prev) <= 0 {
			t.Errorf("object %s begins at or before %s, the previous object's last record", o.Key, prev)
		}
		prev = o.Last
		recs, err := r.Records(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			seqs = append(seqs, rec.Seq)
		}
	}
	if want := []string{"1", "2", "3", "4"}; !reflect.DeepEqual(seqs, want) {
		t.Errorf("records read object after object: %v, want %v", seqs, want)
	}
}
