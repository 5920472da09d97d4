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

// appendedLog is an event log that holds every version of every aggregate
// up to its bound. The events it returns carry their versions alone: it
// says what was appended (what a projector of entity views asks) and is
// no log to fill a fold's gap from.
type appendedLog struct{ upTo int64 }

func (l appendedLog) Events(_ context.Context, agg string, after, upTo int64) ([]es.Event, error) {
	var evs []es.Event
	for v := after + 1; v <= min(upTo, l.upTo); v++ {
		evs = append(evs, es.Event{AggregateType: "thing", AggregateID: agg, Version: v})
	}
	return evs, nil
}

// publishedThing is the stream record of version v of thing agg.
func publishedThing(t *testing.T, agg string, v int64, data string) events.KinesisEventRecord {
	t.Helper()
	e := es.Event{AggregateType: "thing", AggregateID: agg, Version: v, Type: "Noted", Data: json.RawMessage(data), RecordedAt: time.Now()}
	env, err := es.Envelope(&e, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	var r events.KinesisEventRecord
	r.EventID = fmt.Sprintf("shardId-000000000000:%d", v)
	r.EventSourceArn = "arn:aws:kinesis:us-east-1:123456789012:stream/ShowEvents"
	r.Kinesis.SequenceNumber, r.Kinesis.PartitionKey, r.Kinesis.Data = fmt.Sprint(v), agg, b
	return r
}

// TestEntityItemsThatCannotBeWritten: an entity item over DynamoDB's 400 KB
// is set aside naming the attribute (it was a plain error, retried on
// every delivery, holding its aggregate back for ever), and the event after
// it is applied; two items whose keys read alike joined by a space
// ("a b"+"c", "a"+"b c") are two items.
func TestEntityItemsThatCannotBeWritten(t *testing.T) {
	ctx := context.Background()
	mem, p := inProcess(projection.Views{Entities: []projection.EntityView{noteView{}}})
	resp, err := p.Handle(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{
		publishedThing(t, "t1", 1, `{"PK":"a b","SK":"c","Note":"first"}`),
		publishedThing(t, "t1", 2, `{"PK":"a","SK":"b c","Note":"second"}`),
		publishedThing(t, "t1", 3, `{"PK":"big","SK":"x","Note":"`+strings.Repeat("x", 420_000)+`"}`),
		publishedThing(t, "t1", 4, `{"PK":"after","SK":"x","Note":"fourth"}`),
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

// inProcess is a projector of views on the in-process store, its views in
// table "views" and what it sets aside in "quarantine".
func inProcess(views projection.Views) (*memdb.DB, *projection.Projector) {
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable, "quarantine": memdb.QuarantineTable})
	return mem, projection.New(mem, appendedLog{upTo: 4}, projection.FixedTable("views"), views, projection.WithSetAside(setaside.New(mem, "quarantine")))
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
	mem, p := inProcess(projection.Views{Folds: []projection.FoldView{notesFold{}}})
	resp, err := p.Handle(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{
		publishedThing(t, "t1", 1, `{"Note":"small"}`),
		publishedThing(t, "t1", 2, `{"Note":"`+strings.Repeat("x", 300_000)+`"}`),
		publishedThing(t, "t1", 3, `{"Note":"`+strings.Repeat("y", 200_000)+`"}`),
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
