package cep_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/cep"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestEvictedPartialMatchIsAnOutput: 65 orders of one key, none paid within
// the rule's 15 minutes. A rule keeps at most 64 partial matches a key, so
// the first order's is dropped when the 65th arrives; it is put on the
// matches stream as an "evicted" output naming the order, where it was
// dropped without a word (and a producer could cancel any order's pending
// alert by sending 64 more orders).
func TestEvictedPartialMatchIsAnOutput(t *testing.T) {
	r, err := cep.ParseRule([]byte(`{"id":"unpaid","pattern":[{"begin":"order","type":"order_placed"},{"notFollowedBy":"paid","type":"payment"}],"within":"15m"}`))
	if err != nil {
		t.Fatal(err)
	}
	o := cep.NewOffline([]*cep.Rule{r}, 0)
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	const orders = 65
	for i := range orders {
		at := base.Add(time.Duration(i) * time.Second)
		env := &stream.Envelope{ID: fmt.Sprintf("o%d", i), Type: "order_placed", Key: "cust-1", OccurredAt: at, SentAt: at, ReceivedAt: at, Data: []byte(`{}`)}
		if err := o.Add(env, at); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := o.Finish()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]string{}
	ids := map[string]bool{}
	for _, m := range ms {
		for _, e := range m.Data.Events {
			kinds[m.Data.Kind] = append(kinds[m.Data.Kind], e.ID)
		}
		if ids[m.ID] {
			t.Errorf("output id %s twice", m.ID)
		}
		ids[m.ID] = true
	}
	if len(kinds["absence"]) != orders-1 || len(kinds["evicted"]) != 1 || kinds["evicted"][0] != "o0" {
		t.Errorf("outputs by kind %v: want %d absences and o0 evicted", kinds, orders-1)
	}
}
