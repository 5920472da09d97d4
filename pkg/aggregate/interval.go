package aggregate

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/window"
)

// Keys of the tumbling-window state (Lambda carries map[string]string).
const (
	stateWatermark = "wm"  // the interval's working watermark
	stateSeq       = "seq" // the last record accumulated: the state's own fence
	statePartial   = "p|"  // p|<kind>|<window id>|<key> → "<minSeq> <maxSeq> <base64 partial>"
)

// partial is one (key, window)'s accumulated aggregate in the state.
type partial struct {
	st             *agg.State
	minSeq, maxSeq string
}

// HandleInterval is the per-interval path: partial aggregates live in the
// tumbling-window state Lambda carries between invocations; the final
// invocation of each interval writes one update per (key, window).
func (p *Processor) HandleInterval(ctx context.Context, ev events.KinesisTimeWindowEvent) (events.KinesisTimeWindowEventResponse, error) {
	return p.handleInterval(ctx, records(ev.Records), &ev.TimeWindowProperties)
}

func (p *Processor) handleInterval(ctx context.Context, recs []stream.KinesisRecord, ev *events.TimeWindowProperties) (events.KinesisTimeWindowEventResponse, error) {
	defer p.flushMetrics()
	shard := ev.ShardID
	if shard == "" && len(recs) > 0 {
		shard = shardOf(recs[0].EventID)
	}
	shard = strings.Clone(shard) // the batch's strings are reused by the next batch
	ctx, cancel := batch.Reserve(ctx, deadlineMargin)
	defer cancel()
	committed, err := p.watermark(ctx, shard)
	if err != nil {
		return events.KinesisTimeWindowEventResponse{}, err
	}
	wm := *committed
	if s, ok := ev.State[stateWatermark]; ok {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return events.KinesisTimeWindowEventResponse{}, fmt.Errorf("aggregate: window state %q: %w", stateWatermark, err)
		}
		if err := wm.UnmarshalBinary(b); err != nil {
			return events.KinesisTimeWindowEventResponse{}, fmt.Errorf("aggregate: window state %q: %w", stateWatermark, err)
		}
	}
	partials, err := p.decodePartials(ev.State)
	if err != nil {
		return events.KinesisTimeWindowEventResponse{}, err
	}
	lastSeq := ev.State[stateSeq]

	c := p.newCollector(shard, &wm)
	c.onOpen = func(k upKey, seq string, value float64, distinct []byte) {
		pt, ok := partials[k]
		if !ok {
			pt = &partial{st: p.cfg.Aggregates.New(), minSeq: seq}
			partials[k] = pt
		}
		pt.st.Add(value, distinct)
		pt.maxSeq = seq
	}
	c.onCorrected = c.onOpen // late records join the partial; the flush corrects a final window
	accumulated := lastSeq
	for i := range recs {
		rec := &recs[i]
		seq := rec.SequenceNumber
		if lastSeq != "" && stream.CompareSequence(seq, lastSeq) <= 0 {
			continue // already in the state (a redelivery after a partial failure)
		}
		c.decode(rec)
		accumulated = seq
	}
	dedupeState, err := p.judgeInterval(ctx, c, ev.State, ev.IsFinalInvokeForWindow)
	if err != nil {
		return events.KinesisTimeWindowEventResponse{}, err
	}
	if err := p.screen(ctx, c); err != nil {
		return events.KinesisTimeWindowEventResponse{}, err
	}
	if c.failures.Len() > 0 {
		// Records could not be set aside (a transient error). The state
		// must not claim them accumulated, nor carry what follows them: the
		// invocation fails and Lambda retries it with the same state.
		return events.KinesisTimeWindowEventResponse{}, fmt.Errorf("aggregate: setting %d records aside failed; the batch is retried", len(c.aside))
	}
	c.routeAll()
	// Session and sliding windows keep their own per-key state (keyed.go),
	// folded per invocation rather than carried in the window state.
	if failed := p.applyKeyed(ctx, c); len(failed) > 0 {
		// A keyed state write failed (a transient error): its points are
		// not stored, and the state already carries what follows them, so
		// the invocation fails and Lambda retries it with the same state
		// (the folds that did succeed are fenced).
		return events.KinesisTimeWindowEventResponse{}, fmt.Errorf("aggregate: %d keyed window states could not be written; the batch is retried", len(failed))
	}
	p.count(c)

	if !ev.IsFinalInvokeForWindow {
		out := p.encodeState(partials, &wm, accumulated)
		for k, v := range dedupeState {
			out[k] = v
		}
		resp := c.failures.Kinesis()
		return events.KinesisTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: out}, BatchItemFailures: resp.BatchItemFailures}, nil
	}
	// The interval is over: flush one write per (key, window).
	if err := p.flush(ctx, shard, partials); err != nil {
		return events.KinesisTimeWindowEventResponse{}, err // Lambda retries the final invocation with the same state
	}
	if c.failures.Len() == 0 {
		if err := p.commit(ctx, shard, &wm, true); err != nil {
			return events.KinesisTimeWindowEventResponse{}, err
		}
	}
	resp := c.failures.Kinesis()
	return events.KinesisTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: map[string]string{}}, BatchItemFailures: resp.BatchItemFailures}, nil
}

func (p *Processor) flush(ctx context.Context, shard string, partials map[upKey]*partial) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, p.concurrency)
	)
	for k, pt := range partials {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := p.views.Apply(ctx, shard, &state.Update{
				Pipeline: p.cfg.Name, Key: k.key, Kind: k.kind, Window: k.win, OpenIn: p.openIn(shard),
				Partial: pt.st, MinSeq: pt.minSeq, MaxSeq: pt.maxSeq,
				CorrectIfFinal: p.cfg.Late.Policy == window.Correct,
			})
			mu.Lock()
			defer mu.Unlock()
			p.metrics.Add("WriteRequests", metrics.Count, float64(res.Writes))
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			switch res.Outcome {
			case state.Duplicate:
				p.metrics.Add("DuplicatesSkipped", metrics.Count, float64(res.Skipped))
			case state.LateDropped:
				p.metrics.Add("LateDropped", metrics.Count, float64(pt.st.Count()))
			}
		}()
	}
	wg.Wait()
	return firstErr
}

func (p *Processor) decodePartials(st map[string]string) (map[upKey]*partial, error) {
	out := map[upKey]*partial{}
	for k, v := range st {
		if !strings.HasPrefix(k, statePartial) {
			continue
		}
		parts := strings.SplitN(k[len(statePartial):], "|", 3)
		fields := strings.SplitN(v, " ", 3)
		if len(parts) != 3 || len(fields) != 3 {
			return nil, fmt.Errorf("aggregate: window state entry %q is malformed", k)
		}
		w, err := window.ParseID(parts[1])
		if err != nil {
			return nil, fmt.Errorf("aggregate: window state entry %q: %w", k, err)
		}
		s, err := p.cfg.Aggregates.DecodeString(fields[2])
		if err != nil {
			return nil, fmt.Errorf("aggregate: window state entry %q: %w", k, err)
		}
		out[upKey{key: parts[2], kind: parts[0], win: w}] = &partial{st: s, minSeq: fields[0], maxSeq: fields[1]}
	}
	return out, nil
}

func (p *Processor) encodeState(partials map[upKey]*partial, wm *window.Watermark, seq string) map[string]string {
	out := make(map[string]string, len(partials)+2)
	if b, err := wm.MarshalBinary(); err == nil {
		out[stateWatermark] = base64.StdEncoding.EncodeToString(b)
	}
	if seq != "" {
		out[stateSeq] = seq
	}
	for k, pt := range partials {
		text, err := pt.st.MarshalText()
		if err != nil {
			continue
		}
		out[statePartial+k.kind+"|"+k.win.ID()+"|"+k.key] = pt.minSeq + " " + pt.maxSeq + " " + string(text)
	}
	return out
}
