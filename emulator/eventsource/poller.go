package eventsource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Tuning of the local pollers. Lambda polls a Kinesis shard once a second
// and a DynamoDB stream shard four times a second; locally a shard that just
// returned records is read again after pollInterval, which keeps `make local`
// and the tests snappy, and one that keeps returning nothing is read less
// and less often, down to once per idlePollMax as on AWS: every read is a
// request the one stand-in serves in turn (make local's dozens of idle
// shards polled ten times a second were most of moto's work).
var (
	pollInterval = 100 * time.Millisecond
	idlePollMax  = time.Second
	// retryBase is the delay before the first retry of a failed batch; it
	// doubles with every retry up to retryMax.
	retryBase = 100 * time.Millisecond
	retryMax  = 2 * time.Second
	// errorBackoff is the pause after a failure outside the function
	// (polling, the emulator, the destination).
	errorBackoff = time.Second
)

// maxPayload is Lambda's limit on a synchronous invocation's payload.
const maxPayload = 6 * 1024 * 1024

// runner is the source-specific half of a Poller.
type runner interface {
	run(ctx context.Context) error
	// idle reports whether everything present at since has been processed.
	idle(ctx context.Context, since time.Time) (bool, error)
}

// Poller plays one event source mapping.
type Poller struct {
	s      Settings
	rec    *recorder
	runner runner

	mu      sync.Mutex
	running bool
	started chan struct{}
}

func newPoller(s Settings, obs Observer) *Poller {
	return &Poller{
		s:       s,
		rec:     &recorder{obs: obs, fn: s.FunctionName, src: s.SourceARN},
		started: make(chan struct{}),
	}
}

// Settings are the mapping's settings with defaults filled in.
func (p *Poller) Settings() Settings { return p.s }

// Stats are the mapping's totals so far.
func (p *Poller) Stats() Stats { return p.rec.snapshot() }

// Run polls the source and invokes the function until ctx is cancelled,
// then returns nil. It returns an error early only when the source cannot be
// found or read at all; failures later on are reported to the Observer as
// EventError and retried. A disabled mapping (Enabled false) polls nothing.
func (p *Poller) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("eventsource: Run called twice on one Poller")
	}
	p.running = true
	close(p.started)
	p.mu.Unlock()
	if !p.s.Enabled {
		<-ctx.Done()
		return nil
	}
	err := p.runner.run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Idle reports whether the mapping has, right now, nothing buffered or in
// flight and its last look at the source found nothing new.
func (p *Poller) Idle() bool {
	select {
	case <-p.started:
	default:
		return false
	}
	if !p.s.Enabled {
		return true
	}
	ok, _ := p.runner.idle(context.Background(), time.Time{})
	return ok
}

// WaitIdle waits until every record present in the source when it was
// called has been processed: delivered successfully, given up on (on-failure
// destination, DLQ) or filtered out. A record that keeps failing with
// infinite retries keeps the mapping busy, and an open tumbling window
// keeps it busy until the window's final invocation, so bound ctx. SQS
// messages waiting out a visibility timeout count as present.
func (p *Poller) WaitIdle(ctx context.Context) error {
	since := time.Now()
	select {
	case <-p.started:
	case <-ctx.Done():
		return fmt.Errorf("eventsource: %s → %s: Run was not called: %w", p.s.SourceARN, p.s.FunctionName, ctx.Err())
	}
	if !p.s.Enabled {
		return nil
	}
	t := time.NewTicker(pollInterval / 2)
	defer t.Stop()
	for {
		ok, err := p.runner.idle(ctx, since)
		if err == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("eventsource: %s → %s: not drained: %w (stats %+v)", p.s.SourceARN, p.s.FunctionName, ctx.Err(), p.Stats())
		case <-t.C:
		}
	}
}

// sleep waits d or until ctx ends; it reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retryDelay is the pause before retry n (from 1) of a failed batch.
func retryDelay(n int) time.Duration {
	d := retryBase
	for i := 1; i < n && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}
