package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// TestWindowKindsAndLatePolicies plays one history through a handler of
// each window kind under each late policy and checks every result on the
// output stream. The history (key /a, value = data.ms, out-of-orderness
// 5s, allowed lateness 60s under correct), one batch per line:
//
//	10s=1, 15s=2, 33s=4     watermark 28s (and 12s=-5, set aside naming data.ms)
//	70s=8                   watermark 65s: the first minute is final
//	24s=16                  late: dropped under drop; under correct it
//	                        corrects its windows, and as a session record
//	                        merges the final sessions [10s,25s) and [33s,43s)
//	200s=32, 30s=64         watermark 195s: 30s is too late for both
//
// then ticks close the rest. Each expectation is worked out by hand from
// the windows' definitions (docs/windows.md).
func TestWindowKindsAndLatePolicies(t *testing.T) {
	batches := [][]struct {
		sec float64
		ms  int
	}{
		{{10, 1}, {12, -5}, {15, 2}, {33, 4}}, // -5 can never be added: set aside
		{{70, 8}},
		{{24, 16}},
		{{200, 32}, {30, 64}},
	}
	correct := []handler.Option{handler.WithLatePolicy(handler.Correct), handler.WithAllowedLateness(time.Minute)}
	for _, c := range []struct {
		name string
		opts []handler.Option
		want []string // in any order; "<type> [start,end) r<revision> n<records> sum<sum> [prev sum<sum>]"
		late int64
	}{
		{"tumbling/drop", []handler.Option{handler.WithWindow(time.Minute)}, []string{
			"final [0,60) r1 n3 sum7",
			"final [60,120) r1 n1 sum8",
			"final [180,240) r1 n1 sum32",
		}, 2},
		{"tumbling/correct", append([]handler.Option{handler.WithWindow(time.Minute)}, correct...), []string{
			"correction [0,60) r2 n4 sum23 prev sum7",
			"final [0,60) r1 n3 sum7",
			"final [60,120) r1 n1 sum8",
			"final [180,240) r1 n1 sum32",
		}, 1},
		// Hopping: 24s is in the windows [-30s,30s) and [0s,60s), both final
		// at 65s; 30s in [0s,60s) and [30s,90s), both past 195s − 60s.
		{"hopping/drop", []handler.Option{handler.WithHopping(time.Minute, 30*time.Second)}, []string{
			"final [-30,30) r1 n2 sum3",
			"final [0,60) r1 n3 sum7",
			"final [30,90) r1 n2 sum12",
			"final [60,120) r1 n1 sum8",
			"final [150,210) r1 n1 sum32",
			"final [180,240) r1 n1 sum32",
		}, 2},
		{"hopping/correct", append([]handler.Option{handler.WithHopping(time.Minute, 30*time.Second)}, correct...), []string{
			"correction [-30,30) r2 n3 sum19 prev sum3",
			"correction [0,60) r2 n4 sum23 prev sum7",
			"final [-30,30) r1 n2 sum3",
			"final [0,60) r1 n3 sum7",
			"final [30,90) r1 n2 sum12",
			"final [60,120) r1 n1 sum8",
			"final [150,210) r1 n1 sum32",
			"final [180,240) r1 n1 sum32",
		}, 1},
		// Sliding, 10s: each record's left window [t−10s, t] and, when a
		// record follows within 10s, its right window [t+1ms, t+10s+1ms]
		// (inclusive ends; written half-open). Under drop 24s is dropped
		// (24s + 10s is before the watermark); under correct it is on time
		// for the close time 5s: it makes its own left window and right
		// window, the right window of 15s, and corrects 33s's left window.
		{"sliding/drop", []handler.Option{handler.WithSliding(10 * time.Second)}, []string{
			"final [0,10.001) r1 n1 sum1",
			"final [10.001,20.002) r1 n1 sum2",
			"final [190,200.001) r1 n1 sum32",
			"final [23,33.001) r1 n1 sum4",
			"final [5,15.001) r1 n2 sum3",
			"final [60,70.001) r1 n1 sum8",
		}, 2},
		{"sliding/correct", append([]handler.Option{handler.WithSliding(10 * time.Second)}, correct...), []string{
			"correction [23,33.001) r2 n2 sum20 prev sum4",
			"final [0,10.001) r1 n1 sum1",
			"final [10.001,20.002) r1 n1 sum2",
			"final [14,24.001) r1 n2 sum18",
			"final [15.001,25.002) r1 n1 sum16",
			"final [190,200.001) r1 n1 sum32",
			"final [23,33.001) r1 n1 sum4",
			"final [24.001,34.002) r1 n1 sum4",
			"final [5,15.001) r1 n2 sum3",
			"final [60,70.001) r1 n1 sum8",
		}, 1},
		// Sessions, gap 10s: [10s,25s) and [33s,43s) are final at 65s; 24s
		// is within the gap of both. Under drop it is dropped (both are
		// closed); under correct it merges them into [10s,43s), and both
		// are retracted.
		{"session/drop", []handler.Option{handler.WithSession(10 * time.Second)}, []string{
			"final [10,25) r1 n2 sum3",
			"final [200,210) r1 n1 sum32",
			"final [33,43) r1 n1 sum4",
			"final [70,80) r1 n1 sum8",
		}, 2},
		{"session/correct", append([]handler.Option{handler.WithSession(10 * time.Second)}, correct...), []string{
			"final [10,25) r1 n2 sum3",
			"final [10,43) r1 n4 sum23",
			"final [200,210) r1 n1 sum32",
			"final [33,43) r1 n1 sum4",
			"final [70,80) r1 n1 sum8",
			"retraction [10,25) r2 n0 prev sum3",
			"retraction [33,43) r2 n0 prev sum4",
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := setup(t)
			opts := append([]handler.Option{handler.WithOutOfOrderness(5 * time.Second), handler.WithLogger(quiet), handler.WithMetrics(nil)}, c.opts...)
			h, err := handler.NewWindowed[Tally](cfg, selectLatency, opts...)
			if err != nil {
				t.Fatal(err)
			}
			seq := 100
			for _, b := range batches {
				var recs []rec
				for _, r := range b {
					seq++
					recs = append(recs, rec{seq, request(fmt.Sprint("e", seq), "/a", r.sec, fmt.Sprintf(`{"ms":%d}`, r.ms))})
				}
				mustBatch(t, h, kinesisRecords(recs))
			}
			for _, at := range []time.Time{base.Add(time.Hour), base.Add(2 * time.Hour)} {
				if _, err := h.Tick(ctx, at); err != nil {
					t.Fatal(err)
				}
			}
			byID, _ := results(t, cfg.OutputStream)
			got := describeRevisions(t, cfg.Name, byID)
			want := slices.Sorted(slices.Values(c.want))
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("results:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if st := h.Stats(); st.Late != c.late || st.SetAside != 1 {
				t.Errorf("%d records counted late, %d set aside; want %d late, 1 set aside", st.Late, st.SetAside, c.late)
			}
			it, err := setaside.Load(ctx, db, cfg.QuarantineTable, "arn:aws:kinesis:us-east-1:123456789012:stream/events/shardId-000000000000", "102")
			if err != nil || it == nil || it.Field != "data.ms" || it.Category != setaside.KindInvalid {
				t.Errorf("the record with ms -5: set aside as %+v (%v); want field data.ms, kind %s", it, err, setaside.KindInvalid)
			}
		})
	}
}

// describeRevisions renders results as "<type> [start,end) r<revision>
// n<records> sum<sum> [prev sum<sum>]", times in seconds after base,
// sorted; it checks each result's id and that only a retraction is not
// final.
func describeRevisions(t *testing.T, name string, byID map[string]handler.Result) []string {
	t.Helper()
	sec := func(at time.Time) string { return fmt.Sprint(at.Sub(base).Seconds()) }
	sum := func(raw json.RawMessage) string {
		var tl struct{ Sum int64 }
		if err := json.Unmarshal(raw, &tl); err != nil {
			t.Fatalf("result %s: %v", raw, err)
		}
		return fmt.Sprint(" sum", tl.Sum)
	}
	var out []string
	for id, r := range byID {
		wantID := fmt.Sprintf("%s/%s/%s/%s", name, r.Key, r.WindowStart.Format("2006-01-02T15:04:05.000Z07:00"), r.WindowEnd.Format("2006-01-02T15:04:05.000Z07:00"))
		if r.Revision > 1 {
			wantID += fmt.Sprintf("/r%d", r.Revision)
		}
		if id != wantID || r.Final == (r.Type == handler.RetractionType) {
			t.Errorf("result %s: want id %s, and final unless a retraction (final %t)", id, wantID, r.Final)
		}
		s := fmt.Sprintf("%s [%s,%s) r%d n%d", r.Type, sec(r.WindowStart), sec(r.WindowEnd), r.Revision, r.Records)
		if r.Type != handler.RetractionType {
			s += sum(r.Result)
		}
		if r.Previous != nil {
			s += " prev" + sum(r.Previous)
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// TestHotSlidingKeyFolds sends 3,000 records of one key, ten a second, to
// an hour's sliding windows: the key holds them all, and each record
// closes a window or two. The batch completes (over the fold's
// checkpoints) with results and nothing set aside. How long it takes is
// BenchmarkHotSlidingKey's to show, not an assertion here: listing the
// key's windows used to count every window's members on each record
// (quadratic in the records held), about a minute for this batch, past a
// Lambda timeout on every retry; reading only the windows a close closes
// takes seconds.
func TestHotSlidingKeyFolds(t *testing.T) {
	hotSlidingKey(t, setup(t))
}

// BenchmarkHotSlidingKey times TestHotSlidingKeyFolds' batch, each run on
// tables of its own.
func BenchmarkHotSlidingKey(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		cfg := setup(b)
		b.StartTimer()
		hotSlidingKey(b, cfg)
	}
}

// hotSlidingKey folds 3,000 records of one key into an hour's sliding
// windows, over the fold's checkpoints, and checks it made results and set
// nothing aside.
func hotSlidingKey(t testing.TB, cfg handler.Config) {
	t.Helper()
	h, err := handler.NewWindowed[Tally](cfg, selectLatency, handler.WithSliding(time.Hour), handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	var recs []rec
	for i := range 3000 {
		recs = append(recs, rec{i + 1, request(fmt.Sprint("e", i), "/hot", float64(i)/10, `{"ms":1}`)})
	}
	all := kinesisRecords(recs)
	for round := 0; len(all) > 0; round++ {
		if round == 5 {
			t.Fatalf("%d records still failed after 5 rounds", len(all))
		}
		resp, err := h.HandleBatch(context.Background(), events.KinesisEvent{Records: all})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.BatchItemFailures) == 0 {
			break
		}
		// A fold checkpoint: Lambda retries from the failed record.
		i := slices.IndexFunc(all, func(r events.KinesisEventRecord) bool {
			return r.Kinesis.SequenceNumber == resp.BatchItemFailures[0].ItemIdentifier
		})
		all = all[i:]
	}
	if st := h.Stats(); st.SetAside != 0 || st.Outputs == 0 {
		t.Errorf("stats %+v: want results and nothing set aside", st)
	}
}
