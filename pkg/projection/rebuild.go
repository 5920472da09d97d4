package projection

import (
	"context"
	"crypto/sha256"
	"encoding/json"
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
	res, err := r.Run(ctx, opts, func(table string) (replay.BatchHandler, error) {
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
func CatchUp(p *Projector) func(table string) (replay.BatchHandler, error) {
	return func(table string) (replay.BatchHandler, error) { return p.For(table), nil }
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
	// side, cut around where they part (attrDiff).
	OnlyA, OnlyB, Differ []string
	// Counts of each (the lists may be cut).
	NOnlyA, NOnlyB, NDiffer int
}

const maxListed = 10

// Equal reports whether the two versions hold the same items.
func (d *Diff) Equal() bool { return d.NOnlyA == 0 && d.NOnlyB == 0 && d.NDiffer == 0 }

func (d *Diff) String() string {
	if d.Equal() {
		return fmt.Sprintf("%s and %s hold the same %d items", d.A, d.B, d.ItemsA)
	}
	return fmt.Sprintf("%s (%d items) and %s (%d items) differ: %d only in %s %v, %d only in %s %v, %d differ %v",
		d.A, d.ItemsA, d.B, d.ItemsB, d.NOnlyA, d.A, d.OnlyA, d.NOnlyB, d.B, d.OnlyB, d.NDiffer, d.Differ)
}

// tableReader is what Compare reads a table with.
type tableReader interface {
	scanner
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Compare reads two versions of a views table in full (consistently) and
// compares their items, all attributes but the stream fences (f_<shard>:
// where each writer got in the stream, not what the view holds). It keeps
// a's keys with a hash of each item's attributes, not the items, and reads
// b against them, so its memory follows a's item count, not both tables'
// bytes; the values of the differing items it lists are read again, and
// listed by the attributes that differ, cut: the diff stays a few KB
// whatever the items' size.
func Compare(ctx context.Context, db tableReader, a, b string) (*Diff, error) {
	ha := map[string][sha256.Size]byte{}
	err := scanCanonical(ctx, db, a, func(k, v string) {
		ha[k] = sha256.Sum256([]byte(v))
	})
	if err != nil {
		return nil, err
	}
	d := &Diff{A: a, B: b, ItemsA: len(ha)}
	differB := map[string]string{} // b's value of each differing key listed
	err = scanCanonical(ctx, db, b, func(k, v string) {
		d.ItemsB++
		h, ok := ha[k]
		switch {
		case !ok:
			d.NOnlyB++
			d.OnlyB = keepFirst(d.OnlyB, k)
		case h != sha256.Sum256([]byte(v)):
			d.NDiffer++
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

// scanCanonical calls each with every item's "pk sk" key and its
// attributes as canonical JSON (map keys sorted), fences left out.
func scanCanonical(ctx context.Context, db scanner, table string, each func(k, v string)) error {
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		page, err := db.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("reading %s: %w", table, err)
		}
		for _, it := range page.Items {
			k, v, err := canonical(it)
			if err != nil {
				return fmt.Errorf("%s: %w", table, err)
			}
			each(k, v)
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
