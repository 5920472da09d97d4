package aggregate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/stream"
)

func recordOf(seq int, key, id string, occurred, arrived time.Time, v int) record {
	return record{shard: feedShard, seq: seq, env: stream.Envelope{ID: id, Type: "v", Key: key,
		OccurredAt: occurred, SentAt: arrived, ReceivedAt: arrived, Data: json.RawMessage(fmt.Sprintf(`{"v":%d}`, v))}}
}

// shortHorizonHistory is a pipeline whose dedupe horizon (10 s) is shorter
// than its interval, on a rig whose state overflows after a few claims
// (small) and one whose state holds everything (whole), with event X of
// key k first and seven more of k after it, a second apart.
func shortHorizonHistory(t *testing.T, name string) (small, whole *overflowRig, x record, first []record, at func(int) time.Time) {
	t.Helper()
	spec := `{"name":"` + name + `","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
  "aggregates":["count","sum"],"outOfOrderness":"5s","dedupeHorizon":"10s"}`
	base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	small, whole = newRigOf(t, spec, aggregate.WithCarriedBudget(200)), newRigOf(t, spec)
	at = func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	x = recordOf(1, "k", "x", at(0), at(0), 5)
	first = []record{x}
	for i := 2; i <= 8; i++ {
		first = append(first, recordOf(i, "k", fmt.Sprint("f", i), at(i), at(i), 1))
	}
	return small, whole, x, first, at
}

// A pipeline whose dedupe horizon is shorter than the interval. X is
// claimed and its claim goes to an overflow item; a copy X' arriving past
// the horizon is New (as it must be); a copy X” arriving within the horizon
// of X' is a Duplicate: X' is a claim of its own, under X's id, that the
// state carries (it was dropped as X's, and X” counted).
func TestACopyPastTheHorizonOfAnOverflowedClaimIsItsOwnClaim(t *testing.T) {
	small, whole, x, first, at := shortHorizonHistory(t, "ovfh")
	base := at(0)
	copyAt := func(seq int, arrived time.Time) record {
		c := x
		c.seq = seq
		c.env.SentAt, c.env.ReceivedAt = arrived, arrived
		return c
	}
	x1 := copyAt(9, base.Add(20*time.Second))  // past the horizon of X: New
	x2 := copyAt(10, base.Add(25*time.Second)) // within the horizon of X': Duplicate
	tail := recordOf(11, "k", "tail", base.Add(2*time.Minute), base.Add(2*time.Minute), 0)
	for _, r := range []*overflowRig{small, whole} {
		r.carry(first)
		r.carry([]record{x1})
		r.carry([]record{x2})
		r.carry([]record{tail})
		r.flush()
	}
	if small.overflowItems() == 0 {
		t.Fatal("no overflow item: the test proves nothing")
	}
	want, got := whole.results(), small.results()
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %q with overflow, %q without", id, got[id], w)
		}
	}
	if len(want) == 0 {
		t.Fatal("no result to compare")
	}
	if g, w := emfSum(t, small.emf, "DuplicatesSuppressed"), emfSum(t, whole.emf, "DuplicatesSuppressed"); g != w {
		t.Errorf("DuplicatesSuppressed = %v with overflow, %v without", g, w)
	}
}

// One hot key: its claims alone past an item's 393,216 bytes (10,923
// claims of 36 bytes). The budget lets ~10,700 ride in the state while the
// batches are small; a larger batch then takes them past it, and the
// invocation must not fail (they were once spilled as one item, too large
// to write, and every retry failed the same way).
func TestOneHotKeysClaimsPastAnItemDoNotFailTheInvocation(t *testing.T) {
	const spec = `{"name":"ovfk","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1h"}],
  "aggregates":["count","sum"],"outOfOrderness":"5s"}`
	base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	r := newRigOf(t, spec)
	seq := 1
	batch := func(n int) []record {
		recs := make([]record, n)
		for i := range recs {
			at := base.Add(time.Duration(seq) * time.Millisecond)
			recs[i] = recordOf(seq, "hot", fmt.Sprint("id", seq), at, at, 1)
			seq++
		}
		return recs
	}
	for _, n := range []int{2000, 2000, 2000, 1000, 1000, 500, 500, 500, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100} {
		r.carry(batch(n))
		if _, spilled := r.state["c|~ovf"]; spilled {
			t.Fatalf("spilled after %d records", seq-1)
		}
	}
	_, err := r.invoke(batch(700))
	if err != nil {
		t.Errorf("a 700-record batch of the hot key fails: %v", err)
	}
}

type twoShards struct{ a, b string }

func (l twoShards) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return &kinesis.ListShardsOutput{Shards: []kintypes.Shard{{ShardId: aws.String(l.a)}, {ShardId: aws.String(l.b)}}}, nil
}

// A key whose records reach two shards (the grouping key is a field, not
// the partition key): shard B's interval claims X, its claim goes to an
// overflow item, and shard A's flush commits X first. B's claim is Raced
// once: before the change it left B's state at the first settle; in an
// overflow item it is settled again by every later invocation meeting the
// key (cold) and by the flush, each time counted in DedupeRaces and logged.
func TestARacedOverflowedClaimIsCountedOnce(t *testing.T) {
	const spec = `{"name":"ovfr","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
  "aggregates":["count","sum"],"outOfOrderness":"5s"}`
	const shardB = "shardId-000000000001"
	base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	run := func(budget int) float64 {
		opts := []aggregate.Option{aggregate.WithShardLister(twoShards{feedShard, shardB}, "events")}
		if budget > 0 {
			opts = append(opts, aggregate.WithCarriedBudget(budget))
		}
		a := newRigOf(t, spec, opts...)
		b := &overflowRig{t: t, cfg: a.cfg, table: a.table, opts: a.opts, out: &outputLog{}, emf: &bytes.Buffer{}, shard: shardB}
		b.restart()
		onB := func(seq int, id string, sec int) record {
			r := recordOf(seq, "k", id, base.Add(time.Duration(sec)*time.Second), base.Add(time.Duration(sec)*time.Second), 1)
			r.shard = shardB
			return r
		}
		var first []record
		first = append(first, onB(1, "x", 1))
		for i := 2; i <= 8; i++ {
			first = append(first, onB(i, fmt.Sprint("f", i), i))
		}
		b.carry(first)
		a.carry([]record{recordOf(1, "k", "x", base.Add(time.Second), base.Add(2*time.Second), 1)})
		a.flush()
		for i := 0; i < 3; i++ {
			b.restart()
			b.carry([]record{onB(10+i, fmt.Sprint("g", i), 10+i)})
		}
		b.flush()
		return emfSum(t, b.emf, "DedupeRaces")
	}
	withOverflow, without := run(200), run(0)
	if withOverflow != without {
		t.Errorf("one raced claim counted %v times with overflow, %v without", withOverflow, without)
	}
}

// A claim X in an overflow item, a copy X' past its horizon (a claim of
// its own, carried in the state), then an invocation without X's key that
// commits the state's claims early (another key is busy): X is written
// with X', not settled at the flush against X' as if another record had
// made it first (a false DedupeRaces and its error log).
func TestAnEarlyCommitWritesAKeysOverflowedClaimsWithItsCarriedOnes(t *testing.T) {
	small, whole, x, first, at := shortHorizonHistory(t, "ovfe")
	x1 := x
	x1.seq = 9
	x1.env.SentAt, x1.env.ReceivedAt = at(20), at(20) // past X's horizon: its own claim
	var busy []record                                 // 60 claims of one other key: committed early, not overflowed
	for i := 0; i < 60; i++ {
		busy = append(busy, recordOf(10+i, "j", fmt.Sprint("j", i), at(21), at(21), 1))
	}
	for _, r := range []*overflowRig{small, whole} {
		r.carry(first)
		r.carry([]record{x1})
		r.carry(busy)
		r.flush()
	}
	if small.overflowItems() == 0 {
		t.Fatal("no overflow item: the test proves nothing")
	}
	if g, w := emfSum(t, small.emf, "DedupeRaces"), emfSum(t, whole.emf, "DedupeRaces"); g != w {
		t.Errorf("DedupeRaces = %v with overflow, %v without: no other record made any claim", g, w)
	}
}
