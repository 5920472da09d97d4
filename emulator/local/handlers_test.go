package local

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/handler"
)

// TestStatusCodesTraffic: the demo's events are what its report claims — a
// resend with the same id and bytes, one status 999 set to be refused, the
// watermark events 70 s later on the same routes — and the check waits
// while a result is missing and fails on a wrong one (a resend counted
// twice), naming the result.
func TestStatusCodesTraffic(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 30, 20, 0, time.UTC)
	st := statusCodesTraffic(now, "103020")
	if !reflect.DeepEqual(st.resend[0], st.first[0]) {
		t.Errorf("the resend %+v is not the first event %+v", st.resend[0], st.first[0])
	}
	var poison struct{ Status int }
	for _, e := range st.first {
		if e.ID == st.poisonID {
			_ = json.Unmarshal(e.Data, &poison)
		}
		if e.OccurredAt.Before(now.Add(-5*time.Minute).Truncate(time.Minute)) || !e.OccurredAt.Before(now.Add(-4*time.Minute).Truncate(time.Minute)) {
			t.Errorf("event %s at %s is outside the demo's minute", e.ID, e.OccurredAt)
		}
	}
	if poison.Status != 999 {
		t.Errorf("the poison event's status is %d, want 999", poison.Status)
	}
	for _, a := range st.advance {
		if a.OccurredAt.Sub(st.first[0].OccurredAt) < time.Minute+5*time.Second {
			t.Errorf("advancing event %s at %s does not pass the minute plus the 5 s allowance", a.ID, a.OccurredAt)
		}
	}
	id := "statuscodes//checkout/2026-11-29T10:25:00.000Z/2026-11-29T10:26:00.000Z"
	if _, ok := st.want[id]; !ok {
		t.Fatalf("want %v lacks %s", st.want, id)
	}

	got := map[string]handler.Result{}
	if ok, err := checkStatusResults(got, st.want); ok || err != nil {
		t.Errorf("no results yet: ok %t, %v; want to wait", ok, err)
	}
	for id, w := range st.want {
		got[id] = handler.Result{ID: id, Key: w.key, Records: w.records, Result: json.RawMessage(w.result), Final: true}
	}
	if ok, err := checkStatusResults(got, st.want); !ok || err != nil {
		t.Errorf("the wanted results: ok %t, %v", ok, err)
	}
	r := got[id]
	r.Records++
	got[id] = r
	if _, err := checkStatusResults(got, st.want); err == nil || !strings.Contains(err.Error(), id) {
		t.Errorf("a resend counted twice: %v; want an error naming %s", err, id)
	}
}
