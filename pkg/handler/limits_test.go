package handler_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// TestLimitsSetAsideTheSameRecordsHoweverBatched sends one history to two
// handlers with small limits, one as a single batch and one a record per
// batch: a record that would open a key's third window, and records that
// would take a window past its byte bound, are set aside (kind
// state-budget, naming the key) — the same records in both, the batch
// reports no failure — and both emit the same results.
func TestLimitsSetAsideTheSameRecordsHoweverBatched(t *testing.T) {
	ctx := context.Background()
	var recs []rec
	add := func(key string, sec float64, ms int) {
		recs = append(recs, rec{seq: 100 + len(recs), env: request(fmt.Sprint("e", len(recs)), key, sec, fmt.Sprintf(`{"ms":%d}`, ms))})
	}
	// Key /w: three windows open within the out-of-orderness (2 minutes).
	add("/w", 10, 1)
	add("/w", 70, 1)
	add("/w", 130, 1) // a third open window: aside
	add("/w", 75, 2)
	// Key /d: distinct values grow its window; the bound admits about 12.
	for i := range 30 {
		add("/d", 5+float64(i)/10, i%20)
	}
	lim := handler.Limits{MaxOpenWindows: 2, MaxAggregateBytes: 40}
	var asides [][]string
	var outs []string
	for _, perBatch := range []int{len(recs), 1} {
		cfg := setup(t)
		h, err := handler.NewWindowed[Tally](cfg, selectLatency, handler.WithOutOfOrderness(2*time.Minute), handler.WithLimits(lim),
			handler.WithLogger(quiet), handler.WithMetrics(nil))
		if err != nil {
			t.Fatal(err)
		}
		all := kinesisRecords(recs)
		for i := 0; i < len(all); i += perBatch {
			mustBatch(t, h, all[i:min(i+perBatch, len(all))])
		}
		for _, at := range []time.Time{base.Add(time.Hour), base.Add(2 * time.Hour)} {
			if _, err := h.Tick(ctx, at); err != nil {
				t.Fatal(err)
			}
		}
		scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(cfg.QuarantineTable)})
		if err != nil {
			t.Fatal(err)
		}
		var aside []string
		for _, it := range scan.Items {
			var rec setaside.Item
			if err := attributevalue.UnmarshalMap(it, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Field != "key" || rec.Category != setaside.KindStateBudget {
				t.Errorf("set aside as field %q kind %q (%s); want key, %s", rec.Field, rec.Category, rec.Reason, setaside.KindStateBudget)
			}
			aside = append(aside, rec.SequenceNumber)
		}
		slices.Sort(aside)
		asides = append(asides, aside)
		byID, _ := results(t, cfg.OutputStream)
		outs = append(outs, strings.Join(describe(byID), "\n"))
	}
	if len(asides[0]) < 2 || !slices.Contains(asides[0], "102") {
		t.Fatalf("set aside %v; want the third window's record (102) and some of /d's", asides[0])
	}
	if !slices.Equal(asides[0], asides[1]) || outs[0] != outs[1] {
		t.Fatalf("one batch set aside %v and emitted\n%s\none record a batch set aside %v and emitted\n%s", asides[0], outs[0], asides[1], outs[1])
	}
	if !strings.Contains(outs[0], "/w 10:01:00 2 ") {
		t.Errorf("results\n%s\nwant /w's second minute with its two records", outs[0])
	}
}

// TestLimitsEveryKindSetAsideTheSameRecordsHoweverBatched sends a burst of
// one key's records (within one hopping pane, one session, one sliding
// span) to handlers of the other kinds with small limits, as one batch and
// as a record per batch: past the bound (a pane's bytes; the records a
// session or sliding key holds, MaxOpenWindows × (MaxAggregateBytes + 24))
// records are set aside as state-budget naming the key, the same records
// both ways, with the same results.
func TestLimitsEveryKindSetAsideTheSameRecordsHoweverBatched(t *testing.T) {
	ctx := context.Background()
	var recs []rec
	for i := range 20 {
		recs = append(recs, rec{seq: 100 + i, env: request(fmt.Sprint("e", i), "/s", 1+float64(i)/4, fmt.Sprintf(`{"ms":%d}`, i))})
	}
	lim := handler.Limits{MaxOpenWindows: 2, MaxAggregateBytes: 40}
	for _, c := range []struct {
		name string
		opt  handler.Option
	}{
		{"hopping", handler.WithHopping(time.Minute, 30*time.Second)},
		{"sliding", handler.WithSliding(10 * time.Second)},
		{"session", handler.WithSession(10 * time.Second)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asides [][]string
			var outs []string
			for _, perBatch := range []int{len(recs), 1} {
				cfg := setup(t)
				h, err := handler.NewWindowed[Tally](cfg, selectLatency, c.opt, handler.WithLimits(lim), handler.WithLatePolicy(handler.Correct),
					handler.WithAllowedLateness(time.Minute), handler.WithLogger(quiet), handler.WithMetrics(nil))
				if err != nil {
					t.Fatal(err)
				}
				all := kinesisRecords(recs)
				for i := 0; i < len(all); i += perBatch {
					mustBatch(t, h, all[i:min(i+perBatch, len(all))])
				}
				for _, at := range []time.Time{base.Add(time.Hour), base.Add(2 * time.Hour)} {
					if _, err := h.Tick(ctx, at); err != nil {
						t.Fatal(err)
					}
				}
				scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(cfg.QuarantineTable)})
				if err != nil {
					t.Fatal(err)
				}
				var aside []string
				for _, it := range scan.Items {
					var rec setaside.Item
					if err := attributevalue.UnmarshalMap(it, &rec); err != nil {
						t.Fatal(err)
					}
					if rec.Field != "key" || rec.Category != setaside.KindStateBudget || !strings.Contains(rec.Reason, `"/s"`) {
						t.Errorf("set aside as field %q kind %q (%s); want key, %s, naming the key", rec.Field, rec.Category, rec.Reason, setaside.KindStateBudget)
					}
					aside = append(aside, rec.SequenceNumber)
				}
				slices.Sort(aside)
				asides = append(asides, aside)
				byID, _ := results(t, cfg.OutputStream)
				outs = append(outs, strings.Join(describe(byID), "\n"))
			}
			if len(asides[0]) == 0 || len(asides[0]) == len(recs) {
				t.Fatalf("set aside %v; want some of the %d records, not all", asides[0], len(recs))
			}
			if !slices.Equal(asides[0], asides[1]) || outs[0] != outs[1] || outs[0] == "" {
				t.Fatalf("one batch set aside %v and emitted\n%s\none record a batch set aside %v and emitted\n%s", asides[0], outs[0], asides[1], outs[1])
			}
		})
	}
}

// TestTallyKeepsTheMergeLaws checks the tests' aggregate with CheckMergeLaws,
// and that CheckMergeLaws finds a broken one.
func TestTallyKeepsTheMergeLaws(t *testing.T) {
	vals := []int64{5, 1, 5, 9, 0, 3, 3, 3, 120, 7}
	if err := handler.CheckMergeLaws[Tally](vals, 50, 1); err != nil {
		t.Fatal(err)
	}
	err := handler.CheckMergeLaws[lastWins](vals, 50, 1)
	if err == nil || !strings.Contains(err.Error(), "not associative and commutative") {
		t.Fatalf("CheckMergeLaws on a last-value-wins aggregate: %v; want a commutativity violation", err)
	}
}

// TestCheckMergeLawsFindsWhatCannotBeSent: an aggregate that keeps the laws
// but renders a NaN as its result (encoding/json refuses it) would have
// its results set aside at run time, and one whose Add panics on a value
// would have that record set aside: CheckMergeLaws reports each, naming
// what failed, so the author's test finds it first.
func TestCheckMergeLawsFindsWhatCannotBeSent(t *testing.T) {
	if err := handler.CheckMergeLaws[ratio]([]int64{1, 2, 3}, 20, 1); err != nil {
		t.Fatalf("a ratio of values that render: %v", err)
	}
	err := handler.CheckMergeLaws[ratio]([]int64{1, 0, 3}, 20, 1)
	if err == nil || !strings.Contains(err.Error(), "does not render as JSON") {
		t.Errorf("a ratio that becomes NaN: %v; want it found not to render", err)
	}
	err = handler.CheckMergeLaws[ratio]([]int64{1, -1, 3}, 20, 1)
	if err == nil || !strings.Contains(err.Error(), "Add panicked: negative") {
		t.Errorf("an Add that panics: %v; want the panic named", err)
	}
}

// ratio sums values and counts zeros; its result is zeros/zeros × sum
// (NaN once a zero is added and the sum stays, as 0/0 is). Add panics on
// a negative value.
type ratio struct{ Sum, Zeros int64 }

func (r *ratio) Add(v int64) {
	if v < 0 {
		panic("negative")
	}
	r.Sum += v
	if v == 0 {
		r.Zeros++
	}
}
func (r *ratio) Merge(o *ratio) { r.Sum, r.Zeros = r.Sum+o.Sum, r.Zeros+o.Zeros }
func (r *ratio) MarshalBinary() ([]byte, error) {
	return fmt.Appendf(nil, "%d %d", r.Sum, r.Zeros), nil
}
func (r *ratio) UnmarshalBinary(b []byte) error {
	_, err := fmt.Sscan(string(b), &r.Sum, &r.Zeros)
	return err
}
func (r *ratio) MarshalJSON() ([]byte, error) {
	v := float64(r.Sum)
	if r.Zeros > 0 {
		v = math.NaN()
	}
	return json.Marshal(map[string]float64{"value": v})
}

// lastWins keeps the last value added: the zero value is its identity and
// it is associative, but not commutative.
type lastWins struct {
	V   int64
	Set bool
}

func (l *lastWins) Add(v int64) { l.V, l.Set = v, true }
func (l *lastWins) Merge(o *lastWins) {
	if o.Set {
		*l = *o
	}
}
func (l *lastWins) MarshalBinary() ([]byte, error) { return fmt.Appendf(nil, "%d %t", l.V, l.Set), nil }
func (l *lastWins) UnmarshalBinary(b []byte) error {
	_, err := fmt.Sscan(string(b), &l.V, &l.Set)
	return err
}

// TestConfigErrorsNameTheSetting checks that FromEnv names every missing
// variable and NewWindowed every bad option.
func TestConfigErrorsNameTheSetting(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "x")
	t.Setenv(handler.EnvStateTable, "")
	t.Setenv(handler.EnvOutputStream, "out")
	t.Setenv(handler.EnvQuarantineTable, "")
	_, err := handler.FromEnv("statuscodes")
	if err == nil || !strings.Contains(err.Error(), "STATE_TABLE_NAME") || !strings.Contains(err.Error(), "QUARANTINE_TABLE_NAME") || strings.Contains(err.Error(), "OUTPUT_STREAM_NAME") {
		t.Fatalf("FromEnv: %v; want STATE_TABLE_NAME and QUARANTINE_TABLE_NAME named, not OUTPUT_STREAM_NAME", err)
	}
	t.Setenv(handler.EnvStateTable, "state")
	t.Setenv(handler.EnvQuarantineTable, "quarantine")
	cfg, err := handler.FromEnv("statuscodes")
	if err != nil || cfg.StateTable != "state" || cfg.OutputStream != "out" || cfg.QuarantineTable != "quarantine" {
		t.Fatalf("FromEnv: %+v %v", cfg, err)
	}
	for _, c := range []struct {
		opt  handler.Option
		name string
	}{
		{handler.WithWindow(0), "WithWindow"},
		{handler.WithWindow(1500 * time.Microsecond), "WithWindow"},
		{handler.WithOutOfOrderness(-time.Second), "WithOutOfOrderness"},
		{handler.WithIdleTimeout(0), "WithIdleTimeout"},
		{handler.WithDedupeHorizon(8 * 24 * time.Hour), "WithDedupeHorizon"},
		{handler.WithLimits(handler.Limits{MaxOpenWindows: 100, MaxAggregateBytes: 100_000}), "WithLimits"},
		{handler.WithHopping(time.Minute, 7*time.Second), "WithHopping"},
		{handler.WithHopping(time.Minute, 2*time.Minute), "WithHopping"},
		// Every record in 3.6 million windows (a day's in 1,440): each
		// fold lists them all, so one batch takes more memory and time
		// than an invocation has, on every retry.
		{handler.WithHopping(time.Hour, time.Millisecond), "WithHopping"},
		{handler.WithHopping(24*time.Hour, time.Minute), "WithHopping"},
		{handler.WithSliding(0), "WithSliding"},
		{handler.WithSession(-time.Second), "WithSession"},
		{handler.WithLatePolicy(handler.Correct), "WithAllowedLateness"},
		{handler.WithAllowedLateness(time.Minute), "WithAllowedLateness"},
		{handler.WithLatePolicy(handler.LatePolicy(9)), "WithLatePolicy"},
		// Past int: the product would wrap round below the bound.
		{handler.WithLimits(handler.Limits{MaxOpenWindows: math.MaxInt/4 + 1, MaxAggregateBytes: 4}), "WithLimits"},
		{handler.WithLimits(handler.Limits{MaxOpenWindows: 1, MaxAggregateBytes: math.MaxInt}), "WithLimits"},
		{handler.WithConcurrency(0), "WithConcurrency"},
		{handler.WithLogger(nil), "WithLogger"},
		{handler.WithClock(nil), "WithClock"},
	} {
		if _, err := handler.NewWindowed[Tally](cfg, selectLatency, c.opt); err == nil || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: %v; want an error naming it", c.name, err)
		}
	}
	// A handler has one window kind: two options of different kinds are
	// an error naming both, not the last one silently winning.
	if _, err := handler.NewWindowed[Tally](cfg, selectLatency, handler.WithHopping(time.Minute, 10*time.Second), handler.WithSession(time.Minute)); err == nil ||
		!strings.Contains(err.Error(), "WithHopping") || !strings.Contains(err.Error(), "WithSession") {
		t.Errorf("WithHopping and WithSession: %v; want an error naming both", err)
	}
	for _, opts := range [][]handler.Option{{handler.WithSession(time.Minute)}, {handler.WithWindow(time.Hour), handler.WithWindow(time.Minute)},
		{handler.WithHopping(100*time.Minute, time.Minute)}} {
		if _, err := handler.NewWindowed[Tally](cfg, selectLatency, opts...); err != nil {
			t.Errorf("one window kind: %v", err)
		}
	}
	// A nil Option (a helper's "no option") is an error naming its place,
	// not a nil-pointer panic in main.
	if _, err := handler.NewWindowed[Tally](cfg, selectLatency, handler.WithWindow(time.Minute), nil); err == nil || !strings.Contains(err.Error(), "option 2 is nil") {
		t.Errorf("a nil option: %v; want an error naming option 2", err)
	}
	cfg.Name = "Bad/Name"
	if _, err := handler.NewWindowed[Tally](cfg, selectLatency); err == nil || !strings.Contains(err.Error(), "Config.Name") {
		t.Errorf("a bad name: %v", err)
	}
}

// TestSelectedKeyFitsAPartitionKey has a Selector build keys from the
// event (the route and a tenant from its data): a key is its results'
// partition key on the output stream, which Kinesis bounds at 256
// characters, so a longer one could never be put, and its key's records
// would be retried for ever. Each key past the bound is set aside naming
// the key; the others' results are emitted and the batch reports no
// failure.
func TestSelectedKeyFitsAPartitionKey(t *testing.T) {
	ctx := context.Background()
	byTenant := func(ev *handler.Event) (string, int64, error) {
		var d struct {
			Tenant string `json:"tenant"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return "", 0, handler.Refuse("data", "%v", err)
		}
		if d.Tenant == "bytes" {
			return ev.Key + "/\xff", 1, nil
		}
		return ev.Key + "/" + d.Tenant, 1, nil
	}
	for _, tc := range []struct {
		name   string
		tenant string
		aside  bool
	}{
		{"256 bytes", strings.Repeat("t", 256-len("/r/")), false},
		{"257 bytes", strings.Repeat("t", 257-len("/r/")), true},
		{"300 bytes", strings.Repeat("t", 300-len("/r/")), true},
		{"511 bytes", strings.Repeat("t", 511-len("/r/")), true},
		// Kinesis counts characters: 256 of them in two bytes each is a
		// partition key it takes, so the key's results go out.
		{"256 characters, 509 bytes", strings.Repeat("é", 256-len("/r/")), false},
		{"257 characters", strings.Repeat("é", 257-len("/r/")), true},
		// A selector may build a key from bytes: one that is not UTF-8
		// would reach Kinesis and DynamoDB with its bad bytes replaced,
		// another key's results.
		{"not UTF-8", "bytes", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := setup(t)
			h, err := handler.NewWindowed[Tally](cfg, byTenant, handler.WithOutOfOrderness(time.Second), handler.WithLogger(quiet), handler.WithMetrics(nil))
			if err != nil {
				t.Fatal(err)
			}
			recs := []rec{
				{100, request("e0", "/r", 1, `{"tenant":"`+tc.tenant+`"}`)},
				{101, request("e1", "/r", 2, `{"tenant":"short"}`)},
				{102, request("e2", "/r", 200, `{"tenant":"short"}`)}, // closes the first window
			}
			mustBatch(t, h, kinesisRecords(recs))
			scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(cfg.QuarantineTable)})
			if err != nil {
				t.Fatal(err)
			}
			if tc.aside {
				var item setaside.Item
				if len(scan.Items) != 1 || attributevalue.UnmarshalMap(scan.Items[0], &item) != nil || item.SequenceNumber != "100" || item.Field != "key" {
					t.Fatalf("set aside %v; want record 100 naming the key", scan.Items)
				}
			} else if len(scan.Items) != 0 {
				t.Fatalf("set aside %v; want nothing", scan.Items)
			}
			byID, _ := results(t, cfg.OutputStream)
			want := map[string]bool{"/r/short": true, "/r/" + tc.tenant: !tc.aside}
			for _, r := range byID {
				if !want[r.Key] {
					t.Errorf("result of key %.40q…", r.Key)
				}
				delete(want, r.Key)
			}
			for k, w := range want {
				if w {
					t.Errorf("no result of key %.40q…", k)
				}
			}
		})
	}
}

// Wide is an aggregate whose result is far larger than its encoding: a
// count of a few bytes, rendered with 1,100,000 bytes of padding once it
// reaches 3 — more than Kinesis takes in a record.
type Wide struct{ N int64 }

func (w *Wide) Add(int64)     { w.N++ }
func (w *Wide) Merge(o *Wide) { w.N += o.N }

func (w *Wide) MarshalBinary() ([]byte, error) { return binary.AppendVarint(nil, w.N), nil }

func (w *Wide) UnmarshalBinary(b []byte) error {
	v, n := binary.Varint(b)
	if n <= 0 {
		return errors.New("wide: truncated")
	}
	w.N = v
	return nil
}

func (w *Wide) MarshalJSON() ([]byte, error) {
	pad := 0
	if w.N >= 3 {
		pad = 1_100_000
	}
	return json.Marshal(struct {
		N   int64
		Pad string
	}{w.N, strings.Repeat("x", pad)})
}

// TestResultTooLargeForTheStreamIsSetAside: a window whose result renders
// past Kinesis' 1 MiB can be put on no try. Its result is set aside
// (category output-too-large, the result itself as the data) and the other
// keys' results go out; the batch and the ticks succeed rather than hold
// the shard, and a second tick sets nothing aside again.
func TestResultTooLargeForTheStreamIsSetAside(t *testing.T) {
	ctx := context.Background()
	var recs []rec
	for i, key := range []string{"/big", "/big", "/small", "/big"} {
		recs = append(recs, rec{seq: 100 + i, env: request(fmt.Sprint("e", i), key, 5+float64(i), `{"ms":1}`)})
	}
	cfg := setup(t)
	h, err := handler.NewWindowed[Wide](cfg, selectLatency, handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	mustBatch(t, h, kinesisRecords(recs))
	for _, at := range []time.Time{base.Add(time.Hour), base.Add(2 * time.Hour)} {
		if _, err := h.Tick(ctx, at); err != nil {
			t.Fatalf("tick at %s: %v; want the result that cannot be put set aside, not retried", at.Format("15:04"), err)
		}
	}
	byID, _ := results(t, cfg.OutputStream)
	if got := describe(byID); !slices.Equal(got, []string{`/small 10:00:00 1 {"N":1,"Pad":""}`}) {
		t.Errorf("results %q; want /small's alone", got)
	}
	scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(cfg.QuarantineTable)})
	if err != nil {
		t.Fatal(err)
	}
	var aside []setaside.Item
	for _, it := range scan.Items {
		var rec setaside.Item
		if err := attributevalue.UnmarshalMap(it, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Kind != setaside.ItemChunk {
			aside = append(aside, rec)
		}
	}
	if len(aside) != 1 || aside[0].Category != setaside.KindOutputTooLarge || !strings.Contains(aside[0].Reason, `"/big"`) {
		t.Fatalf("set aside %+v; want /big's result, once, as %s", aside, setaside.KindOutputTooLarge)
	}
}

// Picky is a Tally whose Add panics on 13: a bug of the aggregate that one
// record's value triggers.
type Picky struct{ Tally }

func (p *Picky) Add(v int64) {
	if v == 13 {
		var m map[int64]int
		m[v]++ // a nil map: panics
	}
	p.Tally.Add(v)
}

func (p *Picky) Merge(o *Picky) { p.Tally.Merge(&o.Tally) }

// TestPanicOnARecordSetsItAside: a Selector or an aggregate that panics on
// one record's data panics on every retry of it, so a panic that escaped
// the batch would fail it for good and hold the shard. The record is set
// aside naming data, with the panic as its reason; the batch reports no
// failure and the other records are counted.
func TestPanicOnARecordSetsItAside(t *testing.T) {
	ctx := context.Background()
	panicky := func(ev *handler.Event) (string, int64, error) {
		if strings.Contains(string(ev.Data), "boom") {
			var routes []string
			return routes[3], 0, nil // index out of range
		}
		return selectLatency(ev)
	}
	for _, tc := range []struct {
		name string
		new  func(handler.Config) (*handler.Handler, error)
		data string
	}{
		{"Selector", func(cfg handler.Config) (*handler.Handler, error) {
			return handler.NewWindowed[Tally](cfg, panicky, handler.WithLogger(quiet), handler.WithMetrics(nil))
		}, `{"ms":1,"boom":true}`},
		{"Add", func(cfg handler.Config) (*handler.Handler, error) {
			return handler.NewWindowed[Picky](cfg, selectLatency, handler.WithLogger(quiet), handler.WithMetrics(nil))
		}, `{"ms":13}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := setup(t)
			h, err := tc.new(cfg)
			if err != nil {
				t.Fatal(err)
			}
			recs := []rec{
				{100, request("e0", "/r", 1, `{"ms":5}`)},
				{101, request("e1", "/r", 2, tc.data)},
				{102, request("e2", "/r", 3, `{"ms":7}`)},
				{103, request("e3", "/r", 200, `{"ms":1}`)}, // closes the first window
			}
			mustBatch(t, h, kinesisRecords(recs))
			scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(cfg.QuarantineTable)})
			if err != nil {
				t.Fatal(err)
			}
			var item setaside.Item
			if len(scan.Items) != 1 || attributevalue.UnmarshalMap(scan.Items[0], &item) != nil || item.SequenceNumber != "101" ||
				item.Field != "data" || !strings.Contains(item.Reason, "panicked") {
				t.Fatalf("set aside %+v; want record 101 naming data, the panic its reason", item)
			}
			byID, _ := results(t, cfg.OutputStream)
			if got := describe(byID); len(got) != 1 || !strings.HasPrefix(got[0], "/r 10:00:00 2 ") {
				t.Fatalf("results %q; want the first window of /r with the 2 other records", got)
			}
		})
	}
}

// Mean is an average of float values: a producer's values can make its sum
// +Inf, and its rendered mean then has no JSON number.
type Mean struct{ N, Sum float64 }

func (m *Mean) Add(v int64)   { m.N++; m.Sum += float64(v) * 1e304 }
func (m *Mean) Merge(o *Mean) { m.N += o.N; m.Sum += o.Sum }

func (m *Mean) MarshalBinary() ([]byte, error) {
	return binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.Float64bits(m.N)), math.Float64bits(m.Sum)), nil
}

func (m *Mean) UnmarshalBinary(b []byte) error {
	if len(b) != 16 {
		return errors.New("mean: not 16 bytes")
	}
	m.N, m.Sum = math.Float64frombits(binary.LittleEndian.Uint64(b)), math.Float64frombits(binary.LittleEndian.Uint64(b[8:]))
	return nil
}

func (m *Mean) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct{ Mean float64 }{m.Sum / m.N})
}

// TestResultThatCannotRenderIsSetAside: a window whose aggregate cannot be
// rendered (json.Marshal refuses +Inf) fails alike on every try. When no
// one record makes it so (each renders alone; their sum overflows), its
// result is set aside (naming result, with the aggregate's encoding) and
// the other keys' results go out; the batch and the ticks succeed rather
// than hold the shard, and later windows of the key still close.
func TestResultThatCannotRenderIsSetAside(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	h, err := handler.NewWindowed[Mean](cfg, selectLatency, handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	mustBatch(t, h, kinesisRecords([]rec{
		{100, request("e0", "/inf", 1, `{"ms":10000}`)}, // 1e308
		{101, request("e1", "/inf", 2, `{"ms":10000}`)}, // the sum is +Inf
		{102, request("e2", "/ok", 3, `{"ms":2}`)},
		{103, request("e3", "/inf", 70, `{"ms":4}`)},
		{104, request("e4", "/ok", 200, `{"ms":1}`)}, // closes the first two minutes
	}))
	for _, at := range []time.Time{base.Add(time.Hour), base.Add(2 * time.Hour)} {
		if _, err := h.Tick(ctx, at); err != nil {
			t.Fatalf("tick at %s: %v; want the result that cannot render set aside, not retried", at.Format("15:04"), err)
		}
	}
	byID, _ := results(t, cfg.OutputStream)
	want := []string{`/inf 10:01:00 1 {"Mean":4e+304}`, `/ok 10:00:00 1 {"Mean":2e+304}`, `/ok 10:03:00 1 {"Mean":1e+304}`}
	if got := describe(byID); !slices.Equal(got, want) {
		t.Errorf("results %q; want %q", got, want)
	}
	item := soleSetAside(t, cfg.QuarantineTable, "/inf's first result, once")
	if item.Field != "result" || item.Category != setaside.KindInvalid || !strings.Contains(item.Reason, "+Inf") ||
		!strings.Contains(string(item.Data), `"key":"/inf"`) || !strings.Contains(string(item.Data), `"aggregate":`) {
		t.Errorf("set aside %+v; want /inf's result naming result, +Inf in its reason, the aggregate in its data", item)
	}
}

// soleSetAside is the one item of the quarantine table, failing the test
// (saying it wanted want) if there is not exactly one.
func soleSetAside(t *testing.T, table, want string) setaside.Item {
	t.Helper()
	scan, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	var item setaside.Item
	if len(scan.Items) != 1 || attributevalue.UnmarshalMap(scan.Items[0], &item) != nil {
		t.Fatalf("set aside %v; want %s", scan.Items, want)
	}
	return item
}

// TestRecordWhoseValueIsNotFiniteIsSetAside: a record whose value alone
// makes the aggregate's result a NaN or an infinity (here a latency so
// large that its scaled sum is +Inf) would make every window it is in
// unrenderable, and its window's result was set aside whole, naming no
// record. The record is set aside instead, naming data, its value and
// what the result became, counted as set aside, and its window's result
// comes out from the other records.
func TestRecordWhoseValueIsNotFiniteIsSetAside(t *testing.T) {
	cfg := setup(t)
	h, err := handler.NewWindowed[Mean](cfg, selectLatency, handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	mustBatch(t, h, kinesisRecords([]rec{
		{100, request("e0", "/r", 1, `{"ms":1}`)},
		{101, request("e1", "/r", 2, `{"ms":60000}`)}, // 6e308: +Inf alone
		{102, request("e2", "/r", 3, `{"ms":3}`)},
		{103, request("e3", "/r", 200, `{"ms":1}`)}, // closes the first window
	}))
	byID, _ := results(t, cfg.OutputStream)
	if got, want := describe(byID), []string{`/r 10:00:00 2 {"Mean":2e+304}`}; !slices.Equal(got, want) {
		t.Errorf("results %q; want %q: the first window from its two other records", got, want)
	}
	item := soleSetAside(t, cfg.QuarantineTable, "record 101 alone")
	if item.SequenceNumber != "101" || item.Field != "data" || item.Category != setaside.KindInvalid ||
		!strings.Contains(item.Reason, "60000") || !strings.Contains(item.Reason, "+Inf") || !strings.Contains(string(item.Data), `"ms":60000`) {
		t.Errorf("set aside %+v; want record 101 naming data, its value 60000 and +Inf in the reason, its data kept", item)
	}
	if st := h.Stats(); st.SetAside != 1 {
		t.Errorf("stats %+v; want the record counted as set aside", st)
	}
}

// TestUnreadableStateSetsItsKeysRecordsAside: a key whose stored state no
// longer decodes (written by code that stored another shape, or damaged)
// has its records set aside, naming the key and its item, and the batch
// reports no failure, so the shard moves on and other keys' results come
// out; without it every batch holding one of the key's records failed until
// Lambda gave up on it.
func TestUnreadableStateSetsItsKeysRecordsAside(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	h, err := handler.NewWindowed[Tally](cfg, selectLatency, handler.WithOutOfOrderness(5*time.Second),
		handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	mustBatch(t, h, kinesisRecords([]rec{{seq: 100, env: request("e0", "/bad", 1, `{"ms":1}`)}}))
	// Damage /bad's state item: a blob no version of the codec reads.
	scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(cfg.StateTable)})
	if err != nil {
		t.Fatal(err)
	}
	damaged := 0
	for _, it := range scan.Items {
		if _, ok := it["state"].(*types.AttributeValueMemberB); !ok {
			continue
		}
		it["state"] = &types.AttributeValueMemberB{Value: []byte{0xff, 0x01, 0x02}}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(cfg.StateTable), Item: it}); err != nil {
			t.Fatal(err)
		}
		damaged++
	}
	if damaged != 1 {
		t.Fatalf("damaged %d state items; want /bad's one", damaged)
	}
	// A new instance (a cold start): the first one caches the state it wrote.
	if h, err = handler.NewWindowed[Tally](cfg, selectLatency, handler.WithOutOfOrderness(5*time.Second),
		handler.WithLogger(quiet), handler.WithMetrics(nil)); err != nil {
		t.Fatal(err)
	}
	mustBatch(t, h, kinesisRecords([]rec{
		{seq: 101, env: request("e1", "/bad", 2, `{"ms":2}`)},
		{seq: 102, env: request("e2", "/good", 3, `{"ms":3}`)},
		{seq: 103, env: request("e3", "/bad", 4, `{"ms":4}`)},
		{seq: 104, env: request("e4", "/good", 200, `{"ms":5}`)},
	}))
	// The tick closes /good's window, and no longer meets /bad's state: set
	// aside (a copy of it) and unlisted by the batch that found it due.
	if _, err := h.Tick(ctx, base.Add(time.Hour)); err != nil {
		t.Errorf("tick: %v; want /bad's state set aside, not a failure", err)
	}
	aside, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(cfg.QuarantineTable)})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []string
	states := 0
	for _, it := range aside.Items {
		var rec setaside.Item
		if err := attributevalue.UnmarshalMap(it, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Category != setaside.KindStateUnreadable || !strings.Contains(rec.Reason, `key "/bad"`) || !strings.Contains(rec.Reason, "does not decode") {
			t.Errorf("set aside %s as field %q kind %q: %s; want %s, naming /bad", rec.SequenceNumber, rec.Field, rec.Category, rec.Reason, setaside.KindStateUnreadable)
		}
		switch rec.Field {
		case "key":
			seqs = append(seqs, rec.SequenceNumber)
		case "state":
			states++
		default:
			t.Errorf("set aside %s as field %q; want key (a record) or state (the item)", rec.SequenceNumber, rec.Field)
		}
	}
	slices.Sort(seqs)
	if !slices.Equal(seqs, []string{"101", "103"}) || states != 1 {
		t.Errorf("set aside records %v and %d states; want /bad's records of the second batch, 101 and 103, and its state once", seqs, states)
	}
	byID, _ := results(t, cfg.OutputStream)
	if got := strings.Join(describe(byID), "\n"); !strings.Contains(got, "/good 10:00:00 1 ") {
		t.Errorf("results\n%s\nwant /good's first minute, its one record", got)
	}
}
