package enrich_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/enrich"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// TestProducerCopiesAreEnrichedOnce: a producer resends activity events —
// in the same batch, and in a later batch read by a new process — and
// reuses an id for other content. Each event is enriched once; the reuse
// is set aside naming the id; a whole-batch redelivery changes nothing.
func TestProducerCopiesAreEnrichedOnce(t *testing.T) {
	t.Parallel()
	in, out, q, table := newStream(t, "events"), newStream(t, "enriched"), quarantineTable(t), joinTable(t)
	other := func(id, key string) []byte {
		var m map[string]any
		_ = json.Unmarshal(activity(id, key), &m)
		m["data"] = map[string]any{"path": "/elsewhere"}
		b, _ := json.Marshal(m)
		return b
	}
	put(t, in, profile("u-1", 1, "free"), activity("a1", "u-1"), activity("a2", "u-1"), activity("a1", "u-1"))
	put(t, in, activity("a2", "u-1"), other("a1", "u-1"), activity("a3", "u-1"))
	recs := shardRecords(t, in)
	newHandler := func() *enrich.Handler {
		return enrich.New(db, kin, table, out, fastBackoff, enrich.WithSetAside(setaside.New(db, q)),
			enrich.WithDedupe(enrich.NewLedger(db, table, time.Hour)))
	}
	if f := handle(t, newHandler(), recs[:4]); f != "" {
		t.Fatalf("first batch: failure %s", f)
	}
	h := newHandler() // another process: a cold ledger cache
	if f := handle(t, h, recs[4:]); f != "" {
		t.Fatalf("second batch: failure %s", f)
	}
	if f := handle(t, h, recs[4:]); f != "" { // Lambda redelivers it
		t.Fatalf("redelivery: failure %s", f)
	}
	got := output(t, out)
	var ids []string
	for _, es := range got {
		for _, e := range es {
			ids = append(ids, e.env.ID)
		}
	}
	slices.Sort(ids)
	// The redelivered batch enriches a3 again (same source record, same
	// bytes: the output is at least once, by design, with a stable id).
	if want := []string{"a1", "a2", "a3", "a3"}; !slices.Equal(ids, want) {
		t.Fatalf("enriched %v, want %v: each copy left out", ids, want)
	}
	if es := got[recs[6].Kinesis.SequenceNumber]; len(es) != 2 || !bytes.Equal(es[0].raw, es[1].raw) {
		t.Fatalf("a3 enriched as %d records, want the same bytes twice", len(es))
	}
	assertSetAside(t, q, recs[5], "id", setaside.KindDuplicateConflict)
}

// TestLedgerItemsOfKeysDoNotMeet: a key's sealed ledger segment and another
// key's ledger head are different items, whatever the keys: key "u#<n>"
// (a producer's key may hold '#') is not the item of key u's segment n. The
// batch holding it is judged and enriched, and u's claims stay as they were.
func TestLedgerItemsOfKeysDoNotMeet(t *testing.T) {
	t.Parallel()
	out, table := newStream(t, "enriched"), joinTable(t)
	h := enrich.New(db, kin, table, out, fastBackoff, enrich.WithDedupe(enrich.NewLedger(db, table, time.Hour)))
	// 8,001 events of u seal its ledger head into a segment (8,000 claims).
	var docs [][]byte
	for i := range 8001 {
		docs = append(docs, activity(fmt.Sprintf("e%d", i), "u"))
	}
	recs := synthetic(docs...)
	for start := 0; start < len(recs); start += 500 {
		handleOK(t, h, recs[start:min(start+500, len(recs))])
	}
	var segments []string
	var start map[string]ddbtypes.AttributeValue
	for {
		page, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ExclusiveStartKey: start})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			// The segment's number, under either naming the ledger had.
			pk := it["pk"].(*ddbtypes.AttributeValueMemberS).Value
			if n, ok := strings.CutPrefix(pk, "dedupe#u#"); ok {
				segments = append(segments, n)
			} else if n, ok := strings.CutPrefix(pk, "dedupeseg#"); ok && strings.HasSuffix(n, "#u") {
				segments = append(segments, strings.TrimSuffix(n, "#u"))
			}
		}
		if start = page.LastEvaluatedKey; len(start) == 0 {
			break
		}
	}
	if len(segments) == 0 {
		t.Fatal("no sealed segment of u")
	}
	// A key named as the segment's item was ("dedupe#u#<n>"), then a copy of
	// u's first event.
	other := "u#" + segments[0]
	more := synthetic(append(docs, activity("x1", other), activity("e0", "u"), activity("x2", "v"))...)[len(docs):]
	h2 := enrich.New(db, kin, table, out, fastBackoff, enrich.WithDedupe(enrich.NewLedger(db, table, time.Hour)))
	if f := handle(t, h2, more); f != "" {
		t.Fatalf("batch with key %q: failure reported at %s (the whole batch is retried)", other, f)
	}
	got := output(t, out)
	for i, want := range []int{1, 0, 1} {
		if n := len(got[more[i].Kinesis.SequenceNumber]); n != want {
			t.Errorf("record %d (key %s) enriched %d times, want %d", i, []string{other, "u (a copy)", "v"}[i], n, want)
		}
	}
}
