package eventsource_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/eventsource"
)

// readCounter counts the GetRecords requests a client sends.
type readCounter struct {
	next  http.RoundTripper
	reads atomic.Int64
}

func (c *readCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("X-Amz-Target") == "Kinesis_20131202.GetRecords" {
		c.reads.Add(1)
	}
	return c.next.RoundTrip(r)
}

// A shard that keeps returning nothing is read about once a second, as
// Lambda reads it, not ten times (every read is a request the one stand-in
// serves in turn); a record put after a quiet spell is still delivered.
func TestIdleShardIsReadOnceASecond(t *testing.T) {
	needStandin(t)
	t.Parallel()
	stream := uniqueName(t, "")
	arn := createStream(t, stream, 1)
	fn, log := startFunction(t, "", nil)
	counter := &readCounter{next: http.DefaultTransport}
	cfg := awsCfg.Copy()
	cfg.HTTPClient = &http.Client{Transport: counter}
	p, err := eventsource.NewKinesis(cfg, eventsource.Settings{
		FunctionName: "idle", SourceARN: arn, BatchSize: 10, StartingPosition: eventsource.TrimHorizon, Enabled: true,
	}, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)
	counter.reads.Store(0)
	time.Sleep(5 * time.Second)
	if n := counter.reads.Load(); n > 12 {
		t.Errorf("an empty shard was read %d times in 5 s, want about once a second", n)
	}
	putRecords(t, stream, "k", `{"n":1}`)
	waitIdle(t, p, 20*time.Second)
	if n := len(log.invocations()); n != 1 {
		t.Fatalf("%d invocations after a record put on the idle shard, want 1", n)
	}
}
