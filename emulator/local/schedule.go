package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/emulator/rie"
	"github.com/tributary-dev/tributary/emulator/template"
)

// startSchedules plays the template's scheduled EventBridge rules: every
// period it invokes each target of each rule with the "Scheduled Event" the
// rule would send (or the target's Input, or the part of the event its
// InputPath selects). The period is the rule's rate, or every(rate) when
// every is set and gives more than zero — `make local` shortens a minute to
// seconds so that a demo sees the ticker work.
//
// As on AWS the first invocation comes one period after the start. Unlike
// AWS, which invokes targets asynchronously, a rule's targets are invoked one
// after the other and a tick due while they still run is dropped, so ticks of
// one rule never overlap. Failed invocations are reported on progress and not
// retried (the Tributary ticker's async config allows no retries either).
//
// The schedules stop when ctx ends or stop is called; stop waits for
// running invocations and may be called more than once.
func startSchedules(ctx context.Context, specs []template.ScheduleSpec, invoke func(logicalID string, payload []byte) error,
	every func(rate time.Duration) time.Duration, progress io.Writer) (stop func()) {
	if progress == nil {
		progress = io.Discard
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex // serializes writes to progress
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(progress, format, args...)
	}
	for _, s := range specs {
		period := s.Rate
		if every != nil {
			if p := every(s.Rate); p > 0 {
				period = p
			}
		}
		if period <= 0 || len(s.Targets) == 0 {
			continue
		}
		targets := make([]string, len(s.Targets))
		for i, t := range s.Targets {
			targets[i] = t.FunctionLogicalID
		}
		shortened := ""
		if period != s.Rate {
			shortened = fmt.Sprintf(" every %s locally", period)
		}
		report("    schedule %s %s%s → %s\n", s.LogicalID, s.Expression, shortened, strings.Join(targets, ", "))

		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(period)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case at := <-tick.C:
					for _, t := range s.Targets {
						payload, err := schedulePayload(s, t, at)
						if err == nil {
							err = invoke(t.FunctionLogicalID, payload)
						}
						var fe *invocationError
						switch {
						case err == nil || ctx.Err() != nil:
						case errors.As(err, &fe) && fe.res.ErrorType() == rie.ErrorTypeTimeout:
							// Not a failure of the function's logic: the
							// stand-in answered too slowly for this tick.
							report("    slow tick: schedule %s → %s ran past its function timeout (%s); the next tick does its work\n",
								s.LogicalID, t.FunctionLogicalID, fe.res.Duration.Round(time.Second))
						default:
							report("    schedule %s → %s: %v\n", s.LogicalID, t.FunctionLogicalID, err)
						}
					}
				}
			}
		}()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
}

// schedulePayload is what target t of rule s gets for the tick at: the
// Input as written, else the scheduled event, or the part of it InputPath
// selects.
func schedulePayload(s template.ScheduleSpec, t template.ScheduleTarget, at time.Time) ([]byte, error) {
	if t.Input != "" {
		return []byte(t.Input), nil
	}
	ev, err := json.Marshal(scheduledEvent(s, at))
	if err != nil {
		return nil, err
	}
	if t.InputPath == "" {
		return ev, nil
	}
	return selectPath(ev, t.InputPath)
}

// scheduledEvent is the event EventBridge sends for a scheduled rule: time
// is the scheduled time in whole seconds, resources the rule's ARN, and the
// account and region those of the ARN.
func scheduledEvent(s template.ScheduleSpec, at time.Time) events.EventBridgeEvent {
	var region, account string
	// arn:partition:events:region:account:rule/name
	if parts := strings.SplitN(s.ARN, ":", 6); len(parts) == 6 {
		region, account = parts[3], parts[4]
	}
	return events.EventBridgeEvent{
		Version:    "0",
		ID:         newEventID(),
		DetailType: "Scheduled Event",
		Source:     "aws.events",
		AccountID:  account,
		Time:       at.UTC().Truncate(time.Second),
		Region:     region,
		Resources:  []string{s.ARN},
		Detail:     json.RawMessage(`{}`),
	}
}

// selectPath applies a target's InputPath to the event: "$" is the whole
// event, "$.a.b" the member b of member a. Other JSONPath forms (indexes,
// filters, wildcards) are refused.
func selectPath(doc []byte, path string) ([]byte, error) {
	if path == "$" {
		return doc, nil
	}
	rest, ok := strings.CutPrefix(path, "$.")
	if !ok || rest == "" {
		return nil, fmt.Errorf("InputPath %q: only \"$\" and \"$.member.member...\" paths are played locally", path)
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	for _, name := range strings.Split(rest, ".") {
		if name == "" || strings.ContainsAny(name, "[]*?@()'\"") {
			return nil, fmt.Errorf("InputPath %q: only \"$\" and \"$.member.member...\" paths are played locally", path)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("InputPath %q: the event has no member %q", path, name)
		}
		if v, ok = m[name]; !ok {
			return nil, fmt.Errorf("InputPath %q: the event has no member %q", path, name)
		}
	}
	return json.Marshal(v)
}

// newEventID is a random UUID-shaped id, like EventBridge's event ids.
func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// functionInvoker is what a schedule needs of a running function.
type functionInvoker interface {
	Invoke(ctx context.Context, payload []byte) (rie.Result, error)
}

var _ functionInvoker = (*rie.Function)(nil)

// invokeByLogicalID is the invoke func of startSchedules over the running
// functions by logical id: a function error (the handler failed, panicked or
// timed out) is an error carrying the function's error document.
func invokeByLogicalID[F functionInvoker](ctx context.Context, fns map[string]F) func(logicalID string, payload []byte) error {
	return func(logicalID string, payload []byte) error {
		fn, ok := fns[logicalID]
		if !ok {
			return fmt.Errorf("function %s is not running", logicalID)
		}
		res, err := fn.Invoke(ctx, payload)
		if err != nil {
			return err
		}
		if res.FunctionError != "" {
			return &invocationError{res}
		}
		return nil
	}
}

// invocationError is an invocation that failed in the function (its
// FunctionError is set): the handler failed, the runtime exited or the
// invocation timed out.
type invocationError struct{ res rie.Result }

func (e *invocationError) Error() string {
	msg := fmt.Sprintf("%s error (request %s): %s", e.res.FunctionError, e.res.RequestID, e.res.Payload)
	if bytes.Contains(e.res.Payload, []byte("Runtime.ExitError")) {
		// The runtime exited, at init or later: why is in the function's
		// log, not in the answer.
		msg += " (make logs prints the function's log, where its runtime said why it exited)"
	}
	return msg
}
