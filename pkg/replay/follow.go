package replay

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// run is one replay's followers.
type run struct {
	opts    Options
	kin     StreamReader
	archive ArchiveSource
	h       BatchHandler
	asides  *asides // what h set aside, for apply to report
	arn     string
	region  string
	// starts are where each shard is read from (AT_TIMESTAMP); a shard
	// missing here is read from opts.From.
	starts map[string]time.Time
	// seam, when set, is the archive part: the shards it names are read
	// from the archive up to their seam, then from the stream after it.
	seam     *seamPlan
	stream   string
	shards   []*shardRun
	progress *progress
	stop     chan struct{} // closed at the end of the handover
	mu       sync.Mutex
	caughtUp chan struct{}
	signaled bool
	// handoverEnd is when the handover ends (zero before the swap).
	handoverEnd time.Time
}

type shardRun struct {
	id      string
	shard   kintypes.Shard
	parents []*shardRun
	done    chan struct{} // closed when a closed shard has been read to its end
	stats   ShardStats    // guarded by run.mu
	seam    *shardSeam    // the shard's archive part, if any
}

func (r *run) update(s *shardRun, f func(st *ShardStats)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&s.stats)
	if r.signaled {
		return
	}
	for _, x := range r.shards {
		if !x.stats.CaughtUp {
			return
		}
	}
	r.signaled = true
	close(r.caughtUp)
}

func (r *run) stopping() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// sleep waits d; false if the run is stopping or ctx ended.
func (r *run) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-r.stop:
		return false
	case <-time.After(d):
		return true
	}
}

// follow reads one shard from the timestamp and applies its records.
func (r *run) follow(ctx context.Context, s *shardRun) error {
	for _, p := range s.parents {
		select {
		case <-p.done:
		case <-r.stop:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
	r.update(s, func(st *ShardStats) { st.Waiting = false })
	last, archiveStarted := "", false
	if s.seam != nil {
		began, err := r.applyArchive(ctx, s)
		if err != nil {
			return err
		}
		archiveStarted = began
		if s.seam.archiveOnly || r.stopping() {
			r.update(s, func(st *ShardStats) { st.Started, st.CaughtUp, st.Done = true, true, true })
			close(s.done)
			return nil
		}
		last = s.seam.last
	}
	// checked: the stream part's first record was checked against the seam
	// (or there is no seam); started: a record that arrived at or after
	// the start was read (before it, the stream part skips records, as
	// AT_TIMESTAMP does).
	checked, started := s.seam == nil || last == "", s.seam == nil || last == "" || archiveStarted
	closed := s.shard.SequenceNumberRange != nil && s.shard.SequenceNumberRange.EndingSequenceNumber != nil
	it, err := r.iterator(ctx, s.id, last)
	if err != nil {
		return err
	}
	for !r.stopping() {
		out, err := r.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(r.opts.BatchSize), StreamARN: aws.String(r.arn)})
		var expired *kintypes.ExpiredIteratorException
		var throttled *kintypes.ProvisionedThroughputExceededException
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &expired):
			if it, err = r.iterator(ctx, s.id, last); err != nil {
				return err
			}
			continue
		case errors.As(err, &throttled):
			r.sleep(ctx, time.Second)
			continue
		case err != nil:
			return fmt.Errorf("reading shard %s: %w", s.id, err)
		}
		recs := out.Records
		if !checked && len(recs) > 0 {
			if err := s.seam.checkFirst(r.stream, r.seam.bucket, aws.ToString(recs[0].SequenceNumber)); err != nil {
				return err
			}
			checked = true
		}
		if !started {
			from := r.startOf(s.id)
			for len(recs) > 0 && aws.ToTime(recs[0].ApproximateArrivalTimestamp).Before(from) {
				last = aws.ToString(recs[0].SequenceNumber)
				recs = recs[1:]
			}
			started = len(recs) > 0
		}
		if len(recs) > 0 {
			c, err := r.apply(ctx, s.id, recs)
			arrival := aws.ToTime(recs[len(recs)-1].ApproximateArrivalTimestamp)
			r.update(s, func(st *ShardStats) {
				st.add(c)
				st.LastArrival = arrival
			})
			if err != nil {
				return err
			}
			last = aws.ToString(recs[len(recs)-1].SequenceNumber)
		}
		behind := aws.ToInt64(out.MillisBehindLatest)
		end := out.NextShardIterator == nil || (closed && len(out.Records) == 0 && behind == 0)
		r.update(s, func(st *ShardStats) {
			st.Started = true
			st.MillisBehindLatest = behind
			// At the tip: nothing returned and nothing behind. (A page can
			// say 0 ms behind with records left that arrived in the same
			// millisecond as its last one.)
			if (behind == 0 && len(out.Records) == 0) || end {
				st.CaughtUp = true
			}
			st.Done = end
		})
		if end {
			close(s.done)
			return nil
		}
		it = out.NextShardIterator
		if len(out.Records) == 0 || behind == 0 {
			r.sleep(ctx, r.opts.Poll)
		}
	}
	return nil
}

// startOf is where the shard is read from: starts, or opts.From.
func (r *run) startOf(shard string) time.Time {
	if from, ok := r.starts[shard]; ok {
		return from
	}
	return r.opts.From
}

// iterator is the shard's iterator at its start (starts, or opts.From), or
// after last.
func (r *run) iterator(ctx context.Context, shard, last string) (*string, error) {
	from := r.startOf(shard)
	in := &kinesis.GetShardIteratorInput{StreamARN: aws.String(r.arn), ShardId: aws.String(shard),
		ShardIteratorType: kintypes.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(from)}
	if last != "" {
		in.ShardIteratorType, in.Timestamp, in.StartingSequenceNumber = kintypes.ShardIteratorTypeAfterSequenceNumber, nil, aws.String(last)
	}
	out, err := r.kin.GetShardIterator(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("iterator of shard %s: %w", shard, err)
	}
	return out.ShardIterator, nil
}

// applyArchive hands the shard's archive part to the handler in batches
// of BatchSize: each archived record once (objects a retried batch wrote
// overlap), from the first that arrived at or after the start up to the
// seam. It reports whether a record at or after the start was read.
func (r *run) applyArchive(ctx context.Context, s *shardRun) (started bool, err error) {
	a := s.seam
	from := r.startOf(s.id)
	last := ""
	for _, o := range a.objects {
		if r.stopping() || ctx.Err() != nil {
			return started, nil
		}
		if stream.CompareSequence(o.First, a.last) > 0 {
			break
		}
		if last != "" && stream.CompareSequence(o.Last, last) <= 0 {
			continue
		}
		recs, err := r.archive.Records(ctx, o)
		if err != nil {
			return started, err
		}
		var page []kintypes.Record
		for _, rec := range recs {
			if last != "" && stream.CompareSequence(rec.Seq, last) <= 0 {
				continue
			}
			if stream.CompareSequence(rec.Seq, a.last) > 0 {
				break
			}
			last = rec.Seq
			if !started && rec.Arrival.Before(from) {
				continue
			}
			started = true
			page = append(page, kintypes.Record{SequenceNumber: aws.String(rec.Seq), PartitionKey: aws.String(rec.Key),
				Data: rec.Data, ApproximateArrivalTimestamp: aws.Time(rec.Arrival)})
		}
		for len(page) > 0 {
			n := min(len(page), int(r.opts.BatchSize))
			c, err := r.apply(ctx, s.id, page[:n])
			arrival := aws.ToTime(page[n-1].ApproximateArrivalTimestamp)
			r.update(s, func(st *ShardStats) {
				st.Started = true
				st.add(c)
				st.Archived += c.read
				st.LastArrival = arrival
			})
			if err != nil {
				return started, err
			}
			page = page[n:]
		}
	}
	return started, nil
}

// batchCounts is what one apply did with a page.
type batchCounts struct {
	read, applied, skipped int
	setAside               int // of applied
}

func (st *ShardStats) add(c batchCounts) {
	st.Read += c.read
	st.Applied += c.applied
	st.Skipped += c.skipped
	st.SetAside += c.setAside
}

// apply hands a page to the handler as Lambda would: retried from the
// lowest failed record; a record still failing after MaxAttempts is skipped
// (and counted), as Lambda's retry limit would send it to the on-failure
// destination. A record the handler set aside (it can never apply it) is
// printed with its field and reason and counted, once.
func (r *run) apply(ctx context.Context, shard string, recs []kintypes.Record) (c batchCounts, err error) {
	c.read = len(recs)
	pending := r.event(shard, recs)
	attempts := 0
	for len(pending) > 0 {
		resp, err := r.h.HandleBatch(ctx, events.KinesisEvent{Records: pending})
		c.setAside += r.reportAsides(shard)
		if err != nil {
			attempts++
			if attempts >= r.opts.MaxAttempts || ctx.Err() != nil {
				return c, fmt.Errorf("shard %s: batch from %s failed %d times: %w", shard, pending[0].Kinesis.SequenceNumber, attempts, err)
			}
			r.backoff(ctx, attempts)
			continue
		}
		if len(resp.BatchItemFailures) == 0 {
			c.applied += len(pending)
			return c, nil
		}
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		lowest := 0
		for i, rec := range pending {
			if failed[rec.Kinesis.SequenceNumber] {
				lowest = i
				break
			}
		}
		c.applied += lowest
		pending = pending[lowest:]
		if err := ctx.Err(); err != nil {
			// Interrupted: the records left were not applied, and are not
			// records that kept failing (skipped, one line each).
			return c, fmt.Errorf("shard %s: interrupted at record %s: %w", shard, pending[0].Kinesis.SequenceNumber, err)
		}
		if lowest > 0 {
			attempts = 0
		}
		attempts++
		if attempts >= r.opts.MaxAttempts {
			r.progress.printf("shard %s: record %s still failed after %d attempts: skipped (the processor's lines above about it say why; the live function sets such a record aside, and make setaside lists it there)", shard, pending[0].Kinesis.SequenceNumber, attempts)
			c.skipped++
			pending = pending[1:]
			attempts = 0
			continue
		}
		r.backoff(ctx, attempts)
	}
	return c, nil
}

// asides collects, by shard, the records a replay's handler set aside
// (setaside.Reporting calls add, from within HandleBatch).
type asides struct {
	mu      sync.Mutex
	byShard map[string][]setaside.Record
	// last is the highest sequence number reported of each shard: a
	// Fanout's pipelines may each set one record aside, and a batch
	// handed again (after an error) sets its records aside again.
	last map[string]string
}

func (a *asides) add(rec setaside.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.byShard[rec.Shard] = append(a.byShard[rec.Shard], rec)
}

// take returns shard's records set aside since the last take, in sequence
// order, each once.
func (a *asides) take(shard string) []setaside.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	recs := a.byShard[shard]
	delete(a.byShard, shard)
	sort.SliceStable(recs, func(i, j int) bool { return sequenceBefore(recs[i].Sequence, recs[j].Sequence) })
	if a.last == nil {
		a.last = map[string]string{}
	}
	out := recs[:0]
	for _, rec := range recs {
		if last, ok := a.last[shard]; !ok || sequenceBefore(last, rec.Sequence) {
			a.last[shard] = rec.Sequence
			out = append(out, rec)
		}
	}
	return out
}

// sequenceBefore orders Kinesis sequence numbers (decimal digits, up to
// 128 of them) as numbers.
func sequenceBefore(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// reportAsides prints shard's records the handler set aside since the last
// call, with their field and reason, and returns how many.
func (r *run) reportAsides(shard string) int {
	if r.asides == nil {
		return 0
	}
	recs := r.asides.take(shard)
	for _, rec := range recs {
		field := rec.Field
		if field == "" {
			field = "the whole record"
		}
		r.progress.printf("shard %s: record %s can never be applied (%s, %s: %s): not in this version; the live function set it aside (make setaside lists it)",
			shard, rec.Sequence, rec.Kind, field, strictjson.Cut(rec.Reason, 300))
	}
	return len(recs)
}

func (r *run) backoff(ctx context.Context, attempt int) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
	}
}

// event shapes GetRecords records as the records of a Lambda Kinesis event.
func (r *run) event(shard string, recs []kintypes.Record) []events.KinesisEventRecord {
	out := make([]events.KinesisEventRecord, len(recs))
	for i, rec := range recs {
		seq := aws.ToString(rec.SequenceNumber)
		out[i] = events.KinesisEventRecord{
			AwsRegion: r.region, EventID: shard + ":" + seq, EventName: "aws:kinesis:record",
			EventSource: "aws:kinesis", EventSourceArn: r.arn, EventVersion: "1.0",
			Kinesis: events.KinesisRecord{
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: aws.ToTime(rec.ApproximateArrivalTimestamp)},
				Data:                        rec.Data, EncryptionType: string(rec.EncryptionType),
				PartitionKey: aws.ToString(rec.PartitionKey), SequenceNumber: seq, KinesisSchemaVersion: "1.0",
			},
		}
	}
	return out
}

// report shows the progress: in place on a terminal (with the handover's
// countdown), otherwise a line whenever it changed.
func (r *run) report() {
	full, compact := r.status()
	if !r.progress.inPlace {
		r.progress.status(full, "")
		return
	}
	suffix := ""
	r.mu.Lock()
	end := r.handoverEnd
	r.mu.Unlock()
	if !end.IsZero() {
		suffix = fmt.Sprintf(" · handover %s left", max(time.Until(end), 0).Round(time.Second))
	}
	r.progress.status(compact, suffix)
}

// maxShardsShown bounds the shards a progress line names one by one: a
// stream may have hundreds, and the line is written each time it changes.
const maxShardsShown = 16

// status is the progress as one line with every shard, or with the shards
// still being read up to maxShardsShown and the rest counted (full), and
// as a short one with the shard furthest behind (compact, for a terminal).
func (r *run) status() (full, compact string) {
	res := &Result{}
	r.fill(res)
	caught := 0
	var b strings.Builder
	var worst *ShardStats
	shown := 0
	for i, s := range res.Shards {
		if s.CaughtUp {
			caught++
		} else if worst == nil || !s.Started || (worst.Started && s.MillisBehindLatest > worst.MillisBehindLatest) {
			worst = &res.Shards[i]
		}
		if len(res.Shards) > maxShardsShown && (s.CaughtUp || shown == maxShardsShown) {
			continue
		}
		shown++
		fmt.Fprintf(&b, " | %s read %d applied %d", s.Shard, s.Read, s.Applied)
		if s.Archived > 0 {
			fmt.Fprintf(&b, " (%d from the archive)", s.Archived)
		}
		if s.Skipped > 0 {
			fmt.Fprintf(&b, " skipped %d", s.Skipped)
		}
		b.WriteString(" " + shardState(s))
	}
	if rest := len(res.Shards) - shown; rest > 0 {
		fmt.Fprintf(&b, " | and %d more shards, %d of them caught up", rest, caught)
	}
	head := fmt.Sprintf("%d/%d shards caught up, read %d applied %d", caught, len(res.Shards), res.Read, res.Applied)
	if res.Skipped > 0 {
		head += fmt.Sprintf(" skipped %d", res.Skipped)
	}
	compact = head
	if worst != nil {
		compact += " | furthest behind: " + worst.Shard + " " + shardState(*worst)
	}
	return head + b.String(), compact
}

// shardState says where a shard's follower is. "behind" is Kinesis's
// MillisBehindLatest of the last page actually read, so it is only shown
// once a page was read.
func shardState(s ShardStats) string {
	last := ""
	if !s.LastArrival.IsZero() {
		last = " (last record " + s.LastArrival.UTC().Format("15:04:05") + ")"
	}
	switch {
	case s.Waiting:
		return "waiting for its parents"
	case s.Done:
		return "closed, read to its end" + last
	case !s.Started:
		return "not read yet"
	case s.CaughtUp:
		return "caught up" + last
	case s.MillisBehindLatest < 1000:
		return "behind <1s" + last
	default:
		return "behind " + (time.Duration(s.MillisBehindLatest) * time.Millisecond).Round(time.Second).String() + last
	}
}

func (r *run) fill(res *Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Shards, res.Read, res.Applied, res.Skipped, res.SetAside, res.Archived = nil, 0, 0, 0, 0, 0
	for _, s := range r.shards {
		res.Shards = append(res.Shards, s.stats)
		res.Read += s.stats.Read
		res.Archived += s.stats.Archived
		res.Applied += s.stats.Applied
		res.Skipped += s.stats.Skipped
		res.SetAside += s.stats.SetAside
	}
	sort.Slice(res.Shards, func(i, j int) bool { return res.Shards[i].Shard < res.Shards[j].Shard })
}
