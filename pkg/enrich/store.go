package enrich

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// tableAPI is what the join needs of DynamoDB.
type tableAPI interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ tableAPI = (*dynamodb.Client)(nil)

// ErrSuperseded means a batch that starts later in the shard has already
// written the join's state: this delivery is a stale duplicate (an
// invocation Lambda already gave up on), and it stops rather than write.
var ErrSuperseded = errors.New("enrich: a later batch of the shard already wrote the join state")

// Item attributes (see the package doc).
const (
	attrPK     = "pk"
	attrFloor  = "p"
	attrLast   = "last"
	attrFrom   = "from"
	attrTail   = "c"
	entryPre   = "e_"
	keyPrefix  = "k#"
	tailPrefix = "t#"
)

// maxBatchGet is DynamoDB's limit of keys per BatchGetItem.
const maxBatchGet = 100

// readAttempts bounds the BatchGetItem attempts for unprocessed keys.
const readAttempts = 8

// maxClauses bounds the SET/REMOVE clauses of one UpdateItem, well within
// DynamoDB's 4 KB update expression.
const maxClauses = 100

// keyItem is a key's history as stored, with its fence.
type keyItem struct {
	hist  history
	floor string // fenced; "" when never written
}

// tailChange is an applied change of the shard with its key.
type tailChange struct {
	key string
	change
}

// tail is a shard's tail item.
type tail struct {
	last    string // fenced; "" when never written
	from    string // fenced; "" when nothing was ever dropped
	changes []tailChange
}

// readResult is what one read brought back.
type readResult struct {
	tail  tail
	keys  map[string]keyItem // every requested key; absent items have an empty history
	items int                // items returned
	// retries counts the BatchGetItem calls made for unprocessed keys.
	retries int
}

// storedEntry is a history entry's attribute value.
type storedEntry struct {
	Version string  `dynamodbav:"v"`
	Image   *string `dynamodbav:"i,omitempty"`
}

// storedTailChange is one element of a tail's list.
type storedTailChange struct {
	Seq     string  `dynamodbav:"s"`
	Key     string  `dynamodbav:"k"`
	Version string  `dynamodbav:"v"`
	Image   *string `dynamodbav:"i,omitempty"`
}

func imagePtr(img []byte) *string {
	if img == nil {
		return nil
	}
	s := string(img)
	return &s
}

func imageBytes(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

// read gets the keys' histories and, when withTail, the shard's tail, with
// one BatchGetItem round trip: chunks of 100 keys are read concurrently and
// unprocessed keys retried with backoff.
func (h *Handler) read(ctx context.Context, shard string, keys []string, withTail bool) (readResult, error) {
	rr := readResult{keys: make(map[string]keyItem, len(keys))}
	pks := make([]string, 0, len(keys)+1)
	if withTail {
		pks = append(pks, tailPrefix+shard)
	}
	for _, k := range keys {
		rr.keys[k] = keyItem{}
		pks = append(pks, keyPrefix+k)
	}
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	for start := 0; start < len(pks); start += maxBatchGet {
		chunk := pks[start:min(start+maxBatchGet, len(pks))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			items, retries, err := h.batchGet(ctx, chunk)
			mu.Lock()
			defer mu.Unlock()
			rr.retries += retries
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			for _, it := range items {
				rr.items++
				if err := rr.decode(it); err != nil && firstErr == nil {
					firstErr = err
				}
			}
		}()
	}
	wg.Wait()
	return rr, firstErr
}

// batchGet reads pks with BatchGetItem, strongly consistent (an item a
// batch on another instance just wrote must be seen).
func (h *Handler) batchGet(ctx context.Context, pks []string) ([]map[string]ddbtypes.AttributeValue, int, error) {
	req := ddbtypes.KeysAndAttributes{ConsistentRead: aws.Bool(true)}
	for _, pk := range pks {
		req.Keys = append(req.Keys, map[string]ddbtypes.AttributeValue{attrPK: &ddbtypes.AttributeValueMemberS{Value: pk}})
	}
	var items []map[string]ddbtypes.AttributeValue
	retries := 0
	for attempt := 1; ; attempt++ {
		out, err := h.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{h.table: req}})
		if err != nil {
			return nil, retries, fmt.Errorf("reading %d items of join table %s: %w", len(req.Keys), h.table, err)
		}
		items = append(items, out.Responses[h.table]...)
		next, ok := out.UnprocessedKeys[h.table]
		if !ok || len(next.Keys) == 0 {
			return items, retries, nil
		}
		if attempt == readAttempts {
			return nil, retries, fmt.Errorf("join table %s: %d keys still unprocessed after %d BatchGetItem attempts", h.table, len(next.Keys), attempt)
		}
		retries++
		req = next
		if err := h.sleep(ctx, attempt); err != nil {
			return nil, retries, err
		}
	}
}

// decode adds one item read to rr.
func (rr *readResult) decode(item map[string]ddbtypes.AttributeValue) error {
	pkAV, _ := item[attrPK].(*ddbtypes.AttributeValueMemberS)
	if pkAV == nil {
		return fmt.Errorf("join table: an item without a string %s", attrPK)
	}
	pk := pkAV.Value
	str := func(name string) string {
		if v, ok := item[name].(*ddbtypes.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	if strings.HasPrefix(pk, tailPrefix) {
		t := tail{last: str(attrLast), from: str(attrFrom)}
		if l, ok := item[attrTail]; ok {
			var stored []storedTailChange
			if err := unmarshal(l, &stored); err != nil {
				return fmt.Errorf("join table item %s: attribute %s: %w", pk, attrTail, err)
			}
			for _, s := range stored {
				t.changes = append(t.changes, tailChange{key: s.Key, change: change{seq: s.Seq, version: s.Version, image: imageBytes(s.Image)}})
			}
		}
		rr.tail = t
		return nil
	}
	key, ok := strings.CutPrefix(pk, keyPrefix)
	if !ok {
		return fmt.Errorf("join table item %s: not a key or tail item", pk)
	}
	ki := keyItem{floor: str(attrFloor)}
	for name, av := range item {
		seq, ok := strings.CutPrefix(name, entryPre)
		if !ok {
			continue
		}
		var e storedEntry
		if err := unmarshal(av, &e); err != nil {
			return fmt.Errorf("join table item %s: attribute %s: %w", pk, name, err)
		}
		ki.hist = append(ki.hist, change{seq: seq, version: e.Version, image: imageBytes(e.Image)})
	}
	sort.Slice(ki.hist, func(i, j int) bool { return ki.hist[i].seq < ki.hist[j].seq })
	rr.keys[key] = ki
	return nil
}

// writeKey adds a key's applied changes of the batch starting at first and
// removes the dropped ones, fenced: a batch that starts earlier than the one
// that last wrote the item is refused with ErrSuperseded.
func (h *Handler) writeKey(ctx context.Context, key, first string, added []change, dropped []string) (int, error) {
	type clause struct {
		seq string
		add *change
	}
	// Removals first: when the update takes more than one request, the
	// item only grows towards its final size (checked against the budget
	// before the batch was walked), never past it.
	var clauses []clause
	for _, s := range dropped {
		clauses = append(clauses, clause{seq: s})
	}
	for i := range added {
		clauses = append(clauses, clause{seq: added[i].seq, add: &added[i]})
	}
	cond := expression.Or(expression.AttributeNotExists(expression.Name(attrFloor)),
		expression.Name(attrFloor).LessThanEqual(expression.Value(first)))
	requests := 0
	for start := 0; start < len(clauses) || start == 0; start += maxClauses {
		upd := expression.Set(expression.Name(attrFloor), expression.Value(first))
		for _, c := range clauses[start:min(start+maxClauses, len(clauses))] {
			if c.add != nil {
				upd = upd.Set(expression.Name(entryPre+c.seq), expression.Value(storedEntry{Version: c.add.version, Image: imagePtr(c.add.image)}))
			} else {
				upd = upd.Remove(expression.Name(entryPre + c.seq))
			}
		}
		expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
		if err != nil {
			return requests, fmt.Errorf("key %s: building the update: %w", key, err)
		}
		requests++
		if err := h.updateItem(ctx, keyPrefix+key, expr); err != nil {
			var ccf *ddbtypes.ConditionalCheckFailedException
			if errors.As(err, &ccf) {
				return requests, fmt.Errorf("key %s: %w", key, ErrSuperseded)
			}
			return requests, fmt.Errorf("writing key %s to join table %s: %w", key, h.table, err)
		}
		if start+maxClauses >= len(clauses) {
			break
		}
	}
	return requests, nil
}

// writeTail replaces the shard's tail, fenced by its last sequence number:
// a tail already written by a batch that reached further is left alone (it
// holds this batch's changes), which writeTail reports as applied=false.
func (h *Handler) writeTail(ctx context.Context, shard string, t tail) (applied bool, err error) {
	stored := make([]storedTailChange, len(t.changes))
	for i, c := range t.changes {
		stored[i] = storedTailChange{Seq: c.seq, Key: c.key, Version: c.version, Image: imagePtr(c.image)}
	}
	upd := expression.Set(expression.Name(attrLast), expression.Value(t.last)).
		Set(expression.Name(attrFrom), expression.Value(t.from)).
		Set(expression.Name(attrTail), expression.Value(stored))
	cond := expression.Or(expression.AttributeNotExists(expression.Name(attrLast)),
		expression.Name(attrLast).LessThanEqual(expression.Value(t.last)))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return false, fmt.Errorf("shard %s: building the tail update: %w", shard, err)
	}
	if err := h.updateItem(ctx, tailPrefix+shard, expr); err != nil {
		var ccf *ddbtypes.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return false, nil
		}
		return false, fmt.Errorf("writing the tail of shard %s to join table %s: %w", shard, h.table, err)
	}
	return true, nil
}

// extendTail is t with the batch's applied changes, bounded to the
// handler's limits (oldest dropped first, from moved past them) and last
// set to the batch's last record when that is further.
func (h *Handler) extendTail(t tail, added []tailChange, last string) tail {
	seen := map[string]bool{}
	var all []tailChange
	for _, c := range append(append([]tailChange(nil), t.changes...), added...) {
		if !seen[c.seq] {
			seen[c.seq] = true
			all = append(all, c)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	size := 0
	for _, c := range all {
		size += tailChangeSize(c)
	}
	out := tail{last: t.last, from: t.from}
	if last > out.last {
		out.last = last
	}
	for len(all) > 0 && (len(all) > h.tailEntries || size > h.tailBytes) {
		size -= tailChangeSize(all[0])
		if all[0].seq > out.from {
			out.from = all[0].seq
		}
		all = all[1:]
	}
	out.changes = all
	return out
}

// projectedItem follows the size, as DynamoDB counts it, of one key's item as a
// batch adds its changes: the stored history pruned at the batch's first
// record (first), then each change added. A change of the batch is at or
// after first, so adding one never changes what the prune keeps: the size
// grows by the change's entry, and a batch of n changes of one key costs n
// steps, not n² (a history cloned and measured again for each).
type projectedItem struct {
	hist  history
	bytes int
}

// newProjectedItem is the key item of hist pruned at first.
func newProjectedItem(key, first string, hist history) *projectedItem {
	proj := hist.clone()
	proj.prune(first)
	return &projectedItem{hist: proj, bytes: storedKeyBytes(key, first, proj)}
}

// with is the item's size once c is added.
func (k *projectedItem) with(c change) int {
	if _, found := slices.BinarySearchFunc(k.hist, c.seq, func(e change, s string) int { return strings.Compare(e.seq, s) }); found {
		return k.bytes
	}
	return k.bytes + entryBytes(c)
}

// add adds c (with reported its size).
func (k *projectedItem) add(c change) {
	if k.hist.add(c) {
		k.bytes += entryBytes(c)
	}
}

// storedKeyBytes is the size of the key item holding hist with fence
// first, by DynamoDB's rules: each attribute's name and value; a map 3 bytes
// plus, per element, 1 and its name and value.
func storedKeyBytes(key, first string, hist history) int {
	n := len(attrPK) + len(keyPrefix) + len(key) + len(attrFloor) + len(first)
	for _, c := range hist {
		n += entryBytes(c)
	}
	return n
}

// entryBytes is one change's entry in a key item.
func entryBytes(c change) int {
	n := len(entryPre) + len(c.seq) + 3 + 1 + len("v") + len(c.version)
	if c.image != nil {
		n += 1 + len("i") + len(c.image)
	}
	return n
}

// tailChangeSize is a tail element's size in DynamoDB's terms, roughly.
func tailChangeSize(c tailChange) int {
	return 1 + len(c.seq) + 1 + len(c.key) + 1 + len(c.version) + 1 + len(c.image) + 16
}

// Profile is a key's latest profile in the join's table.
type Profile struct {
	// Image is the profile as JSON; nil when deleted or never seen.
	Image []byte
	// Version is the latest version applied; "" when the key was never seen.
	Version string
	// Deleted is true when the latest change is a tombstone.
	Deleted bool
}

// Lookup reads a key's latest profile from the join's table (one strongly
// consistent read), for inspection and tests.
func (h *Handler) Lookup(ctx context.Context, key string) (Profile, error) {
	rr, err := h.read(ctx, "", []string{key}, false)
	if err != nil {
		return Profile{}, err
	}
	c, ok := rr.keys[key].hist.asOf("\xff")
	if !ok {
		return Profile{}, nil
	}
	return Profile{Image: c.image, Version: c.version, Deleted: c.image == nil}, nil
}

// updateItem applies a built conditional update to the join table's item pk.
func (h *Handler) updateItem(ctx context.Context, pk string, expr expression.Expression) error {
	_, err := h.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(h.table),
		Key:                       map[string]ddbtypes.AttributeValue{attrPK: &ddbtypes.AttributeValueMemberS{Value: pk}},
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values()})
	return err
}
