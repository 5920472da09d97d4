package archive

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/tributary-dev/tributary/pkg/stream"
)

// objectReader is what reading the archive needs of S3.
type objectReader interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

var _ objectReader = (*s3.Client)(nil)

// MaxListed bounds the objects one listing holds (about 100 bytes each):
// the archiver writes one object per shard per batching window (a minute in
// the stack), so this is years of a shard or weeks of hundreds.
const MaxListed = 1_000_000

// Reader reads a bucket's archive.
type Reader struct {
	s3     objectReader
	bucket string
}

// NewReader returns a Reader of bucket.
func NewReader(client objectReader, bucket string) *Reader {
	return &Reader{s3: client, bucket: bucket}
}

// Bucket is the bucket read.
func (r *Reader) Bucket() string { return r.bucket }

// Index is a stream's archive objects whose first record arrived in a range
// of hours, per shard in sequence order.
type Index struct {
	Stream string
	Shards map[string][]ObjectName
	// Objects counts them.
	Objects int
}

// List lists streamName's objects whose first record arrived from the hour
// of from to the hour of until (UTC), both included. Keys that are not an
// archive object's are ignored. listed, if not nil, is called after each
// page of the listing with the objects listed so far (up to MaxListed, a
// thousand a page: a long listing's progress).
func (r *Reader) List(ctx context.Context, streamName string, from, until time.Time, listed func(objects int)) (*Index, error) {
	idx := &Index{Stream: streamName, Shards: map[string][]ObjectName{}}
	last := until.UTC().Truncate(time.Hour)
	err := r.list(ctx, streamName, from, func(n ObjectName) bool {
		if n.Hour.After(last) {
			return false
		}
		idx.Shards[n.Shard] = append(idx.Shards[n.Shard], n)
		idx.Objects++
		return true
	}, func() {
		if listed != nil {
			listed(idx.Objects)
		}
	})
	if err != nil {
		return nil, err
	}
	for _, objs := range idx.Shards {
		sort.Slice(objs, func(i, j int) bool {
			if c := stream.CompareSequence(objs[i].First, objs[j].First); c != 0 {
				return c < 0
			}
			return stream.CompareSequence(objs[i].Last, objs[j].Last) < 0
		})
	}
	return idx, nil
}

// list calls f with each of streamName's objects from the hour of from on,
// in key order, until f returns false, and page (if not nil) after each
// page.
func (r *Reader) list(ctx context.Context, streamName string, from time.Time, f func(ObjectName) bool, page func()) error {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(r.bucket), Prefix: aws.String(StreamPrefix(streamName))}
	if !from.IsZero() {
		// The hour's prefix without its slash sorts before every key in it.
		p := HourPrefix(streamName, from)
		in.StartAfter = aws.String(p[:len(p)-1])
	}
	n := 0
	for {
		out, err := r.s3.ListObjectsV2(ctx, in)
		if err != nil {
			return fmt.Errorf("listing the archive of %s in bucket %s: %w", streamName, r.bucket, err)
		}
		for _, o := range out.Contents {
			name, ok := ParseKey(aws.ToString(o.Key))
			if !ok {
				continue
			}
			if n++; n > MaxListed {
				return fmt.Errorf("the archive of %s in bucket %s holds more than %d objects in the range: give a later -from", streamName, r.bucket, MaxListed)
			}
			if !f(name) {
				if page != nil {
					page()
				}
				return nil
			}
		}
		if page != nil {
			page()
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

// FirstHour is the hour (UTC) of streamName's oldest object, listed, not
// read: the archive begins within it. False if the archive holds nothing.
func (r *Reader) FirstHour(ctx context.Context, streamName string) (time.Time, bool, error) {
	var hour time.Time
	err := r.list(ctx, streamName, time.Time{}, func(n ObjectName) bool {
		hour = n.Hour
		return false
	}, nil)
	return hour, !hour.IsZero(), err
}

// Start is when streamName's archive begins: the arrival of its oldest
// record (read from the first hour's objects); false if it holds nothing.
func (r *Reader) Start(ctx context.Context, streamName string) (time.Time, bool, error) {
	var hour time.Time
	first := map[string]ObjectName{}
	err := r.list(ctx, streamName, time.Time{}, func(n ObjectName) bool {
		if hour.IsZero() {
			hour = n.Hour
		}
		if !n.Hour.Equal(hour) {
			return false
		}
		if f, ok := first[n.Shard]; !ok || stream.CompareSequence(n.First, f.First) < 0 {
			first[n.Shard] = n
		}
		return true
	}, nil)
	if err != nil || len(first) == 0 {
		return time.Time{}, false, err
	}
	var start time.Time
	for _, n := range first {
		recs, err := r.Records(ctx, n)
		if err != nil {
			return time.Time{}, false, err
		}
		if start.IsZero() || recs[0].Arrival.Before(start) {
			start = recs[0].Arrival
		}
	}
	return start, true, nil
}

// Records reads and checks one object (Decode). A listed object that is gone,
// or that needs a restore first, is an *ObjectError naming it.
func (r *Reader) Records(ctx context.Context, n ObjectName) ([]Record, error) {
	out, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.bucket), Key: aws.String(n.Key)})
	if err != nil {
		var nsk *s3types.NoSuchKey
		var ios *s3types.InvalidObjectState
		var api smithy.APIError
		switch {
		case errors.As(err, &nsk):
			return nil, &ObjectError{Key: n.Key, Reason: "missing: listed in bucket " + r.bucket + ", but gone when read"}
		case errors.As(err, &ios):
			return nil, &ObjectError{Key: n.Key, Reason: "in an archive storage class (" + string(ios.StorageClass) + "): restore it before replaying"}
		case errors.As(err, &api) && api.ErrorCode() == "AccessDenied":
			return nil, &ObjectError{Key: n.Key, Reason: "not readable", Err: err}
		}
		return nil, fmt.Errorf("reading archive object %s: %w", n.Key, err)
	}
	defer out.Body.Close()
	return Decode(n, out.Body)
}

// HoleError is a break in a shard's chain of objects: Next's link names a
// record the archiver was handed before Next's first one, and no object
// listed holds it. The records after Held.Last (or, if no object is
// listed before Next, those of the link's hour) up to and including the
// link's are missing: an object deleted, or a batch the archiver gave up
// on after its retries.
type HoleError struct {
	Shard string
	// Held is the object holding the last record the archive has before
	// the hole (zero if none is listed).
	Held ObjectName
	// Next is the object whose link names the missing record.
	Next ObjectName
}

// Before is an hour no later than the first missing record's arrival: the
// hour of the object holding the record before the hole, else the hour of
// the record the link names. A rebuild whose archive part ends there
// (-archive-until) reads what follows from the stream.
func (e *HoleError) Before() time.Time {
	if e.Held.Key != "" {
		return e.Held.Hour
	}
	return e.Next.After.Hour
}

func (e *HoleError) Error() string {
	s := fmt.Sprintf("hole in the archive of shard %s: object %s (sequence numbers %s-%s) follows sequence number %s (arrived in hour %s), which no object holds",
		e.Shard, e.Next.Key, e.Next.First, e.Next.Last, e.Next.After.Seq, e.Next.After.Hour.Format("2006-01-02 15:00"))
	if e.Held.Key == "" {
		return s + ": the object before it, filed under that hour, is missing"
	}
	return s + fmt.Sprintf("; before it the archive holds up to sequence number %s (object %s), so the records after %s up to and including %s are missing",
		e.Held.Last, e.Held.Key, e.Held.Last, e.Next.After.Seq)
}

// CheckChain checks that objs, one shard's objects in sequence order (as
// List gives them) listed from the hour of from on, leave no hole: each
// object that does not overlap what the ones before it hold must follow
// the last record they hold, as its link says. An object whose link is
// unknown (written before the archiver kept a chain, or the first of a
// shard's chain) is taken as following; so is the first one listed when
// its link names a record that arrived before from's hour (its object is
// not listed). A link naming a record before the last one held (a
// duplicate invocation of an earlier batch wrote the chain head last) is
// no hole: the archive holds more than the link says. A break is a
// *HoleError.
func CheckChain(objs []ObjectName, from time.Time) error {
	listedFrom := from.UTC().Truncate(time.Hour)
	var held ObjectName
	for _, o := range objs {
		if held.Key != "" && stream.CompareSequence(o.First, held.Last) <= 0 {
			// Overlaps what is held (a retried batch's object).
			if stream.CompareSequence(o.Last, held.Last) > 0 {
				held = o
			}
			continue
		}
		if o.After.Seq != "" && !o.After.Hour.Before(listedFrom) &&
			(held.Key == "" || stream.CompareSequence(o.After.Seq, held.Last) > 0) {
			return &HoleError{Shard: o.Shard, Held: held, Next: o}
		}
		held = o
	}
	return nil
}
