package putback

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/setaside"
)

// Scanner is what List needs of DynamoDB.
type Scanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ Scanner = (*dynamodb.Client)(nil)

// ErrNoTable is returned for a table that does not exist.
var ErrNoTable = errors.New("no such table (the stack output QuarantineTableName names the quarantine table)")

// MaxList bounds how many items one List returns.
const MaxList = 1000

// Filter selects the items List returns; an empty field selects all.
type Filter struct {
	// Function is the function that set the record aside: its name as the
	// item names it, or words of it — every run of letters and digits in
	// Function appears in the name, case aside, so "aggregate pageviews"
	// (or aggregate-pageviews) matches
	// Tributary-PipelinesPageviewsAggregateFunction….
	Function string
	// Category is the record's category (setaside.KindInvalid, ...).
	Category string
	// Source is the start of the item's source: a stream's ARN, or a
	// shard's "<stream ARN>/<shard>".
	Source string
	// Since keeps the items set aside (or failed) at or after it.
	Since time.Time
}

// Listing is what List found.
type Listing struct {
	// Items are the newest matching items, newest first, without data:
	// a record several functions set aside is there once for each
	// function the filter selects (setaside.Item.SetAsides), with that
	// one's function, field, category, reason and time.
	Items []setaside.Item
	// Matched is how many items matched, Scanned how many were read.
	Matched, Scanned int
	// Older is how many items Filter.Since alone left out: they match the
	// rest of the filter but were written before it. Counted from the
	// items the scan reads anyway, so that a listing can say there are
	// older ones rather than look empty.
	Older int
	// Functions counts, by function, the items that matched all but
	// Filter.Function, when it was given: what a name that matched
	// nothing could have been.
	Functions map[string]int
}

// listed are the kinds List returns: not the chunks, which are parts of
// another item's data.
var listed = []string{setaside.ItemSetAside, setaside.ItemRecord, setaside.ItemMissing}

// projection is every attribute List reads: each of setaside.Item's but
// data, read from its tags so that an attribute added there is listed too.
var projection = func() []string {
	var names []string
	t := reflect.TypeFor[setaside.Item]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("dynamodbav"), ",")
		if name != "" && name != "-" && name != "data" {
			names = append(names, name)
		}
	}
	return names
}()

// List scans the quarantine table for the items f selects and returns the
// newest limit of them (1 to MaxList). It reads the whole table (a scan, read
// units by its size), one page at a time, calling progress, when not nil,
// after each page.
func List(ctx context.Context, db Scanner, table string, f Filter, limit int, progress func(scanned, matched int)) (Listing, error) {
	if limit < 1 || limit > MaxList {
		return Listing{}, fmt.Errorf("putback: list at most 1 to %d items, not %d", MaxList, limit)
	}
	kinds := make([]expression.OperandBuilder, len(listed))
	for i, k := range listed {
		kinds[i] = expression.Value(k)
	}
	cond := expression.Name("kind").In(kinds[0], kinds[1:]...)
	// Category is filtered below, not in the scan: a record several
	// functions set aside has a category for each.
	if f.Source != "" {
		cond = cond.And(expression.Name("source").BeginsWith(f.Source))
	}
	names := make([]expression.NameBuilder, len(projection))
	for i, n := range projection {
		names[i] = expression.Name(n)
	}
	expr, err := expression.NewBuilder().WithFilter(cond).
		WithProjection(expression.NamesList(names[0], names[1:]...)).Build()
	if err != nil {
		return Listing{}, fmt.Errorf("putback: building the scan of %s: %w", table, err)
	}
	var l Listing
	words := functionWords(f.Function)
	if f.Function != "" {
		l.Functions = map[string]int{}
	}
	var start map[string]types.AttributeValue
	for {
		out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), FilterExpression: expr.Filter(),
			ProjectionExpression: expr.Projection(), ExpressionAttributeNames: expr.Names(),
			ExpressionAttributeValues: expr.Values(), ExclusiveStartKey: start})
		var missing *types.ResourceNotFoundException
		if errors.As(err, &missing) {
			return l, fmt.Errorf("%w: %s", ErrNoTable, table)
		}
		if err != nil {
			return l, fmt.Errorf("scanning %s: %w", table, err)
		}
		var items []setaside.Item
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &items); err != nil {
			return l, fmt.Errorf("putback: decoding the items of %s: %w", table, err)
		}
		l.Scanned += int(out.ScannedCount)
		for i := range items {
			// A record several functions set aside is one item: each
			// function's is listed, with its own field and reason.
			for _, it := range items[i].SetAsides() {
				if f.Category != "" && it.Category != f.Category {
					continue // the scan's filter read the item's own category, the last function's
				}
				older := !f.Since.IsZero() && When(&it).Before(f.Since)
				if f.Function != "" {
					if !older {
						l.Functions[it.Function]++
					}
					if it.Function != f.Function && !hasWords(it.Function, words) {
						continue
					}
				}
				if older {
					l.Older++
					continue
				}
				l.Matched++
				l.Items = append(l.Items, it)
			}
		}
		// Keep the newest limit: the table may hold many more.
		sort.SliceStable(l.Items, func(i, j int) bool { return When(&l.Items[i]).After(When(&l.Items[j])) })
		if len(l.Items) > limit {
			l.Items = l.Items[:limit]
		}
		if progress != nil {
			progress(l.Scanned, l.Matched)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return l, nil
		}
		start = out.LastEvaluatedKey
	}
}

// SelectsFunction reports whether f's Function selects the function
// named (an empty Function selects every one).
func (f Filter) SelectsFunction(name string) bool {
	return f.Function == "" || name == f.Function || hasWords(name, functionWords(f.Function))
}

// functionWords are the runs of letters and digits of a function filter,
// lower case.
func functionWords(f string) []string {
	return strings.FieldsFunc(strings.ToLower(f), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// hasWords reports whether every word appears in name, case aside.
func hasWords(name string, words []string) bool {
	if len(words) == 0 {
		return false
	}
	name = strings.ToLower(name)
	for _, w := range words {
		if !strings.Contains(name, w) {
			return false
		}
	}
	return true
}

// When is the time an item was written: when its function set it aside,
// or when Lambda gave up on its range (zero when it says neither).
func When(it *setaside.Item) time.Time {
	for _, s := range []string{it.SetAsideAt, it.FailedAt} {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t
		}
	}
	return time.Time{}
}
