package standin_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/testtools"
)

func TestItemSize(t *testing.T) {
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	n := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: v} }
	tests := []struct {
		name string
		item map[string]ddbtypes.AttributeValue
		want int
	}{
		// The example of the ddbitemsizer package, computed independently: 141 bytes.
		{"strings and a number", map[string]ddbtypes.AttributeValue{
			"itemType": s("SLOT"), "id": s("abc1231"), "hostName": s("Harry Mason"),
			"timeSlot": s("February 23, 1999"), "slotStatus": s("OPEN"), "createdAt": s("February 1, 1999"),
			"updatedAt": s("February 1, 1999"), "expiresAt": n("2099"),
		}, 141},
		{"multi-byte UTF-8 counts bytes", map[string]ddbtypes.AttributeValue{"k": s("héllo")}, 1 + 6},
		// 1 byte per two significant digits, plus 1; leading and trailing zeros trimmed.
		{"number zeros trimmed", map[string]ddbtypes.AttributeValue{"n": n("-00120.500")}, 1 + (2 + 1)},
		{"number 1 digit", map[string]ddbtypes.AttributeValue{"n": n("7")}, 1 + 2},
		{"binary raw bytes", map[string]ddbtypes.AttributeValue{"b": &ddbtypes.AttributeValueMemberB{Value: []byte{1, 2, 3}}}, 1 + 3},
		{"bool and null", map[string]ddbtypes.AttributeValue{"t": &ddbtypes.AttributeValueMemberBOOL{Value: true}, "z": &ddbtypes.AttributeValueMemberNULL{Value: true}}, 2 + 2},
		// A list or map: 3 bytes, plus 1 per element, plus the elements (map keys included).
		{"empty map", map[string]ddbtypes.AttributeValue{"m": &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{}}}, 1 + 3},
		{"list", map[string]ddbtypes.AttributeValue{"l": &ddbtypes.AttributeValueMemberL{Value: []ddbtypes.AttributeValue{s("ab"), n("12")}}}, 1 + 3 + (1 + 2) + (1 + 2)},
		{"map", map[string]ddbtypes.AttributeValue{"m": &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{"ab": s("cd")}}}, 1 + 3 + 1 + 2 + 2},
		{"string set", map[string]ddbtypes.AttributeValue{"ss": &ddbtypes.AttributeValueMemberSS{Value: []string{"a", "bc"}}}, 2 + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := standin.ItemSize(tt.item); got != tt.want {
				t.Errorf("ItemSize = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestStartCountingRefusesReuse(t *testing.T) {
	_, _, err := standin.StartCounting(context.Background(), standin.Options{Addr: "127.0.0.1:0", Reuse: true})
	if err == nil || !strings.Contains(err.Error(), "Reuse") {
		t.Fatalf("StartCounting with Reuse: err = %v, want an error naming Options.Reuse", err)
	}
}

// Every DynamoDB call through a counting stand-in is counted by operation and
// table, and write units follow from the items' sizes; the calls themselves
// behave as without the counter.
func TestCountingStandin(t *testing.T) {
	ctx := context.Background()
	srv, counter := startCounting(t)
	cfg, err := standin.Config(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(cfg)
	for _, table := range []string{"counts", "dedupe"} {
		createKeyedTable(t, db, table)
	}
	counter.Reset() // table creation is not part of what is measured

	key := func(pk string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}}
	}
	// A 1,500-byte item: 2 write units.
	big := map[string]ddbtypes.AttributeValue{
		"pk":  &ddbtypes.AttributeValueMemberS{Value: "big"},
		"pad": &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("x", 1500-len("pk")-len("big")-len("pad"))},
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("dedupe"), Item: big}); err != nil {
		t.Fatal(err)
	}
	// A conditional put that fails: still a request, charged by the existing 1,500-byte item.
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("dedupe"), Item: key("big"),
		ConditionExpression: aws.String("attribute_not_exists(pk)")})
	var ccf *ddbtypes.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("conditional put of an existing item: err = %v, want ConditionalCheckFailedException", err)
	}
	for range 3 {
		if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("counts"), Key: key("k1"),
			UpdateExpression:          aws.String("ADD n :one"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
		{Put: &ddbtypes.Put{TableName: aws.String("dedupe"), Item: key("t1")}},
		{Update: &ddbtypes.Update{TableName: aws.String("counts"), Key: key("k2"), UpdateExpression: aws.String("ADD n :one"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("counts"), Key: key("k1"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if n := got.Item["n"].(*ddbtypes.AttributeValueMemberN).Value; n != "3" {
		t.Fatalf("n = %s after 3 ADD 1 through the counter, want 3", n)
	}
	// Other services pass through and are counted by target.
	if _, err := sqs.NewFromConfig(cfg).ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
		t.Fatal(err)
	}

	c := counter.Snapshot()
	wantOps := map[string]standin.OpCount{
		"PutItem":            {Requests: 2, Failed: 1},
		"UpdateItem":         {Requests: 3},
		"TransactWriteItems": {Requests: 1},
		"GetItem":            {Requests: 1},
	}
	for op, want := range wantOps {
		if got := c.Operation(op); got != want {
			t.Errorf("%s = %+v, want %+v", op, got, want)
		}
	}
	if len(c.DynamoDB) != len(wantOps) {
		t.Errorf("operations counted = %v, want only %v", c.DynamoDB, wantOps)
	}
	if got := c.Other["AmazonSQS.ListQueues"]; got != 1 {
		t.Errorf("AmazonSQS.ListQueues counted %d times, want 1 (other: %v)", got, c.Other)
	}
	if got := c.WriteRequests(); got != 6 {
		t.Errorf("WriteRequests = %d, want 6", got)
	}
	if got, want := c.TableWriteRequests("counts"), 4; got != want {
		t.Errorf("TableWriteRequests(counts) = %d, want %d", got, want)
	}
	if got, want := c.TableWriteRequests("dedupe"), 3; got != want {
		t.Errorf("TableWriteRequests(dedupe) = %d, want %d", got, want)
	}
	if got := c.Tables["counts"]["GetItem"].Requests; got != 1 {
		t.Errorf("GetItem on counts = %d, want 1", got)
	}
	if len(c.Writes) != 7 {
		t.Fatalf("Writes = %d, want 7 (2 puts, 3 updates, 2 transaction items): %+v", len(c.Writes), c.Writes)
	}
	if w := c.Writes[0]; w.Op != "PutItem" || w.Table != "dedupe" || w.Size != 1500 || w.Failed {
		t.Errorf("first write = %+v, want a 1500-byte put to dedupe", w)
	}
	if w := c.Writes[1]; !w.Failed {
		t.Errorf("second write = %+v, want Failed (condition check failed)", w)
	}

	wu, err := c.WriteUnits(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// dedupe: big put 2 + failed put 2 + transactional put 2 = 6;
	// counts: 3 updates of a small item 3 + transactional update 2 = 5.
	if wu.Total != 11 || wu.ByTable["dedupe"] != 6 || wu.ByTable["counts"] != 5 || wu.ByOp["TransactWriteItems"] != 4 || wu.Estimated != 0 {
		t.Errorf("WriteUnits = %+v, want total 11 (dedupe 6, counts 5, TransactWriteItems 4, none estimated)", wu)
	}
	// One strongly consistent GetItem of a small item: 1 read unit.
	if got := c.ReadUnits(); got != 1 {
		t.Errorf("ReadUnits = %v, want 1", got)
	}
}

// TestReadUnits prices reads as DynamoDB does: per 4 KB, half for an
// eventually consistent read, per item for BatchGetItem (a missing key
// costs the minimum), per page for a Scan.
func TestReadUnits(t *testing.T) {
	ctx := context.Background()
	srv, counter := startCounting(t)
	cfg, err := standin.Config(ctx, srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(cfg)
	createKeyedTable(t, db, "r")
	item := func(pk string, size int) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{
			"pk":  &ddbtypes.AttributeValueMemberS{Value: pk},
			"pad": &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("x", size-len("pk")-len(pk)-len("pad"))},
		}
	}
	for pk, size := range map[string]int{"a": 5000, "b": 100} {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("r"), Item: item(pk, size)}); err != nil {
			t.Fatal(err)
		}
	}
	key := func(pk string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}}
	}
	tests := []struct {
		name string
		read func() error
		want float64
	}{
		{"eventually consistent get of 5,000 bytes", func() error {
			_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("r"), Key: key("a")})
			return err
		}, 1},
		{"strongly consistent get of 5,000 bytes", func() error {
			_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("r"), Key: key("a"), ConsistentRead: aws.Bool(true)})
			return err
		}, 2},
		{"batch get of two items and a missing one, consistent", func() error {
			_, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{
				"r": {Keys: []map[string]ddbtypes.AttributeValue{key("a"), key("b"), key("zz")}, ConsistentRead: aws.Bool(true)}}})
			return err
		}, 4},
		{"scan of 5,100 bytes", func() error {
			_, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("r")})
			return err
		}, 1},
	}
	for _, tt := range tests {
		counter.Reset()
		if err := tt.read(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := counter.Snapshot().ReadUnits(); got != tt.want {
			t.Errorf("%s: %v read units, want %v", tt.name, got, tt.want)
		}
	}
}

func startCounting(t *testing.T) (*standin.Server, *standin.Counter) {
	t.Helper()
	testtools.Need(t, "the moto stand-in cannot be installed without it", "python3")
	srv, counter, err := standin.StartCounting(context.Background(), standin.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv, counter
}

func createKeyedTable(t *testing.T, db *dynamodb.Client, name string) {
	t.Helper()
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	})
	if err != nil {
		t.Fatal(err)
	}
}
