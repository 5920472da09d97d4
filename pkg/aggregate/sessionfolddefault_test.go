package aggregate_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/state"
)

// foldedSessionConfig is the deployed pageviews pipeline's session window
// and aggregates, with its allowed lateness under the correct policy.
const foldedSessionConfig = `{"name":"folded","key":"key","value":"data.ms",
 "windows":[{"kind":"session","gap":"30s"}],
 "aggregates":["count","sum","min","max","mean","quantiles"],"quantiles":[0.5,0.99],
 "outOfOrderness":"5s","latePolicy":"correct","allowedLateness":"10m",
 "partitionKeyIsGroupingKey":true}`

// TestSessionRunsHeldFromTheFirstFoldMakeTheSameSessions: by default a
// fold holds each run of a session's on-time records as its aggregate
// whenever that takes fewer bytes (DefaultSessionFoldBytes), not only
// past a few KB. The same history — 20 keys, sessions opening and
// closing, late records that join, extend and merge sessions, producer
// copies — makes the same session windows (bounds, revisions,
// retractions) as a processor that keeps every record, in smaller
// states, and the same values: bit for bit where the values are whole
// numbers (the even keys); where they are not (the odd keys, one
// decimal), a sum or mean may differ in its last bits, for a held run
// adds its records before the records around it, as a tumbling window's
// batch partials do — never more, and never another count, minimum,
// maximum or quantile.
func TestSessionRunsHeldFromTheFirstFoldMakeTheSameSessions(t *testing.T) {
	folded := newHardenedInProcess(t, foldedSessionConfig)
	kept := newHardenedInProcess(t, foldedSessionConfig, aggregate.WithSessionFoldBytes(math.MaxInt32))
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	batches := foldHistory(start, rand.New(rand.NewPCG(7, 11)))
	ctx := context.Background()
	for i, ev := range batches {
		for _, h := range []*hardened{folded, kept} {
			resp, err := h.proc.HandleBatch(ctx, ev)
			if err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("batch %d: %v %v", i, resp, err)
			}
		}
		if i == len(batches)/2 {
			// Midway, with sessions open: the states compared.
			f, k := sessionStateBytes(t, folded), sessionStateBytes(t, kept)
			if f == 0 || f >= k {
				t.Fatalf("the session states take %d bytes with runs held, %d with every record kept: want fewer held", f, k)
			}
			t.Logf("session states midway: %d bytes with runs held, %d with every record kept", f, k)
		}
	}
	end := start.Add(2 * time.Hour)
	for _, h := range []*hardened{folded, kept} {
		for _, tick := range []time.Time{end, end.Add(time.Hour)} {
			if _, err := h.proc.Tick(ctx, tick); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every session window item, retracted ones included: the same
	// bounds, status and revision.
	got, want := sessionItems(t, folded), sessionItems(t, kept)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("session window items with runs held:\n%v\nwith every record kept:\n%v", got, want)
	}
	var corrected, retracted int
	for _, w := range want {
		if strings.HasPrefix(w, "retracted") {
			retracted++
		} else if !strings.HasSuffix(w, " r1") {
			corrected++
		}
	}
	// And the same values.
	lastBits := 0
	for k := range foldKeys {
		key := fmt.Sprintf("k%02d", k)
		got := folded.window(t, key, "session:30s", start.Add(-time.Hour), end)
		want := kept.window(t, key, "session:30s", start.Add(-time.Hour), end)
		if len(got) != len(want) {
			t.Fatalf("key %s: %d session results with runs held, %d with every record kept", key, len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.Window != w.Window || g.Final != w.Final || g.Revision != w.Revision {
				t.Fatalf("key %s session %d:\n runs held    %+v\n every record %+v", key, i, g, w)
			}
			if fmt.Sprint(g.Result) == fmt.Sprint(w.Result) {
				continue
			}
			gr, wr := g.Result, w.Result
			gr.Sum, gr.Mean = wr.Sum, wr.Mean
			if k%2 == 0 || fmt.Sprint(gr) != fmt.Sprint(wr) || !lastBitsOf(g.Result.Sum, w.Result.Sum) || !lastBitsOf(g.Result.Mean, w.Result.Mean) {
				t.Fatalf("key %s session %d:\n runs held    %+v\n every record %+v", key, i, g.Result, w.Result)
			}
			lastBits++
		}
	}
	t.Logf("%d sessions of the odd keys differ in their sum or mean's last bits", lastBits)
	// The history must reach what it claims to: corrections and
	// retractions from late records, on many sessions.
	if len(want) < 100 || corrected == 0 || retracted == 0 {
		t.Fatalf("%d sessions, %d corrected, %d retracted: the history should make many, some of each", len(want), corrected, retracted)
	}
	t.Logf("%d session windows equal, %d of them corrected, %d retracted", len(want), corrected, retracted)
}

// sessionItems is h's session window items, by key: "<status> <pk> <sk>
// r<revision>".
func sessionItems(t *testing.T, h *hardened) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, it := range h.mem.Items("views") {
		pk, _ := it["pk"].(*types.AttributeValueMemberS)
		sk, _ := it["sk"].(*types.AttributeValueMemberS)
		if pk == nil || sk == nil || !strings.HasPrefix(sk.Value, "session:30s|") || strings.HasSuffix(sk.Value, "|~state") {
			continue
		}
		status, _ := it["status"].(*types.AttributeValueMemberS)
		rev, _ := it["revision"].(*types.AttributeValueMemberN)
		if status == nil || rev == nil {
			t.Fatalf("session window item %s %s without a status or revision: %v", pk.Value, sk.Value, it)
		}
		out[pk.Value+" "+sk.Value] = status.Value + " " + pk.Value + " " + sk.Value + " r" + rev.Value
	}
	return out
}

const foldKeys = 20

// lastBitsOf reports whether a and b are the same number but for rounding:
// within a relative 1e-12.
func lastBitsOf(a, b float64) bool {
	return math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b))
}

// foldHistory is batches of 100 records of foldKeys keys over about an
// hour: each key sends in bursts (a session) with pauses past the gap,
// whole numbers (the even keys) or numbers of one decimal (the odd), one
// record in 20 late by up to eight minutes and one in 50 a producer's
// copy.
func foldHistory(start time.Time, r *rand.Rand) []events.KinesisEvent {
	var (
		out  []events.KinesisEvent
		ev   events.KinesisEvent
		seq  int
		last = map[int]time.Time{}
		sent []events.KinesisEventRecord
	)
	at := start
	for i := 0; i < 6000; i++ {
		at = at.Add(time.Duration(300+r.IntN(400)) * time.Millisecond)
		k := r.IntN(foldKeys)
		et := at
		if prev, ok := last[k]; ok && r.IntN(40) == 0 {
			et = prev.Add(45 * time.Second) // a pause past the gap: a new session
			if et.After(at) {
				at = et
			}
		}
		last[k] = et
		if r.IntN(20) == 0 {
			et = at.Add(-time.Duration(20+r.IntN(460)) * time.Second)
		}
		seq++
		key := fmt.Sprintf("k%02d", k)
		value := fmt.Sprint(r.IntN(3000))
		if k%2 == 1 {
			value = fmt.Sprintf("%d.%d", r.IntN(3000), r.IntN(10))
		}
		rec := rawRecord(seq, key, view(fmt.Sprintf("e%d", seq), key, et, `{"ms":`+value+`}`), at)
		if len(sent) > 0 && r.IntN(50) == 0 {
			// A producer's copy of an earlier event: its id, key and
			// content in a new record.
			c := sent[r.IntN(len(sent))]
			rec = rawRecord(seq, c.Kinesis.PartitionKey, c.Kinesis.Data, at)
		} else {
			sent = append(sent, rec)
		}
		ev.Records = append(ev.Records, rec)
		if len(ev.Records) == 100 {
			out = append(out, ev)
			ev = events.KinesisEvent{}
		}
	}
	if len(ev.Records) > 0 {
		out = append(out, ev)
	}
	return out
}

// sessionStateBytes is the size of h's session state items, as DynamoDB
// counts them.
func sessionStateBytes(t *testing.T, h *hardened) int {
	t.Helper()
	n := 0
	for _, it := range h.mem.Items("views") {
		pk, _ := it["pk"].(*types.AttributeValueMemberS)
		sk, _ := it["sk"].(*types.AttributeValueMemberS)
		if pk == nil || sk == nil {
			continue
		}
		if _, ok := state.IsKeyed(state.Ref{PK: pk.Value, SK: sk.Value}); ok {
			n += limits.ItemSize(it)
		}
	}
	return n
}
