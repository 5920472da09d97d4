package deployed

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
)

// Table and stream names of a benchmark's deployment.
const (
	ViewsTable      = "views"
	QuarantineTable = "quarantine"
	ResultsStream   = "window-results"
)

// Store is what the deployed functions call on DynamoDB: the views store's,
// the ledger's and the set-aside sink's requests. *memdb.DB has them.
type Store = memdb.Client

// Function says how one function is built: its name (the metrics'
// Function dimension: "aggregate" or "ticker"), where its log lines
// (stderr) and metrics (stdout) go, and its processing-time clock
// (nil: time.Now).
type Function struct {
	Name         string
	Log, Metrics io.Writer
	Now          func() time.Time
	// MemoryMB is the function's memory, which sizes its dedupe ledger's
	// cache as Lambda's AWS_LAMBDA_FUNCTION_MEMORY_SIZE does (0: the
	// ledger's default outside Lambda).
	MemoryMB int
}

// New returns the processor function f runs for cfg, over db and out, as
// aggregate.FromEnv builds it: the ticker ("ticker") gets no set-aside
// sink (it reads no records), as FromEnv gives it none.
func New(cfg *pipeline.Config, db Store, out aggregate.RecordPutter, f Function) *aggregate.Processor {
	logw, metw := f.Log, f.Metrics
	if logw == nil {
		logw = io.Discard
	}
	if metw == nil {
		metw = io.Discard
	}
	table := aggregate.FixedViewsTable(ViewsTable)
	log := slog.New(slog.NewJSONHandler(logw, nil))
	m := metrics.New(metw, f.Name, metrics.WithDimension(aggregate.MetricDimensionPipeline, cfg.Name))
	if f.Now != nil {
		m = m.WithClock(f.Now)
	}
	views := state.NewViews(aggregate.RoutedStore(db, table), table.Current(context.Background()), cfg.Aggregates, aggregate.ViewsOptions(cfg)...)
	opts := []aggregate.Option{
		aggregate.WithMetrics(m),
		aggregate.WithLogger(log),
	}
	var ledgerOpts []dedupe.Option
	if f.MemoryMB > 0 {
		ledgerOpts = append(ledgerOpts, dedupe.WithCacheEntries(dedupe.CacheEntriesFor(f.MemoryMB)))
	}
	opts = append(opts, aggregate.WithDedupe(aggregate.NewLedger(aggregate.RoutedLedgerStore(db, table), ViewsTable, cfg, ledgerOpts...)))
	if f.Name != "ticker" {
		opts = append(opts, aggregate.WithSetAside(setaside.New(db, QuarantineTable, setaside.WithFunction(f.Name), setaside.WithMetrics(m), setaside.WithLogger(log))))
	}
	if f.Now != nil {
		opts = append(opts, aggregate.WithClock(f.Now))
	}
	// The deployed functions find their table through the views parameter,
	// so they ask a replay's handover before publishing (one read of the
	// table's handover item every few seconds; none is there).
	opts = append(opts, aggregate.WithHandover(db, table.Current))
	// As FromEnv with the events stream named: a new shard's first flush
	// asks for its parents (none here), and carried flushes write their
	// closing windows in result pages.
	opts = append(opts, aggregate.WithShardLister(noParents{}, "events"))
	var streamName string
	if out != nil {
		streamName = ResultsStream
	}
	return aggregate.New(cfg, views, out, streamName, opts...)
}

// SettleLayout writes cfg's dedupe layout marker into db's views table as
// if its dedupeLedger had been in place since three hours before start:
// the month a benchmark prices is the steady state, not the five minutes
// after a deploy in which each batch reads the other layout's heads again
// (dedupe.WithLayoutMarker). Not counted: it is the setup, not the run.
func SettleLayout(ctx context.Context, db Store, cfg *pipeline.Config, start time.Time) error {
	l := aggregate.NewLedger(db, ViewsTable, cfg)
	if l == nil {
		return nil // no dedupe
	}
	return l.SeedLayout(ctx, start.Add(-3*time.Hour))
}

// Putter is an in-process Kinesis PutRecords: it accepts every record and
// answers with a sequence number for each, as Kinesis does. It counts the
// records and their bytes (data and partition key, what Kinesis bills as
// PUT payload).
type Putter struct {
	mu      sync.Mutex
	Records int
	Bytes   int
	// Units is the PUT payload units: one per 25 KB of a record, rounded up.
	Units int
}

var _ aggregate.RecordPutter = (*Putter)(nil)

// PutRecords accepts every record.
func (k *Putter) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := &kinesis.PutRecordsOutput{Records: make([]ktypes.PutRecordsResultEntry, len(in.Records))}
	for i := range in.Records {
		k.Records++
		n := len(in.Records[i].Data)
		if in.Records[i].PartitionKey != nil {
			n += len(*in.Records[i].PartitionKey)
		}
		k.Bytes += n
		k.Units += (n + 25*1024 - 1) / (25 * 1024)
		seq := fmt.Sprintf("4960000000000000000000000000000000000000000%013d", k.Records)
		shard := "shardId-000000000000"
		out.Records[i] = ktypes.PutRecordsResultEntry{SequenceNumber: &seq, ShardId: &shard}
	}
	zero := int32(0)
	out.FailedRecordCount = &zero
	return out, nil
}

// LoadPipeline reads a pipeline file and checks the aggregate function
// supports it; "" or "deployed" is the stack's own pipelines/pageviews.json.
func LoadPipeline(path string) (*pipeline.Config, error) {
	if path == "" || path == "deployed" {
		root, err := standin.RepoRoot()
		if err != nil {
			return nil, err
		}
		path = filepath.Join(root, "pipelines", "pageviews.json")
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := pipeline.Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, aggregate.CheckSupported(cfg)
}

// noParents is a ListShards of a stream none of whose shards was split or
// merged: it names no shard, so none has parents.
type noParents struct{}

func (noParents) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return &kinesis.ListShardsOutput{}, nil
}
