package aggregate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/backlog"
)

// After a reshard the parent is idle for good: its keys' records go to the
// child. The ticker advanced the parent by the clock (now − idleTimeout −
// outOfOrderness), so with producers whose events reach the stream a
// minute after they happen (clients that send in batches) it made the
// parent's windows final while the child, its own watermark a minute
// behind the clock, was still receiving on-time records of them: dropped
// under latePolicy drop, a final result and then a correction under
// correct, where one shard never resharded gives one final result with
// every record. A closed parent now goes no further than its children's
// stored watermarks.
func TestAClosedParentWaitsForItsChildrensWatermark(t *testing.T) {
	for _, policy := range []string{"drop", "correct"} {
		t.Run(policy, func(t *testing.T) {
			late := `"latePolicy":"drop"`
			if policy == "correct" {
				late = `"latePolicy":"correct","allowedLateness":"10m"`
			}
			cfg := fmt.Sprintf(`{"name":"lagged","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
			  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s",%s}`, late)
			run := func(parent, child string) string {
				ctx := context.Background()
				base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
				now := base
				clock := func() time.Time { return now }
				shards := &resharded{next: map[string]backlog.Next{}}
				if parent != child {
					shards.next[parent] = backlog.Next{Children: []string{child}}
				}
				p, out := pipelineOn(t, cfg, viewsAt(clock), aggregate.WithClock(clock), aggregate.WithBacklog(shards))
				// deliver sends a record that happened at event (seconds
				// after base) and is processed at the clock's at.
				deliver := func(shard string, seq, event, at int) {
					t.Helper()
					now = base.Add(time.Duration(at) * time.Second)
					ev := kinesisEvent([]record{{shard: shard, seq: seq, env: envelopeAt(seq, "a", base.Add(time.Duration(event)*time.Second), 1)}})
					if resp, err := p.HandleBatch(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
						t.Fatalf("batch on %s: %v %v", shard, resp, err)
					}
				}
				tick := func(at int) {
					t.Helper()
					now = base.Add(time.Duration(at) * time.Second)
					if _, err := p.Tick(ctx, now); err != nil {
						t.Fatal(err)
					}
				}
				deliver(parent, 1, 10, 12)
				tick(20)
				deliver(child, 2, 15, 70) // a minute behind from here on
				tick(100)                 // the parent idle since 20 s: the clock says 65 s
				deliver(child, 3, 50, 110)
				for _, at := range []int{150, 200, 260, 320} {
					tick(at)
				}
				return strings.Join(out.of("a", base), "\n")
			}
			want := run("shardId-000000000000", "shardId-000000000000")
			if want != "final [0s,1m0s) r1 count 3 sum 3" {
				t.Fatalf("on one shard the results of key a are:\n%s\nwant one final result with its 3 records", want)
			}
			if got := run("shardId-000000000000", "shardId-000000000001"); got != want {
				t.Errorf("resharded, the results of key a:\n%s\nwant, as on one shard:\n%s", got, want)
			}
		})
	}
}
