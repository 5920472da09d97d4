package memdb

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/tributary-dev/tributary/pkg/limits"
)

// Index is a global secondary index: its partition and sort key attributes.
// Its projection is KEYS_ONLY (the table's keys and its own).
type Index struct{ PK, SK string }

// Schema is a table's key: a string partition key and a string or number
// sort key ("": none), and its indexes by name.
type Schema struct {
	PK, SK  string
	Indexes map[string]Index
}

// DB is a set of tables. Safe for concurrent use.
type DB struct {
	mu     sync.Mutex
	tables map[string]*table
	// Requests counts requests per operation.
	Requests map[string]int
}

type table struct {
	Schema
	parts map[string]map[string]map[string]types.AttributeValue // pk → sk → item
}

// New returns a DB with empty tables of the given schemas, by name.
func New(tables map[string]Schema) *DB {
	d := &DB{tables: map[string]*table{}, Requests: map[string]int{}}
	for name, s := range tables {
		d.tables[name] = &table{Schema: s, parts: map[string]map[string]map[string]types.AttributeValue{}}
	}
	return d
}

func (d *DB) table(name *string) (*table, error) {
	t, ok := d.tables[aws.ToString(name)]
	if !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Requested resource not found: Table: " + aws.ToString(name) + " not found")}
	}
	return t, nil
}

func (t *table) keyOf(key map[string]types.AttributeValue) (string, string, error) {
	pk, ok := key[t.PK].(*types.AttributeValueMemberS)
	if !ok {
		return "", "", validation("The provided key element does not match the schema")
	}
	if t.SK == "" {
		return pk.Value, "", nil
	}
	switch sk := key[t.SK].(type) {
	case *types.AttributeValueMemberS:
		return pk.Value, sk.Value, nil
	case *types.AttributeValueMemberN:
		return pk.Value, "n" + number(sk.Value).String(), nil
	}
	return "", "", validation("The provided key element does not match the schema")
}

func (t *table) newItem(key map[string]types.AttributeValue) map[string]types.AttributeValue {
	if t.SK == "" {
		return map[string]types.AttributeValue{t.PK: key[t.PK]}
	}
	return map[string]types.AttributeValue{t.PK: key[t.PK], t.SK: key[t.SK]}
}

func (t *table) get(pk, sk string) map[string]types.AttributeValue {
	return t.parts[pk][sk]
}

func (t *table) put(pk, sk string, item map[string]types.AttributeValue) {
	p, ok := t.parts[pk]
	if !ok {
		p = map[string]map[string]types.AttributeValue{}
		t.parts[pk] = p
	}
	p[sk] = item
}

func clone(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(item))
	for k, v := range item {
		out[k] = v
	}
	return out
}

func validation(msg string) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: msg, Fault: smithy.FaultClient}
}

func checkSize(item map[string]types.AttributeValue) error {
	if limits.ItemSize(item) > limits.DynamoDBItemBytes {
		return validation("Item size has exceeded the maximum allowed size")
	}
	return nil
}

// checkCondition tests expr (nil: none) against item.
func checkCondition(expr *string, e env, item map[string]types.AttributeValue) (bool, error) {
	if expr == nil || *expr == "" {
		return true, nil
	}
	c, err := cachedCondition(*expr)
	if err != nil {
		return false, validation(err.Error())
	}
	ok, err := e.test(c, item)
	if err != nil {
		return false, validation(err.Error())
	}
	return ok, nil
}

func ccf(rv types.ReturnValuesOnConditionCheckFailure, old map[string]types.AttributeValue) error {
	e := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	if rv == types.ReturnValuesOnConditionCheckFailureAllOld {
		e.Item = clone(old)
	}
	return e
}

// UpdateItem updates (or creates) one item.
func (d *DB) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Requests["UpdateItem"]++
	t, err := d.table(in.TableName)
	if err != nil {
		return nil, err
	}
	pk, sk, err := t.keyOf(in.Key)
	if err != nil {
		return nil, err
	}
	old := t.get(pk, sk)
	e := env{names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues}
	ok, err := checkCondition(in.ConditionExpression, e, old)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ccf(in.ReturnValuesOnConditionCheckFailure, old)
	}
	next := clone(old)
	if next == nil {
		next = t.newItem(in.Key)
	}
	var touched []string
	if in.UpdateExpression != nil {
		acts, err := cachedUpdate(*in.UpdateExpression)
		if err != nil {
			return nil, validation(err.Error())
		}
		if touched, err = e.apply(acts, next); err != nil {
			return nil, err
		}
	}
	if err := checkSize(next); err != nil {
		return nil, err
	}
	t.put(pk, sk, next)
	out := &dynamodb.UpdateItemOutput{}
	switch in.ReturnValues {
	case types.ReturnValueAllNew:
		out.Attributes = clone(next)
	case types.ReturnValueAllOld:
		out.Attributes = clone(old)
	case types.ReturnValueUpdatedNew, types.ReturnValueUpdatedOld:
		src := next
		if in.ReturnValues == types.ReturnValueUpdatedOld {
			src = old
		}
		out.Attributes = map[string]types.AttributeValue{}
		for _, n := range touched {
			if v, ok := src[n]; ok {
				out.Attributes[n] = v
			}
		}
	}
	return out, nil
}

// GetItem reads one item.
func (d *DB) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Requests["GetItem"]++
	t, err := d.table(in.TableName)
	if err != nil {
		return nil, err
	}
	pk, sk, err := t.keyOf(in.Key)
	if err != nil {
		return nil, err
	}
	return &dynamodb.GetItemOutput{Item: clone(t.get(pk, sk))}, nil
}

// whole is a request on one whole item: its table, its key and the item
// as it is, once its condition holds (else the refusal DynamoDB gives).
// d.mu held.
func (d *DB) whole(name *string, key map[string]types.AttributeValue, cond *string, e env, rv types.ReturnValuesOnConditionCheckFailure) (t *table, pk, sk string, old map[string]types.AttributeValue, err error) {
	if t, err = d.table(name); err != nil {
		return nil, "", "", nil, err
	}
	if pk, sk, err = t.keyOf(key); err != nil {
		return nil, "", "", nil, err
	}
	old = t.get(pk, sk)
	ok, err := checkCondition(cond, e, old)
	if err != nil {
		return nil, "", "", nil, err
	}
	if !ok {
		return nil, "", "", nil, ccf(rv, old)
	}
	return t, pk, sk, old, nil
}

// PutItem writes one whole item.
func (d *DB) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Requests["PutItem"]++
	t, pk, sk, old, err := d.whole(in.TableName, in.Item, in.ConditionExpression, env{in.ExpressionAttributeNames, in.ExpressionAttributeValues}, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	if err := checkSize(in.Item); err != nil {
		return nil, err
	}
	t.put(pk, sk, clone(in.Item))
	out := &dynamodb.PutItemOutput{}
	if in.ReturnValues == types.ReturnValueAllOld {
		out.Attributes = clone(old)
	}
	return out, nil
}

// DeleteItem deletes one item, if its condition holds.
func (d *DB) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Requests["DeleteItem"]++
	t, pk, sk, old, err := d.whole(in.TableName, in.Key, in.ConditionExpression, env{in.ExpressionAttributeNames, in.ExpressionAttributeValues}, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	if old != nil {
		delete(t.parts[pk], sk)
	}
	out := &dynamodb.DeleteItemOutput{}
	if in.ReturnValues == types.ReturnValueAllOld {
		out.Attributes = clone(old)
	}
	return out, nil
}

// BatchGetItem reads items by key, from several tables; every key is
// processed.
func (d *DB) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Requests["BatchGetItem"]++
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}, UnprocessedKeys: map[string]types.KeysAndAttributes{}}
	n := 0
	for name, ka := range in.RequestItems {
		t, err := d.table(aws.String(name))
		if err != nil {
			return nil, err
		}
		items := []map[string]types.AttributeValue{}
		for _, k := range ka.Keys {
			n++
			pk, sk, err := t.keyOf(k)
			if err != nil {
				return nil, err
			}
			if it := t.get(pk, sk); it != nil {
				items = append(items, clone(it))
			}
		}
		out.Responses[name] = items
	}
	if n > 100 {
		return nil, validation("Too many items requested for the BatchGetItem call")
	}
	return out, nil
}

// TransactWriteItems makes all its writes or none.
func (d *DB) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Requests["TransactWriteItems"]++
	type write struct {
		t      *table
		pk, sk string
		item   map[string]types.AttributeValue // nil: delete
	}
	var writes []write
	reasons := make([]types.CancellationReason, len(in.TransactItems))
	failed := false
	for i, it := range in.TransactItems {
		reasons[i].Code = aws.String("None")
		var (
			tableName *string
			key       map[string]types.AttributeValue
			condition *string
			e         env
			rv        types.ReturnValuesOnConditionCheckFailure
		)
		switch {
		case it.Put != nil:
			tableName, key, condition, e, rv = it.Put.TableName, it.Put.Item, it.Put.ConditionExpression, env{it.Put.ExpressionAttributeNames, it.Put.ExpressionAttributeValues}, it.Put.ReturnValuesOnConditionCheckFailure
		case it.Update != nil:
			tableName, key, condition, e, rv = it.Update.TableName, it.Update.Key, it.Update.ConditionExpression, env{it.Update.ExpressionAttributeNames, it.Update.ExpressionAttributeValues}, it.Update.ReturnValuesOnConditionCheckFailure
		case it.Delete != nil:
			tableName, key, condition, e, rv = it.Delete.TableName, it.Delete.Key, it.Delete.ConditionExpression, env{it.Delete.ExpressionAttributeNames, it.Delete.ExpressionAttributeValues}, it.Delete.ReturnValuesOnConditionCheckFailure
		case it.ConditionCheck != nil:
			tableName, key, condition, e, rv = it.ConditionCheck.TableName, it.ConditionCheck.Key, it.ConditionCheck.ConditionExpression, env{it.ConditionCheck.ExpressionAttributeNames, it.ConditionCheck.ExpressionAttributeValues}, it.ConditionCheck.ReturnValuesOnConditionCheckFailure
		default:
			return nil, validation("a TransactWriteItem has no action")
		}
		t, err := d.table(tableName)
		if err != nil {
			return nil, err
		}
		pk, sk, err := t.keyOf(key)
		if err != nil {
			return nil, err
		}
		old := t.get(pk, sk)
		ok, err := checkCondition(condition, e, old)
		if err != nil {
			return nil, err
		}
		if !ok {
			failed = true
			reasons[i].Code = aws.String("ConditionalCheckFailed")
			reasons[i].Message = aws.String("The conditional request failed")
			if rv == types.ReturnValuesOnConditionCheckFailureAllOld {
				reasons[i].Item = clone(old)
			}
			continue
		}
		switch {
		case it.Put != nil:
			if err := checkSize(it.Put.Item); err != nil {
				return nil, err
			}
			writes = append(writes, write{t, pk, sk, clone(it.Put.Item)})
		case it.Update != nil:
			next := clone(old)
			if next == nil {
				next = t.newItem(key)
			}
			acts, err := cachedUpdate(aws.ToString(it.Update.UpdateExpression))
			if err != nil {
				return nil, validation(err.Error())
			}
			if _, err := e.apply(acts, next); err != nil {
				return nil, err
			}
			writes = append(writes, write{t, pk, sk, next})
		case it.Delete != nil:
			writes = append(writes, write{t, pk, sk, nil})
		}
	}
	if failed {
		var msg []string
		for _, r := range reasons {
			msg = append(msg, aws.ToString(r.Code))
		}
		return nil, &types.TransactionCanceledException{
			Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(msg, ", ") + "]"),
			CancellationReasons: reasons,
		}
	}
	for _, w := range writes {
		if w.item == nil {
			delete(w.t.parts[w.pk], w.sk)
			continue
		}
		w.t.put(w.pk, w.sk, w.item)
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// Query reads one partition of the table or of an index, in sort key order.
func (d *DB) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Requests["Query"]++
	c, err := cachedCondition(aws.ToString(in.KeyConditionExpression))
	if err != nil {
		return nil, validation(err.Error())
	}
	e := env{in.ExpressionAttributeNames, in.ExpressionAttributeValues}
	t, err := d.table(in.TableName)
	if err != nil {
		return nil, err
	}
	pkAttr, skAttr := t.PK, t.SK
	if in.IndexName != nil {
		ix, ok := t.Indexes[*in.IndexName]
		if !ok {
			return nil, validation("The table does not have the specified index: " + *in.IndexName)
		}
		pkAttr, skAttr = ix.PK, ix.SK
	}
	// The key condition is "pk = :v" or "pk = :v AND <sort key condition>".
	pkCond := c
	if c.op == "and" {
		pkCond = c.l
	}
	if pkCond.op != "cmp" || pkCond.cmp != "=" {
		return nil, validation("Query key condition not supported")
	}
	pkVal, err := e.eval(pkCond.args[1], nil)
	if err != nil {
		return nil, validation(err.Error())
	}
	want, _ := pkVal.(*types.AttributeValueMemberS)
	if want == nil {
		return nil, validation("partition key value is not a string")
	}
	var items []map[string]types.AttributeValue
	consider := func(it map[string]types.AttributeValue) error {
		ok, err := e.test(c, it)
		if err != nil {
			return validation(err.Error())
		}
		if ok {
			if in.IndexName != nil {
				it = map[string]types.AttributeValue{t.PK: it[t.PK], t.SK: it[t.SK], pkAttr: it[pkAttr], skAttr: it[skAttr]}
			} else {
				it = clone(it)
			}
			items = append(items, it)
		}
		return nil
	}
	if in.IndexName == nil {
		for _, it := range t.parts[want.Value] {
			if err := consider(it); err != nil {
				return nil, err
			}
		}
	} else {
		// A scan of the table: a sparse index holds only items with both
		// its keys. Fine at benchmark sizes.
		for _, p := range t.parts {
			for _, it := range p {
				pv, ok1 := it[pkAttr].(*types.AttributeValueMemberS)
				_, ok2 := it[skAttr]
				if !ok1 || !ok2 || pv.Value != want.Value {
					continue
				}
				if err := consider(it); err != nil {
					return nil, err
				}
			}
		}
	}
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i][skAttr], items[j][skAttr]
		if n, ok := compare(a, b); ok && n != 0 {
			return n < 0
		}
		if n, _ := compare(items[i][t.PK], items[j][t.PK]); n != 0 {
			return n < 0
		}
		n, _ := compare(items[i][t.SK], items[j][t.SK])
		return n < 0
	})
	if in.ScanIndexForward != nil && !*in.ScanIndexForward {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	}
	if in.ExclusiveStartKey != nil {
		// No caller reads a second page: say so rather than answer the first again.
		return nil, validation("memdb: Query with an ExclusiveStartKey is not supported")
	}
	out := &dynamodb.QueryOutput{}
	if in.Limit != nil && int(*in.Limit) < len(items) {
		// A page, and the key of its last item to go on from (the event
		// store's latest version: the last item of a backward query).
		items = items[:*in.Limit]
		last := items[len(items)-1]
		out.LastEvaluatedKey = map[string]types.AttributeValue{t.PK: last[t.PK]}
		if t.SK != "" {
			out.LastEvaluatedKey[t.SK] = last[t.SK]
		}
		if in.IndexName != nil {
			out.LastEvaluatedKey[pkAttr], out.LastEvaluatedKey[skAttr] = last[pkAttr], last[skAttr]
		}
	}
	if p := aws.ToString(in.ProjectionExpression); p != "" {
		// Top-level attribute names only ("a, #b"): what callers project.
		for i, it := range items {
			kept := map[string]types.AttributeValue{}
			for _, name := range strings.Split(p, ",") {
				name = strings.TrimSpace(name)
				if n, ok := in.ExpressionAttributeNames[name]; ok {
					name = n
				}
				if v, ok := it[name]; ok {
					kept[name] = v
				}
			}
			items[i] = kept
		}
	}
	out.Items, out.Count = items, int32(len(items))
	return out, nil
}

// Items returns a copy of every item of a table, for tests.
func (d *DB) Items(tableName string) []map[string]types.AttributeValue {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []map[string]types.AttributeValue
	t, err := d.table(&tableName)
	if err != nil {
		return nil
	}
	for _, p := range t.parts {
		for _, it := range p {
			out = append(out, clone(it))
		}
	}
	return out
}

// Item returns a copy of the item of tableName with key (nil if there is
// none), without counting a request: for a caller that sizes items to bill
// the requests it makes (bench/load).
func (d *DB) Item(tableName string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.table(&tableName)
	if err != nil {
		return nil
	}
	pk, sk, err := t.keyOf(key)
	if err != nil {
		return nil
	}
	return clone(t.get(pk, sk))
}

// Schema returns the schema of tableName and whether there is such a table.
func (d *DB) Schema(tableName string) (Schema, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.tables[tableName]
	if !ok {
		return Schema{}, false
	}
	return t.Schema, true
}

// BatchWriteItem puts and deletes items, unconditionally; every request is
// processed.
func (d *DB) BatchWriteItem(_ context.Context, in *dynamodb.BatchWriteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Requests["BatchWriteItem"]++
	for name, reqs := range in.RequestItems {
		t, err := d.table(aws.String(name))
		if err != nil {
			return nil, err
		}
		for _, r := range reqs {
			switch {
			case r.PutRequest != nil:
				pk, sk, err := t.keyOf(r.PutRequest.Item)
				if err != nil {
					return nil, err
				}
				if err := checkSize(r.PutRequest.Item); err != nil {
					return nil, err
				}
				t.put(pk, sk, clone(r.PutRequest.Item))
			case r.DeleteRequest != nil:
				pk, sk, err := t.keyOf(r.DeleteRequest.Key)
				if err != nil {
					return nil, err
				}
				delete(t.parts[pk], sk)
			}
		}
	}
	return &dynamodb.BatchWriteItemOutput{UnprocessedItems: map[string][]types.WriteRequest{}}, nil
}

// ViewsTable is the schema of a views table as the stack declares it (and
// state.CreateTable creates it): pk, sk and the sparse open-windows index.
var ViewsTable = Schema{PK: "pk", SK: "sk", Indexes: map[string]Index{"open": {PK: "openIn", SK: "openUntil"}}}

// QuarantineTable is the schema of the quarantine table (setaside.CreateTable).
var QuarantineTable = Schema{PK: "source", SK: "sequenceNumber"}
