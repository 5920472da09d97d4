package projection

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// scanner reads a whole table.
type scanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ scanner = (*dynamodb.Client)(nil)

// DefaultFromMargin is how long before a rebuild's scan of the log the
// published stream is followed from: events appended while the scan runs
// reach the new version through the stream, and the margin covers the
// difference between this machine's clock and Kinesis' arrival times. What
// both bring is applied once (the fences).
const DefaultFromMargin = time.Minute

// Rebuild builds a new version of the views table from the log and points
// the readers at it (see the package doc): replay.Replayer.Run creates
// <views>-vN tagged as replay's, this fills it from a consistent Scan of
// the whole events table (eventsTable) with p's views — StateViews
// included — and Run then follows the published stream (opts.Stream) from
// opts.From (default: DefaultFromMargin before now) until it has caught up,
// swaps the registry and follows for opts.Handover. Refusals (a target that
// exists, a registry that moved) are replay's.
func Rebuild(ctx context.Context, r *replay.Replayer, p *Projector, db scanner, eventsTable string, opts replay.Options) (*replay.Result, error) {
	if opts.From.IsZero() {
		now := time.Now
		if opts.Now != nil {
			now = opts.Now
		}
		opts.From = now().Add(-DefaultFromMargin)
	}
	out := opts.Progress
	if out == nil {
		out = io.Discard
	}
	opts = unwindowed(opts)
	res, err := r.Run(ctx, opts, func(table string, _ *setaside.Sink) (replay.BatchHandler, error) {
		start := time.Now()
		aggregates := 0
		n, err := es.ScanLog(ctx, db, eventsTable, func(run []es.Event) error {
			aggregates++
			return p.ApplyLog(ctx, table, run)
		})
		if err != nil {
			return nil, fmt.Errorf("filling %s from the log %s: %w", table, eventsTable, err)
		}
		fmt.Fprintf(out, "filled %s from the log %s from its start: %d events in %d runs of aggregates, in %s; now following stream %s from %s\n",
			table, eventsTable, n, aggregates, time.Since(start).Round(time.Millisecond), opts.Stream, opts.From.UTC().Format(time.RFC3339))
		return p.For(table), nil
	})
	return res, err
}

// CatchUp is the handler replay.Replayer's UseVersion and Rollback feed
// when the readers go back to an existing version: p writing every view,
// StateViews included, to that table.
func CatchUp(p *Projector) func(table string, _ *setaside.Sink) (replay.BatchHandler, error) {
	return func(table string, _ *setaside.Sink) (replay.BatchHandler, error) { return p.For(table), nil }
}

// UseVersion is replay.Replayer.UseVersion with p catching the version up.
func UseVersion(ctx context.Context, r *replay.Replayer, p *Projector, opts replay.Options) (*replay.Result, error) {
	return r.UseVersion(ctx, unwindowed(opts), CatchUp(p))
}

// Rollback is replay.Replayer.Rollback with p catching the previous version
// up.
func Rollback(ctx context.Context, r *replay.Replayer, p *Projector, opts replay.Options) (*replay.Result, error) {
	return r.Rollback(ctx, unwindowed(opts), CatchUp(p))
}

// unwindowed is opts for a version of the event-sourced views: replay's
// summary says nothing of windows, sessions or late revisions, which they
// have none of, and its messages name eventstore's commands.
func unwindowed(opts replay.Options) replay.Options {
	opts.Unwindowed = true
	if opts.Tool == "" {
		opts.Tool = "eventstore"
	}
	return opts
}

// Diff is how two versions of a views table differ.
type Diff struct {
	A, B           string
	ItemsA, ItemsB int
	// OnlyA, OnlyB and Differ list items by key (at most maxListed each);
	// Differ with the attributes that differ and their values on each
	// side, cut around where they part (attrDiff). A key is the item's pk
	// and sk run together after pk's length ("6:show-1x"); ItemName
	// prints it.
	OnlyA, OnlyB, Differ []string
	// Counts of each (the lists may be cut).
	NOnlyA, NOnlyB, NDiffer int
	// NewerB counts the differing items whose version (AttrVersion) is
	// higher in B: B applied events of theirs that A did not.
	NewerB int
	// notNewerB lists the keys of the other differing items (at most
	// maxListed).
	notNewerB []string
}

const (
	maxListed = 10
	// maxShown is how many of a list String prints: the rest are
	// counted ("and 54 more").
	maxShown = 5
)

// Equal reports whether the two versions hold the same items.
func (d *Diff) Equal() bool { return d.NOnlyA == 0 && d.NOnlyB == 0 && d.NDiffer == 0 }

// String says how the versions differ, a line for each kind of
// difference, naming at most maxShown items of each.
func (d *Diff) String() string {
	if d.Equal() {
		return fmt.Sprintf("%s and %s hold the same %d items", d.A, d.B, d.ItemsA)
	}
	return fmt.Sprintf("%s (%d items) and %s (%d items) differ:\n%s", d.A, d.ItemsA, d.B, d.ItemsB, strings.Join(d.lines(), "\n"))
}

// lines are String's lines after the first.
func (d *Diff) lines() []string {
	return []string{
		fmt.Sprintf("  %d only in %s%s", d.NOnlyA, d.A, listed(d.OnlyA, d.NOnlyA)),
		fmt.Sprintf("  %d only in %s%s", d.NOnlyB, d.B, listed(d.OnlyB, d.NOnlyB)),
		fmt.Sprintf("  %d in both differ (%d of them with a higher version in %s)%s", d.NDiffer, d.NewerB, d.B, listed(d.Differ, d.NDiffer)),
	}
}

// AfterSwap says how the versions differ after a rebuild swapped the
// readers from A to B while commands came in, and why they can: from the
// swap on the live functions write to B alone (once each has re-read the
// parameter, within its refresh interval), so items created since are only
// in B and items updated since hold a higher version there. Differences
// the swap does not explain (items only in A, or not newer in B) are named
// as such.
func (d *Diff) AfterSwap() string {
	if d.Equal() {
		return fmt.Sprintf("%s (previous) and %s (current now) hold the same %d items", d.A, d.B, d.ItemsA)
	}
	lines := []string{fmt.Sprintf("%s (previous, %d items) and %s (current now, %d items) differ; from the swap on the live functions write only to %s (each once it has re-read the parameter, within its refresh interval), so what changed after it is only there:",
		d.A, d.ItemsA, d.B, d.ItemsB, d.B)}
	lines = append(lines,
		fmt.Sprintf("  %d only in %s: created after the swap (by commands since)%s", d.NOnlyB, d.B, listed(d.OnlyB, d.NOnlyB)),
		fmt.Sprintf("  %d with a higher version in %s: updated after the swap", d.NewerB, d.B))
	if other := d.NDiffer - d.NewerB; d.NOnlyA > 0 || other > 0 {
		lines = append(lines, fmt.Sprintf("  not explained by the swap — %d only in %s%s; %d differing without a higher version in %s%s (eventstore compare -a %s -b %s shows how)",
			d.NOnlyA, d.A, listed(d.OnlyA, d.NOnlyA), other, d.B, listed(d.notNewerB, other), d.A, d.B))
	} else {
		lines = append(lines, fmt.Sprintf("  nothing only in %s, nothing older in %s: every difference is one the swap explains", d.A, d.B))
	}
	return strings.Join(lines, "\n")
}

// listed is ": " and the first maxShown of keys (ItemName's), then how
// many of n more there are; "" when n is 0.
func listed(keys []string, n int) string {
	if n == 0 {
		return ""
	}
	shown := keys[:min(len(keys), maxShown)]
	names := make([]string, len(shown))
	for i, k := range shown {
		names[i] = ItemName(k)
	}
	out := ": " + strings.Join(names, "; ")
	if more := n - len(shown); more > 0 {
		out += fmt.Sprintf("; and %d more", more)
	}
	return out
}

// ItemName prints an item key of Diff's lists as (pk, sk), and what
// follows the key (a differing item's attributes) after it.
func ItemName(k string) string {
	n, rest, _ := strings.Cut(k, ":")
	size, err := strconv.Atoi(n)
	if err != nil || size < 0 || size > len(rest) {
		return k
	}
	pk, sk, tail := rest[:size], rest[size:], ""
	if i := strings.Index(sk, ": "); i >= 0 {
		sk, tail = sk[:i], sk[i:]
	}
	return "(" + pk + ", " + sk + ")" + tail
}

// tableReader is what Compare reads a table with.
type tableReader interface {
	scanner
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

var _ tableReader = (*dynamodb.Client)(nil)

// Why Compare refuses a table (TableError.Err).
var (
	// ErrNoTable: the table does not exist.
	ErrNoTable = errors.New("does not exist")
	// ErrNotViews: the table is not keyed as a version of the views is,
	// (pk, sk), both strings. Compare keys every item by those two, so it
	// would read another table's items (the events table's, keyed
	// aggregateId and version) all as the one empty key.
	ErrNotViews = errors.New("is not a version of the views")
)

// TableError is a table Compare refuses, before reading any item.
type TableError struct {
	Table string
	Err   error  // ErrNoTable or ErrNotViews
	Why   string // for ErrNotViews, how the table is keyed
}

func (e *TableError) Error() string {
	if e.Why == "" {
		return e.Table + " " + e.Err.Error()
	}
	return e.Table + " " + e.Err.Error() + ": " + e.Why
}

// Unwrap returns Err.
func (e *TableError) Unwrap() error { return e.Err }

// checkViewsTable is a *TableError when table does not exist or is not
// keyed (pk, sk), both strings, as a version of the views is.
func checkViewsTable(ctx context.Context, db tableReader, table string) error {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return &TableError{Table: table, Err: ErrNoTable}
	}
	if err != nil {
		return fmt.Errorf("describing %s: %w", table, err)
	}
	kinds := map[string]types.ScalarAttributeType{}
	for _, d := range out.Table.AttributeDefinitions {
		kinds[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	var names, typed []string
	for _, k := range out.Table.KeySchema {
		n := aws.ToString(k.AttributeName)
		names = append(names, n)
		typed = append(typed, n+" "+string(kinds[n]))
	}
	if slices.Equal(typed, []string{"pk S", "sk S"}) {
		return nil
	}
	keyed := strings.Join(names, ", ")
	if slices.Equal(names, []string{"pk", "sk"}) {
		keyed = strings.Join(typed, ", ")
	}
	return &TableError{Table: table, Err: ErrNotViews, Why: "it is keyed (" + keyed + "), a version of the views (pk, sk), both strings"}
}

// Compare reads two versions of a views table in full (consistently) and
// compares their items, all attributes but the stream fences (f_<shard>:
// where each writer got in the stream, not what the view holds). It keeps
// a's keys with a hash of each item's attributes, not the items, and reads
// b against them, so its memory follows a's item count, not both tables'
// bytes; the values of the differing items it lists are read again, and
// listed by the attributes that differ, cut: the diff stays a few KB
// whatever the items' size. A table that does not exist or is not keyed
// as a version of the views is refused (a *TableError) before either is
// read.
func Compare(ctx context.Context, db tableReader, a, b string) (*Diff, error) {
	for _, t := range []string{a, b} {
		if err := checkViewsTable(ctx, db, t); err != nil {
			return nil, err
		}
	}
	type itemA struct {
		hash    [sha256.Size]byte
		version int64
	}
	ha := map[string]itemA{}
	err := scanCanonical(ctx, db, a, func(k, v string, version int64) {
		ha[k] = itemA{sha256.Sum256([]byte(v)), version}
	})
	if err != nil {
		return nil, err
	}
	d := &Diff{A: a, B: b, ItemsA: len(ha)}
	differB := map[string]string{} // b's value of each differing key listed
	err = scanCanonical(ctx, db, b, func(k, v string, version int64) {
		d.ItemsB++
		ia, ok := ha[k]
		switch {
		case !ok:
			d.NOnlyB++
			d.OnlyB = keepFirst(d.OnlyB, k)
		case ia.hash != sha256.Sum256([]byte(v)):
			d.NDiffer++
			if version > ia.version {
				d.NewerB++
			} else {
				d.notNewerB = keepFirst(d.notNewerB, k)
			}
			if kept := keepFirst(d.Differ, k); slices.Contains(kept, k) {
				d.Differ = kept
				differB[k] = v
			}
		}
		delete(ha, k)
	})
	if err != nil {
		return nil, err
	}
	d.NOnlyA = len(ha)
	for k := range ha {
		d.OnlyA = keepFirst(d.OnlyA, k)
	}
	for i, k := range d.Differ {
		va, err := readCanonical(ctx, db, a, k)
		if err != nil {
			return nil, err
		}
		d.Differ[i] = k + ": " + attrDiff(va, differB[k])
	}
	return d, nil
}

// Bounds of a differing item as Diff lists it: an item is up to 400 KB,
// and a diff is read on a terminal.
const (
	maxAttrsListed = 8   // attributes that differ, listed per item
	maxValueShown  = 120 // bytes of each side's value, around where they part
)

// attrDiff is how two items (canonical JSON objects) differ: the
// attributes that differ, as {"name":value,…} ≠ {"name":value,…}, each
// value shown around the first byte where the two part, at most
// maxValueShown bytes of it.
func attrDiff(a, b string) string {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal([]byte(a), &ma) != nil || json.Unmarshal([]byte(b), &mb) != nil {
		return strictjson.Cut(a, maxValueShown) + " ≠ " + strictjson.Cut(b, maxValueShown)
	}
	names := map[string]bool{}
	for k, v := range ma {
		if string(mb[k]) != string(v) {
			names[k] = true
		}
	}
	for k, v := range mb {
		if string(ma[k]) != string(v) {
			names[k] = true
		}
	}
	sorted := slices.Sorted(maps.Keys(names))
	more := ""
	if len(sorted) > maxAttrsListed {
		more = fmt.Sprintf(",… %d more", len(sorted)-maxAttrsListed)
		sorted = sorted[:maxAttrsListed]
	}
	var sa, sb strings.Builder
	for i, k := range sorted {
		if i > 0 {
			sa.WriteByte(',')
			sb.WriteByte(',')
		}
		va, vb := excerpts(string(ma[k]), string(mb[k]))
		name, _ := json.Marshal(k)
		fmt.Fprintf(&sa, "%s:%s", name, va)
		fmt.Fprintf(&sb, "%s:%s", name, vb)
	}
	return "{" + sa.String() + more + "} ≠ {" + sb.String() + more + "}"
}

// excerpts are a and b cut to maxValueShown bytes around the first byte
// where they differ ("absent" for a value one item lacks).
func excerpts(a, b string) (string, string) {
	if a == "" {
		a = "absent"
	}
	if b == "" {
		b = "absent"
	}
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	from := max(p-maxValueShown/3, 0)
	cut := func(s string) string {
		if len(s) <= maxValueShown {
			return s
		}
		start := from
		for start > 0 && !utf8.RuneStart(s[start]) {
			start--
		}
		out := strictjson.Cut(s[start:], maxValueShown)
		if start > 0 {
			out = "…" + out
		}
		return out
	}
	return cut(a), cut(b)
}

// keepFirst adds k to keys, which holds the first maxListed keys in
// order, if it is among them.
func keepFirst(keys []string, k string) []string {
	i, _ := slices.BinarySearch(keys, k)
	if i >= maxListed {
		return keys
	}
	keys = slices.Insert(keys, i, k)
	return keys[:min(len(keys), maxListed)]
}

// scanCanonical calls each with every item's "pk sk" key, its
// attributes as canonical JSON (map keys sorted), fences left out, and its
// version (AttrVersion; 0 without one). The handover item a rebuild writes
// into the version it fills (state.SetHandover: which version the readers
// used before) is bookkeeping, not a view, and is passed over, as replay's
// item counts pass it over.
func scanCanonical(ctx context.Context, db scanner, table string, each func(k, v string, version int64)) error {
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		page, err := db.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("reading %s: %w", table, err)
		}
		for _, it := range page.Items {
			if state.IsHandoverItem(it) {
				continue
			}
			k, v, err := canonical(it)
			if err != nil {
				return fmt.Errorf("%s: %w", table, err)
			}
			var version int64
			if n, ok := it[AttrVersion].(*types.AttributeValueMemberN); ok {
				version, _ = strconv.ParseInt(n.Value, 10, 64)
			}
			each(k, v, version)
		}
		if page.LastEvaluatedKey == nil {
			return nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// readCanonical reads the item of table whose key is k (keyString's) as
// canonical JSON.
func readCanonical(ctx context.Context, db tableReader, table, k string) (string, error) {
	n, rest, _ := strings.Cut(k, ":")
	size, err := strconv.Atoi(n)
	if err != nil || size > len(rest) {
		return "", fmt.Errorf("reading %s: %q is not an item key", table, k)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: rest[:size]}, "sk": &types.AttributeValueMemberS{Value: rest[size:]}}})
	if err != nil {
		return "", fmt.Errorf("reading %s %s: %w", table, k, err)
	}
	_, v, err := canonical(out.Item)
	return v, err
}

func canonical(item map[string]types.AttributeValue) (string, string, error) {
	clean := map[string]types.AttributeValue{}
	for k, v := range item {
		if !strings.HasPrefix(k, fencePrefix) {
			clean[k] = v
		}
	}
	var m map[string]any
	if err := attributevalue.UnmarshalMap(clean, &m); err != nil {
		return "", "", err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", "", err
	}
	return keyString(item), string(b), nil
}
