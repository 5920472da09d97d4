package handler_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	types "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// bulkBytes is what one record adds to a Bulk's encoding: a pane of one
// record is within DefaultLimits' 16 KB, a window merging eight is not.
const bulkBytes = 15_000

// Bulk is an aggregate whose encoding grows with what it merges (as a
// list of values does, not a sum): a hopping window's result merges its
// panes, so it is several times a pane.
type Bulk struct{ N int64 }

func (b *Bulk) Add(int64)     { b.N++ }
func (b *Bulk) Merge(o *Bulk) { b.N += o.N }

func (b *Bulk) MarshalBinary() ([]byte, error) {
	return append(binary.AppendVarint(nil, b.N), make([]byte, b.N*bulkBytes)...), nil
}

func (b *Bulk) UnmarshalBinary(p []byte) error {
	v, n := binary.Varint(p)
	if n <= 0 || int64(len(p)-n) != v*bulkBytes {
		return errors.New("bulk: bad encoding")
	}
	b.N = v
	return nil
}

func (b *Bulk) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf(`{"N":%d}`, b.N)), nil }

// asideOfTable reads the quarantine table's set-aside records (not their
// chunks).
func asideOfTable(t *testing.T, table string) []setaside.Item {
	t.Helper()
	scan, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	var out []setaside.Item
	for _, it := range scan.Items {
		var rec setaside.Item
		if err := attributevalue.UnmarshalMap(it, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Kind != setaside.ItemChunk {
			out = append(out, rec)
		}
	}
	return out
}

// TestResultsThatOutgrowTheItemAreSetAside: a key of hopping windows (8
// minutes, advancing by 1) holds 8 panes of 15 KB, within its limits; when
// the watermark jumps past them, its 15 windows close at once, and their
// results (each merging up to 8 panes) are about 960 KB, which its state
// item holds until they are on the stream: no retry can write it. The
// jump came in a batch holding another /big record (the fold), or only
// other keys' records (the close): before, the first failed its batch on
// every retry until Lambda gave up on it, the second failed every batch of
// the shard and every tick. Now the batch's /big record is set aside
// (state-budget, naming the key) and, when a close meets the state (the
// batch's end, here), a copy of it is set aside once and the key unlisted; batches and ticks succeed
// and /small's results come out.
func TestResultsThatOutgrowTheItemAreSetAside(t *testing.T) {
	for _, c := range []struct {
		name      string
		jump      []rec // the batch whose watermark passes /big's windows
		wantField []string
	}{
		{name: "fold", jump: []rec{{seq: 200, env: request("j0", "/big", 3600, `{"ms":1}`)}, {seq: 201, env: request("j1", "/small", 3601, `{"ms":1}`)}},
			wantField: []string{"key 200", "state"}},
		{name: "close", jump: []rec{{seq: 200, env: request("j0", "/small", 3600, `{"ms":1}`)}},
			wantField: []string{"state"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := setup(t)
			h := bigKey(t, cfg)
			resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: kinesisRecords(c.jump)})
			if err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("the batch that closes /big's windows: %+v %v; want no failure: no retry can write them", resp, err)
			}
			for _, at := range []time.Time{base.Add(3 * time.Hour), base.Add(4 * time.Hour)} {
				if _, err := h.Tick(ctx, at); err != nil {
					t.Fatalf("tick at %s: %v; want /big set aside, not a failure", at.Format("15:04"), err)
				}
			}
			var got []string
			for _, a := range asideOfTable(t, cfg.QuarantineTable) {
				if a.Category != setaside.KindStateBudget || !strings.Contains(a.Reason, `key "/big"`) {
					t.Errorf("set aside %s field %q as %s: %s; want %s naming /big", a.SequenceNumber, a.Field, a.Category, a.Reason, setaside.KindStateBudget)
				}
				if a.Field == "key" {
					got = append(got, "key "+a.SequenceNumber)
				} else {
					got = append(got, a.Field)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, c.wantField) {
				t.Errorf("set aside %v; want %v", got, c.wantField)
			}
			byID, _ := results(t, cfg.OutputStream)
			if d := strings.Join(describe(byID), "\n"); !strings.Contains(d, "/small") {
				t.Errorf("results\n%s\nwant /small's", d)
			}
		})
	}
}

// parkFaults is DynamoDB (moto) with one fault aimed at what a close does
// with a key it parks: the set-aside of its state copy, the write that
// unlists it, or the open index read after it.
type parkFaults struct {
	handler.DynamoDB
	key   string // the parked key, as its item's pk ends
	fault string
	armed atomic.Bool
	stale map[string]types.AttributeValue // the key's index entry before the unlist
}

var errInjectedThrottle = &types.ProvisionedThroughputExceededException{Message: aws.String("injected throttle")}

func (p *parkFaults) ofKey(key map[string]types.AttributeValue) bool {
	pk, ok := key["pk"].(*types.AttributeValueMemberS)
	return ok && strings.HasSuffix(pk.Value, p.key)
}

func (p *parkFaults) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	if p.fault == "set-aside throttled" && p.armed.CompareAndSwap(true, false) {
		return nil, errInjectedThrottle
	}
	return p.DynamoDB.BatchWriteItem(ctx, in, opts...)
}

func (p *parkFaults) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, quarantine := in.Key["source"]; quarantine && p.fault == "set-aside throttled" && p.armed.CompareAndSwap(true, false) {
		return nil, errInjectedThrottle // the set-aside item itself (its chunks go by BatchWriteItem)
	}
	if !p.ofKey(in.Key) || !p.armed.Load() {
		return p.DynamoDB.UpdateItem(ctx, in, opts...)
	}
	switch p.fault {
	case "unlist throttled":
		p.armed.Store(false)
		return nil, errInjectedThrottle
	case "unlist made, its answer lost, the SDK's retry refused":
		p.armed.Store(false)
		if _, err := p.DynamoDB.UpdateItem(ctx, in, opts...); err != nil {
			return nil, err
		}
		return p.DynamoDB.UpdateItem(ctx, in, opts...) // the condition fails now
	case "open index behind the unlist":
		out, err := p.DynamoDB.UpdateItem(ctx, in, opts...)
		if err == nil {
			p.armed.Store(false)
		}
		return out, err
	}
	return p.DynamoDB.UpdateItem(ctx, in, opts...)
}

// Query answers open index reads made after the unlist as the index did
// before it, still listing the parked key: a global secondary index is
// eventually consistent.
func (p *parkFaults) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := p.DynamoDB.Query(ctx, in, opts...)
	if p.fault != "open index behind the unlist" || err != nil || aws.ToString(in.IndexName) == "" {
		return out, err
	}
	listed := false
	for _, it := range out.Items {
		if p.ofKey(it) {
			p.stale, listed = it, true
		}
	}
	if !p.armed.Load() && p.stale != nil && !listed {
		out.Items = append(out.Items, p.stale)
	}
	return out, err
}

// bigKey is a handler of 8-minute hopping windows whose key /big has one
// record in each of 8 minutes: the results its windows close at once (a
// merge of all of them each) outgrow the key's state item.
func bigKey(t *testing.T, cfg handler.Config) *handler.Handler {
	t.Helper()
	h, err := handler.NewWindowed[Bulk](cfg, selectLatency, handler.WithHopping(8*time.Minute, time.Minute),
		handler.WithOutOfOrderness(10*time.Minute), handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	var recs []rec
	for i := range 8 {
		recs = append(recs, rec{seq: 100 + i, env: request(fmt.Sprint("e", i), "/big", float64(60*i+1), `{"ms":1}`)})
	}
	mustBatch(t, h, kinesisRecords(recs))
	return h
}

// TestOutgrownStateParkedOnceUnderFaults: the close that parks /big (its
// results outgrow its item: a copy of the state set aside, the key
// unlisted) meets a throttled set-aside, a throttled unlist, an unlist
// made whose answer was lost (the SDK's retry of it then refused by its
// condition), or an open index that still lists /big after the unlist.
// Retried (the batch again, the ticks), it ends where a clean run does:
// the state set aside once, /big unlisted, batches and ticks succeeding
// and /small's results out. Before, the last two set the state aside a
// second time under the next version (a close that found the key parked
// already parked it again), counted and alarmed twice.
func TestOutgrownStateParkedOnceUnderFaults(t *testing.T) {
	for _, fault := range []string{"set-aside throttled", "unlist throttled",
		"unlist made, its answer lost, the SDK's retry refused", "open index behind the unlist"} {
		t.Run(fault, func(t *testing.T) {
			ctx := context.Background()
			cfg := setup(t)
			faults := &parkFaults{DynamoDB: cfg.DynamoDB, key: "/big", fault: fault}
			cfg.DynamoDB = faults
			h := bigKey(t, cfg)
			faults.armed.Store(true)
			jump := kinesisRecords([]rec{{seq: 200, env: request("j0", "/small", 3600, `{"ms":1}`)}})
			for try := 0; ; try++ {
				resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: jump})
				if err == nil && len(resp.BatchItemFailures) == 0 {
					break
				}
				if try == 3 {
					t.Fatalf("the batch that closes /big's windows still fails after %d tries: %+v %v", try+1, resp, err)
				}
			}
			for _, at := range []time.Time{base.Add(3 * time.Hour), base.Add(4 * time.Hour), base.Add(5 * time.Hour)} {
				if _, err := h.Tick(ctx, at); err != nil && at.After(base.Add(3*time.Hour)) {
					t.Fatalf("tick at %s: %v; want /big parked by then", at.Format("15:04"), err)
				}
			}
			if faults.armed.Load() {
				t.Fatal("the fault was never injected: the test proves nothing")
			}
			var states []string
			for _, a := range asideOfTable(t, cfg.QuarantineTable) {
				if a.Field == "state" {
					states = append(states, a.SequenceNumber)
				}
			}
			if len(states) != 1 {
				t.Errorf("/big's state set aside as %v; want once, as a clean run does", states)
			}
			byID, _ := results(t, cfg.OutputStream)
			if d := strings.Join(describe(byID), "\n"); !strings.Contains(d, "/small") {
				t.Errorf("results\n%s\nwant /small's", d)
			}
		})
	}
}
