package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/redpanda-data/benthos/v4/public/components/pure" // system_window, group_by_value, mapping
	"github.com/redpanda-data/benthos/v4/public/service"
)

// workloadWindow is the event-time minute every generated record falls in.
var workloadWindow = time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)

// envelope is Tributary's event envelope (pkg/stream.Envelope) as JSON.
type envelope struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Key        string          `json:"key"`
	OccurredAt time.Time       `json:"occurredAt"`
	SentAt     time.Time       `json:"sentAt"`
	ReceivedAt time.Time       `json:"receivedAt"`
	Data       json.RawMessage `json:"data"`

	raw []byte // the record's data as it came, when read from a Lambda event
}

func (e *envelope) eventTime() time.Time { return e.OccurredAt.Add(e.ReceivedAt.Sub(e.SentAt)) }

// generate returns n envelopes over keys keys, all in the minute starting at
// workloadWindow by event time (occurredAt + (receivedAt − sentAt)), with
// producer clocks off by up to ±2 s — the same shape as bench/cost's
// workloads.
func generate(n, keys int) []envelope {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(keys)))
	out := make([]envelope, n)
	for i := range out {
		skew := time.Duration(rng.IntN(4001)-2000) * time.Millisecond
		happened := workloadWindow.Add(5*time.Second + time.Duration(rng.Int64N(int64(50*time.Second))))
		occurred := happened.Add(skew)
		sent := occurred.Add(time.Duration(rng.IntN(500)) * time.Millisecond)
		received := sent.Add(-skew).Add(time.Duration(rng.IntN(500)) * time.Millisecond)
		data, _ := json.Marshal(map[string]any{"page": fmt.Sprintf("/p/%d", rng.IntN(100)), "ms": rng.IntN(3000)})
		out[i] = envelope{
			ID: fmt.Sprintf("evt-%d-%06d", n, i), Type: "page_view", Key: fmt.Sprintf("user-%03d", i%keys),
			OccurredAt: occurred, SentAt: sent, ReceivedAt: received, Data: data,
		}
	}
	return out
}

// loadEvents reads a Lambda Kinesis event (the bytes the aggregate function
// is handed) and returns its records' envelopes, each keeping its data as
// it came: the peer is fed the same bytes.
func loadEvents(path string) ([]envelope, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ev struct {
		Records []struct {
			Kinesis struct {
				Data []byte `json:"data"`
			} `json:"kinesis"`
		} `json:"Records"`
	}
	if err := json.Unmarshal(doc, &ev); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]envelope, len(ev.Records))
	for i, r := range ev.Records {
		if err := json.Unmarshal(r.Kinesis.Data, &out[i]); err != nil {
			return nil, fmt.Errorf("%s: Records[%d].kinesis.data: %w", path, i, err)
		}
		out[i].raw = r.Kinesis.Data
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no records", path)
	}
	return out, nil
}

// windowOf is the event-time minute of the first record: every record must
// fall in it (system_window flushes one wall-clock window per run).
func windowOf(evs []envelope) time.Time {
	if len(evs) == 0 {
		return workloadWindow
	}
	return evs[0].eventTime().Truncate(time.Minute)
}

// expectedCounts is the count per key of the one window.
func expectedCounts(evs []envelope) map[string]int {
	out := map[string]int{}
	window := windowOf(evs)
	for i := range evs {
		if evs[i].eventTime().Truncate(time.Minute) != window {
			panic(fmt.Sprintf("record %s: event time %s outside the workload window", evs[i].ID, evs[i].eventTime()))
		}
		out[evs[i].Key]++
	}
	return out
}

// result is what one run measured.
type result struct {
	records  int
	cpu      time.Duration // user+system CPU of the process from first record in to last count out
	wall     time.Duration // the same span by the wall clock, waiting for the window to close included
	flush    time.Duration // from the window's end by the wall clock to the last count out
	mallocs  uint64
	peakHeap uint64 // bytes of heap objects, highest sample

	runs             int     // runs measured (set by measure)
	minRate, maxRate float64 // records per CPU second, slowest and fastest run (set by measure)
}

// The stream: the system_window buffer groups by 1-minute windows of event
// time, then the window's batch is split per key and reduced to a count.
//
// system_window follows the system clock: a window is flushed only when the
// wall clock passes its end, records older than the last flushed window are
// dropped, and at the end of input a partial window is discarded, not
// flushed. A recorded workload's event times (a past minute) would be dropped
// or never flushed, so the mapping shifts them, by a whole number of minutes
// plus the window offset, into the wall-clock window that ends lead after
// the stream starts. Which records share a window is unchanged.
const (
	bufferYAML = `
system_window:
  timestamp_mapping: |
    root = (this.occurredAt.ts_unix_nano() + (this.receivedAt.ts_unix_nano() - this.sentAt.ts_unix_nano()) + %d) / 1000000000
  size: 1m
  offset: %s
`
	groupYAML = `
group_by_value:
  value: '${! json("key") }'
`
	countYAML = `
mapping: |
  root = if batch_index() == 0 {
    { "key": this.key, "window_end": meta("window_end_timestamp"), "count": batch_size() }
  } else { deleted() }
`
)

// runOnce feeds evs through a fresh Benthos stream and checks that one count
// per key comes out with the expected values. lead is how long after the
// start the wall-clock window closes: it must leave time to take in every
// record (a record that arrives after its window is flushed is dropped, and
// the check fails).
//
// With sampleHeap it polls the heap size every 2 ms for peakHeap; the polling
// costs CPU (about 20 ms per second of waiting for the window), so runs that
// measure CPU time are made without it.
func runOnce(ctx context.Context, evs []envelope, lead time.Duration, sampleHeap bool) (result, error) {
	want := expectedCounts(evs)
	payloads := make([][]byte, len(evs))
	for i := range evs {
		if evs[i].raw != nil {
			payloads[i] = evs[i].raw
			continue
		}
		b, err := json.Marshal(&evs[i])
		if err != nil {
			return result{}, err
		}
		payloads[i] = b
	}

	now := time.Now()
	windowEnd := now.Add(lead).Truncate(time.Millisecond)
	// system_window starts a window at now.Round(size)+offset (one size
	// earlier when that is after now); choose the offset so the window
	// holding now ends at windowEnd.
	d := windowEnd.Sub(now.Round(time.Minute))
	offset := d
	if d > 0 {
		offset = d - time.Minute
	}
	shift := windowEnd.Add(-time.Minute).Sub(windowOf(evs))

	b := service.NewStreamBuilder()
	if err := b.SetLoggerYAML("level: ERROR"); err != nil {
		return result{}, err
	}
	if err := b.SetMetricsYAML("none: {}"); err != nil {
		return result{}, err
	}
	if err := b.SetBufferYAML(fmt.Sprintf(bufferYAML, shift.Nanoseconds(), offset.String())); err != nil {
		return result{}, fmt.Errorf("benthos buffer config: %w", err)
	}
	for _, p := range []string{groupYAML, countYAML} {
		if err := b.AddProcessorYAML(p); err != nil {
			return result{}, fmt.Errorf("benthos processor config: %w", err)
		}
	}
	produce, err := b.AddBatchProducerFunc()
	if err != nil {
		return result{}, err
	}
	var (
		mu       sync.Mutex
		got      = map[string]int{}
		ends     = map[string]bool{}
		outputs  int
		lastOut  time.Time
		done     = make(chan struct{})
		doneOnce sync.Once
		badMsg   error
	)
	err = b.AddBatchConsumerFunc(func(_ context.Context, batch service.MessageBatch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range batch {
			raw, err := m.AsBytes()
			if err != nil {
				return err
			}
			var c struct {
				Key       string `json:"key"`
				WindowEnd string `json:"window_end"`
				Count     int    `json:"count"`
			}
			if err := json.Unmarshal(raw, &c); err != nil {
				badMsg = fmt.Errorf("output %q is not a count: %w", raw, err)
				continue
			}
			got[c.Key] += c.Count
			ends[c.WindowEnd] = true
			outputs++
		}
		if outputs >= len(want) {
			lastOut = time.Now()
			doneOnce.Do(func() { close(done) })
		}
		return nil
	})
	if err != nil {
		return result{}, err
	}
	stream, err := b.Build()
	if err != nil {
		return result{}, fmt.Errorf("benthos build: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- stream.Run(runCtx) }()
	defer func() {
		stopCtx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = stream.Stop(stopCtx)
	}()

	batch := make(service.MessageBatch, len(payloads))
	for i, p := range payloads {
		batch[i] = service.NewMessage(p)
	}

	runtime.GC()
	sampler := startHeapSampler(sampleHeap)
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuTime()
	start := time.Now()

	produced := make(chan error, 1)
	go func() { produced <- produce(runCtx, batch) }()

	incomplete := func(why string) error {
		sampler.stop()
		mu.Lock()
		defer mu.Unlock()
		return fmt.Errorf("%s: counts for %d of %d keys came out %v; records that reach the system_window buffer after their wall-clock window closed are dropped: raise -lead above %v",
			why, outputs, len(want), got, lead)
	}
	timeout := time.NewTimer(lead + 10*time.Second)
	defer timeout.Stop()
	var produceErr error
	select {
	case <-done:
	case produceErr = <-produced:
		// Records are acknowledged once their counts are out, or at once
		// when the buffer drops them.
		produced = nil
		select {
		case <-done:
		case <-time.After(time.Second):
			return result{}, incomplete(fmt.Sprintf("benthos acknowledged the records (error %v) without emitting every count", produceErr))
		}
	case err := <-runErr:
		return result{}, incomplete(fmt.Sprintf("benthos stream ended (%v)", err))
	case <-timeout.C:
		return result{}, incomplete(fmt.Sprintf("no count %v after the window's end", 10*time.Second))
	}
	cpu := cpuTime() - cpu0
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	peak := sampler.stop()

	if produced != nil {
		produceErr = <-produced
	}
	if produceErr != nil {
		return result{}, fmt.Errorf("benthos did not acknowledge the records: %w", produceErr)
	}
	mu.Lock()
	defer mu.Unlock()
	if badMsg != nil {
		return result{}, badMsg
	}
	if err := sameCounts(got, want); err != nil {
		return result{}, err
	}
	wantEnd := windowEnd.UTC().Format(time.RFC3339Nano)
	if len(ends) != 1 || !ends[wantEnd] {
		return result{}, fmt.Errorf("window ends %v, want every count in the one window ending %s", keys(ends), wantEnd)
	}
	return result{
		records:  len(evs),
		cpu:      cpu,
		wall:     lastOut.Sub(start),
		flush:    lastOut.Sub(windowEnd),
		mallocs:  ms1.Mallocs - ms0.Mallocs,
		peakHeap: peak,
	}, nil
}

func sameCounts(got, want map[string]int) error {
	var diffs []string
	for k, w := range want {
		if got[k] != w {
			diffs = append(diffs, fmt.Sprintf("%s = %d, want %d", k, got[k], w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s = %d, want none", k, g))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	sort.Strings(diffs)
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	return errors.New("counts differ from the expected ones: " + strings.Join(diffs, "; "))
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapSampler polls the bytes of live and not yet swept heap objects
// (runtime/metrics, no stop-the-world) and keeps the highest value.
type heapSampler struct {
	quit chan struct{}
	peak chan uint64
}

// startHeapSampler starts polling; when on is false it only waits for stop
// and reports 0.
func startHeapSampler(on bool) *heapSampler {
	s := &heapSampler{quit: make(chan struct{}), peak: make(chan uint64)}
	if !on {
		go func() {
			<-s.quit
			s.peak <- 0
		}()
		return s
	}
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-s.quit:
				s.peak <- peak
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *heapSampler) stop() uint64 {
	close(s.quit)
	return <-s.peak
}
