package setaside

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Entry is what one function said of a record it set aside. A record
// several consumers of a stream set aside (each pipeline's aggregate
// refusing its own field) is one item, its data kept once, and its
// functions attribute keeps each one's Entry under the function's name, so
// that none hides another's: each can find, read and put back the record
// by its own reason.
type Entry struct {
	Field      string `dynamodbav:"field,omitempty"`
	Category   string `dynamodbav:"category,omitempty"`
	Reason     string `dynamodbav:"reason,omitempty"`
	Rule       *Rule  `dynamodbav:"rule,omitempty"`
	IDTaken    bool   `dynamodbav:"idTaken,omitempty"`
	SetAsideAt string `dynamodbav:"setAsideAt,omitempty"`
}

// Bounds of the functions attribute: a stream has a few consumers, and an
// item with data of ChunkBytes and every other attribute at its bound
// still fits with MaxFunctions entries at theirs (TestBoundedItemFits). A
// function past MaxFunctions is kept on the item's own attributes only.
const (
	// MaxFunctions is the most functions whose entries one item keeps.
	MaxFunctions = 16
	// maxFunctionNameBytes bounds an entry's key: a Lambda function's
	// name is at most 64 characters.
	maxFunctionNameBytes = 128
	maxEntryFieldBytes   = 256
	// maxEntryReasonBytes bounds an entry's reason; the item's own
	// reason (the last function's) keeps up to maxReasonBytes.
	maxEntryReasonBytes = 640
	maxEntryShortBytes  = 64 // category, the rule's kind
)

// entry is the bounded Entry of a set-aside item (bound already applied),
// under the bounded name of its function.
func (it *Item) entry() (string, Entry) {
	e := Entry{Field: truncate(it.Field, maxEntryFieldBytes), Category: truncate(it.Category, maxEntryShortBytes),
		Reason: truncate(it.Reason, maxEntryReasonBytes), IDTaken: it.IDTaken, SetAsideAt: truncate(it.SetAsideAt, maxTimeBytes)}
	if it.Rule != nil {
		rule := *it.Rule
		rule.Holds = truncate(rule.Holds, maxEntryShortBytes)
		e.Rule = &rule
	}
	return truncate(it.Function, maxFunctionNameBytes), e
}

// SetAsides is the record as each function that set it aside tells it:
// one Item per function, newest first, each with that function's name,
// field, category, reason, rule, idTaken and setAsideAt in place of the
// item's own (which are the last writer's). An item without entries (of
// another kind, or written by a version that kept the last function
// only) is itself, alone.
func (it *Item) SetAsides() []Item {
	if it.Kind != ItemSetAside || len(it.Functions) == 0 {
		return []Item{*it}
	}
	views := make([]Item, 0, len(it.Functions)+1)
	for name, e := range it.Functions {
		v := *it
		v.Function, v.Field, v.Category, v.Reason, v.Rule, v.IDTaken, v.SetAsideAt = name, e.Field, e.Category, e.Reason, e.Rule, e.IDTaken, e.SetAsideAt
		views = append(views, v)
	}
	if _, ok := it.Functions[truncate(it.Function, maxFunctionNameBytes)]; !ok {
		views = append(views, *it) // a function past MaxFunctions
	}
	sort.SliceStable(views, func(i, j int) bool {
		if views[i].SetAsideAt != views[j].SetAsideAt {
			return views[i].SetAsideAt > views[j].SetAsideAt
		}
		return views[i].Function < views[j].Function
	})
	return views
}

// SetAsideBy is the record as the function named (exactly) tells it, and
// whether that function set it aside (see SetAsides).
func (it *Item) SetAsideBy(function string) (Item, bool) {
	for _, v := range it.SetAsides() {
		if v.Function == function {
			return v, true
		}
	}
	return Item{}, false
}

// kept are the attributes a set-aside write leaves as they are when it
// does not set them: the keys, the functions' entries, and the mark of a
// put-back. Every other attribute of Item it sets or removes, so that the
// item's own attributes are the last writer's alone (no rule or field of
// another function's left beside its reason, nothing of a range's copy
// quarantine wrote before).
var kept = map[string]bool{"source": true, "sequenceNumber": true, "functions": true, "putBackAt": true, "putBackSequence": true}

// itemAttributes are the names of Item's attributes, from its tags.
var itemAttributes = func() []string {
	var names []string
	t := reflect.TypeFor[Item]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("dynamodbav"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}()

// writeSetAside writes the head item of a record a function set aside
// (chunks written before): its own attributes replaced by this write's,
// and this function's entry added to its functions attribute with an
// UpdateItem that sets that entry alone, so that consumers setting the
// same record aside at once keep every entry. An item without entries (one
// a version before kept, with its one function on its own attributes)
// gets that function's entry too. The expressions are written here, not
// with the SDK's expression package: its names refuse '[' and ']' even
// through NameNoDotSplit, and a function's name holds them
// ("aggregate[checkouts]", FromEnv's name of a pipeline's function).
func (s *Sink) writeSetAside(ctx context.Context, head *Item) error {
	av, err := s.marshal(head)
	if err != nil {
		return err
	}
	name, e := head.entry()
	entry, err := attributevalue.Marshal(e)
	if err != nil {
		return fmt.Errorf("setaside: encoding the entry of %s/%s: %w", head.Source, head.SequenceNumber, err)
	}
	names := map[string]string{"#fs": "functions", "#fn": name}
	values := map[string]types.AttributeValue{}
	var set, remove []string
	for i, attr := range itemAttributes {
		if kept[attr] {
			continue
		}
		n := "#a" + strconv.Itoa(i)
		if v, ok := av[attr]; ok {
			names[n], values[":a"+strconv.Itoa(i)] = attr, v
			set = append(set, n+" = :a"+strconv.Itoa(i))
		} else {
			names[n] = attr
			remove = append(remove, n)
		}
	}
	// update is the expression setting the item's own attributes, and
	// extra ("" for none).
	update := func(extra string) string {
		sets := set
		if extra != "" {
			sets = append(append([]string(nil), set...), extra)
		}
		u := "SET " + strings.Join(sets, ", ")
		if len(remove) > 0 {
			u += " REMOVE " + strings.Join(remove, ", ")
		}
		return u
	}
	key := map[string]types.AttributeValue{"source": av["source"], "sequenceNumber": av["sequenceNumber"]}
	call := func(upd, cond string, vals map[string]types.AttributeValue, used map[string]string, old bool) (*dynamodb.UpdateItemOutput, error) {
		in := &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: key, UpdateExpression: aws.String(upd),
			ExpressionAttributeNames: used, ExpressionAttributeValues: vals}
		if cond != "" {
			in.ConditionExpression = aws.String(cond)
		}
		if old {
			in.ReturnValues = types.ReturnValueAllOld
		}
		return s.db.UpdateItem(ctx, in)
	}
	with := func(extra map[string]types.AttributeValue) map[string]types.AttributeValue {
		m := make(map[string]types.AttributeValue, len(values)+len(extra))
		for k, v := range values {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	without := func(drop ...string) map[string]string {
		m := make(map[string]string, len(names))
		for k, v := range names {
			m[k] = v
		}
		for _, k := range drop {
			delete(m, k)
		}
		return m
	}
	fail := func(err error) error {
		return fmt.Errorf("UpdateItem %s/%s into %s: %w", head.Source, head.SequenceNumber, s.table, err)
	}
	if name == "" {
		// A function without a name has no entry: the item's own
		// attributes are all there is of it.
		if _, err := call(update(""), "", values, without("#fs", "#fn"), false); err != nil {
			return fail(err)
		}
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	for attempt := 0; attempt < 2; attempt++ {
		// The item has entries: add this function's, unless MaxFunctions
		// others are there.
		_, err := call(update("#fs.#fn = :entry"), "attribute_exists(#fs) AND (size(#fs) < :max OR attribute_exists(#fs.#fn))",
			with(map[string]types.AttributeValue{":entry": entry, ":max": &types.AttributeValueMemberN{Value: strconv.Itoa(MaxFunctions)}}), names, false)
		if err == nil {
			return nil
		}
		if !errors.As(err, &ccf) {
			return fail(err)
		}
		if attempt > 0 {
			break // the entries are there, and full
		}
		// No entries yet: this write starts them.
		out, err := call(update("#fs = :mine"), "attribute_not_exists(#fs)",
			with(map[string]types.AttributeValue{":mine": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{name: entry}}}),
			without("#fn"), true)
		if errors.As(err, &ccf) {
			continue // another function started them meanwhile
		}
		if err != nil {
			return fail(err)
		}
		return s.keepEarlier(ctx, key, name, out.Attributes)
	}
	// MaxFunctions entries: this function's reason is on the item's own
	// attributes only (SetAsides lists it there).
	if _, err := call(update(""), "", values, without("#fs", "#fn"), false); err != nil {
		return fail(err)
	}
	return nil
}

// keepEarlier adds to an item's entries the one of the function an
// earlier version wrote on the item's own attributes (old, the item as it
// was before this write started its entries), when another function set
// it aside then.
func (s *Sink) keepEarlier(ctx context.Context, key map[string]types.AttributeValue, name string, old map[string]types.AttributeValue) error {
	if len(old) == 0 {
		return nil
	}
	var was Item
	if err := attributevalue.UnmarshalMap(old, &was); err != nil || was.Kind != ItemSetAside || was.Function == "" {
		return nil // not a set-aside item: nothing of a function's to keep
	}
	earlier, e := was.entry()
	if earlier == name {
		return nil
	}
	entry, err := attributevalue.Marshal(e)
	if err != nil {
		return fmt.Errorf("setaside: encoding the earlier entry of %s: %w", earlier, err)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: key,
		UpdateExpression:          aws.String("SET #fs.#fn = :entry"),
		ConditionExpression:       aws.String("attribute_exists(#fs) AND attribute_not_exists(#fs.#fn)"),
		ExpressionAttributeNames:  map[string]string{"#fs": "functions", "#fn": earlier},
		ExpressionAttributeValues: map[string]types.AttributeValue{":entry": entry}})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("UpdateItem %s into %s (the entry of %s): %w", key["sequenceNumber"], s.table, earlier, err)
	}
	return nil
}
