package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/pkg/cep"
	"github.com/tributary-dev/tributary/pkg/join"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/window"
)

type config struct {
	events, joinEvents int
	rules              []int
	verbose            bool
	onlyCEP            bool // profiling: skip the join
}

func (c config) logf(w io.Writer, format string, args ...any) {
	if c.verbose {
		fmt.Fprintf(w, "cep: "+format+"\n", args...)
	}
}

func run(ctx context.Context, cfg config, out, log io.Writer) error {
	payloads := cepWorkload(cfg.events)
	for _, n := range cfg.rules {
		rules := ruleSet(n)
		idx, idxMatches, err := throughput(payloads, rules, false)
		if err != nil {
			return err
		}
		naive, naiveMatches, err := throughput(payloads, rules, true)
		if err != nil {
			return err
		}
		if idxMatches != naiveMatches {
			return fmt.Errorf("%d rules: the index found other matches than evaluating every rule (%s vs %s)", n, idxMatches, naiveMatches)
		}
		cfg.logf(log, "%d rules: %s", n, idxMatches)
		fmt.Fprintf(out, "BENCH cep rules=%d events_per_s=%.0f naive_events_per_s=%.0f ratio=%.1f\n", n, idx, naive, idx/naive)
	}
	if cfg.onlyCEP {
		return nil
	}
	return joinWrites(ctx, cfg, out, log)
}

var base = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

const (
	numTypes    = 200
	numAccounts = 2000
	batchSize   = 500 // detect's mapping BatchSize
)

func typeName(i int) string { return fmt.Sprintf("t%03d", i%numTypes) }

// cepWorkload is Lambda Kinesis payloads of n events: 2,000 accounts,
// 200 event types, amounts and countries in data, event times slightly
// out of order.
func cepWorkload(n int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var payloads [][]byte
	var recs []events.KinesisEventRecord
	clock := base
	countries := []string{"NZ", "AU", "NO", "DE", "US", "JP", "BR", "IN", "FR", "GB"}
	for i := 0; i < n; i++ {
		clock = clock.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
		et := clock.Add(-time.Duration(rng.IntN(1500)) * time.Millisecond)
		acct := fmt.Sprintf("acct-%04d", rng.IntN(numAccounts))
		if rng.IntN(6) == 0 {
			acct = "vip-" + acct
		}
		env := stream.Envelope{ID: fmt.Sprintf("e%07d", i), Type: typeName(rng.IntN(numTypes)), Key: acct,
			OccurredAt: et, SentAt: et, ReceivedAt: clock,
			Data: json.RawMessage(fmt.Sprintf(`{"amount":%d,"country":%q,"tier":"t%d"}`, rng.IntN(2000), countries[rng.IntN(len(countries))], rng.IntN(4)))}
		b, _ := json.Marshal(&env)
		seq := strconv.Itoa(1_000_000 + i)
		recs = append(recs, events.KinesisEventRecord{EventID: "shardId-000000000000:" + seq, EventSource: "aws:kinesis", EventName: "aws:kinesis:record",
			EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/events",
			Kinesis:        events.KinesisRecord{SequenceNumber: seq, PartitionKey: acct, Data: b, ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: clock}}})
		if len(recs) == batchSize || i == n-1 {
			p, _ := json.Marshal(events.KinesisEvent{Records: recs})
			payloads = append(payloads, p)
			recs = nil
		}
	}
	return payloads
}

// ruleSet is n rules of every form over the 200 types: filters, sequences
// (followedBy and next), absences and count thresholds; every third rule is
// limited to five accounts (keys), every sixth to the vip- prefix.
func ruleSet(n int) []*cep.StoredRule {
	rng := rand.New(rand.NewPCG(uint64(n), 3))
	var out []*cep.StoredRule
	for i := 0; i < n; i++ {
		a, b := typeName(rng.IntN(numTypes)), typeName(rng.IntN(numTypes))
		var doc string
		switch i % 4 {
		case 0:
			doc = fmt.Sprintf(`{"id":"r%d","pattern":[{"begin":"p","type":%q,"where":"data.amount > %d && data.country in ('NZ','AU')"}]`, i, a, 1000+rng.IntN(900))
		case 1:
			doc = fmt.Sprintf(`{"id":"r%d","pattern":[{"begin":"a","type":%q},{"followedBy":"b","type":%q,"where":"data.amount > 1500"}],"within":"1m"`, i, a, b)
		case 2:
			doc = fmt.Sprintf(`{"id":"r%d","pattern":[{"begin":"a","type":%q,"where":"data.tier == 't0'"},{"notFollowedBy":"b","type":%q}],"within":"30s"`, i, a, b)
		case 3:
			doc = fmt.Sprintf(`{"id":"r%d","pattern":[{"begin":"a","type":%q},{"next":"b","type":%q}],"within":"1m"`, i, a, b)
		}
		switch {
		case i%6 == 5:
			doc += `,"keyPrefix":"vip-"`
		case i%3 == 2:
			var keys []string // five accounts, each once (a rule refuses a key twice)
			for len(keys) < 5 {
				if k := fmt.Sprintf("%q", fmt.Sprintf("acct-%04d", rng.IntN(numAccounts))); !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
			doc += `,"keys":[` + strings.Join(keys, ",") + `]`
		}
		r, err := cep.ParseRule([]byte(doc + "}"))
		if err != nil {
			panic(fmt.Sprintf("rule %s: %v", doc, err))
		}
		out = append(out, &cep.StoredRule{Rule: r, Status: cep.StatusActive, Intervals: []cep.Interval{{From: time.Unix(0, 0)}}})
	}
	if n > 0 && len(out) > 3 {
		// A count threshold too, on a busy type.
		r, _ := cep.ParseRule([]byte(`{"id":"busy","pattern":[{"begin":"x","type":"t007","timesOrMore":3}],"within":"10s"}`))
		out[3] = &cep.StoredRule{Rule: r, Status: cep.StatusActive, Intervals: []cep.Interval{{From: time.Unix(0, 0)}}}
	}
	return out
}

// throughput runs every payload through the detect function's processing
// path on one core and returns events per second and a digest of the
// matches.
func throughput(payloads [][]byte, rules []*cep.StoredRule, naive bool) (float64, string, error) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	now := func() time.Time { return base }
	op := cep.NewOperator(cep.NewRuleSet(rules, base), now)
	op.Naive(naive)
	states := map[string][]byte{}
	wm := window.NewWatermark(2 * time.Second)
	var b stream.KinesisBatch
	var env stream.Envelope
	var ids []string
	n := 0
	runtime.GC()
	start := time.Now()
	for _, p := range payloads {
		if err := b.Decode(p); err != nil {
			return 0, "", err
		}
		byKey := map[string][]int{}
		var keys []string
		type folded struct {
			key string
			wm  time.Time
		}
		var its []folded
		var vals []cep.Event
		for i := range b.Records {
			n++
			rec := &b.Records[i]
			if err := rec.DecodeEnvelope(&env); err != nil {
				return 0, "", err
			}
			key, v, sel, err := op.Select(rec, &env)
			if err != nil {
				return 0, "", err
			}
			before := wm.Current()
			wm.Observe(env.EventTime().Truncate(time.Millisecond))
			if sel != keyed.Fold {
				continue
			}
			if _, ok := byKey[key]; !ok {
				keys = append(keys, key)
			}
			byKey[key] = append(byKey[key], len(its))
			its = append(its, folded{key, before})
			vals = append(vals, v)
		}
		for _, key := range keys {
			st, err := op.NewState(key, states[key])
			if err != nil {
				return 0, "", err
			}
			st.Compact()
			for _, i := range byKey[key] {
				st.Add(vals[i], its[i].wm)
			}
			st.Advance(wm.Current())
			recs, err := st.Render()
			if err != nil {
				return 0, "", err
			}
			for _, r := range recs {
				var e struct {
					ID string `json:"id"`
				}
				_ = json.Unmarshal(r.Data, &e)
				ids = append(ids, e.ID)
			}
			if states[key], err = st.Encode(nil); err != nil {
				return 0, "", err
			}
		}
	}
	elapsed := time.Since(start)
	sort.Strings(ids)
	return float64(n) / elapsed.Seconds(), fmt.Sprintf("%d matches, first %s, last %s", len(ids), first(ids), last(ids)), nil
}

func first(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return s[0]
}

func last(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return s[len(s)-1]
}

// joinWrites measures the deployed join's DynamoDB writes per 1,000 events.
func joinWrites(ctx context.Context, cfg config, out, log io.Writer) error {
	root, err := standin.RepoRoot()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(root, "pipelines", "search-click.json"))
	if err != nil {
		return err
	}
	jc, err := join.Parse(raw)
	if err != nil {
		return fmt.Errorf("pipelines/search-click.json: %w", err)
	}
	srv, counter, err := standin.StartCounting(ctx, standin.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer srv.Stop()
	awsCfg, err := standin.Config(ctx, srv.Endpoint())
	if err != nil {
		return err
	}
	db, kin := dynamodb.NewFromConfig(awsCfg), kinesis.NewFromConfig(awsCfg)
	recs := joinWorkload(jc, cfg.joinEvents)
	for _, dedupe := range []bool{true, false} {
		name := fmt.Sprintf("join-%v", dedupe)
		if err := state.CreateTable(ctx, db, name); err != nil {
			return err
		}
		if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)}); err != nil {
			return err
		}
		w := kinesis.NewStreamExistsWaiter(kin, func(o *kinesis.StreamExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
		if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, 20*time.Second); err != nil {
			return err
		}
		clock := base.Add(10 * time.Minute)
		opts := []keyed.Option{keyed.WithClock(func() time.Time { return clock })}
		if dedupe {
			opts = append(opts, keyed.WithDedupe(keyed.NewLedger(db, name, jc.Name, jc.DedupeHorizon)))
		}
		h := join.New(jc, state.NewViews(db, name, nil), kin, name, join.DefaultLimits, opts...)
		counter.Reset()
		for i := 0; i < len(recs); i += 100 {
			resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: recs[i:min(i+100, len(recs))]})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				return fmt.Errorf("join batch at %d: %v %v", i, resp.BatchItemFailures, err)
			}
		}
		// Ticks close every window still open (the idle shard's watermark
		// moves by processing time).
		for k := 0; k < 2; k++ {
			clock = clock.Add(time.Hour)
			if _, err := h.Tick(ctx, clock); err != nil {
				return err
			}
		}
		snap := counter.Snapshot()
		wu, err := snap.WriteUnits(ctx, db)
		if err != nil {
			return err
		}
		st := h.Stats()
		per1k := func(n int) float64 { return float64(n) * 1000 / float64(len(recs)) }
		cfg.logf(log, "join dedupe=%v: %d events, %d outputs, %d state writes, %d writes in all", dedupe, len(recs), st.Outputs, st.StateWrites, snap.WriteRequests())
		label := "BENCH join"
		if !dedupe {
			label += " dedupe=off"
		}
		fmt.Fprintf(out, "%s writes_per_1k=%.0f wcu_per_1k=%.0f\n", label, per1k(snap.WriteRequests()), per1k(wu.Total))
	}
	return nil
}

// joinWorkload is n searches and clicks of sessions in arrival order: each
// session searches once or twice, and about 60% of searches get a click 1
// to 20 s later (some arriving before their search).
func joinWorkload(jc *join.Config, n int) []events.KinesisEventRecord {
	rng := rand.New(rand.NewPCG(4, 5))
	type ev struct {
		env     stream.Envelope
		arrival time.Time
	}
	var evs []ev
	for s := 0; len(evs) < n; s++ {
		key := fmt.Sprintf("sess-%04d", s%400)
		t := base.Add(time.Duration(rng.IntN(300_000)) * time.Millisecond)
		add := func(id, typ string, at time.Time, jitter time.Duration) {
			e := stream.Envelope{ID: id, Type: typ, Key: key, OccurredAt: at, SentAt: at, ReceivedAt: at.Add(jitter), Data: json.RawMessage(`{"q":"x"}`)}
			evs = append(evs, ev{e, at.Add(jitter)})
		}
		add(fmt.Sprintf("s%d", s), jc.Left, t, time.Duration(rng.IntN(2000))*time.Millisecond)
		if rng.IntN(10) < 6 && len(evs) < n {
			add(fmt.Sprintf("c%d", s), jc.Right, t.Add(time.Duration(1+rng.IntN(20))*time.Second), time.Duration(rng.IntN(2000))*time.Millisecond)
		}
	}
	evs = evs[:n]
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].arrival.Before(evs[j].arrival) })
	out := make([]events.KinesisEventRecord, len(evs))
	for i, e := range evs {
		b, _ := json.Marshal(&e.env)
		seq := strconv.Itoa(5_000_000 + i)
		out[i] = events.KinesisEventRecord{EventID: "shardId-000000000000:" + seq, EventSource: "aws:kinesis", EventName: "aws:kinesis:record",
			EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/events",
			Kinesis:        events.KinesisRecord{SequenceNumber: seq, PartitionKey: e.env.Key, Data: b, ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: e.arrival}}}
	}
	return out
}
