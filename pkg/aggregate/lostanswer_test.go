package aggregate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// resetOnce is an HTTP transport that lets the first request whose body
// match picks reach the stand-in and then loses its answer, as a
// connection reset after DynamoDB applied the write does: the SDK sends
// the same request again, which meets the item as the first changed it.
type resetOnce struct {
	match   func(body []byte) bool
	between func() // runs after the write applied, before the SDK sends it again
	mu      sync.Mutex
	reset   int
}

func (r *resetOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reset == 0 && r.match(body) && resp.StatusCode == http.StatusOK {
		r.reset++
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if r.between != nil {
			r.between()
		}
		return nil, errors.New("read tcp 127.0.0.1:50000->127.0.0.1:4566: read: connection reset by peer")
	}
	return resp, nil
}

// lostRig runs a pipeline whose views go through transport (its answers
// lost as transport says), a feed on one shard, and other, the same table
// through a client whose answers are not lost (another shard's writer).
type lostRig struct {
	f      *feed
	out    *outputLog
	logs   lockedBuffer
	other  *state.Views
	base   time.Time
	window window.Window // [0s,1m)
}

func newLostRig(t *testing.T, transport *resetOnce, path, cfg string) *lostRig {
	client := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: transport} })
	r := &lostRig{base: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)}
	r.window = window.Of(r.base.UnixMilli(), r.base.Add(time.Minute).UnixMilli())
	clock := r.base
	now := func() time.Time { return clock }
	p, out := pipelineOn(t, cfg, func(cfg *pipeline.Config, table string) *state.Views {
		r.other = state.NewViews(db, table, cfg.Aggregates, state.WithClock(now))
		return state.NewViews(client, table, cfg.Aggregates, state.WithClock(now))
	}, aggregate.WithClock(now), aggregate.WithLogger(slog.New(slog.NewJSONHandler(&r.logs, nil))))
	r.out, r.f = out, &feed{t: t, p: p, base: r.base, path: path, clock: &clock}
	return r
}

// linesOf is how many times key's results were logged, by id, and what
// their countDelta sums to.
func (r *lostRig) linesOf(t *testing.T, key string) (ids map[string]int, countDelta float64) {
	ids = map[string]int{}
	for _, l := range r.logs.resultLines(t) {
		if l["key"] == key {
			ids[l["id"].(string)]++
			countDelta += l["countDelta"].(float64)
		}
	}
	return ids, countDelta
}

const lostConfig = `{"name":"lost","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s",%s}`

// lostR1 is key a's [0s,1m) result at revision 1.
const lostR1 = "lost/a/tumbling:1m0s/2026-12-07T10:00:00.000Z/2026-12-07T10:01:00.000Z/r1"

// freshCreate and unlistRequest pick the requests of the two writes that
// log a result: a window created already published, and a listed one
// taken off its listing (REMOVE openIn, openUntil, previous, if listed).
func freshCreate(b []byte) bool {
	return bytes.Contains(b, []byte(`"fresh"`)) && bytes.Contains(b, []byte("attribute_not_exists"))
}

func unlistRequest(b []byte) bool {
	return bytes.Contains(b, []byte("REMOVE")) && bytes.Contains(b, []byte(`"openUntil"`)) && bytes.Contains(b, []byte("attribute_exists"))
}

// A result is logged by the write that creates its window already
// published (a window the carry held to its close) or by the one that
// unlists it once it is on the stream (a window listed: no carry). When
// that write's answer was lost and the SDK sent it again, the second
// attempt met the item the first had changed, took it for another
// writer's, and the line was never logged (the stream had the result).
// Each write now knows its own change by a number it wrote in the item.
func TestAResultWhoseWriteAnswerWasLostIsLoggedOnce(t *testing.T) {
	for _, tt := range []struct {
		name  string
		carry bool
		path  string
		match func(body []byte) bool
	}{
		{"the fresh create", true, perInterval, freshCreate},
		{"the unlist", false, perBatch, unlistRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			transport := &resetOnce{match: tt.match}
			r := newLostRig(t, transport, tt.path, fmt.Sprintf(lostConfig, fmt.Sprintf(`"latePolicy":"drop","partitionKeyIsGroupingKey":%t`, tt.carry)))
			r.f.batch(at{"a", 10, 1}, at{"a", 20, 2})
			r.f.batch(at{"b", 130, 4}) // the watermark closes [0s,1m)
			if transport.reset != 1 {
				t.Fatalf("%d answers lost, want one of %s", transport.reset, tt.name)
			}
			if got := strings.Join(r.out.of("a", r.base), "\n"); got != "final [0s,1m0s) r1 count 2 sum 3" {
				t.Errorf("on the stream:\n%s", got)
			}
			if ids, _ := r.linesOf(t, "a"); len(ids) != 1 || ids[lostR1] != 1 {
				t.Errorf("key a's result lines %v, want %s once", ids, lostR1)
			}
		})
	}
}

// An unlist whose answer was lost, and a correction from another shard's
// writer (a late record) landing in the SDK's backoff before it sends the
// unlist again: the retry meets the window listed again at revision 2 and
// is refused, with this unlist's number still in the item. It applied (at
// revision 1), so it logs revision 1's line; before, only revision 2 was
// logged and the key's countDelta summed to 1 of its 3 records (found by
// review).
func TestAnUnlistWhoseAnswerWasLostLogsItsRevisionWhenACorrectionCameFirst(t *testing.T) {
	transport := &resetOnce{match: unlistRequest}
	r := newLostRig(t, transport, perBatch, fmt.Sprintf(lostConfig, `"latePolicy":"correct","allowedLateness":"10m"`))
	transport.between = func() {
		ctx, openIn := context.Background(), "lost#"+feedShard
		res, err := r.other.Apply(ctx, "shardId-000000000009", &state.Update{Pipeline: "lost", Key: "a", Kind: "tumbling:1m0s", Window: r.window,
			OpenIn: openIn, Entries: []state.Entry{{Seq: "900", Value: 100}}, CorrectIfFinal: true})
		if err != nil || res.Outcome != state.Corrected {
			t.Errorf("the correction: %v %v", res.Outcome, err)
		}
		if _, err := r.other.ListWindow(ctx, openIn, "tumbling:1m0s", r.window, []string{"a"}); err != nil {
			t.Errorf("listing the correction: %v", err)
		}
	}
	r.f.batch(at{"a", 10, 1}, at{"a", 20, 2})
	r.f.batch(at{"b", 130, 4}) // the watermark closes [0s,1m): published, its unlist's answer lost
	if transport.reset != 1 {
		t.Fatalf("%d answers lost, want the unlist's", transport.reset)
	}
	r.f.tick(10 * time.Minute) // publishes the correction
	if ids, sum := r.linesOf(t, "a"); ids[lostR1] != 1 || sum != 3 {
		t.Errorf("key a's lines %v, countDelta summing to %v; want revision 1 once and 3, its records (on the stream:\n%s)",
			ids, sum, strings.Join(r.out.of("a", r.base), "\n"))
	}
}
