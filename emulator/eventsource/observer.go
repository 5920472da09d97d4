package eventsource

import (
	"sync"
	"time"
)

// EventType says what happened in a mapping.
type EventType string

// Event types, in the order a batch meets them.
const (
	// EventFiltered: records did not match the filter criteria and were
	// dropped (streams: skipped; SQS: deleted).
	EventFiltered EventType = "filtered"
	// EventBatch: the function was invoked with a batch (Size, Duration,
	// FunctionError, Attempt).
	EventBatch EventType = "batch"
	// EventItemFailures: the function reported batch item failures (Failed).
	EventItemFailures EventType = "item-failures"
	// EventBisect: a failed batch was split in two.
	EventBisect EventType = "bisect"
	// EventRetry: a failed batch (or its failed tail) will be invoked again.
	EventRetry EventType = "retry"
	// EventOnFailure: a batch was given up on (Condition) and its on-failure
	// record sent to Destination (empty: discarded, no destination).
	EventOnFailure EventType = "on-failure"
	// EventDeleted: SQS messages were deleted after success.
	EventDeleted EventType = "deleted"
	// EventWindowFinal: the final invocation of a tumbling window succeeded.
	EventWindowFinal EventType = "window-final"
	// EventError: polling, invoking or sending failed for a reason outside
	// the function (Err); the mapping keeps trying.
	EventError EventType = "error"
)

// Event is one thing that happened in a mapping.
type Event struct {
	Type     EventType
	Function string
	Source   string // the mapping's SourceARN
	Shard    string // stream shard id; empty for SQS
	// Size is the number of records concerned.
	Size int
	// First and Last identify the records: sequence numbers (streams) or
	// message ids (SQS).
	First, Last string
	Duration    time.Duration
	// FunctionError is "Unhandled" when the invocation failed.
	FunctionError string
	// Attempt counts the invocations of these records, from 1.
	Attempt int
	// Failed lists the item identifiers the function reported.
	Failed []string
	// Records lists, for EventBatch, the identifiers of the records the
	// function was invoked with (sequence numbers or message ids), in order.
	Records []string
	// Condition is RetryAttemptsExhausted or RecordAgeExceeded.
	Condition   string
	Destination string
	Err         error
}

// Observer receives a mapping's events. Calls from one Poller are
// serialized.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// Stats are a mapping's running totals.
type Stats struct {
	Invocations    int // invocations of the function, including retries and final window invokes
	Records        int // records delivered, counting redeliveries
	Succeeded      int // records whose processing succeeded
	FunctionErrors int // invocations that failed (FunctionError set or unusable response)
	ItemFailures   int // item identifiers reported as failed
	Retries        int
	Bisects        int
	OnFailure      int // records given up on (sent to the destination or discarded)
	Filtered       int // records dropped by the filter criteria
	Deleted        int // SQS messages deleted after success
	Errors         int // polling, invoking or sending failures outside the function
}

// recorder serializes Observer calls and keeps Stats.
type recorder struct {
	mu    sync.Mutex
	obs   Observer
	stats Stats
	fn    string
	src   string
}

func (r *recorder) emit(e Event) {
	e.Function, e.Source = r.fn, r.src
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.stats
	switch e.Type {
	case EventFiltered:
		s.Filtered += e.Size
	case EventBatch:
		s.Invocations++
		s.Records += e.Size
		if e.FunctionError != "" {
			s.FunctionErrors++
		}
	case EventItemFailures:
		s.ItemFailures += len(e.Failed)
	case EventBisect:
		s.Bisects++
	case EventRetry:
		s.Retries++
	case EventOnFailure:
		s.OnFailure += e.Size
	case EventDeleted:
		s.Deleted += e.Size
	case EventError:
		s.Errors++
	}
	if r.obs != nil {
		r.obs.Observe(e)
	}
}

func (r *recorder) succeeded(n int) {
	r.mu.Lock()
	r.stats.Succeeded += n
	r.mu.Unlock()
}

func (r *recorder) snapshot() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}
