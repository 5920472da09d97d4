package limits

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Service limits.
const (
	// DynamoDBItemBytes is the largest DynamoDB item: 400 KB, counted as
	// ItemSize counts (attribute names included).
	DynamoDBItemBytes = 400 << 10
	// DynamoDBTransactionItems is the most actions one TransactWriteItems
	// carries.
	DynamoDBTransactionItems = 100
	// DynamoDBTransactionBytes is the most one TransactWriteItems writes:
	// 4 MB in all, counted as ItemSize counts each item (a Put's item, the
	// key of an Update, Delete or ConditionCheck).
	DynamoDBTransactionBytes = 4 << 20
	// KinesisRecordBytes is the largest Kinesis record Tributary writes:
	// 1 MiB of data plus partition key, the limit of a stream's default
	// configuration (PutRecords refuses the whole call for one bigger
	// record).
	KinesisRecordBytes = 1 << 20
	// KinesisPutRecordsBytes is the most one PutRecords call carries (data
	// plus partition keys of all its records).
	KinesisPutRecordsBytes = 5 << 20
	// KinesisPutRecordsEntries is the most records one PutRecords call
	// carries.
	KinesisPutRecordsEntries = 500
	// LambdaWindowStateBytes is the most tumbling-window state Lambda
	// carries for a shard, counted as WindowStateSize counts: a function
	// that answers with more has its window ended early (a final
	// invocation with isWindowTerminatedEarly; the window goes on with a
	// fresh state).
	LambdaWindowStateBytes = 1 << 20
)

// WindowStateSize is the size of a tumbling-window state as JSON (quotes,
// colon and comma around each entry, the braces).
func WindowStateSize(state map[string]string) int {
	n := 2
	for k, v := range state {
		n += WindowStateEntrySize(k, v)
	}
	return n
}

// WindowStateEntrySize is what one entry adds to WindowStateSize: its key
// and value, their quotes, the colon and the comma.
func WindowStateEntrySize(k, v string) int { return len(k) + len(v) + 6 }

// KinesisRecordSize is the size Kinesis counts for a record against
// KinesisRecordBytes: its data plus its partition key (UTF-8 bytes).
func KinesisRecordSize(data []byte, partitionKey string) int { return len(data) + len(partitionKey) }

// ItemSize is the size of an item in bytes by DynamoDB's rules: the UTF-8
// length of each attribute name plus the size of its value (see
// AttributeSize).
func ItemSize(item map[string]ddbtypes.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + AttributeSize(v)
	}
	return n
}

// AttributeSize is the size of one attribute value by "DynamoDB item sizes
// and formats": strings and binaries by their bytes; a number 1 byte per
// two significant digits plus 1; null and boolean 1 byte; a list or map 3
// bytes plus 1 per element plus the elements (a map's keys included); a set
// the sum of its elements.
func AttributeSize(v ddbtypes.AttributeValue) int {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return len(v.Value)
	case *ddbtypes.AttributeValueMemberN:
		return numberSize(v.Value)
	case *ddbtypes.AttributeValueMemberB:
		return len(v.Value)
	case *ddbtypes.AttributeValueMemberBOOL, *ddbtypes.AttributeValueMemberNULL:
		return 1
	case *ddbtypes.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *ddbtypes.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *ddbtypes.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *ddbtypes.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + AttributeSize(e)
		}
		return n
	case *ddbtypes.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + AttributeSize(e)
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
	return strings.Trim(n, "0")
}

// Largest names an item's attributes from the largest down (name plus value,
// as ItemSize counts them), at most n of them, for a reason that says what
// made an item too big.
func Largest(item map[string]ddbtypes.AttributeValue, n int) []Attribute {
	out := make([]Attribute, 0, len(item))
	for name, v := range item {
		out = append(out, Attribute{Name: name, Bytes: len(name) + AttributeSize(v)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Name < out[j].Name
	})
	return out[:min(n, len(out))]
}

// Attribute is an attribute's name and size in an item.
type Attribute struct {
	Name  string
	Bytes int
}

// TooLargeError is a write over a service limit: it can never succeed as
// it is. Field names what made it big (an attribute, a JSON field).
type TooLargeError struct {
	What  string // "DynamoDB item", "Kinesis record"
	Field string
	Bytes int // the write's size as the service counts it
	Limit int
	// FieldBytes is Field's share of Bytes, 0 when not known.
	FieldBytes int
}

func (e *TooLargeError) Error() string {
	s := fmt.Sprintf("%s would be %d bytes, over the limit of %d", e.What, e.Bytes, e.Limit)
	if e.Field != "" {
		s += "; its largest field is " + e.Field
		if e.FieldBytes > 0 {
			s += fmt.Sprintf(" (%d bytes)", e.FieldBytes)
		}
	}
	return s
}

// CheckItem returns a *TooLargeError naming the item's largest attribute
// when the item is over DynamoDBItemBytes, nil otherwise.
func CheckItem(item map[string]ddbtypes.AttributeValue) error {
	n := ItemSize(item)
	if n <= DynamoDBItemBytes {
		return nil
	}
	e := &TooLargeError{What: "DynamoDB item", Bytes: n, Limit: DynamoDBItemBytes}
	if l := Largest(item, 1); len(l) == 1 {
		e.Field, e.FieldBytes = l[0].Name, l[0].Bytes
	}
	return e
}

// IsItemTooLarge reports DynamoDB's refusal of a write that would make an
// item exceed DynamoDB's size limit (a ValidationException about the item
// size): what no retry can write, for the callers that find out only from
// the answer (an update, whose result size is not known before).
func IsItemTooLarge(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ValidationException" &&
		strings.Contains(strings.ToLower(api.ErrorMessage()), "item size")
}

// DynamoDBTableName is DynamoDB's rule for a table name, and
// DynamoDBTableNameRule says it to a person: every entry point that takes a
// table name checks it before calling AWS.
var DynamoDBTableName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// DynamoDBTableNameRule is DynamoDBTableName in words.
const DynamoDBTableNameRule = "a DynamoDB table name is 3 to 255 letters, digits, '_', '-' or '.'"
