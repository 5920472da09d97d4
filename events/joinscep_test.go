package events

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/cep"
	"github.com/tributary-dev/tributary/pkg/join"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// The samples of the join, detect and rules functions (see doc.go), in a
// file of their own.
func init() {
	cases["join/kinesis-search-click.json"] = joinBatch
	cases["join/eventbridge-tick.json"] = joinTick
	cases["detect/kinesis-payments.json"] = detectBatch
	cases["rules/function-url-add.json"] = rulesCase(201, `"id":"fail-then-big"`)
	cases["rules/function-url-add-invalid.json"] = rulesCase(400, `"part":"pattern[0].where"`)
	cases["rules/function-url-test.json"] = rulesCase(200, `"matches":[{"id":"fail-then-big:`)
}

func deployedJoin(t *testing.T) *join.Config {
	raw, err := os.ReadFile(filepath.Join("..", "pipelines", "search-click.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := join.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// outputs reads the stream and names its records "<type> <data.left.id>,<data.right.id>"
// or "<type> <key> <matched>/<left>", once per id.
func outputs(t *testing.T, e env) []string {
	t.Helper()
	ctx := context.Background()
	it, err := e.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(e.name), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var got []string
	for _, r := range out.Records {
		var env stream.Envelope
		if err := stream.Unmarshal(r.Data, &env); err != nil {
			t.Fatal(err)
		}
		if seen[env.ID] {
			continue
		}
		seen[env.ID] = true
		switch env.Type {
		case join.TypeRate:
			var d join.RateData
			_ = json.Unmarshal(env.Data, &d)
			got = append(got, fmt.Sprintf("%s %s %s %d/%d", env.Type, env.Key, d.Start.Format("15:04"), d.Matched, d.Left))
		case cep.TypeMatch:
			var d cep.MatchData
			_ = json.Unmarshal(env.Data, &d)
			var ids []string
			for _, ev := range d.Events {
				ids = append(ids, ev.ID)
			}
			got = append(got, d.Rule+" "+env.Key+" "+strings.Join(ids, ","))
		default:
			var d join.Data
			_ = json.Unmarshal(env.Data, &d)
			l, r := "null", "null"
			if d.Left != nil {
				l = d.Left.ID
			}
			if d.Right != nil {
				r = d.Right.ID
			}
			got = append(got, env.Type+" "+l+","+r)
		}
	}
	sort.Strings(got)
	return got
}

func newStateAndStream(t *testing.T, e env) {
	t.Helper()
	ctx := context.Background()
	if err := state.CreateTable(ctx, e.db, e.name); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	w := kinesis.NewStreamExistsWaiter(e.kin, func(o *kinesis.StreamExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(e.name)}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

func joinHandler(t *testing.T, e env, now *time.Time) *join.Handler {
	return join.New(deployedJoin(t), state.NewViews(e.db, e.name, nil), e.kin, e.name, join.DefaultLimits,
		keyed.WithClock(func() time.Time { return *now }))
}

// joinBatch: srch-1 and clk-1 (sess-1) join; srch-2 (sess-2) gets no
// click, and srch-3 at 10:42 moves the watermark past its 30 s: unmatched.
// Delivered twice, nothing more comes out.
func joinBatch(t *testing.T, e env, raw []byte) {
	newStateAndStream(t, e)
	now := time.Date(2026, 11, 29, 10, 42, 1, 0, time.UTC)
	h := joinHandler(t, e, &now)
	for range 2 {
		out, err := h.Invoke(context.Background(), raw)
		if err != nil || string(out) != `{"batchItemFailures":[]}` {
			t.Fatalf("Invoke = %s, %v", out, err)
		}
	}
	if got, want := outputs(t, e), []string{"joined srch-1,clk-1", "unmatched srch-2,null"}; !reflect.DeepEqual(got, want) {
		t.Errorf("joins stream %v, want %v", got, want)
	}
}

// joinTick: after the batch above, the tick at 10:50 starts the idle
// shard's clock, the one at 10:51 moves its watermark to 10:50:35: srch-3
// is unmatched, and the minute 10:41 is final for both sessions (sess-1
// one search of one clicked, sess-2 none of one) and 10:42 for sess-2.
func joinTick(t *testing.T, e env, raw []byte) {
	newStateAndStream(t, e)
	now := time.Date(2026, 11, 29, 10, 42, 1, 0, time.UTC)
	h := joinHandler(t, e, &now)
	batch, err := os.ReadFile("join/kinesis-search-click.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Invoke(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"10:50", "10:51"} {
		now, _ = time.Parse(time.RFC3339, "2026-11-29T"+at+":00Z")
		if out, err := h.Invoke(context.Background(), raw); err != nil || !strings.Contains(string(out), `"shards":1`) {
			t.Fatalf("tick at %s: %s, %v", at, out, err)
		}
	}
	want := []string{"join_rate sess-1 10:41 1/1", "join_rate sess-2 10:41 0/1", "join_rate sess-2 10:42 0/1",
		"joined srch-1,clk-1", "unmatched srch-2,null", "unmatched srch-3,null"}
	if got := outputs(t, e); !reflect.DeepEqual(got, want) {
		t.Errorf("joins stream %v, want %v", got, want)
	}
}

// detectBatch: with the rule of rules/function-url-add.json in the rules
// table, acct-1's failed payment, a page view and a payment of 150 are one
// match (the page view skipped); acct-2's payment of 500 follows no failure.
func detectBatch(t *testing.T, e env, raw []byte) {
	newStateAndStream(t, e)
	ctx := context.Background()
	if err := cep.CreateRulesTable(ctx, e.db, e.name+"-rules"); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC) // the rule applies from 10:00:10
	store := cep.NewStore(e.db, e.name+"-rules", func() time.Time { return now })
	var req lambdaevents.LambdaFunctionURLRequest
	addRaw, _ := os.ReadFile("rules/function-url-add.json")
	decode(t, addRaw, &req)
	r, err := cep.ParseRule([]byte(req.Body))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Add(ctx, r); err != nil {
		t.Fatal(err)
	}
	raw0, _ := os.ReadFile(filepath.Join("..", "pipelines", "detect.json"))
	cfg, err := cep.ParseConfig(raw0)
	if err != nil {
		t.Fatal(err)
	}
	h := cep.NewHandler(cfg, state.NewViews(e.db, e.name, nil), e.kin, e.name, store, func() time.Time { return now })
	for range 2 {
		out, err := h.Invoke(ctx, raw)
		if err != nil || string(out) != `{"batchItemFailures":[]}` {
			t.Fatalf("Invoke = %s, %v", out, err)
		}
	}
	if got, want := outputs(t, e), []string{"fail-then-big acct-1 pay-1,pay-2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("matches stream %v, want %v", got, want)
	}
}

func rulesCase(status int, body string) func(t *testing.T, e env, raw []byte) {
	return func(t *testing.T, e env, raw []byte) {
		ctx := context.Background()
		if err := cep.CreateRulesTable(ctx, e.db, e.name); err != nil {
			t.Fatal(err)
		}
		var req lambdaevents.LambdaFunctionURLRequest
		decode(t, raw, &req)
		resp, err := cep.NewAdmin(cep.NewStore(e.db, e.name, nil), nil, nil).Handle(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != status || !strings.Contains(resp.Body, body) {
			t.Errorf("answer %d %s, want %d with %s", resp.StatusCode, resp.Body, status, body)
		}
	}
}
