package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
)

// Table and stream names of the benchmark's deployment.
const (
	viewsTable      = "views"
	quarantineTable = "quarantine"
	resultsStream   = "window-results"
)

// benchPipeline is the pipeline of the headline figures: a count per key
// per event-time minute, with producer-duplicate suppression on (the
// default horizon) — the windowed aggregation every stream processor
// does, so the Benthos peer does the same work. The deployed pipeline
// (pipelines/pageviews.json: three window kinds, six aggregates) is measured
// too, on its own lines.
const benchPipeline = `{"name":"throughput","eventTypes":["page_view"],"key":"key","windows":[{"kind":"tumbling","size":"1m"}],
  "aggregates":["count"],"outOfOrderness":"5s","partitionKeyIsGroupingKey":true}`

// loadPipeline returns the pipeline named: "bench" (benchPipeline),
// "deployed" (pipelines/pageviews.json, the one the stack deploys) or a file.
func loadPipeline(path string) (*pipeline.Config, error) {
	if path == "bench" {
		return pipeline.Parse([]byte(benchPipeline))
	}
	if path == "deployed" {
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

// deployment is the aggregate function as aggregate.FromEnv builds it, over
// an in-process DynamoDB and Kinesis instead of the SDK's clients: the same
// routed stores, ledger, set-aside sink, metrics (written to io.Discard, so
// their encoding is counted) and logger.
type deployment struct {
	p   *aggregate.Processor
	db  *memdb.DB
	out *putter
}

func deploy(cfg *pipeline.Config) *deployment {
	db := memdb.New(map[string]memdb.Schema{viewsTable: memdb.ViewsTable, quarantineTable: memdb.QuarantineTable})
	table := aggregate.FixedViewsTable(viewsTable)
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	m := metrics.New(io.Discard, "aggregate")
	views := state.NewViews(aggregate.RoutedStore(db, table), table.Current(context.Background()), cfg.Aggregates, state.WithRetention(aggregate.Retention))
	out := &putter{}
	sink := setaside.New(db, quarantineTable, setaside.WithFunction("aggregate"), setaside.WithMetrics(m), setaside.WithLogger(log))
	p := aggregate.New(cfg, views, out, resultsStream,
		aggregate.WithMetrics(m),
		aggregate.WithLogger(log),
		aggregate.WithDedupe(aggregate.NewLedger(aggregate.RoutedLedgerStore(db, table), viewsTable, cfg)),
		aggregate.WithSetAside(sink))
	return &deployment{p: p, db: db, out: out}
}

// putter is an in-process Kinesis PutRecords: it accepts every record and
// answers with a sequence number for each, as Kinesis does.
type putter struct {
	mu      sync.Mutex
	records int
}

var _ aggregate.RecordPutter = (*putter)(nil)

func (k *putter) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := &kinesis.PutRecordsOutput{Records: make([]ktypes.PutRecordsResultEntry, len(in.Records))}
	for i := range in.Records {
		k.records++
		seq := fmt.Sprintf("4960000000000000000000000000000000000000000%013d", k.records)
		shard := "shardId-000000000000"
		out.Records[i] = ktypes.PutRecordsResultEntry{SequenceNumber: &seq, ShardId: &shard}
	}
	zero := int32(0)
	out.FailedRecordCount = &zero
	return out, nil
}
