package cdc

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// ImageJSON converts a DynamoDB stream image to plain JSON values (see
// stream.ImageJSON): S → string, N → number (exact digits), BOOL, NULL →
// null, M → object, L → array, SS/NS/BS → arrays, B → base64 string. A nil
// image is nil (JSON null). A number that is not a JSON number (DynamoDB
// never sends one, a hand-made event can: "" would silently become 0) is
// a *NumberError naming the attribute. The item's personal data attribute
// (setaside.PersonalAttribute) is left out: the changelog goes to the
// events stream, its archive and enrich's table, where erasure does not
// reach, so personal data stays in the item alone.
func ImageJSON(img map[string]events.DynamoDBAttributeValue) (map[string]any, error) {
	if _, ok := img[setaside.PersonalAttribute]; ok {
		// Not read at all: a value there refused would be quoted in the
		// reason, and the reason is kept where erasure does not reach.
		img = maps.Clone(img)
		delete(img, setaside.PersonalAttribute)
	}
	for name, av := range img {
		if err := checkNumbers(strictjson.KeyPath("", name), av); err != nil {
			return nil, err
		}
	}
	return stream.ImageJSON(img)
}

// NumberError is an image's N or NS value that is not a JSON number. Path
// names it from the attribute, as the strict reader writes a path: .<key>
// into a map, [<i>] into a list or a number set, a name that is no
// identifier quoted in brackets (plan, prices[2], address.zip,
// address["zip code"]).
type NumberError struct {
	Path, Number string
}

// maxNumberEcho bounds how much of the number an error repeats.
const maxNumberEcho = 64

func (e *NumberError) Error() string {
	return fmt.Sprintf("attribute %s: N %s is not a number", e.Path, strictjson.QuoteCut(e.Number, maxNumberEcho))
}

// checkNumbers reports the first N or NS value in av, at path, that is not
// a JSON number.
func checkNumbers(path string, av events.DynamoDBAttributeValue) error {
	switch av.DataType() {
	case events.DataTypeNumber:
		if !isNumber(av.Number()) {
			return &NumberError{Path: path, Number: av.Number()}
		}
	case events.DataTypeNumberSet:
		for i, n := range av.NumberSet() {
			if !isNumber(n) {
				return &NumberError{Path: path + "[" + strconv.Itoa(i) + "]", Number: n}
			}
		}
	case events.DataTypeList:
		for i, v := range av.List() {
			if err := checkNumbers(path+"["+strconv.Itoa(i)+"]", v); err != nil {
				return err
			}
		}
	case events.DataTypeMap:
		for k, v := range av.Map() {
			if err := checkNumbers(strictjson.KeyPath(path, k), v); err != nil {
				return err
			}
		}
	}
	return nil
}

func isNumber(n string) bool {
	return n != "" && (n[0] == '-' || (n[0] >= '0' && n[0] <= '9')) && json.Valid([]byte(n))
}
