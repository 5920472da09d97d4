package cep

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// TestStateBudgetSetsAsideOnlyPastIt fills one key's partial matches (a
// count rule that keeps every event for an hour) up to a small budget:
// events are added until the next would take the state past it, that one
// and the following are set aside naming the key, the state stays within
// the budget, and once the hour has passed the key takes events again.
func TestStateBudgetSetsAsideOnlyPastIt(t *testing.T) {
	r := rule(t, `{"id":"many","pattern":[{"begin":"a","type":"A","timesOrMore":1000}],"within":"1h"}`)
	rs := NewRuleSet([]*StoredRule{{Rule: r, Status: StatusActive, Intervals: []Interval{{From: time.Unix(0, 0)}}}}, base)
	op := NewOperator(rs, func() time.Time { return base })
	op.maxBytes = 4000
	st, err := op.NewState("acct", nil)
	if err != nil {
		t.Fatal(err)
	}
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	event := func(i, sec int) Event {
		return Event{t: at(sec).UnixMilli(), id: fmt.Sprintf("e%03d", i), typ: "A", hits: []hit{{rule: "many", mask: 1}}}
	}
	var fates []keyed.Fate
	for i := 0; i < 200; i++ {
		// The watermark before each event is the one before it: every
		// event is in the rule's partial match by the next.
		f, rerr := st.Add(event(i, i), at(i-1))
		fates = append(fates, f)
		if f == keyed.Aside && (rerr == nil || rerr.Field != "key" || rerr.Kind != setaside.KindStateBudget || !strings.Contains(rerr.Reason, `"acct"`)) {
			t.Fatalf("event %d set aside with %+v; want field key, kind state-budget, the key named", i, rerr)
		}
		if n := st.(*keyState).Size(); n > op.maxBytes {
			t.Fatalf("after event %d the state is %d bytes, past its %d-byte budget", i, n, op.maxBytes)
		}
	}
	added := 0
	for added < len(fates) && fates[added] == keyed.Added {
		added++
	}
	if added < 10 || added == len(fates) {
		t.Fatalf("%d of %d events added before the budget", added, len(fates))
	}
	for i, f := range fates[added:] {
		if f != keyed.Aside {
			t.Fatalf("event %d: fate %v after the budget was reached, want set aside", added+i, f)
		}
	}
	t.Logf("%d events added, %d set aside", added, len(fates)-added)
	// An hour later the partial match has timed out: the key takes events.
	later := 200 + 3600
	st.Advance(at(later))
	if f, rerr := st.Add(event(999, later+1), at(later)); f != keyed.Added {
		t.Fatalf("after the rule's time passed: fate %v (%+v), want added", f, rerr)
	}
}
