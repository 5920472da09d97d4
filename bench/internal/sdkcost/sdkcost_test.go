package sdkcost

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Every attribute type comes back from the SDK as the store answered it:
// the replayed request's answer is decoded by the SDK's own deserializer,
// so its CPU is the SDK's real work on that answer.
func TestAnswersDecodeAsTheStoreGaveThem(t *testing.T) {
	item := map[string]types.AttributeValue{
		"s":    &types.AttributeValueMemberS{Value: "pageviews#user-1"},
		"n":    &types.AttributeValueMemberN{Value: "42.5"},
		"b":    &types.AttributeValueMemberB{Value: []byte{0, 1, 2, 255}},
		"bool": &types.AttributeValueMemberBOOL{Value: true},
		"null": &types.AttributeValueMemberNULL{Value: true},
		"ss":   &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":   &types.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"bs":   &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}},
		"l":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "x"}}},
		"m":    &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberN{Value: "1"}}},
	}
	ctx := context.Background()
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"}, "sk": &types.AttributeValueMemberS{Value: "s"}}
	client, h := Client()
	for _, tt := range []struct {
		name string
		s    Sample
		got  func(any) any
	}{
		{"UpdateItem", Sample{&dynamodb.UpdateItemInput{TableName: aws.String("views"), Key: key}, &dynamodb.UpdateItemOutput{Attributes: item}},
			func(o any) any { return o.(*dynamodb.UpdateItemOutput).Attributes }},
		{"GetItem", Sample{&dynamodb.GetItemInput{TableName: aws.String("views"), Key: key}, &dynamodb.GetItemOutput{Item: item}},
			func(o any) any { return o.(*dynamodb.GetItemOutput).Item }},
		{"Query", Sample{&dynamodb.QueryInput{TableName: aws.String("views")}, &dynamodb.QueryOutput{Items: []map[string]types.AttributeValue{item, item}, Count: 2}},
			func(o any) any { return o.(*dynamodb.QueryOutput).Items }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body, err := AnswerJSON(tt.s.Out)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Replay(ctx, client, h, tt.s, body)
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.got(tt.s.Out); !reflect.DeepEqual(tt.got(got), want) {
				t.Errorf("the SDK decoded %#v\nthe store answered %#v", tt.got(got), want)
			}
		})
	}
}

// A sampler keeps at most SamplesPerOp requests of each operation, drawn
// from all of them, not only the first.
func TestSamplerKeepsAUniformSample(t *testing.T) {
	var s Sampler
	const n = 10 * SamplesPerOp
	for i := range n {
		s.Keep("UpdateItem", i, nil)
	}
	s.Keep("GetItem", -1, nil)
	got := s.Samples()
	if len(got["UpdateItem"]) != SamplesPerOp || len(got["GetItem"]) != 1 {
		t.Fatalf("kept %d UpdateItem and %d GetItem, want %d and 1", len(got["UpdateItem"]), len(got["GetItem"]), SamplesPerOp)
	}
	late := 0
	for _, smp := range got["UpdateItem"] {
		if smp.In.(int) >= SamplesPerOp {
			late++
		}
	}
	if late < SamplesPerOp/2 {
		t.Errorf("%d of %d kept requests came after the first %d: want most (a uniform draw keeps about 90%%)", late, SamplesPerOp, SamplesPerOp)
	}
}

// Measure gives a positive CPU per request for each operation sampled, and
// Of charges it per request.
func TestMeasureAndCharge(t *testing.T) {
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"}}
	samples := map[string][]Sample{"GetItem": {{&dynamodb.GetItemInput{TableName: aws.String("views"), Key: key}, &dynamodb.GetItemOutput{}}}}
	var fake time.Duration
	clock := func() time.Duration { fake += time.Millisecond; return fake } // 1 ms between readings
	cost, err := Measure(context.Background(), samples, 1, clock)
	if err != nil {
		t.Fatal(err)
	}
	if cost["GetItem"] != time.Millisecond {
		t.Fatalf("cost %v, want the clock's 1 ms per replay", cost["GetItem"])
	}
	if got := cost.Of(map[string]int{"GetItem": 3, "Query": 2}); got != 3*time.Millisecond {
		t.Errorf("3 GetItem and 2 unmeasured Query charged %v, want 3 ms", got)
	}
}
