package eventsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/emulator/rie"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/onfailure"
)

// Conditions of an on-failure record.
const (
	RetryAttemptsExhausted = "RetryAttemptsExhausted"
	RecordAgeExceeded      = "RecordAgeExceeded"
)

// shardInfo is a shard as the source lists it.
type shardInfo struct {
	id, parent string
}

// position is where a shard iterator starts.
type position struct {
	typ string // TRIM_HORIZON, LATEST, AT_TIMESTAMP, AFTER_SEQUENCE_NUMBER
	seq string
	ts  time.Time
}

// record is one stream record, ready to be sent.
type record struct {
	seq     string          // sequence number
	key     string          // partition key, for ParallelizationFactor
	arrival time.Time       // approximate arrival (Kinesis) or creation (DynamoDB)
	event   json.RawMessage // the record exactly as Lambda puts it in Records
	view    map[string]any  // what filter patterns see
	readAt  time.Time
}

// streamAPI is what a stream source (Kinesis, DynamoDB Streams) provides.
type streamAPI interface {
	listShards(ctx context.Context) ([]shardInfo, error)
	iterator(ctx context.Context, shard string, pos position) (string, error)
	// records reads from an iterator; next is "" once the shard is closed
	// and read to its end.
	records(ctx context.Context, shard, iterator string) (recs []*record, next string, err error)
	expiredIterator(err error) bool
}

// streamKind holds what differs between Kinesis and DynamoDB Streams in the
// records Lambda sends and the on-failure record.
type streamKind struct {
	eventSource    string // aws:kinesis, aws:dynamodb
	batchInfoField string // KinesisBatchInfo, DDBStreamBatchInfo
	arrivalLayout  string // how approximateArrivalOf*Record is written
}

// stream plays a Kinesis or DynamoDB Streams mapping.
type stream struct {
	p      *Poller
	s      Settings
	api    streamAPI
	kind   streamKind
	filter *Filter
	inv    Invoker
	dest   *destination

	mu         sync.Mutex
	shards     map[string]*shardState
	listedAt   time.Time // start of the last complete shard listing
	bufferSize int
}

type shardState struct {
	info  shardInfo
	lanes []*lane
	done  chan struct{} // closed once a closed shard is fully processed

	mu        sync.Mutex
	emptyPoll time.Time // start of the last read that found nothing new
	reading   bool      // a read's records are being dispatched
}

func newStream(p *Poller, s Settings, api streamAPI, kind streamKind, inv Invoker, dest *destination) *stream {
	f, _ := NewFilter(s.FilterPatterns) // validated by normalize
	return &stream{
		p: p, s: s, api: api, kind: kind, filter: f, inv: inv, dest: dest,
		shards:     map[string]*shardState{},
		bufferSize: max(4*s.BatchSize, 500),
	}
}

func (st *stream) emit(e Event) { st.p.rec.emit(e) }

func (st *stream) run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	first := true
	for {
		started := time.Now()
		shards, err := st.api.listShards(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if first {
				return fmt.Errorf("eventsource: %s: listing shards: %w", st.s.SourceARN, err)
			}
			st.emit(Event{Type: EventError, Err: fmt.Errorf("listing shards: %w", err)})
		} else {
			st.mu.Lock()
			for _, sh := range shards {
				if _, ok := st.shards[sh.id]; ok {
					continue
				}
				pos := position{typ: TrimHorizon}
				if first {
					pos = position{typ: st.s.StartingPosition, ts: st.s.StartingPositionTimestamp}
				}
				ss := &shardState{info: sh, done: make(chan struct{})}
				st.shards[sh.id] = ss
				parent := st.shards[sh.parent]
				wg.Add(1)
				go func() {
					defer wg.Done()
					st.runShard(ctx, ss, parent, pos)
				}()
			}
			st.listedAt = started
			st.mu.Unlock()
			first = false
		}
		// Resharding is rare; look for new shards now and then.
		if !sleep(ctx, 5*time.Second) {
			return nil
		}
	}
}

// runShard reads one shard and feeds its lanes.
func (st *stream) runShard(ctx context.Context, ss *shardState, parent *shardState, pos position) {
	if parent != nil {
		// A child shard starts once its parent is fully processed, to keep
		// the order of each partition key.
		select {
		case <-parent.done:
		case <-ctx.Done():
			return
		}
	}
	var lanesWG sync.WaitGroup
	for i := 0; i < st.s.ParallelizationFactor; i++ {
		l := &lane{st: st, shard: ss, notify: make(chan struct{}, 1)}
		ss.lanes = append(ss.lanes, l)
	}
	for _, l := range ss.lanes {
		lanesWG.Add(1)
		go func() {
			defer lanesWG.Done()
			l.run(ctx)
		}()
	}
	defer lanesWG.Wait()

	iter, err := st.iteratorWithRetry(ctx, ss.info.id, pos)
	if err != nil {
		return
	}
	lastSeq := ""
	idle := pollInterval // the pause after an empty read: doubles while the shard stays empty
	for ctx.Err() == nil {
		if st.buffered(ss) >= st.bufferSize {
			sleep(ctx, pollInterval)
			continue
		}
		pollStart := time.Now()
		ss.mu.Lock()
		ss.reading = true
		ss.mu.Unlock()
		recs, next, err := st.api.records(ctx, ss.info.id, iter)
		if err != nil {
			ss.mu.Lock()
			ss.reading = false
			ss.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
			if st.api.expiredIterator(err) {
				p := pos
				if lastSeq != "" {
					p = position{typ: "AFTER_SEQUENCE_NUMBER", seq: lastSeq}
				}
				if iter, err = st.iteratorWithRetry(ctx, ss.info.id, p); err != nil {
					return
				}
				continue
			}
			st.emit(Event{Type: EventError, Shard: ss.info.id, Err: fmt.Errorf("reading shard %s: %w", ss.info.id, err)})
			sleep(ctx, errorBackoff)
			continue
		}
		st.dispatch(ss, recs)
		if len(recs) > 0 {
			lastSeq = recs[len(recs)-1].seq
		}
		ss.mu.Lock()
		ss.reading = false
		if len(recs) == 0 {
			ss.emptyPoll = pollStart
		}
		ss.mu.Unlock()
		if next == "" {
			// Closed shard read to its end: let the lanes finish, then
			// release the children.
			for _, l := range ss.lanes {
				l.close()
			}
			lanesWG.Wait()
			if ctx.Err() == nil {
				close(ss.done)
			}
			return
		}
		iter = next
		if len(recs) == 0 {
			sleep(ctx, idle)
			idle = min(2*idle, idlePollMax)
		} else {
			idle = pollInterval
		}
	}
}

func (st *stream) iteratorWithRetry(ctx context.Context, shard string, pos position) (string, error) {
	for {
		it, err := st.api.iterator(ctx, shard, pos)
		if err == nil {
			return it, nil
		}
		if ctx.Err() != nil {
			return "", err
		}
		st.emit(Event{Type: EventError, Shard: shard, Err: fmt.Errorf("shard iterator for %s: %w", shard, err)})
		if !sleep(ctx, errorBackoff) {
			return "", ctx.Err()
		}
	}
}

// dispatch filters records and hands them to their lanes: by partition key
// when ParallelizationFactor > 1.
func (st *stream) dispatch(ss *shardState, recs []*record) {
	now := time.Now()
	var dropped []*record
	perLane := make([][]*record, len(ss.lanes))
	for _, r := range recs {
		if !st.filter.Empty() && !st.filter.Match(r.view) {
			dropped = append(dropped, r)
			continue
		}
		r.view = nil
		r.readAt = now
		i := 0
		if len(ss.lanes) > 1 {
			h := fnv.New32a()
			h.Write([]byte(r.key))
			i = int(h.Sum32() % uint32(len(ss.lanes)))
		}
		perLane[i] = append(perLane[i], r)
	}
	if len(dropped) > 0 {
		st.emit(Event{Type: EventFiltered, Shard: ss.info.id, Size: len(dropped), First: dropped[0].seq, Last: dropped[len(dropped)-1].seq})
	}
	for i, rs := range perLane {
		if len(rs) > 0 {
			ss.lanes[i].add(rs)
		}
	}
}

func (st *stream) buffered(ss *shardState) int {
	n := 0
	for _, l := range ss.lanes {
		l.mu.Lock()
		n += len(l.buf)
		l.mu.Unlock()
	}
	return n
}

func (st *stream) idle(_ context.Context, since time.Time) (bool, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.listedAt.IsZero() {
		return false, nil
	}
	for _, ss := range st.shards {
		select {
		case <-ss.done:
			continue
		default:
		}
		ss.mu.Lock()
		fresh := !ss.reading && !ss.emptyPoll.IsZero() && ss.emptyPoll.After(since)
		ss.mu.Unlock()
		if !fresh {
			return false, nil
		}
		for _, l := range ss.lanes {
			if !l.idle() {
				return false, nil
			}
		}
	}
	return true, nil
}

// lane processes, in order, the records of a shard that hash to it.
type lane struct {
	st     *stream
	shard  *shardState
	notify chan struct{}

	mu     sync.Mutex
	buf    []*record
	busy   bool
	closed bool

	win *window // open tumbling window
}

// window is an open tumbling window and the state carried through it.
type window struct {
	start, end      time.Time
	state           map[string]string
	terminatedEarly bool
}

func (l *lane) add(rs []*record) {
	l.mu.Lock()
	l.buf = append(l.buf, rs...)
	l.mu.Unlock()
	l.poke()
}

func (l *lane) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.poke()
}

func (l *lane) poke() {
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

func (l *lane) idle() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buf) == 0 && !l.busy && l.win == nil
}

func (l *lane) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-l.notify:
	case <-t.C:
	}
	return true
}

func (l *lane) run(ctx context.Context) {
	for {
		recs, final, ok := l.next(ctx)
		if !ok {
			return
		}
		if final {
			l.finalInvoke(ctx)
		} else {
			l.process(ctx, recs)
		}
		l.mu.Lock()
		l.busy = false
		l.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

// next waits for the next batch: up to BatchSize records (and 6 MB) of one
// tumbling window, after the batching window if one is set. final is true
// when the open tumbling window has ended and its final invocation is due.
func (l *lane) next(ctx context.Context) (recs []*record, final, ok bool) {
	s := l.st.s
	for ctx.Err() == nil {
		now := time.Now()
		l.mu.Lock()
		if l.win != nil && (!now.Before(l.win.end) || len(l.buf) > 0 && !l.buf[0].arrival.Before(l.win.end) || len(l.buf) == 0 && l.closed) {
			l.busy = true
			l.mu.Unlock()
			return nil, true, true
		}
		if len(l.buf) == 0 {
			closed := l.closed
			l.mu.Unlock()
			if closed {
				return nil, false, false
			}
			d := pollInterval * 5
			if l.win != nil {
				d = min(d, time.Until(l.win.end))
			}
			l.wait(ctx, max(d, time.Millisecond))
			continue
		}
		first := l.buf[0]
		var winEnd time.Time
		if s.TumblingWindow > 0 {
			if l.win == nil {
				secs := int64(s.TumblingWindow / time.Second)
				if secs < 1 {
					secs = 1
				}
				start := time.Unix(first.arrival.Unix()/secs*secs, 0).UTC()
				l.win = &window{start: start, end: start.Add(time.Duration(secs) * time.Second), state: map[string]string{}}
			}
			winEnd = l.win.end
		}
		n, size, full := 0, 0, false
		for _, r := range l.buf {
			if n == s.BatchSize || !winEnd.IsZero() && !r.arrival.Before(winEnd) {
				full = true
				break
			}
			if n > 0 && size+len(r.event)+1 > maxPayload-4096 {
				full = true
				break
			}
			n++
			size += len(r.event) + 1
		}
		if s.MaximumBatchingWindow > 0 && !full && !l.closed {
			deadline := first.readAt.Add(s.MaximumBatchingWindow)
			if !winEnd.IsZero() && winEnd.Before(deadline) {
				deadline = winEnd
			}
			if now.Before(deadline) {
				l.mu.Unlock()
				l.wait(ctx, deadline.Sub(now))
				continue
			}
		}
		recs = append([]*record(nil), l.buf[:n]...)
		l.buf = l.buf[n:]
		l.busy = true
		l.mu.Unlock()
		return recs, false, true
	}
	return nil, false, false
}

// attempt is a batch on its way through retries and bisection.
type attempt struct {
	recs    []*record
	retries int // failed attempts counted against MaximumRetryAttempts
	invokes int // invocations that included these records
	last    rie.Result
	invoked bool
}

// outcome of one invocation of a batch.
type outcome struct {
	failedFrom int  // index of the lowest failed record; -1 if none
	whole      bool // the whole batch failed (function error or unusable response)
	state      map[string]string
	failed     []string
}

// process delivers one batch with Lambda's retry semantics; it returns when
// every record succeeded or was given up on (or ctx ended).
func (l *lane) process(ctx context.Context, recs []*record) {
	s := l.st.s
	stack := []*attempt{{recs: recs}}
	transportFailures := 0
	for len(stack) > 0 && ctx.Err() == nil {
		a := stack[len(stack)-1]
		if s.MaximumRecordAge > 0 {
			i := 0
			for i < len(a.recs) && time.Since(a.recs[i].arrival) > s.MaximumRecordAge {
				i++
			}
			if i > 0 {
				l.giveUp(ctx, a, a.recs[:i], RecordAgeExceeded)
				a.recs = a.recs[i:]
				if len(a.recs) == 0 {
					stack = stack[:len(stack)-1]
					continue
				}
			}
		}
		res, err := l.invoke(ctx, a)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// Lambda could not invoke the function: retry without counting
			// an attempt, until the records are too old.
			transportFailures++
			l.st.emit(Event{Type: EventError, Shard: l.shard.info.id, Size: len(a.recs), First: a.recs[0].seq, Last: a.recs[len(a.recs)-1].seq, Err: err})
			sleep(ctx, min(errorBackoff*time.Duration(transportFailures), 10*time.Second))
			continue
		}
		transportFailures = 0
		out := l.evaluate(res, a)
		if l.win != nil && out.state != nil && !out.whole {
			l.win.state = out.state
		}
		switch {
		case !out.whole && out.failedFrom < 0:
			l.st.p.rec.succeeded(len(a.recs))
			stack = stack[:len(stack)-1]
		case !out.whole:
			l.st.emit(Event{Type: EventItemFailures, Shard: l.shard.info.id, Size: len(a.recs) - out.failedFrom,
				First: a.recs[out.failedFrom].seq, Last: a.recs[len(a.recs)-1].seq, Failed: out.failed, Attempt: a.invokes})
			l.st.p.rec.succeeded(out.failedFrom)
			// Checkpoint before the lowest failed record; retry from it.
			a.recs = a.recs[out.failedFrom:]
			if l.retryOrGiveUp(ctx, a) {
				stack = stack[:len(stack)-1]
			}
		case s.BisectBatchOnFunctionError && len(a.recs) > 1:
			h := len(a.recs) / 2
			stack = stack[:len(stack)-1]
			// Splitting does not consume retry attempts; the halves run in
			// order, first half first.
			stack = append(stack,
				&attempt{recs: a.recs[h:], invokes: a.invokes, last: a.last, invoked: true},
				&attempt{recs: a.recs[:h], invokes: a.invokes, last: a.last, invoked: true})
			l.st.emit(Event{Type: EventBisect, Shard: l.shard.info.id, Size: len(a.recs), First: a.recs[0].seq, Last: a.recs[len(a.recs)-1].seq, Attempt: a.invokes})
		default:
			if l.retryOrGiveUp(ctx, a) {
				stack = stack[:len(stack)-1]
			}
		}
		if l.win != nil && limits.WindowStateSize(l.win.state) > limits.LambdaWindowStateBytes {
			// The state outgrew what Lambda carries: end the window early
			// with a final invocation; the window goes on with fresh state.
			l.win.terminatedEarly = true
			l.finalInvoke(ctx)
		}
	}
}

// retryOrGiveUp counts a failed attempt; it reports true when the batch was
// given up on.
func (l *lane) retryOrGiveUp(ctx context.Context, a *attempt) bool {
	a.retries++
	if max := l.st.s.MaximumRetryAttempts; max >= 0 && a.retries > max {
		l.giveUp(ctx, a, a.recs, RetryAttemptsExhausted)
		return true
	}
	l.st.emit(Event{Type: EventRetry, Shard: l.shard.info.id, Size: len(a.recs), First: a.recs[0].seq, Last: a.recs[len(a.recs)-1].seq, Attempt: a.invokes})
	sleep(ctx, retryDelay(a.retries))
	return false
}

// invoke sends one batch to the function.
func (l *lane) invoke(ctx context.Context, a *attempt) (rie.Result, error) {
	payload, err := l.payload(a.recs, false)
	if err != nil {
		return rie.Result{}, err
	}
	res, err := l.st.inv.Invoke(ctx, payload)
	if err != nil {
		return res, err
	}
	a.invokes++
	a.invoked = true
	a.last = res
	ids := make([]string, len(a.recs))
	for i, r := range a.recs {
		ids[i] = r.seq
	}
	l.st.emit(Event{Type: EventBatch, Shard: l.shard.info.id, Size: len(a.recs), First: a.recs[0].seq, Last: a.recs[len(a.recs)-1].seq,
		Duration: res.Duration, FunctionError: res.FunctionError, Attempt: a.invokes, Records: ids})
	return res, nil
}

// streamEvent is KinesisEvent / DynamoDBEvent; windowEvent adds the
// tumbling-window properties (KinesisTimeWindowEvent / DynamoDBTimeWindowEvent).
type streamEvent struct {
	Records []json.RawMessage `json:"Records"`
}

type windowEvent struct {
	Records                 []json.RawMessage `json:"Records"`
	Window                  windowJSON        `json:"window"`
	State                   map[string]string `json:"state"`
	ShardID                 string            `json:"shardId"`
	EventSourceARN          string            `json:"eventSourceARN"`
	IsFinalInvokeForWindow  bool              `json:"isFinalInvokeForWindow"`
	IsWindowTerminatedEarly bool              `json:"isWindowTerminatedEarly"`
}

type windowJSON struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

func (l *lane) payload(recs []*record, final bool) ([]byte, error) {
	rs := make([]json.RawMessage, len(recs))
	for i, r := range recs {
		rs[i] = r.event
	}
	if l.win == nil {
		return json.Marshal(streamEvent{Records: rs})
	}
	state := l.win.state
	if state == nil {
		state = map[string]string{}
	}
	return json.Marshal(windowEvent{
		Records:                 rs,
		Window:                  windowJSON{Start: l.win.start.Format(time.RFC3339), End: l.win.end.Format(time.RFC3339)},
		State:                   state,
		ShardID:                 l.shard.info.id,
		EventSourceARN:          l.st.s.SourceARN,
		IsFinalInvokeForWindow:  final,
		IsWindowTerminatedEarly: final && l.win.terminatedEarly,
	})
}

// response is the part of a stream function's response Lambda reads:
// StreamsEventResponse, plus the state of a TimeWindowEventResponse.
type response struct {
	BatchItemFailures []map[string]json.RawMessage `json:"batchItemFailures"`
	State             map[string]any               `json:"state"`
}

// evaluate reads an invocation's result the way Lambda does.
func (l *lane) evaluate(res rie.Result, a *attempt) outcome {
	whole := outcome{failedFrom: -1, whole: true}
	if res.FunctionError != "" {
		return whole
	}
	var resp response
	var raw map[string]json.RawMessage
	isObject := json.Unmarshal(res.Payload, &raw) == nil && raw != nil
	if isObject {
		if json.Unmarshal(res.Payload, &resp) != nil {
			return whole
		}
	}
	out := outcome{failedFrom: -1}
	if l.win != nil {
		// A tumbling-window response without state is a failed invocation.
		if _, ok := raw["state"]; !ok || resp.State == nil {
			return whole
		}
		out.state = map[string]string{}
		for k, v := range resp.State {
			switch v := v.(type) {
			case string:
				out.state[k] = v
			default:
				b, _ := json.Marshal(v)
				out.state[k] = string(b)
			}
		}
	}
	if !l.st.s.ReportBatchItemFailures || len(resp.BatchItemFailures) == 0 {
		return out
	}
	index := make(map[string]int, len(a.recs))
	for i, r := range a.recs {
		index[r.seq] = i
	}
	lowest := -1
	for _, item := range resp.BatchItemFailures {
		var id string
		if json.Unmarshal(item["itemIdentifier"], &id) != nil || id == "" {
			return outcome{failedFrom: -1, whole: true, state: out.state} // null, empty or misnamed identifier
		}
		i, ok := index[id]
		if !ok {
			return outcome{failedFrom: -1, whole: true, state: out.state} // not a record of this batch
		}
		out.failed = append(out.failed, id)
		if lowest < 0 || compareSeq(id, a.recs[lowest].seq) < 0 {
			lowest = i
		}
	}
	out.failedFrom = lowest
	return out
}

// finalInvoke closes the open tumbling window: one invocation without
// records, isFinalInvokeForWindow true, retried like a batch.
func (l *lane) finalInvoke(ctx context.Context) {
	s := l.st.s
	w := l.win
	retries := 0
	for ctx.Err() == nil {
		payload, err := l.payload(nil, true)
		if err != nil {
			return
		}
		res, err := l.st.inv.Invoke(ctx, payload)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.st.emit(Event{Type: EventError, Shard: l.shard.info.id, Err: err})
			sleep(ctx, errorBackoff)
			continue
		}
		l.st.emit(Event{Type: EventBatch, Shard: l.shard.info.id, Duration: res.Duration, FunctionError: res.FunctionError, Attempt: retries + 1})
		if res.FunctionError == "" {
			l.st.emit(Event{Type: EventWindowFinal, Shard: l.shard.info.id, Duration: res.Duration})
			break
		}
		retries++
		if s.MaximumRetryAttempts >= 0 && retries > s.MaximumRetryAttempts {
			l.st.emit(Event{Type: EventOnFailure, Shard: l.shard.info.id, Condition: RetryAttemptsExhausted,
				Err: fmt.Errorf("final invocation of window %s failed %d times; its state is dropped", w.start.Format(time.RFC3339), retries)})
			break
		}
		l.st.emit(Event{Type: EventRetry, Shard: l.shard.info.id, Attempt: retries})
		sleep(ctx, retryDelay(retries))
	}
	if ctx.Err() != nil {
		return
	}
	if w.terminatedEarly {
		// Terminated early: the same window goes on with a fresh state.
		w.terminatedEarly = false
		w.state = map[string]string{}
		if time.Now().Before(w.end) {
			return
		}
	}
	l.mu.Lock()
	l.win = nil
	l.mu.Unlock()
}

// giveUp discards recs (a prefix or all of a's records): their on-failure
// record goes to the destination, which is retried until it takes it.
func (l *lane) giveUp(ctx context.Context, a *attempt, recs []*record, condition string) {
	st := l.st
	ev := Event{Type: EventOnFailure, Shard: l.shard.info.id, Size: len(recs), First: recs[0].seq, Last: recs[len(recs)-1].seq,
		Condition: condition, Attempt: a.invokes, FunctionError: a.last.FunctionError}
	if st.dest == nil {
		st.emit(ev)
		return
	}
	body, err := st.onFailureRecord(l.shard.info.id, a, recs, condition)
	if err != nil {
		ev.Err = err
		st.emit(ev)
		return
	}
	for {
		err := st.dest.send(ctx, body)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		st.emit(Event{Type: EventError, Shard: l.shard.info.id, Err: fmt.Errorf("sending the on-failure record to %s: %w", st.s.OnFailureARN, err)})
		if !sleep(ctx, errorBackoff) {
			return
		}
	}
	ev.Destination = st.s.OnFailureARN
	st.emit(ev)
}

func (st *stream) onFailureRecord(shard string, a *attempt, recs []*record, condition string) ([]byte, error) {
	var r onfailure.Record
	r.RequestContext.RequestID = a.last.RequestID
	if r.RequestContext.RequestID == "" {
		r.RequestContext.RequestID = newUUID()
	}
	r.RequestContext.FunctionArn = st.s.FunctionARN
	r.RequestContext.Condition = condition
	r.RequestContext.ApproximateInvokeCount = a.invokes
	if a.invoked {
		r.ResponseContext.StatusCode = 200
		r.ResponseContext.FunctionError = a.last.FunctionError
	}
	r.ResponseContext.ExecutedVersion = "$LATEST"
	r.Version = "1.0"
	r.Timestamp = time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	info := &onfailure.BatchInfo{
		ShardID:                         shard,
		StartSequenceNumber:             recs[0].seq,
		EndSequenceNumber:               recs[len(recs)-1].seq,
		ApproximateArrivalOfFirstRecord: recs[0].arrival.UTC().Format(st.kind.arrivalLayout),
		ApproximateArrivalOfLastRecord:  recs[len(recs)-1].arrival.UTC().Format(st.kind.arrivalLayout),
		BatchSize:                       len(recs),
		StreamArn:                       st.s.SourceARN,
	}
	switch st.kind.batchInfoField {
	case "KinesisBatchInfo":
		r.KinesisBatchInfo = info
	case "DDBStreamBatchInfo":
		r.DDBStreamBatchInfo = info
	default:
		return nil, errors.New("eventsource: unknown stream kind")
	}
	return json.Marshal(r)
}
