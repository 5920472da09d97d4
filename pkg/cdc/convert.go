package cdc

import (
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// ImageJSON converts a DynamoDB stream image to plain JSON values (see
// stream.ImageJSON): S → string, N → number (exact digits), BOOL, NULL →
// null, M → object, L → array, SS/NS/BS → arrays, B → base64 string. A nil
// image is nil (JSON null). A number that is not a JSON number (DynamoDB
// never sends one, a hand-made event can: "" would silently become 0) is
// an error naming the attribute. The item's personal data attribute
// (setaside.PersonalAttribute) is left out: the changelog goes to the
// events stream, its archive and enrich's table, where erasure does not
// reach, so personal data stays in the item alone.
func ImageJSON(img map[string]events.DynamoDBAttributeValue) (map[string]any, error) {
	for name, av := range img {
		if err := checkNumbers(av); err != nil {
			return nil, fmt.Errorf("attribute %q: %w", name, err)
		}
	}
	out, err := stream.ImageJSON(img)
	delete(out, setaside.PersonalAttribute)
	return out, err
}

// checkNumbers reports the first N or NS value in av that is not a JSON
// number.
func checkNumbers(av events.DynamoDBAttributeValue) error {
	switch av.DataType() {
	case events.DataTypeNumber:
		return checkNumber(av.Number())
	case events.DataTypeNumberSet:
		for _, n := range av.NumberSet() {
			if err := checkNumber(n); err != nil {
				return err
			}
		}
	case events.DataTypeList:
		for i, v := range av.List() {
			if err := checkNumbers(v); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case events.DataTypeMap:
		for k, v := range av.Map() {
			if err := checkNumbers(v); err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
		}
	}
	return nil
}

func checkNumber(n string) error {
	if n == "" || (n[0] != '-' && (n[0] < '0' || n[0] > '9')) || !json.Valid([]byte(n)) {
		return fmt.Errorf("N %q is not a number", n)
	}
	return nil
}
