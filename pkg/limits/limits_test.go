package limits

import (
	"errors"
	"strings"
	"testing"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestItemSize(t *testing.T) {
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	n := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: v} }
	tests := []struct {
		name string
		item map[string]ddbtypes.AttributeValue
		want int
	}{
		{"string: name plus UTF-8 bytes", map[string]ddbtypes.AttributeValue{"city": s("Oslo")}, 4 + 4},
		{"multibyte string", map[string]ddbtypes.AttributeValue{"c": s("Zürich")}, 1 + 7},
		{"number: two digits a byte plus one", map[string]ddbtypes.AttributeValue{"n": n("12345")}, 1 + 4},
		{"number: leading and trailing zeros do not count", map[string]ddbtypes.AttributeValue{"n": n("-0012.3400")}, 1 + 3},
		{"binary by its bytes", map[string]ddbtypes.AttributeValue{"b": &ddbtypes.AttributeValueMemberB{Value: make([]byte, 10)}}, 1 + 10},
		{"bool and null", map[string]ddbtypes.AttributeValue{"t": &ddbtypes.AttributeValueMemberBOOL{Value: true}, "z": &ddbtypes.AttributeValueMemberNULL{Value: true}}, 2 + 2},
		{"list: 3 plus 1 per element", map[string]ddbtypes.AttributeValue{"l": &ddbtypes.AttributeValueMemberL{Value: []ddbtypes.AttributeValue{s("ab"), s("c")}}}, 1 + 3 + 1 + 2 + 1 + 1},
		{"map: keys count", map[string]ddbtypes.AttributeValue{"m": &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{"k": s("vv")}}}, 1 + 3 + 1 + 1 + 2},
		{"string set", map[string]ddbtypes.AttributeValue{"ss": &ddbtypes.AttributeValueMemberSS{Value: []string{"a", "bc"}}}, 2 + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ItemSize(tt.item); got != tt.want {
				t.Errorf("ItemSize = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestCheckItemNamesTheLargestAttribute(t *testing.T) {
	item := map[string]ddbtypes.AttributeValue{
		"pk":  &ddbtypes.AttributeValueMemberS{Value: "k#1"},
		"bio": &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("x", DynamoDBItemBytes)},
	}
	err := CheckItem(item)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Field != "bio" || tl.Bytes != DynamoDBItemBytes+3+2+3 || tl.Limit != DynamoDBItemBytes {
		t.Fatalf("CheckItem = %v, want a TooLargeError naming bio", err)
	}
	if !strings.Contains(err.Error(), "its largest field is bio") {
		t.Errorf("error %q does not name the field", err)
	}
	delete(item, "bio")
	if err := CheckItem(item); err != nil {
		t.Errorf("a small item: %v", err)
	}
}
