package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/bench/internal/deployed"
	"github.com/tributary-dev/tributary/bench/internal/sdkcost"
	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/state"
)

// usage is what the store billed: requests by operation, write request
// units on the tables and on their indexes, read request units (in halves:
// an eventually consistent read of up to 4 KB is one half).
type usage struct {
	Requests   map[string]int
	WriteUnits int // table writes
	// WriteUnitsBy splits WriteUnits by what the items are (itemClass):
	// which part of the state the write units pay for.
	WriteUnitsBy map[string]int
	// WritesBy counts the item writes of each itemClass (a refused
	// conditional write too): with WriteUnitsBy, how large the written
	// items are.
	WritesBy map[string]int
	// WriteBytesBy is the bytes those writes were billed on (the larger
	// of the item before and after, before rounding up to whole KB): what
	// the same items would cost packed with others, with no write paying
	// for the rest of its last KB.
	WriteBytesBy  map[string]int
	IndexUnitsBy  map[string]int // IndexUnits by itemClass
	IndexUnits    int            // global secondary index writes
	ReadHalfUnits int
	// Busy is the time the store spent answering (memdb and the billing),
	// on the caller's goroutine: work DynamoDB does on its own servers, so
	// a benchmark takes it off the handler's CPU time.
	Busy time.Duration
}

func newUsage() usage {
	return usage{Requests: map[string]int{}, WriteUnitsBy: map[string]int{}, WritesBy: map[string]int{}, WriteBytesBy: map[string]int{}, IndexUnitsBy: map[string]int{}}
}

// ReadUnits is ReadHalfUnits in read request units.
func (u usage) ReadUnits() float64 { return float64(u.ReadHalfUnits) / 2 }

// WRU is every write request unit: tables and indexes.
func (u usage) WRU() int { return u.WriteUnits + u.IndexUnits }

// TotalRequests is every request.
func (u usage) TotalRequests() int {
	n := 0
	for _, v := range u.Requests {
		n += v
	}
	return n
}

// subtract takes o's counts off u.
func (u *usage) subtract(o usage) {
	for k, v := range o.Requests {
		u.Requests[k] -= v
	}
	u.WriteUnits -= o.WriteUnits
	for k, v := range o.WriteUnitsBy {
		u.WriteUnitsBy[k] -= v
	}
	for k, v := range o.WritesBy {
		u.WritesBy[k] -= v
	}
	for k, v := range o.WriteBytesBy {
		u.WriteBytesBy[k] -= v
	}
	for k, v := range o.IndexUnitsBy {
		u.IndexUnitsBy[k] -= v
	}
	u.IndexUnits -= o.IndexUnits
	u.ReadHalfUnits -= o.ReadHalfUnits
	u.Busy -= o.Busy
}

func (u *usage) add(o usage) {
	for k, v := range o.Requests {
		u.Requests[k] += v
	}
	u.WriteUnits += o.WriteUnits
	for k, v := range o.WriteUnitsBy {
		u.WriteUnitsBy[k] += v
	}
	for k, v := range o.WritesBy {
		u.WritesBy[k] += v
	}
	for k, v := range o.WriteBytesBy {
		u.WriteBytesBy[k] += v
	}
	for k, v := range o.IndexUnitsBy {
		u.IndexUnitsBy[k] += v
	}
	u.IndexUnits += o.IndexUnits
	u.ReadHalfUnits += o.ReadHalfUnits
	u.Busy += o.Busy
}

// store is the in-process DynamoDB (memdb) with DynamoDB's on-demand
// billing applied to every request, by item size:
//
//   - a write costs 1 unit per KB of the larger of the item before and
//     after it (at least 1); a failed conditional write, the item as it
//     is; inside TransactWriteItems twice; a condition check in a
//     transaction as a write of the item it checks;
//   - a write that puts an item into a (keys-only) index, or takes one out,
//     costs one index unit, and one that changes its index key two;
//   - a read costs 1 unit per 4 KB read when strongly consistent and half
//     as much when not: GetItem and BatchGetItem per item (a missing item
//     still costs the minimum), Query on the sum of the items it returned.
//
// With latency set, every request answers that long after it was made
// (outside the store's lock, so concurrent requests wait together).
type store struct {
	db      *memdb.DB
	latency time.Duration

	mu sync.Mutex
	u  usage

	// sdk samples the requests the handler makes, for sdkcost.Measure.
	sdk sdkcost.Sampler
}

var _ deployed.Store = (*store)(nil)

func newStore(db *memdb.DB) *store { return &store{db: db, u: newUsage()} }

// take returns what was billed since the last take.
func (s *store) take() usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.u
	s.u = newUsage()
	return u
}

func (s *store) wait() {
	if s.latency > 0 {
		time.Sleep(s.latency)
	}
}

// units is ceil(size/unit), at least 1.
func units(size, unit int) int {
	if size <= 0 {
		return 1
	}
	return (size + unit - 1) / unit
}

func itemSize(item map[string]types.AttributeValue) int {
	if item == nil {
		return 0
	}
	return limits.ItemSize(item)
}

// keyOf is item's primary key in table.
func (s *store) keyOf(table string, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	sc, ok := s.db.Schema(table)
	if !ok {
		return nil
	}
	return map[string]types.AttributeValue{sc.PK: item[sc.PK], sc.SK: item[sc.SK]}
}

// indexKey is item's key in ix and whether it is in ix (sparse: both
// attributes present).
func indexKey(ix memdb.Index, item map[string]types.AttributeValue) (string, bool) {
	pk, ok1 := item[ix.PK].(*types.AttributeValueMemberS)
	sk, ok2 := item[ix.SK].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 {
		return "", false
	}
	return pk.Value + "\x00" + sk.Value, true
}

// billWrite bills one item write that turned old into next (failed: the
// write was refused, next is ignored); mult is 2 in a transaction. The
// caller holds s.mu.
func (s *store) billWrite(table string, old, next map[string]types.AttributeValue, failed bool, mult int) {
	size := itemSize(old)
	if !failed {
		size = max(size, itemSize(next))
	}
	s.u.WriteUnits += units(size, 1024) * mult
	class := itemClass(table, old, next)
	s.u.WriteUnitsBy[class] += units(size, 1024) * mult
	s.u.WritesBy[class]++
	s.u.WriteBytesBy[class] += size * mult
	if failed {
		return
	}
	sc, _ := s.db.Schema(table)
	for _, ix := range sc.Indexes {
		ok, okIn := indexKey(ix, old)
		nk, nkIn := indexKey(ix, next)
		n := 0
		switch {
		case okIn && nkIn && ok == nk:
			// keys only: the entry does not change
		case okIn && nkIn:
			n = 2 // delete and put
		case okIn || nkIn:
			n = 1
		}
		s.u.IndexUnits += n
		if n > 0 {
			s.u.IndexUnitsBy[class] += n
		}
	}
}

// itemClass names what an item is for the write-unit breakdown: its
// table, then its sort key up to the first '|' or '#' (a window kind, a
// ledger, a watermark), or its partition key's when it has no sort key. A
// keyed state (session or sliding) is its kind and ":state", apart from
// the same kind's window items (the results): the state is rewritten at
// each flush, a window item written once.
func itemClass(table string, items ...map[string]types.AttributeValue) string {
	for _, item := range items {
		if v, ok := item["pk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(v.Value, "~page#") {
			// A result page (~page#<pipeline>#<kind>#<bucket>): by its
			// window kind, as the per-key items it stands for.
			parts := strings.Split(v.Value, "#")
			if len(parts) == 4 {
				return table + ":" + parts[2] + ":page"
			}
		}
		if v, ok := item["pk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(v.Value, "~") {
			// A window listing (~open#<pipeline>#<shard>): its sort key
			// is a time.
			head, _, _ := strings.Cut(v.Value, "#")
			return table + ":" + head
		}
		for _, name := range []string{"sk", "SK", "pk", "PK"} {
			if v, ok := item[name].(*types.AttributeValueMemberS); ok {
				head := v.Value
				if kind, ok := state.IsKeyed(state.Ref{SK: head}); ok {
					return table + ":" + kind + ":state"
				}
				if i := strings.IndexAny(head, "|#"); i >= 0 {
					head = head[:i]
				}
				return table + ":" + head
			}
		}
	}
	return table
}

// refused reports whether err is a refusal DynamoDB still bills (a
// condition that did not hold, a cancelled transaction).
func refused(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	var tce *types.TransactionCanceledException
	return errors.As(err, &ccf) || errors.As(err, &tce)
}

// UpdateItem bills the larger of the item before and after.
func (s *store) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return billedAt(s, "UpdateItem", aws.ToString(in.TableName), in.Key, in, func() (*dynamodb.UpdateItemOutput, error) { return s.db.UpdateItem(ctx, in, opts...) })
}

// DeleteItem bills the item deleted (a refused delete too).
func (s *store) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return billedAt(s, "DeleteItem", aws.ToString(in.TableName), in.Key, in, func() (*dynamodb.DeleteItemOutput, error) { return s.db.DeleteItem(ctx, in, opts...) })
}

// billedAt makes call, a write op to the item at key in table, and bills
// the larger of the item before and after it (a refused write too).
func billedAt[O any](s *store, op, table string, key map[string]types.AttributeValue, in any, call func() (O, error)) (O, error) {
	s.mu.Lock()
	t0 := time.Now()
	old := s.db.Item(table, key)
	out, err := call()
	s.u.Requests[op]++
	if err == nil {
		s.sdk.Keep(op, in, out)
	}
	if err == nil || refused(err) {
		s.billWrite(table, old, s.db.Item(table, key), err != nil, 1)
	}
	s.u.Busy += time.Since(t0)
	s.mu.Unlock()
	s.wait()
	return out, err
}

// PutItem bills the larger of the item replaced and the new one.
func (s *store) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	s.mu.Lock()
	t0 := time.Now()
	table := aws.ToString(in.TableName)
	key := s.keyOf(table, in.Item)
	old := s.db.Item(table, key)
	out, err := s.db.PutItem(ctx, in, opts...)
	s.u.Requests["PutItem"]++
	if err == nil {
		s.sdk.Keep("PutItem", in, out)
	}
	if err == nil || refused(err) {
		s.billWrite(table, old, s.db.Item(table, key), err != nil, 1)
	}
	s.u.Busy += time.Since(t0)
	s.mu.Unlock()
	s.wait()
	return out, err
}

// BatchWriteItem bills each put and delete.
func (s *store) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	s.mu.Lock()
	t0 := time.Now()
	type w struct {
		table string
		key   map[string]types.AttributeValue
		old   map[string]types.AttributeValue
	}
	var ws []w
	for table, reqs := range in.RequestItems {
		for _, r := range reqs {
			var key map[string]types.AttributeValue
			switch {
			case r.PutRequest != nil:
				key = s.keyOf(table, r.PutRequest.Item)
			case r.DeleteRequest != nil:
				key = r.DeleteRequest.Key
			}
			ws = append(ws, w{table, key, s.db.Item(table, key)})
		}
	}
	out, err := s.db.BatchWriteItem(ctx, in, opts...)
	s.u.Requests["BatchWriteItem"]++
	if err == nil {
		s.sdk.Keep("BatchWriteItem", in, out)
	}
	if err == nil {
		for _, x := range ws {
			s.billWrite(x.table, x.old, s.db.Item(x.table, x.key), false, 1)
		}
	}
	s.u.Busy += time.Since(t0)
	s.mu.Unlock()
	s.wait()
	return out, err
}

// TransactWriteItems bills every item twice, condition checks included.
func (s *store) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	s.mu.Lock()
	t0 := time.Now()
	type w struct {
		table string
		key   map[string]types.AttributeValue
		old   map[string]types.AttributeValue
		check bool
	}
	ws := make([]w, 0, len(in.TransactItems))
	for _, it := range in.TransactItems {
		var x w
		switch {
		case it.Put != nil:
			x.table = aws.ToString(it.Put.TableName)
			x.key = s.keyOf(x.table, it.Put.Item)
		case it.Update != nil:
			x.table, x.key = aws.ToString(it.Update.TableName), it.Update.Key
		case it.Delete != nil:
			x.table, x.key = aws.ToString(it.Delete.TableName), it.Delete.Key
		case it.ConditionCheck != nil:
			x.table, x.key, x.check = aws.ToString(it.ConditionCheck.TableName), it.ConditionCheck.Key, true
		}
		x.old = s.db.Item(x.table, x.key)
		ws = append(ws, x)
	}
	out, err := s.db.TransactWriteItems(ctx, in, opts...)
	s.u.Requests["TransactWriteItems"]++
	if err == nil {
		s.sdk.Keep("TransactWriteItems", in, out)
	}
	if err == nil || refused(err) {
		for _, x := range ws {
			s.billWrite(x.table, x.old, s.db.Item(x.table, x.key), err != nil || x.check, 2)
		}
	}
	s.u.Busy += time.Since(t0)
	s.mu.Unlock()
	s.wait()
	return out, err
}

func readHalves(size int, consistent bool) int {
	h := units(size, 4096)
	if consistent {
		h *= 2
	}
	return h
}

// GetItem bills the item read (a missing one the minimum).
func (s *store) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	s.mu.Lock()
	t0 := time.Now()
	out, err := s.db.GetItem(ctx, in, opts...)
	s.u.Requests["GetItem"]++
	if err == nil {
		s.sdk.Keep("GetItem", in, out)
	}
	if err == nil {
		s.u.ReadHalfUnits += readHalves(itemSize(out.Item), aws.ToBool(in.ConsistentRead))
	}
	s.u.Busy += time.Since(t0)
	s.mu.Unlock()
	s.wait()
	return out, err
}

// BatchGetItem bills every key asked for.
func (s *store) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	s.mu.Lock()
	t0 := time.Now()
	out, err := s.db.BatchGetItem(ctx, in, opts...)
	s.u.Requests["BatchGetItem"]++
	if err == nil {
		s.sdk.Keep("BatchGetItem", in, out)
	}
	if err == nil {
		for table, ka := range in.RequestItems {
			consistent := aws.ToBool(ka.ConsistentRead)
			items := out.Responses[table]
			for _, it := range items {
				s.u.ReadHalfUnits += readHalves(itemSize(it), consistent)
			}
			if missing := len(ka.Keys) - len(items); missing > 0 {
				s.u.ReadHalfUnits += missing * readHalves(0, consistent)
			}
		}
	}
	s.u.Busy += time.Since(t0)
	s.mu.Unlock()
	s.wait()
	return out, err
}

// Query bills the items returned together (an index is read eventually
// consistent).
func (s *store) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	s.mu.Lock()
	t0 := time.Now()
	out, err := s.db.Query(ctx, in, opts...)
	s.u.Requests["Query"]++
	if err == nil {
		s.sdk.Keep("Query", in, out)
	}
	if err == nil {
		size := 0
		for _, it := range out.Items {
			size += itemSize(it)
		}
		s.u.ReadHalfUnits += readHalves(size, aws.ToBool(in.ConsistentRead) && in.IndexName == nil)
	}
	s.u.Busy += time.Since(t0)
	s.mu.Unlock()
	s.wait()
	return out, err
}

// storedBytes is what the tables hold now, as DynamoDB bills storage:
// every item's size plus its overhead, and each index entry (keys only)
// likewise.
func (s *store) storedBytes(tables ...string) int {
	n := 0
	for _, t := range tables {
		sc, _ := s.db.Schema(t)
		for _, it := range s.db.Items(t) {
			n += itemSize(it) + dynamoItemOverheadByte
			for _, ix := range sc.Indexes {
				if _, in := indexKey(ix, it); in {
					entry := s.keyOf(t, it)
					entry[ix.PK], entry[ix.SK] = it[ix.PK], it[ix.SK]
					n += itemSize(entry) + dynamoItemOverheadByte
				}
			}
		}
	}
	return n
}
