package aggregate_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// keyedWrites counts the writes to keyed state items (sort key …|~state).
type keyedWrites struct {
	*dynamodb.Client
	mu sync.Mutex
	n  int
}

func (k *keyedWrites) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if sk, ok := in.Key["sk"].(*types.AttributeValueMemberS); ok && strings.HasSuffix(sk.Value, "|~state") {
		k.mu.Lock()
		k.n++
		k.mu.Unlock()
	}
	return k.Client.UpdateItem(ctx, in, opts...)
}

func (k *keyedWrites) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n
}

// On the per-interval path a session or sliding window's records ride in
// Lambda's window state to the flush, which folds each key's into its
// keyed state once: the invocations before it write no keyed state (they
// wrote one per key they met), and the windows come out as they did.
func TestIntervalFoldsKeyedStateAtTheFlush(t *testing.T) {
	for _, tt := range []struct {
		window string
		want   string
	}{
		{`{"kind":"session","gap":"20s"}`, "final [0s,50s) r1 count 4 sum 10"},
		{`{"kind":"sliding","difference":"15s"}`, "final [-15s,1ms) r1 count 1 sum 1\nfinal [-5s,10.001s) r1 count 2 sum 3\n" +
			"final [1ms,15.002s) r1 count 1 sum 2\nfinal [5s,20.001s) r1 count 2 sum 5\nfinal [10.001s,25.002s) r1 count 1 sum 3\n" +
			"final [15s,30.001s) r1 count 2 sum 7\nfinal [20.001s,35.002s) r1 count 1 sum 4"},
	} {
		t.Run(tt.window, func(t *testing.T) {
			// outOfOrderness 1m: nothing is final at the first flush, so
			// its only keyed write is the fold.
			kw := &keyedWrites{Client: db}
			p, out := pipelineOn(t, `{"name":"kc","key":"key","value":"data.v","windows":[`+tt.window+`],
			  "aggregates":["count","sum"],"outOfOrderness":"1m","latePolicy":"drop","partitionKeyIsGroupingKey":true}`,
				func(cfg *pipeline.Config, table string) *state.Views {
					return state.NewViews(kw, table, cfg.Aggregates)
				})
			r := &feed{t: t, p: p, base: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
			for i, s := range []float64{0, 10, 20, 30} {
				r.carry(at{"a", s, i + 1})
			}
			if n := kw.count(); n != 0 {
				t.Errorf("4 invocations before the flush wrote the keyed state %d times, want 0 (carried to the flush)", n)
			}
			r.flush()
			if n := kw.count(); n != 1 {
				t.Errorf("the flush wrote the keyed state %d times, want 1 (one fold of 4 records)", n)
			}
			r.carry(at{"z", 1000, 0})
			r.flush()
			if got := strings.Join(out.of("a", r.base), "\n"); got != tt.want {
				t.Errorf("results of key a:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// Carried points have a budget in Lambda's 1 MB window state: past it an
// invocation writes them as overflow items, and the state it returns
// carries none, only the items' names.
func TestIntervalCarriesKeyedPointsWithinABudget(t *testing.T) {
	p, _ := pipelineOn(t, `{"name":"kb","key":"key","value":"data.v","windows":[{"kind":"session","gap":"20s"}],
	  "aggregates":["count","sum"],"outOfOrderness":"5s","latePolicy":"drop","partitionKeyIsGroupingKey":true}`, inProcessViews)
	r := &feed{t: t, p: p, base: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	batch := func(keys int) []at {
		recs := make([]at, keys)
		for i := range recs {
			recs[i] = at{fmt.Sprintf("%0200d", i), float64(i % 30), 1}
		}
		return recs
	}
	carriedBytes := func() (n int) {
		for k, v := range r.state {
			if strings.HasPrefix(k, "c|") && k != "c|~ovf" { // carried points (stateCarried, stateCarriedAll), not overflow names
				n += len(k) + len(v)
			}
		}
		return n
	}
	r.carry(batch(100)...)
	if n := carriedBytes(); n == 0 {
		t.Fatal("100 records of a session pipeline: nothing carried to the flush")
	}
	r.carry(batch(3000)...) // 3,100 points of 200-byte keys: past half of 1 MB
	if n := carriedBytes(); n != 0 {
		t.Errorf("past the budget the state still carries %d bytes of points", n)
	}
	if r.state["c|~ovf"] == "" {
		t.Error("past the budget the state names no overflow item: the points went nowhere")
	}
	if total := limits.WindowStateSize(r.state); total > 512<<10 {
		t.Errorf("the window state is %d bytes", total)
	}
}
