package memdb_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream/streamtest"
)

// store is what the aggregate function calls, on moto or on memdb.
type store = memdb.Client

const pipelineDoc = `{"name":"%s","eventTypes":["page_view"],"key":"key","value":"data.ms",
 "windows":[{"kind":"tumbling","size":"1m"},{"kind":"hopping","size":"5m","advance":"1m"},{"kind":"session","gap":"30s"}],
 "aggregates":["count","sum","min","max","mean","quantiles"],"quantiles":[0.5,0.99],
 "outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"correct","allowedLateness":"10m",
 "partitionKeyIsGroupingKey":true}`

var clock = func() time.Time { return time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC) }

// play runs the aggregate function on db through both write paths — new
// batches, a redelivered one (the fences' retry path), a malformed record
// (set aside), an interval's three invocations — and a tick that closes
// every window, and returns every item of both tables.
func play(t *testing.T, db store) (views, quarantine []map[string]types.AttributeValue) {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	procs := map[string]*aggregate.Processor{}
	for _, name := range []string{"batches", "intervals"} {
		cfg, err := pipeline.Parse(fmt.Appendf(nil, pipelineDoc, name))
		if err != nil {
			t.Fatal(err)
		}
		views := state.NewViews(db, "views", cfg.Aggregates, state.WithRetention(cfg.Retention), state.WithClock(clock))
		procs[name] = aggregate.New(cfg, views, nil, "", aggregate.WithLogger(log), aggregate.WithClock(clock),
			// The ledger's TTL is floored at the clock (the records
			// arrived days before it): the same clock on both stores.
			aggregate.WithDedupe(aggregate.NewLedger(db, "views", cfg, dedupe.WithClock(clock))),
			aggregate.WithSetAside(setaside.New(db, "quarantine", setaside.WithClock(clock), setaside.WithFunction("aggregate-"+name))))
	}
	invoke := func(p *aggregate.Processor, raw []byte) map[string]string {
		t.Helper()
		out, err := p.Invoke(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			State map[string]string `json:"state"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		return r.State
	}
	ev := func(first, n int) streamtest.KinesisEvent {
		return streamtest.KinesisEvent{Records: n, First: first, Keys: 7, Spacing: 150 * time.Millisecond}
	}
	b := procs["batches"]
	invoke(b, ev(0, 120).JSON())
	second := ev(120, 150).JSON()
	invoke(b, second)
	invoke(b, second) // redelivered
	bad := ev(270, 1).JSON()
	bad = []byte(strings.Replace(string(bad), `"data":"`, `"data":"bm90IGpzb24=`+`","x":"`, 1)) // "not json"
	invoke(b, bad)
	invoke(b, ev(271, 400).JSON())
	// Both functions consume the stream: the record is one item, with
	// each one's entry (a path into its functions map).
	invoke(procs["intervals"], bad)

	in := procs["intervals"]
	st := map[string]string{}
	for i := range 3 {
		e := ev(1000+i*200, 200)
		e.Window, e.State, e.Final = true, st, i == 2
		st = invoke(in, e.JSON())
	}
	for _, p := range procs {
		if _, err := p.Tick(ctx, clock().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	return scan(t, db, "views"), scan(t, db, "quarantine")
}

func scan(t *testing.T, db store, table string) []map[string]types.AttributeValue {
	t.Helper()
	if m, ok := db.(*memdb.DB); ok {
		return m.Items(table)
	}
	c := db.(*dynamodb.Client)
	var out []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(c, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Items...)
	}
	return out
}

// byKey indexes items by their key attributes.
func byKey(items []map[string]types.AttributeValue, pk, sk string) map[string]map[string]types.AttributeValue {
	out := map[string]map[string]types.AttributeValue{}
	for _, it := range items {
		out[fmt.Sprint(it[pk].(*types.AttributeValueMemberS).Value, "\x00", it[sk].(*types.AttributeValueMemberS).Value)] = it
	}
	return out
}

// The aggregate function leaves the same items in memdb as in moto, for
// every path it takes: memdb answers its requests as DynamoDB does.
func TestAggregateLeavesTheSameItemsAsOnMoto(t *testing.T) {
	srv := standintest.Start(t)
	client := dynamodb.NewFromConfig(standintest.Config(t, srv))
	ctx := context.Background()
	if err := state.CreateTable(ctx, client, "views"); err != nil {
		t.Fatal(err)
	}
	if err := setaside.CreateTable(ctx, client, "quarantine"); err != nil {
		t.Fatal(err)
	}
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable, "quarantine": memdb.QuarantineTable})

	motoViews, motoAside := play(t, client)
	memViews, memAside := play(t, mem)
	for _, c := range []struct {
		name     string
		pk, sk   string
		moto, me []map[string]types.AttributeValue
	}{
		{"views", "pk", "sk", motoViews, memViews},
		{"quarantine", "source", "sequenceNumber", motoAside, memAside},
	} {
		want, got := byKey(undrawn(c.moto), c.pk, c.sk), byKey(undrawn(c.me), c.pk, c.sk)
		if len(want) < 2 && c.name == "views" {
			t.Fatalf("moto's %s table holds %d items: the scenario did nothing", c.name, len(want))
		}
		var keys []string
		for k := range want {
			keys = append(keys, k)
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !reflect.DeepEqual(want[k], got[k]) {
				t.Errorf("%s item %q:\nmoto:  %s\nmemdb: %s", c.name, k, show(want[k]), show(got[k]))
			}
		}
		t.Logf("%s: %d items compared", c.name, len(keys))
	}
	for _, it := range memAside {
		if fs, ok := it["functions"].(*types.AttributeValueMemberM); !ok || len(fs.Value) != 2 {
			t.Errorf("quarantine item %s: functions %v, want an entry of each of the two functions", show(it), it["functions"])
		}
	}
}

// drawnAttributes are the numbers a write draws at random to know its own
// change when its answer is lost (package state): the same in moto and
// memdb only in being there.
var drawnAttributes = []string{"fresh", "unlistedBy"}

// undrawn is items with each drawn number, where it is one, read as 1.
func undrawn(items []map[string]types.AttributeValue) []map[string]types.AttributeValue {
	for _, it := range items {
		for _, name := range drawnAttributes {
			if _, ok := it[name].(*types.AttributeValueMemberN); ok {
				it[name] = &types.AttributeValueMemberN{Value: "1"}
			}
		}
	}
	return items
}

func show(item map[string]types.AttributeValue) string {
	if item == nil {
		return "(none)"
	}
	var names []string
	for n := range item {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		switch v := item[n].(type) {
		case *types.AttributeValueMemberS:
			fmt.Fprintf(&b, "%s=S:%q ", n, v.Value)
		case *types.AttributeValueMemberN:
			fmt.Fprintf(&b, "%s=N:%s ", n, v.Value)
		case *types.AttributeValueMemberB:
			fmt.Fprintf(&b, "%s=B:%d bytes ", n, len(v.Value))
		case *types.AttributeValueMemberL:
			fmt.Fprintf(&b, "%s=L:%d ", n, len(v.Value))
		default:
			fmt.Fprintf(&b, "%s=%T ", n, v)
		}
	}
	return b.String()
}

// The answers the stores rely on: a failed condition hands back the old
// item; a cancelled transaction says which condition failed, with its
// item; an item past 400 KB is refused as DynamoDB words it.
func TestFailuresAnswerAsDynamoDB(t *testing.T) {
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
	ctx := context.Background()
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}, "sk": &types.AttributeValueMemberS{Value: "b"}}
	upd := func(cond string, v string) error {
		_, err := mem.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String("views"), Key: key,
			UpdateExpression:         aws.String("SET #f = :v ADD #n :one"),
			ConditionExpression:      aws.String(cond),
			ExpressionAttributeNames: map[string]string{"#f": "fence", "#n": "n"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":v": &types.AttributeValueMemberS{Value: v}, ":one": &types.AttributeValueMemberN{Value: "1"}},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return err
	}
	if err := upd("attribute_not_exists (#f) OR #f < :v", "5"); err != nil {
		t.Fatal(err)
	}
	err := upd("attribute_not_exists (#f) OR #f < :v", "3")
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("a failed condition: %v, want ConditionalCheckFailedException", err)
	}
	if f := ccf.Item["fence"].(*types.AttributeValueMemberS).Value; f != "5" || ccf.Item["n"].(*types.AttributeValueMemberN).Value != "1" {
		t.Errorf("the exception's item is %v, want the item as it was (fence 5, n 1)", ccf.Item)
	}

	_, err = mem.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("views"), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "c"}, "sk": &types.AttributeValueMemberS{Value: "d"}}}},
		{Put: &types.Put{TableName: aws.String("views"), Item: key, ConditionExpression: aws.String("attribute_not_exists(#f)"),
			ExpressionAttributeNames:            map[string]string{"#f": "fence"},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
	}})
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 || aws.ToString(tce.CancellationReasons[1].Code) != "ConditionalCheckFailed" || tce.CancellationReasons[1].Item == nil {
		t.Fatalf("a transaction with a failed condition: %v, want TransactionCanceledException naming the second item, with it", err)
	}
	if len(mem.Items("views")) != 1 {
		t.Errorf("the cancelled transaction wrote its first item")
	}

	big := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "e"}, "sk": &types.AttributeValueMemberS{Value: "f"},
		"blob": &types.AttributeValueMemberB{Value: make([]byte, 400<<10)}}
	_, err = mem.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("views"), Item: big})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "item size") {
		t.Errorf("an item past 400 KB: %v, want the item size ValidationException", err)
	}
}

// Paths into a map (the quarantine table's functions, an entry a
// function) are read, set and removed as moto does, and a SET through a
// map that is missing is refused as DynamoDB refuses it.
func TestMapPathsAnswerAsOnMoto(t *testing.T) {
	srv := standintest.Start(t)
	client := dynamodb.NewFromConfig(standintest.Config(t, srv))
	ctx := context.Background()
	if err := setaside.CreateTable(ctx, client, "quarantine"); err != nil {
		t.Fatal(err)
	}
	mem := memdb.New(map[string]memdb.Schema{"quarantine": memdb.QuarantineTable})
	key := map[string]types.AttributeValue{"source": &types.AttributeValueMemberS{Value: "s"}, "sequenceNumber": &types.AttributeValueMemberS{Value: "1"}}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	steps := []struct {
		update, cond string
		names        map[string]string
		values       map[string]types.AttributeValue
		refused      bool
	}{
		{"SET #m.#k = :v", "", map[string]string{"#m": "functions", "#k": "a"}, map[string]types.AttributeValue{":v": s("1")}, true},
		{"SET #m = :v", "attribute_not_exists(#m)", map[string]string{"#m": "functions"},
			map[string]types.AttributeValue{":v": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a.b": s("1")}}}, false},
		{"SET #m.#k = :v", "attribute_exists(#m) AND attribute_not_exists(#m.#k) AND size(#m) < :n", map[string]string{"#m": "functions", "#k": "c"},
			map[string]types.AttributeValue{":v": s("2"), ":n": &types.AttributeValueMemberN{Value: "2"}}, false},
		{"SET #m.#k = :v", "size(#m) < :n", map[string]string{"#m": "functions", "#k": "d"},
			map[string]types.AttributeValue{":v": s("3"), ":n": &types.AttributeValueMemberN{Value: "2"}}, true},
		{"SET #x = #m.#k REMOVE #m.#j", "attribute_exists(#m.#j)", map[string]string{"#m": "functions", "#k": "c", "#j": "a.b", "#x": "copied"}, nil, false},
	}
	for _, db := range []store{client, mem} {
		for i, st := range steps {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("quarantine"), Key: key, UpdateExpression: aws.String(st.update),
				ConditionExpression: func() *string {
					if st.cond == "" {
						return nil
					}
					return aws.String(st.cond)
				}(), ExpressionAttributeNames: st.names, ExpressionAttributeValues: st.values})
			if (err != nil) != st.refused {
				t.Errorf("%T step %d (%s): %v, want refused %v", db, i, st.update, err, st.refused)
			}
		}
	}
	want, got := scan(t, client, "quarantine"), scan(t, mem, "quarantine")
	if len(want) != 1 || !reflect.DeepEqual(want, got) {
		t.Errorf("moto:  %v\nmemdb: %v", want, got)
	}
}
