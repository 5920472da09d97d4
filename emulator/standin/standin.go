package standin

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// MotoVersion is the pinned moto release the stand-in runs.
const MotoVersion = "5.2.5"

// DefaultAddr is LocalStack's edge port, used by `make local`.
const DefaultAddr = "127.0.0.1:4566"

// MakePrefix is what a make command line reaching the stand-in at endpoint
// starts with: TRIBUTARY_STANDIN_ADDR=<its address> and a space when it is
// not DefaultAddr, which the make targets that read it (results, tail,
// logs, setaside, putback) ask otherwise; "" when it is.
func MakePrefix(endpoint string) string {
	addr := strings.TrimPrefix(endpoint, "http://")
	if addr == "" || addr == DefaultAddr {
		return ""
	}
	return "TRIBUTARY_STANDIN_ADDR=" + addr + " "
}

// Region is the region every local client uses.
const Region = "us-east-1"

// Options say where and how to run the stand-in.
type Options struct {
	// Addr is host:port to listen on; "127.0.0.1:0" picks a free port.
	Addr string
	// VenvDir is the virtual environment holding moto; empty means
	// <repo root>/.venv.
	VenvDir string
	// Log receives the server's own output; nil discards it.
	Log io.Writer
	// Reuse lets Start return an already running endpoint at Addr instead of
	// failing (LocalStack or a stand-in from an earlier `make local-up`).
	Reuse bool
	// Patience bounds the wait for the first AWS answer of whatever already
	// listens at Addr (see Probe); 0 means ProbePatience.
	Patience time.Duration
	// Progress receives a line when that wait is longer than a moment; nil
	// discards it.
	Progress io.Writer
	// Owner says who starts the stand-in and when it stops, for whoever
	// finds it at Addr later (Probe reads it from OwnerPath): another
	// `make local` must not deploy onto a stand-in that goes away when the
	// run that started it ends. The zero value says nothing.
	Owner Owner
}

// Owner is who started a stand-in and whether it stops with them.
type Owner struct {
	// Command names the starter, for example "make local".
	Command string `json:"command"`
	// PID is the starter's process id.
	PID int `json:"pid"`
	// StopsWithRun is true when the stand-in stops as soon as its
	// starter's run ends (make local), false when it stays until asked
	// (make local-up, until Ctrl-C).
	StopsWithRun bool `json:"stopsWithRun"`
}

// String is what a banner prints: "make local (pid 4242), which stops it
// when its run ends".
func (o Owner) String() string {
	s := fmt.Sprintf("%s (pid %d)", o.Command, o.PID)
	if o.StopsWithRun {
		s += ", which stops it when its run ends"
	}
	return s
}

// Server is a running (or reused) stand-in.
type Server struct {
	endpoint string
	// group is moto's process group, signalled by Stop (0: nothing to
	// stop); release lets go of what else holds it (the zygote's
	// connection; nil for a moto this process started itself).
	group   int
	release func()
	done    chan error
	reused  bool
	found   Found
	front   *http.Server // the serializer clients talk to

	// exited is closed when moto's process ends, exitErr and tail then
	// say how; stopping is set by Stop, so an end it asked for is not
	// taken for one it did not.
	exited   chan struct{}
	pid      int
	exitErr  error
	tail     *lastBytes
	stopping atomic.Bool
}

// Exited is closed when the moto this Server started ends, whether Stop
// ended it or not (nil, never closed, for a reused stand-in). A moto that
// ends on its own takes the serializer in front of it down with it, so
// that clients, and other runs deployed onto it, find nothing listening
// rather than an answer that is an error page.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// PID is the process id of the moto this Server started (0 for a reused
// stand-in).
func (s *Server) PID() int { return s.pid }

// Stopped reports whether Stop was called: an end that follows was asked
// for.
func (s *Server) Stopped() bool { return s.stopping.Load() }

// ExitReason says how the moto this Server started ended: its exit
// status and its last output. Empty while it runs.
func (s *Server) ExitReason() string {
	select {
	case <-s.exited:
	default:
		return ""
	}
	return fmt.Sprintf("moto (pid %d) ended: %v; its last output: %q", s.pid, s.exitErr, lastWords(s.tail.String()))
}

// terminalCodes are the colour codes werkzeug writes around its banner.
var terminalCodes = regexp.MustCompile("\x1b\\[[0-9;]*m")

// serverBanner is werkzeug's start-up banner, which names moto's private
// port (not the stand-in's address) and says nothing of an end.
var serverBanner = regexp.MustCompile(`(?m)^(WARNING: This is a development server.*|.*Running on http://.*|Press CTRL\+C to quit)\n?`)

// lastWords is moto's last output without colour codes or the start-up
// banner: what it said before it ended, or "" when it said nothing else.
func lastWords(out string) string {
	return strings.TrimSpace(serverBanner.ReplaceAllString(terminalCodes.ReplaceAllString(out, ""), ""))
}

// Endpoint is the base URL clients use, for example http://127.0.0.1:4566.
func (s *Server) Endpoint() string { return s.endpoint }

// Reused reports whether Start found something already answering at Addr.
func (s *Server) Reused() bool { return s.reused }

// Found is what Start found answering at Addr, for a reused endpoint.
func (s *Server) Found() Found { return s.found }

// CheckAddr checks that addr is an address the stand-in can be on:
// 127.0.0.1:<port> or localhost:<port>, the port a number from 0 to 65535
// (0: any free port). Its error quotes addr and says what is allowed, for
// the caller to prefix with the flag or variable addr came from: a port
// past 65535 would otherwise be reported as in use, and an empty one
// ("127.0.0.1:") silently taken as any free port.
func CheckAddr(addr string) error {
	const want = "want 127.0.0.1:<port> or localhost:<port>, the port 1 to 65535 (0: any free port), for example " + DefaultAddr
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %s", addr, want)
	}
	if host != "127.0.0.1" && host != "localhost" {
		return fmt.Errorf("%q: only 127.0.0.1 or localhost is allowed: %s", addr, want)
	}
	n, err := strconv.Atoi(port)
	if port == "" || strings.TrimLeft(port, "0123456789") != "" || err != nil || n > 65535 {
		return fmt.Errorf("%q: port %q is not a port number: %s", addr, port, want)
	}
	return nil
}

// OtherAddr is the address to offer in place of addr, which is in use:
// the next port on its host (127.0.0.1:4567 for the default
// 127.0.0.1:4566), never addr itself, which a user who had picked
// 127.0.0.1:4567 was offered again; <host>:0, any free port (CheckAddr
// takes it), past the last port, and 127.0.0.1:0 for an address CheckAddr
// refuses.
func OtherAddr(addr string) string {
	if CheckAddr(addr) != nil {
		return "127.0.0.1:0"
	}
	host, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	if n == 0 || n >= 65535 {
		return net.JoinHostPort(host, "0")
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1))
}

// Start installs moto if needed, starts it and waits until it answers.
func Start(ctx context.Context, opts Options) (*Server, error) {
	return startWrapped(ctx, opts, nil)
}

// startWrapped is Start with wrap (when not nil) around the serializer's
// handler, for StartCounting.
func startWrapped(ctx context.Context, opts Options, wrap func(http.Handler) http.Handler) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if err := CheckAddr(opts.Addr); err != nil {
		return nil, fmt.Errorf("standin: address %w", err)
	}
	host, port, _ := net.SplitHostPort(opts.Addr)
	if port != "0" {
		// Whatever listens at Addr is asked as AWS, patiently: moto is
		// never started on a port that is in use.
		found, err := Probe(ctx, opts.Addr, opts.Patience, opts.Progress)
		if err != nil {
			return nil, err
		}
		if found.Listening() {
			if opts.Reuse {
				return &Server{endpoint: "http://" + opts.Addr, reused: true, found: found}, nil
			}
			return nil, fmt.Errorf("standin: %s is already in use (%s answers there)", opts.Addr, found.Kind)
		}
	}
	// Clients talk to the serializer on Addr; moto listens on a private port behind it.
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		// Taken between the probe and now, or bound without listening.
		return nil, fmt.Errorf("standin: %s is in use (listen: %w): stop what holds it, or pick a free address (TRIBUTARY_STANDIN_ADDR=%s, or -addr)", opts.Addr, err, OtherAddr(opts.Addr))
	}
	bin, err := Install(ctx, opts.VenvDir, opts.Log)
	if err != nil {
		ln.Close()
		return nil, err
	}
	launcher, err := writeLauncher(filepath.Dir(filepath.Dir(bin)))
	if err != nil {
		ln.Close()
		return nil, err
	}
	out := opts.Log
	if out == nil {
		out = io.Discard
	}
	s, backend, err := launchMotoRetrying(ctx, bin, launcher, out, "http://"+ln.Addr().String())
	if err != nil {
		ln.Close()
		return nil, err
	}
	if s.front, err = serve(ln, backend, opts.Owner, wrap); err != nil {
		ln.Close()
		_ = s.Stop()
		return nil, err
	}
	go func(front *http.Server) {
		<-s.exited
		if !s.stopping.Load() {
			_ = front.Close()
		}
	}(s.front)
	return s, nil
}

// motoAttempts is how many times Start launches moto when it exits before
// answering (an import that failed under a loaded machine's memory, say).
const motoAttempts = 3

// motoPatience is how long a launched moto has to answer its first request
// (a few seconds when the machine is idle; a loaded one takes longer).
const motoPatience = 2 * time.Minute

var errMotoExited = errors.New("moto exited before answering")

// launchMoto starts moto on a private port of its own choosing (-p 0: the
// kernel's, so no other process can take it between a choice and the bind)
// and waits until it says which and answers there; endpoint is the address
// clients will use (the serializer's).
func launchMoto(ctx context.Context, bin, launcher string, out io.Writer, endpoint string) (*Server, string, error) {
	tail := &lastBytes{max: 2048}
	port := &portWatch{port: make(chan string, 1)}
	output := io.MultiWriter(out, tail, port)
	s := &Server{endpoint: endpoint, done: make(chan error, 1), exited: make(chan struct{}), tail: tail}
	python := filepath.Join(filepath.Dir(bin), "python3")
	forked := false
	if sock := zygoteSocket(launcher); sock != "" {
		err := s.forkFromZygote(ctx, python, launcher, sock, output)
		if err == nil {
			forked = true
		} else {
			fmt.Fprintf(out, "standin: %v; starting moto on its own\n", err)
		}
	}
	if !forked {
		if err := s.startProcess(python, launcher, output); err != nil {
			return nil, "", err
		}
	}
	deadline := time.After(motoPatience)
	backend := ""
	for backend == "" || !Answers(ctx, backend) {
		select {
		case p := <-port.port:
			backend = "http://" + net.JoinHostPort("127.0.0.1", p)
			continue
		case err := <-s.done:
			s.group = 0
			s.letGo()
			return nil, "", fmt.Errorf("standin: %w (%v); its last output: %q", errMotoExited, err, tail.String())
		case <-ctx.Done():
			_ = s.Stop()
			return nil, "", ctx.Err()
		case <-deadline:
			_ = s.Stop()
			return nil, "", fmt.Errorf("standin: moto did not answer within %v; its last output: %q", motoPatience, tail.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return s, backend, nil
}

// startProcess starts moto as a process of its own on a port the kernel
// chooses, its output to output.
func (s *Server) startProcess(python, launcher string, output io.Writer) error {
	cmd := exec.Command(python, launcher, "-H", "127.0.0.1", "-p", "0")
	cmd.Stdout, cmd.Stderr = output, output
	// Own process group so Stop also ends werkzeug's workers.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("standin: start %s: %w", python, err)
	}
	s.pid, s.group = cmd.Process.Pid, cmd.Process.Pid
	go func() { s.ended(cmd.Wait()) }()
	return nil
}

// ended records how moto ended, err nil for exit status 0.
func (s *Server) ended(err error) {
	s.exitErr = err
	close(s.exited)
	s.done <- err
}

// letGo releases what holds a moto that has ended or been stopped.
func (s *Server) letGo() {
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// portWatch finds the port in werkzeug's " * Running on http://127.0.0.1:<port>"
// line and sends it once.
type portWatch struct {
	mu   sync.Mutex
	buf  []byte
	port chan string
	sent bool
}

var runningOn = regexp.MustCompile(`Running on http://127\.0\.0\.1:(\d+)`)

func (w *portWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if m := runningOn.FindSubmatch(w.buf); m != nil {
		w.port <- string(m[1])
		w.sent, w.buf = true, nil
	} else if len(w.buf) > 64<<10 {
		w.buf = w.buf[len(w.buf)-1024:]
	}
	return len(p), nil
}

// launchMotoRetrying is launchMoto, again when moto exits before
// answering, up to motoAttempts times.
func launchMotoRetrying(ctx context.Context, bin, launcher string, out io.Writer, endpoint string) (*Server, string, error) {
	for attempt := 1; ; attempt++ {
		s, backend, err := launchMoto(ctx, bin, launcher, out, endpoint)
		if err == nil || !errors.Is(err, errMotoExited) || attempt == motoAttempts {
			return s, backend, err
		}
	}
}

// lastBytes keeps the last max bytes written to it.
type lastBytes struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (l *lastBytes) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if over := len(l.b) - l.max; over > 0 {
		l.b = append(l.b[:0], l.b[over:]...)
	}
	return len(p), nil
}

func (l *lastBytes) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// Stop ends a stand-in this process started; a reused one is left running.
func (s *Server) Stop() error {
	if s == nil {
		return nil
	}
	s.stopping.Store(true)
	if s.front != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.front.Shutdown(ctx)
		cancel()
		s.front = nil
	}
	if s.group == 0 {
		return nil
	}
	s.signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.signal(syscall.SIGKILL)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			// A zygote that does not say its moto ended: letting go of
			// it ends the wait (and has it end that moto).
			s.letGo()
			<-s.done
		}
	}
	s.group = 0
	s.letGo()
	return nil
}

// signal sends sig to moto's process group, or to moto alone when it has
// no group yet (a forked moto makes its own as it starts).
func (s *Server) signal(sig syscall.Signal) {
	if err := syscall.Kill(-s.group, sig); errors.Is(err, syscall.ESRCH) {
		_ = syscall.Kill(s.group, sig)
	}
}

// Answers reports whether an AWS stand-in (moto or LocalStack) answers at
// endpoint. It asks for moto's dashboard page, which is the same few KB
// whatever the stand-in holds (moto's /moto-api/data.json is its whole
// state: megabytes after a few minutes of make local-up, too slow to be a
// probe), and LocalStack's health check. Nothing listening is known at
// once; a stand-in that accepts the connection gets answerPatience to
// answer, since moto under a running topology on busy cores can take
// seconds (make results said "nothing answers" of a live one).
func Answers(ctx context.Context, endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return false
	}
	c, err := net.DialTimeout("tcp", u.Host, 3*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	ctx, cancel := context.WithTimeout(ctx, answerPatience)
	defer cancel()
	for _, path := range []string{"/moto-api/", "/_localstack/health"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+path, nil)
		if err != nil {
			return false
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return true
		}
	}
	return false
}

// answerPatience bounds how long Answers waits for a stand-in that
// accepted its connection.
const answerPatience = 30 * time.Second

// FreePort asks the kernel for a free TCP port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("standin: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// motoLauncher runs moto's server with DynamoDB's item size rule as AWS
// applies it (see the file: moto counts a replaced attribute twice and
// binary values as base64).
//
//go:embed moto_aws_sizes.py
var motoLauncher []byte

// writeLauncher writes the launcher into venvDir (once per content) and
// returns its path.
func writeLauncher(venvDir string) (string, error) {
	// Named by its content: checkouts sharing one .venv each run their own.
	sum := sha256.Sum256(motoLauncher)
	path := filepath.Join(venvDir, fmt.Sprintf("tributary_moto_%x.py", sum[:6]))
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, motoLauncher) {
		return path, nil
	}
	tmp, err := os.CreateTemp(venvDir, ".launcher-*")
	if err != nil {
		return "", fmt.Errorf("standin: writing the moto launcher: %w", err)
	}
	if _, err := tmp.Write(motoLauncher); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", fmt.Errorf("standin: writing the moto launcher: %w", err)
	}
	tmp.Close()
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("standin: writing the moto launcher: %w", err)
	}
	return path, nil
}

// Install makes sure moto_server is in venvDir (default <repo>/.venv) and
// returns its path. It holds a file lock so parallel test binaries install once.
func Install(ctx context.Context, venvDir string, log io.Writer) (string, error) {
	if venvDir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		venvDir = filepath.Join(root, ".venv")
	}
	bin := filepath.Join(venvDir, "bin", "moto_server")
	marker := filepath.Join(venvDir, ".moto-"+MotoVersion)
	if fileExists(bin) && fileExists(marker) {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(venvDir), 0o755); err != nil {
		return "", fmt.Errorf("standin: %w", err)
	}
	lock, err := os.OpenFile(venvDir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("standin: lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("standin: lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if fileExists(bin) && fileExists(marker) {
		return bin, nil
	}
	if log == nil {
		log = io.Discard
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		return "", fmt.Errorf("standin: python3 not found on PATH: install Python 3 to run the local AWS stand-in (moto): %w", err)
	}
	steps := [][]string{
		{python, "-m", "venv", venvDir},
		{filepath.Join(venvDir, "bin", "pip"), "install", "--disable-pip-version-check", "-q", "moto[server]==" + MotoVersion},
	}
	for _, s := range steps {
		fmt.Fprintf(log, "standin: %v\n", s)
		cmd := exec.CommandContext(ctx, s[0], s[1:]...)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("standin: installing moto (%v): %w", s, err)
		}
	}
	if err := os.WriteFile(marker, []byte(MotoVersion+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("standin: %w", err)
	}
	return bin, nil
}

// RepoRoot walks up from the working directory to the directory whose go.mod
// declares the tributary module.
func RepoRoot() (string, error) {
	if r := os.Getenv("TRIBUTARY_ROOT"); r != "" {
		return r, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && containsModule(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("standin: repository root not found (no go.mod for github.com/tributary-dev/tributary above the working directory); set TRIBUTARY_ROOT")
		}
		dir = parent
	}
}

func containsModule(gomod []byte) bool {
	const want = "module github.com/tributary-dev/tributary\n"
	return len(gomod) >= len(want) && string(gomod[:len(want)]) == want
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// truncatedAnswer retries a call whose answer was cut short on its way
// from moto (the serializer's proxy lost its connection to moto mid-body,
// seen once under a loaded make test: "deserialization failed, unexpected
// EOF" on a Query of 1 MB). That is the stand-in's transport failing, not
// what any test is about; DynamoDB's own answers arrive whole or not at
// all, and the SDK retries a connection that breaks before an answer.
var truncatedAnswer = retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return aws.TrueTernary
	}
	return aws.UnknownTernary
})

// Config is an aws.Config for the stand-in at endpoint: static test
// credentials, region us-east-1, every service pointed at endpoint.
func Config(ctx context.Context, endpoint string) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion(Region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithBaseEndpoint(endpoint),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 3
				o.Retryables = append(o.Retryables, truncatedAnswer)
			})
		}),
	)
	if err != nil {
		return aws.Config{}, fmt.Errorf("standin: aws config for %s: %w", endpoint, err)
	}
	return cfg, nil
}
