package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/tributary-dev/tributary/internal/syncbuf"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/archive"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// archived is a fixture's stream with its archive: a bucket the archiver
// wrote every record of the stream to.
type archived struct {
	*fixture
	s3     *s3.Client
	bucket string
	arn    string
}

func newArchived(t *testing.T, shards int32) *archived {
	f := newFixture(t, shards)
	a := &archived{fixture: f, s3: archive.NewS3Client(awsCfg),
		bucket: fmt.Sprintf("archive-%d", seq.Add(1))}
	ctx := context.Background()
	if _, err := a.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(a.bucket)}); err != nil {
		t.Fatal(err)
	}
	sum, err := f.kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(f.stream)})
	if err != nil {
		t.Fatal(err)
	}
	a.arn = aws.ToString(sum.StreamDescriptionSummary.StreamARN)
	return a
}

// archive plays the archiver's event source mapping: every shard's records
// from its trim horizon, in batches of n, through archive.Archiver; a
// record for which drop says true is not handed over (an archive with a
// hole).
func (a *archived) archive(ctx context.Context, n int32, drop func(kintypes.Record) bool) {
	a.t.Helper()
	arc := archive.NewArchiver(a.s3, a.bucket)
	for _, shard := range a.liveShards {
		it, err := a.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(a.stream), ShardId: aws.String(shard), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			a.t.Fatal(err)
		}
		next := it.ShardIterator
		for {
			out, err := a.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: next, Limit: aws.Int32(n)})
			if err != nil {
				a.t.Fatal(err)
			}
			var ev events.KinesisEvent
			for _, r := range out.Records {
				if drop != nil && drop(r) {
					continue
				}
				s := aws.ToString(r.SequenceNumber)
				ev.Records = append(ev.Records, events.KinesisEventRecord{EventID: shard + ":" + s, EventSource: "aws:kinesis", EventSourceArn: a.arn,
					Kinesis: events.KinesisRecord{SequenceNumber: s, PartitionKey: aws.ToString(r.PartitionKey), Data: r.Data,
						ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: aws.ToTime(r.ApproximateArrivalTimestamp)}}})
			}
			if len(ev.Records) > 0 {
				if err := arc.Handle(ctx, ev); err != nil {
					a.t.Fatal(err)
				}
			}
			if len(out.Records) == 0 {
				break
			}
			next = out.NextShardIterator
		}
	}
}

// keys lists the archive's objects of shard, in sequence order.
// archiveInObjects archives what was sent in batches of 10 and returns
// shard's object keys, failing unless there are several (a test deletes or
// damages one in the middle).
func (a *archived) archiveInObjects(ctx context.Context, shard string) []string {
	a.t.Helper()
	a.archive(ctx, 10, nil)
	keys := a.keys(ctx, shard)
	if len(keys) < 4 {
		a.t.Fatalf("archive holds %d objects, want several: %v", len(keys), keys)
	}
	return keys
}

func (a *archived) keys(ctx context.Context, shard string) []string {
	a.t.Helper()
	idx, err := archive.NewReader(a.s3, a.bucket).List(ctx, a.stream, time.Now().Add(-48*time.Hour), time.Now().Add(time.Hour), nil)
	if err != nil {
		a.t.Fatal(err)
	}
	var out []string
	for _, o := range idx.Shards[shard] {
		out = append(out, o.Key)
	}
	return out
}

// handler is the aggregate function as cmd/replay builds it, with its
// dedupe ledger: a producer's copy counts once.
func (a *archived) handler(table string, aside *setaside.Sink) (replay.BatchHandler, error) {
	return aggregate.New(a.cfg, state.NewViews(a.db, table, a.cfg.Aggregates, state.WithRetention(a.cfg.Retention)), nil, "",
		aggregate.WithDedupe(aggregate.NewLedger(a.db, table, a.cfg))), nil
}

func (a *archived) opts(from time.Time, progress *syncbuf.Buffer) replay.Options {
	return replay.Options{Stream: a.stream, From: from, Handover: 200 * time.Millisecond, Poll: 50 * time.Millisecond,
		ProgressEvery: time.Hour, Progress: progress, BatchSize: 7}
}

// putCopy puts env again, as a producer retrying it would.
func (a *archived) putCopy(env stream.Envelope) {
	a.t.Helper()
	b, _ := json.Marshal(&env)
	if _, err := a.kin.PutRecord(context.Background(), &kinesis.PutRecordInput{StreamName: aws.String(a.stream), Data: b, PartitionKey: aws.String(env.Key)}); err != nil {
		a.t.Fatal(err)
	}
}

// sendAcrossSeam sends records before and after a seam, a producer's copy
// of one before-record after it; it returns the seam and the distinct
// events.
func (a *archived) sendAcrossSeam() (time.Time, []stream.Envelope) {
	before := a.send("before", 40, 0)
	time.Sleep(60 * time.Millisecond) // arrival times on the stand-in are wall-clock
	seam := time.Now()
	time.Sleep(60 * time.Millisecond)
	after := a.send("after", 40, 2)
	a.putCopy(before[3])
	return seam, append(append([]stream.Envelope{}, before...), after...)
}

// TestRebuildFromArchiveAndStreamEqualsStreamAlone: the same rebuild read
// from the archive up to a seam and from the stream after it gives the
// views a rebuild from the stream alone gives, each record once — a
// producer's copy on the other side of the seam included — and says how
// many records came from where.
func TestRebuildFromArchiveAndStreamEqualsStreamAlone(t *testing.T) {
	a := newArchived(t, 2)
	ctx := context.Background()
	from := time.Now().Add(-time.Second)
	seam, distinct := a.sendAcrossSeam()
	a.archive(ctx, 9, nil)
	r := replay.New(a.kin, a.db, replay.NewRegistry(a.ps, a.param))

	progress := &syncbuf.Buffer{}
	alone, err := r.Run(ctx, a.opts(from, progress), a.handler)
	if err != nil || !alone.Swapped {
		t.Fatalf("rebuild from the stream alone: %+v %v\n%s", alone, err, progress)
	}
	opts := a.opts(from, progress)
	opts.Archive, opts.ArchiveUntil = archive.NewReader(a.s3, a.bucket), seam
	both, err := r.Run(ctx, opts, a.handler)
	if err != nil || !both.Swapped {
		t.Fatalf("rebuild from the archive and the stream: %+v %v\n%s", both, err, progress)
	}

	want := a.reference(distinct)
	if d := diff(a.windows(ctx, alone.Target), want); d != "" {
		t.Errorf("%s (stream alone) differs from each distinct event once:\n%s", alone.Target, d)
	}
	if d := diff(a.windows(ctx, both.Target), a.windows(ctx, alone.Target)); d != "" {
		t.Errorf("%s (archive + stream) differs from %s (stream alone):\n%s", both.Target, alone.Target, d)
	}
	if both.Read != len(distinct)+1 || both.Archived != 40 || both.Seam != seam {
		t.Errorf("read %d (%d from the archive), seam %s; want %d read, the 40 records before the seam from the archive, seam %s",
			both.Read, both.Archived, both.Seam, len(distinct)+1, seam)
	}
	if !strings.Contains(progress.String(), "40 of them from the archive in bucket "+a.bucket) {
		t.Errorf("summary does not say what came from the archive:\n%s", progress)
	}
	objects := 0
	for _, shard := range a.liveShards {
		objects += len(a.keys(ctx, shard))
	}
	if want := fmt.Sprintf("listed %d objects of the archive of %s in bucket %s", objects, a.stream, a.bucket); !strings.Contains(progress.String(), want) {
		t.Errorf("progress does not say %q before placing the seam:\n%s", want, progress)
	}
}

// TestRebuildOlderThanRetentionReadsTheArchive: a -from older than the
// stream's retention is refused without an archive, as before; with one,
// the part older than the retention (all of it here) comes from the
// archive, and the views hold every record once.
func TestRebuildOlderThanRetentionReadsTheArchive(t *testing.T) {
	a := newArchived(t, 1)
	ctx := context.Background()
	from := time.Now().Add(-time.Second)
	_, distinct := a.sendAcrossSeam()
	a.archive(ctx, 500, nil)
	r := replay.New(a.kin, a.db, replay.NewRegistry(a.ps, a.param))
	later := func() time.Time { return time.Now().Add(25 * time.Hour) } // the stand-in keeps 24h

	opts := a.opts(from, &syncbuf.Buffer{})
	opts.Now = later
	if _, err := r.Run(ctx, opts, a.handler); !errors.Is(err, replay.ErrRefused) || !strings.Contains(err.Error(), "-archive-bucket") {
		t.Fatalf("rebuild beyond the retention without an archive: %v, want a refusal pointing at -archive-bucket", err)
	}
	progress := &syncbuf.Buffer{}
	opts = a.opts(from, progress)
	opts.Now, opts.Archive = later, archive.NewReader(a.s3, a.bucket)
	res, err := r.Run(ctx, opts, a.handler)
	if err != nil || !res.Swapped {
		t.Fatalf("rebuild beyond the retention with the archive: %+v %v\n%s", res, err, progress)
	}
	if d := diff(a.windows(ctx, res.Target), a.reference(distinct)); d != "" {
		t.Errorf("%s differs from each distinct event once:\n%s", res.Target, d)
	}
	if res.Archived != len(distinct)+1 {
		t.Errorf("%d records from the archive, want all %d", res.Archived, len(distinct)+1)
	}
}

// atSeam is the stand-in's stream read by a reader that hands the record
// it was asked to start after once more: the stream part would begin at the
// archive's last record.
type atSeam struct{ replay.StreamReader }

func (s atSeam) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if in.ShardIteratorType == kintypes.ShardIteratorTypeAfterSequenceNumber {
		c := *in
		c.ShardIteratorType = kintypes.ShardIteratorTypeAtSequenceNumber
		in = &c
	}
	return s.StreamReader.GetShardIterator(ctx, in, optFns...)
}

// TestSeamGapOrOverlapIsRefused: the archive and the stream must meet on
// every shard with nothing missing and nothing twice; otherwise the rebuild
// is refused naming the shard and the sequence numbers, and the readers
// keep the current table.
func TestSeamGapOrOverlapIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		// hole: records the archiver never got (of the first shard);
		// trim: records of the first shard gone from the stream.
		hole, trim func(env stream.Envelope) bool
		overlap    bool
		want       string
		created    bool // refused after the table was made (not swapped)
	}{
		{name: "stream trimmed past the archive's end", trim: func(e stream.Envelope) bool { return strings.HasPrefix(e.ID, "before") },
			hole: func(e stream.Envelope) bool { return strings.HasPrefix(e.ID, "after") }, want: "gap at the seam on shard shardId-000000000000"},
		{name: "archive lacks records at the seam", hole: func(e stream.Envelope) bool { return e.ID == "before-35" || e.ID == "before-39" },
			want: "gap in the archive at the seam on shard shardId-000000000000", created: true},
		{name: "stream part starts at the archive's last record", overlap: true,
			want: "overlap at the seam on shard shardId-000000000000", created: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newArchived(t, 1)
			ctx := context.Background()
			from := time.Now().Add(-time.Second)
			seam, _ := a.sendAcrossSeam()
			isEnv := func(pred func(stream.Envelope) bool) func(kintypes.Record) bool {
				return func(r kintypes.Record) bool {
					var e stream.Envelope
					return pred != nil && json.Unmarshal(r.Data, &e) == nil && pred(e)
				}
			}
			a.archive(ctx, 500, isEnv(tc.hole))
			var kin replay.StreamReader = a.kin
			if tc.trim != nil {
				kin = &trimmedStream{StreamReader: a.kin, gone: isEnv(tc.trim)}
			}
			if tc.overlap {
				kin = atSeam{a.kin}
			}
			r := replay.New(kin, a.db, replay.NewRegistry(a.ps, a.param))
			opts := a.opts(from, &syncbuf.Buffer{})
			opts.Archive, opts.ArchiveUntil = archive.NewReader(a.s3, a.bucket), seam
			res, err := r.Run(ctx, opts, a.handler)
			if !errors.Is(err, replay.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal saying %q", err, tc.want)
			}
			a.currentIs(ctx, a.table)
			_, derr := a.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(a.table + "-v2")})
			if (derr == nil) != tc.created {
				t.Errorf("%s-v2 exists: %t, want %t (a refusal before the replay creates nothing)", a.table, derr == nil, tc.created)
			}
			if res != nil && res.Swapped {
				t.Errorf("swapped after a refusal")
			}
		})
	}
}

// trimmedStream hides the records gone says are gone, as if the stream's
// retention had trimmed them: the stand-in cannot be made to trim in a
// test's time.
type trimmedStream struct {
	replay.StreamReader
	gone func(kintypes.Record) bool
}

func (t *trimmedStream) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	out, err := t.StreamReader.GetRecords(ctx, in, optFns...)
	if err != nil {
		return out, err
	}
	kept := out.Records[:0:0]
	for _, r := range out.Records {
		if !t.gone(r) {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 && len(out.Records) > 0 {
		// Kinesis answers the trimmed span with empty pages; keep reading.
		in2 := *in
		in2.ShardIterator = out.NextShardIterator
		return t.GetRecords(ctx, &in2, optFns...)
	}
	out.Records = kept
	return out, nil
}

// currentIs checks the parameter still names table.
func (a *archived) currentIs(ctx context.Context, table string) {
	a.t.Helper()
	out, err := a.ps.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(a.param)})
	if err != nil {
		a.t.Fatal(err)
	}
	if got := aws.ToString(out.Parameter.Value); got != table {
		a.t.Errorf("parameter %s names %s, want %s (nothing swapped)", a.param, got, table)
	}
}

// damaging is the archive reader with one object damaged just before it is
// read.
type damaging struct {
	*archive.Reader
	key    string
	damage func()
}

func (d *damaging) Records(ctx context.Context, n archive.ObjectName) ([]archive.Record, error) {
	if n.Key == d.key && d.damage != nil {
		d.damage()
		d.damage = nil
	}
	return d.Reader.Records(ctx, n)
}

// TestArchiveObjectCorruptOrMissingIsNamed: an archive object that is not
// what the archiver writes, is gone when read, or was moved to a storage
// class that needs a restore, stops the rebuild with its key, and nothing
// is swapped.
func TestArchiveObjectCorruptOrMissingIsNamed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(a *archived, key string)
		want   string
	}{
		{"corrupt", func(a *archived, key string) { a.put(key, []byte("not gzip"), "") }, "not gzip"},
		{"truncated", func(a *archived, key string) {
			b := a.get(key)
			a.put(key, b[:len(b)/2], "")
		}, "truncated or corrupt"},
		{"another object's records", func(a *archived, key string) {
			recs := []archive.Record{{Shard: "shardId-000000000000", Seq: "1", Arrival: time.Now(), Key: "k", Data: []byte("{}")}}
			b, _ := archive.Encode(recs)
			a.put(key, b, "")
		}, "outside the name's range"},
		{"missing", func(a *archived, key string) {
			if _, err := a.s3.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(a.bucket), Key: aws.String(key)}); err != nil {
				a.t.Fatal(err)
			}
		}, "missing"},
		{"archived to Glacier", func(a *archived, key string) { a.put(key, a.get(key), s3types.StorageClassGlacier) }, "restore it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newArchived(t, 1)
			ctx := context.Background()
			from := time.Now().Add(-time.Second)
			seam, _ := a.sendAcrossSeam()
			keys := a.archiveInObjects(ctx, "shardId-000000000000")
			key := keys[1] // before the seam, read only by the replay
			r := replay.New(a.kin, a.db, replay.NewRegistry(a.ps, a.param))
			opts := a.opts(from, &syncbuf.Buffer{})
			opts.Archive, opts.ArchiveUntil = &damaging{Reader: archive.NewReader(a.s3, a.bucket), key: key, damage: func() { tc.damage(a, key) }}, seam
			res, err := r.Run(ctx, opts, a.handler)
			var oe *archive.ObjectError
			if !errors.As(err, &oe) || oe.Key != key || !strings.Contains(err.Error(), "archive object "+key) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s and saying %q", err, key, tc.want)
			}
			if res == nil || res.Swapped {
				t.Errorf("result %+v: want the replay stopped, not swapped", res)
			}
			a.currentIs(ctx, a.table)
		})
	}
}

func (a *archived) get(key string) []byte {
	a.t.Helper()
	out, err := a.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(a.bucket), Key: aws.String(key)})
	if err != nil {
		a.t.Fatal(err)
	}
	defer out.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(out.Body); err != nil {
		a.t.Fatal(err)
	}
	return b.Bytes()
}

func (a *archived) put(key string, body []byte, class s3types.StorageClass) {
	a.t.Helper()
	if _, err := a.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(a.bucket), Key: aws.String(key), Body: bytes.NewReader(body), StorageClass: class}); err != nil {
		a.t.Fatal(err)
	}
}

// TestDamagedArchiveObjectsOutsideTheRebuildAreNotRead: an object of the
// archive outside what a rebuild reads is not read, so a damaged one (or one
// moved to a storage class that needs a restore) does not stop it:
//   - one from long before -from is neither read nor used to find where
//     the archive begins;
//   - one filed under an hour after the seam holds only records that
//     arrived after it: to place the seam the rebuild looks for the last
//     archived record that arrived before it, so such an object is listed
//     (its first sequence number bounds the archive's part) but costs no
//     GET.
func TestDamagedArchiveObjectsOutsideTheRebuildAreNotRead(t *testing.T) {
	for _, tc := range []struct {
		name, where string
		record      func(seam time.Time) archive.Record
	}{
		{"before from", "of last month", func(time.Time) archive.Record {
			return archive.Record{Shard: "shardId-000000000000", Seq: "1", Arrival: time.Now().Add(-30 * 24 * time.Hour)}
		}},
		{"after the seam", "of the hour after the seam", func(seam time.Time) archive.Record {
			return archive.Record{Shard: "shardId-000000000000", Seq: "9" + strings.Repeat("0", 60), Arrival: seam.Add(time.Hour)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newArchived(t, 1)
			ctx := context.Background()
			from := time.Now().Add(-time.Second)
			seam, _ := a.sendAcrossSeam()
			a.archive(ctx, 10, nil)
			damaged := archive.Key(a.stream, []archive.Record{tc.record(seam)})
			a.put(damaged, []byte("not gzip"), "")
			r := replay.New(a.kin, a.db, replay.NewRegistry(a.ps, a.param))
			progress := &syncbuf.Buffer{}
			opts := a.opts(from, progress)
			opts.Archive, opts.ArchiveUntil = archive.NewReader(a.s3, a.bucket), seam
			res, err := r.Run(ctx, opts, a.handler)
			if err != nil || !res.Swapped || res.Archived != 40 {
				t.Fatalf("rebuild from %s with a damaged object %s (%s) in the archive: %+v %v, want it swapped with the 40 records before the seam from the archive\n%s",
					from, tc.where, damaged, res, err, progress)
			}
		})
	}
}

// TestHoleInTheArchiveIsRefused: an object deleted from the middle of a
// shard's archive (by hand, or a batch the archiver gave up on) leaves a
// hole that sequence numbers alone cannot show. The objects' chain does:
// the rebuild refuses before creating anything, naming the shard, the
// objects on either side and the sequence numbers the archive lacks,
// rather than swap in views missing those records.
func TestHoleInTheArchiveIsRefused(t *testing.T) {
	a := newArchived(t, 1)
	ctx := context.Background()
	from := time.Now().Add(-time.Second)
	seam, _ := a.sendAcrossSeam()
	shard := "shardId-000000000000"
	keys := a.archiveInObjects(ctx, shard)
	if _, err := a.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(a.bucket), Key: aws.String(keys[1])}); err != nil {
		t.Fatal(err)
	}
	gone, _ := archive.ParseKey(keys[1])
	r := replay.New(a.kin, a.db, replay.NewRegistry(a.ps, a.param))
	progress := &syncbuf.Buffer{}
	opts := a.opts(from, progress)
	opts.Archive, opts.ArchiveUntil = archive.NewReader(a.s3, a.bucket), seam
	res, err := r.Run(ctx, opts, a.handler)
	if res != nil && res.Swapped {
		t.Errorf("swapped to %s, which lacks the records of %s (%d read)", res.Target, keys[1], res.Read)
	}
	if !errors.Is(err, replay.ErrRefused) {
		t.Fatalf("got %v, want a refusal naming the hole\n%s", err, progress)
	}
	// And what to do: end the archive part before the hole, when the stream
	// still holds it, else put the object back or start after it.
	for _, want := range []string{"hole in the archive", shard, keys[0], keys[2], "sequence number " + gone.Last, "-archive-until", "put the deleted object back", "-from"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %q", err, want)
		}
	}
	t.Logf("refused: %v", err)
	a.currentIs(ctx, a.table)
	if _, derr := a.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(a.table + "-v2")}); derr == nil {
		t.Errorf("%s-v2 was created: the hole is found before anything is", a.table)
	}
}

// TestFollowingTheHoleRefusalRebuilds: the refusal of a hole says what to
// do while the stream still holds the missing records; doing it — an
// -archive-until at the hour the refusal names, or, when -from is within
// the stream's retention, no archive at all — gives a rebuild with every
// record once.
func TestFollowingTheHoleRefusalRebuilds(t *testing.T) {
	for _, tc := range []struct {
		name string
		// ago is how long before the records -from is.
		ago time.Duration
	}{
		{name: "-from hours before the hole: end the archive part before it", ago: 2 * time.Hour},
		{name: "-from in the hole's hour: the stream alone holds it all", ago: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newArchived(t, 1)
			ctx := context.Background()
			from := time.Now().Add(-tc.ago)
			seam, distinct := a.sendAcrossSeam()
			keys := a.archiveInObjects(ctx, "shardId-000000000000")
			if _, err := a.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(a.bucket), Key: aws.String(keys[1])}); err != nil {
				t.Fatal(err)
			}
			r := replay.New(a.kin, a.db, replay.NewRegistry(a.ps, a.param))
			progress := &syncbuf.Buffer{}
			opts := a.opts(from, progress)
			opts.Archive, opts.ArchiveUntil = archive.NewReader(a.s3, a.bucket), seam
			_, err := r.Run(ctx, opts, a.handler)
			var hole *archive.HoleError
			if !errors.Is(err, replay.ErrRefused) || !errors.As(err, &hole) {
				t.Fatalf("got %v, want a refusal of the hole\n%s", err, progress)
			}
			// Step 1 of the refusal, as a user reads it.
			if hole.Before().After(from) {
				want := "-archive-until of " + hole.Before().UTC().Format("2006-01-02T15:04:05.000Z07:00")
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("refusal %q does not say %q", err, want)
				}
				opts.ArchiveUntil = hole.Before()
			} else {
				if !strings.Contains(err.Error(), "without -archive-bucket") {
					t.Fatalf("refusal %q: -from is within the stream's retention, but it does not say to rebuild without the archive", err)
				}
				opts.Archive, opts.ArchiveUntil = nil, time.Time{}
			}
			res, err := r.Run(ctx, opts, a.handler)
			if err != nil || !res.Swapped {
				t.Fatalf("rebuild as the refusal says: %+v %v\n%s", res, err, progress)
			}
			if d := diff(a.windows(ctx, res.Target), a.reference(distinct)); d != "" {
				t.Errorf("%s differs from each distinct event once:\n%s", res.Target, d)
			}
		})
	}
}
