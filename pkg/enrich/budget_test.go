package enrich_test

import (
	"bytes"
	"context"

	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/enrich"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// TestKeyItemBudget: four versions of one profile of 125 KB each in one
// batch cannot share the key's item (DynamoDB's 400 KB). The batch ends
// before the fourth (reported, not a failure: no retry of anything already
// done), every record before it is enriched, and the delivery Lambda makes
// from there completes the rest. No key item ever exceeds the budget, and
// the enriched records are byte for byte those of the same input delivered
// one record at a time.
func TestKeyItemBudget(t *testing.T) {
	t.Parallel()
	in := newStream(t, "events")
	var docs [][]byte
	for v := 1; v <= 4; v++ {
		docs = append(docs, profile("u-1", v, strings.Repeat(string(rune('a'+v)), 125_000)), activity(fmt.Sprintf("a%d", v), "u-1"))
	}
	put(t, in, docs...)
	recs := shardRecords(t, in)

	out, table := newStream(t, "enriched"), joinTable(t)
	h := enrich.New(db, kin, table, out, fastBackoff, enrich.WithSetAside(setaside.New(db, quarantineTable(t))))
	if f := handle(t, h, recs); f != recs[6].Kinesis.SequenceNumber {
		t.Fatalf("first delivery reported %q, want the fourth version's record %s", f, recs[6].Kinesis.SequenceNumber)
	}
	if st := h.Stats(); st.KeyBudgetCheckpoints != 1 || st.FailedBatches != 0 || st.Enriched != 3 {
		t.Errorf("stats %+v: want one budget checkpoint, no failed batch, 3 enriched", st)
	}
	checkKeyItem(t, table, "u-1")
	if f := handle(t, h, recs[6:]); f != "" {
		t.Fatalf("second delivery reported %q", f)
	}
	checkKeyItem(t, table, "u-1")
	got := byID(t, output(t, out))
	for v := 1; v <= 4; v++ {
		id := fmt.Sprintf("a%d", v)
		if version(got[id]) != fmt.Sprint(v) {
			t.Errorf("%s joined version %s, want %d", id, version(got[id]), v)
		}
	}

	// The same input, one record per batch, to another output stream.
	ref, refTable := newStream(t, "enriched"), joinTable(t)
	r := enrich.New(db, kin, refTable, ref, fastBackoff)
	for i := range recs {
		if f := handle(t, r, recs[i:i+1]); f != "" {
			t.Fatalf("reference batch %d reported %q", i, f)
		}
	}
	want := byID(t, output(t, ref))
	for id, e := range want {
		if !bytes.Equal(got[id].raw, e.raw) {
			t.Errorf("%s: enriched record differs from the one-record-per-batch run", id)
		}
	}
}

// checkKeyItem fails t when key's item in the join table is over the
// budget as DynamoDB counts it.
func checkKeyItem(t *testing.T, table, key string) {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "k#" + key}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := limits.ItemSize(out.Item); n > 400_000 {
		t.Errorf("key item of %s is %d bytes, over the 400,000-byte budget", key, n)
	}
}

// throttledJoin fails every UpdateItem as DynamoDB does under throttling
// (after the SDK's own retries) while on is set.
type throttledJoin struct {
	*dynamodb.Client
	on bool
}

func (c *throttledJoin) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.on {
		return nil, &ddbtypes.ProvisionedThroughputExceededException{Message: aws.String("Throughput exceeds the current capacity of your table or index")}
	}
	return c.Client.UpdateItem(ctx, in, opts...)
}

// TestThrottledStateIsRetriedNotSetAside: a throttled state write is
// transient: the batch reports its first record (Lambda redelivers it),
// nothing is enriched or set aside, and the redelivery once the throttle
// lifts enriches every event once. A bad record in the same batch is set
// aside either way.
func TestThrottledStateIsRetriedNotSetAside(t *testing.T) {
	t.Parallel()
	out, q := newStream(t, "enriched"), quarantineTable(t)
	recs := synthetic(profile("u-1", 1, "free"), activity("a1", "u-1"), []byte("not json"), activity("a2", "u-1"))
	store := &throttledJoin{Client: db, on: true}
	h := enrich.New(store, kin, joinTable(t), out, fastBackoff, enrich.WithSetAside(setaside.New(db, q)))
	if f := handle(t, h, recs); f != recs[0].Kinesis.SequenceNumber {
		t.Fatalf("throttled: reported %q, want the first record", f)
	}
	if got := output(t, out); len(got) != 0 {
		t.Errorf("enriched %d records while the state write was throttled", len(got))
	}
	scan, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(q)})
	if err != nil {
		t.Fatal(err)
	}
	if len(scan.Items) != 1 {
		t.Errorf("%d quarantined items, want 1 (the bad record; never a throttled one)", len(scan.Items))
	}
	assertSetAside(t, q, recs[2], "", setaside.KindUnparseable)
	store.on = false
	if f := handle(t, h, recs); f != "" {
		t.Fatalf("redelivery reported %q", f)
	}
	if got := sortedKeys(byID(t, output(t, out))); fmt.Sprint(got) != "[a1 a2]" {
		t.Errorf("enriched %v, want a1 and a2 once", got)
	}
}
