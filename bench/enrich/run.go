package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/enrich"
)

// config is one run of the driver.
type config struct {
	events, keys, batch int
	verbose             bool
}

func (c config) logf(w io.Writer, format string, args ...any) {
	if c.verbose {
		fmt.Fprintf(w, "enrich: "+format+"\n", args...)
	}
}

// result is what one mode measured.
type result struct {
	mode              string
	activity, batches int
	elapsed           time.Duration
	// cpu is this process's CPU time over the run: the handler, the SDK
	// and the stand-in's in-process proxy (moto itself is another
	// process), so an upper bound on the handler's own CPU.
	cpu                   time.Duration
	readRequests, updates int
	stats                 enrich.Stats
}

func (r result) per1k(n int64) float64 { return float64(n) * 1000 / float64(max(r.stats.Enriched, 1)) }

func (r result) line(cfg config) string {
	return fmt.Sprintf("BENCH enrich mode=%s events=%d keys=%d enriched=%d batches=%d enriched_per_s=%.0f read_requests_per_1k=%.1f items_read_per_1k=%.1f read_round_trips_per_batch=%.2f extra_read_round_trips=%d update_requests_per_1k=%.1f cache_hits=%d elapsed_ms=%d cpu_ms_per_1k_upper_bound=%.1f",
		r.mode, cfg.events, cfg.keys, r.stats.Enriched, r.batches, float64(r.stats.Enriched)/r.elapsed.Seconds(),
		r.per1k(int64(r.readRequests)), r.per1k(r.stats.ItemsRead), float64(r.stats.ReadRoundTrips)/float64(r.batches),
		r.stats.ExtraReadRoundTrips, r.per1k(int64(r.updates)), r.stats.CacheHits, r.elapsed.Milliseconds(),
		float64(r.cpu.Microseconds())/1000*1000/float64(max(r.stats.Enriched, 1)))
}

func run(ctx context.Context, cfg config, out, log io.Writer) error {
	srv, counter, err := standin.StartCounting(ctx, standin.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer srv.Stop()
	awsCfg, err := standin.Config(ctx, srv.Endpoint())
	if err != nil {
		return err
	}
	db, kin := dynamodb.NewFromConfig(awsCfg), kinesis.NewFromConfig(awsCfg)
	recs, activity := workload(cfg)
	cfg.logf(log, "%d records, %d of them activity, over %d keys", len(recs), activity, cfg.keys)

	var results []result
	for _, mode := range []string{"warm", "cold"} {
		table, stream := "join-"+mode, "enriched-"+mode
		if err := setup(ctx, db, kin, table, stream); err != nil {
			return err
		}
		counter.Reset()
		r := result{mode: mode, activity: activity}
		var total enrich.Stats
		h := enrich.New(db, kin, table, stream)
		start, cpuStart := time.Now(), processCPU()
		for i := 0; i < len(recs); i += cfg.batch {
			if mode == "cold" {
				h = enrich.New(db, kin, table, stream)
			}
			before := h.Stats()
			resp, err := h.Handle(ctx, events.KinesisEvent{Records: recs[i:min(i+cfg.batch, len(recs))]})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				return fmt.Errorf("%s: batch at record %d: failures %v, %v", mode, i, resp.BatchItemFailures, err)
			}
			total = add(total, h.Stats(), before)
			r.batches++
		}
		r.elapsed, r.cpu = time.Since(start), processCPU()-cpuStart
		r.stats = total
		c := counter.Snapshot()
		r.readRequests = c.Operation("BatchGetItem").Requests
		r.updates = c.Operation("UpdateItem").Requests
		if int(total.Enriched) != activity {
			return fmt.Errorf("%s: enriched %d events, want %d", mode, total.Enriched, activity)
		}
		cfg.logf(log, "%s: %d batches in %s", mode, r.batches, r.elapsed)
		results = append(results, r)
	}
	warm, cold := results[0], results[1]
	for _, r := range results {
		fmt.Fprintln(out, r.line(cfg))
	}
	fmt.Fprintf(out, "BENCH enrich_ratio cold_per_warm_read_requests=%.2f cold_per_warm_items_read=%.2f\n",
		float64(cold.readRequests)/float64(max(warm.readRequests, 1)), float64(cold.stats.ItemsRead)/float64(max(warm.stats.ItemsRead, 1)))
	return nil
}

// add is total plus the counters one batch added (now − before).
func add(total, now, before enrich.Stats) enrich.Stats {
	total.Enriched += now.Enriched - before.Enriched
	total.ItemsRead += now.ItemsRead - before.ItemsRead
	total.ReadRoundTrips += now.ReadRoundTrips - before.ReadRoundTrips
	total.ExtraReadRoundTrips += now.ExtraReadRoundTrips - before.ExtraReadRoundTrips
	total.CacheHits += now.CacheHits - before.CacheHits
	total.ChangesApplied += now.ChangesApplied - before.ChangesApplied
	return total
}

func setup(ctx context.Context, db *dynamodb.Client, kin *kinesis.Client, table, stream string) error {
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(table), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}}}); err != nil {
		return fmt.Errorf("creating join table %s: %w", table, err)
	}
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(1)}); err != nil {
		return fmt.Errorf("creating stream %s: %w", stream, err)
	}
	w := kinesis.NewStreamExistsWaiter(kin, func(o *kinesis.StreamExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	return w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(stream)}, 30*time.Second)
}

// workload is one shard's records: every key's profile first, then activity
// with about one profile change in fifty records, keys drawn at random
// (seeded, so every run is the same). It returns the records and how many
// are activity.
func workload(cfg config) ([]events.KinesisEventRecord, int) {
	rng := rand.New(rand.NewPCG(1, 2))
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	versions := make([]int, cfg.keys)
	plans := []string{"free", "pro", "team", "enterprise"}
	var recs []events.KinesisEventRecord
	activity := 0
	add := func(key string, doc any) {
		b, _ := json.Marshal(doc)
		seq := fmt.Sprintf("4960118965842235937883629852%028d", len(recs)+1)
		recs = append(recs, events.KinesisEventRecord{EventID: "shardId-000000000000:" + seq, EventSource: "aws:kinesis",
			Kinesis: events.KinesisRecord{Data: b, PartitionKey: key, SequenceNumber: seq,
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: at}}})
	}
	change := func(k int) {
		key := fmt.Sprintf("user-%d", k)
		versions[k]++
		data, _ := json.Marshal(cdc.Data{Key: key, Version: json.Number(fmt.Sprint(versions[k])),
			Image: map[string]any{"userId": key, "plan": plans[rng.IntN(len(plans))], "version": versions[k], "country": "NO"}})
		add(key, map[string]any{"id": fmt.Sprintf("profiles/%s/%d", key, versions[k]), "type": cdc.TypeChanged, "key": key,
			"occurredAt": at, "sentAt": at, "receivedAt": at, "data": json.RawMessage(data)})
	}
	for k := range min(cfg.keys, cfg.events) {
		change(k)
	}
	for len(recs) < cfg.events {
		k := rng.IntN(cfg.keys)
		if rng.IntN(50) == 0 {
			change(k)
			continue
		}
		key := fmt.Sprintf("user-%d", k)
		add(key, map[string]any{"id": fmt.Sprintf("evt-%d", len(recs)), "type": "page_view", "key": key,
			"occurredAt": at, "sentAt": at, "data": map[string]any{"path": "/pricing", "ms": rng.IntN(2000)}})
		activity++
	}
	return recs, activity
}

// processCPU is the user + system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
