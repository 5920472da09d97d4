package projection_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/projection"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// noteView is an entity view whose item is keyed and filled by the event's
// data: {"pk", "sk", "note"}.
type noteView struct{}

func (noteView) Name() string          { return "notes" }
func (noteView) AggregateType() string { return "thing" }
func (noteView) Entities(e es.Event) ([]map[string]types.AttributeValue, error) {
	var d struct{ PK, SK, Note string }
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return nil, &projection.ApplyError{View: "notes", Event: e.ID(), Version: e.Version, Field: "data", Reason: err.Error()}
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	return []map[string]types.AttributeValue{{"pk": s(d.PK), "sk": s(d.SK), "note": s(d.Note)}}, nil
}

// heldLog is an event log holding the events appended to it, by
// aggregate, in version order.
type heldLog map[string][]es.Event

func (l heldLog) Events(_ context.Context, agg string, after, upTo int64) ([]es.Event, error) {
	var evs []es.Event
	for _, e := range l[agg] {
		if e.Version > after && e.Version <= upTo {
			evs = append(evs, e)
		}
	}
	return evs, nil
}

// appended is version v of thing agg as the log holds it, with data.
func (l heldLog) appended(agg string, v int64, data string) es.Event {
	e := es.Event{AggregateType: "thing", AggregateID: agg, Version: v, Type: "Noted", CommandID: fmt.Sprintf("c-%s-%d", agg, v),
		Data: json.RawMessage(data), RecordedAt: time.Date(2026, 12, 6, 9, 0, int(v), 0, time.UTC)}
	l[agg] = append(l[agg], e)
	return e
}

// publishedThing is the stream record of version v of thing agg, appended
// to log.
func publishedThing(t *testing.T, log heldLog, agg string, v int64, data string) events.KinesisEventRecord {
	t.Helper()
	return published(t, log.appended(agg, v, data))
}

// published is e's stream record as publish puts it.
func published(t *testing.T, e es.Event) events.KinesisEventRecord {
	t.Helper()
	env, err := es.Envelope(&e, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	var r events.KinesisEventRecord
	r.EventID = fmt.Sprintf("shardId-000000000000:%d", e.Version)
	r.EventSourceArn = "arn:aws:kinesis:us-east-1:123456789012:stream/ShowEvents"
	r.Kinesis.SequenceNumber, r.Kinesis.PartitionKey, r.Kinesis.Data = fmt.Sprint(e.Version), e.AggregateID, b
	return r
}

// TestEntityItemsThatCannotBeWritten: an entity item over DynamoDB's 400 KB
// is set aside naming the attribute (it was a plain error, retried on
// every delivery, holding its aggregate back for ever), and the event after
// it is applied; two items whose keys read alike joined by a space
// ("a b"+"c", "a"+"b c") are two items.
func TestEntityItemsThatCannotBeWritten(t *testing.T) {
	ctx := context.Background()
	log := heldLog{}
	mem, p := inProcess(projection.Views{Entities: []projection.EntityView{noteView{}}}, log)
	resp, err := p.Handle(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{
		publishedThing(t, log, "t1", 1, `{"PK":"a b","SK":"c","Note":"first"}`),
		publishedThing(t, log, "t1", 2, `{"PK":"a","SK":"b c","Note":"second"}`),
		publishedThing(t, log, "t1", 3, `{"PK":"big","SK":"x","Note":"`+strings.Repeat("x", 420_000)+`"}`),
		publishedThing(t, log, "t1", 4, `{"PK":"after","SK":"x","Note":"fourth"}`),
	}})
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("Handle: failures %v, %v; want none: the shard moves on", resp.BatchItemFailures, err)
	}
	var notes []string
	for _, it := range mem.Items("views") {
		if n, ok := it["note"].(*types.AttributeValueMemberS); ok {
			notes = append(notes, n.Value)
		}
	}
	slices.Sort(notes)
	if strings.Join(notes, ",") != "first,fourth,second" {
		t.Errorf("view items %v, want first, second and fourth", notes)
	}
	aside := setAsideIn(t, mem)
	if len(aside) != 1 || aside[0].SequenceNumber != "3" || aside[0].Category != setaside.KindOutputTooLarge || aside[0].Field != "note" {
		t.Errorf("set aside %+v, want record 3 alone, %s, naming note", aside, setaside.KindOutputTooLarge)
	}
}

// inProcess is a projector of views on the in-process store reading log,
// its views in table "views" and what it sets aside in "quarantine".
func inProcess(views projection.Views, log heldLog) (*memdb.DB, *projection.Projector) {
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable, "quarantine": memdb.QuarantineTable})
	return mem, projection.New(mem, log, projection.FixedTable("views"), views, projection.WithSetAside(setaside.New(mem, "quarantine")))
}

// setAsideIn reads back what was set aside in mem's quarantine table.
func setAsideIn(t *testing.T, mem *memdb.DB) []setaside.Item {
	t.Helper()
	var aside []setaside.Item
	for _, raw := range mem.Items("quarantine") {
		if k, ok := raw["kind"].(*types.AttributeValueMemberS); ok && k.Value == setaside.ItemSetAside {
			it, err := setaside.Load(context.Background(), mem, "quarantine", rawString(raw, "source"), rawString(raw, "sequenceNumber"))
			if err != nil || it == nil {
				t.Fatalf("loading a set-aside item: %v", err)
			}
			aside = append(aside, *it)
		}
	}
	return aside
}

func rawString(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// notesFold is a fold view that appends every event's note to one item's
// list: an item that grows with its aggregate's events.
type notesFold struct{}

func (notesFold) Name() string          { return "allnotes" }
func (notesFold) AggregateType() string { return "thing" }
func (notesFold) Key(agg string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "allnotes#" + agg}, "sk": &types.AttributeValueMemberS{Value: "notes"}}
}
func (notesFold) Fold(after int64, evs []es.Event) (expression.UpdateBuilder, error) {
	var notes []string
	for _, e := range evs {
		var d struct{ Note string }
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return expression.UpdateBuilder{}, &projection.ApplyError{View: "allnotes", Event: e.ID(), Version: e.Version, Field: "data", Reason: err.Error()}
		}
		notes = append(notes, d.Note)
	}
	list := expression.Name("notes")
	return expression.Set(list, expression.ListAppend(expression.IfNotExists(list, expression.Value([]string{})), expression.Value(notes))), nil
}

// TestFoldItemThatWouldPassTheLimit: a fold whose item the next event
// would take past 400 KB applies the events before it and sets that one
// aside (output too large); DynamoDB's refusal was an error retried on
// every delivery.
func TestFoldItemThatWouldPassTheLimit(t *testing.T) {
	ctx := context.Background()
	log := heldLog{}
	mem, p := inProcess(projection.Views{Folds: []projection.FoldView{notesFold{}}}, log)
	resp, err := p.Handle(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{
		publishedThing(t, log, "t1", 1, `{"Note":"small"}`),
		publishedThing(t, log, "t1", 2, `{"Note":"`+strings.Repeat("x", 300_000)+`"}`),
		publishedThing(t, log, "t1", 3, `{"Note":"`+strings.Repeat("y", 200_000)+`"}`),
	}})
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("Handle: failures %v, %v; want none: the shard moves on", resp.BatchItemFailures, err)
	}
	item := mem.Item("views", notesFold{}.Key("t1"))
	if l, ok := item["notes"].(*types.AttributeValueMemberL); !ok || len(l.Value) != 2 {
		t.Errorf("the fold's item holds %v, want the notes of versions 1 and 2", item["notes"])
	}
	var aside []string
	for _, it := range setAsideIn(t, mem) {
		aside = append(aside, it.SequenceNumber+" "+it.Category)
	}
	if strings.Join(aside, ",") != "3 "+setaside.KindOutputTooLarge {
		t.Errorf("set aside %v, want record 3 alone, %s", aside, setaside.KindOutputTooLarge)
	}
}

// TestRecordsNotPublishedFromTheLogAreSetAside: a record put on the
// published stream by hand is held to the event store, whatever its
// version: one with the next version (which the fold applied, its fence
// then keeping the real event out), one with a version the store holds as
// another event, one past the store's last version in a batch where a view
// refuses an earlier event (its reason was the other event's, and the
// entity view applied it), and one put with another partition key are set
// aside naming their field; the stored events are applied.
func TestRecordsNotPublishedFromTheLogAreSetAside(t *testing.T) {
	log := heldLog{}
	mem, p := inProcess(projection.Views{Folds: []projection.FoldView{notesFold{}}, Entities: []projection.EntityView{noteView{}}}, log)
	forged := func(v int64, seq, data string) events.KinesisEventRecord {
		r := published(t, es.Event{AggregateType: "thing", AggregateID: "t1", Version: v, Type: "Noted", CommandID: "forger",
			Data: json.RawMessage(data), RecordedAt: time.Date(2026, 12, 6, 9, 30, 0, 0, time.UTC)})
		r.Kinesis.SequenceNumber = seq
		return r
	}
	real := func(seq string, e es.Event) events.KinesisEventRecord {
		r := published(t, e)
		r.Kinesis.SequenceNumber = seq
		return r
	}
	handle := func(recs ...events.KinesisEventRecord) { handleAll(t, p, recs...) }
	handle(real("10", log.appended("t1", 1, `{"PK":"p1","SK":"s","Note":"first"}`)))
	// Version 2 before the store has it, then the store's version 2.
	handle(forged(2, "20", `{"PK":"forged2","SK":"s","Note":"forged"}`))
	handle(real("21", log.appended("t1", 2, `{"PK":"p2","SK":"s","Note":"second"}`)))
	// Version 3 as another event than the store's, ahead of the store's.
	third := log.appended("t1", 3, `{"PK":"p3","SK":"s","Note":"third"}`)
	handle(forged(3, "30", `{"PK":"forged3","SK":"s","Note":"forged"}`), real("31", third))
	// Version 99 (past the store's 4) beside version 4, which the views refuse.
	handle(real("40", log.appended("t1", 4, `{"PK":"p4","SK":"s","Note":4}`)), forged(99, "99", `{"PK":"forged99","SK":"s","Note":"forged"}`))
	// Another partition key.
	other := real("50", log.appended("t1", 5, `{"PK":"p5","SK":"s","Note":"fifth"}`))
	other.Kinesis.PartitionKey = "zzz"
	handle(other)

	if folded := foldedNotes(mem, "t1"); strings.Join(folded, ",") != "first,second,third" {
		t.Errorf("the fold holds %v, want the store's first, second and third", folded)
	}
	if notes := entityKeys(mem); strings.Join(notes, ",") != "p1,p2,p3" {
		t.Errorf("entity items %v, want p1, p2 and p3 (the store's events the view applies)", notes)
	}
	// A record the store does not hold is not-in-log: a copy put back
	// would be set aside again (package putback refuses it).
	want := map[string]string{"20": "data.version not-in-log", "30": "data.commandId not-in-log", "40": "data invalid",
		"99": "data.version not-in-log", "50": "key invalid"}
	got := map[string]string{}
	for _, it := range setAsideIn(t, mem) {
		got[it.SequenceNumber] = it.Field + " " + it.Category
		if it.SequenceNumber == "99" && !strings.Contains(it.Reason, "no such event was appended") {
			t.Errorf("record 99 set aside for %q, want that the store never had it", it.Reason)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("set aside (sequence: field) %v, want %v", got, want)
	}
}

// TestEveryRecordIsJudgedAgainstTheLog: records are held to the log one by
// one, not by the first of their aggregate: a hand-made record of another
// aggregate type ahead of a real event in one batch made the projector
// skip the batch's views (the real event lost, both counted applied); a
// hand-made copy of a version behind the real record of that version in
// one batch was neither applied nor set aside; a record of a type no view
// keeps, at a version the log never had, was counted applied.
func TestEveryRecordIsJudgedAgainstTheLog(t *testing.T) {
	log := heldLog{}
	mem, p := inProcess(projection.Views{Folds: []projection.FoldView{notesFold{}}, Entities: []projection.EntityView{noteView{}}}, log)
	record := func(seq string, e es.Event) events.KinesisEventRecord {
		r := published(t, e)
		r.Kinesis.SequenceNumber = seq
		return r
	}
	handle := func(recs ...events.KinesisEventRecord) { handleAll(t, p, recs...) }
	first := log.appended("t2", 1, `{"PK":"q1","SK":"s","Note":"first"}`)
	handle(record("1", first))
	// Another aggregate type at version 1, ahead of the real version 2.
	movie := first
	movie.AggregateType, movie.Data = "movie", json.RawMessage(`{"PK":"movie","SK":"s","Note":"movie"}`)
	handle(record("2", movie), record("3", log.appended("t2", 2, `{"PK":"q2","SK":"s","Note":"second"}`)))
	// The real version 3, then a copy of it with other data.
	third := log.appended("t2", 3, `{"PK":"q3","SK":"s","Note":"third"}`)
	copied := third
	copied.Data = json.RawMessage(`{"PK":"copy","SK":"s","Note":"copy"}`)
	handle(record("4", third), record("5", copied))
	// A type no view keeps, at a version the log never had.
	stray := movie
	stray.Version = 9
	handle(record("6", stray))

	if folded := foldedNotes(mem, "t2"); strings.Join(folded, ",") != "first,second,third" {
		t.Errorf("the fold holds %v, want the log's first, second and third", folded)
	}
	if notes := entityKeys(mem); strings.Join(notes, ",") != "q1,q2,q3" {
		t.Errorf("entity items %v, want q1, q2 and q3", notes)
	}
	got := map[string]string{}
	for _, it := range setAsideIn(t, mem) {
		got[it.SequenceNumber] = it.Field + " " + it.Category
	}
	if want := map[string]string{"2": "data.aggregateType not-in-log", "5": "data.data not-in-log", "6": "data.version not-in-log"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("set aside (sequence: field) %v, want %v", got, want)
	}
	if s := p.Stats(); s.SetAside != 3 || s.EventsApplied != 3 {
		t.Errorf("counted %d applied and %d set aside, want 3 and 3", s.EventsApplied, s.SetAside)
	}
}

// handleAll hands recs to p as one batch and fails t unless it reports no
// failure: what cannot be applied is set aside, and the shard moves on.
func handleAll(t *testing.T, p *projection.Projector, recs ...events.KinesisEventRecord) {
	t.Helper()
	resp, err := p.Handle(context.Background(), events.KinesisEvent{Records: recs})
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("Handle: failures %v, %v; want none", resp.BatchItemFailures, err)
	}
}

// foldedNotes is the notes notesFold's item of agg holds, in order.
func foldedNotes(mem *memdb.DB, agg string) []string {
	var notes []string
	if l, ok := mem.Item("views", notesFold{}.Key(agg))["notes"].(*types.AttributeValueMemberL); ok {
		for _, v := range l.Value {
			notes = append(notes, v.(*types.AttributeValueMemberS).Value)
		}
	}
	return notes
}

// entityKeys is the sorted pk of every noteView item.
func entityKeys(mem *memdb.DB) []string {
	var keys []string
	for _, it := range mem.Items("views") {
		if pk, ok := it["pk"].(*types.AttributeValueMemberS); ok && !strings.HasPrefix(pk.Value, "allnotes#") {
			keys = append(keys, pk.Value)
		}
	}
	slices.Sort(keys)
	return keys
}
