package eventsource_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/eventsource"
)

func TestTumblingWindowCarriesStateToTheFinalInvoke(t *testing.T) {
	needStandin(t)
	t.Parallel()
	stream := uniqueName(t, "")
	arn := createStream(t, stream, 1)
	fn, log := startFunction(t, "", nil)
	putRecords(t, stream, "k", `{"n":0}`, `{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`)
	p, err := eventsource.NewKinesis(awsCfg, eventsource.Settings{FunctionName: "faulty", SourceARN: arn, BatchSize: 2,
		TumblingWindow: time.Second, Enabled: true}, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)

	// Per window: aggregation invokes see the count so far; the final one
	// sees the window's total and carries no records.
	seen, finals, total := 0, 0, 0
	var window string
	for _, inv := range log.invocations() {
		if inv.Window == nil {
			t.Fatalf("invocation without window: %+v", inv)
		}
		if inv.Window.Start != window {
			if seen != 0 {
				t.Errorf("window %s ended without a final invoke", window)
			}
			window, seen = inv.Window.Start, 0
		}
		count, _ := strconv.Atoi(inv.State["count"])
		if count != seen {
			t.Errorf("window %s: state count %d, want %d records seen so far", window, count, seen)
		}
		if inv.Final {
			if inv.Size != 0 {
				t.Errorf("final invoke carried %d records", inv.Size)
			}
			finals++
			total += count
			seen = 0
			window = ""
			continue
		}
		if inv.Size > 2 {
			t.Errorf("batch of %d, want at most BatchSize 2", inv.Size)
		}
		seen += inv.Size
	}
	if total != 5 || finals == 0 {
		t.Errorf("final invokes saw %d records in %d windows, want all 5", total, finals)
	}
}

func TestTumblingWindowTerminatesEarlyOverOneMegabyte(t *testing.T) {
	needStandin(t)
	t.Parallel()
	stream := uniqueName(t, "")
	arn := createStream(t, stream, 1)
	fn, log := startFunction(t, "", map[string]string{"FAULT_STATE_PAD": strconv.Itoa(1100 * 1024)})
	putRecords(t, stream, "k", `{"n":0}`)
	p, err := eventsource.NewKinesis(awsCfg, eventsource.Settings{FunctionName: "faulty", SourceARN: arn, TumblingWindow: 30 * time.Second, Enabled: true}, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, inv := range log.invocations() {
			if inv.Final && inv.TerminatedEarly {
				if inv.State["count"] != "1" {
					t.Errorf("early final invoke state = %v, want the state that grew too big", inv.State)
				}
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no final invoke with isWindowTerminatedEarly; invocations %+v", log.invocations())
}
