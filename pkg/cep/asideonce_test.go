package cep

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
)

// TestARecordIsSetAsideOnceWhenItsKeyIsFoldedAgain: a key's fold sets the
// records past its state budget aside before it writes the state; when that
// write met a concurrent writer (the tick, a duplicate invocation) the fold
// ran again and set the same records aside again — counted twice in
// RecordsSetAside and logged twice (a trial saw 1,940 counted for 1,449
// records). A record set aside stays set aside: the next attempt skips it.
func TestARecordIsSetAsideOnceWhenItsKeyIsFoldedAgain(t *testing.T) {
	ctx := context.Background()
	mem := memdb.New(map[string]memdb.Schema{"cep-state": memdb.ViewsTable, "quarantine": memdb.QuarantineTable})
	racing := &conflictOnce{Client: mem}
	counted := &asideCount{Client: mem, seqs: map[string]int{}}
	cfg := &Config{Name: "once", OutOfOrderness: 3 * time.Second, IdleTimeout: 10 * time.Second}
	hold := rule(t, `{"id":"hold","pattern":[{"begin":"p","type":"payment","timesOrMore":1000}],"within":"1h"}`)
	h := NewHandler(cfg, state.NewViews(racing, "cep-state", nil), &keyedtest.Stream{}, "matches", newStaticRules([]*Rule{hold}), func() time.Time { return base },
		keyed.WithLogger(quiet), keyed.WithSetAside(setaside.New(counted, "quarantine")))
	h.Operator().maxBytes = 6000
	var recs []shardRecord
	for i := range 120 {
		recs = append(recs, shardRecord{shard: "shardId-000000000000", seq: 100 + i,
			env: ev(fmt.Sprintf("pay-%03d", i), "payment", "acct-1", float64(i), `{"amount":10}`)})
	}
	resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: kinesisRecords(recs)})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch: %v, failures %v", err, resp.BatchItemFailures)
	}
	if racing.failed != 1 {
		t.Fatalf("the state write met %d concurrent writers, want 1: the test does not fold the key twice", racing.failed)
	}
	if len(counted.seqs) == 0 {
		t.Fatal("nothing was set aside: the budget was not reached")
	}
	for seq, n := range counted.seqs {
		if n != 1 {
			t.Errorf("record %s set aside %d times, want once", seq, n)
		}
	}
	if got := h.Stats().SetAside; got != int64(len(counted.seqs)) {
		t.Errorf("SetAside counts %d for %d records set aside", got, len(counted.seqs))
	}
}

// conflictOnce is the state table's client whose first write of a key's
// state blob fails its condition, as when another writer got there first.
type conflictOnce struct {
	memdb.Client
	mu     sync.Mutex
	failed int
}

func (c *conflictOnce) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.mu.Lock()
	for _, v := range in.ExpressionAttributeValues {
		if _, blob := v.(*ddbtypes.AttributeValueMemberB); blob && c.failed == 0 {
			c.failed++
			c.mu.Unlock()
			return nil, &ddbtypes.ConditionalCheckFailedException{Message: new(string)}
		}
	}
	c.mu.Unlock()
	return c.Client.UpdateItem(ctx, in, opts...)
}

// asideCount is the quarantine table's client counting the set-aside
// items written per sequence number (each an UpdateItem that succeeds).
type asideCount struct {
	memdb.Client
	mu   sync.Mutex
	seqs map[string]int
}

func (a *asideCount) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := a.Client.UpdateItem(ctx, in, opts...)
	if s, ok := in.Key["sequenceNumber"].(*ddbtypes.AttributeValueMemberS); ok && err == nil {
		a.mu.Lock()
		a.seqs[s.Value]++
		a.mu.Unlock()
	}
	return out, err
}
