package standin_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

func TestStartAnswersAndStops(t *testing.T) {
	srv := standintest.Start(t)
	ctx := context.Background()
	if !standin.Answers(ctx, srv.Endpoint()) {
		t.Fatalf("stand-in at %s does not answer", srv.Endpoint())
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if standin.Answers(ctx, srv.Endpoint()) {
		t.Fatalf("stand-in at %s still answers after Stop", srv.Endpoint())
	}
}

func TestStartRefusesTakenPortUnlessReuse(t *testing.T) {
	srv := standintest.Start(t)
	addr := srv.Endpoint()[len("http://"):]
	if _, err := standin.Start(context.Background(), standin.Options{Addr: addr}); err == nil {
		t.Fatalf("Start on taken %s without Reuse: want error", addr)
	}
	again, err := standin.Start(context.Background(), standin.Options{Addr: addr, Reuse: true})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reused() || again.Endpoint() != srv.Endpoint() {
		t.Fatalf("Reuse: got %s reused=%v, want %s reused", again.Endpoint(), again.Reused(), srv.Endpoint())
	}
}

func TestStartRefusesNonLoopback(t *testing.T) {
	if _, err := standin.Start(context.Background(), standin.Options{Addr: "0.0.0.0:4566"}); err == nil {
		t.Fatal("want error for non-loopback address")
	}
}

// TestAnswersWaitsForABusyStandIn: moto under a running topology on busy
// cores can take seconds to answer; one that accepts the connection and
// answers late still answers (make results and make logs said "nothing
// answers" of a live make local-up), and a port nothing listens on does
// not.
func TestAnswersWaitsForABusyStandIn(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(4 * time.Second) // longer than the probe used to wait
		if r.URL.Path != "/moto-api/" {
			http.NotFound(w, r)
		}
	}))
	defer slow.Close()
	if !standin.Answers(context.Background(), slow.URL) {
		t.Errorf("a stand-in answering after 4 s does not answer")
	}
	free, err := standin.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if standin.Answers(context.Background(), fmt.Sprintf("http://127.0.0.1:%d", free)) {
		t.Errorf("a port nothing listens on answers")
	}
}

// An address with no port, or a port past 65535, is refused as what it is:
// "127.0.0.1:" used to start moto on any free port, and 127.0.0.1:99999 was
// reported as in use.
func TestStartRefusesAnAddressThatIsNoPort(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:http", "bogus"} {
		_, err := standin.Start(context.Background(), standin.Options{Addr: addr})
		if err == nil || strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), "1 to 65535") {
			t.Errorf("Start at %q: %v, want it refused as no address the stand-in can be on", addr, err)
		}
	}
}

// TestMotoThatEndsTakesItsEndpointDown: a moto that ends on its own (killed,
// crashed) leaves nothing listening at the stand-in's address, so a run
// watching it (make local-up) and clients see it gone rather than an error
// page for every request, and the Server says how moto ended; whether it
// was started on its own or forked from the zygote.
func TestMotoThatEndsTakesItsEndpointDown(t *testing.T) {
	for _, mode := range []struct{ name, zygote string }{
		{"started on its own", ""},
		{"forked from the zygote", filepath.Join(t.TempDir(), "z")},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Setenv(standin.ZygoteEnv, mode.zygote)
			srv := startEnding(t)
			if srv.ExitReason() != "" {
				t.Fatalf("ExitReason of a running moto: %q, want empty", srv.ExitReason())
			}
			if err := standin.KillMoto(srv); err != nil {
				t.Fatal(err)
			}
			select {
			case <-srv.Exited():
			case <-time.After(30 * time.Second):
				t.Fatal("Exited not closed 30 s after moto was killed")
			}
			if r := srv.ExitReason(); !strings.Contains(r, "moto (pid") || !strings.Contains(r, "killed") {
				t.Errorf("ExitReason %q, want moto's pid and how it ended", r)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				c, err := net.DialTimeout("tcp", strings.TrimPrefix(srv.Endpoint(), "http://"), time.Second)
				if err != nil {
					break
				}
				c.Close()
				if time.Now().After(deadline) {
					t.Fatalf("%s still accepts connections 10 s after its moto ended", srv.Endpoint())
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestZygoteForksStandInsThatShareNothing: with the zygote (make test's
// way), stand-ins are forked from one process that did moto's start-up
// work once, each its own moto: a table one creates is not in another's,
// Stop ends only its own, and the zygote, with any moto it still has, ends
// once its socket is removed (as make test does when its run ends).
func TestZygoteForksStandInsThatShareNothing(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "z")
	t.Setenv(standin.ZygoteEnv, prefix)
	ctx := context.Background()
	a, b, c := startEnding(t), startEnding(t), startEnding(t)
	zygote := parentOf(t, a.PID())
	if zygote == os.Getpid() || parentOf(t, b.PID()) != zygote {
		t.Fatalf("stand-ins' parents: %d and %d (this test: %d), want one zygote", zygote, parentOf(t, b.PID()), os.Getpid())
	}
	// It serves every test process of a run, so it must outlive the
	// process group of the one that started it (a test ending a command
	// it ran ends that command's group: make test's stand-ins all ended).
	if group := statField(t, zygote, 2); group != zygote {
		t.Errorf("zygote %d is in process group %d, want one of its own", zygote, group)
	}
	if _, err := dynamodb.NewFromConfig(standintest.Config(t, a)).CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("only-in-a"),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: types.ScalarAttributeTypeS}},
	}); err != nil {
		t.Fatal(err)
	}
	for srv, want := range map[*standin.Server][]string{a: {"only-in-a"}, b: nil} {
		out, err := dynamodb.NewFromConfig(standintest.Config(t, srv)).ListTables(ctx, &dynamodb.ListTablesInput{})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(out.TableNames) != fmt.Sprint(want) {
			t.Errorf("tables at %s: %v, want %v", srv.Endpoint(), out.TableNames, want)
		}
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if standin.Answers(ctx, a.Endpoint()) || !standin.Answers(ctx, b.Endpoint()) {
		t.Fatalf("after stopping %s: it answers %v, %s answers %v; want only the second",
			a.Endpoint(), standin.Answers(ctx, a.Endpoint()), b.Endpoint(), standin.Answers(ctx, b.Endpoint()))
	}
	socks, _ := filepath.Glob(prefix + ".*.sock")
	if len(socks) != 1 {
		t.Fatalf("zygote sockets %v, want one", socks)
	}
	if err := os.Remove(socks[0]); err != nil {
		t.Fatal(err)
	}
	for _, srv := range []*standin.Server{b, c} {
		select {
		case <-srv.Exited():
		case <-time.After(15 * time.Second):
			t.Fatalf("moto at %s still runs 15 s after its zygote's socket was removed", srv.Endpoint())
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for processRuns(zygote) {
		if time.Now().After(deadline) {
			t.Fatalf("zygote %d still runs 15 s after its socket was removed", zygote)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startEnding starts a stand-in for a test that ends it other than by
// Stop (standintest.Start fails a test whose stand-in ends so).
func startEnding(t *testing.T) *standin.Server {
	t.Helper()
	srv, err := standin.Start(context.Background(), standin.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// parentOf is pid's parent process id, from /proc.
func parentOf(t *testing.T, pid int) int { return statField(t, pid, 1) }

// statField is the nth number after the command in /proc/<pid>/stat (1:
// the parent's id, 2: the process group).
func statField(t *testing.T, pid, n int) int {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	v, err := strconv.Atoi(fields[n])
	if err != nil {
		t.Fatalf("/proc/%d/stat: %v", pid, err)
	}
	return v
}

// processRuns is whether pid is a live process (not gone, not a zombie).
func processRuns(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
