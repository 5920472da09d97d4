package standintest_test

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// errorsOf is a testing.TB that keeps what Errorf is given.
type errorsOf struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (e *errorsOf) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func (e *errorsOf) said() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.errs, "\n")
}

// TestStartFailsATestWhoseStandInEnds: a stand-in that ends during a test
// (killed, crashed, its zygote gone) fails the test saying how it ended,
// rather than leaving the test to report refused connections; one its test
// stops does not.
func TestStartFailsATestWhoseStandInEnds(t *testing.T) {
	for _, zygote := range []string{"", t.TempDir() + "/z"} {
		t.Setenv(standin.ZygoteEnv, zygote)
		stopped := &errorsOf{TB: t}
		srv := standintest.Start(stopped)
		if err := srv.Stop(); err != nil {
			t.Fatal(err)
		}
		killed := &errorsOf{TB: t}
		srv = standintest.Start(killed)
		if err := syscall.Kill(srv.PID(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-srv.Exited()
		deadline := time.Now().Add(5 * time.Second)
		for killed.said() == "" && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := killed.said(); !strings.Contains(got, "ended during the test") || !strings.Contains(got, "killed") {
			t.Errorf("zygote %q: a killed stand-in's test was told %q, want that it ended and how", zygote, got)
		}
		time.Sleep(100 * time.Millisecond)
		if got := stopped.said(); got != "" {
			t.Errorf("zygote %q: a stopped stand-in's test was told %q, want nothing", zygote, got)
		}
	}
}
