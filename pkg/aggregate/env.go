package aggregate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/envvar"
	"github.com/tributary-dev/tributary/pkg/backlog"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Environment variables the aggregate and ticker functions read.
const (
	EnvViewsTable = "VIEWS_TABLE_NAME"
	// EnvViewsParameter, when set, names the SSM String parameter holding
	// the current views table (the "current views" registry a replay
	// swaps); it takes precedence over EnvViewsTable.
	EnvViewsParameter = "VIEWS_PARAMETER_NAME"
	// EnvViewsRefresh is how many seconds a resolved parameter value is
	// used before it is read again (default 30, at most 3600).
	EnvViewsRefresh = "VIEWS_REFRESH_SECONDS"
	EnvOutputStream = "OUTPUT_STREAM_NAME" // optional
	// EnvEventsStream names the stream the aggregate function reads: the
	// ticker asks it whether a shard that looks idle still holds records
	// the function has not processed (WithBacklog), and the aggregate
	// function, at a new shard's first flush, for the shard's parents,
	// whose carries it takes over (WithShardLister). Optional: without it
	// the ticker advances idle shards by the clock alone, and a pipeline
	// whose flushes keep carries must not be resharded.
	EnvEventsStream = backlog.EnvStream
	// EnvQuarantineTable names the table records that can never be
	// applied are set aside in (package setaside).
	EnvQuarantineTable = "QUARANTINE_TABLE_NAME"
)

// DefaultViewsRefresh is how long a warm instance keeps the views table it
// read from the parameter before reading it again.
const DefaultViewsRefresh = 30 * time.Second

// MaxViewsRefresh bounds EnvViewsRefresh: a replay's swap reaches every
// warm instance within it (cmd/replay follows the old table that long), so
// a longer one would leave instances writing to the old table for hours.
const MaxViewsRefresh = time.Hour

// MetricDimensionPipeline is the EMF dimension naming the pipeline: the
// aggregate and ticker functions' metrics carry the dimension set
// ["Function", "Pipeline"].
const MetricDimensionPipeline = metrics.PipelineDimension

// FromEnv builds the processor a function runs: the pipeline from
// PIPELINE_CONFIG, the views table (VIEWS_PARAMETER_NAME, else
// VIEWS_TABLE_NAME), the optional output stream. Errors name the variable
// (and, for the config, the field).
func FromEnv(awsCfg aws.Config, lookup func(string) (string, bool), function string, stdout, stderr io.Writer) (*Processor, error) {
	cfg, err := pipeline.FromEnv(lookup)
	if err != nil {
		return nil, err
	}
	if err := CheckSupported(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", pipeline.EnvVar, err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	table, err := ViewsTableFromEnv(context.Background(), awsCfg, lookup, log)
	if err != nil {
		return nil, err
	}
	streamName, _ := lookup(EnvOutputStream)
	var out RecordPutter
	if streamName != "" {
		if err := envvar.Check(streamName, envvar.Stream); err != nil {
			return nil, fmt.Errorf("environment variable %s: %w", EnvOutputStream, err)
		}
		out = kinesis.NewFromConfig(awsCfg)
	}
	var opts []Option
	events, err := backlog.StreamFromEnv(lookup)
	if err != nil {
		return nil, err
	}
	if events != "" {
		kin := kinesis.NewFromConfig(awsCfg)
		opts = append(opts, WithBacklog(backlog.New(kin, events)), WithShardLister(kin, events))
	}
	quarantine, _ := lookup(EnvQuarantineTable) // the ticker reads no records
	if quarantine != "" {
		if err := envvar.Check(quarantine, envvar.Table); err != nil {
			return nil, fmt.Errorf("environment variable %s: %w", EnvQuarantineTable, err)
		}
	}
	client := dynamodb.NewFromConfig(awsCfg)
	db := RoutedStore(client, table)
	current := table.Current(context.Background())
	views := state.NewViews(db, current, cfg.Aggregates, ViewsOptions(cfg)...)
	// Per-pipeline series next to the function-wide ones: several
	// functions run this binary, one per pipeline.
	m := metrics.New(stdout, function, metrics.WithDimension(MetricDimensionPipeline, cfg.Name))
	opts = append(opts,
		WithMetrics(m),
		WithLogger(log),
		WithDedupe(NewLedger(RoutedLedgerStore(client, table), current, cfg)),
		WithSetAside(newSink(client, quarantine, setAsideFunction(lookup, function, cfg.Name), m, log)))
	if table.parameter != "" { // a replay can move the readers to another version
		opts = append(opts, WithHandover(client, table.Current))
	}
	return New(cfg, views, out, streamName, opts...), nil
}

// ViewsTable is the name of the views table a function uses: fixed, or the
// value of an SSM parameter read again at most every refresh interval, so a
// replay's swap to a new version reaches warm instances within it. Safe for
// concurrent use.
type ViewsTable struct {
	ssm       ParameterReader
	parameter string // "" for a fixed table
	refresh   time.Duration
	now       func() time.Time
	log       *slog.Logger

	mu    sync.Mutex
	table string
	name  *string   // table, for requests (currentName)
	next  time.Time // when to read the parameter again
}

// FixedViewsTable is a views table that never changes.
func FixedViewsTable(table string) *ViewsTable { return &ViewsTable{table: table} }

// NewViewsTable resolves the views table from the SSM parameter named
// parameter, re-reading it at most every refresh (DefaultViewsRefresh if
// 0); now is the clock (nil: time.Now), log receives refresh failures (nil:
// discarded). Resolve it once before use.
func NewViewsTable(client ParameterReader, parameter string, refresh time.Duration, now func() time.Time, log *slog.Logger) *ViewsTable {
	if refresh <= 0 {
		refresh = DefaultViewsRefresh
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ViewsTable{ssm: client, parameter: parameter, refresh: refresh, now: now, log: log}
}

// ViewsTableFromEnv reads VIEWS_PARAMETER_NAME (resolving it now, so a
// missing or empty parameter fails at init) or else VIEWS_TABLE_NAME, and
// VIEWS_REFRESH_SECONDS. Errors name the variable.
func ViewsTableFromEnv(ctx context.Context, awsCfg aws.Config, lookup func(string) (string, bool), log *slog.Logger) (*ViewsTable, error) {
	param, _ := lookup(EnvViewsParameter)
	if param == "" {
		if table, _ := lookup(EnvViewsTable); table == "" {
			return nil, fmt.Errorf("environment variable %s (or %s) is not set (the DynamoDB table window results are kept in)", EnvViewsTable, EnvViewsParameter)
		}
		table, err := envvar.Name(lookup, EnvViewsTable, "the DynamoDB table window results are kept in", envvar.Table)
		if err != nil {
			return nil, err
		}
		return FixedViewsTable(table), nil
	}
	refresh, err := ViewsRefreshFromEnv(lookup)
	if err != nil {
		return nil, err
	}
	vt := NewViewsTable(NewSSMParameters(awsCfg), param, refresh, nil, log)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := vt.Resolve(ctx); err != nil {
		return nil, fmt.Errorf("environment variable %s: %w", EnvViewsParameter, err)
	}
	return vt, nil
}

// ViewsRefreshFromEnv is how often the functions re-read the views
// parameter: VIEWS_REFRESH_SECONDS, or DefaultViewsRefresh when it is
// unset or empty. ViewsTableFromEnv reads it so, and an operator tool that
// swaps the parameter reads it the same way to know how long the functions
// may go on writing to the table it named before. The error names the
// variable.
func ViewsRefreshFromEnv(lookup func(string) (string, bool)) (time.Duration, error) {
	s, ok := lookup(EnvViewsRefresh)
	if !ok || s == "" {
		return DefaultViewsRefresh, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > int(MaxViewsRefresh/time.Second) {
		return 0, fmt.Errorf("environment variable %s: %q is not a whole number of seconds from 1 to %d (default %d)",
			EnvViewsRefresh, strictjson.Cut(s, 64), int(MaxViewsRefresh/time.Second), int(DefaultViewsRefresh/time.Second))
	}
	return time.Duration(n) * time.Second, nil
}

// ErrNoViewsTable is returned when the views parameter holds no table name.
var ErrNoViewsTable = errors.New("the parameter holds no views table name")

// Resolve reads the parameter now (a fixed table: does nothing).
func (v *ViewsTable) Resolve(ctx context.Context) error {
	if v.parameter == "" {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.resolveLocked(ctx)
}

func (v *ViewsTable) resolveLocked(ctx context.Context) error {
	table, err := v.ssm.Parameter(ctx, v.parameter)
	if err != nil {
		return fmt.Errorf("reading SSM parameter %s: %w", v.parameter, err)
	}
	if table == "" {
		return fmt.Errorf("SSM parameter %s: %w", v.parameter, ErrNoViewsTable)
	}
	if v.table != "" && v.table != table {
		v.log.Info("views table changed", "parameter", v.parameter, "from", v.table, "to", table)
	}
	v.table = table
	v.next = v.now().Add(v.refresh)
	return nil
}

// Current returns the views table, reading the parameter again when the
// refresh interval has passed; concurrent callers wait for that read, so
// the writes after it all go to the table it returned. A failed read keeps
// the table last read (and is logged); the next read is tried an interval
// later.
func (v *ViewsTable) Current(ctx context.Context) string { return *v.currentName(ctx) }

// currentName is Current as a request's TableName: one pointer per name,
// shared by the requests (which only read it), not one per request.
func (v *ViewsTable) currentName(ctx context.Context) *string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.parameter != "" && !v.now().Before(v.next) {
		if err := v.resolveLocked(ctx); err != nil {
			v.next = v.now().Add(v.refresh)
			v.log.Warn("refreshing the views table failed: keeping the current one", "parameter", v.parameter, "table", v.table, "error", err.Error())
		}
	}
	if v.name == nil || *v.name != v.table {
		v.name = aws.String(v.table)
	}
	return v.name
}

// itemStore is what package state's Views calls.
type itemStore interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

var _ itemStore = (*dynamodb.Client)(nil)

// RoutedStore returns db with every request sent to table's current name,
// whatever table the caller named: a state.Views built over it follows
// the views table across a swap. The fences live in the items, so a
// request that races a swap is as safe as any retry.
func RoutedStore(db itemStore, table *ViewsTable) itemStore {
	return &routedStore{db: db, table: table}
}

type routedStore struct {
	db    itemStore
	table *ViewsTable
}

// A request that names the current table already is passed on as it is;
// one that names another is copied with the current name (requests are
// the caller's, never changed).

func (r *routedStore) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if cur := r.table.currentName(ctx); !sameName(in.TableName, cur) {
		c := *in
		c.TableName = cur
		in = &c
	}
	return r.db.UpdateItem(ctx, in, opts...)
}

func (r *routedStore) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if cur := r.table.currentName(ctx); !sameName(in.TableName, cur) {
		c := *in
		c.TableName = cur
		in = &c
	}
	return r.db.GetItem(ctx, in, opts...)
}

// sameName reports whether a request's table name is cur.
func sameName(name, cur *string) bool { return name != nil && *name == *cur }

// RoutedLedgerStore is RoutedStore for the dedupe ledger's requests.
func RoutedLedgerStore(db ledgerStore, table *ViewsTable) ledgerStore {
	return &routedLedger{db: db, table: table}
}

type routedLedger struct {
	db    ledgerStore
	table *ViewsTable
}

func (r *routedLedger) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	cur := r.table.Current(ctx)
	c := *in
	c.RequestItems = make(map[string]types.KeysAndAttributes, len(in.RequestItems))
	for _, ka := range in.RequestItems {
		c.RequestItems[cur] = ka
	}
	out, err := r.db.BatchGetItem(ctx, &c, opts...)
	if err != nil || out == nil {
		return out, err
	}
	// Hand the answer back under the name the caller used.
	for name := range in.RequestItems {
		if items, ok := out.Responses[cur]; ok && name != cur {
			out.Responses = map[string][]map[string]types.AttributeValue{name: items}
		}
		if ka, ok := out.UnprocessedKeys[cur]; ok && name != cur {
			out.UnprocessedKeys = map[string]types.KeysAndAttributes{name: ka}
		}
	}
	return out, nil
}

func (r *routedLedger) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if cur := r.table.currentName(ctx); !sameName(in.TableName, cur) {
		c := *in
		c.TableName = cur
		in = &c
	}
	return r.db.PutItem(ctx, in, opts...)
}

func (r *routedStore) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c := *in
	c.TableName = r.table.currentName(ctx)
	return r.db.Query(ctx, &c, opts...)
}

func (r *routedStore) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if cur := r.table.currentName(ctx); !sameName(in.TableName, cur) {
		c := *in
		c.TableName = cur
		in = &c
	}
	return r.db.DeleteItem(ctx, in, opts...)
}

// setAsideFunction is what the items a function sets aside name it by:
// its Lambda function's name (AWS_LAMBDA_FUNCTION_NAME), as every other
// consumer's items do, which is the log group /aws/lambda/<name> its
// "record set aside" line is in; outside Lambda, function[pipeline] (one
// binary runs each pipeline's function).
func setAsideFunction(lookup func(string) (string, bool), function, pipeline string) string {
	if name, ok := lookup("AWS_LAMBDA_FUNCTION_NAME"); ok && name != "" {
		return name
	}
	return function + "[" + pipeline + "]"
}

// newSink is the set-aside sink of table, or nil when there is none (the
// ticker, which reads no records).
func newSink(db *dynamodb.Client, table, function string, m *metrics.Logger, log *slog.Logger) *setaside.Sink {
	if table == "" {
		return nil
	}
	return setaside.New(db, table, setaside.WithFunction(function), setaside.WithMetrics(m), setaside.WithLogger(log))
}
