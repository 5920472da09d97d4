package local

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/rie"
	"github.com/tributary-dev/tributary/emulator/template"
	"github.com/tributary-dev/tributary/internal/syncbuf"
)

// A tick that runs past its function timeout is reported as a slow tick,
// not as an error; a tick whose runtime exits is reported as the failure it
// is.
func TestSlowTickIsReportedAsSlow(t *testing.T) {
	for _, tc := range []struct {
		name      string
		res       rie.Result
		want, not string
	}{
		{"timed out", rie.Result{FunctionError: rie.Unhandled, RequestID: "r-1", Duration: 30 * time.Second,
			Payload: []byte(`{"errorMessage":"RequestId: r-1 Error: Task timed out after 30.00 seconds","errorType":"Sandbox.Timedout"}`)},
			"slow tick: schedule TickerSchedule → Ticker ran past its function timeout (30s); the next tick does its work", "Unhandled"},
		{"crashed", rie.Result{FunctionError: rie.Unhandled, RequestID: "r-2",
			Payload: []byte(`{"errorMessage":"RequestId: r-2 Error: Runtime exited with error: exit status 1","errorType":"Runtime.ExitError"}`)},
			"schedule TickerSchedule → Ticker: Unhandled error (request r-2)", "slow tick"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := template.ScheduleSpec{
				LogicalID: "TickerSchedule", ARN: tickRuleARN, Expression: "rate(1 minute)", Rate: time.Minute,
				Targets: []template.ScheduleTarget{{ID: "T", FunctionLogicalID: "Ticker"}},
			}
			fns := map[string]*fakeFunction{"Ticker": {res: tc.res}}
			var progress syncbuf.Buffer
			stop := startSchedules(context.Background(), []template.ScheduleSpec{spec}, invokeByLogicalID(context.Background(), fns), shorten, &progress)
			deadline := time.Now().Add(5 * time.Second)
			for !strings.Contains(progress.String(), "Ticker") || strings.Count(progress.String(), "\n") < 2 {
				if time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			stop()
			if !strings.Contains(progress.String(), tc.want) {
				t.Errorf("progress %q lacks %q", progress.String(), tc.want)
			}
			if strings.Contains(progress.String(), tc.not) {
				t.Errorf("progress %q has %q", progress.String(), tc.not)
			}
		})
	}
}

// An invocation whose runtime exited is recorded as a crash, with its
// function and request; a timeout, a handler's error and a success are not.
func TestCrashesAreRecorded(t *testing.T) {
	var log crashLog
	m := &meteredFunction{name: "Tributary-Ticker", crashes: &log}
	for _, res := range []rie.Result{
		{RequestID: "ok", Payload: []byte(`{"finalized":1}`)},
		{FunctionError: rie.Unhandled, RequestID: "handler", Payload: []byte(`{"errorMessage":"boom","errorType":"errorString"}`)},
		{FunctionError: rie.Unhandled, RequestID: "slow", Payload: []byte(`{"errorMessage":"Task timed out after 30.00 seconds","errorType":"Sandbox.Timedout"}`)},
		{FunctionError: rie.Unhandled, RequestID: "crash", Payload: []byte(`{"errorMessage":"RequestId: crash Error: Runtime exited with error: exit status 1","errorType":"Runtime.ExitError"}`)},
	} {
		m.noteCrash(res)
	}
	got := log.all()
	want := Crash{Function: "Tributary-Ticker", RequestID: "crash", Message: "RequestId: crash Error: Runtime exited with error: exit status 1"}
	if len(got) != 1 || got[0] != want {
		t.Errorf("crashes %+v, want [%+v]", got, want)
	}
}
