package aggregate

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/internal/syncbuf"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

type outageStream struct {
	mu     sync.Mutex
	copies map[string]int
	refuse func() bool
}

func (s *outageStream) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse != nil && s.refuse() {
		return nil, &kintypes.ProvisionedThroughputExceededException{Message: aws.String("injected")}
	}
	if s.copies == nil {
		s.copies = map[string]int{}
	}
	out := &kinesis.PutRecordsOutput{}
	for _, r := range in.Records {
		var o Output
		if err := json.Unmarshal(r.Data, &o); err != nil {
			return nil, err
		}
		s.copies[o.ID]++
		out.Records = append(out.Records, kintypes.PutRecordsResultEntry{SequenceNumber: aws.String("1"), ShardId: aws.String("shardId-000000000000")})
	}
	return out, nil
}

// lossyStore applies a keyed state's write and now and then reports it
// failed (the response lost on the way back).
type lossyStore struct {
	memdb.Client
	mu   sync.Mutex
	rng  *rand.Rand
	lost int
}

func (s *lossyStore) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := s.Client.UpdateItem(ctx, in, opts...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.rng != nil && s.rng.IntN(12) == 0 {
		s.lost++
		return nil, errors.New("injected: the write's response was lost")
	}
	return out, err
}

// TestWarmHandlersAndTheTickerPublishEachKeyedResultOnce: two warm handler processes take
// turns on one shard (Lambda sends a shard's batches to either
// container), records arrive late under the correct policy, the output
// stream refuses now and then (a finalize fails and is retried), and the
// ticker ticks between and during batches. At the end every keyed result
// revision is on the stream and logged exactly once, no state keeps
// pending results or a listing, and the windows equal applying each record
// once.
func TestWarmHandlersAndTheTickerPublishEachKeyedResultOnce(t *testing.T) {
	for seed := uint64(1); seed <= warmRaceScenarios(); seed++ {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) { warmRace(t, seed) })
	}
}

func warmRace(t *testing.T, seed uint64) {
	late := "10m"
	if seed%5 >= 3 {
		late = "30s"
	}
	cfg, err := pipeline.Parse([]byte(`{"name":"race","key":"key","value":"data.ms",
	 "windows":[{"kind":"session","gap":"20s"},{"kind":"sliding","difference":"15s"}],"aggregates":["count","sum"],
	 "outOfOrderness":"2s","idleTimeout":"30s","latePolicy":"correct","allowedLateness":"` + late + `",
	 "partitionKeyIsGroupingKey":true,"dedupeHorizon":"0s"}`))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, seed*31))
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
	lossy := &lossyStore{Client: mem}
	lose := seed%3 == 0
	interval := seed%2 == 0
	lateness := 10 * time.Minute
	if seed%5 >= 3 {
		lateness = 30 * time.Second
	}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var clockMu sync.Mutex
	now := t0
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	views := state.NewViews(lossy, "views", cfg.Aggregates, state.WithClock(clock))
	var logs syncbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	var refuseMu sync.Mutex
	refuseNext := 0
	out := &outageStream{refuse: func() bool {
		refuseMu.Lock()
		defer refuseMu.Unlock()
		if refuseNext > 0 {
			refuseNext--
			return true
		}
		return false
	}}
	procs := []*Processor{
		New(cfg, views, out, "results", WithLogger(log), WithClock(clock)),
		New(cfg, views, out, "results", WithLogger(log), WithClock(clock)),
	}
	ticker := New(cfg, state.NewViews(mem, "views", cfg.Aggregates, state.WithClock(clock)), out, "results", WithLogger(log), WithClock(clock))
	ctx := context.Background()

	type rec struct {
		seq int
		key string
		at  time.Time
		ms  int
	}
	var recs []rec
	at := t0
	for i := 1; i <= 150; i++ {
		at = at.Add(time.Duration(rng.IntN(9000)) * time.Millisecond)
		et := at
		if rng.IntN(6) == 0 {
			et = at.Add(-time.Duration(5+rng.IntN(int(lateness/time.Second)-8)) * time.Second) // late, within the allowed lateness
		}
		recs = append(recs, rec{seq: i, key: fmt.Sprint("k", rng.IntN(3)), at: et, ms: 1 + rng.IntN(100)})
	}
	cur := 0
	for pos := 0; pos < len(recs); {
		n := 1 + rng.IntN(6)
		b := recs[pos:min(pos+n, len(recs))]
		var ev events.KinesisEvent
		latest := t0
		for _, r := range b {
			ts := r.at.UTC().Format(time.RFC3339Nano)
			data := fmt.Sprintf(`{"id":"e%d","type":"view","key":%q,"occurredAt":%q,"sentAt":%q,"receivedAt":%q,"data":{"ms":%d}}`, r.seq, r.key, ts, ts, ts, r.ms)
			ev.Records = append(ev.Records, events.KinesisEventRecord{EventID: fmt.Sprintf("shardId-000000000000:%d", r.seq), EventSource: "aws:kinesis",
				EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/events",
				Kinesis:        events.KinesisRecord{SequenceNumber: fmt.Sprint(r.seq), PartitionKey: r.key, Data: []byte(data), ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: r.at}}})
			if r.at.After(latest) {
				latest = r.at
			}
		}
		clockMu.Lock()
		if latest.After(now) {
			now = latest
		}
		clockMu.Unlock()
		if rng.IntN(3) == 0 {
			cur = rng.IntN(2) // the next batch goes to the other container
		}
		if rng.IntN(5) == 0 {
			refuseMu.Lock()
			refuseNext = 1
			refuseMu.Unlock()
		}
		var wg sync.WaitGroup
		if rng.IntN(3) == 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = ticker.Tick(ctx, clock())
			}()
		}
		if lose {
			lossy.mu.Lock()
			lossy.rng = rng
			lossy.mu.Unlock()
		}
		if interval {
			err = runInterval(ctx, procs, rng, ev)
		} else {
			var resp events.KinesisEventResponse
			resp, err = procs[cur].HandleBatch(ctx, ev)
			if err == nil && len(resp.BatchItemFailures) > 0 {
				err = fmt.Errorf("item failures %v", resp.BatchItemFailures)
			}
		}
		wg.Wait()
		lossy.mu.Lock()
		lossy.rng = nil
		lossy.mu.Unlock()
		if err != nil {
			continue // retried: the same batch
		}
		pos += len(b)
	}
	refuseMu.Lock()
	refuseNext = 0
	refuseMu.Unlock()
	for _, d := range []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour} {
		clockMu.Lock()
		now = now.Add(d)
		clockMu.Unlock()
		if _, err := ticker.Tick(ctx, clock()); err != nil {
			t.Fatal(err)
		}
	}

	var bad []string
	// Logs: every id on the stream logged exactly once, none other.
	logged := map[string]int{}
	for line := range strings.Lines(logs.String()) {
		var l struct {
			Msg                               string
			Pipeline, Key, Window, Start, End string
			Revision                          int
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == ResultLogMessage {
			logged[ResultID(l.Pipeline, l.Key, l.Window, l.Start+"/"+l.End, l.Revision)]++
		}
	}
	for id := range out.copies {
		if logged[id] > 1 || (logged[id] == 0 && !lose) {
			bad = append(bad, fmt.Sprintf("%s: on the stream, logged %d times", id, logged[id]))
		}
	}
	for id, n := range logged {
		if out.copies[id] == 0 {
			bad = append(bad, fmt.Sprintf("%s: logged %d times, never on the stream", id, n))
		}
	}
	// Stored keyed window items: each revision on the stream; keyed states
	// done with.
	for _, it := range mem.Items("views") {
		sk, _ := it["sk"].(*types.AttributeValueMemberS)
		pk, _ := it["pk"].(*types.AttributeValueMemberS)
		if sk == nil || pk == nil || !(strings.HasPrefix(sk.Value, "session:") || strings.HasPrefix(sk.Value, "sliding:")) {
			continue
		}
		if strings.HasSuffix(sk.Value, "|~state") {
			blob, _ := it["state"].(*types.AttributeValueMemberB)
			var b []byte
			if blob != nil {
				b = blob.Value
			}
			buf, err := decodeKeyed(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(buf.Pending) > 0 {
				bad = append(bad, fmt.Sprintf("%s %s: %d pending results left", pk.Value, sk.Value, len(buf.Pending)))
			}
			if _, listed := it["openIn"]; listed {
				bad = append(bad, fmt.Sprintf("%s %s: still listed", pk.Value, sk.Value))
			}
			continue
		}
		rev := 0
		if r, ok := it["revision"].(*types.AttributeValueMemberN); ok {
			fmt.Sscan(r.Value, &rev)
		}
		kind, w, _ := strings.Cut(sk.Value, "|")
		key := strings.TrimPrefix(pk.Value, "race#")
		for r := 1; r <= rev; r++ {
			id := fmt.Sprintf("race/%s/%s/%s/r%d", key, kind, w, r)
			if out.copies[id] == 0 {
				bad = append(bad, fmt.Sprintf("%s: revision %d of %d never on the stream", id, r, rev))
			}
		}
	}
	// Values: each record once.
	byKey := map[string][]rec{}
	for _, r := range recs {
		byKey[r.key] = append(byKey[r.key], r)
	}
	for key, rs := range byKey {
		sort.Slice(rs, func(i, j int) bool { return rs[i].at.Before(rs[j].at) })
		times := make([]time.Time, len(rs))
		for i, r := range rs {
			times[i] = r.at.Truncate(time.Millisecond)
		}
		for _, ws := range cfg.Windows {
			var wins []window.Window
			if ws.Kind == pipeline.Sliding {
				wins = ws.Sliding().Windows(times)
			} else {
				start, last := times[0], times[0]
				for _, tm := range times[1:] {
					if tm.Sub(last) >= ws.Gap {
						wins = append(wins, window.Window{Start: start.UTC(), End: last.Add(ws.Gap).UTC()})
						start = tm
					}
					last = tm
				}
				wins = append(wins, window.Window{Start: start.UTC(), End: last.Add(ws.Gap).UTC()})
			}
			want := map[string][2]float64{}
			for _, w := range wins {
				var c, s float64
				for _, r := range rs {
					tm := r.at.Truncate(time.Millisecond)
					if !tm.Before(w.Start) && tm.Before(w.End) {
						c++
						s += float64(r.ms)
					}
				}
				want[w.ID()] = [2]float64{c, s}
			}
			got, err := views.Query(ctx, "race", key, ws.ID(), t0.Add(-time.Hour), t0.Add(24*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, v := range got {
				id := v.Window.ID()
				seen[id] = true
				w, ok := want[id]
				if !v.Final || !ok || float64(v.Result.Count) != w[0] || v.Result.Sum != w[1] {
					bad = append(bad, fmt.Sprintf("%s %s %s: final %v count %d sum %v, want %v (expected: %v)", key, ws.ID(), id, v.Final, v.Result.Count, v.Result.Sum, w, ok))
				}
			}
			for id := range want {
				if !seen[id] {
					bad = append(bad, fmt.Sprintf("%s %s %s: missing", key, ws.ID(), id))
				}
			}
		}
	}
	for i, p := range procs {
		p.mu.Lock()
		n := 0
		for k, ks := range p.keyed {
			n += keyedEntryBytes(k, ks)
		}
		if n != p.keyedBytes {
			bad = append(bad, fmt.Sprintf("process %d: copies take %d bytes, keyedBytes says %d", i, n, p.keyedBytes))
		}
		p.mu.Unlock()
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("%d problems:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// runInterval plays ev as one tumbling-window interval: its records in
// an invocation (or two), then the final invocation, each on either
// process, each retried with the same state until it succeeds.
func runInterval(ctx context.Context, procs []*Processor, rng *rand.Rand, ev events.KinesisEvent) error {
	win := events.TimeWindowProperties{ShardID: "shardId-000000000000"}
	st := map[string]string{}
	parts := [][]events.KinesisEventRecord{ev.Records}
	if len(ev.Records) > 1 && rng.IntN(2) == 0 {
		h := len(ev.Records) / 2
		parts = [][]events.KinesisEventRecord{ev.Records[:h], ev.Records[h:]}
	}
	for _, part := range parts {
		for attempt := 0; ; attempt++ {
			in := events.KinesisTimeWindowEvent{KinesisEvent: events.KinesisEvent{Records: part}, TimeWindowProperties: win}
			in.State = st
			resp, err := procs[rng.IntN(2)].HandleInterval(ctx, in)
			if err == nil && len(resp.BatchItemFailures) == 0 {
				st = resp.State
				break
			}
			if attempt > 50 {
				return fmt.Errorf("interval invocation: %v %v", err, resp.BatchItemFailures)
			}
		}
	}
	final := events.KinesisTimeWindowEvent{TimeWindowProperties: win}
	final.State, final.IsFinalInvokeForWindow = st, true
	for attempt := 0; ; attempt++ {
		_, err := procs[rng.IntN(2)].HandleInterval(ctx, final)
		if err == nil {
			if rng.IntN(4) == 0 {
				_, _ = procs[rng.IntN(2)].HandleInterval(ctx, final) // response lost: again
			}
			return nil
		}
		if attempt > 50 {
			return fmt.Errorf("final invocation: %v", err)
		}
	}
}

var warmRaceSeeds = flag.Int("warmrace.seeds", 40, "scenarios of TestWarmHandlersAndTheTickerPublishEachKeyedResultOnce; make soak runs more")

func warmRaceScenarios() uint64 { return uint64(max(1, *warmRaceSeeds)) }
