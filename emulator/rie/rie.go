package rie

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin"
)

// Version is the pinned aws-lambda-rie module version Install builds.
const Version = "v0.0.0-20261030222936-bef5c4ba774d"

// rieModule is the Go package path of the emulator's command.
const rieModule = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

// markerEnv names the variable that tags every process of one instance, so
// Stop can find a runtime that outlived its emulator.
const markerEnv = "_TRIBUTARY_RIE_INSTANCE"

// invokePath is RIE's invoke endpoint.
const invokePath = "/2015-03-31/functions/function/invocations"

// Config says what to run and how.
type Config struct {
	// Name is the function name (AWS_LAMBDA_FUNCTION_NAME).
	Name string
	// Bootstrap is the path of the bootstrap binary built for this machine.
	Bootstrap string
	// RIE is the path of aws-lambda-rie; empty means
	// <repo root>/.tools/bin/aws-lambda-rie, installed there if missing.
	RIE string
	// Env is the function's environment, already resolved. Lambda's reserved
	// variables (AWS_LAMBDA_FUNCTION_*, AWS_REGION if absent, TZ, ...) are
	// added; Env wins over all of them except the function timeout, name and
	// memory size, which come from the fields below.
	Env map[string]string
	// Timeout is the function timeout (AWS_LAMBDA_FUNCTION_TIMEOUT), rounded
	// up to whole seconds as Lambda only has whole seconds; default 3s.
	Timeout time.Duration
	// MemoryMB is reported to the function; default 128.
	MemoryMB int
	// Instances is the number of concurrent execution environments (RIE
	// processes); default 1.
	Instances int
	// Logs receives every line the function prints and every line RIE logs
	// about it; nil discards them. Calls are serialized.
	Logs func(function, line string)
	// StreamLogs, when set, receives every line as Logs does, with the log
	// stream of the execution environment that printed it — the
	// AWS_LAMBDA_LOG_STREAM_NAME that environment's runtime sees, as on
	// Lambda, where each environment writes to a stream of its own. A
	// replaced environment (after a crash or timeout) gets a new stream.
	StreamLogs func(function, logStream, line string)
}

// Result is what an invocation returned.
type Result struct {
	// Payload is the response, or the error document
	// {"errorMessage","errorType"} when FunctionError is set.
	Payload []byte
	// FunctionError is "" on success and "Unhandled" when the handler
	// returned an error, panicked, the runtime exited or the invocation
	// timed out.
	FunctionError string
	// Duration is the wall time of the invocation as the caller saw it.
	Duration time.Duration
	// RequestID is the invocation's request id (the function sees it in its
	// context, RIE prints it in the START/END/REPORT lines).
	RequestID string
}

// Function is a running function: a pool of RIE processes.
type Function struct {
	cfg     Config
	rie     string
	timeout time.Duration
	pool    chan *instance
	all     []*instance

	logMu sync.Mutex

	mu      sync.Mutex
	stopped bool
	stopCh  chan struct{}
}

// Start starts cfg.Instances RIE processes for the bootstrap, each on its own
// free ports, and returns when every one accepts invocations. The function
// itself initializes on its first invocation, as on Lambda.
func Start(ctx context.Context, cfg Config) (*Function, error) {
	if cfg.Name == "" {
		return nil, errors.New("rie: Config.Name is empty: the function needs a name")
	}
	if cfg.Bootstrap == "" {
		return nil, fmt.Errorf("rie: function %s: Config.Bootstrap is empty", cfg.Name)
	}
	boot, err := filepath.Abs(cfg.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("rie: function %s: bootstrap %q: %w", cfg.Name, cfg.Bootstrap, err)
	}
	if st, err := os.Stat(boot); err != nil {
		return nil, fmt.Errorf("rie: function %s: bootstrap: %w", cfg.Name, err)
	} else if st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("rie: function %s: bootstrap %s is not an executable file", cfg.Name, boot)
	}
	cfg.Bootstrap = boot
	if cfg.Timeout <= 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.MemoryMB <= 0 {
		cfg.MemoryMB = 128
	}
	if cfg.Instances <= 0 {
		cfg.Instances = 1
	}
	bin := cfg.RIE
	if bin == "" {
		if bin, err = Install(ctx, nil); err != nil {
			return nil, fmt.Errorf("rie: function %s: %w", cfg.Name, err)
		}
	} else if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("rie: function %s: emulator: %w", cfg.Name, err)
	}
	f := &Function{
		cfg:     cfg,
		rie:     bin,
		timeout: time.Duration(timeoutSeconds(cfg.Timeout)) * time.Second,
		pool:    make(chan *instance, cfg.Instances),
		stopCh:  make(chan struct{}),
	}
	for i := 0; i < cfg.Instances; i++ {
		in := &instance{fn: f, idx: i}
		if err := in.start(ctx); err != nil {
			_ = f.Stop()
			return nil, err
		}
		f.all = append(f.all, in)
		f.pool <- in
	}
	return f, nil
}

// Name is the function's name.
func (f *Function) Name() string { return f.cfg.Name }

// Invoke invokes the function synchronously with payload on a free execution
// environment, waiting for one if all are busy. The error is non-nil only when
// the emulator failed or ctx ended; function failures are in the Result.
func (f *Function) Invoke(ctx context.Context, payload []byte) (Result, error) {
	var in *instance
	select {
	case in = <-f.pool:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	case <-f.stopCh:
		return Result{}, fmt.Errorf("rie: function %s is stopped", f.cfg.Name)
	}
	res, err, healthy := in.invoke(ctx, payload)
	if healthy {
		f.pool <- in
		return res, err
	}
	// The environment is in an unknown state (the caller gave up while the
	// function was running, or the emulator died): replace it in the
	// background so the next invocation gets a clean one.
	go func() {
		in.kill()
		if err := in.start(context.Background()); err != nil {
			f.log("rie: restarting execution environment %d: %v", in.idx, err)
		}
		f.pool <- in
	}()
	return res, err
}

// Stop ends every process the function started: each emulator, each runtime
// it spawned and anything those left behind. It is safe to call twice.
func (f *Function) Stop() error {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return nil
	}
	f.stopped = true
	close(f.stopCh)
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, in := range f.all {
		wg.Add(1)
		go func() { defer wg.Done(); in.kill() }()
	}
	wg.Wait()
	return nil
}

func (f *Function) isStopped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped
}

func (f *Function) log(format string, args ...any) {
	f.emit("", fmt.Sprintf(format, args...))
}

// emit hands line, printed in the execution environment whose log stream is
// stream ("" for the runner's own lines), to the configured callbacks.
func (f *Function) emit(stream, line string) {
	if f.cfg.Logs == nil && f.cfg.StreamLogs == nil {
		return
	}
	f.logMu.Lock()
	defer f.logMu.Unlock()
	if f.cfg.Logs != nil {
		f.cfg.Logs(f.cfg.Name, line)
	}
	if f.cfg.StreamLogs != nil {
		f.cfg.StreamLogs(f.cfg.Name, stream, line)
	}
}

// instance is one execution environment: one RIE process and the runtime it
// runs. Only one invocation uses it at a time.
type instance struct {
	fn     *Function
	idx    int
	marker string
	// logStream is AWS_LAMBDA_LOG_STREAM_NAME of the current process.
	logStream string
	// runtimePID caches the pid of the runtime (the bootstrap process RIE
	// started), for its peak memory; 0 until found.
	runtimePID int

	cmd       *exec.Cmd
	exited    chan struct{} // closed when the emulator process has exited
	readers   sync.WaitGroup
	invokeURL string
	client    *http.Client

	mu      sync.Mutex
	waiters map[string]chan struct{}
	tail    []string // last lines of the emulator's log, for error messages

	// life serializes starting and killing the process.
	life sync.Mutex
}

// start launches the emulator on fresh ports and waits until it answers.
func (in *instance) start(ctx context.Context) error {
	in.life.Lock()
	defer in.life.Unlock()
	if in.fn.isStopped() {
		return fmt.Errorf("rie: function %s is stopped", in.fn.cfg.Name)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		lastErr = in.startOnce(ctx)
		if lastErr == nil {
			return nil
		}
		if ctx.Err() != nil || in.fn.isStopped() {
			break
		}
	}
	return lastErr
}

// freePort picks a port for an emulator to listen on (a variable so that a
// test can hand out a port another process holds).
var freePort = standin.FreePort

func (in *instance) startOnce(ctx context.Context) error {
	f := in.fn
	invokePort, err := freePort()
	if err != nil {
		return err
	}
	apiPort, err := freePort()
	if err != nil {
		return err
	}
	for apiPort == invokePort {
		if apiPort, err = freePort(); err != nil {
			return err
		}
	}
	in.marker = randomHex(8)
	in.logStream = time.Now().UTC().Format("2006/01/02") + "/[$LATEST]" + in.marker
	in.runtimePID = 0
	invokeAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(invokePort))
	cmd := exec.Command(f.rie,
		"--log-level", "info",
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort)),
		f.cfg.Bootstrap)
	cmd.Dir = filepath.Dir(f.cfg.Bootstrap)
	cmd.Env = in.environ()
	// Own process group, and SIGTERM (RIE then kills its runtime) if this
	// process dies without calling Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("rie: function %s: %w", f.cfg.Name, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("rie: function %s: %w", f.cfg.Name, err)
	}
	in.mu.Lock()
	in.waiters = map[string]chan struct{}{}
	in.tail = nil
	in.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("rie: function %s: start %s: %w", f.cfg.Name, f.rie, err)
	}
	in.cmd = cmd
	in.exited = make(chan struct{})
	in.invokeURL = "http://" + invokeAddr + invokePath
	in.client = &http.Client{Transport: &http.Transport{
		DisableCompression:  true,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     time.Minute,
	}}
	in.readers.Add(2)
	go in.read(stdout, false, in.logStream, cmd.Process.Pid)
	go in.read(stderr, true, in.logStream, cmd.Process.Pid)
	go func() {
		in.readers.Wait()
		_ = cmd.Wait()
		close(in.exited)
	}()

	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", invokeAddr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			// Something answers there: this emulator, or another process
			// that took the port first (see listenerOwner).
			if owned, known := listenerOwner(cmd.Process.Pid, invokePort); known && !owned {
				in.killLocked()
				return fmt.Errorf("rie: function %s: another process took %s before its emulator could listen there", f.cfg.Name, invokeAddr)
			}
			return nil
		}
		select {
		case <-in.exited:
			return fmt.Errorf("rie: function %s: emulator exited before listening on %s: %s", f.cfg.Name, invokeAddr, in.lastLines())
		case <-ctx.Done():
			in.killLocked()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			in.killLocked()
			return fmt.Errorf("rie: function %s: emulator did not listen on %s within 15s: %s", f.cfg.Name, invokeAddr, in.lastLines())
		}
	}
}

// environ is the emulator's environment, which it passes on to the runtime.
func (in *instance) environ() []string {
	f := in.fn
	env := map[string]string{
		"PATH":                           os.Getenv("PATH"),
		"LANG":                           "en_US.UTF-8",
		"TZ":                             ":UTC",
		"AWS_REGION":                     standin.Region,
		"AWS_DEFAULT_REGION":             standin.Region,
		"AWS_EXECUTION_ENV":              "AWS_Lambda_provided.al2023",
		"AWS_LAMBDA_FUNCTION_VERSION":    "$LATEST",
		"AWS_LAMBDA_LOG_GROUP_NAME":      "/aws/lambda/" + f.cfg.Name,
		"AWS_LAMBDA_LOG_STREAM_NAME":     in.logStream,
		"AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
		"LAMBDA_TASK_ROOT":               filepath.Dir(f.cfg.Bootstrap),
		"_HANDLER":                       "bootstrap",
	}
	if r, ok := f.cfg.Env["AWS_REGION"]; ok && f.cfg.Env["AWS_DEFAULT_REGION"] == "" {
		env["AWS_DEFAULT_REGION"] = r
	}
	for k, v := range f.cfg.Env {
		env[k] = v
	}
	env["AWS_LAMBDA_FUNCTION_NAME"] = f.cfg.Name
	env["AWS_LAMBDA_FUNCTION_TIMEOUT"] = strconv.Itoa(timeoutSeconds(f.cfg.Timeout))
	env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = strconv.Itoa(f.cfg.MemoryMB)
	env[markerEnv] = in.marker
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// read forwards one output stream of the emulator process riePID, whose
// environment logs to stream, line by line, and wakes invocations waiting
// for their last line.
func (in *instance) read(r io.Reader, isStderr bool, stream string, riePID int) {
	defer in.readers.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 8*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		var id string
		if !isStderr {
			if rest, ok := strings.CutPrefix(line, "REPORT RequestId: "); ok {
				id, _, _ = strings.Cut(rest, "\t")
				line = in.withPeakMemory(line, riePID)
			}
		}
		in.fn.emit(stream, line)
		if isStderr {
			in.mu.Lock()
			in.tail = append(in.tail, line)
			if len(in.tail) > 20 {
				in.tail = in.tail[len(in.tail)-20:]
			}
			in.mu.Unlock()
			if _, rest, ok := strings.Cut(line, "InvokeID="); ok {
				id = strings.TrimSpace(rest)
				if sp := strings.IndexByte(id, ' '); sp >= 0 {
					id = id[:sp]
				}
			}
		}
		if id != "" {
			in.mu.Lock()
			if ch, ok := in.waiters[id]; ok {
				close(ch)
				delete(in.waiters, id)
			}
			in.mu.Unlock()
		}
	}
	// Drain the rest if a line was too long, so the process never blocks.
	_, _ = io.Copy(io.Discard, r)
}

func (in *instance) lastLines() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.tail) == 0 {
		return "(no output)"
	}
	return strings.Join(in.tail, " | ")
}

// invoke runs one invocation. healthy is false when the environment must be
// replaced before it is used again.
func (in *instance) invoke(ctx context.Context, payload []byte) (res Result, err error, healthy bool) {
	f := in.fn
	select {
	case <-in.exited:
		// The emulator died since the last invocation: start a fresh one.
		if err := in.start(ctx); err != nil {
			return Result{}, err, false
		}
	default:
	}
	reqID := newRequestID()
	done := make(chan struct{})
	in.mu.Lock()
	in.waiters[reqID] = done
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		delete(in.waiters, reqID)
		in.mu.Unlock()
	}()

	// RIE enforces the function timeout itself; this guard only catches an
	// emulator that stopped answering.
	hctx, cancel := context.WithTimeout(ctx, f.timeout+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodPost, in.invokeURL, bytes.NewReader(payload))
	if err != nil {
		return Result{}, fmt.Errorf("rie: function %s: %w", f.cfg.Name, err), true
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Amzn-RequestId", reqID)
	start := time.Now()
	resp, err := in.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err(), false
		}
		return Result{}, fmt.Errorf("rie: function %s: invoke: %w (emulator log: %s)", f.cfg.Name, err, in.lastLines()), false
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	dur := time.Since(start)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err(), false
		}
		return Result{}, fmt.Errorf("rie: function %s: reading the response: %w", f.cfg.Name, err), false
	}
	res, err = classify(resp.StatusCode, body, reqID)
	res.Duration, res.RequestID = dur, reqID
	if err != nil {
		return res, fmt.Errorf("rie: function %s: %w (emulator log: %s)", f.cfg.Name, err, in.lastLines()), false
	}
	// Let the log readers catch up with this invocation's lines: RIE writes
	// the REPORT line (or logs the failure) before it answers.
	select {
	case <-done:
		if resp.StatusCode != http.StatusOK {
			// A crash is logged on stderr; the runtime's last words are on
			// stdout, a different pipe.
			time.Sleep(20 * time.Millisecond)
		}
	case <-time.After(2 * time.Second):
	case <-in.exited:
	}
	return res, nil, true
}

// kill ends the emulator, its runtime and anything tagged with the
// instance's marker, and waits for the output to be forwarded.
func (in *instance) kill() {
	in.life.Lock()
	defer in.life.Unlock()
	in.killLocked()
}

func (in *instance) killLocked() {
	if in.cmd == nil || in.cmd.Process == nil {
		return
	}
	pid := in.cmd.Process.Pid
	select {
	case <-in.exited:
	default:
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-in.exited:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	// RIE starts the runtime in a process group of its own; a runtime that
	// outlived its emulator (SIGKILL above) still carries the marker.
	killTagged(in.marker)
	select {
	case <-in.exited:
	case <-time.After(3 * time.Second):
	}
	if in.client != nil {
		in.client.CloseIdleConnections()
	}
}

// killTagged SIGKILLs every process (and its group) whose environment
// carries markerEnv=marker.
func killTagged(marker string) {
	want := []byte(markerEnv + "=" + marker + "\x00")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// timeoutSeconds rounds a timeout up to whole seconds, at least one.
func timeoutSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newRequestID returns a random UUID (version 4), the shape of Lambda's
// request ids.
func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
