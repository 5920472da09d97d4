package aggregate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/state"
)

// RecordPutter is what the processor needs of Kinesis to emit results.
type RecordPutter interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

var _ RecordPutter = (*kinesis.Client)(nil)

// Output is one record on the output stream: a window's final result, or a
// correction of a final result. Emission is at least once; ID is the same
// for every emission of one revision, so consumers dedupe by it.
type Output struct {
	ID       string      `json:"id"`
	Kind     string      `json:"type"` // "final", "correction" or "retraction"
	Pipeline string      `json:"pipeline"`
	Key      string      `json:"key"`
	Window   string      `json:"window"` // window kind, e.g. tumbling:1m0s
	Start    time.Time   `json:"start"`
	End      time.Time   `json:"end"`
	Revision int         `json:"revision"`
	Result   agg.Result  `json:"result"`
	Previous *agg.Result `json:"previous,omitempty"` // corrections: the value to retract
}

// outputOf is the output of a stored window result: a final result, or a
// correction when the view carries the value it retracts. It depends only
// on the stored item, so every publisher of one revision (the handler, its
// retries, the ticker) emits the same record under the same id.
func outputOf(v state.View) Output {
	o := Output{
		ID:   ResultID(v.Pipeline, v.Key, v.Kind, v.Window.ID(), v.Revision),
		Kind: "final", Pipeline: v.Pipeline, Key: v.Key, Window: v.Kind,
		Start: v.Window.Start, End: v.Window.End, Revision: v.Revision, Result: v.Result,
	}
	if v.Previous != nil {
		o.Kind, o.Previous = "correction", v.Previous
	}
	return o
}

// ResultID is the id of one revision of a window's result on the output
// stream: pipeline/key/window/windowID/r<revision>, windowID being the
// window's start and end (window.Window.ID), for example
// pageviews/user-1/tumbling:1m0s/2026-11-29T10:00:00.000Z/2026-11-29T10:01:00.000Z/r1.
// A result's log line carries the fields it is made of (pipeline, key,
// window, start, end, revision) rather than the id itself.
func ResultID(pipeline, key, window, windowID string, revision int) string {
	return pipeline + "/" + key + "/" + window + "/" + windowID + "/r" + strconv.Itoa(revision)
}

// publish puts the results of final windows (tumbling and hopping: final
// results and corrections, each stored with its window item and listed in
// the open-windows index until published) on the output stream, then marks
// each published (state.Views.UnlistRevision) and logs the ones this call
// marked, so each revision is logged once however many publishers race or
// retry. A window whose mark fails stays listed: the next batch that meets
// it, or the ticker, publishes it again under the same id. On a version of
// the views table a replay filled, the results the version before it
// published are only marked, and a replay's processor leaves listed those
// it cannot tell are on the stream (handover.go): it returns their windows
// (held), whose listings the caller keeps.
func (p *Processor) publish(ctx context.Context, views []state.View) (held map[listedWindow]bool, err error) {
	if len(views) == 0 {
		return nil, nil
	}
	var onStream, hold []state.View
	if p.handover != nil {
		if views, onStream, hold, err = p.handover.sort(ctx, p, views, p.out == nil); err != nil {
			return nil, err
		}
	}
	if len(hold) > 0 {
		held = make(map[listedWindow]bool, len(hold))
		for _, v := range hold {
			held[listedWindow{v.Kind, v.Window}] = true
		}
	}
	return held, p.publishSorted(ctx, views, onStream)
}

// markedResult is the result of a fresh window (state.Update.Fresh),
// marked published by the write of key that created it (Result.Marked) or
// met it created (Result.Resend).
type markedResult struct {
	out Output
	ref state.Ref
	key upKey
}

// sendMarked puts results marked published with their writes on the
// output stream, in order (a window met again before a correction of
// it). Their lines were logged when their writes created them
// (flushListed): exactly one write creates a window, so each is logged
// once; one a write met created is sent again under the same id, its
// creator having perhaps died before sending it.
func (p *Processor) sendMarked(ctx context.Context, marked []markedResult) error {
	if len(marked) == 0 {
		return nil
	}
	outs := make([]Output, len(marked))
	for i := range marked {
		outs[i] = marked[i].out
	}
	return p.put(ctx, outs)
}

// freshWindows says which of keys' windows a flush committing closeBy
// writes fresh: those it closes that end after freshAfter (zero: none),
// unless a replay's version is handing over (publishesFresh, asked only
// when one would be).
func (p *Processor) freshWindows(ctx context.Context, keys []upKey, closeBy, freshAfter time.Time) (func(upKey) bool, error) {
	fresh := func(k upKey) bool {
		return !freshAfter.IsZero() && k.win.End.After(freshAfter) && !k.win.End.After(closeBy)
	}
	if !slices.ContainsFunc(keys, fresh) {
		return fresh, nil
	}
	ok, err := p.publishesFresh(ctx)
	if err != nil || !ok {
		return func(upKey) bool { return false }, err
	}
	return fresh, nil
}

// publishesFresh reports whether a flush may create fresh windows
// published (state.Update.Fresh): not on a version a replay filled while
// the version before it is still asked (handover.go), whose publishers
// sort each result by what that version published first.
func (p *Processor) publishesFresh(ctx context.Context) (bool, error) {
	if p.handover == nil {
		return true, nil
	}
	look, err := p.handover.previous(ctx, p)
	return err == nil && look.views == nil, err
}

// publishAll is publish for a result that must be marked published now,
// from a replay too (as it was before handovers were asked): a
// correction's previous revision, marked before the correction applies.
func (p *Processor) publishAll(ctx context.Context, views []state.View) error {
	var onStream []state.View
	if p.handover != nil {
		var err error
		if views, onStream, _, err = p.handover.sort(ctx, p, views, false); err != nil {
			return err
		}
	}
	return p.publishSorted(ctx, views, onStream)
}

// publishSorted sends views and marks them and onStream (already on the
// stream) published.
func (p *Processor) publishSorted(ctx context.Context, views, onStream []state.View) error {
	if len(views)+len(onStream) == 0 {
		return nil
	}
	outs := make([]Output, len(views))
	for i := range views {
		outs[i] = outputOf(views[i])
	}
	if err := p.put(ctx, outs); err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		errs []error
	)
	parallel(len(views)+len(onStream), p.concurrency, func(i int) {
		var v *state.View
		if i < len(views) {
			v = &views[i]
		} else {
			v = &onStream[i-len(views)]
		}
		first, err := p.views.UnlistRevision(ctx, v.Ref, v.Revision)
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			return
		}
		if first && i < len(views) { // the version before logged the others
			p.logResult(ctx, &outs[i])
		}
	})
	if len(onStream) > 0 {
		p.log.Info("window results the previous version of the views table published: marked published here, not sent again", "results", len(onStream))
	}
	return errors.Join(errs...)
}

// put writes outs to the output stream (nothing without one).
func (p *Processor) put(ctx context.Context, outs []Output) error {
	if p.out == nil || len(outs) == 0 {
		return nil
	}
	for start := 0; start < len(outs); start += 500 {
		chunk := outs[start:min(start+500, len(outs))]
		entries := make([]types.PutRecordsRequestEntry, 0, len(chunk))
		for i := range chunk {
			b, err := json.Marshal(chunk[i])
			if err != nil {
				return fmt.Errorf("aggregate: encoding output %s: %w", chunk[i].ID, err)
			}
			entries = append(entries, types.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(chunk[i].Key)})
		}
		for attempt := 0; len(entries) > 0; attempt++ {
			if attempt == 4 {
				return fmt.Errorf("aggregate: output stream %s refused %d records after %d attempts", p.streamName, len(entries), attempt)
			}
			out, err := p.out.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(p.streamName), Records: entries})
			if err != nil {
				return fmt.Errorf("aggregate: emitting to %s: %w", p.streamName, err)
			}
			var retry []types.PutRecordsRequestEntry
			for i, r := range out.Records {
				if r.ErrorCode != nil {
					retry = append(retry, entries[i])
				}
			}
			entries = retry
			if len(entries) > 0 {
				time.Sleep(time.Duration(50<<attempt) * time.Millisecond)
			}
		}
	}
	p.metrics.Add("OutputRecords", metrics.Count, float64(len(outs)))
	return nil
}

// ResultLogMessage is the msg of the structured log line (JSON, on the
// function's stderr, so in its CloudWatch log group) that every window
// result gets: each final window, correction and retraction, with the key
// and the values as fields rather than metric dimensions, so a key costs
// nothing in CloudWatch metrics. The stack's saved Logs Insights queries
// and its Contributor Insights rule select these lines by it (infra/logs.go).
//
// The fields: resultType (final, correction, retraction), pipeline, key,
// window (the window kind, tumbling:1m0s), start and end (state.TimeLayout:
// sortable as strings), revision — the output record's id is made of these
// six (ResultID), so the line does not repeat it; then the
// pipeline's aggregates, count, sum, min, max, mean, distinct and one field
// per quantile (p50, p99, p99_9: a dot would read as a nested field in Logs
// Insights); a correction and a retraction repeat the value they replace
// with the prefix previous (previousCount, previousP50, ...); and, when the
// count aggregate is on, countDelta, what the result adds to the key's count
// (final: count; correction: count - previousCount; retraction:
// -previousCount), so that summing countDelta over a key's results counts
// each event once whatever was corrected or retracted. For that each
// revision is logged once: a final result or a correction of a tumbling or
// hopping window by the publisher that takes the window off the
// open-windows index at that revision (state.Views.UnlistRevision), after
// the result is on the stream, not again by the ticker racing the handler
// or by a retry; the final result of a window a shard's carry held to its
// close by the write that creates its item (state.Update.Fresh), just
// before it is sent, not again by a retry that sends it again; a session
// or sliding window's result by the finalize whose save takes it out of
// the keyed state's pending results, after it is on the stream
// (finalizeKeyedRound), not again by a finalizer racing it. The create and
// the unlist each leave a number they drew in the item, so one whose
// answer was lost, sent again by the SDK, knows the change it meets as its
// own and still logs the line. A process that dies between the unlist (or
// the save) and the log write loses that line (the output stream still has
// the result), and so do: a keyed state's save whose answer was lost (its
// second attempt meets a version it cannot tell it wrote); a fresh create
// whose answer was lost and which a correction (a record of the key from
// another shard: a reshard) met before the SDK sent it again (the
// correction takes the fresh mark off); and a write whose every attempt
// lost its answer, the SDK giving up (the batch's retry draws a number of
// its own).
const ResultLogMessage = "window result"

// logResult writes o's ResultLogMessage line, unless the pipeline's
// outputs.log is false: then no result is logged, whoever publishes it.
// The line has no time of its own: CloudWatch Logs stamps every line it
// takes in (@timestamp in Logs Insights), and results are the most
// numerous lines a stack logs, billed by the byte (docs/cost.md).
func (p *Processor) logResult(ctx context.Context, o *Output) {
	if !p.cfg.Outputs.Log || !p.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	r := slog.NewRecord(time.Time{}, slog.LevelInfo, ResultLogMessage, 0)
	r.AddAttrs(resultAttrs(o)...)
	_ = p.log.Handler().Handle(ctx, r) // like slog.Logger.Log, which drops a handler's error too
}

// resultAttrs are the fields of o's ResultLogMessage line.
func resultAttrs(o *Output) []slog.Attr {
	attrs := make([]slog.Attr, 0, 24)
	attrs = append(attrs,
		slog.String("resultType", o.Kind), slog.String("pipeline", o.Pipeline), slog.String("key", o.Key), slog.String("window", o.Window),
		slog.String("start", o.Start.UTC().Format(state.TimeLayout)), slog.String("end", o.End.UTC().Format(state.TimeLayout)),
		slog.Int("revision", o.Revision))
	attrs = appendResult(attrs, "", o.Result)
	if o.Previous != nil {
		attrs = appendResult(attrs, "previous", *o.Previous)
	}
	var delta int64
	counted := false
	if o.Kind != "retraction" && o.Result.Aggregates.Has(agg.Count) {
		delta, counted = int64(o.Result.Count), true
	}
	if o.Previous != nil && o.Previous.Aggregates.Has(agg.Count) {
		delta, counted = delta-int64(o.Previous.Count), true
	}
	if counted {
		attrs = append(attrs, slog.Int64("countDelta", delta))
	}
	return attrs
}

// appendResult appends r's aggregates as fields named prefix+Name (count,
// previousCount); like r's JSON, min, max, mean and the quantiles only when
// the window counted a record.
func appendResult(attrs []slog.Attr, prefix string, r agg.Result) []slog.Attr {
	name := func(n string) string {
		if prefix == "" {
			return n
		}
		return prefix + strings.ToUpper(n[:1]) + n[1:]
	}
	a := r.Aggregates
	if a.Has(agg.Count) {
		attrs = append(attrs, slog.Uint64(name("count"), r.Count))
	}
	if a.Has(agg.Sum) {
		attrs = append(attrs, slog.Float64(name("sum"), r.Sum))
	}
	if a.Has(agg.Distinct) {
		attrs = append(attrs, slog.Uint64(name("distinct"), r.Distinct))
	}
	if r.Count == 0 {
		return attrs
	}
	if a.Has(agg.Min) {
		attrs = append(attrs, slog.Float64(name("min"), r.Min))
	}
	if a.Has(agg.Max) {
		attrs = append(attrs, slog.Float64(name("max"), r.Max))
	}
	if a.Has(agg.Mean) {
		attrs = append(attrs, slog.Float64(name("mean"), r.Mean))
	}
	if a.Has(agg.Quantiles) {
		qs := make([]string, 0, len(r.Quantiles))
		for q := range r.Quantiles {
			qs = append(qs, q)
		}
		slices.Sort(qs)
		for _, q := range qs {
			attrs = append(attrs, slog.Float64(name(QuantileField(q)), r.Quantiles[q]))
		}
	}
	return attrs
}

// QuantileField is the log field of a quantile named as agg.QuantileName
// names it: p50 stays p50, p99.9 becomes p99_9.
func QuantileField(name string) string { return strings.ReplaceAll(name, ".", "_") }
