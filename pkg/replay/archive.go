package replay

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/archive"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// ArchiveSource is the events stream's archive, as a rebuild reads it
// (archive.Reader).
type ArchiveSource interface {
	Bucket() string
	FirstHour(ctx context.Context, streamName string) (time.Time, bool, error)
	Start(ctx context.Context, streamName string) (time.Time, bool, error)
	List(ctx context.Context, streamName string, from, until time.Time, listed func(objects int)) (*archive.Index, error)
	Records(ctx context.Context, n archive.ObjectName) ([]archive.Record, error)
}

var _ ArchiveSource = (*archive.Reader)(nil)

// SeamMargin is how far inside the stream's retention the default seam
// lies: the stream keeps trimming while a rebuild reads the archive, and
// the record after the seam must still be there when the rebuild gets to
// it.
const SeamMargin = time.Hour

// shardSeam is where one shard's archive part ends and its stream part
// begins: the archive gives every record up to and including Last (the
// last archived record that arrived before the seam), the stream every
// record after it.
type shardSeam struct {
	shard   string
	objects []archive.ObjectName
	// last is the sequence number the archive part ends with ("" if the
	// archive holds nothing of the shard before the seam); next the
	// archived record after it ("" if none is archived yet).
	last, next string
	lastAt     time.Time
	// archiveOnly: the shard is no longer in the stream (closed, and its
	// records older than the retention).
	archiveOnly bool
	firstAt     time.Time // the first archived record's arrival (archiveOnly: orders them)
}

// seamPlan is the archive part of a rebuild.
type seamPlan struct {
	at     time.Time
	bucket string
	shards map[string]*shardSeam
}

// planSeam lists the archive from opts.From to the seam and places the seam
// on every shard, refusing (before anything is created) what would leave a
// gap: a -from before the archive begins, a shard whose stream part starts
// after the archive's part ends (records trimmed from the stream that the
// archive does not hold), a shard the stream holds records of from before
// the seam that the archive holds nothing of.
func (r *Replayer) planSeam(ctx context.Context, opts Options, st *streamInfo, seam time.Time, prog *progress) (*seamPlan, error) {
	src := opts.Archive
	firstHour, ok, err := src.FirstHour(ctx, st.name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, refuse("from", "the archive of stream %s in bucket %s holds nothing, so records that arrived before %s cannot be read", st.name, src.Bucket(), stamp(seam))
	}
	// The archiver's mapping starts at the stream's trim horizon, so an
	// archive made since the stream's first retention period holds every
	// record the stream ever held, and a -from before its oldest record
	// only means nothing arrived in between. A stream more than a retention
	// period older than the archive may have lost records before the
	// archiver began (or was idle that long: the rebuild cannot tell).
	// The oldest record is read only when -from is not past its hour:
	// objects before -from are no part of the rebuild, and one of them
	// damaged, or in a class that needs a restore, must not stop it.
	if opts.From.Before(firstHour.Add(time.Hour)) {
		start, ok, err := src.Start(ctx, st.name)
		if err != nil {
			return nil, err
		}
		if ok && opts.From.Before(start) && st.created.Before(start.Add(-st.retention)) {
			return nil, refuse("from", "%s is before the archive of stream %s (bucket %s) begins: its oldest record arrived %s, and the stream is older than that by more than its retention (created %s), so records before it may never have been archived; give a -from of %s or later",
				stamp(opts.From), st.name, src.Bucket(), stamp(start), stamp(st.created), stamp(start))
		}
	}
	// One hour past the seam, so that the record after the seam is listed
	// when the seam falls at the end of an hour. A month of many shards is
	// hundreds of pages: the count so far is shown every ProgressEvery.
	shown := time.Now()
	idx, err := src.List(ctx, st.name, opts.From, seam.Add(time.Hour), func(n int) {
		if time.Since(shown) >= opts.ProgressEvery {
			shown = time.Now()
			prog.status(fmt.Sprintf("listing the archive of %s in bucket %s from %s: %d objects so far", st.name, src.Bucket(), stamp(opts.From), n), "")
		}
	})
	if err != nil {
		return nil, err
	}
	prog.printf("listed %d objects of the archive of %s in bucket %s (%d shards, from %s to an hour past the seam at %s); placing the seam on each shard",
		idx.Objects, st.name, src.Bucket(), len(idx.Shards), stamp(opts.From), stamp(seam))
	plan := &seamPlan{at: seam, bucket: src.Bucket(), shards: map[string]*shardSeam{}}
	inStream := map[string]bool{}
	for _, sh := range st.shards {
		inStream[aws.ToString(sh.ShardId)] = true
	}
	for shard, objs := range idx.Shards {
		s := &shardSeam{shard: shard, objects: objs, archiveOnly: !inStream[shard]}
		if err := s.place(ctx, src, seam); err != nil {
			return nil, err
		}
		if s.last == "" {
			// Only records after the seam: nothing to read from the
			// archive. A shard the stream lists is read from it alone,
			// from -from; one gone from the stream has nothing to read.
			continue
		}
		plan.shards[shard] = s
	}
	if err := plan.checkChains(st.name, opts.From, time.Now().Add(-st.retention)); err != nil {
		return nil, err
	}
	for _, sh := range st.shards {
		shard := aws.ToString(sh.ShardId)
		s := plan.shards[shard]
		oldest, ok, err := r.oldestRecord(ctx, st.arn, shard)
		if err != nil {
			return nil, err
		}
		switch {
		case !ok:
			// The stream holds nothing of the shard: the archive part is all.
		case s == nil || s.last == "":
			if t := aws.ToTime(oldest.ApproximateArrivalTimestamp); t.Before(seam) {
				return nil, refuse("", "the archive of stream %s (bucket %s) holds nothing of shard %s before the seam at %s, but the stream holds its record %s that arrived %s: the archiver has not written this shard, so its records older than the stream's retention may be missing",
					st.name, src.Bucket(), shard, stamp(seam), aws.ToString(oldest.SequenceNumber), stamp(t))
			}
		default:
			t := aws.ToString(oldest.SequenceNumber)
			if stream.CompareSequence(t, s.last) > 0 && t != s.next {
				return nil, refuse("", "gap at the seam on shard %s of stream %s: the archive (bucket %s) ends at sequence number %s (arrived %s), the stream's oldest record is %s (arrived %s); the records between may be lost, so the rebuild would miss them. Give an -archive-until before %s, or a -from within the stream's retention",
					shard, st.name, src.Bucket(), s.last, stamp(s.lastAt), t, stamp(aws.ToTime(oldest.ApproximateArrivalTimestamp)), stamp(aws.ToTime(oldest.ApproximateArrivalTimestamp)))
			}
		}
	}
	return plan, nil
}

// checkChains refuses a hole in the archive part of any shard: the objects
// a rebuild reads (up to the seam) must follow each other as their links
// say (archive.CheckChain), or records between them are missing. The
// refusal says what to do first: with the stream holding records since
// oldest, an -archive-until at or before the hole when that is after
// -from, else no archive at all when -from is within the stream's
// retention.
func (p *seamPlan) checkChains(streamName string, from, oldest time.Time) error {
	for _, shard := range slices.Sorted(maps.Keys(p.shards)) {
		s := p.shards[shard]
		if s.last == "" {
			continue
		}
		read := s.objects
		for i, o := range s.objects {
			if stream.CompareSequence(o.First, s.last) > 0 {
				read = s.objects[:i]
				break
			}
		}
		err := archive.CheckChain(read, from)
		var hole *archive.HoleError
		if errors.As(err, &hole) {
			var first string
			switch {
			case hole.Before().After(from):
				first = fmt.Sprintf("If the stream still holds them, give an -archive-until of %s or earlier, so the stream supplies them", stamp(hole.Before()))
			case !from.Before(oldest):
				first = fmt.Sprintf("The stream holds every record since -from %s (it keeps them since %s): rebuild without -archive-bucket and -archive-until", stamp(from), stamp(oldest))
			default:
				first = fmt.Sprintf("The hole is in -from's hour, which the stream no longer holds (it keeps records since %s)", stamp(oldest))
			}
			return &RefusedError{Err: err, Reason: fmt.Sprintf("%v (stream %s, bucket %s): a rebuild would silently miss them. %s; else put the deleted object back under its key (the bucket keeps no earlier versions), or give a -from of %s or later, after the hole (docs/archive.md, \"hole in the archive\")",
				err, streamName, p.bucket, first, stamp(hole.Next.After.Hour.Add(time.Hour)))}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// place finds the seam on the shard: the last archived record that arrived
// before seam, and the archived record after it, reading the shard's
// objects from the newest back. An object filed under an hour that begins
// after the seam is not read: the archiver files each record under its
// own arrival hour, so all of its records arrived after the seam.
func (s *shardSeam) place(ctx context.Context, src ArchiveSource, seam time.Time) error {
	for i := len(s.objects) - 1; i >= 0 && s.last == ""; i-- {
		if s.objects[i].Hour.After(seam) {
			continue
		}
		recs, err := src.Records(ctx, s.objects[i])
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if rec.Arrival.Before(seam) {
				s.last, s.lastAt = rec.Seq, rec.Arrival
			}
		}
	}
	if s.last == "" {
		return nil
	}
	for _, o := range s.objects {
		if stream.CompareSequence(o.Last, s.last) <= 0 || (s.next != "" && stream.CompareSequence(o.First, s.next) >= 0) {
			continue
		}
		if stream.CompareSequence(o.First, s.last) > 0 {
			s.next = o.First
			continue
		}
		recs, err := src.Records(ctx, o) // overlaps the seam (a retried batch)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if stream.CompareSequence(rec.Seq, s.last) > 0 {
				if s.next == "" || stream.CompareSequence(rec.Seq, s.next) < 0 {
					s.next = rec.Seq
				}
				break
			}
		}
	}
	if s.archiveOnly && len(s.objects) > 0 {
		recs, err := src.Records(ctx, s.objects[0])
		if err != nil {
			return err
		}
		s.firstAt = recs[0].Arrival
	}
	return nil
}

// checkFirst checks the first record the stream gives after the seam: it
// must follow the archive's part (no overlap) and be the record the
// archive has next, when it has one (no gap on either side).
func (s *shardSeam) checkFirst(streamName, bucket, first string) error {
	switch {
	case stream.CompareSequence(first, s.last) <= 0:
		return refuse("", "overlap at the seam on shard %s of stream %s: the archive (bucket %s) ends at sequence number %s, but the stream part begins at %s, at or before it; its records would be counted twice. Nothing was swapped",
			s.shard, streamName, bucket, s.last, first)
	case s.next != "" && stream.CompareSequence(first, s.next) < 0:
		return refuse("", "gap in the archive at the seam on shard %s of stream %s: after sequence number %s the archive (bucket %s) holds %s next, but the stream holds %s between them, which the archive lacks. Nothing was swapped",
			s.shard, streamName, s.last, bucket, s.next, first)
	case s.next != "" && first != s.next:
		return refuse("", "gap at the seam on shard %s of stream %s: after sequence number %s the archive (bucket %s) holds %s, which the stream no longer does (it begins at %s: trimmed while the archive was read). Nothing was swapped; give a later -archive-until",
			s.shard, streamName, s.last, bucket, s.next, first)
	}
	return nil
}

// oldestRecord is the shard's oldest record in the stream (TRIM_HORIZON);
// false if it holds none.
func (r *Replayer) oldestRecord(ctx context.Context, arn, shard string) (kintypes.Record, bool, error) {
	it, err := r.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamARN: aws.String(arn), ShardId: aws.String(shard),
		ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		return kintypes.Record{}, false, fmt.Errorf("iterator of shard %s: %w", shard, err)
	}
	next := it.ShardIterator
	// GetRecords can answer empty pages before reaching the first record of
	// a shard with a long empty span; MillisBehindLatest 0 means none is left.
	for range 100 {
		out, err := r.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: next, Limit: aws.Int32(1), StreamARN: aws.String(arn)})
		if err != nil {
			return kintypes.Record{}, false, fmt.Errorf("reading the oldest record of shard %s: %w", shard, err)
		}
		if len(out.Records) > 0 {
			return out.Records[0], true, nil
		}
		if out.NextShardIterator == nil || aws.ToInt64(out.MillisBehindLatest) == 0 {
			return kintypes.Record{}, false, nil
		}
		next = out.NextShardIterator
	}
	return kintypes.Record{}, false, errors.New("reading the oldest record of shard " + shard + ": no record after 100 pages")
}

// archiveOnlyOrder is the shards the stream no longer lists, oldest first:
// a parent's records all arrived before its children's, so reading them one
// after the other in this order keeps every key's records in order.
func (p *seamPlan) archiveOnlyOrder() []*shardSeam {
	var out []*shardSeam
	for _, s := range p.shards {
		if s.archiveOnly {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].firstAt.Equal(out[j].firstAt) {
			return out[i].firstAt.Before(out[j].firstAt)
		}
		return out[i].shard < out[j].shard
	})
	return out
}

// Fanout is a rebuild of several pipelines that share the views table:
// each batch goes to each one's handler, so the new version holds the
// windows of all of them (a newly added pipeline backfilled beside the
// others). A record one reports as failed is retried for all, from the
// lowest failed one as Lambda does; the others skip what they applied, by
// their fences.
type Fanout []BatchHandler

// SpillCarries has every handler that keeps carries write them out
// (CarrySpiller).
func (f Fanout) SpillCarries(ctx context.Context) error {
	for _, h := range f {
		if c, ok := h.(CarrySpiller); ok {
			if err := c.SpillCarries(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// HandleBatch hands ev to every handler.
func (f Fanout) HandleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	var resp events.KinesisEventResponse
	seen := map[string]bool{}
	for _, h := range f {
		r, err := h.HandleBatch(ctx, ev)
		if err != nil {
			return events.KinesisEventResponse{}, err
		}
		for _, x := range r.BatchItemFailures {
			if !seen[x.ItemIdentifier] {
				seen[x.ItemIdentifier] = true
				resp.BatchItemFailures = append(resp.BatchItemFailures, x)
			}
		}
	}
	return resp, nil
}
