package standin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ZygoteEnv names the variable that lets a stand-in start warm. Each moto
// spends about 2 s of CPU importing its server and, on the first request of
// each service, that service's backend and model; make test starts some 45
// of them on 2 cores. With ZygoteEnv set to a path prefix (make test sets
// one per checkout), Start asks a zygote listening at <prefix>.<launcher's
// content hash>.sock for a moto forked from a process that has done that
// work once (moto_aws_sizes.py says how), starting the zygote when none
// answers there. A forked moto is a process of its own, as a started one
// is: nothing it holds is shared. The zygote ends when its socket is
// removed (make test removes it when its run ends) or half a minute
// after its last client has gone. Unset, or when the zygote cannot be reached, each moto
// starts on its own.
const ZygoteEnv = "TRIBUTARY_MOTO_ZYGOTE"

// zygoteSocket is the zygote's socket for launcher, "" when ZygoteEnv is
// not set. The launcher's name carries its content hash, so a zygote of
// other launcher code (an earlier run's, still idling) is never asked.
func zygoteSocket(launcher string) string {
	prefix := os.Getenv(ZygoteEnv)
	if prefix == "" {
		return ""
	}
	name := strings.TrimSuffix(filepath.Base(launcher), ".py")
	return prefix + "." + strings.TrimPrefix(name, "tributary_moto_") + ".sock"
}

// zygoteWait bounds the zygote's answer to a start: a fork takes
// milliseconds, but a loaded machine can hold it up.
const zygoteWait = 30 * time.Second

// forkFromZygote has the zygote at sock fork a moto writing its output to
// output, starting the zygote first if none answers there.
func (s *Server) forkFromZygote(ctx context.Context, python, launcher, sock string, output io.Writer) error {
	conn, err := dialZygote(ctx, python, launcher, sock)
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		conn.Close()
		return fmt.Errorf("moto zygote: %w", err)
	}
	_, _, err = conn.WriteMsgUnix([]byte("start\n"), syscall.UnixRights(int(w.Fd())), nil)
	w.Close()
	if err != nil {
		r.Close()
		conn.Close()
		return fmt.Errorf("moto zygote %s: %w", sock, err)
	}
	replies := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(zygoteWait))
	line, err := replies.ReadString('\n')
	_ = conn.SetReadDeadline(time.Time{})
	pid, perr := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "pid "))
	if err != nil || perr != nil || !strings.HasPrefix(line, "pid ") || pid <= 0 {
		r.Close()
		conn.Close()
		return fmt.Errorf("moto zygote %s answered %q to start (%v)", sock, line, err)
	}
	s.pid, s.group = pid, pid
	s.release = func() { conn.Close() }
	drained := make(chan struct{})
	go func() {
		_, _ = io.Copy(output, r)
		r.Close()
		close(drained)
	}()
	go func() {
		// The zygote says "exit <wait status>" when this moto ends; a
		// zygote that ends first takes its motos with it.
		line, err := replies.ReadString('\n')
		var end error
		if n, perr := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "exit ")); err == nil && perr == nil && strings.HasPrefix(line, "exit ") {
			end = waitStatusError(syscall.WaitStatus(n))
		} else {
			end = fmt.Errorf("the moto zygote it was forked from went away (%v)", err)
		}
		select { // its last output, which the pipe may still hold
		case <-drained:
		case <-time.After(2 * time.Second):
		}
		s.ended(end)
	}()
	return nil
}

// waitStatusError says how a process ended as os/exec's errors do ("exit
// status 1", "signal: killed"); nil for exit status 0.
func waitStatusError(ws syscall.WaitStatus) error {
	switch {
	case ws.Exited() && ws.ExitStatus() == 0:
		return nil
	case ws.Exited():
		return fmt.Errorf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		return fmt.Errorf("signal: %v", ws.Signal())
	}
	return fmt.Errorf("wait status %#x", int(ws))
}

// dialZygote connects to the zygote at sock, starting one when nothing
// listens there. Starters take turns by a lock file beside the socket, so
// the test processes make test runs at once start one zygote between them.
func dialZygote(ctx context.Context, python, launcher, sock string) (*net.UnixConn, error) {
	conn, err := dialUnix(sock)
	if err == nil || !nobodyListens(err) {
		return conn, err
	}
	lock, err := os.OpenFile(sock+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("moto zygote: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("moto zygote: lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if conn, err := dialUnix(sock); err == nil || !nobodyListens(err) {
		return conn, err // another process started it while this one waited
	}
	logPath := sock + ".log"
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("moto zygote: %w", err)
	}
	defer logFile.Close()
	// A process group of its own: whoever started this process may end
	// its group (a test ending a command it ran), and the zygote serves
	// every test process of the run. Its output goes to a file, not to
	// this process's: go test waits for its test binary's output to close.
	cmd := exec.Command(python, launcher, "--zygote", sock)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("moto zygote: start %s: %w", python, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(motoPatience)
	for {
		conn, err := dialUnix(sock)
		if err == nil || !nobodyListens(err) {
			return conn, err
		}
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("moto zygote exited before listening (%v); its output: %q", err, lastWords(string(out)))
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return nil, ctx.Err()
		case <-deadline:
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("moto zygote did not listen at %s within %v", sock, motoPatience)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func dialUnix(sock string) (*net.UnixConn, error) {
	return net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
}

// nobodyListens is whether a dial's error means no zygote is there (no
// socket file, or one nobody listens on), rather than one that is busy.
func nobodyListens(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}
