package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Write paths, as feed.path names them.
const (
	perBatch    = "per-batch"
	perInterval = "per-interval"
)

// pipelineOn parses cfgJSON, creates a table on the package's stand-in and
// returns a processor writing to it through views (state.NewViews on db
// when nil), with the output stream it publishes to.
func pipelineOn(t *testing.T, cfgJSON string, views func(cfg *pipeline.Config, table string) *state.Views, opts ...aggregate.Option) (*aggregate.Processor, *outputLog) {
	t.Helper()
	cfg, err := pipeline.Parse([]byte(cfgJSON))
	if err != nil {
		t.Fatal(err)
	}
	table := fmt.Sprintf("%s-%d", cfg.Name, tableSeq.Add(1))
	if err := state.CreateTable(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	if views == nil {
		views = func(cfg *pipeline.Config, table string) *state.Views {
			return state.NewViews(db, table, cfg.Aggregates)
		}
	}
	out := &outputLog{}
	// The shards known, no parent among them, as the deployed function
	// asks Kinesis: its carried flushes write result pages (a test's own
	// WithShardLister, of a reshard, comes after and is the one used).
	base := []aggregate.Option{aggregate.WithLogger(quiet), aggregate.WithShardLister(parentOf{feedShard, feedShard}, "events")}
	return aggregate.New(cfg, views(cfg, table), out, "results", append(base, opts...)...), out
}

// inProcessViews is a views argument of pipelineOn for tests of many
// records: the table in the in-process store (memdb answers these requests
// as moto does; the fault harness checks it against moto).
func inProcessViews(cfg *pipeline.Config, table string) *state.Views {
	return state.NewViews(memdb.New(map[string]memdb.Schema{table: memdb.ViewsTable}), table, cfg.Aggregates)
}

// viewsAt is a views argument of pipelineOn whose processing time is
// clock's, as the processor's (aggregate.WithClock) in tests that tick.
func viewsAt(clock func() time.Time) func(cfg *pipeline.Config, table string) *state.Views {
	return func(cfg *pipeline.Config, table string) *state.Views {
		return state.NewViews(db, table, cfg.Aggregates, state.WithClock(clock))
	}
}

// feed plays one shard's mapping into a processor: records at offsets from
// base, numbered in order, as a plain batch or as invocations of a
// tumbling window whose state it carries.
type feed struct {
	t     *testing.T
	p     *aggregate.Processor
	base  time.Time
	path  string     // how batch delivers: perBatch, or perInterval (an invocation and its flush)
	clock *time.Time // when set, moved to each record's time as it is sent
	seq   int
	state map[string]string // the open interval's window state
	shard string            // the shard the records are on ("": feedShard)
}

func (f *feed) shardID() string {
	if f.shard == "" {
		return feedShard
	}
	return f.shard
}

const feedShard = "shardId-000000000000"

func (f *feed) records(recs ...at) events.KinesisEvent {
	var batch []record
	for _, a := range recs {
		f.seq++
		when := f.base.Add(time.Duration(a.seconds * float64(time.Second)))
		if f.clock != nil {
			*f.clock = when
		}
		batch = append(batch, record{shard: f.shardID(), seq: f.seq, env: stream.Envelope{ID: fmt.Sprint(f.seq), Type: "v", Key: a.key,
			OccurredAt: when, SentAt: when, ReceivedAt: when, Data: json.RawMessage(fmt.Sprintf(`{"v":%d}`, a.value))}})
	}
	return kinesisEvent(batch)
}

// batch delivers recs as one batch of the feed's path.
func (f *feed) batch(recs ...at) {
	f.t.Helper()
	if f.path == perInterval {
		f.carry(recs...)
		f.flush()
		return
	}
	resp, err := f.p.HandleBatch(context.Background(), f.records(recs...))
	if err != nil || len(resp.BatchItemFailures) > 0 {
		f.t.Fatalf("batch: %v %v", resp, err)
	}
}

// carry delivers recs as an invocation of the open interval.
func (f *feed) carry(recs ...at) {
	f.t.Helper()
	ev := events.KinesisTimeWindowEvent{KinesisEvent: f.records(recs...), TimeWindowProperties: events.TimeWindowProperties{ShardID: f.shardID(), State: f.state}}
	resp, err := f.p.HandleInterval(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) > 0 {
		f.t.Fatalf("interval batch: %v %v", resp, err)
	}
	f.state = resp.State
}

// tick runs the ticker at the offset at from base, moving the feed's
// clock there.
func (f *feed) tick(at time.Duration) {
	f.t.Helper()
	*f.clock = f.base.Add(at)
	if _, err := f.p.Tick(context.Background(), *f.clock); err != nil {
		f.t.Fatal(err)
	}
}

// flush is the open interval's final invocation.
func (f *feed) flush() {
	f.t.Helper()
	ev := events.KinesisTimeWindowEvent{TimeWindowProperties: events.TimeWindowProperties{ShardID: f.shardID(), State: f.state, IsFinalInvokeForWindow: true}}
	if _, err := f.p.HandleInterval(context.Background(), ev); err != nil {
		f.t.Fatalf("interval flush: %v", err)
	}
	f.state = nil
}
