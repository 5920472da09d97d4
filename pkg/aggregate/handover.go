package aggregate

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// A replay (cmd/replay rebuild, rollback, use-version) fills a version of
// the views table with the same processor while the live functions publish
// from the current version, then points the readers at it. Without a
// look at the version before, a window both versions make final is
// published twice (the live function on the old version, then the ticker
// on the new one, whose watermark the old one's idle advance had passed),
// and one the replay makes final during the handover — a replay publishes
// nothing of its own — is never published at all: the live function, on
// the new version, finds it final and its records already applied.
//
// So a publisher on a version a replay filled (state.Views.Handover names
// the version before it) asks that version first:
//   - a result it published (state.Views.PublishedRevision) is only marked
//     published here, not sent again;
//   - the live function sends the rest;
//   - the replay, which has no output stream, leaves the rest listed, to be
//     published by the live function or the ticker once the readers are on
//     this version — unless the version before holds no item for the window
//     and every shard of it is past the window's end: a window of history
//     it never had (a pipeline file changed since), which a replay does not
//     send, as before.

// handoverCache is how long a processor trusts what it read of its
// version's handover and the previous version's watermarks: the previous
// version's watermarks move while live instances still write to it.
const handoverCache = 10 * time.Second

// WithHandover has the processor check, before it publishes results, the
// version of the views table the readers used before the one it writes to
// (see above). db reads both versions directly (not routed to the current
// table: a *dynamodb.Client); current names the table the processor writes
// to now.
func WithHandover(db itemStore, current func(context.Context) string) Option {
	return func(p *Processor) { p.handover = &handover{db: db, current: current} }
}

// handover is what WithHandover keeps: the last look at the previous
// version, for the current table it was taken for.
type handover struct {
	db      itemStore
	current func(context.Context) string

	mu     sync.Mutex
	table  string    // the current table the look was for
	readAt time.Time // zero: never
	look   previousVersion
}

// previousVersion is a look at the version before the current one.
type previousVersion struct {
	views *state.Views // nil: none, or no shard of the pipeline in it
	// minEnd, maxEnd: its lowest and highest watermark over the pipeline's
	// shards: every shard of it has passed a window ending by minEnd; none
	// has passed one ending after maxEnd.
	minEnd, maxEnd time.Time
}

// previous is the version before the current one as last read, read again
// after handoverCache or when the current table changed.
func (h *handover) previous(ctx context.Context, p *Processor) (previousVersion, error) {
	table := h.current(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.table == table && !h.readAt.IsZero() && p.now().Sub(h.readAt) < handoverCache {
		return h.look, nil
	}
	var look previousVersion
	ho, ok, err := state.NewViews(h.db, table, p.cfg.Aggregates).Handover(ctx)
	if err != nil {
		return previousVersion{}, err
	}
	if ok {
		prev := state.NewViews(h.db, ho.Previous, p.cfg.Aggregates)
		marks, err := prev.Watermarks(ctx, p.cfg.Name)
		var missing *types.ResourceNotFoundException
		switch {
		case errors.As(err, &missing): // deleted since: nothing to ask
		case err != nil:
			return previousVersion{}, err
		case len(marks) > 0:
			look.views = prev
			first := true
			for _, wm := range marks {
				v := wm.Current()
				if first || v.Before(look.minEnd) {
					look.minEnd = v
				}
				if first || v.After(look.maxEnd) {
					look.maxEnd = v
				}
				first = false
			}
		}
	}
	h.table, h.readAt, h.look = table, p.now(), look
	return look, nil
}

// verdict is what a publisher does with a result it has (judge).
type verdict uint8

const (
	toSend   verdict = iota // send it (and mark it published)
	onStream                // the previous version published it: only mark it
	toHold                  // a replay's: leave it to the live function
)

// judge says, for each of views, whether to send it, only mark it (the
// previous version published it) or, with hold (a replay's processor,
// which sends nothing), leave it listed. nil: send every one (no previous
// version).
func (h *handover) judge(ctx context.Context, p *Processor, views []state.View, hold bool) ([]verdict, error) {
	look, err := h.previous(ctx, p)
	if err != nil || look.views == nil {
		return nil, err
	}
	verdicts := make([]verdict, len(views))
	var (
		mu   sync.Mutex
		errs []error
	)
	parallel(len(views), p.concurrency, func(i int) {
		v := &views[i]
		if v.Window.End.After(look.maxEnd) { // no shard of the previous version passed it
			if hold {
				verdicts[i] = toHold
			}
			return
		}
		rev, exists, err := look.views.PublishedRevision(ctx, v.Ref)
		switch {
		case err != nil:
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		case rev >= v.Revision:
			verdicts[i] = onStream
		case hold && (exists || v.Window.End.After(look.minEnd)):
			verdicts[i] = toHold
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return verdicts, nil
}

// sort splits views into those to send, those the previous version
// already published, and those to hold (judge).
func (h *handover) sort(ctx context.Context, p *Processor, views []state.View, hold bool) (send, sent, held []state.View, err error) {
	verdicts, err := h.judge(ctx, p, views, hold)
	if err != nil || verdicts == nil {
		return views, nil, nil, err
	}
	for i, v := range verdicts {
		switch v {
		case toSend:
			send = append(send, views[i])
		case onStream:
			sent = append(sent, views[i])
		case toHold:
			held = append(held, views[i])
		}
	}
	return send, sent, held, nil
}

// judgeKeyed is judge for a keyed state's pending results (outs[i] is
// pending[i]'s output), in the order they were recorded: it returns the
// outputs to send, and how many of the results, from the first, are done
// with (sent, or on the stream from the previous version); the rest are
// held, all of them from the first a replay holds, so that a retraction
// never goes out before the final result it retracts.
func (p *Processor) judgeKeyed(ctx context.Context, kref state.KeyedRef, kind string, pending []pendingResult, outs []Output) (send []Output, done int, err error) {
	if p.handover == nil || len(pending) == 0 {
		return outs, len(pending), nil
	}
	views := make([]state.View, len(pending))
	for i, r := range pending {
		w := window.Of(r.Start, r.End)
		views[i] = state.View{Ref: state.Ref{PK: state.PartitionKey(kref.Pipeline, kref.Key), SK: state.SortKey(kind, w)}, Window: w, Revision: r.Rev}
	}
	verdicts, err := p.handover.judge(ctx, p, views, p.out == nil)
	if err != nil {
		return nil, 0, err
	}
	if verdicts == nil {
		return outs, len(pending), nil
	}
	for i, v := range verdicts {
		if v == toHold {
			break
		}
		if v == toSend {
			send = append(send, outs[i])
		}
		done++
	}
	return send, done, nil
}
