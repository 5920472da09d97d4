package local_test

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// e2eParallel is how many end-to-end tests run at once. Each runs a
// topology of its own (its own moto, every function under aws-lambda-rie),
// so they share nothing; they spend most of their time waiting on those
// processes, not on this one's CPU, so more of them than GOMAXPROCS (go
// test's default -parallel) fit on two cores. go test -parallel overrides it.
const e2eParallel = 4

// e2eWait bounds how long an end-to-end test waits for its topology's
// results: long enough for e2eParallel topologies on two cores that the
// rest of make test keeps busy too (the tasks test took 268 s of a clean-clone
// CI run at load 13). It catches a hang; it measures nothing.
const e2eWait = 8 * time.Minute

func TestMain(m *testing.M) {
	flag.Parse()
	standintest.Parallel(e2eParallel)
	os.Exit(m.Run())
}
