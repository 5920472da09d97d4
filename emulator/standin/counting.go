package standin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/limits"
)

// dynamoTargetPrefix starts the X-Amz-Target header of every DynamoDB call.
const dynamoTargetPrefix = "DynamoDB_20120810."

// Counter counts the requests that pass through a stand-in, so a benchmark
// can say what a workload would cost on AWS: DynamoDB calls per operation and
// per table, and every item write with what is needed to size it in write
// capacity units afterwards (see Counts.WriteUnits). It is safe for
// concurrent use.
type Counter struct {
	mu     sync.Mutex
	counts Counts
}

// Counts is what a Counter saw, as returned by Snapshot.
type Counts struct {
	// DynamoDB holds requests per DynamoDB operation ("PutItem", "UpdateItem",
	// "TransactWriteItems", "GetItem", "Query", ...).
	DynamoDB map[string]OpCount
	// Tables holds DynamoDB requests per table and operation. A request that
	// touches several tables (TransactWriteItems, BatchWriteItem) counts once
	// for each table it touches.
	Tables map[string]map[string]OpCount
	// Other holds every other request by its X-Amz-Target header (Kinesis,
	// SQS, CloudWatch Logs ...), or by "" when it had none.
	Other map[string]int
	// Writes lists every item write in the order the stand-in received
	// them: one per PutItem, UpdateItem and DeleteItem, one per item of a
	// BatchWriteItem and of a TransactWriteItems. Writes of requests that
	// failed are included: DynamoDB charges a failed conditional write too.
	Writes []Write
	// ReadHalfUnits is the read capacity the reads consumed, in half units
	// (an eventually consistent read of up to 4 KB costs one half unit), by
	// DynamoDB's rules applied to the items each response returned: GetItem
	// and BatchGetItem per item (a missing item still costs the minimum),
	// Query and Scan per page on the sum of its items' sizes, and
	// TransactGetItems twice.
	ReadHalfUnits int
}

// ReadUnits is ReadHalfUnits in read capacity units.
func (c Counts) ReadUnits() float64 { return float64(c.ReadHalfUnits) / 2 }

// OpCount is the number of requests of one kind and how many of them failed
// (answered with a status other than 2xx, for example a
// ConditionalCheckFailedException).
type OpCount struct {
	Requests int
	Failed   int
}

// Write is one item write seen on the wire.
type Write struct {
	// Op is "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem" or
	// "TransactWriteItems".
	Op string
	// Action is the kind of write within the request: "Put", "Update",
	// "Delete" or "ConditionCheck".
	Action string
	Table  string
	// Key is the item's key for updates, deletes and condition checks, whose
	// item size the request does not tell.
	Key map[string]ddbtypes.AttributeValue
	// Item is the item of a put.
	Item map[string]ddbtypes.AttributeValue
	// Size is the item's size in bytes by DynamoDB's rules, for puts; 0 for
	// other actions.
	Size int
	// Transactional is true for items of TransactWriteItems, which DynamoDB
	// charges twice.
	Transactional bool
	// Failed is true when the request was answered with an error.
	Failed bool
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter {
	c := &Counter{}
	c.counts = emptyCounts()
	return c
}

func emptyCounts() Counts {
	return Counts{DynamoDB: map[string]OpCount{}, Tables: map[string]map[string]OpCount{}, Other: map[string]int{}}
}

// Snapshot returns a copy of what the Counter has seen so far.
func (c *Counter) Snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := emptyCounts()
	for k, v := range c.counts.DynamoDB {
		out.DynamoDB[k] = v
	}
	for t, ops := range c.counts.Tables {
		m := make(map[string]OpCount, len(ops))
		for k, v := range ops {
			m[k] = v
		}
		out.Tables[t] = m
	}
	for k, v := range c.counts.Other {
		out.Other[k] = v
	}
	out.Writes = append([]Write(nil), c.counts.Writes...)
	out.ReadHalfUnits = c.counts.ReadHalfUnits
	return out
}

// Reset forgets everything counted so far.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = emptyCounts()
}

// Wrap returns a handler that counts each request and then passes it to h
// unchanged.
func (c *Counter) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.Header.Get("X-Amz-Target")
		op, isDynamo := strings.CutPrefix(target, dynamoTargetPrefix)
		if !isDynamo {
			c.mu.Lock()
			c.counts.Other[target]++
			c.mu.Unlock()
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "standin: reading request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		tables, writes := parseDynamoRequest(op, body)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		if isRead(op) {
			sw.body = &bytes.Buffer{}
		}
		h.ServeHTTP(sw, r)
		failed := sw.status < 200 || sw.status > 299
		half := 0
		if sw.body != nil && !failed {
			half = readHalfUnits(op, body, sw.body.Bytes())
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.counts.ReadHalfUnits += half
		c.counts.DynamoDB[op] = c.counts.DynamoDB[op].add(failed)
		for _, t := range tables {
			ops := c.counts.Tables[t]
			if ops == nil {
				ops = map[string]OpCount{}
				c.counts.Tables[t] = ops
			}
			ops[op] = ops[op].add(failed)
		}
		for _, wr := range writes {
			wr.Failed = failed
			c.counts.Writes = append(c.counts.Writes, wr)
		}
	})
}

func (o OpCount) add(failed bool) OpCount {
	o.Requests++
	if failed {
		o.Failed++
	}
	return o
}

// statusWriter remembers the status code; Unwrap lets http.ResponseController
// (which the reverse proxy uses to flush) reach the real writer.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	body        *bytes.Buffer // a copy of the response, for reads
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wroteHeader {
		s.status, s.wroteHeader = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wroteHeader = true
	if s.body != nil {
		s.body.Write(b)
	}
	return s.ResponseWriter.Write(b)
}

func isRead(op string) bool {
	switch op {
	case "GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems":
		return true
	}
	return false
}

// readHalfUnits prices one read response in half read units: 4 KB per half
// unit eventually consistent, per unit strongly consistent.
func readHalfUnits(op string, req, resp []byte) int {
	var in struct {
		ConsistentRead bool
		RequestItems   map[string]struct {
			Keys           []json.RawMessage
			ConsistentRead bool
		}
	}
	_ = json.Unmarshal(req, &in)
	per := func(size int, consistent bool) int {
		h := capacityUnits(size, 4096)
		if consistent {
			h *= 2
		}
		return h
	}
	switch op {
	case "GetItem":
		var out struct{ Item map[string]wireValue }
		_ = json.Unmarshal(resp, &out)
		return per(ItemSize(toItem(out.Item)), in.ConsistentRead)
	case "BatchGetItem":
		var out struct {
			Responses map[string][]map[string]wireValue
		}
		_ = json.Unmarshal(resp, &out)
		n := 0
		for table, items := range out.Responses {
			consistent := in.RequestItems[table].ConsistentRead
			for _, it := range items {
				n += per(ItemSize(toItem(it)), consistent)
			}
			// Keys asked for and not found cost the minimum too.
			if missing := len(in.RequestItems[table].Keys) - len(items); missing > 0 {
				n += missing * per(0, consistent)
			}
		}
		return n
	case "Query", "Scan":
		var out struct{ Items []map[string]wireValue }
		_ = json.Unmarshal(resp, &out)
		size := 0
		for _, it := range out.Items {
			size += ItemSize(toItem(it))
		}
		return per(size, in.ConsistentRead)
	case "TransactGetItems":
		var out struct {
			Responses []struct{ Item map[string]wireValue }
		}
		_ = json.Unmarshal(resp, &out)
		n := 0
		for _, r := range out.Responses {
			n += 2 * per(ItemSize(toItem(r.Item)), true)
		}
		return n
	}
	return 0
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Operation counts for one DynamoDB operation across all tables.
func (c Counts) Operation(op string) OpCount { return c.DynamoDB[op] }

// WriteRequests is the number of DynamoDB write calls (PutItem, UpdateItem,
// DeleteItem, BatchWriteItem, TransactWriteItems), failed ones included.
func (c Counts) WriteRequests() int {
	n := 0
	for _, op := range []string{"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"} {
		n += c.DynamoDB[op].Requests
	}
	return n
}

// TableWriteRequests is WriteRequests restricted to one table.
func (c Counts) TableWriteRequests(table string) int {
	n := 0
	for _, op := range []string{"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"} {
		n += c.Tables[table][op].Requests
	}
	return n
}

// WriteUnits is the write capacity a run consumed, by DynamoDB's rules: a
// write of an item of s bytes costs ceil(s/1024) units (at least 1), twice
// that inside a transaction.
type WriteUnits struct {
	Total   int
	ByTable map[string]int
	ByOp    map[string]int
	// Estimated counts the writes whose item could not be found afterwards
	// (deleted, or a table that is gone) and were charged 1 unit (2 in a
	// transaction).
	Estimated int
}

// itemGetter is what WriteUnits needs from a DynamoDB client.
type itemGetter interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ itemGetter = (*dynamodb.Client)(nil)

// WriteUnits computes the write capacity units of c.Writes. A put is sized
// from its request. An update, delete or condition check names only a key,
// so its item is sized as it is now in the table: WriteUnits scans every
// table those writes touched (with db, which may point at the same counting
// stand-in: take the Snapshot first). DynamoDB charges an update by the
// larger of the item before and after it, which for items that only grow
// (counters, status updates) is the item as it ends up, so the result is
// exact for them and an upper bound otherwise. A failed conditional write is
// charged by the existing item (at least 1 unit), taken as it is now. A put
// that replaces a larger item is charged by the new item only (DynamoDB
// charges the larger of the two).
func (c Counts) WriteUnits(ctx context.Context, db itemGetter) (WriteUnits, error) {
	tables := map[string]*tableSizes{}
	for _, w := range c.Writes {
		if w.Action == "Put" && !w.Failed {
			continue
		}
		if _, done := tables[w.Table]; done {
			continue
		}
		ts, err := scanSizes(ctx, db, w.Table)
		if err != nil {
			return WriteUnits{}, err
		}
		tables[w.Table] = ts
	}
	out := WriteUnits{ByTable: map[string]int{}, ByOp: map[string]int{}}
	for _, w := range c.Writes {
		size := w.Size
		if w.Action != "Put" || w.Failed {
			key := w.Key
			if w.Action == "Put" {
				key = tables[w.Table].keyOf(w.Item)
			}
			s, ok := tables[w.Table].sizes[keyString(key)]
			if !ok && w.Action != "Put" {
				out.Estimated++
			}
			size = max(size, s)
		}
		units := capacityUnits(size, 1024)
		if w.Transactional {
			units *= 2
		}
		out.Total += units
		out.ByTable[w.Table] += units
		out.ByOp[w.Op] += units
	}
	return out, nil
}

// capacityUnits is ceil(size/unit), at least 1.
func capacityUnits(size, unit int) int {
	if size <= 0 {
		return 1
	}
	return (size + unit - 1) / unit
}

// tableSizes is every item's size in one table, by key.
type tableSizes struct {
	keyNames []string
	sizes    map[string]int
}

func (t *tableSizes) keyOf(item map[string]ddbtypes.AttributeValue) map[string]ddbtypes.AttributeValue {
	key := make(map[string]ddbtypes.AttributeValue, len(t.keyNames))
	for _, n := range t.keyNames {
		key[n] = item[n]
	}
	return key
}

// scanSizes scans table and sizes each item. A table that no longer exists
// has no items.
func scanSizes(ctx context.Context, db itemGetter, table string) (*tableSizes, error) {
	out := &tableSizes{sizes: map[string]int{}}
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		var nf *ddbtypes.ResourceNotFoundException
		if errors.As(err, &nf) {
			return out, nil
		}
		return nil, fmt.Errorf("standin: write units: describe table %s: %w", table, err)
	}
	for _, k := range desc.Table.KeySchema {
		out.keyNames = append(out.keyNames, aws.ToString(k.AttributeName))
	}
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("standin: write units: scan table %s: %w", table, err)
		}
		for _, item := range page.Items {
			out.sizes[keyString(out.keyOf(item))] = ItemSize(item)
		}
	}
	return out, nil
}

// keyString is a canonical text form of a key, for use as a map key.
func keyString(key map[string]ddbtypes.AttributeValue) string {
	names := make([]string, 0, len(key))
	for n := range key {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte('=')
		switch v := key[n].(type) {
		case *ddbtypes.AttributeValueMemberS:
			b.WriteString("S:" + v.Value)
		case *ddbtypes.AttributeValueMemberN:
			b.WriteString("N:" + canonicalNumber(v.Value))
		case *ddbtypes.AttributeValueMemberB:
			b.WriteString("B:" + base64.StdEncoding.EncodeToString(v.Value))
		default:
			fmt.Fprintf(&b, "%T", v)
		}
		b.WriteByte(0)
	}
	return b.String()
}

// canonicalNumber makes "1", "1.0" and "01" the same key.
func canonicalNumber(n string) string {
	f, _, err := big.ParseFloat(n, 10, 256, big.ToNearestEven)
	if err != nil {
		return n
	}
	return f.Text('g', -1)
}

// ItemSize is the size of an item in bytes by DynamoDB's rules (package
// limits).
func ItemSize(item map[string]ddbtypes.AttributeValue) int { return limits.ItemSize(item) }

// parseDynamoRequest extracts the tables a DynamoDB request touches and the
// item writes it makes. A body it cannot parse is counted without tables.
func parseDynamoRequest(op string, body []byte) ([]string, []Write) {
	var in struct {
		TableName     string
		Item          map[string]wireValue
		Key           map[string]wireValue
		RequestItems  map[string]json.RawMessage
		TransactItems []struct {
			Put, Update, Delete, ConditionCheck *transactAction
		}
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil
	}
	switch op {
	case "PutItem":
		return []string{in.TableName}, []Write{putWrite(op, in.TableName, in.Item, false)}
	case "UpdateItem":
		return []string{in.TableName}, []Write{{Op: op, Action: "Update", Table: in.TableName, Key: toItem(in.Key)}}
	case "DeleteItem":
		return []string{in.TableName}, []Write{{Op: op, Action: "Delete", Table: in.TableName, Key: toItem(in.Key)}}
	case "BatchWriteItem":
		var tables []string
		var writes []Write
		for _, t := range sortedKeys(in.RequestItems) {
			tables = append(tables, t)
			var reqs []struct {
				PutRequest    *struct{ Item map[string]wireValue }
				DeleteRequest *struct{ Key map[string]wireValue }
			}
			_ = json.Unmarshal(in.RequestItems[t], &reqs)
			for _, r := range reqs {
				switch {
				case r.PutRequest != nil:
					writes = append(writes, putWrite(op, t, r.PutRequest.Item, false))
				case r.DeleteRequest != nil:
					writes = append(writes, Write{Op: op, Action: "Delete", Table: t, Key: toItem(r.DeleteRequest.Key)})
				}
			}
		}
		return tables, writes
	case "TransactWriteItems":
		seen := map[string]bool{}
		var tables []string
		var writes []Write
		for _, ti := range in.TransactItems {
			for _, ac := range []struct {
				action string
				a      *transactAction
			}{{"Put", ti.Put}, {"Update", ti.Update}, {"Delete", ti.Delete}, {"ConditionCheck", ti.ConditionCheck}} {
				action, a := ac.action, ac.a
				if a == nil {
					continue
				}
				if !seen[a.TableName] {
					seen[a.TableName] = true
					tables = append(tables, a.TableName)
				}
				if action == "Put" {
					writes = append(writes, putWrite(op, a.TableName, a.Item, true))
				} else {
					writes = append(writes, Write{Op: op, Action: action, Table: a.TableName, Key: toItem(a.Key), Transactional: true})
				}
			}
		}
		sort.Strings(tables)
		return tables, writes
	case "BatchGetItem":
		return sortedKeys(in.RequestItems), nil
	case "TransactGetItems":
		var tg struct {
			TransactItems []struct{ Get struct{ TableName string } }
		}
		_ = json.Unmarshal(body, &tg)
		seen := map[string]bool{}
		var tables []string
		for _, g := range tg.TransactItems {
			if !seen[g.Get.TableName] {
				seen[g.Get.TableName] = true
				tables = append(tables, g.Get.TableName)
			}
		}
		sort.Strings(tables)
		return tables, nil
	}
	if in.TableName != "" {
		return []string{in.TableName}, nil
	}
	return nil, nil
}

func putWrite(op, table string, wire map[string]wireValue, transactional bool) Write {
	item := toItem(wire)
	return Write{Op: op, Action: "Put", Table: table, Item: item, Size: ItemSize(item), Transactional: transactional}
}

// transactAction is one action of a TransactWriteItems request.
type transactAction struct {
	TableName string
	Item      map[string]wireValue
	Key       map[string]wireValue
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// wireValue is an AttributeValue as DynamoDB's JSON protocol sends it.
type wireValue struct {
	S    *string
	N    *string
	B    []byte // base64 in JSON, decoded by encoding/json
	BOOL *bool
	NULL *bool
	SS   []string
	NS   []string
	BS   [][]byte
	L    []wireValue
	M    map[string]wireValue
}

func toItem(m map[string]wireValue) map[string]ddbtypes.AttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]ddbtypes.AttributeValue, len(m))
	for k, v := range m {
		out[k] = v.value()
	}
	return out
}

func (w wireValue) value() ddbtypes.AttributeValue {
	switch {
	case w.S != nil:
		return &ddbtypes.AttributeValueMemberS{Value: *w.S}
	case w.N != nil:
		return &ddbtypes.AttributeValueMemberN{Value: *w.N}
	case w.B != nil:
		return &ddbtypes.AttributeValueMemberB{Value: w.B}
	case w.BOOL != nil:
		return &ddbtypes.AttributeValueMemberBOOL{Value: *w.BOOL}
	case w.NULL != nil:
		return &ddbtypes.AttributeValueMemberNULL{Value: *w.NULL}
	case w.SS != nil:
		return &ddbtypes.AttributeValueMemberSS{Value: w.SS}
	case w.NS != nil:
		return &ddbtypes.AttributeValueMemberNS{Value: w.NS}
	case w.BS != nil:
		return &ddbtypes.AttributeValueMemberBS{Value: w.BS}
	case w.L != nil:
		l := make([]ddbtypes.AttributeValue, len(w.L))
		for i, e := range w.L {
			l[i] = e.value()
		}
		return &ddbtypes.AttributeValueMemberL{Value: l}
	case w.M != nil:
		return &ddbtypes.AttributeValueMemberM{Value: toItem(w.M)}
	}
	return &ddbtypes.AttributeValueMemberNULL{Value: true}
}

// StartCounting starts a stand-in as Start does, with a Counter in front of
// the serializer that counts every request. It never reuses a running
// endpoint (whose requests it could not count): opts.Reuse is refused.
func StartCounting(ctx context.Context, opts Options) (*Server, *Counter, error) {
	if opts.Reuse {
		return nil, nil, fmt.Errorf("standin: StartCounting cannot reuse a running endpoint: its requests would not be counted; set Options.Reuse to false")
	}
	c := NewCounter()
	s, err := startWrapped(ctx, opts, c.Wrap)
	if err != nil {
		return nil, nil, err
	}
	return s, c, nil
}
