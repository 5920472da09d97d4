package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/bench/internal/sdkcost"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/stream/streamtest"
)

// Paths, as the BENCH lines name them.
const (
	pathBatch   = "per-batch"
	pathFirst   = "interval-first"
	pathCarried = "interval-carried"
	pathFinal   = "interval-final"
)

var paths = []string{pathBatch, pathFirst, pathCarried, pathFinal}

// spacing is the event time between records: the largest batch that fits
// 6 MB (about 7,000 records) spans under a minute, so the Benthos peer,
// whose system_window flushes one wall-clock window per run, gets the same
// events in one window.
const spacing = 8 * time.Millisecond

// sample is what one or more invocations cost.
type sample struct {
	cpu     time.Duration // process CPU time (every thread: the collector's work counts), less store.cpu
	allocs  uint64        // heap allocations, less store.allocs
	store   storeWork     // the in-process store's own work answering the handler
	records int
	invokes int
	bytes   int
}

func (s *sample) add(o sample) {
	s.cpu += o.cpu
	s.allocs += o.allocs
	s.store.requests += o.store.requests
	for op, n := range o.store.ops {
		if s.store.ops == nil {
			s.store.ops = map[string]int{}
		}
		s.store.ops[op] += n
	}
	s.store.cpu += o.store.cpu
	s.store.allocs += o.store.allocs
	s.records += o.records
	s.invokes += o.invokes
	s.bytes += o.bytes
}

// runResult is one run of one path: the handler and the decode-only floor
// on the same bytes.
type runResult struct{ handler, floor sample }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profileLabel labels the measured spans in a CPU profile (-cpuprofile;
// go tool pprof -tagfocus span=per-batch ...).
var profileLabel = "setup"

// measure times fn after a collection, so garbage left by the benchmark's
// own setup (building the next event) is not charged to fn.
func measure(records, size int, fn func() error) (sample, error) {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c0 := cpuTime()
	var err error
	pprof.Do(context.Background(), pprof.Labels("span", profileLabel), func(context.Context) { err = fn() })
	c1 := cpuTime()
	runtime.ReadMemStats(&m1)
	return sample{cpu: c1 - c0, allocs: m1.Mallocs - m0.Mallocs, records: records, invokes: 1, bytes: size}, err
}

// workload hands out events with new records each time: a warm function
// sees new sequence numbers and event ids in every batch.
type workload struct {
	keys int
	next int
}

func (w *workload) event(n int) streamtest.KinesisEvent {
	e := streamtest.KinesisEvent{Records: n, Keys: w.keys, First: w.next, Spacing: spacing}
	w.next += n
	return e
}

func (w *workload) windowEvent(n int, st map[string]string, final bool) streamtest.KinesisEvent {
	e := w.event(n)
	start := time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC).Add(time.Duration(e.First) * spacing).Truncate(time.Minute)
	e.Window, e.WindowStart, e.WindowEnd, e.State, e.Final = true, start, start.Add(time.Minute), st, final
	return e
}

// response is what the function answers (both paths).
type response struct {
	BatchItemFailures []struct {
		ItemIdentifier string `json:"itemIdentifier"`
	} `json:"batchItemFailures"`
	State map[string]string `json:"state"`
}

// invoke calls the handler as lambda.Start does and checks its answer
// (outside the measured span). The store's own work answering is taken off
// the handler's CPU time and allocations and kept apart (sample.store).
// The allocations are counted by the twin (see deployment) on twinRaw: the
// same event, with the state the twin returned in place of raw's.
func (d *deployment) invoke(raw, twinRaw []byte, records int) (sample, *response, *response, error) {
	var out []byte
	d.store.take()
	s, err := measure(records, len(raw), func() error {
		var err error
		out, err = d.p.Invoke(context.Background(), raw)
		return err
	})
	s.store = d.store.take()
	s.cpu = max(0, s.cpu-s.store.cpu)
	if err != nil {
		return s, nil, nil, err
	}
	r, err := checkResponse(out)
	if err != nil {
		return s, nil, nil, err
	}
	tr, err := d.countAllocs(&s, twinRaw)
	if err != nil {
		return s, nil, nil, err
	}
	return s, r, tr, nil
}

func checkResponse(out []byte) (*response, error) {
	var r response
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("response %.200q: %w", out, err)
	}
	if len(r.BatchItemFailures) > 0 {
		return nil, fmt.Errorf("the handler reported %d failures, first %s", len(r.BatchItemFailures), r.BatchItemFailures[0].ItemIdentifier)
	}
	return &r, nil
}

// countAllocs hands raw to d's twin and sets s's allocations from it: the
// handler's (every allocation during the invocation less the store's) and
// the store's.
func (d *deployment) countAllocs(s *sample, raw []byte) (*response, error) {
	d.twin.store.take()
	var out []byte
	t, err := measure(s.records, len(raw), func() error {
		var err error
		out, err = d.twin.p.Invoke(context.Background(), raw)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("the allocation-counting twin: %w", err)
	}
	st := d.twin.store.take()
	s.allocs = t.allocs - min(t.allocs, st.allocs)
	s.store.allocs = st.allocs
	r, err := checkResponse(out)
	if err != nil {
		return nil, fmt.Errorf("the allocation-counting twin: %w", err)
	}
	return r, nil
}

// invokeRaw is invoke without measuring.
func (d *deployment) invokeRaw(raw []byte) ([]byte, *response, error) {
	out, err := d.p.Invoke(context.Background(), raw)
	if err != nil {
		return nil, nil, err
	}
	var r response
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, nil, err
	}
	return out, &r, nil
}

// floor decodes raw as the handler's first step does, and nothing else.
func floor(b *stream.KinesisBatch, raw []byte, records int) (sample, error) {
	profileLabel = "floor"
	return measure(records, len(raw), func() error { return b.Decode(raw) })
}

// bench is one batch size's measurements.
type bench struct {
	cfg      *pipeline.Config
	line     string // the BENCH lines' name
	batch    int    // per-batch events
	interval int    // interval events
	keys     int
	perRun   int
	runs     int
	results  map[string][]runResult
	checks   []func() error
	// sdk samples the requests the timed deployments make (sdkcost).
	sdk sdkcost.Sampler
}

// deploy is b's pipeline deployed, its timed store sampling requests.
func (b *bench) deploy() *deployment {
	d := deploy(b.cfg)
	d.store.sdk = &b.sdk
	return d
}

func (b *bench) fits(e streamtest.KinesisEvent, raw []byte) error {
	if len(raw) > streamtest.PayloadLimit {
		return fmt.Errorf("an event of %d records (window %v) is %d bytes, over Lambda's %d", e.Records, e.Window, len(raw), streamtest.PayloadLimit)
	}
	return nil
}

// perBatch measures the per-batch path: runs of consecutive batches.
func (b *bench) perBatch() error {
	d := b.deploy()
	w := &workload{keys: b.keys}
	var fb stream.KinesisBatch
	invokes := max(1, b.perRun/b.batch)
	// Warm: the cold start's reads (watermarks, the keys' ledgers).
	warm := w.event(b.batch).JSON()
	if _, _, _, err := d.invoke(warm, warm, b.batch); err != nil {
		return fmt.Errorf("%s batch %d: warm-up: %w", pathBatch, b.batch, err)
	}
	for range b.runs {
		evs := make([][]byte, invokes)
		for i := range evs {
			e := w.event(b.batch)
			evs[i] = e.JSON()
			if err := b.fits(e, evs[i]); err != nil {
				return err
			}
		}
		var r runResult
		for _, raw := range evs {
			profileLabel = pathBatch
			s, _, _, err := d.invoke(raw, raw, b.batch)
			if err != nil {
				return fmt.Errorf("%s batch %d: %w", pathBatch, b.batch, err)
			}
			r.handler.add(s)
			f, err := floor(&fb, raw, b.batch)
			if err != nil {
				return err
			}
			r.floor.add(f)
		}
		b.results[pathBatch] = append(b.results[pathBatch], r)
	}
	b.checks = append(b.checks, func() error { return checkCounts(d, b.cfg, w.next) })
	return nil
}

// perInterval measures the per-interval path: runs of intervals of three
// invocations each — the first (no state), a later one (the state the first
// returned, as Lambda passes it back in the event) and the final one, which
// flushes.
func (b *bench) perInterval() error {
	d := b.deploy()
	w := &workload{keys: b.keys}
	var fb stream.KinesisBatch
	intervals := max(1, b.perRun/(3*b.interval))
	one := func(rs map[string]*runResult) error {
		st, twinSt := map[string]string{}, map[string]string{}
		for _, path := range []string{pathFirst, pathCarried, pathFinal} {
			e := w.windowEvent(b.interval, st, path == pathFinal)
			raw := e.JSON()
			if err := b.fits(e, raw); err != nil {
				return err
			}
			e.State = twinSt
			twinRaw := e.JSON()
			profileLabel = path
			s, resp, twinResp, err := d.invoke(raw, twinRaw, b.interval)
			if err != nil {
				return fmt.Errorf("%s batch %d: %w", path, b.interval, err)
			}
			if resp.State == nil || twinResp.State == nil {
				return fmt.Errorf("%s batch %d: the response has no state", path, b.interval)
			}
			st, twinSt = resp.State, twinResp.State
			if rs == nil {
				continue
			}
			f, err := floor(&fb, raw, b.interval)
			if err != nil {
				return err
			}
			rs[path].handler.add(s)
			rs[path].floor.add(f)
		}
		if len(st) != 0 {
			return fmt.Errorf("the final invocation returned state %d entries, want none", len(st))
		}
		return nil
	}
	if err := one(nil); err != nil { // warm
		return fmt.Errorf("warm-up: %w", err)
	}
	for range b.runs {
		rs := map[string]*runResult{pathFirst: {}, pathCarried: {}, pathFinal: {}}
		for range intervals {
			if err := one(rs); err != nil {
				return err
			}
		}
		for p, r := range rs {
			b.results[p] = append(b.results[p], *r)
		}
	}
	b.checks = append(b.checks, func() error { return checkCounts(d, b.cfg, w.next) })
	return nil
}

// checkCounts checks that the views hold every record sent, once: the
// tumbling windows' counts add up to the records (every window was flushed:
// the per-batch path writes each batch, the interval path each final
// invocation).
func checkCounts(d *deployment, cfg *pipeline.Config, records int) error {
	kind := ""
	for _, w := range cfg.Windows {
		if w.Kind == pipeline.Tumbling {
			kind = w.ID()
			break
		}
	}
	if kind == "" {
		return nil
	}
	// The interval path's windows still open are in the shards' carries
	// (keys on one shard): two ticks far ahead close them, as the ticker
	// closes an idle shard's (the first starts the idle clock).
	far := time.Now().AddDate(10, 0, 0)
	for _, at := range []time.Time{far, far.Add(time.Hour)} {
		if _, err := d.p.Tick(context.Background(), at); err != nil {
			return fmt.Errorf("closing the windows carried: %w", err)
		}
	}
	total := 0
	for _, it := range d.db.Items(viewsTable) {
		k, _ := it["kind"].(*types.AttributeValueMemberS)
		c, _ := it["count"].(*types.AttributeValueMemberN)
		if k == nil || c == nil || k.Value != kind {
			continue
		}
		var n int
		fmt.Sscan(c.Value, &n)
		total += n
	}
	if total != records {
		return fmt.Errorf("the %s windows count %d records, want %d", kind, total, records)
	}
	return nil
}

// largest finds the largest batches that fit 6 MB: plain events, and
// window events carrying the state an interval of such batches builds up.
func largest(cfg *pipeline.Config, keys int) (plain, interval int, err error) {
	// Sized at record numbers past any the benchmark reaches: a later
	// record's id has more digits.
	const far = 9_999_999
	plain = streamtest.MaxRecords(streamtest.KinesisEvent{Keys: keys, Spacing: spacing, First: far}, streamtest.PayloadLimit)
	n := streamtest.MaxRecords(streamtest.KinesisEvent{Keys: keys, Spacing: spacing, Window: true, First: far}, streamtest.PayloadLimit)
	// The state grows over an interval: size the batches by the state an
	// interval's third invocation carries, with a margin for runs whose
	// state differs in detail.
	d := deploy(cfg)
	w := &workload{keys: keys}
	st := map[string]string{}
	biggest := map[string]string{}
	for i := range 3 {
		out, err := d.p.Invoke(context.Background(), w.windowEvent(n, st, i == 2).JSON())
		if err != nil {
			return 0, 0, fmt.Errorf("sizing the interval batches: %w", err)
		}
		resp, err := checkResponse(out)
		if err != nil {
			return 0, 0, fmt.Errorf("sizing the interval batches: %w", err)
		}
		if stateSize(resp.State) > stateSize(biggest) {
			biggest = resp.State
		}
		st = resp.State
	}
	interval = streamtest.MaxRecords(streamtest.KinesisEvent{Keys: keys, Spacing: spacing, Window: true, State: biggest, First: far}, streamtest.PayloadLimit*99/100)
	return plain, interval, nil
}

func stateSize(st map[string]string) int {
	n := 0
	for k, v := range st {
		n += len(k) + len(v) + 6
	}
	return n
}

func run(o options) error {
	sizes, err := o.batchSizes()
	if err != nil {
		return err
	}
	if o.runs < 1 {
		return fmt.Errorf("-runs must be at least 1")
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for i, name := range strings.Split(o.pipelines, ",") {
		cfg, err := loadPipeline(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		line, perRun := "throughput", o.perRun
		if name != "bench" {
			line, perRun = "throughput_"+filepath.Base(strings.TrimSuffix(name, ".json")), o.deployedRecords
		}
		// The peer does what the bench pipeline does: run it once.
		if err := runPipeline(o, cfg, sizes, line, perRun, o.benthos && i == 0); err != nil {
			return err
		}
	}
	return nil
}

func runPipeline(o options, cfg *pipeline.Config, sizes []int, line string, perRun int, peerToo bool) error {
	var plainMax, intervalMax int
	var err error
	for _, n := range sizes {
		if n == 0 {
			if plainMax, intervalMax, err = largest(cfg, o.keys); err != nil {
				return err
			}
			fmt.Printf("# largest batches within Lambda's 6 MB payload (%d bytes): %d records (plain event), %d records (window event with an interval's state)\n",
				streamtest.PayloadLimit, plainMax, intervalMax)
			break
		}
	}
	fmt.Printf("# pipeline %q: %d windows, aggregates %v; %d keys; one core (GOMAXPROCS=1); %d runs each\n",
		cfg.Name, len(cfg.Windows), cfg.Aggregates.Aggregates.Names(), o.keys, o.runs)
	for _, n := range sizes {
		b := &bench{cfg: cfg, line: line, batch: n, interval: n, keys: o.keys, perRun: perRun, runs: o.runs, results: map[string][]runResult{}}
		if n == 0 {
			b.batch, b.interval = plainMax, intervalMax
		}
		if err := b.perBatch(); err != nil {
			return err
		}
		if err := b.perInterval(); err != nil {
			return err
		}
		for _, c := range b.checks {
			if err := c(); err != nil {
				return fmt.Errorf("batch %d: %w", b.batch, err)
			}
		}
		var peer *benthosResult
		if peerToo {
			if peer, err = runBenthos(streamtest.KinesisEvent{Records: b.batch, Keys: o.keys, Spacing: spacing}.JSON(), o.runs); err != nil {
				return err
			}
		}
		if err := b.print(peer); err != nil {
			return err
		}
	}
	return nil
}

// stats is the median and range of one figure over runs.
type stats struct{ median, min, max float64 }

func statsOf(xs []float64) stats {
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats{median: m, min: s[0], max: s[len(s)-1]}
}

func (b *bench) print(peer *benthosResult) error {
	// The SDK's work on each request the paths made, which the in-process
	// store does not run: measured on a sample of those requests, charged
	// per request (BENCH <line>_sdk).
	sdk, err := sdkcost.Measure(context.Background(), b.sdk.Samples(), 4, threadCPU)
	if err != nil {
		return err
	}
	fmt.Printf("BENCH %s_sdk_cost batch=%d us_per_request=%s\n", b.line, b.batch, sdk)
	perRecord := map[string]float64{}
	for _, path := range paths {
		rs := b.results[path]
		var rate, cpuMs, allocs, ratio, floorRate, storeMs, storeAllocs, storeReqs []float64
		for _, r := range rs {
			h, f := r.handler, r.floor
			rate = append(rate, float64(h.records)/h.cpu.Seconds())
			cpuMs = append(cpuMs, float64(h.cpu.Microseconds())/1000/float64(h.invokes))
			allocs = append(allocs, float64(h.allocs)/float64(h.records))
			storeMs = append(storeMs, float64(h.store.cpu.Microseconds())/1000/float64(h.invokes))
			storeAllocs = append(storeAllocs, float64(h.store.allocs)/float64(h.records))
			storeReqs = append(storeReqs, float64(h.store.requests)/float64(h.invokes))
			ratio = append(ratio, h.cpu.Seconds()/f.cpu.Seconds())
			floorRate = append(floorRate, float64(f.records)/f.cpu.Seconds())
		}
		r, c, a, q, fr := statsOf(rate), statsOf(cpuMs), statsOf(allocs), statsOf(ratio), statsOf(floorRate)
		perRecord[path] = 1 / r.median
		batch := b.interval
		if path == pathBatch {
			batch = b.batch
		}
		mb := float64(rs[0].handler.bytes) / float64(rs[0].handler.invokes) / (1 << 20)
		benthos := "n/a"
		if peer != nil {
			benthos = fmt.Sprintf("%.2f", r.median/peer.rate.median)
		}
		fmt.Printf("BENCH %s path=%s batch=%d payload_mb=%.2f records_per_s=%.0f cpu_ms=%.2f allocs_per_record=%.2f floor_ratio=%.2f benthos_ratio_median=%s store_requests=%.1f store_cpu_ms=%.2f store_allocs_per_record=%.2f\n",
			b.line, path, batch, mb, r.median, c.median, a.median, q.median, benthos, statsOf(storeReqs).median, statsOf(storeMs).median, statsOf(storeAllocs).median)
		fmt.Printf("BENCH %s_spread path=%s batch=%d runs=%d invocations_per_run=%d records_per_s_min=%.0f records_per_s_max=%.0f cpu_ms_min=%.2f cpu_ms_max=%.2f floor_ratio_min=%.2f floor_ratio_max=%.2f allocs_per_record_min=%.2f allocs_per_record_max=%.2f\n",
			b.line, path, batch, len(rs), rs[0].handler.invokes, r.min, r.max, c.min, c.max, q.min, q.max, a.min, a.max)
		fmt.Printf("BENCH %s_floor path=%s batch=%d records_per_s=%.0f records_per_s_min=%.0f records_per_s_max=%.0f\n",
			b.line, path, batch, fr.median, fr.min, fr.max)
		var sdkMs, withSDK []float64
		for _, r := range rs {
			h := r.handler
			d := sdk.Of(h.store.ops)
			sdkMs = append(sdkMs, float64(d.Microseconds())/1000/float64(h.invokes))
			withSDK = append(withSDK, float64(h.records)/(h.cpu+d).Seconds())
		}
		ws := statsOf(withSDK)
		fmt.Printf("BENCH %s_sdk path=%s batch=%d sdk_ms=%.2f records_per_s_with_sdk=%.0f records_per_s_with_sdk_min=%.0f records_per_s_with_sdk_max=%.0f\n",
			b.line, path, batch, statsOf(sdkMs).median, ws.median, ws.min, ws.max)
	}
	fmt.Printf("BENCH %s_carried batch=%d carried_per_first=%.2f\n", b.line, b.interval, perRecord[pathCarried]/perRecord[pathFirst])
	if peer != nil {
		fmt.Printf("BENCH throughput_benthos batch=%d runs=%d records_per_s=%.0f records_per_s_min=%.0f records_per_s_max=%.0f\n",
			b.batch, peer.runs, peer.rate.median, peer.rate.min, peer.rate.max)
	}
	return nil
}
