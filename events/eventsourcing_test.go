package events

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/projection"
	"github.com/tributary-dev/tributary/pkg/seats"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// The event-sourcing samples (commands, publish, project) register here,
// apart from the other functions' cases.
func init() {
	cases["commands/function-url-schedule.json"] = commandsCase(nil, 200, `{"id":"cmd-0001","status":"accepted","showId":"show-1","version":1,"events":[{"version":1,"type":"ShowScheduled"}]}`)
	cases["commands/function-url-reserve.json"] = commandsReserve
	cases["commands/function-url-refused.json"] = commandsCase([]string{"commands/function-url-schedule.json", "commands/function-url-reserve.json"}, 422,
		`{"id":"cmd-0003","status":"refused","showId":"show-1","version":2,"field":"data.seats[1]","reason":"seat A2 is already reserved"}`)
	cases["commands/function-url-seatmap.json"] = commandsSeatMap
	cases["publish/dynamodb-insert.json"] = publishInsert
	cases["publish/dynamodb-modify-tampered.json"] = publishTampered
	cases["project/kinesis-events.json"] = projectEvents
}

// esEnv is the event store, a views table and the commands API over them.
type esEnv struct {
	store *es.Store
	x     *es.Executor[seats.Show]
	api   *seats.API
	views string
}

func newES(t *testing.T, e env) *esEnv {
	t.Helper()
	ctx := context.Background()
	tables := es.Tables{Events: e.name + "-events", Snapshots: e.name + "-snapshots", Commands: e.name + "-commands"}
	if err := es.CreateTables(ctx, e.db, tables); err != nil {
		t.Fatal(err)
	}
	v := &esEnv{store: es.NewStore(e.db, tables), views: e.name + "-views"}
	if err := seats.CreateViewsTable(ctx, e.db, v.views); err != nil {
		t.Fatal(err)
	}
	v.x = es.NewExecutor[seats.Show](v.store, seats.Decider{}, es.WithSyncView(seats.SyncView(projection.FixedTable(v.views))))
	v.api = seats.NewAPI(v.x, e.db, projection.FixedTable(v.views))
	return v
}

func (v *esEnv) handle(t *testing.T, raw []byte) lambdaevents.LambdaFunctionURLResponse {
	t.Helper()
	var req lambdaevents.LambdaFunctionURLRequest
	decode(t, raw, &req)
	resp, err := v.api.Handle(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// sendSamples sends the named samples first (the show scheduled, ada's
// reservation), each expected to be accepted.
func (v *esEnv) sendSamples(t *testing.T, files []string) {
	t.Helper()
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if r := v.handle(t, raw); r.StatusCode != 200 {
			t.Fatalf("%s first: %d %s", f, r.StatusCode, r.Body)
		}
	}
}

func commandsCase(before []string, status int, body string) func(t *testing.T, e env, raw []byte) {
	return func(t *testing.T, e env, raw []byte) {
		v := newES(t, e)
		v.sendSamples(t, before)
		r := v.handle(t, raw)
		if r.StatusCode != status || r.Body != body {
			t.Fatalf("%d %s, want %d %s", r.StatusCode, r.Body, status, body)
		}
	}
}

// commandsReserve: after the schedule sample, 200 at version 2; sent again,
// the same answer marked Idempotency-Replayed and no second event; the
// holder is kept apart from the event's data.
func commandsReserve(t *testing.T, e env, raw []byte) {
	v := newES(t, e)
	v.sendSamples(t, []string{"commands/function-url-schedule.json"})
	first := v.handle(t, raw)
	want := `{"id":"cmd-0002","status":"accepted","showId":"show-1","version":2,"events":[{"version":2,"type":"SeatsReserved"}]}`
	if first.StatusCode != 200 || first.Body != want {
		t.Fatalf("%d %s, want 200 %s", first.StatusCode, first.Body, want)
	}
	again := v.handle(t, raw)
	if again.Body != first.Body || again.Headers[seats.HeaderReplayed] != "true" {
		t.Fatalf("resent: %v %s", again.Headers, again.Body)
	}
	evs, err := v.store.Events(context.Background(), "show-1", 0, 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("%d events (%v), want 2", len(evs), err)
	}
	if strings.Contains(string(evs[1].Data), "Ada") || !strings.Contains(string(evs[1].Personal), "Ada Lovelace") || evs[1].Subject != "ada" {
		t.Errorf("event 2: data %s personal %s subject %q: want the holder apart from the data", evs[1].Data, evs[1].Personal, evs[1].Subject)
	}
}

// commandsSeatMap: after the schedule and reserve samples, the seat map at
// version 2, at once: A1 and A2 held by r-ada, 8 free.
func commandsSeatMap(t *testing.T, e env, raw []byte) {
	v := newES(t, e)
	v.sendSamples(t, []string{"commands/function-url-schedule.json", "commands/function-url-reserve.json"})
	r := v.handle(t, raw)
	if r.StatusCode != 200 || r.Headers[seats.HeaderWaited] != "0" ||
		!strings.Contains(r.Body, `"version":2`) || !strings.Contains(r.Body, `"free":8`) || !strings.Contains(r.Body, `"seats":{"A1":"r-ada","A2":"r-ada"}`) {
		t.Fatalf("%d %v %s", r.StatusCode, r.Headers, r.Body)
	}
}

func publishStream(t *testing.T, e env) *es.Publisher {
	t.Helper()
	ctx := context.Background()
	if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	if err := setaside.CreateTable(ctx, e.db, e.name+"-quarantine"); err != nil {
		t.Fatal(err)
	}
	return es.NewPublisher(e.kin, e.name, es.PublishWithSetAside(setaside.New(e.db, e.name+"-quarantine")))
}

// publishInsert: the new event show-1/2 is published, keyed show-1,
// without the holder's name and email.
func publishInsert(t *testing.T, e env, raw []byte) {
	var ev lambdaevents.DynamoDBEvent
	decode(t, raw, &ev)
	resp, err := publishStream(t, e).Handle(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%v %v", resp, err)
	}
	recs := readAll(t, e)
	if len(recs) != 1 || strings.Contains(string(recs[0]), "Ada") || !strings.Contains(string(recs[0]), `"id":"show-1/2","type":"SeatsReserved","key":"show-1"`) {
		t.Fatalf("published %q", recs)
	}
}

// publishTampered: a MODIFY that changed an event's data is not published
// but set aside, naming dynamodb.NewImage.data.
func publishTampered(t *testing.T, e env, raw []byte) {
	var ev lambdaevents.DynamoDBEvent
	decode(t, raw, &ev)
	resp, err := publishStream(t, e).Handle(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%v %v", resp, err)
	}
	if recs := readAll(t, e); len(recs) != 0 {
		t.Fatalf("published %q, want nothing", recs)
	}
	r := ev.Records[0]
	item, err := setaside.Load(context.Background(), e.db, e.name+"-quarantine", r.EventSourceArn, r.Change.SequenceNumber)
	if err != nil || item == nil || item.Field != "dynamodb.NewImage.data" || !strings.Contains(item.Reason, "events are immutable") {
		t.Fatalf("set aside: %+v %v", item, err)
	}
}

// projectEvents: ShowScheduled and SeatsReserved of show-1, held to the
// event store: against a store without them both are set aside naming
// data.version and no view changes; once the store holds them,
// availability 8 of 10 free at version 2, ada's booking r-ada reserved;
// delivered twice, the same views.
func projectEvents(t *testing.T, e env, raw []byte) {
	ctx := context.Background()
	var ev lambdaevents.KinesisEvent
	decode(t, raw, &ev)
	v := newES(t, e)
	quarantine := e.name + "-quarantine"
	if err := setaside.CreateTable(ctx, e.db, quarantine); err != nil {
		t.Fatal(err)
	}
	p := projection.New(e.db, v.store, projection.FixedTable(v.views), seats.Views(v.x), projection.WithoutStateViews(),
		projection.WithSetAside(setaside.New(e.db, quarantine)))
	resp, err := p.Handle(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%v %v", resp, err)
	}
	for _, r := range ev.Records {
		item, err := setaside.Load(ctx, e.db, quarantine, r.EventSourceArn+"/shardId-000000000000", r.Kinesis.SequenceNumber)
		if err != nil || item == nil || item.Field != "data.version" || !strings.Contains(item.Reason, "no such event was appended") {
			t.Fatalf("record %s against a store without it: set aside %+v %v, want naming data.version", r.Kinesis.SequenceNumber, item, err)
		}
	}
	if out, err := e.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(v.views), ConsistentRead: aws.Bool(true)}); err != nil || len(out.Items) != 0 {
		t.Fatalf("views of events the store does not hold: %v %v", out.Items, err)
	}
	for _, r := range ev.Records { // as the commands that made them would
		evt, err := es.DecodePublished(r.Kinesis.Data)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.store.Append(ctx, es.Append{AggregateID: evt.AggregateID, Expected: evt.Version - 1, Events: []es.Event{evt}}); err != nil {
			t.Fatal(err)
		}
	}
	var views []string
	for range 2 {
		resp, err := p.Handle(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%v %v", resp, err)
		}
		out, err := e.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(v.views), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		var items []map[string]any
		_ = attributevalue.UnmarshalListOfMaps(out.Items, &items)
		var got []string
		for _, it := range items {
			delete(it, "f_shardId-000000000000")
			got = append(got, strings.Join([]string{strOf(it["sk"]), strOf(it["free"]), strOf(it["status"]), strOf(it["version"])}, " "))
		}
		views = append(views, strings.Join(got, "; "))
	}
	if views[0] != views[1] || !strings.Contains(views[0], "availability 8  2") || !strings.Contains(views[0], "show-1#r-ada  reserved 2") {
		t.Fatalf("views after the first delivery: %s\nafter the second: %s", views[0], views[1])
	}
}

func strOf(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// readAll is the data of every record on the case's stream.
func readAll(t *testing.T, e env) [][]byte {
	t.Helper()
	ctx := context.Background()
	it, err := e.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(e.name),
		ShardId: aws.String("shardId-000000000000"), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	var data [][]byte
	for _, r := range out.Records {
		data = append(data, r.Data)
	}
	return data
}
