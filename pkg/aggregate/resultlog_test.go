package aggregate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/syncbuf"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// lockedBuffer collects log output written from several goroutines.
type lockedBuffer struct{ syncbuf.Buffer }

// resultLines parses the window result lines out of a JSON log.
func (b *lockedBuffer) resultLines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.Bytes()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", sc.Text(), err)
		}
		if line["msg"] == aggregate.ResultLogMessage {
			// The line carries the fields the output record's id is made
			// of, not the id: the tests identify a revision by that id.
			if id, ok := line["id"]; ok {
				t.Fatalf("result line repeats the id %v its fields make: %s", id, sc.Text())
			}
			if _, ok := line["time"]; ok {
				t.Fatalf("result line has a time of its own (CloudWatch stamps each line): %s", sc.Text())
			}
			str := func(f string) string { s, _ := line[f].(string); return s }
			rev, _ := line["revision"].(float64)
			line["id"] = aggregate.ResultID(str("pipeline"), str("key"), str("window"), str("start")+"/"+str("end"), int(rev))
			out = append(out, line)
		}
	}
	return out
}

const resultLogConfig = `{"name":"rl","key":"key","value":"data.ms","distinct":"data.user",
  "windows":[{"kind":"tumbling","size":"1m"},{"kind":"session","gap":"10s"}],
  "aggregates":["count","sum","min","max","mean","quantiles","distinct"],"quantiles":[0.5,0.99],
  "outOfOrderness":"0s","latePolicy":"correct","allowedLateness":"1h","partitionKeyIsGroupingKey":true}`

// Every final window, correction and retraction is logged as one JSON line
// with the key and the values as fields, the previous value on corrections
// and retractions, and a countDelta whose sum over a key's results is the
// number of its events, whichever window kind is summed.
func TestResultLogLines(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(resultLogConfig))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	table := fmt.Sprintf("resultlog-%d", tableSeq.Add(1))
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	p := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates), nil, "",
		aggregate.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	seq := 0
	send := func(key string, offset time.Duration, ms int, user string) {
		t.Helper()
		seq++
		at := base.Add(offset)
		env := stream.Envelope{ID: fmt.Sprint(seq), Type: "v", Key: key, OccurredAt: at, SentAt: at, ReceivedAt: at,
			Data: json.RawMessage(fmt.Sprintf(`{"ms":%d,"user":%q}`, ms, user))}
		resp, err := p.HandleBatch(ctx, kinesisEvent([]record{{shard: "shardId-000000000000", seq: seq, env: env}}))
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch: %v %v", resp, err)
		}
	}
	// Tumbling [10:00, 10:01): 100, 300; sessions [0:01, 0:12) and
	// [0:30, 0:40), [0:45, 0:55).
	send("k", 1*time.Second, 100, "a")
	send("k", 2*time.Second, 300, "b")
	send("k", 30*time.Second, 50, "a")
	send("k", 45*time.Second, 70, "a")
	// Another key's record moves the shard's watermark past all of them.
	send("z", 90*time.Second, 1, "z")
	// Late: corrects the tumbling window and the first session.
	send("k", 5*time.Second, 500, "c")
	// Late: bridges the two later sessions into [0:30, 0:55).
	send("k", 38*time.Second, 60, "a")

	byID := map[string]map[string]any{}
	deltas := map[string]float64{}
	for _, l := range logs.resultLines(t) {
		if l["key"] != "k" {
			continue
		}
		id, _ := l["id"].(string)
		if byID[id] != nil {
			t.Errorf("result %s logged twice", id)
		}
		byID[id] = l
		d, ok := l["countDelta"].(float64)
		if !ok {
			t.Errorf("%s: no countDelta: %v", id, l)
		}
		deltas[l["window"].(string)] += d
	}
	tumbling := "rl/k/tumbling:1m0s/2026-11-29T10:00:00.000Z/2026-11-29T10:01:00.000Z/"
	for id, want := range map[string]map[string]any{
		tumbling + "r1": {"resultType": "final", "pipeline": "rl", "key": "k", "window": "tumbling:1m0s",
			"start": "2026-11-29T10:00:00.000Z", "end": "2026-11-29T10:01:00.000Z", "revision": 1.0,
			"count": 4.0, "sum": 520.0, "min": 50.0, "max": 300.0, "mean": 130.0, "distinct": 2.0, "countDelta": 4.0, "level": "INFO"},
		tumbling + "r2": {"resultType": "correction", "revision": 2.0,
			"count": 5.0, "sum": 1020.0, "min": 50.0, "max": 500.0, "mean": 204.0, "distinct": 3.0,
			"previousCount": 4.0, "previousSum": 520.0, "previousMax": 300.0, "previousMean": 130.0, "previousDistinct": 2.0, "countDelta": 1.0},
		tumbling + "r3": {"resultType": "correction", "revision": 3.0, "count": 6.0, "previousCount": 5.0, "countDelta": 1.0},
	} {
		got := byID[id]
		if got == nil {
			t.Errorf("no line for %s; lines: %v", id, keys(byID))
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v", id, k, got[k], v)
			}
		}
		// Quantiles are estimates, within the window's min and max.
		for _, q := range []string{"p50", "p99"} {
			v, ok := got[q].(float64)
			if !ok || v < got["min"].(float64) || v > got["max"].(float64) {
				t.Errorf("%s: %s = %v, want a value between min and max", id, q, got[q])
			}
		}
	}
	// Sessions a late record changed are retracted ([0:01, 0:12) grows to
	// [0:01, 0:15); the bridge merges [0:30, 0:40) and [0:45, 0:55)): no
	// value, the one they had as previous, a negative countDelta.
	retracted := map[string]float64{}
	for id, l := range byID {
		if l["resultType"] != "retraction" {
			continue
		}
		if _, ok := l["count"]; ok {
			t.Errorf("%s: a retraction carries a count: %v", id, l)
		}
		retracted[l["start"].(string)+" "+l["end"].(string)] = l["previousCount"].(float64)
		if l["countDelta"] != -l["previousCount"].(float64) {
			t.Errorf("%s: countDelta %v, want -previousCount (%v)", id, l["countDelta"], l["previousCount"])
		}
	}
	wantRetracted := map[string]float64{
		"2026-11-29T10:00:01.000Z 2026-11-29T10:00:12.000Z": 2,
		"2026-11-29T10:00:30.000Z 2026-11-29T10:00:40.000Z": 1,
		"2026-11-29T10:00:45.000Z 2026-11-29T10:00:55.000Z": 1,
	}
	if fmt.Sprint(retracted) != fmt.Sprint(wantRetracted) {
		t.Errorf("retracted (window: previous count) %v, want %v", retracted, wantRetracted)
	}
	// Summing countDelta counts each of k's six events once, per kind.
	for kind, d := range deltas {
		if d != 6 {
			t.Errorf("countDelta over %s results sums to %v, want 6 (k's events)", kind, d)
		}
	}
	if len(deltas) != 2 {
		t.Errorf("results of %d window kinds, want 2: %v", len(deltas), deltas)
	}
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// refusingStream fails every PutRecords until allowed, as a stream that
// throttles every entry would.
type refusingStream struct {
	mu      sync.Mutex
	allowed bool
	put     int
}

func (s *refusingStream) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.allowed {
		return nil, &kintypes.ProvisionedThroughputExceededException{Message: new(string)}
	}
	out := &kinesis.PutRecordsOutput{}
	for range in.Records {
		s.put++
		out.Records = append(out.Records, kintypes.PutRecordsResultEntry{SequenceNumber: new(string)})
	}
	return out, nil
}

// A result is logged once it is on the output stream: while the stream
// refuses it, the batch fails and nothing is logged; the window stays listed
// as open, and the next tick emits and logs it.
func TestResultLoggedAfterEmission(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"re","key":"key","windows":[{"kind":"tumbling","size":"1m"}],
	  "aggregates":["count"],"outOfOrderness":"0s","partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	table := fmt.Sprintf("resultemit-%d", tableSeq.Add(1))
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	out := &refusingStream{}
	p := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates), out, "results",
		aggregate.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var recs []record
	for i, off := range []time.Duration{time.Second, 2 * time.Second, 70 * time.Second} {
		at := base.Add(off)
		recs = append(recs, record{shard: "shardId-000000000000", seq: i + 1, env: stream.Envelope{
			ID: fmt.Sprint(i), Type: "v", Key: "k", OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{}`)}})
	}
	if _, err := p.HandleBatch(ctx, kinesisEvent(recs)); err == nil {
		t.Fatal("the stream refused the final result, yet the batch succeeded")
	}
	if lines := logs.resultLines(t); len(lines) != 0 {
		t.Fatalf("logged %d results the stream refused: %v", len(lines), lines)
	}
	out.mu.Lock()
	out.allowed = true
	out.mu.Unlock()
	if _, err := p.Tick(ctx, base.Add(80*time.Second)); err != nil {
		t.Fatalf("tick: %v", err)
	}
	lines := logs.resultLines(t)
	if len(lines) != 1 || out.put != 1 {
		t.Fatalf("after the retry: %d lines, %d records put; want 1 and 1: %v", len(lines), out.put, lines)
	}
	if l := lines[0]; l["id"] != "re/k/tumbling:1m0s/2026-11-29T10:00:00.000Z/2026-11-29T10:01:00.000Z/r1" || l["count"] != 2.0 || l["countDelta"] != 2.0 {
		t.Errorf("line %v, want the final window of k with count 2", l)
	}
}
