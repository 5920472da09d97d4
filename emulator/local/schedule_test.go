package local

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/emulator/rie"
	"github.com/tributary-dev/tributary/emulator/template"
	"github.com/tributary-dev/tributary/internal/syncbuf"
)

const tickRuleARN = "arn:aws:events:eu-west-1:111122223333:rule/Tributary-TickerSchedule"

type call struct {
	fn      string
	payload []byte
	at      time.Time
}

// recorder is a fake invoke that records every call.
type recorder struct {
	mu    sync.Mutex
	calls []call
	err   error
}

func (r *recorder) invoke(id string, payload []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{id, payload, time.Now()})
	return r.err
}

func (r *recorder) of(fn string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.calls {
		if c.fn == fn {
			out = append(out, c)
		}
	}
	return out
}

func (r *recorder) waitFor(t *testing.T, fn string, n int) []call {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if c := r.of(fn); len(c) >= n {
			return c
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s invoked %d times in 5s, want at least %d", fn, len(r.of(fn)), n)
	return nil
}

// shorten is what `make local` passes: a minute becomes a few milliseconds
// here; an hour is left alone.
func shorten(rate time.Duration) time.Duration {
	if rate == time.Minute {
		return 20 * time.Millisecond
	}
	return 0
}

func TestSchedulesInvokeTargetsWithTheScheduledEvent(t *testing.T) {
	specs := []template.ScheduleSpec{
		{
			LogicalID: "TickerSchedule", ARN: tickRuleARN, Expression: "rate(1 minute)", Rate: time.Minute,
			Targets: []template.ScheduleTarget{
				{ID: "Target0", FunctionLogicalID: "Ticker"},
				{ID: "Const", FunctionLogicalID: "Report", Input: `{"report":"daily"}`},
				{ID: "Detail", FunctionLogicalID: "Detail", InputPath: "$.detail"},
			},
		},
		{
			LogicalID: "Hourly", ARN: "arn:aws:events:eu-west-1:111122223333:rule/Hourly", Expression: "rate(1 hour)", Rate: time.Hour,
			Targets: []template.ScheduleTarget{{ID: "T", FunctionLogicalID: "Hourly"}},
		},
	}
	rec := &recorder{}
	var progress syncbuf.Buffer
	start := time.Now()
	stop := startSchedules(context.Background(), specs, rec.invoke, shorten, &progress)
	defer stop()

	calls := rec.waitFor(t, "Ticker", 3)
	ids := map[string]bool{}
	for i, c := range calls {
		var ev events.EventBridgeEvent
		if err := json.Unmarshal(c.payload, &ev); err != nil {
			t.Fatalf("payload %s is not an EventBridge event: %v", c.payload, err)
		}
		if ev.Version != "0" || ev.DetailType != "Scheduled Event" || ev.Source != "aws.events" ||
			ev.AccountID != "111122223333" || ev.Region != "eu-west-1" ||
			len(ev.Resources) != 1 || ev.Resources[0] != tickRuleARN || string(ev.Detail) != "{}" {
			t.Errorf("call %d: event %s, want a scheduled event of rule %s", i, c.payload, tickRuleARN)
		}
		if ev.Time.Nanosecond() != 0 || ev.Time.Location() != time.UTC || ev.Time.After(c.at) || c.at.Sub(ev.Time) > 10*time.Second {
			t.Errorf("call %d: time %v, want the tick time in whole UTC seconds (invoked at %v)", i, ev.Time, c.at)
		}
		if ids[ev.ID] || len(ev.ID) != 36 {
			t.Errorf("call %d: id %q repeats or is not UUID-shaped", i, ev.ID)
		}
		ids[ev.ID] = true
	}
	// The k-th tick cannot come before k periods have passed (a slow
	// receiver may make two ticks closer, never earlier).
	for i, c := range calls {
		if min := time.Duration(i+1)*20*time.Millisecond - 2*time.Millisecond; c.at.Sub(start) < min {
			t.Errorf("tick %d came %v after start, want at least %v", i, c.at.Sub(start), min)
		}
	}

	if c := rec.waitFor(t, "Report", 1); string(c[0].payload) != `{"report":"daily"}` {
		t.Errorf("target with Input got %s, want the Input as written", c[0].payload)
	}
	if c := rec.waitFor(t, "Detail", 1); string(c[0].payload) != `{}` {
		t.Errorf("target with InputPath $.detail got %s, want {}", c[0].payload)
	}
	if c := rec.of("Hourly"); len(c) != 0 {
		t.Errorf("an hourly rule not shortened ran %d times", len(c))
	}
	for _, want := range []string{
		"schedule TickerSchedule rate(1 minute) every 20ms locally → Ticker, Report, Detail",
		"schedule Hourly rate(1 hour) → Hourly",
	} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress %q lacks %q", progress.String(), want)
		}
	}

	stop()
	n := len(rec.of("Ticker"))
	time.Sleep(80 * time.Millisecond)
	if after := len(rec.of("Ticker")); after != n {
		t.Errorf("%d invocations after stop", after-n)
	}
	stop() // a second stop is harmless
}

func TestScheduleFailuresAreReportedAndTicksDoNotOverlap(t *testing.T) {
	spec := template.ScheduleSpec{
		LogicalID: "TickerSchedule", ARN: tickRuleARN, Expression: "rate(1 minute)", Rate: time.Minute,
		Targets: []template.ScheduleTarget{{ID: "T", FunctionLogicalID: "Ticker"}},
	}
	var running, maxRunning, done atomic.Int32
	invoke := func(string, []byte) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond) // longer than the 20ms period
		done.Add(1)
		return errors.New("Unhandled error (request r-1): tick failed")
	}
	var progress syncbuf.Buffer
	stop := startSchedules(context.Background(), []template.ScheduleSpec{spec}, invoke, shorten, &progress)
	deadline := time.Now().Add(5 * time.Second)
	for done.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if running.Load() != 0 {
		t.Error("stop returned while an invocation was still running")
	}
	if m := maxRunning.Load(); m != 1 {
		t.Errorf("up to %d invocations of one rule ran at once, want 1", m)
	}
	if want := "schedule TickerSchedule → Ticker: Unhandled error (request r-1): tick failed"; !strings.Contains(progress.String(), want) {
		t.Errorf("progress %q lacks the failure %q", progress.String(), want)
	}
}

func TestSchedulesStopWithTheContext(t *testing.T) {
	spec := template.ScheduleSpec{
		LogicalID: "R", ARN: tickRuleARN, Rate: time.Minute,
		Targets: []template.ScheduleTarget{{ID: "T", FunctionLogicalID: "Ticker"}},
	}
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	stop := startSchedules(ctx, []template.ScheduleSpec{spec}, rec.invoke, shorten, nil)
	rec.waitFor(t, "Ticker", 1)
	cancel()
	finished := make(chan struct{})
	go func() { stop(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(2 * time.Second):
		t.Fatal("schedules still running 2s after their context ended")
	}
}

func TestSelectPath(t *testing.T) {
	doc := []byte(`{"detail":{"a":{"b":[1,2]}},"source":"aws.events"}`)
	tests := []struct {
		path, want, err string
	}{
		{"$", string(doc), ""},
		{"$.source", `"aws.events"`, ""},
		{"$.detail.a", `{"b":[1,2]}`, ""},
		{"$.detail.missing", "", `the event has no member "missing"`},
		{"$.source.x", "", `the event has no member "x"`},
		{"$.detail.a.b[0]", "", "only \"$\" and \"$.member.member...\" paths"},
		{"detail", "", "only \"$\" and \"$.member.member...\" paths"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := selectPath(doc, tt.path)
			switch {
			case tt.err == "" && (err != nil || string(got) != tt.want):
				t.Errorf("selectPath = %s, %v; want %s", got, err, tt.want)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("selectPath = %s, %v; want an error containing %q", got, err, tt.err)
			}
		})
	}
}

type fakeFunction struct {
	res rie.Result
	err error
	got []byte
}

func (f *fakeFunction) Invoke(_ context.Context, payload []byte) (rie.Result, error) {
	f.got = payload
	return f.res, f.err
}

func TestInvokeByLogicalID(t *testing.T) {
	fns := map[string]*fakeFunction{
		"Ok":      {res: rie.Result{Payload: []byte(`{"finalized":3}`)}},
		"Failing": {res: rie.Result{FunctionError: rie.Unhandled, RequestID: "req-7", Payload: []byte(`{"errorMessage":"boom","errorType":"errorString"}`)}},
		"Broken":  {err: errors.New("emulator answered HTTP 500")},
	}
	invoke := invokeByLogicalID(context.Background(), fns)
	tests := []struct {
		id, err string
	}{
		{"Ok", ""},
		{"Failing", `Unhandled error (request req-7): {"errorMessage":"boom","errorType":"errorString"}`},
		{"Broken", "emulator answered HTTP 500"},
		{"Missing", "function Missing is not running"},
	}
	for _, tt := range tests {
		err := invoke(tt.id, []byte(`{"x":1}`))
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v, want nil", tt.id, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %v, want an error containing %q", tt.id, err, tt.err)
		}
	}
	if string(fns["Ok"].got) != `{"x":1}` {
		t.Errorf("function got %s, want the payload", fns["Ok"].got)
	}
}

// A scheduled invocation whose runtime exited (an init that failed: a
// handler's option refused at start) says where its reason is, since the
// answer holds none.
func TestInvocationErrorOfAnExitedRuntimeNamesMakeLogs(t *testing.T) {
	exited := &invocationError{rie.Result{FunctionError: rie.Unhandled, RequestID: "r1",
		Payload: []byte(`{"errorType":"Runtime.ExitError","errorMessage":"RequestId: r1 Error: Runtime exited without providing a reason (init failed; see the function's log)"}`)}}
	if !strings.Contains(exited.Error(), "make logs prints the function's log") {
		t.Errorf("%q does not name make logs", exited.Error())
	}
	failed := &invocationError{rie.Result{FunctionError: rie.Unhandled, RequestID: "r2", Payload: []byte(`{"errorType":"errorString","errorMessage":"boom"}`)}}
	if strings.Contains(failed.Error(), "make logs") {
		t.Errorf("a handler's own error %q points at make logs", failed.Error())
	}
}
