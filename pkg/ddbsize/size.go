package ddbsize

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// MaxItem is DynamoDB's item size limit: 400 KB, attribute names included.
const MaxItem = 400 * 1024

// Item is the size of an item in bytes by DynamoDB's rules: the UTF-8 length
// of each attribute name plus the size of its value.
func Item(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + Value(v)
	}
	return n
}

// Value follows "DynamoDB item sizes and formats": strings and binaries by
// their bytes; numbers 1 byte per two significant digits plus 1; null and
// boolean 1 byte; a list or map 3 bytes plus 1 per element plus the elements
// (map keys included); sets the sum of their elements.
func Value(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + Value(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + Value(e)
		}
		return n
	}
	return 0
}

func numberSize(n string) int {
	d := len(significantDigits(n))
	return (d+1)/2 + 1
}

// significantDigits strips sign, decimal point, exponent and leading and
// trailing zeros from a DynamoDB number.
func significantDigits(n string) string {
	n = strings.TrimLeft(n, "+-")
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		n = n[:i]
	}
	n = strings.Replace(n, ".", "", 1)
	n = strings.Trim(n, "0")
	return n
}

// WriteUnits is what a write of an item of size bytes costs on demand: one
// write unit per started KB (an update is billed for the larger of the item
// before and after it).
func WriteUnits(size int) int { return max(1, (size+1023)/1024) }

// ReadUnits is what a strongly consistent read of size bytes costs: one read
// unit per started 4 KB (half of that for an eventually consistent read).
func ReadUnits(size int) int { return max(1, (size+4095)/4096) }

// TooLargeError says an item would exceed DynamoDB's item limit.
type TooLargeError struct {
	What string // the item, e.g. "keyed state of key user-1 (session:30s)"
	Size int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s would be %d bytes; DynamoDB items hold at most %d", e.What, e.Size, MaxItem)
}

// Check returns a *TooLargeError when item exceeds MaxItem.
func Check(what string, item map[string]types.AttributeValue) error {
	if n := Item(item); n > MaxItem {
		return &TooLargeError{What: what, Size: n}
	}
	return nil
}
