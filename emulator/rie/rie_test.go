package rie_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/rie"
	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/faultyfn/fntest"
)

var bootstrap string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rie-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bootstrap, err = fntest.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := rie.Install(context.Background(), os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// logs collects the lines a function printed.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) add(_, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

func (l *logs) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.lines, func(line string) bool { return strings.Contains(line, s) })
}

func start(t testing.TB, cfg rie.Config) *rie.Function {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "faulty"
	}
	cfg.Bootstrap = bootstrap
	fn, err := rie.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fn.Stop() })
	return fn
}

func invoke(t testing.TB, fn *rie.Function, payload string) rie.Result {
	t.Helper()
	res, err := fn.Invoke(context.Background(), []byte(payload))
	if err != nil {
		t.Fatalf("Invoke(%s): %v", payload, err)
	}
	return res
}

func errorDoc(t *testing.T, res rie.Result) (typ, msg string) {
	t.Helper()
	var d struct{ ErrorType, ErrorMessage string }
	if err := json.Unmarshal(res.Payload, &d); err != nil {
		t.Fatalf("error payload %q is not an error document: %v", res.Payload, err)
	}
	return d.ErrorType, d.ErrorMessage
}

func TestInvokeAnswersAndSeesItsEnvironment(t *testing.T) {
	var l logs
	fn := start(t, rie.Config{Name: "envcheck", Env: map[string]string{"GREETING": "hello"}, Logs: l.add})

	res := invoke(t, fn, `{"do":"echo","n":1}`)
	if res.FunctionError != "" || string(res.Payload) != `{"do":"echo","n":1}` {
		t.Fatalf("echo: got %+v", res)
	}
	if !l.contains("faultyfn: command echo") {
		t.Errorf("the function's output line was not delivered to Logs before Invoke returned; got %q", l.lines)
	}
	for name, want := range map[string]string{
		"GREETING":                        "hello",
		"AWS_LAMBDA_FUNCTION_NAME":        "envcheck",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128",
		"AWS_REGION":                      "us-east-1",
	} {
		res := invoke(t, fn, fmt.Sprintf(`{"do":"env","name":%q}`, name))
		var got map[string]string
		if err := json.Unmarshal(res.Payload, &got); err != nil {
			t.Fatalf("env %s: %v (%s)", name, err, res.Payload)
		}
		if got[name] != want {
			t.Errorf("function sees %s=%q, want %q", name, got[name], want)
		}
	}
}

func TestFailuresAreUnhandledAndTheFunctionRecovers(t *testing.T) {
	fn := start(t, rie.Config{})
	tests := []struct {
		do       string
		wantType string
		wantMsg  string
	}{
		{do: "error", wantType: "errorString", wantMsg: "asked to fail"},
		{do: "panic", wantType: "string", wantMsg: "asked to panic"},
		{do: "exit", wantType: "Runtime.ExitError", wantMsg: "exit status 3"},
	}
	for _, tt := range tests {
		t.Run(tt.do, func(t *testing.T) {
			res := invoke(t, fn, fmt.Sprintf(`{"do":%q}`, tt.do))
			if res.FunctionError != rie.Unhandled {
				t.Fatalf("FunctionError = %q, want %q (payload %s)", res.FunctionError, rie.Unhandled, res.Payload)
			}
			typ, msg := errorDoc(t, res)
			if typ != tt.wantType || !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("error document = %s / %q, want %s / containing %q", typ, msg, tt.wantType, tt.wantMsg)
			}
			// The next invocation gets a working runtime (re-initialized after a crash).
			if res := invoke(t, fn, `{"do":"echo"}`); res.FunctionError != "" {
				t.Errorf("invocation after %s failed: %s", tt.do, res.Payload)
			}
		})
	}
}

func TestTimeoutIsUnhandledAndKillsTheRuntime(t *testing.T) {
	fn := start(t, rie.Config{Timeout: time.Second})
	before := pid(t, fn)
	res := invoke(t, fn, `{"do":"sleep","ms":3000}`)
	if res.FunctionError != rie.Unhandled {
		t.Fatalf("FunctionError = %q, want Unhandled (payload %s)", res.FunctionError, res.Payload)
	}
	if typ, msg := errorDoc(t, res); typ != "Sandbox.Timedout" || !strings.Contains(msg, "Task timed out after 1.00 seconds") {
		t.Errorf("error document = %s / %q", typ, msg)
	}
	if res.Duration >= 3*time.Second {
		t.Errorf("invocation took %v: the 1s timeout did not cut the 3s sleep", res.Duration)
	}
	if after := pid(t, fn); after == before {
		t.Errorf("runtime pid %d survived the timeout; Lambda starts a fresh runtime", after)
	}
}

func TestInitFailureIsUnhandled(t *testing.T) {
	fn := start(t, rie.Config{Env: map[string]string{"FAULT_MODE": "bogus"}})
	res := invoke(t, fn, `{"do":"echo"}`)
	if res.FunctionError != rie.Unhandled {
		t.Fatalf("FunctionError = %q, want Unhandled (payload %s)", res.FunctionError, res.Payload)
	}
	if typ, _ := errorDoc(t, res); typ != "Runtime.ExitError" {
		t.Errorf("errorType = %s, want Runtime.ExitError", typ)
	}
}

func TestPoolRunsOneInvocationPerEnvironment(t *testing.T) {
	for _, instances := range []int{1, 3} {
		t.Run(fmt.Sprint(instances), func(t *testing.T) {
			fn := start(t, rie.Config{Instances: instances})
			const calls = 4
			var wg sync.WaitGroup
			streams := make([]string, calls)
			errs := make([]error, calls)
			for i := range calls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := fn.Invoke(context.Background(), []byte(`{"do":"env","name":"AWS_LAMBDA_LOG_STREAM_NAME"}`))
					if err == nil && res.FunctionError != "" {
						err = errors.New(string(res.Payload))
					}
					var m map[string]string
					_ = json.Unmarshal(res.Payload, &m)
					streams[i], errs[i] = m["AWS_LAMBDA_LOG_STREAM_NAME"], err
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("concurrent invocation %d: %v", i, err)
				}
			}
			distinct := map[string]bool{}
			for _, s := range streams {
				distinct[s] = true
			}
			if len(distinct) > instances {
				t.Errorf("%d execution environments answered, want at most %d: %v", len(distinct), instances, streams)
			}
		})
	}
}

func TestCancelledInvokeLeavesAWorkingFunction(t *testing.T) {
	fn := start(t, rie.Config{Timeout: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := fn.Invoke(ctx, []byte(`{"do":"sleep","ms":5000}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Invoke with expiring ctx: err = %v, want deadline exceeded", err)
	}
	res := invoke(t, fn, `{"do":"echo"}`)
	if res.FunctionError != "" {
		t.Fatalf("invocation after a cancelled one failed: %s", res.Payload)
	}
	if res.Duration > 3*time.Second {
		t.Errorf("invocation after a cancelled one waited %v for the abandoned sleep", res.Duration)
	}
}

func TestStopLeavesNothingRunning(t *testing.T) {
	fn := start(t, rie.Config{Instances: 2})
	p := pid(t, fn)
	if err := fn.Stop(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for syscall.Kill(p, 0) == nil && !isZombie(p) {
		if time.Now().After(deadline) {
			t.Fatalf("runtime process %d still running after Stop", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := fn.Invoke(context.Background(), []byte(`{}`)); err == nil {
		t.Error("Invoke after Stop: want an error")
	}
	if err := fn.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestStartRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]rie.Config{
		"no name":           {Bootstrap: bootstrap},
		"missing bootstrap": {Name: "x", Bootstrap: "/nonexistent/bootstrap"},
		"missing emulator":  {Name: "x", Bootstrap: bootstrap, RIE: "/nonexistent/aws-lambda-rie"},
	} {
		if fn, err := rie.Start(context.Background(), cfg); err == nil {
			_ = fn.Stop()
			t.Errorf("%s: Start succeeded, want an error", name)
		}
	}
}

func pid(t testing.TB, fn *rie.Function) int {
	t.Helper()
	res := invoke(t, fn, `{"do":"pid"}`)
	var m map[string]int
	if err := json.Unmarshal(res.Payload, &m); err != nil || m["pid"] == 0 {
		t.Fatalf("pid: %s (%v)", res.Payload, err)
	}
	return m["pid"]
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

// BenchmarkInvokeWarm measures the round trip of a trivial warm invocation
// through RIE (HTTP to the emulator, runtime API, handler, back) and reports
// its p50 and p99.
func BenchmarkInvokeWarm(b *testing.B) {
	fn := start(b, rie.Config{})
	invoke(b, fn, `{"do":"echo"}`) // cold start
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		res, err := fn.Invoke(context.Background(), []byte(`{"do":"echo"}`))
		if err != nil || res.FunctionError != "" {
			b.Fatalf("invoke: %v %s", err, res.Payload)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}

// streamLogs collects lines with the log stream they came from.
type streamLogs struct {
	mu    sync.Mutex
	lines map[string][]string // by log stream
}

func (l *streamLogs) add(_, stream, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lines == nil {
		l.lines = map[string][]string{}
	}
	l.lines[stream] = append(l.lines[stream], line)
}

func (l *streamLogs) reports() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for s, lines := range l.lines {
		for _, line := range lines {
			if strings.HasPrefix(line, "REPORT RequestId: ") {
				out[s] = append(out[s], line)
			}
		}
	}
	return out
}

// Each execution environment logs under the stream its runtime is told
// (AWS_LAMBDA_LOG_STREAM_NAME), one stream per environment.
func TestEachEnvironmentLogsUnderItsOwnStream(t *testing.T) {
	var l streamLogs
	fn := start(t, rie.Config{Name: "streams", Instances: 2, StreamLogs: l.add})
	var wg sync.WaitGroup
	names := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := invoke(t, fn, `{"do":"sleep","ms":150}`)
			if res.FunctionError != "" {
				t.Errorf("sleep: %s", res.Payload)
			}
		}()
	}
	wg.Wait()
	for range 2 {
		var got map[string]string
		if err := json.Unmarshal(invoke(t, fn, `{"do":"env","name":"AWS_LAMBDA_LOG_STREAM_NAME"}`).Payload, &got); err != nil {
			t.Fatal(err)
		}
		names <- got["AWS_LAMBDA_LOG_STREAM_NAME"]
	}
	close(names)
	reports := l.reports()
	if len(reports) != 2 {
		t.Fatalf("REPORT lines came from %d log streams, want one per environment (2): %v", len(reports), reports)
	}
	for s := range reports {
		if !strings.Contains(s, "/[$LATEST]") {
			t.Errorf("log stream %q is not shaped like Lambda's <date>/[$LATEST]<id>", s)
		}
	}
	for n := range names {
		if _, ok := reports[n]; !ok {
			t.Errorf("the runtime was told log stream %q, which no REPORT line came from (streams %v)", n, reports)
		}
	}
}

// REPORT lines carry the runtime's measured peak memory, not the memory
// size: it grows when the function allocates.
func TestReportCarriesMeasuredPeakMemory(t *testing.T) {
	var l streamLogs
	fn := start(t, rie.Config{Name: "memory", MemoryMB: 512, StreamLogs: l.add})
	used := func() int {
		t.Helper()
		var last string
		for _, lines := range l.reports() {
			last = lines[len(lines)-1]
		}
		m := regexp.MustCompile(`Max Memory Used: ([0-9]+) MB`).FindStringSubmatch(last)
		if m == nil {
			t.Fatalf("REPORT line has no Max Memory Used figure: %q", last)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	invoke(t, fn, `{"do":"echo"}`)
	before := used()
	if before >= 512 || before < 1 {
		t.Fatalf("Max Memory Used %d MB after an echo: want the runtime's few MB, not the memory size 512", before)
	}
	res := invoke(t, fn, `{"do":"alloc","mb":64}`)
	if res.FunctionError != "" {
		t.Fatalf("alloc: %s", res.Payload)
	}
	after := used()
	if after < before+60 || after >= 512 {
		t.Errorf("Max Memory Used %d MB after allocating 64 MB (was %d MB): want about %d", after, before, before+64)
	}
}

// TestPortTakenByAnotherProcessIsNotUsed: the port an emulator is given is
// taken by another process (another make local's emulator, say) before
// the emulator binds it. The function must not start with its invoke
// address pointing there: its invocations would reach the other process's
// function. It starts on other ports and answers itself.
func TestPortTakenByAnotherProcessIsNotUsed(t *testing.T) {
	thief := exec.Command("python3", "-c", `
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'"another process answered"')
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
`)
	out, err := thief.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := thief.Start(); err != nil {
		t.Fatalf("python3 (a prerequisite) cannot run here: %v", err)
	}
	t.Cleanup(func() { _ = thief.Process.Kill(); _ = thief.Wait() })
	var taken int
	if _, err := fmt.Fscan(out, &taken); err != nil {
		t.Fatalf("the other process did not say its port: %v", err)
	}
	var handed atomic.Bool
	restore := rie.SetFreePort(func() (int, error) {
		if handed.CompareAndSwap(false, true) {
			return taken, nil
		}
		return standin.FreePort()
	})
	defer restore()
	fn := start(t, rie.Config{Name: "portcheck"})
	res := invoke(t, fn, `{"do":"echo","n":7}`)
	if res.FunctionError != "" || string(res.Payload) != `{"do":"echo","n":7}` {
		t.Fatalf("invoke answered %q (function error %q): want the function's own echo, not the process holding port %d", res.Payload, res.FunctionError, taken)
	}
}
