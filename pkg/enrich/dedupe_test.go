package enrich_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

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
