package main

import (
	"context"
	"time"

	"github.com/tributary-dev/tributary/bench/internal/deployed"
	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// viewsTable is the benchmark deployment's views table.
const viewsTable = deployed.ViewsTable

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
	return deployed.LoadPipeline(path)
}

// deployment is the aggregate function as aggregate.FromEnv builds it
// (bench/internal/deployed), over an in-process DynamoDB and Kinesis
// instead of the SDK's clients: the same routed stores, ledger, set-aside
// sink, metrics (written to io.Discard, so their encoding is counted) and
// logger.
//
// Its twin is a second deployment that invoke hands the same events: its
// store counts the allocations made answering each request, which stops
// the world twice a request, so the twin is not timed. The handler's
// allocations are the twin's less its store's; its CPU time is the timed
// deployment's less its store's.
type deployment struct {
	p     *aggregate.Processor
	db    *memdb.DB
	store *meteredStore // db, with the store's own CPU time counted
	out   *deployed.Putter
	twin  *deployment
}

func deploy(cfg *pipeline.Config) *deployment {
	d := deployOne(cfg, false)
	d.twin = deployOne(cfg, true)
	return d
}

func deployOne(cfg *pipeline.Config, allocs bool) *deployment {
	db := memdb.New(map[string]memdb.Schema{deployed.ViewsTable: memdb.ViewsTable, deployed.QuarantineTable: memdb.QuarantineTable})
	if err := deployed.SettleLayout(context.Background(), db, cfg, time.Now()); err != nil {
		panic(err) // memdb refuses no put
	}
	store := &meteredStore{db: db, allocs: allocs}
	out := &deployed.Putter{}
	p := deployed.New(cfg, store, out, deployed.Function{Name: "aggregate"})
	return &deployment{p: p, db: db, store: store, out: out}
}
