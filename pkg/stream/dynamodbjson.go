package stream

import (
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
)

// ImageJSON converts a DynamoDB stream image to plain JSON values that
// encoding/json marshals as the item reads: S → string, N → number (exact
// digits), BOOL, NULL → null, M → object, L → array, SS/NS/BS → arrays, B →
// base64 string. A nil image is nil (JSON null).
func ImageJSON(img map[string]events.DynamoDBAttributeValue) (map[string]any, error) {
	if img == nil {
		return nil, nil
	}
	out := make(map[string]any, len(img))
	for name, av := range img {
		v, err := AttributeJSON(av)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// AttributeJSON converts one DynamoDB attribute value as ImageJSON does.
func AttributeJSON(av events.DynamoDBAttributeValue) (any, error) {
	switch av.DataType() {
	case events.DataTypeString:
		return av.String(), nil
	case events.DataTypeNumber:
		return json.Number(av.Number()), nil
	case events.DataTypeBoolean:
		return av.Boolean(), nil
	case events.DataTypeNull:
		return nil, nil
	case events.DataTypeBinary:
		return av.Binary(), nil // []byte marshals as base64
	case events.DataTypeStringSet:
		return av.StringSet(), nil
	case events.DataTypeNumberSet:
		ns := av.NumberSet()
		out := make([]json.Number, len(ns))
		for i, n := range ns {
			out[i] = json.Number(n)
		}
		return out, nil
	case events.DataTypeBinarySet:
		return av.BinarySet(), nil
	case events.DataTypeList:
		l := av.List()
		out := make([]any, len(l))
		for i, v := range l {
			x, err := AttributeJSON(v)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = x
		}
		return out, nil
	case events.DataTypeMap:
		m := av.Map()
		out := make(map[string]any, len(m))
		for k, v := range m {
			x, err := AttributeJSON(v)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", k, err)
			}
			out[k] = x
		}
		return out, nil
	}
	return nil, fmt.Errorf("has an attribute type this converter does not know (%d)", av.DataType())
}
