package cdc_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/stream"
)

func TestImageJSON(t *testing.T) {
	tests := []struct {
		name string
		av   events.DynamoDBAttributeValue
		want string
	}{
		{"S", events.NewStringAttribute("ada"), `"ada"`},
		{"N keeps its digits", events.NewNumberAttribute("12345678901234567890.5"), `12345678901234567890.5`},
		{"BOOL", events.NewBooleanAttribute(true), `true`},
		{"NULL", events.NewNullAttribute(), `null`},
		{"B is base64", events.NewBinaryAttribute([]byte("hi")), `"aGk="`},
		{"SS", events.NewStringSetAttribute([]string{"a", "b"}), `["a","b"]`},
		{"NS", events.NewNumberSetAttribute([]string{"1", "2.5"}), `[1,2.5]`},
		{"BS", events.NewBinarySetAttribute([][]byte{[]byte("hi")}), `["aGk="]`},
		{"L", events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewStringAttribute("x"), events.NewNumberAttribute("3")}), `["x",3]`},
		{"M", events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"city": events.NewStringAttribute("Oslo"),
			"tags": events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewBooleanAttribute(false)})}), `{"city":"Oslo","tags":[false]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cdc.ImageJSON(map[string]events.DynamoDBAttributeValue{"a": tt.av})
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"a":` + tt.want + `}`; string(b) != want {
				t.Errorf("got %s, want %s", b, want)
			}
		})
	}
	if got, err := cdc.ImageJSON(nil); err != nil || got != nil {
		t.Errorf("ImageJSON(nil) = %v, %v; want nil (a tombstone's image is null)", got, err)
	}
}

// with is img with the attribute name set to av.
func with(img map[string]events.DynamoDBAttributeValue, name string, av events.DynamoDBAttributeValue) map[string]events.DynamoDBAttributeValue {
	out := maps.Clone(img)
	out[name] = av
	return out
}

// changelog is one record read back from the Kinesis stream.
type changelog struct {
	partitionKey string
	env          stream.Envelope
	data         cdc.Data
}

func TestHandleWritesChangelogInOrder(t *testing.T) {
	ctx := context.Background()
	db, streams, kin := standIn(t)
	streamArn := createProfiles(t, db, "profiles")
	createKinesis(t, kin, "events", 2)

	put := func(item map[string]ddbtypes.AttributeValue) {
		t.Helper()
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("profiles"), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	n := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: v} }
	put(map[string]ddbtypes.AttributeValue{"userId": s("u-1"), "version": n("1"), "plan": s("free")})
	put(map[string]ddbtypes.AttributeValue{"userId": s("u-2"), "version": n("7"), "plan": s("pro"), "seats": n("3")})
	put(map[string]ddbtypes.AttributeValue{"userId": s("u-1"), "version": n("2"), "plan": s("pro")})
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("profiles"), Key: map[string]ddbtypes.AttributeValue{"userId": s("u-1")}}); err != nil {
		t.Fatal(err)
	}

	ev := streamEvent(t, streams, streamArn)
	if len(ev.Records) != 4 {
		t.Fatalf("%d stream records, want 4", len(ev.Records))
	}
	resp, err := cdc.New(kin, "events").Handle(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v, want none", resp.BatchItemFailures)
	}

	got := readKinesis(t, kin, "events")
	if len(got) != 4 {
		t.Fatalf("%d changelog records, want 4", len(got))
	}
	// Per entity key, the records are in one shard in table order.
	var u1 []changelog
	var u2 changelog
	for _, c := range got {
		if c.partitionKey != c.env.Key || c.data.Key != c.env.Key {
			t.Errorf("record %s: partition key %q, envelope key %q, data key %q: want all the entity key", c.env.ID, c.partitionKey, c.env.Key, c.data.Key)
		}
		switch c.env.Key {
		case "u-1":
			u1 = append(u1, c)
		case "u-2":
			u2 = c
		default:
			t.Errorf("unexpected key %q", c.env.Key)
		}
	}
	if len(u1) != 3 {
		t.Fatalf("u-1 has %d records, want 3", len(u1))
	}
	want := []struct {
		id, typ, version string
		image            map[string]any
	}{
		{"profiles/u-1/1", cdc.TypeChanged, "1", map[string]any{"userId": "u-1", "version": json.Number("1"), "plan": "free"}},
		{"profiles/u-1/2", cdc.TypeChanged, "2", map[string]any{"userId": "u-1", "version": json.Number("2"), "plan": "pro"}},
		{"profiles/u-1/3", cdc.TypeDeleted, "3", nil},
	}
	for i, w := range want {
		c := u1[i]
		if c.env.ID != w.id || c.env.Type != w.typ || c.data.Version.String() != w.version {
			t.Errorf("u-1 record %d = id %s type %s version %s; want %s %s %s", i, c.env.ID, c.env.Type, c.data.Version, w.id, w.typ, w.version)
		}
		if !reflect.DeepEqual(c.data.Image, w.image) {
			t.Errorf("u-1 record %d image = %#v, want %#v", i, c.data.Image, w.image)
		}
		if c.data.SequenceNumber != ev.Records[[]int{0, 2, 3}[i]].Change.SequenceNumber {
			t.Errorf("u-1 record %d sequenceNumber %s, want the stream record's", i, c.data.SequenceNumber)
		}
		if c.env.OccurredAt.IsZero() || !c.env.SentAt.Equal(c.env.OccurredAt) || !c.env.ReceivedAt.Equal(c.env.OccurredAt) {
			t.Errorf("u-1 record %d times %v %v %v, want all the change's time", i, c.env.OccurredAt, c.env.SentAt, c.env.ReceivedAt)
		}
	}
	if u2.data.Version.String() != "7" || u2.env.ID != "profiles/u-2/7" {
		t.Errorf("u-2 version %s id %s, want its version 7", u2.data.Version, u2.env.ID)
	}
	if u2.data.Image["seats"] != json.Number("3") {
		t.Errorf("u-2 image %v: seats should be the number 3", u2.data.Image)
	}
}

func createProfiles(t *testing.T, db *dynamodb.Client, name string) string {
	t.Helper()
	out, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("userId"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("userId"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.TableDescription.LatestStreamArn)
}

func createKinesis(t *testing.T, kin *kinesis.Client, name string, shards int32) {
	t.Helper()
	ctx := context.Background()
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatal(err)
	}
	w := kinesis.NewStreamExistsWaiter(kin, func(o *kinesis.StreamExistsWaiterOptions) { o.MinDelay = 100 * time.Millisecond })
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// readKinesis reads every record of every shard, each shard in order.
func readKinesis(t *testing.T, kin *kinesis.Client, name string) []changelog {
	t.Helper()
	ctx := context.Background()
	shards, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	var out []changelog
	for _, sh := range shards.Shards {
		it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs.Records {
			c := changelog{partitionKey: aws.ToString(r.PartitionKey)}
			if err := json.Unmarshal(r.Data, &c.env); err != nil {
				t.Fatalf("record %s: %v", aws.ToString(r.SequenceNumber), err)
			}
			dec := json.NewDecoder(bytesReader(c.env.Data))
			dec.UseNumber()
			if err := dec.Decode(&c.data); err != nil {
				t.Fatalf("record %s data: %v", c.env.ID, err)
			}
			out = append(out, c)
		}
	}
	return out
}

// streamEvent reads every record of the table's stream and hands them over
// as Lambda does.
func streamEvent(t *testing.T, streams *dynamodbstreams.Client, arn string) events.DynamoDBEvent {
	t.Helper()
	ctx := context.Background()
	d, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	for _, sh := range d.StreamDescription.Shards {
		it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		out, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		for i := range out.Records {
			ev.Records = append(ev.Records, lambdaRecord(&out.Records[i], arn))
		}
	}
	return ev
}

// fakePutter fails the entries at the given indexes of each PutRecords call,
// or the whole call with err.
type fakePutter struct {
	failAt map[int]bool
	err    error
	got    [][]byte
}

func (f *fakePutter) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := &kinesis.PutRecordsOutput{}
	failed := int32(0)
	for i, e := range in.Records {
		if f.failAt[i] {
			failed++
			out.Records = append(out.Records, kintypes.PutRecordsResultEntry{ErrorCode: aws.String("ProvisionedThroughputExceededException"), ErrorMessage: aws.String("slow down")})
			continue
		}
		f.got = append(f.got, e.Data)
		out.Records = append(out.Records, kintypes.PutRecordsResultEntry{SequenceNumber: aws.String("1"), ShardId: aws.String("shardId-000000000000")})
	}
	out.FailedRecordCount = aws.Int32(failed)
	return out, nil
}

func TestHandleReportsLowestFailedRecord(t *testing.T) {
	rec := func(seq, user string) events.DynamoDBEventRecord {
		img := map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute(user), "version": events.NewNumberAttribute(seq)}
		return events.DynamoDBEventRecord{EventID: "ev-" + seq, EventName: "MODIFY",
			EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/2026-11-29T00:00:00.000",
			Change: events.DynamoDBStreamRecord{ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Unix(1795000000, 0)},
				Keys: map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute(user)}, NewImage: img,
				SequenceNumber: seq, StreamViewType: "NEW_AND_OLD_IMAGES"}}
	}
	batch := func() events.DynamoDBEvent {
		return events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec("100", "a"), rec("200", "b"), rec("300", "a"), rec("400", "c")}}
	}
	noKey := batch()
	noKey.Records[2].Change.Keys = nil
	noKey.Records[2].Change.NewImage = map[string]events.DynamoDBAttributeValue{"email": events.NewStringAttribute("x@example.com")}

	tests := []struct {
		name    string
		put     *fakePutter
		ev      events.DynamoDBEvent
		want    string // the reported sequence number, "" for none
		written int
	}{
		{"all written", &fakePutter{}, batch(), "", 4},
		{"lowest of two failed entries", &fakePutter{failAt: map[int]bool{1: true, 3: true}}, batch(), "200", 2},
		{"whole call failed", &fakePutter{err: errors.New("connection reset")}, batch(), "100", 0},
		{"record without the entity key stops the batch there", &fakePutter{}, noKey, "300", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := cdc.New(tt.put, "events").Handle(context.Background(), tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			if len(resp.BatchItemFailures) > 1 {
				t.Fatalf("failures %v: want at most one, the lowest", resp.BatchItemFailures)
			}
			if len(resp.BatchItemFailures) == 1 {
				got = resp.BatchItemFailures[0].ItemIdentifier
			}
			if got != tt.want {
				t.Errorf("reported %q, want %q", got, tt.want)
			}
			if len(tt.put.got) != tt.written {
				t.Errorf("%d records written, want %d", len(tt.put.got), tt.written)
			}
		})
	}
}

// TestChangelogRecords: what a stream record becomes. The item's personal
// attribute never reaches the changelog (the stream, its archive and
// enrich's table are out of erasure's reach); a REMOVE without its old
// image is refused naming it, since its tombstone's version would be the
// stream's sequence number and outrank every later version of the key.
func TestChangelogRecords(t *testing.T) {
	at := events.SecondsEpochTime{Time: time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)}
	personal := events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
		"name": events.NewStringAttribute("Ada Lovelace"), "email": events.NewStringAttribute("ada@example.com")})
	profile := map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute("u1"),
		"version": events.NewNumberAttribute("5"), "plan": events.NewStringAttribute("pro"), "personal": personal}
	unversioned := maps.Clone(profile)
	delete(unversioned, "version")
	record := func(name, view string, newImage, oldImage map[string]events.DynamoDBAttributeValue) *events.DynamoDBEventRecord {
		return &events.DynamoDBEventRecord{EventID: "e-" + name, EventName: name,
			EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/2026-11-29T00:00:00.000",
			Change: events.DynamoDBStreamRecord{SequenceNumber: "100000000000000000000002", ApproximateCreationDateTime: at, StreamViewType: view,
				Keys: map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute("u1")}, NewImage: newImage, OldImage: oldImage}}
	}
	tests := []struct {
		name      string
		rec       *events.DynamoDBEventRecord
		wantType  string
		version   string
		wantField string // set aside naming it
	}{
		{"insert", record("INSERT", "NEW_AND_OLD_IMAGES", profile, nil), cdc.TypeChanged, "5", ""},
		{"remove", record("REMOVE", "NEW_AND_OLD_IMAGES", nil, profile), cdc.TypeDeleted, "6", ""},
		{"remove without its old image", record("REMOVE", "KEYS_ONLY", nil, nil), "", "", "dynamodb.OldImage"},
		// A write that dropped the version attribute: its version would be
		// the stream's sequence number, above every later version of the
		// key, which the join would then never apply.
		{"modify dropping the version", record("MODIFY", "NEW_AND_OLD_IMAGES", unversioned, profile), "", "", "dynamodb.NewImage.version"},
		// Every item carries its version: one without took the stream's
		// sequence number as its version, which outranked the version the
		// item was given next (2 < a 22-digit number), so the join never
		// applied the item again. A change without one is set aside
		// naming the attribute; the first write that gives the item one
		// is applied.
		{"insert without a version", record("INSERT", "NEW_AND_OLD_IMAGES", unversioned, nil), "", "", "dynamodb.NewImage.version"},
		{"modify of an item that never had one", record("MODIFY", "NEW_AND_OLD_IMAGES", unversioned, unversioned), "", "", "dynamodb.NewImage.version"},
		{"remove of an item that never had one", record("REMOVE", "NEW_AND_OLD_IMAGES", nil, unversioned), "", "", "dynamodb.OldImage.version"},
		{"modify giving an item its first version", record("MODIFY", "NEW_AND_OLD_IMAGES", profile, unversioned), cdc.TypeChanged, "5", ""},
		// A write that took the version back (a restore, a reset) or
		// changed the profile without bumping it: the join holds the old
		// version and would skip this one for good, serving the old
		// profile while the table holds another.
		{"modify taking the version back", record("MODIFY", "NEW_AND_OLD_IMAGES", with(profile, "version", events.NewNumberAttribute("3")), profile),
			"", "", "dynamodb.NewImage.version"},
		{"modify changing the profile without a bump", record("MODIFY", "NEW_AND_OLD_IMAGES", profile, with(profile, "plan", events.NewStringAttribute("free"))),
			"", "", "dynamodb.NewImage.version"},
		// An erasure of the personal attribute alone changes nothing the
		// changelog carries: published, a duplicate the join skips.
		{"modify erasing personal data without a bump", record("MODIFY", "NEW_AND_OLD_IMAGES", profile, with(profile, "personal",
			events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"name": events.NewStringAttribute("Someone Else")}))), cdc.TypeChanged, "5", ""},
		// DynamoDB does not order a set: the same set in another order is
		// no change.
		{"modify erasing personal data, a set in another order", record("MODIFY", "NEW_AND_OLD_IMAGES",
			with(profile, "tags", events.NewStringSetAttribute([]string{"a", "b"})),
			with(with(profile, "tags", events.NewStringSetAttribute([]string{"b", "a"})), "personal", events.NewNullAttribute())), cdc.TypeChanged, "5", ""},
		{"modify bumping the version", record("MODIFY", "NEW_AND_OLD_IMAGES", profile, with(with(profile, "plan", events.NewStringAttribute("free")), "version", events.NewNumberAttribute("4"))),
			cdc.TypeChanged, "5", ""},
		// Hand-made records (the console's Test tab) with a number that is
		// not one, set aside naming where it is.
		{"insert with a bad number in a map", record("INSERT", "NEW_AND_OLD_IMAGES", with(profile, "address",
			events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"zip": events.NewNumberAttribute("abc")})), nil),
			"", "", "dynamodb.NewImage.address.zip"},
		{"modify with an empty number in a list", record("MODIFY", "NEW_AND_OLD_IMAGES", with(profile, "tags",
			events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewStringAttribute("a"), events.NewNumberAttribute("")})), profile),
			"", "", "dynamodb.NewImage.tags[1]"},
		// The personal attribute never reaches the changelog: a bad number
		// there is no reason to set the change aside, and a reason quoting
		// it would keep personal data in the quarantine table.
		{"insert with a bad number in the personal attribute", record("INSERT", "NEW_AND_OLD_IMAGES", with(profile, "personal",
			events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"phone": events.NewNumberAttribute("+64 21 555 0199")})), nil),
			cdc.TypeChanged, "5", ""},
		{"insert with a bad number in a set", record("INSERT", "NEW_AND_OLD_IMAGES", with(profile, "scores",
			events.NewNumberSetAttribute([]string{"1", "NaN"})), nil), "", "", "dynamodb.NewImage.scores[1]"},
	}
	h := cdc.New(nil, "events")
	// A write that took the version back says what mends it: a deletion
	// right after it went out at a version the join held and was lost.
	if _, err := h.Envelope(record("MODIFY", "NEW_AND_OLD_IMAGES", with(profile, "version", events.NewNumberAttribute("3")), profile)); err == nil ||
		!strings.Contains(err.Error(), "write the item again at a version above 5") || !strings.Contains(err.Error(), "tombstone would go out at version 4") {
		t.Errorf("a version taken back: %v; want it to say to write the item above 5, and that a deletion would go out at 4", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := h.Envelope(tt.rec)
			if tt.wantField != "" {
				var ce *cdc.ChangeError
				if !errors.As(err, &ce) || ce.Field != tt.wantField {
					t.Fatalf("err %v, want a ChangeError naming %s", err, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var d cdc.Data
			if err := json.Unmarshal(env.Data, &d); err != nil {
				t.Fatal(err)
			}
			if env.Type != tt.wantType || d.Version.String() != tt.version {
				t.Errorf("type %s version %s, want %s %s", env.Type, d.Version, tt.wantType, tt.version)
			}
			if _, ok := d.Image["personal"]; ok || (d.Image != nil && d.Image["plan"] != "pro") {
				t.Errorf("image %v: want the profile without its personal attribute", d.Image)
			}
		})
	}
}

// TestLongKeysGetAChangelog: a key of up to 256 characters is a partition
// key Kinesis takes, but "<table>/<key>/<version>" is an envelope id of
// at most 256: a key of 200 characters had every change set aside. Such a
// change's id is "cdc:<hash of table and key>/<version>", one per entity
// and version, the version after the last slash as for every other id.
func TestLongKeysGetAChangelog(t *testing.T) {
	at := events.SecondsEpochTime{Time: time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)}
	record := func(key, version string) *events.DynamoDBEventRecord {
		img := map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute(key), "version": events.NewNumberAttribute(version)}
		return &events.DynamoDBEventRecord{EventID: "e", EventName: "INSERT",
			EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/" + strings.Repeat("p", 60) + "/stream/2026-11-29T00:00:00.000",
			Change: events.DynamoDBStreamRecord{SequenceNumber: "100000000000000000000002", ApproximateCreationDateTime: at, StreamViewType: "NEW_AND_OLD_IMAGES",
				Keys: map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute(key)}, NewImage: img}}
	}
	h := cdc.New(nil, "events")
	ids := map[string]string{}
	for _, tc := range []struct{ key, version string }{
		{"u1", "5"},
		{strings.Repeat("é", 200), "5"},
		{strings.Repeat("é", 200), "6"},
		{strings.Repeat("é", 199) + "e", "5"},
		{strings.Repeat("k", 256), "5"},
	} {
		env, err := h.Envelope(record(tc.key, tc.version))
		if err != nil {
			t.Fatalf("key of %d characters: %v", utf8.RuneCountInString(tc.key), err)
		}
		if n := utf8.RuneCountInString(env.ID); n > stream.MaxIDLength || !strings.HasSuffix(env.ID, "/"+tc.version) {
			t.Errorf("id %q: %d characters, want at most %d ending /%s", env.ID, n, stream.MaxIDLength, tc.version)
		}
		if env.Key != tc.key {
			t.Errorf("key %.20q…, want %.20q…", env.Key, tc.key)
		}
		if other, ok := ids[env.ID]; ok {
			t.Errorf("id %s of %.20q… and of %.20q…", env.ID, tc.key, other)
		}
		ids[env.ID] = tc.key + "/" + tc.version
	}
	if _, ok := ids[strings.Repeat("p", 60)+"/u1/5"]; !ok {
		t.Errorf("ids %v: a short key's id is <table>/<key>/<version>", ids)
	}
}

// TestChangesEveryConsumerWouldRefuseAreSetAsideHere: a key holding a
// control character and an image nested deeper than the strict reader
// takes went onto the events stream, where ingest refuses both, and every
// consumer set the record aside again (or keyed views by a NUL). cdc sets
// the change aside itself, naming the attribute.
func TestChangesEveryConsumerWouldRefuseAreSetAsideHere(t *testing.T) {
	at := events.SecondsEpochTime{Time: time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)}
	deep := events.NewStringAttribute("bottom")
	for range 80 {
		deep = events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"a": deep})
	}
	record := func(key string, extra map[string]events.DynamoDBAttributeValue) *events.DynamoDBEventRecord {
		img := map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute(key), "version": events.NewNumberAttribute("1")}
		maps.Copy(img, extra)
		return &events.DynamoDBEventRecord{EventID: "e", EventName: "INSERT",
			EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/2026-11-29T00:00:00.000",
			Change: events.DynamoDBStreamRecord{SequenceNumber: "100000000000000000000002", ApproximateCreationDateTime: at, StreamViewType: "NEW_AND_OLD_IMAGES",
				Keys: map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute(key)}, NewImage: img}}
	}
	h := cdc.New(nil, "events")
	for _, tc := range []struct {
		name        string
		rec         *events.DynamoDBEventRecord
		field, says string
	}{
		{"a NUL in the key", record("u\x001", nil), "dynamodb.Keys.userId", "as the changelog record's key: holds control character U+0000 at byte 1;"},
		{"an image nested 80 deep", record("u1", map[string]events.DynamoDBAttributeValue{"deep": deep}), "dynamodb.NewImage.deep.a", "deep"},
	} {
		_, _, err := h.Record(tc.rec)
		var ce *cdc.ChangeError
		if !errors.As(err, &ce) || !strings.HasPrefix(ce.Field, tc.field) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want a ChangeError naming %s… and saying %q", tc.name, err, tc.field, tc.says)
		}
	}
}

// TestAVersionThatIsNotOneSaysWhatToWrite: a version that is not a whole
// number was set aside as "must be an N attribute holding a non-negative
// integer (got 2.5)", and one written as a string without quoting it; the
// reason quotes what was written and says what to write instead.
func TestAVersionThatIsNotOneSaysWhatToWrite(t *testing.T) {
	at := events.SecondsEpochTime{Time: time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)}
	h := cdc.New(nil, "events")
	for _, tc := range []struct {
		version events.DynamoDBAttributeValue
		says    string
	}{
		{events.NewNumberAttribute("2.5"), "not 2.5"},
		{events.NewNumberAttribute("-5"), "not -5"},
		{events.NewStringAttribute("3"), `not an S attribute ("3")`},
	} {
		img := map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute("u1"), "version": tc.version}
		rec := &events.DynamoDBEventRecord{EventID: "e", EventName: "INSERT", EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/x",
			Change: events.DynamoDBStreamRecord{SequenceNumber: "1", ApproximateCreationDateTime: at, StreamViewType: "NEW_AND_OLD_IMAGES",
				Keys: map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute("u1")}, NewImage: img}}
		_, err := h.Envelope(rec)
		if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "write the item again with") {
			t.Errorf("version %v: %v; want it to say %q and what to write", tc.version, err, tc.says)
		}
	}
}
