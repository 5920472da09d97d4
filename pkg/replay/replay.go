package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// StreamReader is what a replay needs of Kinesis.
type StreamReader interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

var _ StreamReader = (*kinesis.Client)(nil)

// BatchHandler is the consumer a replay feeds: the aggregate Processor (its
// HandleBatch), given Lambda-shaped Kinesis events of one shard in order.
type BatchHandler interface {
	HandleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error)
}

// Options say what to replay and how.
type Options struct {
	// Stream is the events stream's name. Required.
	Stream string
	// From is where every shard is read from (AT_TIMESTAMP). Required.
	From time.Time
	// Target names the new version; empty: NextVersion of the current table.
	Target string
	// Handover is how long to keep following after the swap; at least the
	// readers' refresh interval (VIEWS_REFRESH_SECONDS). Default 1 minute.
	Handover time.Duration
	// BatchSize is the GetRecords limit, so the largest batch (default 500).
	BatchSize int32
	// Poll is the wait after an empty page or at the tip (default 250 ms;
	// Kinesis allows 5 GetRecords per second per shard).
	Poll time.Duration
	// ProgressEvery is how often a progress line is written (default 1 s).
	ProgressEvery time.Duration
	// Progress receives progress lines (nil: none).
	Progress io.Writer
	// MaxAttempts bounds the attempts of a record the handler keeps
	// reporting as failed before it is skipped and counted (default 3), and
	// of a batch whose handler returns an error before the replay stops.
	MaxAttempts int
	// DryRun only describes what Run would do.
	DryRun bool
}

// Result is what a replay did.
type Result struct {
	Current, Target string
	Parameter       string
	Plan            []string // what was (or, dry run, would be) done
	Shards          []ShardStats
	Read, Applied   int
	Skipped         int // records the handler kept failing, skipped after MaxAttempts
	CaughtUp        time.Duration
	Swapped         bool
}

// ShardStats is one shard's progress.
type ShardStats struct {
	Shard              string
	Read, Applied      int
	Skipped            int
	MillisBehindLatest int64
	CaughtUp, Done     bool
	Waiting            bool // for its parent shards to finish
}

// Replayer rebuilds views into new table versions.
type Replayer struct {
	kin StreamReader
	db  TableAdmin
	reg *Registry
}

// New returns a Replayer reading kin, creating tables with db and swapping
// the registry reg.
func New(kin StreamReader, db TableAdmin, reg *Registry) *Replayer {
	return &Replayer{kin: kin, db: db, reg: reg}
}

func (o *Options) defaults() error {
	if o.Stream == "" {
		return errors.New("replay: Options.Stream: the events stream is required")
	}
	if o.From.IsZero() {
		return errors.New("replay: Options.From: the timestamp to replay from is required")
	}
	if o.Handover <= 0 {
		o.Handover = time.Minute
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 500
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	o.Progress = &lockedWriter{w: o.Progress}
	return nil
}

// lockedWriter serializes the progress lines of the shards' followers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Run replays the stream from opts.From into a new version of the current
// views table, built by handlerFor(newTable), swaps the registry to it once
// every shard has caught up, and follows the stream for the handover
// period (see the package doc). The current table is left in place.
func (r *Replayer) Run(ctx context.Context, opts Options, handlerFor func(table string) (BatchHandler, error)) (*Result, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	current, version, err := r.reg.Current(ctx)
	if err != nil {
		return nil, err
	}
	target := opts.Target
	if target == "" {
		target = NextVersion(current)
	}
	if target == current {
		return nil, fmt.Errorf("replay: Options.Target: %s is the current views table; replay into a new one", target)
	}
	res := &Result{Current: current, Target: target, Parameter: r.reg.Name()}
	plan, err := PlanVersion(ctx, r.db, current, target)
	if err != nil {
		return nil, err
	}
	sum, err := r.kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(opts.Stream)})
	if err != nil {
		return nil, fmt.Errorf("replay: describing stream %s: %w", opts.Stream, err)
	}
	arn := aws.ToString(sum.StreamDescriptionSummary.StreamARN)
	shards, err := r.listShards(ctx, opts.Stream)
	if err != nil {
		return nil, err
	}
	res.Plan = append(plan.Describe(),
		fmt.Sprintf("replay stream %s (%d shards, closed parents before their children) from %s into %s", opts.Stream, len(shards), opts.From.UTC().Format(time.RFC3339Nano), target),
		fmt.Sprintf("when every shard is caught up, write %s into parameter %s (now %s)", target, r.reg.Name(), current),
		fmt.Sprintf("then keep following for %s (the handover), and leave %s in place until deleted", opts.Handover, current))
	if opts.DryRun {
		for _, l := range res.Plan {
			fmt.Fprintln(opts.Progress, "dry run: "+l)
		}
		return res, nil
	}
	for _, l := range res.Plan[:len(plan.Describe())] {
		fmt.Fprintln(opts.Progress, "replay: "+l)
	}
	if err := plan.Create(ctx, r.db); err != nil {
		return nil, err
	}
	h, err := handlerFor(target)
	if err != nil {
		return nil, err
	}

	run := &run{opts: opts, kin: r.kin, h: h, arn: arn, region: regionOf(arn), stop: make(chan struct{}), caughtUp: make(chan struct{})}
	for _, sh := range shards {
		run.shards = append(run.shards, &shardRun{id: aws.ToString(sh.ShardId), shard: sh, done: make(chan struct{}), stats: ShardStats{Shard: aws.ToString(sh.ShardId), Waiting: true}})
	}
	byID := map[string]*shardRun{}
	for _, s := range run.shards {
		byID[s.id] = s
	}
	for _, s := range run.shards {
		for _, p := range []*string{s.shard.ParentShardId, s.shard.AdjacentParentShardId} {
			if ps, ok := byID[aws.ToString(p)]; ok {
				s.parents = append(s.parents, ps)
			}
		}
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(run.shards))
	var wg sync.WaitGroup
	for _, s := range run.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run.follow(ctx, s); err != nil {
				errc <- err
				cancel()
			}
		}()
	}
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(opts.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				run.report("replay")
			}
		}
	}()
	started := time.Now()
	finish := func(err error) (*Result, error) {
		close(run.stop)
		wg.Wait()
		cancel()
		<-progressDone
		close(errc)
		for e := range errc {
			err = errors.Join(err, e)
		}
		run.fill(res)
		run.report("replay: done")
		return res, err
	}
	select {
	case <-ctx.Done(): // interrupted (parent's error), or a follower failed (its error, from errc)
		return finish(parent.Err())
	case <-run.caughtUp:
	}
	res.CaughtUp = time.Since(started)
	run.report(fmt.Sprintf("replay: caught up after %s", res.CaughtUp.Round(time.Millisecond)))
	if err := r.reg.Swap(ctx, target, version); err != nil {
		return finish(err)
	}
	res.Swapped = true
	fmt.Fprintf(opts.Progress, "replay: swapped: parameter %s now names %s (was %s); following for %s so the records the live function still wrote to %s reach %s too\n",
		r.reg.Name(), target, current, opts.Handover, current, target)
	select {
	case <-ctx.Done():
	case <-time.After(opts.Handover):
	}
	res, err = finish(parent.Err())
	if err != nil {
		err = fmt.Errorf("replay: swapped to %s, but the handover was cut short: records the live function wrote to %s just before it switched may be missing from %s: %w", target, current, target, err)
	} else {
		fmt.Fprintf(opts.Progress, "replay: %s is unchanged and no longer current; delete it when done with: replay delete-version -parameter %s -table %s\n", current, r.reg.Name(), current)
	}
	return res, err
}

func (r *Replayer) listShards(ctx context.Context, stream string) ([]kintypes.Shard, error) {
	var shards []kintypes.Shard
	in := &kinesis.ListShardsInput{StreamName: aws.String(stream)}
	for {
		out, err := r.kin.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("replay: listing shards of %s: %w", stream, err)
		}
		shards = append(shards, out.Shards...)
		if out.NextToken == nil {
			return shards, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// regionOf reads the region of an ARN (arn:aws:kinesis:REGION:…).
func regionOf(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) > 3 {
		return parts[3]
	}
	return ""
}

// run is one replay's followers.
type run struct {
	opts     Options
	kin      StreamReader
	h        BatchHandler
	arn      string
	region   string
	shards   []*shardRun
	stop     chan struct{} // closed at the end of the handover
	mu       sync.Mutex
	caughtUp chan struct{}
	signaled bool
}

type shardRun struct {
	id      string
	shard   kintypes.Shard
	parents []*shardRun
	done    chan struct{} // closed when a closed shard has been read to its end
	stats   ShardStats    // guarded by run.mu
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
	closed := s.shard.SequenceNumberRange != nil && s.shard.SequenceNumberRange.EndingSequenceNumber != nil
	it, err := r.iterator(ctx, s.id, "")
	if err != nil {
		return err
	}
	last := ""
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
			return fmt.Errorf("replay: reading shard %s: %w", s.id, err)
		}
		if len(out.Records) > 0 {
			read, applied, skipped, err := r.apply(ctx, s.id, out.Records)
			r.update(s, func(st *ShardStats) { st.Read += read; st.Applied += applied; st.Skipped += skipped })
			if err != nil {
				return err
			}
			last = aws.ToString(out.Records[len(out.Records)-1].SequenceNumber)
		}
		behind := aws.ToInt64(out.MillisBehindLatest)
		end := out.NextShardIterator == nil || (closed && len(out.Records) == 0 && behind == 0)
		r.update(s, func(st *ShardStats) {
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

// iterator is the shard's iterator at the timestamp, or after last.
func (r *run) iterator(ctx context.Context, shard, last string) (*string, error) {
	in := &kinesis.GetShardIteratorInput{StreamARN: aws.String(r.arn), ShardId: aws.String(shard),
		ShardIteratorType: kintypes.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(r.opts.From)}
	if last != "" {
		in.ShardIteratorType, in.Timestamp, in.StartingSequenceNumber = kintypes.ShardIteratorTypeAfterSequenceNumber, nil, aws.String(last)
	}
	out, err := r.kin.GetShardIterator(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("replay: iterator of shard %s: %w", shard, err)
	}
	return out.ShardIterator, nil
}

// apply hands a page to the handler as Lambda would: retried from the
// lowest failed record; a record still failing after MaxAttempts is skipped
// (and counted), as Lambda's retry limit would send it to the on-failure
// destination.
func (r *run) apply(ctx context.Context, shard string, recs []kintypes.Record) (read, applied, skipped int, err error) {
	read = len(recs)
	pending := r.event(shard, recs)
	attempts := 0
	for len(pending) > 0 {
		resp, err := r.h.HandleBatch(ctx, events.KinesisEvent{Records: pending})
		if err != nil {
			attempts++
			if attempts >= r.opts.MaxAttempts || ctx.Err() != nil {
				return read, applied, skipped, fmt.Errorf("replay: shard %s: batch from %s failed %d times: %w", shard, pending[0].Kinesis.SequenceNumber, attempts, err)
			}
			r.backoff(ctx, attempts)
			continue
		}
		if len(resp.BatchItemFailures) == 0 {
			return read, applied + len(pending), skipped, nil
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
		applied += lowest
		pending = pending[lowest:]
		if lowest > 0 {
			attempts = 0
		}
		attempts++
		if attempts >= r.opts.MaxAttempts {
			fmt.Fprintf(r.opts.Progress, "replay: shard %s: record %s still failed after %d attempts: skipped (see the handler's log for why)\n", shard, pending[0].Kinesis.SequenceNumber, attempts)
			skipped++
			pending = pending[1:]
			attempts = 0
			continue
		}
		r.backoff(ctx, attempts)
	}
	return read, applied, skipped, nil
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

// report writes one progress line: totals, then each shard.
func (r *run) report(prefix string) {
	res := &Result{}
	r.fill(res)
	caught := 0
	var b strings.Builder
	for _, s := range res.Shards {
		if s.CaughtUp {
			caught++
		}
		state := fmt.Sprintf("behind %dms", s.MillisBehindLatest)
		switch {
		case s.Waiting:
			state = "waiting for its parents"
		case s.Done:
			state = "closed, read to its end"
		}
		fmt.Fprintf(&b, " | %s read %d applied %d", s.Shard, s.Read, s.Applied)
		if s.Skipped > 0 {
			fmt.Fprintf(&b, " skipped %d", s.Skipped)
		}
		b.WriteString(" " + state)
	}
	fmt.Fprintf(r.opts.Progress, "%s: %d/%d shards caught up, read %d applied %d skipped %d%s\n",
		prefix, caught, len(res.Shards), res.Read, res.Applied, res.Skipped, b.String())
}

func (r *run) fill(res *Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Shards, res.Read, res.Applied, res.Skipped = nil, 0, 0, 0
	for _, s := range r.shards {
		res.Shards = append(res.Shards, s.stats)
		res.Read += s.stats.Read
		res.Applied += s.stats.Applied
		res.Skipped += s.stats.Skipped
	}
	sort.Slice(res.Shards, func(i, j int) bool { return res.Shards[i].Shard < res.Shards[j].Shard })
}
