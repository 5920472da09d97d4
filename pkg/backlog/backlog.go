package backlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/envvar"
	"github.com/tributary-dev/tributary/pkg/window"
)

// ShardReader is the part of the Kinesis client a Stream reads with.
type ShardReader interface {
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// Stream reads the backlog of a function on one Kinesis stream.
type Stream struct {
	client ShardReader
	name   string
	now    func() time.Time
}

// New reads the backlog on the stream called name.
func New(client ShardReader, name string) *Stream {
	return &Stream{client: client, name: name, now: time.Now}
}

// emptyPages bounds the GetRecords calls FirstAfter makes when Kinesis
// answers with no record while the shard has more (MillisBehindLatest
// above 0): it can, past a stretch with none.
const emptyPages = 3

// Next is what a shard holds after a record.
type Next struct {
	// Found: a record is there, which reached the stream at Arrived
	// (ApproximateArrivalTimestamp).
	Found   bool
	Arrived time.Time
	// Children, of a shard closed by a reshard and read to its end, are
	// the shards that took its keys (Kinesis' ChildShards): their records
	// may belong to windows the shard's own records are in.
	Children []string
}

// FirstAfter says what shard holds after the record at seq ("": from its
// oldest record): the first record and when it arrived, or nothing when
// the function has processed everything the shard holds. A shard the
// stream no longer has (closed and past its retention) holds nothing; a
// stream that is not there is an error naming it. When
// seq is no longer on the stream (past its retention too), the shard's
// oldest record is the first after it. When Kinesis keeps answering with
// empty pages although the shard has more, the first record is taken to
// have arrived as long ago as the last page says it is behind the tip.
func (s *Stream) FirstAfter(ctx context.Context, shard, seq string) (Next, error) {
	in := &kinesis.GetShardIteratorInput{StreamName: aws.String(s.name), ShardId: aws.String(shard),
		ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber, StartingSequenceNumber: aws.String(seq)}
	if seq == "" {
		in.ShardIteratorType, in.StartingSequenceNumber = types.ShardIteratorTypeTrimHorizon, nil
	}
	it, err := s.client.GetShardIterator(ctx, in)
	var invalid *types.InvalidArgumentException
	if errors.As(err, &invalid) && seq != "" {
		in.ShardIteratorType, in.StartingSequenceNumber = types.ShardIteratorTypeTrimHorizon, nil
		it, err = s.client.GetShardIterator(ctx, in)
	}
	if s.shardGone(err) {
		return Next{}, nil
	}
	if err != nil {
		return Next{}, fmt.Errorf("backlog: reading %s %s after %q: %w", s.name, shard, seq, err)
	}
	iter := it.ShardIterator
	var behind int64
	for page := 0; page < emptyPages && iter != nil; page++ {
		out, err := s.client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1)})
		if s.shardGone(err) {
			return Next{}, nil
		}
		if err != nil {
			return Next{}, fmt.Errorf("backlog: reading %s %s after %q: %w", s.name, shard, seq, err)
		}
		if len(out.Records) > 0 {
			if t := out.Records[0].ApproximateArrivalTimestamp; t != nil {
				return Next{Found: true, Arrived: *t}, nil
			}
			return Next{Found: true, Arrived: s.now()}, nil
		}
		if len(out.ChildShards) > 0 || out.NextShardIterator == nil {
			// Closed, and read to its end.
			var next Next
			for _, c := range out.ChildShards {
				next.Children = append(next.Children, aws.ToString(c.ShardId))
			}
			return next, nil
		}
		behind = aws.ToInt64(out.MillisBehindLatest)
		if behind == 0 {
			return Next{}, nil
		}
		iter = out.NextShardIterator
	}
	if behind > 0 {
		return Next{Found: true, Arrived: s.now().Add(-time.Duration(behind) * time.Millisecond)}, nil
	}
	return Next{}, nil
}

// shardGone reports an error that says the shard is not on the stream
// (closed and past the stream's retention: it holds nothing), as against
// the stream itself not being there ("Stream <name> under account <id>
// not found": a wrong name, which must not pass for a shard with nothing
// to read). Kinesis says which in the message only.
func (s *Stream) shardGone(err error) bool {
	var notFound *types.ResourceNotFoundException
	if !errors.As(err, &notFound) {
		return false
	}
	msg := strings.ToLower(strings.ReplaceAll(notFound.ErrorMessage(), s.name, ""))
	return strings.Contains(msg, "shard")
}

// Reader is what IdleHold asks: a *Stream, or a stand-in in tests.
type Reader interface {
	FirstAfter(ctx context.Context, shard, seq string) (Next, error)
}

// Known is what a ticker has loaded of the shards its function stored a
// watermark or a hold for (state.Views.Shards): for each, the last record
// the function committed with it, the watermark itself, and its hold.
type Known struct {
	positions map[string]string
	marks     map[string]*window.Watermark
	holds     map[string]time.Time
}

// Stored is the Known of positions as state.Views.Shards returns them, the
// shards' watermarks, marks, and their holds (nil: a function that holds
// no shard; state.Views.Hold: the earliest window start of records a
// per-interval invocation carries to its flush).
func Stored(positions map[string]string, marks map[string]*window.Watermark, holds map[string]time.Time) Known {
	return Known{positions: positions, marks: marks, holds: holds}
}

// Position is the last record the function committed on shard ("": none)
// and whether it stored a watermark for shard at all (one stored before
// positions were has a watermark and no position: nothing is known of
// what it processed).
func (k Known) Position(shard string) (through string, known bool) {
	_, known = k.marks[shard]
	return k.positions[shard], known
}

// closes is how far shard's stored state lets a watermark go without
// closing a window shard's records are still to reach: its watermark's
// value, when it has seen event time, and no further than its hold (the
// records it carries to its flush, before its first flush too); false
// when neither is stored.
func (k Known) closes(shard string) (time.Time, bool) {
	var at time.Time
	if wm, ok := k.marks[shard]; ok && wm != nil {
		at = wm.Current()
	}
	if hold, ok := k.holds[shard]; ok && !hold.IsZero() {
		at = earlier(at, hold)
	}
	return at, !at.IsZero()
}

// maxGenerations bounds how many reshards below a closed shard IdleHold
// looks for records its keys may still bring.
const maxGenerations = 4

// IdleHold is how far a ticker may advance shard's watermark wm as idle at
// now: no further than hold (zero: no bound of the caller's), and, when
// records are still to be processed that may belong to the shard's
// windows, no further than idleTimeout + outOfOrderness before the first
// of them arrived — the advance assumes a record reaches the stream within
// idleTimeout of happening, and those have yet to be applied. Such
// records are the shard's own after its position (the last record the
// function committed with the watermark: a function failing, throttled or
// redeploying), and, for a shard a reshard closed and that was read to its
// end, its children's not yet processed (their position, or all of them
// for a child the function has not committed on yet): the keys moved
// there, and a child still catching up holds records of windows the
// parent's advance would close. A closed shard also goes no further than
// its children's stored watermarks and holds: it is idle for good, its
// keys' event time goes on in them, and a child may hold records it has
// processed of a window the parent has written (in its carry, package
// aggregate, or in Lambda's window state until its flush) — that window
// closes when the child's watermark passes it, not by the parent's clock
// before. waiting reports that a record still to be
// processed bounds it. It reads the stream only when the advance would
// move wm, and not at all without r or a position for shard. When the
// stream cannot be read it returns the error, naming the shard, and the
// caller must not advance the shard at all: the bound it returns then,
// wm's current value, is zero for a watermark that has seen no event
// time, which AdvanceIdleHeld takes for no bound.
func IdleHold(ctx context.Context, r Reader, shard string, known Known, wm *window.Watermark, idleTimeout time.Duration, hold, now time.Time) (bound time.Time, waiting bool, err error) {
	through, _ := known.Position(shard)
	if r == nil || through == "" {
		return hold, false, nil // no position stored yet: the clock decides
	}
	if trial := *wm; !trial.AdvanceIdleHeld(now, idleTimeout, hold) {
		return hold, false, nil // it would not move: nothing to ask
	}
	next, err := firstUnprocessed(ctx, r, shard, through, known, 0)
	if err != nil {
		return wm.Current(), false, fmt.Errorf("shard %s not advanced as idle: %w", shard, err)
	}
	bound = hold
	if next.found {
		bound, waiting = earlier(bound, wm.IdleBound(next.arrived, idleTimeout)), true
	}
	if next.childrenKnown {
		bound = earlier(bound, next.children)
	}
	return bound, waiting, nil
}

// earlier is the earlier of two bounds, zero being none.
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// unprocessed is what firstUnprocessed found.
type unprocessed struct {
	// found: a record not processed yet, which arrived at arrived.
	found   bool
	arrived time.Time
	// childrenKnown: the shard is closed and a shard that took its keys
	// has a stored watermark that has seen event time, or a hold;
	// children is the lowest of those (Known.closes).
	childrenKnown bool
	children      time.Time
}

// firstUnprocessed is the earliest arrival of a record not processed yet
// on shard after through, or, shard being closed and read, on the shards
// that took its keys, with the lowest of their stored watermarks.
func firstUnprocessed(ctx context.Context, r Reader, shard, through string, known Known, generation int) (unprocessed, error) {
	next, err := r.FirstAfter(ctx, shard, through)
	if err != nil || next.Found {
		return unprocessed{found: next.Found, arrived: next.Arrived}, err
	}
	var u unprocessed
	if generation == maxGenerations {
		return u, nil
	}
	for _, child := range next.Children {
		if at, ok := known.closes(child); ok && (!u.childrenKnown || at.Before(u.children)) {
			u.children, u.childrenKnown = at, true
		}
		ct, stored := known.Position(child)
		if stored && ct == "" {
			continue // a watermark stored before positions were: nothing known
		}
		c, err := firstUnprocessed(ctx, r, child, ct, known, generation+1)
		if err != nil {
			return u, err
		}
		if c.found && (!u.found || c.arrived.Before(u.arrived)) {
			u.arrived, u.found = c.arrived, true
		}
		if c.childrenKnown && (!u.childrenKnown || c.children.Before(u.children)) {
			u.children, u.childrenKnown = c.children, true
		}
	}
	return u, nil
}

// EnvStream names the stream a function reads, for its tick to read the
// backlog on (optional): the aggregate's ticker, a stream handler, detect
// and the join take it.
const EnvStream = "EVENTS_STREAM_NAME"

// StreamFromEnv is the stream EnvStream names ("" when it is unset: the
// tick goes by the clock alone), or an error naming the variable when the
// value is not a stream's name, so a mistyped one stops the function at
// cold start rather than fail every tick.
func StreamFromEnv(lookup func(string) (string, bool)) (string, error) {
	name, _ := lookup(EnvStream)
	if name == "" {
		return "", nil
	}
	if err := envvar.Check(name, envvar.Stream); err != nil {
		return "", fmt.Errorf("environment variable %s: %w (the stream the function reads)", EnvStream, err)
	}
	return name, nil
}
