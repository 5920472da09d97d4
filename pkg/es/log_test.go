package es_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestSnapshotPlusTailEqualsTheWholeLog: for random command sequences, the
// state loaded from the latest snapshot and the events after it equals the
// state folded from every event since version 1 — and the load really used
// a snapshot (it read fewer events than the log holds).
func TestSnapshotPlusTailEqualsTheWholeLog(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			_, store := newStore(t)
			every := int(seed) + 2
			x := es.NewExecutor[account](store, ledger{}, es.WithSnapshotEvery[account](every))
			rng := rand.New(rand.NewPCG(seed, 99))
			for i := range 40 {
				typ, extra := "Deposit", ""
				switch rng.IntN(4) {
				case 0:
					typ = "Withdraw"
				case 1:
					extra = fmt.Sprintf(`,"split":%d`, rng.IntN(3)+1)
				}
				run(t, x, cmd(fmt.Sprintf("c%d", i), typ, "a1", rng.IntN(9)+1, extra))
			}
			snap, tail, err := store.Load(ctx, "a1", ledger{}.StateSchema())
			if err != nil {
				t.Fatal(err)
			}
			all, err := store.Events(ctx, "a1", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if snap == nil || len(tail) >= len(all) || len(tail) > every+3 {
				t.Fatalf("snapshot %v, tail of %d events, log of %d: want a snapshot and a tail of at most %d", snap, len(tail), len(all), every+3)
			}
			fromSnap, v1, err := x.Fold(snap, tail)
			if err != nil {
				t.Fatal(err)
			}
			fromLog, v2, err := x.Fold(nil, all)
			if err != nil {
				t.Fatal(err)
			}
			if v1 != v2 || !reflect.DeepEqual(fromSnap, fromLog) {
				t.Fatalf("snapshot %d + %d events: %+v at %d\nwhole log of %d: %+v at %d", snap.Version, len(tail), fromSnap, v1, len(all), fromLog, v2)
			}
			other, _, err := store.Load(ctx, "a1", "account/v2")
			if err != nil || other != nil {
				t.Fatalf("a snapshot of another schema: %v %v, want it ignored", other, err)
			}
		})
	}
}

// streamRecords reads every record of table's DynamoDB stream, as Lambda
// would hand them over.
func streamRecords(t *testing.T, db *dynamodb.Client, table string) []events.DynamoDBEventRecord {
	t.Helper()
	ctx := context.Background()
	ds := dynamodbstreams.NewFromConfig(awsCfg)
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	arn := d.Table.LatestStreamArn
	sd, err := ds.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	if err != nil {
		t.Fatal(err)
	}
	var out []events.DynamoDBEventRecord
	for _, sh := range sd.StreamDescription.Shards {
		it, err := ds.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh.ShardId, ShardIteratorType: "TRIM_HORIZON"})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := ds.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs.Records {
			out = append(out, stream.FromStreamsRecord(&recs.Records[i], aws.ToString(arn)))
		}
	}
	return out
}

func readStream(t *testing.T, kin *kinesis.Client, name string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, r := range readRecords(t, kin, name) {
		out = append(out, r.Data)
	}
	return out
}

// readRecords is every record of stream name, shard by shard.
func readRecords(t *testing.T, kin *kinesis.Client, name string) []kintypes.Record {
	t.Helper()
	ctx := context.Background()
	shards, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	var out []kintypes.Record
	for _, sh := range shards.Shards {
		it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs.Records...)
	}
	return out
}

// TestPublishAndErase: the events table's stream is published without the
// personal data; an erasure removes only that, is audited in the log, and
// is not published again; any other change to an event, and a deletion, is
// set aside naming the attribute.
func TestPublishAndErase(t *testing.T) {
	ctx := context.Background()
	db, store := newStore(t)
	tables := store.Tables()
	kin := kinesis.NewFromConfig(awsCfg)
	name := tables.Events + "-published"
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	quarantine := tables.Events + "-quarantine"
	if err := setaside.CreateTable(ctx, db, quarantine); err != nil {
		t.Fatal(err)
	}
	x := es.NewExecutor[account](store, ledger{})
	run(t, x, cmd("c1", "Deposit", "a1", 5, `,"owner":"Ada Lovelace"`))
	run(t, x, cmd("c2", "Deposit", "a1", 7, ""))

	p := es.NewPublisher(kin, name, es.PublishWithSetAside(setaside.New(db, quarantine)))
	recs := streamRecords(t, db, tables.Events)
	resp, err := p.Handle(ctx, events.DynamoDBEvent{Records: recs})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("publish: %v %v", resp, err)
	}
	published := readStream(t, kin, name)
	if len(published) != 2 {
		t.Fatalf("%d records published, want 2", len(published))
	}
	for i, r := range readRecords(t, kin, name) {
		if aws.ToString(r.PartitionKey) != "a1" {
			t.Errorf("record %d has partition key %q, want the aggregate id a1", i, aws.ToString(r.PartitionKey))
		}
	}
	for i, b := range published {
		if strings.Contains(string(b), "Ada") {
			t.Errorf("record %d carries the personal data: %s", i, b)
		}
		e, err := es.DecodePublished(b)
		if err != nil || e.AggregateID != "a1" || e.Version != int64(i+1) || e.Type != "Deposited" {
			t.Errorf("record %d: %+v %v", i, e, err)
		}
	}

	res, err := es.Erase(ctx, db, tables, es.Erasure{Subject: "owner-a1", Reason: "request GDPR-17", By: "ops@example.com"}, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Erased) != 1 || res.Erased[0] != "a1/1" || res.Audit == nil || res.Audit.AggregateID != "erasure#owner-a1" {
		t.Fatalf("erasure: %+v", res)
	}
	evs, _ := store.Events(ctx, "a1", 0, 0)
	if len(evs[0].Personal) != 0 || evs[0].ErasedAt.IsZero() || string(evs[0].Data) != `{"amount":5}` {
		t.Fatalf("event 1 after the erasure: %+v", evs[0])
	}
	again, err := es.Erase(ctx, db, tables, es.Erasure{Subject: "owner-a1", Reason: "request GDPR-17", By: "ops@example.com"}, time.Now(), false)
	if err != nil || len(again.Erased) != 0 || again.AlreadyErased != 1 || again.Audit != nil {
		t.Fatalf("second erasure: %+v %v, want nothing erased and no audit event", again, err)
	}

	// Tampering: a change to an event's data, and a deletion.
	key := map[string]types.AttributeValue{es.AttrAggregateID: &types.AttributeValueMemberS{Value: "a1"}, es.AttrVersion: &types.AttributeValueMemberN{Value: "2"}}
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tables.Events), Key: key,
		UpdateExpression: aws.String("SET #d = :d"), ExpressionAttributeNames: map[string]string{"#d": es.AttrData},
		ExpressionAttributeValues: map[string]types.AttributeValue{":d": &types.AttributeValueMemberS{Value: `{"amount":700}`}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tables.Events), Key: key}); err != nil {
		t.Fatal(err)
	}
	all := streamRecords(t, db, tables.Events)
	later := all[len(recs):]
	var names []string
	for _, r := range later {
		names = append(names, r.EventName)
	}
	// the erasure (MODIFY), the audit event (INSERT), the tampering (MODIFY, REMOVE)
	if strings.Join(names, ",") != "MODIFY,INSERT,MODIFY,REMOVE" {
		t.Fatalf("stream after the erasure: %v", names)
	}
	resp, err = p.Handle(ctx, events.DynamoDBEvent{Records: later})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("publish: %v %v", resp, err)
	}
	published = readStream(t, kin, name)
	if len(published) != 3 || !strings.Contains(string(published[2]), `"type":"PersonalDataErased"`) {
		t.Fatalf("published after the erasure: %d records, want the audit event only added", len(published))
	}
	var audit struct {
		Data struct{ Data json.RawMessage }
	}
	_ = json.Unmarshal(published[2], &audit)
	if !strings.Contains(string(audit.Data.Data), `"reason":"request GDPR-17"`) || !strings.Contains(string(audit.Data.Data), `"events":["a1/1"]`) {
		t.Errorf("audit event data: %s", audit.Data.Data)
	}
	if item, err := setaside.Load(ctx, db, quarantine, later[0].EventSourceArn, later[0].Change.SequenceNumber); err != nil || item != nil {
		t.Errorf("the erasure's MODIFY was set aside: %+v %v", item, err)
	}
	for i, want := range map[int]string{2: "dynamodb.NewImage.data", 3: "eventName"} {
		item, err := setaside.Load(ctx, db, quarantine, later[i].EventSourceArn, later[i].Change.SequenceNumber)
		if err != nil || item == nil {
			t.Fatalf("record %d (%s) not set aside: %v", i, later[i].EventName, err)
		}
		if item.Field != want || !strings.Contains(item.Reason, "events are immutable") {
			t.Errorf("record %d set aside with field %q reason %q, want %s", i, item.Field, item.Reason, want)
		}
	}
}

// TestErasureTrailHasANamespaceOfItsOwn: the audit trail of an erasure is
// an aggregate no command can name, so an account whose id looks like an
// old trail ("erasure:owner-b") is never written by Erase. An account the
// old Erase did write its audit event into still takes commands (the
// misplaced event keeps its version and is passed over), and the subject's
// trail reads both the old audit event and the new one.
func TestErasureTrailHasANamespaceOfItsOwn(t *testing.T) {
	ctx := context.Background()
	db, store := newStore(t)
	tables := store.Tables()
	x := es.NewExecutor[account](store, ledger{}, es.WithSnapshotEvery[account](2))
	erase := func(subject string) *es.ErasureResult {
		t.Helper()
		res, err := es.Erase(ctx, db, tables, es.Erasure{Subject: subject, Reason: "request 9", By: "ops"}, time.Now(), false)
		if err != nil || res.Audit == nil {
			t.Fatalf("erase %s: %+v %v", subject, res, err)
		}
		return res
	}

	// Today: the trail of owner-c is not the account erasure:owner-c.
	run(t, x, cmd("c1", "Deposit", "erasure:owner-c", 1, ""))
	run(t, x, cmd("c2", "Deposit", "c", 2, `,"owner":"Ada"`))
	res := erase("owner-c")
	if res.Audit.AggregateID != es.ErasureAggregate("owner-c") || res.Audit.AggregateID == es.LegacyErasureAggregate("owner-c") {
		t.Fatalf("audit event appended to %s", res.Audit.AggregateID)
	}
	if v, err := store.Version(ctx, "erasure:owner-c"); err != nil || v != 1 {
		t.Fatalf("account erasure:owner-c is at version %d (%v), want 1: the erasure wrote into it", v, err)
	}
	if err := es.CheckAggregateID(res.Audit.AggregateID); err == nil {
		t.Errorf("the trail's id %s is one a command may name", res.Audit.AggregateID)
	}
	bad := run(t, x, cmd("c3", "Deposit", res.Audit.AggregateID, 1, ""))
	if bad.HTTPStatus != 400 || !strings.Contains(string(bad.Body), `"field":"accountId"`) {
		t.Errorf("a command on the trail %s: %d %s, want 400 naming accountId", res.Audit.AggregateID, bad.HTTPStatus, bad.Body)
	}

	// Before: the audit event of owner-b went into the account erasure:owner-b.
	run(t, x, cmd("b1", "Deposit", "erasure:owner-b", 1, ""))
	run(t, x, cmd("b2", "Deposit", "b", 2, `,"owner":"Bea"`))
	old := es.Event{AggregateType: es.ErasureAggregateType, AggregateID: "erasure:owner-b", Version: 2, Type: es.TypePersonalDataErased,
		Data: json.RawMessage(`{"subject":"owner-b","reason":"request 8","by":"ops","events":["b/1"],"eventCount":1}`), CommandID: "erasure:owner-b@2026-01-01T00:00:00Z",
		RecordedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := store.Append(ctx, es.Append{AggregateID: "erasure:owner-b", Expected: 1, Events: []es.Event{old}}); err != nil {
		t.Fatal(err)
	}
	for i, amount := range []int{3, 4, 5} {
		if r := run(t, x, cmd(fmt.Sprintf("b%d", i+3), "Deposit", "erasure:owner-b", amount, "")); r.HTTPStatus != 200 {
			t.Fatalf("deposit %d into the account holding an old audit event: %d %s", i, r.HTTPStatus, r.Body)
		}
	}
	state, version, err := x.Load(ctx, "erasure:owner-b")
	if err != nil || version != 5 || state.Balance != 13 || !reflect.DeepEqual(state.Ops, []int{1, 3, 4, 5}) {
		t.Fatalf("account erasure:owner-b: %+v at %d (%v), want balance 13 at version 5", state, version, err)
	}
	erase("owner-b")
	trail, err := es.ErasureTrail(ctx, store, "owner-b")
	if err != nil || len(trail) != 2 || trail[0].CommandID != old.CommandID || trail[1].AggregateID != es.ErasureAggregate("owner-b") {
		t.Fatalf("trail of owner-b: %+v %v, want the old audit event then the new one", trail, err)
	}
	if trail, err := es.ErasureTrail(ctx, store, "owner-c"); err != nil || len(trail) != 1 {
		t.Fatalf("trail of owner-c: %+v %v, want one audit event (not the account's deposit)", trail, err)
	}
}

// failAppends is DynamoDB with TransactWriteItems failing: an erasure that
// stops after erasing, before its audit event (a crash, a throttle).
type failAppends struct{ *dynamodb.Client }

func (failAppends) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return nil, fmt.Errorf("connection reset")
}

// TestErasureStoppedBeforeItsAuditIsAuditedWhenRunAgain: an erasure that
// removed the personal data but could not append its audit event says to
// run it again to append it; running it again appends the audit event
// listing those events, so no erasure goes unaudited.
func TestErasureStoppedBeforeItsAuditIsAuditedWhenRunAgain(t *testing.T) {
	ctx := context.Background()
	db, store := newStore(t)
	tables := store.Tables()
	x := es.NewExecutor[account](store, ledger{})
	run(t, x, cmd("c1", "Deposit", "a1", 5, `,"owner":"Ada Lovelace"`))
	run(t, x, cmd("c2", "Deposit", "a1", 7, `,"owner":"Ada Lovelace"`))
	er := es.Erasure{Subject: "owner-a1", Reason: "request GDPR-18", By: "ops"}

	first, err := es.Erase(ctx, failAppends{db}, tables, er, time.Now(), false)
	if err == nil || !strings.Contains(err.Error(), "run it again to append it") || len(first.Erased) != 2 {
		t.Fatalf("erasure without its audit event: %+v %v, want 2 events erased and an error saying to run it again", first, err)
	}
	// A dry run now lists no event holding personal data, and says the
	// two an earlier run erased without its audit event: -yes appends it.
	dry, err := es.Erase(ctx, db, tables, er, time.Now().Add(time.Second), true)
	if err != nil || len(dry.Erased) != 0 || !reflect.DeepEqual(dry.Completed, []string{"a1/1", "a1/2"}) || !reflect.DeepEqual(dry.Completes, []string{first.ID}) {
		t.Fatalf("dry run after the erasure that stopped: %+v %v, want none to erase and a1/1, a1/2 to audit (completing %s)", dry, err, first.ID)
	}
	again, err := es.Erase(ctx, db, tables, er, time.Now().Add(time.Second), false)
	if err != nil || again.Audit == nil {
		t.Fatalf("erasure run again: %+v %v, want the missing audit event appended", again, err)
	}
	trail, err := es.ErasureTrail(ctx, store, "owner-a1")
	if err != nil || len(trail) != 1 {
		t.Fatalf("trail of owner-a1: %+v %v, want one audit event", trail, err)
	}
	var audit struct {
		Events     []string `json:"events"`
		EventCount int      `json:"eventCount"`
		Completes  []string `json:"completes"`
	}
	if err := json.Unmarshal(trail[0].Data, &audit); err != nil || !reflect.DeepEqual(audit.Events, []string{"a1/1", "a1/2"}) ||
		audit.EventCount != 2 || !reflect.DeepEqual(audit.Completes, []string{first.ID}) {
		t.Errorf("audit event %s (%v), want events a1/1 and a1/2, completing %s", trail[0].Data, err, first.ID)
	}
	if third, err := es.Erase(ctx, db, tables, er, time.Now().Add(2*time.Second), false); err != nil || third.Audit != nil {
		t.Errorf("erasure run a third time: %+v %v, want nothing to do: the erasure is audited", third, err)
	}
	if dry, err := es.Erase(ctx, db, tables, er, time.Now().Add(3*time.Second), true); err != nil || len(dry.Erased) != 0 || len(dry.Completed) != 0 || dry.AlreadyErased != 2 {
		t.Errorf("dry run once audited: %+v %v, want nothing to erase or audit, 2 erased before", dry, err)
	}
}

// TestModifyWithoutBothImagesNamesTheStreamViewType: on a stream that does
// not carry both images, an erasure's MODIFY cannot be told from tampering;
// it is set aside naming the missing image and the view type the table
// needs, not as a change of an attribute nobody changed.
func TestModifyWithoutBothImagesNamesTheStreamViewType(t *testing.T) {
	p := es.NewPublisher(nil, "published")
	s := func(v string) events.DynamoDBAttributeValue { return events.NewStringAttribute(v) }
	keys := map[string]events.DynamoDBAttributeValue{es.AttrAggregateID: s("a1"), es.AttrVersion: events.NewNumberAttribute("1")}
	erased := map[string]events.DynamoDBAttributeValue{es.AttrAggregateID: s("a1"), es.AttrVersion: events.NewNumberAttribute("1"),
		es.AttrType: s("Deposited"), es.AttrData: s(`{"amount":5}`), es.AttrErasedAt: s("2026-12-04T00:00:00Z"), es.AttrErasure: s("erasure#o@1")}
	for _, tc := range []struct {
		name     string
		viewType string
		old, new map[string]events.DynamoDBAttributeValue
		field    string
	}{
		{"NEW_IMAGE", "NEW_IMAGE", nil, erased, "dynamodb.OldImage"},
		{"OLD_IMAGE", "OLD_IMAGE", erased, nil, "dynamodb.NewImage"},
		{"KEYS_ONLY", "KEYS_ONLY", nil, nil, "dynamodb.OldImage"},
	} {
		rec := events.DynamoDBEventRecord{EventName: "MODIFY", Change: events.DynamoDBStreamRecord{Keys: keys, OldImage: tc.old, NewImage: tc.new,
			StreamViewType: tc.viewType, SequenceNumber: "100"}}
		_, _, err := p.Record(&rec)
		var re *es.RecordError
		if !errors.As(err, &re) || re.Field != tc.field || !strings.Contains(re.Reason, "NEW_AND_OLD_IMAGES") {
			t.Errorf("%s: %v, want a RecordError naming %s and NEW_AND_OLD_IMAGES", tc.name, err, tc.field)
		}
	}
}

// TestDryRunListsOnlyWhatHoldsPersonalData: a dry run after an erasure
// lists nothing to erase (the events stay in the subject index, without
// their personal data), so an operator checking an erasure is not told it
// failed.
func TestDryRunListsOnlyWhatHoldsPersonalData(t *testing.T) {
	ctx := context.Background()
	db, store := newStore(t)
	tables := store.Tables()
	x := es.NewExecutor[account](store, ledger{})
	run(t, x, cmd("c1", "Deposit", "a1", 5, `,"owner":"Ada Lovelace"`))
	er := es.Erasure{Subject: "owner-a1", Reason: "request GDPR-19", By: "ops"}
	if dry, err := es.Erase(ctx, db, tables, er, time.Now(), true); err != nil || !reflect.DeepEqual(dry.Erased, []string{"a1/1"}) {
		t.Fatalf("dry run before: %+v %v, want a1/1 listed", dry, err)
	}
	if _, err := es.Erase(ctx, db, tables, er, time.Now(), false); err != nil {
		t.Fatal(err)
	}
	run(t, x, cmd("c2", "Deposit", "a1", 7, `,"owner":"Ada L."`))
	dry, err := es.Erase(ctx, db, tables, er, time.Now(), true)
	if err != nil || !reflect.DeepEqual(dry.Erased, []string{"a1/2"}) || dry.AlreadyErased != 1 {
		t.Fatalf("dry run after: %+v %v, want a1/2 listed and a1/1 counted as erased", dry, err)
	}
}

// TestInsertNoCommandWroteSaysWhatToDo: an event item written by hand (its
// data not JSON, its version not a number) is set aside naming the
// attribute, and the reason says what an operator does about it: the item
// is still in the log, where the next command meets it.
func TestInsertNoCommandWroteSaysWhatToDo(t *testing.T) {
	p := es.NewPublisher(nil, "published")
	s := func(v string) events.DynamoDBAttributeValue { return events.NewStringAttribute(v) }
	event := func(version, data string) map[string]events.DynamoDBAttributeValue {
		return map[string]events.DynamoDBAttributeValue{es.AttrAggregateID: s("a1"), es.AttrVersion: events.NewNumberAttribute(version),
			es.AttrAggregateType: s("account"), es.AttrType: s("Deposited"), es.AttrData: s(data), es.AttrRecordedAt: s("2026-12-04T00:00:00Z")}
	}
	for _, tc := range []struct {
		name, version, data, field string
	}{
		{"data not JSON", "3", `{"amount":`, "dynamodb.NewImage.data"},
		{"version not whole", "1.5", `{"amount":5}`, "dynamodb.NewImage.version"},
	} {
		img := event(tc.version, tc.data)
		rec := events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{
			Keys:     map[string]events.DynamoDBAttributeValue{es.AttrAggregateID: s("a1"), es.AttrVersion: img[es.AttrVersion]},
			NewImage: img, StreamViewType: "NEW_AND_OLD_IMAGES", SequenceNumber: "100"}}
		_, _, err := p.Record(&rec)
		var re *es.RecordError
		if !errors.As(err, &re) || re.Field != tc.field {
			t.Fatalf("%s: %v, want a RecordError naming %s", tc.name, err, tc.field)
		}
		for _, want := range []string{"no command writes", "a1", "point-in-time recovery", "do not put it back"} {
			if !strings.Contains(re.Reason, want) {
				t.Errorf("%s: reason %q does not say %q", tc.name, re.Reason, want)
			}
		}
	}
}

// TestAnEventAttributeIsNamedAsAPathStep: an event item changed or
// written by hand is set aside naming the attribute at fault as the strict
// reader names a key in a path (strictjson.KeyPath): whoever wrote the item
// chose the name, and written raw "a.b" would read as b of a map a and ESC
// would reach the set-aside record's field and operators' terminals.
func TestAnEventAttributeIsNamedAsAPathStep(t *testing.T) {
	p := es.NewPublisher(nil, "published")
	s := func(v string) events.DynamoDBAttributeValue { return events.NewStringAttribute(v) }
	event := func(extra string, v events.DynamoDBAttributeValue) map[string]events.DynamoDBAttributeValue {
		img := map[string]events.DynamoDBAttributeValue{es.AttrAggregateID: s("a1"), es.AttrVersion: events.NewNumberAttribute("3"),
			es.AttrAggregateType: s("account"), es.AttrType: s("Deposited"), es.AttrData: s(`{"amount":5}`), es.AttrRecordedAt: s("2026-12-04T00:00:00Z")}
		if extra != "" {
			img[extra] = v
		}
		return img
	}
	for _, tc := range []struct {
		name, eventName string
		old, new        map[string]events.DynamoDBAttributeValue
		field           string
	}{
		{"an insert with a map attribute named with a dot", "INSERT", nil, event("note.text", events.NewMapAttribute(nil)), `dynamodb.NewImage["note.text"]`},
		{"a modify adding an attribute holding ESC", "MODIFY", event("", events.DynamoDBAttributeValue{}), event("\x1b[2J", s("x")), `dynamodb.NewImage["\x1b[2J"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.DynamoDBEventRecord{EventName: tc.eventName, Change: events.DynamoDBStreamRecord{
				Keys:     map[string]events.DynamoDBAttributeValue{es.AttrAggregateID: s("a1"), es.AttrVersion: events.NewNumberAttribute("3")},
				OldImage: tc.old, NewImage: tc.new, StreamViewType: "NEW_AND_OLD_IMAGES", SequenceNumber: "100"}}
			_, _, err := p.Record(&rec)
			var re *es.RecordError
			if !errors.As(err, &re) || re.Field != tc.field {
				t.Fatalf("%v, want a RecordError naming %s", err, tc.field)
			}
			if strings.ContainsRune(re.Reason, 0x1b) {
				t.Errorf("reason %q holds ESC", re.Reason)
			}
		})
	}
}
