package standintest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/tributary-dev/tributary/emulator/standin"
)

// Start starts moto for t (installing it into <repo>/.venv on first use) and
// stops it in t.Cleanup. It skips t, saying why, only when Python 3 is not
// installed, so the stand-in cannot be installed at all; any other failure fails t.
func Start(t testing.TB) *standin.Server {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("standintest: python3 is not installed, so the moto stand-in cannot be installed; install Python 3 to run this test")
	}
	var log = os.Stderr
	if os.Getenv("STANDIN_LOG") == "" {
		log = nil
	}
	opts := standin.Options{Addr: "127.0.0.1:0", Owner: standin.Owner{Command: "go test", PID: os.Getpid(), StopsWithRun: true}}
	if log != nil {
		opts.Log = log
	}
	srv, err := standin.Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("standintest: %v", err)
	}
	watchForAnEnd(srv, func(reason string) {
		t.Errorf("standintest: the stand-in at %s ended during the test: %s", srv.Endpoint(), reason)
	})
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// watchForAnEnd calls ended with the stand-in's exit reason if it ends
// without being stopped, so that a test whose stand-in died says so,
// rather than only that nothing answers.
func watchForAnEnd(srv *standin.Server, ended func(reason string)) {
	go func() {
		<-srv.Exited()
		if !srv.Stopped() {
			ended(srv.ExitReason())
		}
	}()
}

// Config returns an aws.Config pointed at srv.
func Config(t testing.TB, srv *standin.Server) aws.Config {
	t.Helper()
	cfg, err := standin.Config(context.Background(), srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Main runs a package's tests against one stand-in shared by all of them:
// call it from TestMain as os.Exit(standintest.Main(m, setup)). setup gets an
// aws.Config pointed at it before any test runs. Without Python 3 it fails
// the package, saying why.
func Main(m *testing.M, setup func(aws.Config)) int {
	if _, err := exec.LookPath("python3"); err != nil {
		fmt.Fprintln(os.Stderr, "standintest: python3 is not installed, so the moto stand-in cannot be installed; install Python 3")
		return 1
	}
	ctx := context.Background()
	srv, err := standin.Start(ctx, standin.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "standintest: %v\n", err)
		return 1
	}
	// Every test of the package uses this one: once it has ended, the
	// rest can only fail slowly, each retrying a refused connection.
	watchForAnEnd(srv, func(reason string) {
		fmt.Fprintf(os.Stderr, "standintest: the stand-in every test of this package uses ended: %s\n", reason)
		os.Exit(1)
	})
	defer srv.Stop()
	cfg, err := standin.Config(ctx, srv.Endpoint())
	if err != nil {
		fmt.Fprintf(os.Stderr, "standintest: %v\n", err)
		return 1
	}
	setup(cfg)
	return m.Run()
}

// Parallel lets up to n of a package's parallel tests run at once (go
// test's -parallel, which defaults to GOMAXPROCS) unless the command line
// sets -parallel: for a package whose parallel tests spend most of their
// time waiting on a stand-in or on processes they started, not on this
// process's CPU. Call it from TestMain after flag.Parse.
func Parallel(n int) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && n > 0 {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
