package aggregate_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// windowWrites counts the writes to each item but listings and carries (by partition
// and sort key, "<pk> <sk>"), the ones refused by their condition
// included: DynamoDB bills those too.
type windowWrites struct {
	*dynamodb.Client
	mu    sync.Mutex
	n     map[string]int
	pages map[string]int // writes to result pages, by "<pk> <sk>"
}

func (w *windowWrites) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	pk, _ := in.Key["pk"].(*types.AttributeValueMemberS)
	sk, ok := in.Key["sk"].(*types.AttributeValueMemberS)
	switch {
	case ok && pk != nil && strings.HasPrefix(pk.Value, "~page#"):
		w.mu.Lock()
		if w.pages == nil {
			w.pages = map[string]int{}
		}
		w.pages[pk.Value+" "+sk.Value]++
		w.mu.Unlock()
	case ok && pk != nil && !strings.HasPrefix(sk.Value, "~") && !strings.HasPrefix(pk.Value, "~"):
		w.mu.Lock()
		if w.n == nil {
			w.n = map[string]int{}
		}
		w.n[pk.Value+" "+sk.Value]++
		w.mu.Unlock()
	}
	return w.Client.UpdateItem(ctx, in, opts...)
}

// pageWritesTo is how many writes the result page holding key's window of
// kind starting at from had (its bucket's, every shard's and part's).
func pageWritesTo(ww *windowWrites, pipeline, key, kind string, from time.Time) int {
	pk := fmt.Sprintf("~page#%s#%s#%d", pipeline, kind, state.PageBucket(key))
	prefix := from.UTC().Format("2006-01-02T15:04:05.000Z") + "/"
	ww.mu.Lock()
	defer ww.mu.Unlock()
	n := 0
	for k, c := range ww.pages {
		if p, sk, _ := strings.Cut(k, " "); p == pk && strings.HasPrefix(sk, prefix) {
			n += c
		}
	}
	return n
}

func (w *windowWrites) of(pk, sk string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[pk+" "+sk]
}

// On the per-interval path the flush knows the watermark it commits: a
// window it writes that ends by that watermark is made final by that write
// and published (then marked published), two writes where an update, the
// finalize and the mark were three. A window whose last records came in an
// earlier interval is finalized as before. Either way the result reaches
// the stream and the log once.
func TestAFlushClosesTheWindowsItsWatermarkPasses(t *testing.T) {
	minute := "tumbling:1m0s|"
	tests := []struct {
		name      string
		intervals [][]at
		want      int // writes to key a's item of [0s,60s)
	}{
		{"closed by the flush that writes it", [][]at{{{"a", 10, 1}, {"a", 50, 2}, {"a", 70, 4}}}, 2},
		{"closed by a later flush", [][]at{{{"a", 10, 1}, {"a", 50, 2}}, {{"a", 70, 4}}}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ww := &windowWrites{Client: db}
			var logs lockedBuffer
			p, out := pipelineOn(t, `{"name":"ic","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
			  "aggregates":["count","sum"],"outOfOrderness":"5s","latePolicy":"correct","allowedLateness":"10m"}`,
				func(cfg *pipeline.Config, table string) *state.Views {
					return state.NewViews(ww, table, cfg.Aggregates)
				},
				aggregate.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			r := &feed{t: t, p: p, base: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
			for _, recs := range tt.intervals {
				r.carry(recs...)
				r.flush()
			}
			first := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Format("2006-01-02T15:04:05.000Z")
			var sk string
			for k := range ww.n {
				if _, s, _ := strings.Cut(k, " "); strings.HasPrefix(s, minute+first) {
					sk = s
				}
			}
			if n := ww.of("ic#a", sk); n != tt.want {
				t.Errorf("writes to the window item %q: %d, want %d", sk, n, tt.want)
			}
			if got, want := strings.Join(out.of("a", r.base), "\n"), "final [0s,1m0s) r1 count 2 sum 3"; got != want {
				t.Errorf("results of key a:\n%s\nwant:\n%s", got, want)
			}
			if lines := logs.resultLines(t); len(lines) != 1 {
				t.Errorf("%d result log lines, want the final result once: %v", len(lines), lines)
			}
			// A late record within the allowed lateness corrects it.
			r.carry(at{"a", 30, 5})
			r.flush()
			if got, want := strings.Join(out.of("a", r.base), "\n"), "final [0s,1m0s) r1 count 2 sum 3\ncorrection [0s,1m0s) r2 count 3 sum 8"; got != want {
				t.Errorf("results of key a after a late record:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// The same for session and sliding windows: the flush folds each key's
// carried records into its keyed state, and that write also records the
// results of the windows its watermark closes, which the finalize after the
// commit then writes, publishes and clears (two writes of the state where a
// fold, a record and a clear were three).
func TestAFlushRecordsTheKeyedWindowsItsWatermarkCloses(t *testing.T) {
	tests := []struct {
		name      string
		intervals [][]at
		want      int // writes to key a's keyed state
	}{
		{"closed by the flush that folds it", [][]at{{{"a", 0, 1}, {"a", 10, 2}, {"z", 100, 1}}}, 2},
		{"closed by a later flush", [][]at{{{"a", 0, 1}, {"a", 10, 2}}, {{"z", 100, 1}}}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ww := &windowWrites{Client: db}
			p, out := pipelineOn(t, `{"name":"kc","key":"key","value":"data.v","windows":[{"kind":"session","gap":"20s"}],
			  "aggregates":["count","sum"],"outOfOrderness":"0s","latePolicy":"correct","allowedLateness":"1h","partitionKeyIsGroupingKey":true}`,
				func(cfg *pipeline.Config, table string) *state.Views {
					return state.NewViews(ww, table, cfg.Aggregates)
				})
			r := &feed{t: t, p: p, base: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
			for _, recs := range tt.intervals {
				r.carry(recs...)
				r.flush()
			}
			if n := ww.of("kc#a", "session:20s|~state"); n != tt.want {
				t.Errorf("writes to key a's keyed state: %d, want %d", n, tt.want)
			}
			if got, want := strings.Join(out.of("a", r.base), "\n"), "final [0s,30s) r1 count 2 sum 3"; got != want {
				t.Errorf("results of key a:\n%s\nwant:\n%s", got, want)
			}
			// A late record extends the final session: it is retracted
			// and the longer one is final.
			r.carry(at{"a", 25, 5})
			r.flush()
			if got, want := strings.Join(out.of("a", r.base), "\n"), "final [0s,30s) r1 count 2 sum 3\nretraction [0s,30s) r2\nfinal [0s,45s) r1 count 3 sum 8"; got != want {
				t.Errorf("results of key a after a late record:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
