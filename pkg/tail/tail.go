package tail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/tributary-dev/tributary/internal/shardorder"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// KinesisAPI is what a tail needs of Kinesis: reads, and the registration
// of its own consumer (the one thing it writes).
type KinesisAPI interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
	ListStreamConsumers(ctx context.Context, in *kinesis.ListStreamConsumersInput, opts ...func(*kinesis.Options)) (*kinesis.ListStreamConsumersOutput, error)
	RegisterStreamConsumer(ctx context.Context, in *kinesis.RegisterStreamConsumerInput, opts ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error)
	DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error)
	DeregisterStreamConsumer(ctx context.Context, in *kinesis.DeregisterStreamConsumerInput, opts ...func(*kinesis.Options)) (*kinesis.DeregisterStreamConsumerOutput, error)
}

var _ KinesisAPI = (*kinesis.Client)(nil)

// EventStream is one SubscribeToShard subscription's events, as
// EventStream delivers them.
type EventStream interface {
	Events() <-chan types.SubscribeToShardEventStream
	Close() error
	Err() error
}

// Subscriber opens enhanced fan-out subscriptions. A KinesisAPI that has
// a Subscribe method is used through it; one with the SDK's
// SubscribeToShard (the *kinesis.Client) through that; one with neither
// is polled.
type Subscriber interface {
	Subscribe(ctx context.Context, in *kinesis.SubscribeToShardInput) (EventStream, error)
}

// sdkSubscriber subscribes with the SDK's SubscribeToShard.
type sdkSubscriber struct {
	c interface {
		SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, opts ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error)
	}
}

func (s sdkSubscriber) Subscribe(ctx context.Context, in *kinesis.SubscribeToShardInput) (EventStream, error) {
	out, err := s.c.SubscribeToShard(ctx, in)
	if err != nil {
		return nil, err
	}
	return out.GetStream(), nil
}

// subscriberOf is kin's way to subscribe, or nil.
func subscriberOf(kin KinesisAPI) Subscriber {
	switch k := kin.(type) {
	case Subscriber:
		return k
	case interface {
		SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, opts ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error)
	}:
		return sdkSubscriber{k}
	}
	return nil
}

// Bounds of the reading.
const (
	// MinPoll is the shortest pause between two GetRecords calls on one
	// shard when polling: at most one call a shard a second, a fifth of
	// what Kinesis allows every polling reader of the shard together.
	MinPoll = time.Second
	// maxPoll bounds the pause after throttling.
	maxPoll = 10 * time.Second
	// getRecordsLimit bounds one read: a shard's reader holds at most
	// this many records (and Kinesis at most 10 MiB) at once.
	getRecordsLimit = 1000
	// relist is how often a following tail lists the shards again to read
	// those a reshard created.
	relist = 10 * time.Second
	// DefaultProgress is how often a tail that is still catching up says
	// how far it got: reading a stream of days from trim_horizon takes
	// hours, and a filter may print nothing all that time.
	DefaultProgress = 10 * time.Second
	// MaxRecords bounds -n.
	MaxRecords = 1_000_000
	// maxShards bounds the shards listed (Kinesis' default quota is 500
	// a stream in most regions; more pages than this are refused).
	maxShardPages = 100
)

// Options say what a tail reads and how.
type Options struct {
	// Stream is the stream's name.
	Stream string
	// From is where every shard's reading starts.
	From Position
	// Shard, if set, is the one shard to read.
	Shard string
	// Follow keeps reading new records until ctx ends; without it the tail
	// stops once every shard is caught up.
	Follow bool
	// Limit stops the tail after it printed that many records (0: no
	// limit, only with Follow).
	Limit int
	// Filter chooses the records handed to fn.
	Filter Filter
	// Poll is the pause between two GetRecords calls on one shard when
	// polling (at least MinPoll).
	Poll time.Duration
	// PollOnly polls without trying enhanced fan-out.
	PollOnly bool
	// MaxSession bounds a session that registered a consumer (its
	// deadline is in the consumer's name; default DefaultMaxSession, at
	// most MaxSessionLimit).
	MaxSession time.Duration
	// Status receives what the tail says about itself, one line each: the
	// first says how it reads and at what rate; then, every Progress
	// while a shard is still catching up, how far it got.
	Status io.Writer
	// Progress is how often a tail still catching up says how far it got
	// (DefaultProgress when 0).
	Progress time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// FlagError is a tail that cannot start as asked; Flag names the option
// at fault as the command's flag.
type FlagError struct{ Flag, Msg string }

func (e *FlagError) Error() string { return "-" + e.Flag + " " + e.Msg }

// Summary says what a tail did.
type Summary struct {
	// Read counts the records read, Printed those handed to fn.
	Read, Printed int
	// Shards is how many shards were read.
	Shards int
	// Consumer is the consumer's name when the tail read through its own
	// enhanced fan-out consumer ("" when it polled).
	Consumer string
	// Fallback says why it polled when it had tried enhanced fan-out.
	Fallback string
	// Removed lists the consumers of earlier runs it removed.
	Removed []string
	// SessionEnded is true when a following tail stopped at its
	// session's deadline.
	SessionEnded bool
}

// shardEvent is what a shard's reader hands the tail: a record, word
// that the shard is caught up (or closed), or that its reader is done.
type shardEvent struct {
	rec            *Record
	shard          string
	caughtUp, done bool
}

// Run reads the stream as o says and calls fn with each record the filter
// passes, from one goroutine, records of a shard in order; a shard is read
// once the shards it was split or merged from are read to their end, so a
// key's records come in order across a reshard. It ends when
// every shard is caught up (without Follow), when o.Limit records were
// printed, when ctx ends (nil: a Ctrl-C is how a follow ends), or on the
// first error that retrying does not cure. A consumer it registered is
// deregistered before it returns, whatever the reason.
func Run(ctx context.Context, kin KinesisAPI, o Options, fn func(*Record) error) (sum Summary, err error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Status == nil {
		o.Status = io.Discard
	}
	o.Poll = max(o.Poll, MinPoll)
	if o.Progress <= 0 {
		o.Progress = DefaultProgress
	}
	if o.MaxSession <= 0 {
		o.MaxSession = DefaultMaxSession
	}
	o.MaxSession = min(o.MaxSession, MaxSessionLimit)
	if o.Limit < 0 || o.Limit > MaxRecords || o.Limit == 0 && !o.Follow {
		return sum, &FlagError{Flag: "n", Msg: fmt.Sprintf("%d: must be from 1 to %d (0, no limit, only with -f)", o.Limit, MaxRecords)}
	}
	desc, err := kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(o.Stream)})
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return sum, &FlagError{Flag: "stream", Msg: fmt.Sprintf("%q: no such stream (%s)", o.Stream, nf.ErrorMessage())}
		}
		return sum, fmt.Errorf("describing stream %s: %w", o.Stream, err)
	}
	streamARN := aws.ToString(desc.StreamDescriptionSummary.StreamARN)
	shards, err := listShards(ctx, kin, o.Stream)
	if err != nil {
		return sum, err
	}
	read, err := chooseShards(shards, o)
	if err != nil {
		return sum, err
	}
	sum.Shards = len(read)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &reader{kin: kin, sub: subscriberOf(kin), o: o, events: make(chan shardEvent), errs: make(chan error, 1), cancel: cancel}
	var probe EventStream
	switch {
	case o.PollOnly:
	case r.sub == nil:
		sum.Fallback = "this Kinesis client cannot subscribe to shards"
	default:
		deadline := o.Now().Add(o.MaxSession)
		var name, arn string
		name, arn, probe, sum.Removed, sum.Fallback = r.startFanOut(ctx, streamARN, read, deadline)
		if arn != "" {
			sum.Consumer, r.consumerARN = name, arn
			defer func() {
				if derr := deregister(ctx, kin, arn); derr != nil {
					fmt.Fprintf(o.Status, "tail: %v; the next tail on this stream removes it after %s\n", derr, deadline.Add(StaleGrace).UTC().Format(time.RFC3339))
					err = errors.Join(err, derr)
					return
				}
				fmt.Fprintf(o.Status, "tail: deregistered consumer %s\n", name)
			}()
			var stop context.CancelFunc
			ctx, stop = context.WithDeadline(ctx, deadline)
			defer stop()
		}
		if ctx.Err() != nil { // Ctrl-C while setting up
			if probe != nil {
				probe.Close()
			}
			return sum, nil
		}
	}
	fmt.Fprintln(o.Status, statusLine(o, sum, len(read)))
	for _, line := range sum.Removed {
		fmt.Fprintln(o.Status, "tail: "+line)
	}

	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	// A shard to read waits until none of its parents is waiting or being
	// read: a key's records move from a parent to a child at a reshard,
	// and come in order only when the parent is read to its end first.
	byID := map[string]types.Shard{}
	for _, s := range shards {
		byID[aws.ToString(s.ShardId)] = s
	}
	order := shardorder.New[Position]()
	wait := func(s types.Shard, from Position) {
		order.Wait(aws.ToString(s.ShardId), aws.ToString(s.ParentShardId), aws.ToString(s.AdjacentParentShardId), from)
	}
	startReady := func() {
		for _, sh := range order.Ready() {
			var first EventStream
			if len(read) > 0 && sh.ID == read[0] {
				first, probe = probe, nil
			}
			wg.Add(1)
			go func() { defer wg.Done(); r.run(ctx, sh.ID, sh.Value, first) }()
		}
	}
	started := map[string]bool{}
	for _, sh := range read {
		started[sh] = true
		wait(byID[sh], o.From)
	}
	startReady()
	if probe != nil { // the first shard waits for its parent: it subscribes when it starts
		probe.Close()
		probe = nil
	}
	for _, s := range shards {
		started[aws.ToString(s.ShardId)] = true // not read (closed before LATEST, or not -shard): not new either
	}
	pending := map[string]bool{}
	for _, sh := range read {
		pending[sh] = true
	}
	tick := time.NewTicker(relist)
	defer tick.Stop()
	progress := time.NewTicker(o.Progress)
	defer progress.Stop()
	arrived := map[string]time.Time{} // the last record read of each shard
	saidBehind := false               // a progress line was printed since the last catching up
	for {
		if !o.Follow && len(pending) == 0 {
			return sum, nil
		}
		select {
		case <-ctx.Done():
			select {
			case err := <-r.errs:
				return sum, err
			default:
			}
			if r.consumerARN != "" && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				sum.SessionEnded = true
			}
			return sum, nil
		case ev := <-r.events:
			if ev.done {
				order.Done(ev.shard)
				startReady()
				continue
			}
			if ev.caughtUp {
				delete(pending, ev.shard)
				if saidBehind && len(pending) == 0 && o.Follow {
					// The progress lines said it was behind: say it is not.
					fmt.Fprintf(o.Status, "tail: caught up on every shard after %d record(s) read, %d printed; following\n", sum.Read, sum.Printed)
					saidBehind = false
				}
				continue
			}
			sum.Read++
			arrived[ev.shard] = ev.rec.Arrived
			if !o.Filter.Match(ev.rec) {
				continue
			}
			if err := fn(ev.rec); err != nil {
				return sum, err
			}
			sum.Printed++
			if o.Limit > 0 && sum.Printed >= o.Limit {
				return sum, nil
			}
		case <-progress.C:
			if len(pending) > 0 {
				fmt.Fprintln(o.Status, progressLine(sum, pending, arrived))
				saidBehind = true
			}
		case <-tick.C:
			if !o.Follow || o.Shard != "" {
				continue
			}
			now, err := listShards(ctx, kin, o.Stream)
			if err != nil {
				if ctx.Err() != nil {
					continue
				}
				return sum, err
			}
			for _, s := range now {
				id := aws.ToString(s.ShardId)
				if started[id] {
					continue
				}
				// A shard a reshard created since the tail began: all of it is new.
				started[id] = true
				sum.Shards++
				wait(s, Position{Type: types.ShardIteratorTypeTrimHorizon})
			}
			startReady()
		}
	}
}

// startFanOut removes the consumers earlier runs left, registers the
// session's consumer (its name carries deadline) and subscribes to the
// first shard to read. When any step fails it leaves nothing registered
// and says why in fallback: the tail then polls.
func (r *reader) startFanOut(ctx context.Context, streamARN string, read []string, deadline time.Time) (name, arn string, probe EventStream, removed []string, fallback string) {
	removed, err := removeStale(ctx, r.kin, streamARN, r.o.Now())
	if err != nil {
		return "", "", nil, removed, err.Error()
	}
	if name, err = consumerName(deadline); err != nil {
		return "", "", nil, removed, err.Error()
	}
	if arn, err = register(ctx, r.kin, streamARN, name, sleep); err != nil {
		return "", "", nil, removed, err.Error()
	}
	if len(read) > 0 {
		if probe, err = r.subscribe(ctx, arn, read[0], r.o.From); err != nil {
			fallback = "SubscribeToShard: " + briefly(err)
			if derr := deregister(ctx, r.kin, arn); derr != nil {
				fallback += "; " + derr.Error()
			}
			return "", "", nil, removed, fallback
		}
	}
	return name, arn, probe, removed, ""
}

// briefly says an AWS error in a few words: its code and message, or the
// HTTP status of an answer that is not one (the local stand-in answers
// SubscribeToShard with a 500 page).
func briefly(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode() + ": " + api.ErrorMessage()
	}
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) {
		return fmt.Sprintf("HTTP %d", resp.HTTPStatusCode())
	}
	return err.Error()
}

// progressLine says how far a tail still catching up got: what it read
// and printed, which shards are not caught up, and the arrival time of the
// last record read on the one furthest behind.
func progressLine(sum Summary, pending map[string]bool, arrived map[string]time.Time) string {
	var behind string
	var at time.Time
	for sh := range pending {
		a, ok := arrived[sh]
		if !ok {
			continue
		}
		if behind == "" || a.Before(at) || a.Equal(at) && sh < behind {
			behind, at = sh, a
		}
	}
	line := fmt.Sprintf("tail: still catching up: %d record(s) read, %d printed; %d of %d shard(s) not caught up", sum.Read, sum.Printed, len(pending), sum.Shards)
	if behind != "" {
		line += fmt.Sprintf(", the furthest behind %s at records that arrived %s", behind, at.UTC().Format(time.RFC3339))
	}
	return line
}

// statusLine is the tail's first line: how it reads and at what rate.
func statusLine(o Options, sum Summary, shards int) string {
	if sum.Consumer != "" {
		return fmt.Sprintf("tail: %s: reading %d shard(s) from %s through its own enhanced fan-out consumer %s (2 MB/s a shard of its own, nothing taken from the stack's readers; deregistered when tail ends, at the latest %s from now)",
			o.Stream, shards, o.From, sum.Consumer, o.MaxSession)
	}
	why := ""
	switch {
	case o.PollOnly:
		why = " (-poll)"
	case sum.Fallback != "":
		why = " (enhanced fan-out unavailable: " + sum.Fallback + ")"
	}
	return fmt.Sprintf("tail: %s: reading %d shard(s) from %s by polling, at most 1 GetRecords call per shard every %s, %d records a call (Kinesis allows 5 calls and 2 MB a second per shard, shared by every polling reader)%s",
		o.Stream, shards, o.From, o.Poll, getRecordsLimit, why)
}

// listShards lists every shard of the stream.
func listShards(ctx context.Context, kin KinesisAPI, stream string) ([]types.Shard, error) {
	var out []types.Shard
	in := &kinesis.ListShardsInput{StreamName: aws.String(stream)}
	for page := 0; ; page++ {
		if page == maxShardPages {
			return nil, fmt.Errorf("listing the shards of %s: more than %d pages", stream, maxShardPages)
		}
		res, err := kin.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("listing the shards of %s: %w", stream, err)
		}
		out = append(out, res.Shards...)
		if res.NextToken == nil {
			return out, nil
		}
		in = &kinesis.ListShardsInput{NextToken: res.NextToken}
	}
}

// chooseShards picks the shards to read: o.Shard alone, or every shard
// except closed ones when reading from LATEST (nothing new comes to them).
// A sequence number is a position on one shard: it needs o.Shard unless
// the stream has one shard.
func chooseShards(shards []types.Shard, o Options) ([]string, error) {
	ids := make([]string, 0, len(shards))
	for _, s := range shards {
		ids = append(ids, aws.ToString(s.ShardId))
	}
	sort.Strings(ids)
	list := func() string {
		if len(ids) > 10 {
			return strings.Join(ids[:10], ", ") + fmt.Sprintf(" and %d more", len(ids)-10)
		}
		return strings.Join(ids, ", ")
	}
	if o.Shard != "" {
		for _, s := range shards {
			if aws.ToString(s.ShardId) == o.Shard {
				if err := pastEnd(s, o.From); err != nil {
					return nil, err
				}
				return []string{o.Shard}, nil
			}
		}
		return nil, &FlagError{Flag: "shard", Msg: fmt.Sprintf("%q is not a shard of %s; its shards: %s", o.Shard, o.Stream, list())}
	}
	if o.From.Type == types.ShardIteratorTypeAtSequenceNumber {
		if len(ids) != 1 {
			return nil, &FlagError{Flag: "shard", Msg: fmt.Sprintf("is required with -from <sequence number>: a sequence number is a position on one shard, and %s has %d: %s", o.Stream, len(ids), list())}
		}
		if err := pastEnd(shards[0], o.From); err != nil {
			return nil, err
		}
		return ids, nil
	}
	var out []string
	for _, s := range shards {
		closed := s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil
		if closed && o.From.Type == types.ShardIteratorTypeLatest {
			continue
		}
		out = append(out, aws.ToString(s.ShardId))
	}
	sort.Strings(out)
	return out, nil
}

// pastEnd refuses a sequence number past the end of a closed shard:
// nothing is at or after it, and a tail from it would print nothing.
func pastEnd(s types.Shard, from Position) error {
	if from.Type != types.ShardIteratorTypeAtSequenceNumber || s.SequenceNumberRange == nil || s.SequenceNumberRange.EndingSequenceNumber == nil {
		return nil
	}
	end, ok := new(big.Int).SetString(aws.ToString(s.SequenceNumberRange.EndingSequenceNumber), 10)
	at, ok2 := new(big.Int).SetString(from.Sequence, 10)
	if !ok || !ok2 || at.Cmp(end) <= 0 {
		return nil
	}
	return &FlagError{Flag: "from", Msg: fmt.Sprintf("sequence number %s is past the end of shard %s (its last is %s): nothing is at or after it",
		from.Sequence, aws.ToString(s.ShardId), end)}
}

// refusedSequence is the -from error for a sequence number Kinesis refuses
// on shard (one that did not come from it, InvalidArgumentException), nil
// for any other error.
func refusedSequence(err error, p Position, shard string) error {
	var inv *types.InvalidArgumentException
	if p.Type != types.ShardIteratorTypeAtSequenceNumber || !errors.As(err, &inv) {
		return nil
	}
	return &FlagError{Flag: "from", Msg: fmt.Sprintf("sequence number %s: Kinesis refuses it on shard %s (%s); give one from a record's header of that shard",
		p.Sequence, shard, strictjson.Cut(inv.ErrorMessage(), 300))}
}

// reader reads shards and hands their records to the tail.
type reader struct {
	kin         KinesisAPI
	sub         Subscriber
	o           Options
	consumerARN string
	events      chan shardEvent
	errs        chan error
	cancel      context.CancelFunc
}

// run reads one shard until ctx ends, the shard closes, or (without
// Follow) it is caught up; an error that retrying does not cure stops the
// whole tail.
func (r *reader) run(ctx context.Context, shard string, from Position, first EventStream) {
	var err error
	if r.consumerARN != "" {
		err = r.readFanOut(ctx, shard, from, first)
	} else {
		err = r.poll(ctx, shard, from)
	}
	switch {
	case ctx.Err() != nil:
	case err != nil:
		select {
		case r.errs <- err:
		default:
		}
		r.cancel()
	default: // read to its end, or caught up without Follow
		r.send(ctx, shardEvent{shard: shard, done: true})
	}
}

// send hands ev to the tail; false when ctx ended.
func (r *reader) send(ctx context.Context, ev shardEvent) bool {
	select {
	case r.events <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// deliver hands a batch of records to the tail and returns the last
// sequence number ("" for none); false when ctx ended.
func (r *reader) deliver(ctx context.Context, shard string, recs []types.Record) (string, bool) {
	last := ""
	for _, k := range recs {
		rec := &Record{Shard: shard, SequenceNumber: aws.ToString(k.SequenceNumber), PartitionKey: aws.ToString(k.PartitionKey),
			Arrived: aws.ToTime(k.ApproximateArrivalTimestamp), Data: k.Data}
		if !r.send(ctx, shardEvent{rec: rec, shard: shard}) {
			return last, false
		}
		last = rec.SequenceNumber
	}
	return last, true
}

// poll reads the shard with GetRecords, at most one call every o.Poll.
func (r *reader) poll(ctx context.Context, shard string, from Position) error {
	open := func(p Position) (*string, error) {
		out, err := r.kin.GetShardIterator(ctx, p.iteratorInput(r.o.Stream, shard))
		if refused := refusedSequence(err, p, shard); refused != nil {
			return nil, refused
		}
		if err != nil {
			return nil, fmt.Errorf("opening shard %s of %s at %s: %w", shard, r.o.Stream, p, err)
		}
		return out.ShardIterator, nil
	}
	pos := from
	it, err := open(pos)
	if err != nil {
		return err
	}
	pause := r.o.Poll
	caughtUp := false
	for next := time.Now(); ; next = next.Add(pause) {
		if err := sleep(ctx, time.Until(next)); err != nil {
			return nil
		}
		if now := time.Now(); next.Before(now) {
			next = now
		}
		out, err := r.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(getRecordsLimit)})
		var throttled *types.ProvisionedThroughputExceededException
		var expired *types.ExpiredIteratorException
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &throttled):
			pause = min(2*pause, maxPoll)
			continue
		case errors.As(err, &expired):
			if it, err = open(pos); err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("reading shard %s of %s: %w", shard, r.o.Stream, err)
		}
		pause = r.o.Poll
		last, ok := r.deliver(ctx, shard, out.Records)
		if !ok {
			return nil
		}
		if last != "" {
			pos = after(last)
		}
		closed := out.NextShardIterator == nil
		if !caughtUp && (closed || len(out.Records) == 0 && aws.ToInt64(out.MillisBehindLatest) == 0) {
			caughtUp = true
			if !r.send(ctx, shardEvent{shard: shard, caughtUp: true}) {
				return nil
			}
		}
		if closed || caughtUp && !r.o.Follow {
			return nil
		}
		it = out.NextShardIterator
	}
}

// subscribe opens a SubscribeToShard stream on the shard from p.
func (r *reader) subscribe(ctx context.Context, consumerARN, shard string, p Position) (EventStream, error) {
	return r.sub.Subscribe(ctx, &kinesis.SubscribeToShardInput{ConsumerARN: aws.String(consumerARN), ShardId: aws.String(shard),
		StartingPosition: p.startingPosition()})
}

// readFanOut reads the shard through the consumer: a subscription lasts
// five minutes, after which it subscribes again from where it got to (at
// most once a second, as Kinesis allows).
func (r *reader) readFanOut(ctx context.Context, shard string, from Position, s EventStream) error {
	pos := from
	caughtUp := false
	failures := 0
	for {
		if s == nil {
			var err error
			if s, err = r.subscribe(ctx, r.consumerARN, shard, pos); err != nil {
				var inUse *types.ResourceInUseException
				var limit *types.LimitExceededException
				if ctx.Err() != nil {
					return nil
				}
				if failures++; failures > 30 || !errors.As(err, &inUse) && !errors.As(err, &limit) {
					return fmt.Errorf("subscribing to shard %s of %s: %w", shard, r.o.Stream, err)
				}
				if sleep(ctx, time.Second) != nil {
					return nil
				}
				continue
			}
		}
		done, err := r.drain(ctx, shard, s, &pos, &caughtUp)
		s.Close()
		s = nil
		if done || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if failures++; failures > 30 {
				return fmt.Errorf("reading shard %s of %s: %w", shard, r.o.Stream, err)
			}
		} else {
			failures = 0
		}
		if sleep(ctx, time.Second) != nil {
			return nil
		}
	}
}

// drain hands on the events of one subscription; done is true when the
// shard is finished with (closed, or caught up without Follow).
func (r *reader) drain(ctx context.Context, shard string, s EventStream, pos *Position, caughtUp *bool) (done bool, err error) {
	for {
		var ev types.SubscribeToShardEventStream
		var open bool
		select {
		case <-ctx.Done():
			return true, nil
		case ev, open = <-s.Events():
		}
		if !open {
			return false, s.Err()
		}
		e, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
		if !ok {
			continue
		}
		last, ok := r.deliver(ctx, shard, e.Value.Records)
		if !ok {
			return true, nil
		}
		if last != "" {
			*pos = after(last)
		}
		closed := e.Value.ContinuationSequenceNumber == nil
		if !closed {
			*pos = after(aws.ToString(e.Value.ContinuationSequenceNumber))
		}
		if !*caughtUp && (closed || len(e.Value.Records) == 0 && aws.ToInt64(e.Value.MillisBehindLatest) == 0) {
			*caughtUp = true
			if !r.send(ctx, shardEvent{shard: shard, caughtUp: true}) {
				return true, nil
			}
		}
		if closed || *caughtUp && !r.o.Follow {
			return true, nil
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
