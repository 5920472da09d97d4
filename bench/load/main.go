package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/bench/internal/deployed"
	"github.com/tributary-dev/tributary/bench/internal/sdkcost"
)

func main() {
	var o options
	var loads, paths string
	flag.StringVar(&loads, "loads", "10x100,100x1000,1000x10000", "loads to run, comma separated: <events a second>x<keys>")
	flag.StringVar(&paths, "paths", "per-batch,per-interval", "write paths, comma separated: per-batch, per-interval")
	flag.DurationVar(&o.span, "span", 10*time.Minute, "event time generated per load (at least 10m for the BENCH load lines docs/performance.md quotes)")
	flag.DurationVar(&o.flush, "flush", deployedStack.flush, "the per-interval path's flush interval (the mapping's TumblingWindowInSeconds)")
	var flushes string
	flag.StringVar(&flushes, "flushes", "1m,5m", "other flush intervals priced at 100 events/s over 1,000 keys (BENCH load_flush), comma separated; empty for none")
	flag.DurationVar(&o.tail, "tail", 16*time.Minute, "ticks after the last event, so the windows it opened close (hopping 5m, allowed lateness 10m)")
	flag.StringVar(&o.pipeline, "pipeline", "", "pipeline file (default: the stack's pipelines/pageviews.json)")
	flag.BoolVar(&o.keepup, "keepup", true, "measure BENCH keepup (one instance on a full shard, with store latency)")
	flag.IntVar(&o.keepupRuns, "keepup-runs", 3, "keepup runs per path: median and min–max")
	flag.IntVar(&o.keepupBatches, "keepup-batches", 8, "invocations measured per keepup run (per interval: at least a whole -flush interval's)")
	flag.IntVar(&o.keepupKeys, "keepup-keys", 1000, "keys on the keepup shard")
	flag.DurationVar(&o.latency, "latency", 4*time.Millisecond, "how long the store takes to answer a request (keepup; and what the Powertools peer awaits per request)")
	flag.BoolVar(&o.nolog, "nolog", true, "price the reference load again with the pipeline's outputs.log false (BENCH load_nolog)")
	flag.BoolVar(&o.powertools, "powertools", true, "run the Powertools peer (node, moto) on a sample and print its BENCH load_powertools lines")
	flag.IntVar(&o.memoryMB, "memory", deployedStack.memoryMB, "the aggregate and ticker functions' memory in MB (Lambda's vCPU share follows it: 1,769 MB is one vCPU)")
	flag.IntVar(&o.peerEvents, "peer-events", 300, "events in the Powertools peer's sample")
	flag.BoolVar(&o.verbose, "v", false, "log progress to stderr")
	flag.Parse()
	var err error
	if o.loads, err = parseLoads(loads); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(2)
	}
	if o.paths, err = parsePaths(paths); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(2)
	}
	if o.flushes, err = parseFlushes(flushes); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(2)
	}
	runtime.GOMAXPROCS(1) // one core: CPU time is scaled to a share of one
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

// options is what one run of the driver measures.
type options struct {
	memoryMB      int      // the functions' memory (-memory)
	loads         [][2]int // events a second, keys
	paths         []string
	span, flush   time.Duration
	flushes       []time.Duration // other flush intervals, priced at the reference load
	tail          time.Duration
	pipeline      string
	keepup        bool
	keepupRuns    int
	keepupBatches int
	keepupKeys    int
	latency       time.Duration
	powertools    bool
	nolog         bool
	peerEvents    int
	verbose       bool
}

func (o options) logf(w io.Writer, format string, args ...any) {
	if o.verbose {
		fmt.Fprintf(w, "load: "+format+"\n", args...)
	}
}

func parseLoads(s string) ([][2]int, error) {
	var out [][2]int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		r, k, ok := strings.Cut(f, "x")
		rate, err1 := strconv.Atoi(r)
		keys, err2 := strconv.Atoi(k)
		if !ok || err1 != nil || err2 != nil || rate < 1 || keys < 1 {
			return nil, fmt.Errorf("-loads: %q is not <events a second>x<keys>, both positive (100x1000)", f)
		}
		out = append(out, [2]int{rate, keys})
	}
	return out, nil
}

func parsePaths(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		switch f = strings.TrimSpace(f); f {
		case pathBatch, pathInterval:
			out = append(out, f)
		default:
			return nil, fmt.Errorf("-paths: %q is not a path: want %s or %s", f, pathBatch, pathInterval)
		}
	}
	return out, nil
}

func parseFlushes(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < time.Minute || d > 15*time.Minute {
			return nil, fmt.Errorf("-flushes: %q is not a flush interval from 1m to 15m (Lambda's tumbling window)", f)
		}
		out = append(out, d)
	}
	return out, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// run measures keepup, the Powertools peer's sample and every load on
// every path, and prints the BENCH lines.
func run(ctx context.Context, o options, out, log io.Writer) error {
	cfg, err := deployed.LoadPipeline(o.pipeline)
	if err != nil {
		return err
	}
	st := deployedStack
	if o.memoryMB > 0 {
		st.memoryMB = o.memoryMB
	}
	flink := flinkMonthly()
	fmt.Fprintf(out, "BENCH load_prices region=%s date=%s memory_mb=%d vcpu=%.3f shards=%d batch=%d batching_window_s=%g flush_s=%g flink_usd=%.2f\n",
		PricesRegion, PricesDate, st.memoryMB, st.vcpu(), st.shards, st.batchSize, st.batchingWindow.Seconds(), o.flush.Seconds(), flink)

	// The SDK's CPU per request, from the requests a short run at the
	// reference load makes on each path.
	o.logf(log, "sdk cost: sampling requests")
	samples := map[string][]sdkcost.Sample{}
	for _, p := range o.paths {
		t, err := runLoad(ctx, cfg, st, load{rate: 100, keys: 1000, path: p, flush: o.flush, span: 3 * time.Minute, tail: o.tail})
		if err != nil {
			return fmt.Errorf("sdk cost: %w", err)
		}
		for op, ss := range t.samples {
			samples[op] = append(samples[op], ss...)
		}
	}
	sdk, err := sdkcost.Measure(ctx, samples, 4, cpuTime)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "BENCH load_sdk us_per_request=%s\n", sdk)

	// The store's wait per request, by path: measured by keepup, else the
	// latency over the handler's concurrency (the best case).
	wait := map[string]time.Duration{}
	for _, p := range o.paths {
		wait[p] = o.latency / time.Duration(st.concurrency)
	}
	if o.keepup {
		for _, p := range o.paths {
			var rps, waits, early []float64
			for r := range o.keepupRuns {
				o.logf(log, "keepup %s run %d", p, r+1)
				k, err := keepup(ctx, cfg, st, p, o.keepupKeys, o.keepupBatches, o.flush, o.latency, sdk)
				if err != nil {
					return err
				}
				rps = append(rps, k.recordsPerSecond)
				early = append(early, float64(k.earlyFinals))
				waits = append(waits, float64(k.waitPerRequest))
			}
			wait[p] = time.Duration(median(waits))
			m := median(rps)
			fmt.Fprintf(out, "BENCH keepup path=%s records_per_s=%.0f shard_ratio=%.2f\n", p, m, m/shardRecordsPerSecond)
			fmt.Fprintf(out, "BENCH keepup_spread path=%s runs=%d records_per_s_min=%.0f records_per_s_max=%.0f keys=%d batch=%d latency_ms=%g concurrency=%d wait_ms_per_request=%.3f memory_mb=%d vcpu=%.3f windows_ended_early=%.0f\n",
				p, len(rps), slices.Min(rps), slices.Max(rps), o.keepupKeys, st.batchSize, float64(o.latency)/1e6, st.concurrency, median(waits)/1e6, st.memoryMB, st.vcpu(), median(early))
		}
	}

	var peer *peerPerEvent
	if o.powertools {
		o.logf(log, "powertools peer: %d events", o.peerEvents)
		p, err := measurePeer(ctx, o.peerEvents, 50, 100, log)
		if err != nil {
			return err
		}
		peer = &p
		fmt.Fprintf(out, "BENCH load_powertools_sample events=%d idem_wcu_per_event=%.2f idem_writes_per_event=%.2f window_wcu_per_update=%.2f window_writes_per_update=%.2f rcu_per_event=%.2f windows_per_event=%d\n",
			o.peerEvents, p.idemWCU, p.idemWrites, p.windowWCU, p.windowWrites, p.rcu, windowsPerEvent(cfg))
	}

	for _, ld := range o.loads {
		rate, keys := ld[0], ld[1]
		var invocations float64 // the mapping's invocations a month, for the peer
		var last tally
		for _, p := range o.paths {
			o.logf(log, "load %d events/s over %d keys, %s", rate, keys, p)
			started := time.Now()
			t, err := steadyLoad(ctx, cfg, st, load{rate: rate, keys: keys, path: p, flush: o.flush, span: o.span, tail: o.tail, waitPerRequest: wait[p], sdk: sdk})
			if err != nil {
				return err
			}
			b := price(t, st)
			fmt.Fprintf(out, "BENCH load events_per_s=%d keys=%d path=%s wcu_per_event=%.3f lambda_usd=%.2f dynamodb_usd=%.2f cloudwatch_usd=%.2f total_usd=%.2f flink_usd=%.2f flink_ratio=%.2f\n",
				rate, keys, p, b.wruPerEvent, b.lambda, b.dynamodb, b.cloudwatch, b.total(), flink, b.total()/flink)
			pb := priceProvisioned(t, st)
			fmt.Fprintf(out, "BENCH load_provisioned events_per_s=%d keys=%d path=%s wcu=%d rcu=%d dynamodb_usd=%.2f cloudwatch_usd=%.2f total_usd=%.2f flink_ratio=%.2f largest_burst_wu=%d burst_credit_wu=%d throttled_wu_per_event=%.4f\n",
				rate, keys, p, pb.wcu, pb.rcu, pb.dynamodb, pb.cloudwatch, pb.total(), pb.total()/flink, pb.largestBurstWU, pb.wcu*burstSeconds, float64(pb.throttledWU)/float64(t.events))
			f := secondsPerMonth / t.simulated.Seconds()
			fmt.Fprintf(out, "BENCH load_detail events_per_s=%d keys=%d path=%s events=%d invocations=%d tick_invocations=%d cpu_ms_per_record=%.3f sdk_ms_per_record=%.3f billed_ms_per_invocation=%.0f requests_per_event=%.3f wru=%d index_wru=%d rru=%.0f log_bytes_per_event=%.0f custom_metrics=%d stored_mb=%.1f windows_ended_early=%d seconds=%.0f\n",
				rate, keys, p, t.events, t.aggInvokes, t.tickInvokes, float64(t.aggCPU)/1e6/float64(t.events), float64(t.sdkCPU)/1e6/float64(t.events), float64(t.billedMs)/float64(t.aggInvokes+t.tickInvokes),
				float64(t.db.TotalRequests())/float64(t.events), t.db.WriteUnits, t.db.IndexUnits, t.db.ReadUnits(), float64(t.logBytes)/float64(t.events),
				len(t.metrics), float64(t.storedBytes)/1e6, t.earlyFinals, time.Since(started).Seconds())
			// Where the CloudWatch month goes: log ingestion and storage
			// by kind of line, the custom metrics, the alarms.
			logs := func(b int64) float64 { return logsMonthly(float64(b) * f / 1e9) }
			resultLine := 0.0
			if t.resultLines > 0 {
				resultLine = float64(t.resultLogBytes) / float64(t.resultLines)
			}
			fmt.Fprintf(out, "BENCH load_cloudwatch events_per_s=%d keys=%d path=%s results_logs_usd=%.2f emf_logs_usd=%.2f platform_logs_usd=%.2f other_logs_usd=%.2f metrics_usd=%.2f alarms_usd=%.2f result_lines_per_event=%.3f bytes_per_result_line=%.0f\n",
				rate, keys, p, logs(t.resultLogBytes), logs(t.emfBytes), logs(t.platformBytes), logs(t.logBytes-t.resultLogBytes-t.emfBytes-t.platformBytes),
				float64(len(t.metrics))*metricPerMonth, pipelineAlarmMetrics*alarmPerMetricMonth, float64(t.resultLines)/float64(t.events), resultLine)
			classes := make([]string, 0, len(t.db.WriteUnitsBy))
			for c := range t.db.WriteUnitsBy {
				classes = append(classes, c)
			}
			sort.Strings(classes)
			packedBytes := 0
			for _, c := range classes {
				packedBytes += t.db.WriteBytesBy[c]
				fmt.Fprintf(out, "BENCH load_writes events_per_s=%d keys=%d path=%s items=%s wcu_per_event=%.3f writes_per_event=%.3f kb_per_event=%.3f index_wcu_per_event=%.3f\n",
					rate, keys, p, c, float64(t.db.WriteUnitsBy[c])/float64(t.events), float64(t.db.WritesBy[c])/float64(t.events),
					float64(t.db.WriteBytesBy[c])/1024/float64(t.events), float64(t.db.IndexUnitsBy[c])/float64(t.events))
			}
			fmt.Fprintf(out, "BENCH load_packed events_per_s=%d keys=%d path=%s wcu_per_event=%.3f packed_wcu_per_event=%.3f\n",
				rate, keys, p, float64(t.db.WRU())/float64(t.events), (float64(packedBytes)/1024+float64(t.db.IndexUnits))/float64(t.events))
			if p == pathBatch || invocations == 0 {
				invocations = float64(t.aggInvokes) * f
			}
			last = t
		}
		if peer != nil {
			if !slices.Contains(o.paths, pathBatch) {
				// The peer's mapping has no tumbling window: its
				// invocations are the per-batch path's, about one per
				// batching window per shard, or per full batch.
				invocations = 0
			}
			b := pricePeer(*peer, float64(rate), windowsPerEvent(cfg), invocations, o.latency, st)
			fmt.Fprintf(out, "BENCH load_powertools events_per_s=%d keys=%d wcu_per_event=%.3f lambda_usd=%.2f dynamodb_usd=%.2f cloudwatch_usd=%.2f total_usd=%.2f flink_usd=%.2f flink_ratio=%.2f\n",
				rate, keys, b.wruPerEvent, b.lambda, b.dynamodb, b.cloudwatch, b.total(), flink, b.total()/flink)
		}
		ev, res := kinesisMonthly(float64(rate), st.shards, last)
		fmt.Fprintf(out, "BENCH load_kinesis events_per_s=%d keys=%d events_stream_usd=%.2f results_stream_usd=%.2f\n", rate, keys, ev, res)
	}

	// What a longer flush interval saves at the reference load, and what it
	// costs: results up to that long after the watermark passes a window.
	for _, fl := range o.flushes {
		if !slices.Contains(o.paths, pathInterval) {
			break
		}
		o.logf(log, "flush %s at 100 events/s over 1,000 keys", fl)
		t, err := steadyLoad(ctx, cfg, st, load{rate: 100, keys: 1000, path: pathInterval, flush: fl, span: o.span, tail: o.tail, waitPerRequest: wait[pathInterval], sdk: sdk})
		if err != nil {
			return err
		}
		b := price(t, st)
		fmt.Fprintf(out, "BENCH load_flush events_per_s=100 keys=1000 flush_s=%.0f wcu_per_event=%.3f total_usd=%.2f flink_ratio=%.2f windows_ended_early=%d\n",
			fl.Seconds(), b.wruPerEvent, b.total(), b.total()/flink, t.earlyFinals)
	}

	// The reference load with the pipeline's result lines off
	// (outputs.log false), on demand and provisioned: what a team that
	// reads results from the stream or the table pays.
	if o.nolog && slices.Contains(o.paths, pathInterval) {
		o.logf(log, "outputs.log false at 100 events/s over 1,000 keys")
		quiet := *cfg
		quiet.Outputs.Log = false
		t, err := steadyLoad(ctx, &quiet, st, load{rate: 100, keys: 1000, path: pathInterval, flush: o.flush, span: o.span, tail: o.tail, waitPerRequest: wait[pathInterval], sdk: sdk})
		if err != nil {
			return err
		}
		b, pb := price(t, st), priceProvisioned(t, st)
		fmt.Fprintf(out, "BENCH load_nolog events_per_s=100 keys=1000 path=%s result_lines=%d wcu_per_event=%.3f lambda_usd=%.2f dynamodb_usd=%.2f cloudwatch_usd=%.2f total_usd=%.2f flink_ratio=%.2f provisioned_dynamodb_usd=%.2f provisioned_cloudwatch_usd=%.2f provisioned_total_usd=%.2f provisioned_flink_ratio=%.2f\n",
			pathInterval, t.resultLines, b.wruPerEvent, b.lambda, b.dynamodb, b.cloudwatch, b.total(), b.total()/flink, pb.dynamodb, pb.cloudwatch, pb.total(), pb.total()/flink)
	}
	return nil
}
