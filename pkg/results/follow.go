package results

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/shardorder"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// streamReader is what the follower needs of Kinesis.
type streamReader interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

var _ streamReader = (*kinesis.Client)(nil)

// Follower defaults. Kinesis allows five GetRecords a second per shard,
// shared by every reader of the stream: one a second when there is
// nothing new leaves the rest to others.
const (
	DefaultPoll   = time.Second
	DefaultRelist = 10 * time.Second
	// DefaultProgress is how often a follow still catching up (from a
	// time long past, a shard behind the stream's tip) says how far it
	// got: reading days of results takes a while, and a filter may print
	// nothing all that time.
	DefaultProgress = 10 * time.Second
	// getRecordsLimit bounds one read: at most this many records (each at
	// most 1 MiB, the stream's limit) are held at once per shard.
	getRecordsLimit = 1000
	maxBackoff      = 5 * time.Second
)

// Record is one record of the WindowResults stream.
type Record struct {
	Shard, SequenceNumber string
	// Arrived is when Kinesis accepted it (ApproximateArrivalTimestamp).
	Arrived time.Time
	// Output is the record decoded (with the strict reader: a record that
	// is not valid UTF-8, or names a key twice, is undecodable); Data the
	// bytes as they are on the stream.
	Output aggregate.Output
	Data   []byte
}

// item is what a shard's reader hands to Follow: a record, or one that
// could not be decoded.
type item struct {
	rec Record
	bad *UndecodableError
}

// UndecodableError describes a record of the stream that is not a window
// result; Follow reports it to OnUndecodable and goes on.
type UndecodableError struct {
	Shard, SequenceNumber string
	Err                   error
}

func (e *UndecodableError) Error() string {
	return fmt.Sprintf("record %s of %s is not a window result: %v", e.SequenceNumber, e.Shard, e.Err)
}

func (e *UndecodableError) Unwrap() error { return e.Err }

// Follower reads every shard of a WindowResults stream as it grows.
type Follower struct {
	kin    streamReader
	stream string
	poll   time.Duration
	relist time.Duration

	// OnStart, if set, is told how many shards the follow started on and
	// where, once every shard's iterator is open (records put after this
	// are seen, even from LATEST).
	OnStart func(shards int, from string)
	// OnUndecodable, if set, receives the records that are not window
	// results (they are skipped), from the goroutine that calls fn.
	OnUndecodable func(*UndecodableError)
	// OnProgress, if set, is told every ProgressEvery (DefaultProgress
	// when 0), from the goroutine that calls fn, how far a follow got
	// while a shard it reads is behind the stream's tip.
	OnProgress    func(Progress)
	ProgressEvery time.Duration
}

// Progress is how far a follow got while catching up.
type Progress struct {
	// Read is the records read so far (undecodable ones included).
	Read int
	// Shard is the shard furthest behind the stream's tip, and Behind how
	// far (Kinesis' MillisBehindLatest of its last read).
	Shard  string
	Behind time.Duration
}

// lag keeps each shard's MillisBehindLatest of its last read.
type lag struct {
	mu     sync.Mutex
	behind map[string]time.Duration
}

func (l *lag) set(shard string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d <= 0 {
		delete(l.behind, shard)
		return
	}
	l.behind[shard] = d
}

// furthest is the shard furthest behind and how far ("" when none is).
func (l *lag) furthest() (string, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var shard string
	var most time.Duration
	for sh, d := range l.behind {
		if d > most || d == most && sh < shard {
			shard, most = sh, d
		}
	}
	return shard, most
}

// NewFollower returns a follower of the named stream.
func NewFollower(kin streamReader, stream string) *Follower {
	return &Follower{kin: kin, stream: stream, poll: DefaultPoll, relist: DefaultRelist}
}

// WithPoll sets how long a shard's reader waits after a read that found
// nothing new (DefaultPoll), and how often the shards are listed again to
// find those a reshard created (DefaultRelist); it returns f.
func (f *Follower) WithPoll(poll, relist time.Duration) *Follower {
	f.poll, f.relist = poll, relist
	return f
}

// Follow calls fn with every record put on the stream from `from` (the
// zero time: from now, LATEST) until ctx ends or fn returns an error,
// reading every shard. fn is called from one goroutine at a time; records
// of one shard come in order, and a shard is read only once the shards it
// was split or merged from are read to their end, so a key's records come
// in order across a reshard (a correction after the final result it
// corrects). Shards a reshard creates later are read from their start. It
// returns nil when ctx ends, fn's error, or the first error reading the
// stream that retrying does not cure.
func (f *Follower) Follow(ctx context.Context, from time.Time, fn func(Record) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	shards, err := f.listShards(ctx)
	if err != nil {
		return err
	}
	where := "now (LATEST)"
	if !from.IsZero() {
		where = formatTime(from) + " (AT_TIMESTAMP)"
	}
	recs := make(chan item)
	lags := &lag{behind: map[string]time.Duration{}}
	errs := make(chan error, 1)
	ended := make(chan string) // a shard read to its end
	var wg sync.WaitGroup
	// Each shard is seen once; one to read waits in order until the shards
	// it came from are read to their end.
	seen := map[string]bool{}
	order := shardorder.New[*kinesis.GetShardIteratorInput]()
	start := func(shard, it string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := f.readShard(ctx, shard, it, recs, lags)
			switch {
			case ctx.Err() != nil:
			case err != nil:
				select {
				case errs <- err:
				default:
				}
				cancel()
			default:
				select {
				case ended <- shard:
				case <-ctx.Done():
				}
			}
		}()
	}
	// startReady starts every waiting shard whose parents are done.
	startReady := func() error {
		for _, sh := range order.Ready() {
			out, err := f.kin.GetShardIterator(ctx, sh.Value)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("opening shard %s of %s: %w", sh.ID, f.stream, err)
			}
			start(sh.ID, aws.ToString(out.ShardIterator))
		}
		return nil
	}
	wait := func(s types.Shard, in *kinesis.GetShardIteratorInput) {
		order.Wait(aws.ToString(s.ShardId), aws.ToString(s.ParentShardId), aws.ToString(s.AdjacentParentShardId), in)
	}
	for _, s := range shards {
		seen[aws.ToString(s.ShardId)] = true
		closed := s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil
		if from.IsZero() && closed {
			continue // nothing new will come from it
		}
		in := &kinesis.GetShardIteratorInput{StreamName: aws.String(f.stream), ShardId: s.ShardId, ShardIteratorType: types.ShardIteratorTypeLatest}
		if !from.IsZero() {
			in.ShardIteratorType, in.Timestamp = types.ShardIteratorTypeAtTimestamp, aws.Time(from)
		}
		wait(s, in)
	}
	opened := order.Waiting()
	// Shards are added only from here, so waiting for them only when
	// leaving is safe.
	defer func() { cancel(); wg.Wait() }()
	if err := startReady(); err != nil {
		return err
	}
	if f.OnStart != nil {
		f.OnStart(opened, where)
	}
	relist := time.NewTicker(f.relist)
	defer relist.Stop()
	every := f.ProgressEvery
	if every <= 0 {
		every = DefaultProgress
	}
	progress := time.NewTicker(every)
	defer progress.Stop()
	read := 0
	for {
		select {
		case <-ctx.Done():
			select {
			case err := <-errs:
				return err
			default:
				return nil
			}
		case <-progress.C:
			if shard, behind := lags.furthest(); shard != "" && f.OnProgress != nil {
				f.OnProgress(Progress{Read: read, Shard: shard, Behind: behind})
			}
		case it := <-recs:
			read++
			if it.bad != nil {
				if f.OnUndecodable != nil {
					f.OnUndecodable(it.bad)
				}
				continue
			}
			if err := fn(it.rec); err != nil {
				return err
			}
		case id := <-ended:
			order.Done(id)
			if err := startReady(); err != nil {
				return err
			}
		case <-relist.C:
			shards, err := f.listShards(ctx)
			if err != nil {
				if ctx.Err() != nil {
					continue
				}
				return err
			}
			for _, s := range shards {
				id := aws.ToString(s.ShardId)
				if seen[id] {
					continue
				}
				// A shard created since the follow began: all of it is new.
				seen[id] = true
				wait(s, &kinesis.GetShardIteratorInput{StreamName: aws.String(f.stream), ShardId: s.ShardId,
					ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			}
			if err := startReady(); err != nil {
				return err
			}
		}
	}
}

// listShards lists every shard of the stream (all pages).
func (f *Follower) listShards(ctx context.Context) ([]types.Shard, error) {
	var out []types.Shard
	in := &kinesis.ListShardsInput{StreamName: aws.String(f.stream)}
	for {
		page, err := f.kin.ListShards(ctx, in)
		if err != nil {
			var nf *types.ResourceNotFoundException
			if errors.As(err, &nf) {
				return nil, fmt.Errorf("stream %s does not exist: %w", f.stream, err)
			}
			return nil, fmt.Errorf("listing the shards of %s: %w", f.stream, err)
		}
		out = append(out, page.Shards...)
		if page.NextToken == nil {
			break
		}
		in = &kinesis.ListShardsInput{NextToken: page.NextToken}
	}
	sort.Slice(out, func(i, j int) bool { return aws.ToString(out[i].ShardId) < aws.ToString(out[j].ShardId) })
	return out, nil
}

// readShard reads one shard from iterator it until the shard ends (a
// reshard closed it and it was read to its end) or ctx does.
func (f *Follower) readShard(ctx context.Context, shard, it string, recs chan<- item, lags *lag) error {
	defer lags.set(shard, 0)
	last := ""
	backoff := f.poll
	for it != "" {
		out, err := f.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it), Limit: aws.Int32(getRecordsLimit)})
		var expired *types.ExpiredIteratorException
		var throttled *types.ProvisionedThroughputExceededException
		var limited *types.LimitExceededException
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &expired):
			// Idle for five minutes: start again after the last record read.
			in := &kinesis.GetShardIteratorInput{StreamName: aws.String(f.stream), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeLatest}
			if last != "" {
				in.ShardIteratorType, in.StartingSequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(last)
			}
			o, err := f.kin.GetShardIterator(ctx, in)
			if err != nil {
				return fmt.Errorf("reopening shard %s of %s: %w", shard, f.stream, err)
			}
			it = aws.ToString(o.ShardIterator)
			continue
		case errors.As(err, &throttled), errors.As(err, &limited):
			backoff = min(2*backoff, maxBackoff)
			if !sleep(ctx, backoff) {
				return nil
			}
			continue
		case err != nil:
			return fmt.Errorf("reading shard %s of %s: %w", shard, f.stream, err)
		}
		backoff = f.poll
		lags.set(shard, time.Duration(aws.ToInt64(out.MillisBehindLatest))*time.Millisecond)
		for _, r := range out.Records {
			rec := Record{Shard: shard, SequenceNumber: aws.ToString(r.SequenceNumber), Arrived: aws.ToTime(r.ApproximateArrivalTimestamp), Data: r.Data}
			last = rec.SequenceNumber
			next := item{rec: rec}
			if err := decodeOutput(r.Data, &next.rec.Output); err != nil || next.rec.Output.ID == "" || next.rec.Output.Kind == "" {
				if err == nil {
					err = errors.New("no id or type")
				}
				next = item{bad: &UndecodableError{Shard: shard, SequenceNumber: rec.SequenceNumber, Err: err}}
			}
			select {
			case recs <- next:
			case <-ctx.Done():
				return nil
			}
		}
		it = aws.ToString(out.NextShardIterator)
		if len(out.Records) == 0 || aws.ToInt64(out.MillisBehindLatest) == 0 {
			if !sleep(ctx, f.poll) {
				return nil
			}
		}
	}
	return nil
}

// decodeOutput reads a record of the stream with the strict reader: valid
// UTF-8, each key once (encoding/json takes the last copy of a key, so a
// record naming two keys would be shown as one and filtered as the
// other), bounded depth. Fields a newer aggregate adds are skipped.
func decodeOutput(data []byte, o *aggregate.Output) error {
	return strictjson.Decode(data, o, strictjson.Options{MaxBytes: len(data) + 1, Name: "record", AllowUnknown: true})
}

// sleep waits d or until ctx ends, and reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
