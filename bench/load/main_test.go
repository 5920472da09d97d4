package main

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/bench/internal/deployed"
	"github.com/tributary-dev/tributary/bench/internal/sdkcost"
	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// item is a views item of pk "p", sk sk whose size is size bytes by
// DynamoDB's rules, with extra attributes.
func item(t *testing.T, sk string, size int, extra map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	it := map[string]types.AttributeValue{"pk": s("p"), "sk": s(sk), "pad": s("")}
	for k, v := range extra {
		it[k] = v
	}
	pad := size - limits.ItemSize(it)
	if pad < 0 {
		t.Fatalf("item of %d bytes cannot hold its keys", size)
	}
	it["pad"] = s(strings.Repeat("x", pad))
	if got := limits.ItemSize(it); got != size {
		t.Fatalf("item size %d, want %d", got, size)
	}
	return it
}

// The store bills each request by DynamoDB's rules on the items' sizes.
func TestStoreBillsByItemSize(t *testing.T) {
	ctx := context.Background()
	db := memdb.New(map[string]memdb.Schema{deployed.ViewsTable: memdb.ViewsTable})
	st := newStore(db)
	views := aws.String(deployed.ViewsTable)
	key := map[string]types.AttributeValue{"pk": s("p"), "sk": s("a")}
	open := map[string]types.AttributeValue{"openIn": s("pv#shard-0"), "openUntil": s("2026-01-01T00:01:00Z")}
	steps := []struct {
		name          string
		do            func() error
		wcu, idx, rru float64
	}{
		{"a put of 1,500 bytes: 2 units, and into the index", func() error {
			_, err := st.PutItem(ctx, &dynamodb.PutItemInput{TableName: views, Item: item(t, "a", 1500, open)})
			return err
		}, 2, 1, 0},
		{"an update growing it to 2,100 bytes: 3 units, index key unchanged", func() error {
			_, err := st.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: views, Key: key,
				UpdateExpression:          aws.String("SET pad2 = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": s(strings.Repeat("y", 600-len("pad2")))}})
			return err
		}, 3, 0, 0},
		{"an update moving it in the index: 3 units, and 2 index units", func() error {
			_, err := st.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: views, Key: key,
				UpdateExpression: aws.String("SET openUntil = :u"), ExpressionAttributeValues: map[string]types.AttributeValue{":u": s("2026-01-01T00:02:00Z")}})
			return err
		}, 3, 2, 0},
		{"a refused conditional write: billed by the item as it is", func() error {
			_, err := st.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: views, Key: key,
				ConditionExpression: aws.String("attribute_not_exists(pk)"), UpdateExpression: aws.String("SET z = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("z")}})
			if err == nil {
				t.Error("the conditional write was not refused")
			}
			return nil
		}, 3, 0, 0},
		{"a strongly consistent read of 2,100 bytes: 1 unit", func() error {
			_, err := st.GetItem(ctx, &dynamodb.GetItemInput{TableName: views, Key: key, ConsistentRead: aws.Bool(true)})
			return err
		}, 0, 0, 1},
		{"an eventually consistent read of a missing item: half a unit", func() error {
			_, err := st.GetItem(ctx, &dynamodb.GetItemInput{TableName: views, Key: map[string]types.AttributeValue{"pk": s("p"), "sk": s("none")}})
			return err
		}, 0, 0, 0.5},
		{"a transaction putting 900 bytes and checking the 2,100-byte item: 2 + 6 units", func() error {
			_, err := st.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: views, Item: item(t, "b", 900, nil)}},
				{ConditionCheck: &types.ConditionCheck{TableName: views, Key: key, ConditionExpression: aws.String("attribute_exists(pk)")}},
			}})
			return err
		}, 8, 0, 0},
		{"an update taking it out of the index: 3 units, 1 index unit", func() error {
			_, err := st.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: views, Key: key, UpdateExpression: aws.String("REMOVE openIn, openUntil")})
			return err
		}, 3, 1, 0},
	}
	for _, step := range steps {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		u := st.take()
		if float64(u.WriteUnits) != step.wcu || float64(u.IndexUnits) != step.idx || u.ReadUnits() != step.rru {
			t.Errorf("%s: billed %d write, %d index, %v read units; want %v, %v, %v", step.name, u.WriteUnits, u.IndexUnits, u.ReadUnits(), step.wcu, step.idx, step.rru)
		}
	}
}

// A tiny load through the deployed functions: every request memdb
// answered is counted once, every event and tick is there, and both paths
// write.
func TestRunLoadCountsEveryRequest(t *testing.T) {
	cfg, err := deployed.LoadPipeline("")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{pathBatch, pathInterval} {
		t.Run(path, func(t *testing.T) {
			l := load{rate: 4, keys: 7, path: path, flush: time.Minute, span: 3 * time.Minute, tail: 8 * time.Minute}
			tl, err := runLoad(context.Background(), cfg, deployedStack, l)
			if err != nil {
				t.Fatal(err)
			}
			if tl.events != 4*180 {
				t.Errorf("events = %d, want %d", tl.events, 4*180)
			}
			if want := 11; tl.tickInvokes != want {
				t.Errorf("tick invocations = %d, want %d (one a minute for 3 + 8 minutes)", tl.tickInvokes, want)
			}
			if len(tl.db.Requests) == 0 || tl.db.WriteUnits == 0 {
				t.Fatalf("nothing counted: %+v", tl.db)
			}
			for op, n := range tl.memdbRequests {
				if tl.db.Requests[op] != n {
					t.Errorf("%s: counted %d requests, memdb answered %d", op, tl.db.Requests[op], n)
				}
			}
			for op, n := range tl.db.Requests {
				if tl.memdbRequests[op] != n {
					t.Errorf("%s: counted %d requests, memdb answered %d", op, n, tl.memdbRequests[op])
				}
			}
			// Both shards' records reach the handler: each shard holds some keys.
			if len(tl.metrics) == 0 {
				t.Error("no custom metrics counted")
			}
		})
	}
}

// Events go to the shard whose half of the 128-bit hash key space MD5 of
// their partition key falls in, and the mapping's batches hold each event
// once, at most batchSize, closed within the batching window.
func TestCutSplitsAsKinesisAndLambdaDo(t *testing.T) {
	half := new(big.Int).Lsh(big.NewInt(1), 127)
	for _, k := range []string{"user-00000", "user-00001", "user-00042", "a", "b"} {
		sum := md5.Sum([]byte(k))
		want := 0
		if new(big.Int).SetBytes(sum[:]).Cmp(half) >= 0 {
			want = 1
		}
		if got := shardOf(k, 2); got != want {
			t.Errorf("shardOf(%q, 2) = %d, want %d", k, got, want)
		}
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := deployedStack
	for _, tc := range []struct {
		rate  int
		flush time.Duration
	}{{1000, 0}, {20, 0}, {20, time.Minute}} {
		evs := generate(tc.rate, 50, 2*time.Minute, start, st.shards)
		invs := cut(evs, st, tc.flush, start, start.Add(2*time.Minute))
		seen := map[int]int{}
		finals := 0
		for _, inv := range invs {
			if inv.tick {
				continue
			}
			if inv.final {
				finals++
				if len(inv.events) != 0 || !inv.at.Equal(inv.window[1]) {
					t.Errorf("rate %d flush %v: a final invocation with %d records at %v, window end %v", tc.rate, tc.flush, len(inv.events), inv.at, inv.window[1])
				}
				continue
			}
			if len(inv.events) > st.batchSize {
				t.Errorf("rate %d: a batch of %d records", tc.rate, len(inv.events))
			}
			first := inv.events[0].arrival()
			if inv.at.Sub(first) > st.batchingWindow {
				t.Errorf("rate %d: a batch invoked %v after its first record", tc.rate, inv.at.Sub(first))
			}
			for _, e := range inv.events {
				seen[e.i]++
				if e.shard != inv.shard {
					t.Errorf("event %d of shard %d in a batch of shard %d", e.i, e.shard, inv.shard)
				}
				if inv.window != nil && (e.arrival().Before(inv.window[0]) || !e.arrival().Before(inv.window[1])) {
					t.Errorf("event %d arrived at %v, outside its interval %v", e.i, e.arrival(), *inv.window)
				}
			}
		}
		if len(seen) != len(evs) {
			t.Errorf("rate %d flush %v: %d of %d events delivered", tc.rate, tc.flush, len(seen), len(evs))
		}
		for i, n := range seen {
			if n != 1 {
				t.Errorf("event %d delivered %d times", i, n)
			}
		}
		if tc.flush > 0 {
			intervals := map[[2]int64]bool{}
			for _, e := range evs {
				intervals[[2]int64{int64(e.shard), e.arrival().Truncate(tc.flush).Unix()}] = true
			}
			if finals != len(intervals) {
				t.Errorf("flush %v: %d final invocations, want %d (one per interval per shard that had records)", tc.flush, finals, len(intervals))
			}
		}
	}
}

// A month priced by hand: an hour of 3,600 events.
func TestPriceArithmetic(t *testing.T) {
	tl := tally{events: 3600, aggInvokes: 100, tickInvokes: 60, billedMs: 100_000, simulated: time.Hour, retention: 30 * 24 * time.Hour,
		db:       usage{WriteUnits: 5000, IndexUnits: 2200, ReadHalfUnits: 7200},
		logBytes: 1_000_000, metrics: map[string]bool{}}
	for i := range 10 {
		tl.metrics[string(rune('a'+i))] = true
	}
	b := price(tl, deployedStack)
	// 730 hours: 116,800 invocations × $0.20/M + 100 s × 730 × 1 GB (the aggregate's 1,024 MB) × $0.0000133334.
	lambda := 116800*0.20/1e6 + 100*730*1.0*0.0000133334
	// 7,200 WRU × 730 × $0.625/M + 3,600 RRU × 730 × $0.125/M.
	dynamo := 7200*730*0.625/1e6 + 3600*730*0.125/1e6
	// 0.73 GB of logs: ingestion $0.50/GB, kept 14 of 30.4167 days at $0.03;
	// 10 metrics × $0.30; 11 alarm metrics × $0.10.
	cw := 0.73*0.50 + 0.73*14/(730/24.0)*0.03 + 10*0.30 + 11*0.10
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"lambda", b.lambda, lambda}, {"dynamodb", b.dynamodb, dynamo}, {"cloudwatch", b.cloudwatch, cw},
		{"wcu per event", b.wruPerEvent, 2}, {"flink", flinkMonthly(), 2*0.11*730 + 50*0.10}} {
		if math.Abs(c.got-c.want) > 1e-9*math.Max(1, c.want) {
			t.Errorf("%s = %.6f, want %.6f", c.name, c.got, c.want)
		}
	}
	if got := windowsPerEvent(mustPipeline(t)); got != 7 {
		t.Errorf("windows per pageviews event = %d, want 7 (tumbling 1, hopping 5m/1m 5, session 1)", got)
	}
	peer := peerPerEvent{idemWCU: 2, idemWrites: 2, windowWCU: 1, windowWrites: 1}
	pb := pricePeer(peer, 1, 7, 1000, 4*time.Millisecond, deployedStack)
	if want := 2.628e6 * 9 * 0.625 / 1e6; math.Abs(pb.dynamodb-want) > 1e-9 {
		t.Errorf("powertools dynamodb = %.6f, want %.6f (2,628,000 events × 9 WRU)", pb.dynamodb, want)
	}
}

// TestProvisionedPriceArithmetic: the provisioned month of the same tally
// as TestPriceArithmetic's — the table sized to keep the hour's average
// (5,000 write units, 3,600 read units: 1.39 and 1 a second) at 70 %,
// with 5 units at least for it and its index — and the burst credit played
// against each instant's demand.
func TestProvisionedPriceArithmetic(t *testing.T) {
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	tl := tally{events: 3600, aggInvokes: 100, tickInvokes: 60, billedMs: 100_000, simulated: time.Hour, retention: 30 * 24 * time.Hour,
		db:       usage{WriteUnits: 5000, IndexUnits: 2200, ReadHalfUnits: 7200},
		logBytes: 1_000_000, metrics: map[string]bool{},
		demand: []demand{{at: at, wu: 1000}, {at: at, wu: 600}, {at: at.Add(time.Second), wu: 3400}}}
	b, p := price(tl, deployedStack), priceProvisioned(tl, deployedStack)
	onDemand := 7200*730*0.625/1e6 + 3600*730*0.125/1e6
	// Write: max(5, ceil(1.389/0.7)) = 5; index max(5, ceil(0.611/0.7)) = 5;
	// read max(5, ceil(1/0.7)) = 5, its index 5.
	capacity := (5+5)*0.00065*730 + (5+5)*0.00013*730
	if p.wcu != 5 || p.rcu != 5 || math.Abs(p.dynamodb-(b.dynamodb-onDemand+capacity)) > 1e-9 || math.Abs(p.cloudwatch-(b.cloudwatch+0.8)) > 1e-9 {
		t.Errorf("provisioned %+v, want 5 WCU, 5 RCU, DynamoDB %.4f, CloudWatch %.4f", p, b.dynamodb-onDemand+capacity, b.cloudwatch+0.8)
	}
	// Credit 1,500 (300 s × 5): 1,600 at the first instant is 100 short;
	// a second later 5 more, 3,400 asked: all short.
	if p.largestBurstWU != 3400 || p.throttledWU != 100+3400-5 {
		t.Errorf("largest burst %d, throttled %d; want 3400 and %d", p.largestBurstWU, p.throttledWU, 100+3400-5)
	}
}

func mustPipeline(t *testing.T) *pipeline.Config {
	t.Helper()
	cfg, err := deployed.LoadPipeline("")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestWindowStateOverLambdasLimitEndsTheWindowEarly: Lambda carries at most
// 1 MB of window state; an invocation that answers with more is followed
// by a final invocation that ends the window early, as on AWS.
func TestWindowStateOverLambdasLimitEndsTheWindowEarly(t *testing.T) {
	win := &[2]time.Time{time.Unix(0, 0), time.Unix(60, 0)}
	big := map[string]string{"p|a": strings.Repeat("x", limits.LambdaWindowStateBytes)}
	small := map[string]string{"p|a": "x"}
	tests := []struct {
		name  string
		inv   invocation
		state map[string]string
		early bool
	}{
		{"carried, past the limit", invocation{window: win, shard: 1}, big, true},
		{"carried, within it", invocation{window: win, shard: 1}, small, false},
		{"already final", invocation{window: win, final: true}, big, false},
		{"no window (per batch)", invocation{}, big, false},
	}
	for _, tc := range tests {
		got := tc.inv.endsEarly(tc.state)
		if (got != nil) != tc.early {
			t.Errorf("%s: ends early %v, want %v", tc.name, got != nil, tc.early)
			continue
		}
		if got != nil && (!got.final || !got.terminatedEarly || got.shard != 1 || got.window != win || len(got.events) != 0) {
			t.Errorf("%s: %+v, want a final invocation with no records on the same shard and window, terminated early", tc.name, got)
		}
		if got != nil && !strings.Contains(string(got.payload(make([]int, 2), tc.state)), `"isWindowTerminatedEarly":true`) {
			t.Errorf("%s: the payload does not say the window was terminated early", tc.name)
		}
	}
}

// The SDK's work per request is measured on requests the handler really
// made, decoded from answers the SDK parses as DynamoDB's, and charged to
// every invocation for each request it made.
func TestSDKCostIsChargedPerRequest(t *testing.T) {
	ctx := context.Background()
	cfg, err := deployed.LoadPipeline("")
	if err != nil {
		t.Fatal(err)
	}
	l := load{rate: 4, keys: 7, path: pathInterval, flush: time.Minute, span: 3 * time.Minute, tail: 8 * time.Minute}
	first, err := runLoad(ctx, cfg, deployedStack, l)
	if err != nil {
		t.Fatal(err)
	}
	if first.sdkCPU != 0 {
		t.Errorf("a run without an SDK cost charged %v", first.sdkCPU)
	}
	for _, op := range []string{"UpdateItem", "GetItem", "Query"} {
		if len(first.samples[op]) == 0 {
			t.Fatalf("no %s sampled: %v", op, first.db.Requests)
		}
	}
	// The recorded answers decode to what the store answered.
	client, h := sdkcost.Client()
	// An item in the answer: an UpdateItem's attributes (a window's
	// closing write), or a GetItem's item (a session state read; closing
	// windows are written in result pages, which answer nothing).
	answered := func(out any) map[string]types.AttributeValue {
		switch o := out.(type) {
		case *dynamodb.UpdateItemOutput:
			return o.Attributes
		case *dynamodb.GetItemOutput:
			return o.Item
		}
		return nil
	}
	checked := 0
	for _, op := range []string{"UpdateItem", "GetItem"} {
		for _, smp := range first.samples[op] {
			want := answered(smp.Out)
			if len(want) == 0 {
				continue
			}
			body, err := sdkcost.AnswerJSON(smp.Out)
			if err != nil {
				t.Fatal(err)
			}
			got, err := sdkcost.Replay(ctx, client, h, smp, body)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(answered(got), want) {
				t.Fatalf("%s: the SDK decoded %v, the store answered %v", op, answered(got), want)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no UpdateItem or GetItem answer with an item sampled")
	}

	cost, err := sdkcost.Measure(ctx, first.samples, 2, cpuTime)
	if err != nil {
		t.Fatal(err)
	}
	for op := range first.samples {
		if cost[op] <= 0 {
			t.Errorf("%s: SDK cost %v, want > 0", op, cost[op])
		}
	}
	l.sdk = cost
	second, err := runLoad(ctx, cfg, deployedStack, l)
	if err != nil {
		t.Fatal(err)
	}
	if want := cost.Of(second.db.Requests); second.sdkCPU != want || want == 0 {
		t.Errorf("charged %v for the SDK, want %v (each request's operation cost)", second.sdkCPU, want)
	}
	if second.aggCPU+second.tickCPU < second.sdkCPU {
		t.Errorf("CPU %v is less than the SDK's share %v", second.aggCPU+second.tickCPU, second.sdkCPU)
	}
}

// The month is priced from the steady state: one more span of load, the
// longer run less the shorter, so what each run does once (the windows of
// its first minutes, those its tail closes half full) is not counted per
// span. A hopping 5m/1m window per key-minute is created, written once
// per flush for five flushes, finalized and published: 7 writes, not the
// 14 windows' worth a single 10-minute run makes.
func TestSteadyLoadCountsOneMoreSpan(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"pageviews","eventTypes":["page_view"],"key":"key","value":"data.ms",
	 "windows":[{"kind":"hopping","size":"5m","advance":"1m"}],"aggregates":["count","max"],"outOfOrderness":"5s",
	 "idleTimeout":"30s","dedupeHorizon":"0s"}`))
	if err != nil {
		t.Fatal(err)
	}
	const rate, keys = 20, 4
	l := load{rate: rate, keys: keys, path: pathInterval, flush: time.Minute, span: 10 * time.Minute, tail: 16 * time.Minute}
	single, err := runLoad(context.Background(), cfg, deployedStack, l)
	if err != nil {
		t.Fatal(err)
	}
	steady, err := steadyLoad(context.Background(), cfg, deployedStack, l)
	if err != nil {
		t.Fatal(err)
	}
	if steady.events != rate*600 || steady.simulated != l.span {
		t.Fatalf("steady state: %d events over %v, want %d over %v", steady.events, steady.simulated, rate*600, l.span)
	}
	keyMinutes := float64(keys * 10)
	hopping := "views:hopping:5m0s:1m0s"
	steadyWrites := float64(steady.db.WriteUnitsBy[hopping]) / keyMinutes
	if steadyWrites < 6.5 || steadyWrites > 8 {
		t.Errorf("steady state: %.2f write units per key-minute for hopping windows, want about 7 (5 flushes, final, published)", steadyWrites)
	}
	if got := float64(single.db.WriteUnitsBy[hopping]) / keyMinutes; got < steadyWrites+0.3 {
		t.Errorf("a single run: %.2f write units per key-minute for hopping windows, want more than the steady state's %.2f (its edge windows)", got, steadyWrites)
	}
	if got := steady.db.IndexUnitsBy[hopping]; got != 0 {
		t.Errorf("steady state: %d index units for hopping windows, want none (windows are found by their listings)", got)
	}
}

// The load is priced at the flush interval the stack deploys with: the
// benchmark's default follows infra/cdk.json's context.
func TestDeployedFlushIntervalIsTheStacks(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "infra", "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cdk struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &cdk); err != nil {
		t.Fatalf("infra/cdk.json: %v", err)
	}
	secs, ok := cdk.Context["tributary:flushIntervalSeconds"].(float64)
	if !ok {
		t.Fatalf("infra/cdk.json: context tributary:flushIntervalSeconds = %v, want a number", cdk.Context["tributary:flushIntervalSeconds"])
	}
	if got := time.Duration(secs) * time.Second; got != deployedStack.flush {
		t.Errorf("infra/cdk.json flushes every %v, bench/load prices %v", got, deployedStack.flush)
	}
}
