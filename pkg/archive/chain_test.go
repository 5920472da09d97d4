package archive_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tributary-dev/tributary/pkg/archive"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// faultyS3 is the stand-in's S3 where the stopAt'th put of an archive
// object (from 1; 0: none) and those after it fail: the function stopped
// (timed out, crashed) between its writes, which no endpoint can be made
// to do.
type faultyS3 struct {
	*s3.Client
	stopAt, puts int
}

func (f *faultyS3) PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if strings.HasPrefix(aws.ToString(in.Key), archive.Prefix) && f.stopAt > 0 {
		if f.puts++; f.puts >= f.stopAt {
			return nil, errors.New("injected: the function stopped before this write")
		}
	}
	return f.Client.PutObject(ctx, in, optFns...)
}

// chainAt is when record i of chainShard arrives: a minute apart from
// 09:00, so records 60 and later arrive in hour 10.
var chainAt = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

const chainShard = "shardId-000000000000"

// batch is records from to to of chainShard, as Lambda hands them.
func batch(from, to int) events.KinesisEvent {
	var ev events.KinesisEvent
	for i := from; i <= to; i++ {
		ev.Records = append(ev.Records, record(chainShard, strconv.Itoa(i), chainAt.Add(time.Duration(i)*time.Minute), fmt.Sprintf(`{"i":%d}`, i)))
	}
	return ev
}

// TestChainShowsHolesAndOnlyHoles: the archiver links each object to the
// record it was handed before it on the shard, so a reader sees a hole
// (an object deleted, a batch Lambda gave up on) and names it; Lambda's
// retries — of the same batch, with more records, bisected, after the
// function stopped between its writes — and objects written before the
// chain are no hole, and every record reads back once.
func TestChainShowsHolesAndOnlyHoles(t *testing.T) {
	type step struct {
		from, to int
		stopAt   int  // the function stops before its stopAt'th object (from 1; 0: it does not)
		wantErr  bool // the step fails (Lambda retries or gives up)
	}
	for _, tc := range []struct {
		name  string
		steps []step
		// old: objects written before the chain (no link), as ranges.
		old [][2]int
		// del: the object holding this record is deleted afterwards.
		del  int
		from time.Time // listed from (zero: chainAt)
		// hole: the sequence numbers CheckChain names ("" none): held
		// last, next first, the link.
		hole [3]string
		// missing: records that are not read back.
		missing []int
	}{
		{name: "batches one after the other", steps: []step{{1, 5, 0, false}, {6, 10, 0, false}, {11, 15, 0, false}}},
		{name: "a batch retried with more records after it", steps: []step{{1, 5, 0, false}, {6, 8, 0, false}, {6, 12, 0, false}, {13, 15, 0, false}}},
		{name: "stopped between the chain head and the object, retried", steps: []step{{1, 5, 0, false}, {6, 10, 1, true}, {6, 12, 0, false}, {13, 15, 0, false}}},
		{name: "retried after writing everything (stopped before Lambda heard)", steps: []step{{1, 5, 0, false}, {6, 10, 0, false}, {6, 10, 0, false}, {11, 15, 0, false}}},
		{name: "bisected after a failure", steps: []step{{1, 5, 0, false}, {6, 10, 1, true}, {6, 8, 0, false}, {9, 10, 0, false}, {11, 15, 0, false}}},
		{name: "a batch across an hour retried after its first object", steps: []step{{50, 55, 0, false}, {56, 64, 0, false}, {56, 64, 0, false}, {65, 70, 0, false}}},
		{name: "a batch across an hour, its second object failed, retried", steps: []step{{50, 55, 0, false}, {56, 64, 2, true}, {56, 66, 0, false}, {67, 70, 0, false}}},
		{name: "a batch given up on", steps: []step{{1, 5, 0, false}, {6, 10, 1, true}, {11, 15, 0, false}},
			hole: [3]string{"5", "11", "10"}, missing: []int{6, 7, 8, 9, 10}},
		{name: "a batch given up on after its first object", steps: []step{{50, 55, 0, false}, {56, 64, 2, true}, {65, 70, 0, false}},
			hole: [3]string{"59", "65", "64"}, missing: []int{60, 61, 62, 63, 64}},
		{name: "an object deleted", steps: []step{{1, 5, 0, false}, {6, 10, 0, false}, {11, 15, 0, false}}, del: 8,
			hole: [3]string{"5", "11", "10"}, missing: []int{6, 7, 8, 9, 10}},
		{name: "the first object listed deleted", steps: []step{{1, 5, 0, false}, {6, 10, 0, false}}, del: 1,
			hole: [3]string{"", "6", "5"}, missing: []int{1, 2, 3, 4, 5}},
		{name: "listed from a later hour: the first object's link is before it", steps: []step{{50, 55, 0, false}, {56, 64, 0, false}, {65, 70, 0, false}},
			from: chainAt.Add(time.Hour), missing: []int{50, 51, 52, 53, 54, 55, 56, 57, 58, 59}},
		{name: "objects from before the chain, then the chain", old: [][2]int{{1, 5}, {6, 10}}, steps: []step{{11, 15, 0, false}, {16, 20, 0, false}}},
		{name: "a hole among objects from before the chain cannot be seen", old: [][2]int{{1, 5}, {11, 15}}, steps: []step{{16, 20, 0, false}},
			missing: []int{6, 7, 8, 9, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client, bucket := newBucket(t)
			last := 0
			for _, o := range tc.old {
				var recs []archive.Record
				for _, r := range batch(o[0], o[1]).Records {
					recs = append(recs, archive.Record{Shard: chainShard, Seq: r.Kinesis.SequenceNumber, Arrival: r.Kinesis.ApproximateArrivalTimestamp.UTC(), Key: r.Kinesis.PartitionKey, Data: r.Kinesis.Data})
				}
				body, _ := archive.Encode(recs)
				put(t, client, bucket, archive.Key("events", recs), body)
				last = o[1]
			}
			fs := &faultyS3{Client: client}
			a := archive.NewArchiver(fs, bucket)
			for _, st := range tc.steps {
				fs.stopAt, fs.puts = st.stopAt, 0
				if err := a.Handle(ctx, batch(st.from, st.to)); (err != nil) != st.wantErr {
					t.Fatalf("batch %d-%d: %v, want an error: %t", st.from, st.to, err, st.wantErr)
				}
				last = max(last, st.to)
			}
			r := archive.NewReader(client, bucket)
			all, err := r.List(ctx, "events", chainAt, chainAt.Add(3*time.Hour), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.del != 0 {
				for _, o := range all.Shards[chainShard] {
					if stream.CompareSequence(o.First, strconv.Itoa(tc.del)) <= 0 && stream.CompareSequence(o.Last, strconv.Itoa(tc.del)) >= 0 {
						if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.Key)}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			from := tc.from
			if from.IsZero() {
				from = chainAt
			}
			idx, err := r.List(ctx, "events", from, chainAt.Add(3*time.Hour), nil)
			if err != nil {
				t.Fatal(err)
			}
			objs := idx.Shards[chainShard]
			err = archive.CheckChain(objs, from)
			var hole *archive.HoleError
			switch {
			case tc.hole == [3]string{} && err != nil:
				t.Errorf("CheckChain: %v, want no hole; objects %v", err, keysOf(objs))
			case tc.hole != [3]string{} && !errors.As(err, &hole):
				t.Errorf("CheckChain: %v, want a hole after %s before %s; objects %v", err, tc.hole[0], tc.hole[1], keysOf(objs))
			case hole != nil:
				if got := [3]string{hole.Held.Last, hole.Next.First, hole.Next.After.Seq}; got != tc.hole || hole.Shard != chainShard {
					t.Errorf("hole on %s after %s, before %s, link %s; want %v", hole.Shard, got[0], got[1], got[2], tc.hole)
				}
				if !strings.Contains(err.Error(), hole.Next.Key) || (hole.Held.Key != "" && !strings.Contains(err.Error(), hole.Held.Key)) {
					t.Errorf("%v does not name the objects around the hole", err)
				}
			}
			// Every record once, as the rebuild takes them: each
			// sequence number once, in order.
			var got []int
			seen := ""
			for _, o := range objs {
				recs, err := r.Records(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				for _, rec := range recs {
					if seen == "" || stream.CompareSequence(rec.Seq, seen) > 0 {
						seen = rec.Seq
						n, _ := strconv.Atoi(rec.Seq)
						got = append(got, n)
					}
				}
			}
			var want []int
			first := 1
			if len(tc.old) == 0 {
				first = tc.steps[0].from
			}
			for i := first; i <= last; i++ {
				if !contains(tc.missing, i) {
					want = append(want, i)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("records read %v, want %v", got, want)
			}
		})
	}
}

func keysOf(objs []archive.ObjectName) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Key[strings.LastIndex(o.Key, "/")+1:])
	}
	return out
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func put(t *testing.T, client *s3.Client, bucket, key string, body []byte) {
	t.Helper()
	if _, err := client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(string(body))}); err != nil {
		t.Fatal(err)
	}
}
