package putback_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/putback"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// twoFields is a record two pipelines refuse, each for its own field:
// one reads data.v, the other data.d.
const twoFields = `{"id":"evt-9","type":"page_view","key":"user-9","occurredAt":"2026-12-05T09:54:00Z","sentAt":"2026-12-05T09:54:01Z","data":{"v":"x","d":"y"}}`

// sinkOf is a sink of the fixture's table for the function named.
func (f *fixture) sinkOf(function string, at time.Time) *setaside.Sink {
	return setaside.New(db, f.table, setaside.WithFunction(function), setaside.WithClock(func() time.Time { return at }))
}

// only lists the records the function filter selects, and fails unless
// there is exactly one.
func (f *fixture) only(function string) setaside.Item {
	f.t.Helper()
	l, err := putback.List(context.Background(), db, f.table, putback.Filter{Function: function}, 10, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Matched != 1 {
		f.t.Fatalf("List -function %s: %d items (%d matched), want 1; functions with records: %v", function, len(l.Items), l.Matched, l.Functions)
	}
	return l.Items[0]
}

// A record two consumers of the stream set aside, each for its own field,
// is listed for each of them with that one's field, category and reason:
// the second does not hide the first.
func TestListFindsEachFunctionsSetAside(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rec := setaside.Record{Source: f.arn, Shard: shard, Sequence: "49650000000000000000000001", PartitionKey: "user-9",
		ArrivedAt: now.Add(-5 * time.Minute), Data: []byte(twoFields)}
	tiny, views := rec, rec
	tiny.Field, tiny.Kind, tiny.Reason = "data.v", setaside.KindInvalid, `data.v: "x" is not a number`
	views.Field, views.Kind, views.Reason = "data.d", setaside.KindInvalid, `data.d: "y" is not a number`
	if err := f.sinkOf("Tributary-PipelinesHostiletinyAggregate", now.Add(-2*time.Minute)).SetAside(ctx, []setaside.Record{tiny}); err != nil {
		t.Fatal(err)
	}
	if err := f.sinkOf("Tributary-PipelinesPageviewsAggregate", now.Add(-time.Minute)).SetAside(ctx, []setaside.Record{views}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ filter, function, field, reason string }{
		{"hostiletiny aggregate", "Tributary-PipelinesHostiletinyAggregate", "data.v", tiny.Reason},
		{"aggregate-pageviews", "Tributary-PipelinesPageviewsAggregate", "data.d", views.Reason},
	} {
		it := f.only(tc.filter)
		if it.Function != tc.function || it.Field != tc.field || it.Reason != tc.reason || it.Category != setaside.KindInvalid {
			t.Errorf("List -function %s: %s %s %s %q, want %s %s invalid %q", tc.filter, it.Function, it.Field, it.Category, it.Reason,
				tc.function, tc.field, tc.reason)
		}
	}
	// Readers that know only the item's own attributes see the last one.
	it, err := setaside.Load(ctx, db, f.table, f.arn+"/"+shard, rec.Sequence)
	if err != nil || it == nil || it.Function != "Tributary-PipelinesPageviewsAggregate" || it.Reason != views.Reason || string(it.Data) != twoFields {
		t.Errorf("Load = %+v, %v: want the item with the last function's reason and the data once", it, err)
	}
}

// Consumers setting the same records aside at once each keep their own
// reason.
func TestConcurrentSetAsidesKeepEveryFunction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const functions, records = 6, 5
	var wg sync.WaitGroup
	errs := make(chan error, functions)
	for i := range functions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("Tributary-Consumer%d", i)
			recs := make([]setaside.Record, records)
			for j := range recs {
				recs[j] = setaside.Record{Source: f.arn, Shard: shard, Sequence: fmt.Sprintf("4965%020d", j), PartitionKey: "user-9",
					ArrivedAt: now.Add(-5 * time.Minute), Data: []byte(twoFields), Field: fmt.Sprintf("data.f%d", i),
					Kind: setaside.KindInvalid, Reason: name + " refused it"}
			}
			errs <- f.sinkOf(name, now.Add(-time.Minute)).SetAside(ctx, recs)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range functions {
		name := fmt.Sprintf("Tributary-Consumer%d", i)
		l, err := putback.List(ctx, db, f.table, putback.Filter{Function: name}, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l.Matched != records {
			t.Errorf("List -function %s: %d records, want %d (functions with records: %v)", name, l.Matched, records, l.Functions)
		}
		for _, it := range l.Items {
			if it.Reason != name+" refused it" || it.Field != fmt.Sprintf("data.f%d", i) {
				t.Errorf("%s %s: %s %q, want its own field and reason", name, it.SequenceNumber, it.Field, it.Reason)
			}
		}
	}
}

// An item written before items kept each function's reason (one function,
// its reason on the item itself) is still listed and put back, and a
// second function setting that record aside keeps the first one's.
func TestAnItemOfOneFunctionStillReads(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	old := setaside.Item{Source: f.arn + "/" + shard, SequenceNumber: "49650000000000000000000077", Kind: setaside.ItemSetAside,
		Data: []byte(twoFields), DataBytes: len(twoFields), PartitionKey: "user-9", ApproximateArrival: now.Add(-5 * time.Minute).Format(time.RFC3339Nano),
		Function: "Tributary-PipelinesHostiletinyAggregate", Field: "data.v", Category: setaside.KindInvalid, Reason: "old reason",
		SetAsideAt: now.Add(-3 * time.Minute).Format(time.RFC3339Nano), ExpiresAt: now.Add(setaside.Retention).Unix()}
	av, err := attributevalue.MarshalMap(old)
	if err != nil {
		t.Fatal(err)
	}
	delete(av, "functions") // as the code before wrote it
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: av}); err != nil {
		t.Fatal(err)
	}
	if it := f.only("hostiletiny"); it.Reason != "old reason" || it.Field != "data.v" {
		t.Errorf("old item listed as %s %q, want data.v \"old reason\"", it.Field, it.Reason)
	}
	// Unchanged, it is refused for its field; corrected, it goes back.
	_, err = f.putter.Prepare(ctx, old.Source, old.SequenceNumber, nil)
	var r *putback.Refusal
	if !errors.As(err, &r) || r.Flag != putback.FlagUnchanged || !strings.Contains(r.Reason, "data.v") {
		t.Errorf("Prepare of the old item unchanged = %v, want refused for data.v", err)
	}
	if _, err := f.putter.Prepare(ctx, old.Source, old.SequenceNumber, []byte(strings.Replace(twoFields, `"v":"x"`, `"v":1`, 1))); err != nil {
		t.Errorf("Prepare of the old item corrected = %v, want a plan", err)
	}

	rec := setaside.Record{Source: f.arn, Shard: shard, Sequence: old.SequenceNumber, PartitionKey: "user-9",
		ArrivedAt: now.Add(-5 * time.Minute), Data: []byte(twoFields), Field: "data.d", Kind: setaside.KindInvalid, Reason: "new reason"}
	if err := f.sinkOf("Tributary-PipelinesPageviewsAggregate", now.Add(-time.Minute)).SetAside(ctx, []setaside.Record{rec}); err != nil {
		t.Fatal(err)
	}
	if it := f.only("hostiletiny"); it.Reason != "old reason" || it.Field != "data.v" {
		t.Errorf("after a second function: old function's record listed as %s %q, want data.v \"old reason\"", it.Field, it.Reason)
	}
	if it := f.only("pageviews"); it.Reason != "new reason" || it.Field != "data.d" {
		t.Errorf("second function's record listed as %s %q, want data.d \"new reason\"", it.Field, it.Reason)
	}
}

// A record two functions set aside is judged as each set it aside: by
// both when no function is named (the copy reaches both), by the one
// named alone otherwise, with its own field, category and rule.
func TestPrepareForJudgesAsTheFunctionSetItAside(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rec := setaside.Record{Source: f.arn, Shard: shard, Sequence: "49650000000000000000000002", PartitionKey: "user-9",
		ArrivedAt: now.Add(-5 * time.Minute), Data: []byte(twoFields)}
	tiny, views := rec, rec
	tiny.Field, tiny.Kind, tiny.Reason, tiny.Rule = "data.v", setaside.KindInvalid, `data.v: "x" is not a number`, setaside.NumberRule(9007199254740992)
	views.Field, views.Kind, views.Reason = "data.d", setaside.KindStateBudget, "over budget"
	const tinyFn, viewsFn = "Tributary-PipelinesHostiletinyAggregate", "Tributary-PipelinesPageviewsAggregate"
	if err := f.sinkOf(tinyFn, now.Add(-2*time.Minute)).SetAside(ctx, []setaside.Record{tiny}); err != nil {
		t.Fatal(err)
	}
	if err := f.sinkOf(viewsFn, now.Add(-time.Minute)).SetAside(ctx, []setaside.Record{views}); err != nil {
		t.Fatal(err)
	}
	source := f.arn + "/" + shard
	corrected := []byte(strings.Replace(twoFields, `"v":"x"`, `"v":7`, 1))
	for _, tc := range []struct {
		name      string
		functions []string
		fixed     []byte
		refusal   string // "" for a plan
	}{
		{"every function: pageviews' state-budget refuses it", nil, corrected, "state-budget: " + viewsFn},
		{"hostiletiny's, unchanged: its field", []string{tinyFn}, nil, "data.v it held when " + tinyFn},
		{"hostiletiny's, corrected to what its rule refuses", []string{tinyFn}, []byte(strings.Replace(twoFields, `"v":"x"`, `"v":"7"`, 1)), "field data.v: is a string"},
		{"hostiletiny's, corrected", []string{tinyFn}, corrected, ""},
		{"pageviews'", []string{viewsFn}, corrected, "state-budget: " + viewsFn},
		{"a function that did not set it aside", []string{"Tributary-Enrich"}, corrected, `"Tributary-Enrich" did not set it aside (` + viewsFn + ", " + tinyFn + " did)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := f.putter.PrepareFor(ctx, source, rec.Sequence, tc.functions, tc.fixed)
			var r *putback.Refusal
			switch {
			case tc.refusal == "" && (err != nil || plan == nil || plan.Item.Function != tinyFn):
				t.Errorf("PrepareFor = %v, %v; want a plan for %s's set-aside", plan, err, tinyFn)
			case tc.refusal != "" && (!errors.As(err, &r) || !strings.Contains(r.Reason, tc.refusal)):
				t.Errorf("PrepareFor = %v; want refused saying %q", err, tc.refusal)
			}
		})
	}
}
