package results

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// itemReader is what the reader needs of DynamoDB: package state's reads
// (Query for a key's windows, GetItem for its session and sliding state).
type itemReader interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

var _ itemReader = (*dynamodb.Client)(nil)

// ErrReadOnly is what a write through the reader's store returns: reading
// results never changes them.
var ErrReadOnly = errors.New("results: the reader does not write")

// readOnly gives package state the store it asks for, with writes refused.
type readOnly struct{ itemReader }

func (readOnly) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, ErrReadOnly
}

func (readOnly) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, ErrReadOnly
}

// Reader reads one pipeline's windows from its views table.
type Reader struct {
	cfg   *pipeline.Config
	table string
	proc  *aggregate.Processor
}

// NewReader returns a reader of cfg's windows in table. cfg must be the
// configuration the aggregate function runs (its aggregates say how the
// stored partial results decode).
func NewReader(cfg *pipeline.Config, db itemReader, table string) *Reader {
	views := state.NewViews(readOnly{db}, table, cfg.Aggregates)
	return &Reader{cfg: cfg, table: table, proc: aggregate.New(cfg, views, nil, "")}
}

// Table is the views table the reader reads.
func (r *Reader) Table() string { return r.table }

// Kinds lists the pipeline's window kinds (tumbling:1m0s, session:30s, ...)
// in declaration order.
func (r *Reader) Kinds() []string { return Kinds(r.cfg) }

// Kinds lists cfg's window kinds (tumbling:1m0s, session:30s, ...) in
// declaration order.
func Kinds(cfg *pipeline.Config) []string {
	out := make([]string, len(cfg.Windows))
	for i, w := range cfg.Windows {
		out[i] = w.ID()
	}
	return out
}

// Kind resolves what a person names one of cfg's window kinds by: its id
// (tumbling:1m0s, or with its durations as a pipeline file writes them:
// tumbling:1m, 60s), or its kind alone (tumbling) when the pipeline has one
// window of that kind. The error lists the pipeline's kinds.
func Kind(cfg *pipeline.Config, name string) (string, error) {
	var matches []string
	canonical := canonicalID(name)
	for _, w := range cfg.Windows {
		id := w.ID()
		if id == canonical {
			return id, nil
		}
		if w.Kind.String() == name {
			matches = append(matches, id)
		}
	}
	if len(matches) == 1 {
		return matches[0], nil
	}
	if len(matches) > 1 {
		return "", fmt.Errorf("%q: pipeline %s has %d %s windows, name one: %s", name, cfg.Name, len(matches), name, strings.Join(matches, ", "))
	}
	return "", fmt.Errorf("%s: pipeline %s has no such window; its windows: %s", strictjson.QuoteCut(name, maxNameEcho), cfg.Name, strings.Join(Kinds(cfg), ", "))
}

// canonicalID writes the durations of a window id as WindowSpec.ID does
// (1m as 1m0s, 60s as 1m0s), or returns name as it is when a part after
// the kind is not a duration.
func canonicalID(name string) string {
	kind, rest, ok := strings.Cut(name, ":")
	if !ok || len(name) > maxNameEcho {
		return name
	}
	var b strings.Builder
	b.WriteString(kind)
	for _, part := range strings.Split(rest, ":") {
		b.WriteByte(':')
		for i, d := range strings.Split(part, "+") {
			dur, err := time.ParseDuration(d)
			if err != nil {
				return name
			}
			if i > 0 {
				b.WriteByte('+')
			}
			b.WriteString(dur.String())
		}
	}
	return b.String()
}

// maxNameEcho bounds how much of a name Kind's error repeats: a window id
// is a few dozen bytes.
const maxNameEcho = 64

// Windows returns the first limit of key's windows of the given kinds
// that start in [from, to), ordered by kind (as given), then start, then
// end: final windows as stored (revision 1, more after corrections), open
// ones with their running value (revision 0); and whether there are more.
// It reads no further than it shows: at most limit+1 window items in all,
// besides retracted sessions it skips (and the session and sliding state of
// the kinds it reaches), so a key with a year of windows costs what the
// limit does, not what the key holds.
func (r *Reader) Windows(ctx context.Context, key string, kinds []string, from, to time.Time, limit int) ([]state.View, bool, error) {
	if limit < 0 {
		return nil, false, fmt.Errorf("reading windows of key %q: limit %d, want 0 or more", key, limit)
	}
	var views []state.View
	for _, kind := range kinds {
		// Once the limit is reached, the next kind is read for one item
		// only: whether it has any is whether there are more.
		vs, more, err := r.proc.WindowsBounded(ctx, key, kind, from, to, limit-len(views))
		if err != nil {
			return nil, false, fmt.Errorf("reading %s windows of key %q from %s: %w", kind, key, r.table, err)
		}
		views = append(views, vs...)
		if more {
			return views, true, nil
		}
	}
	return views, false, nil
}
