// Command throughput measures the aggregate handler's decode + window +
// aggregate path on one core — a 10,000-record Kinesis batch through the
// per-interval path's accumulation, which makes no DynamoDB write — and
// runs the Benthos peer (bench/benthos, its own module) in the same run to
// print the ratio. Output: BENCH lines.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/standin"
	"github.com/tributary-dev/tributary/pkg/state"
)

const benchPipeline = `{"name":"throughput","key":"key","windows":[{"kind":"tumbling","size":"1m"}],
  "aggregates":["count"],"outOfOrderness":"5s","partitionKeyIsGroupingKey":true}`

func main() {
	n := flag.Int("records", 10000, "records in the batch")
	keys := flag.Int("keys", 50, "distinct keys")
	peer := flag.Bool("benthos", true, "also run the Benthos peer and print the ratio")
	flag.Parse()
	if err := run(*n, *keys, *peer); err != nil {
		fmt.Fprintf(os.Stderr, "throughput: %v\n", err)
		os.Exit(1)
	}
}

func run(n, keys int, peer bool) error {
	runtime.GOMAXPROCS(1) // one core, as the goal is stated
	ctx := context.Background()
	srv, err := standin.Start(ctx, standin.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer srv.Stop()
	awsCfg, err := standin.Config(ctx, srv.Endpoint())
	if err != nil {
		return err
	}
	db := dynamodb.NewFromConfig(awsCfg)
	if err := state.CreateTable(ctx, db, "throughput"); err != nil {
		return err
	}
	cfg, err := pipeline.Parse([]byte(benchPipeline))
	if err != nil {
		return err
	}
	p := aggregate.New(cfg, state.NewViews(db, "throughput", cfg.Aggregates), nil, "",
		aggregate.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	ev := batch(n, keys)
	once := func() error {
		resp, err := p.HandleInterval(ctx, ev)
		if err != nil {
			return err
		}
		if len(resp.BatchItemFailures) > 0 {
			return fmt.Errorf("batch reported failures %v", resp.BatchItemFailures)
		}
		return nil
	}
	if err := once(); err != nil { // warm: loads the (empty) watermark once, as a warm container has
		return err
	}
	var runErr error
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := once(); err != nil {
				runErr = err
				b.FailNow()
			}
		}
	})
	if runErr != nil {
		return runErr
	}
	nsPerBatch := float64(res.NsPerOp())
	peak := peakHeap(once)
	tribRate := float64(n) / (nsPerBatch / 1e9)
	fmt.Printf("BENCH throughput_tributary records=%d keys=%d records_per_s=%.0f ns_per_record=%.0f batch_cpu_ms=%.1f allocs_per_record=%.1f bytes_per_record=%.0f peak_heap_mb=%.1f\n",
		n, keys, tribRate, nsPerBatch/float64(n), nsPerBatch/1e6, float64(res.AllocsPerOp())/float64(n), float64(res.AllocedBytesPerOp())/float64(n), peak/1e6)
	if !peer {
		return nil
	}
	benthosRate, line, err := runBenthos(n, keys)
	if err != nil {
		return err
	}
	fmt.Println(line)
	fmt.Printf("BENCH throughput_ratio records=%d tributary_per_benthos=%.1f\n", n, tribRate/benthosRate)
	return nil
}

// peakHeap is the most heap in use while one batch runs (GC off during it).
func peakHeap(fn func() error) float64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	old := debug.SetGCPercent(-1)
	_ = fn()
	runtime.ReadMemStats(&after)
	debug.SetGCPercent(old)
	return float64(after.HeapAlloc)
}

func batch(n, keys int) events.KinesisTimeWindowEvent {
	base := time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)
	var ev events.KinesisTimeWindowEvent
	ev.ShardID = "shardId-000000000000"
	for i := 0; i < n; i++ {
		t := base.Add(time.Duration(i) * 50 * time.Minute / time.Duration(n) / 60)
		env := map[string]any{"id": fmt.Sprintf("e-%d", i), "type": "page_view", "key": fmt.Sprintf("user-%02d", i%keys),
			"occurredAt": t.Format(time.RFC3339Nano), "sentAt": t.Format(time.RFC3339Nano), "receivedAt": t.Add(80 * time.Millisecond).Format(time.RFC3339Nano),
			"data": map[string]any{"page": "/p", "ms": 100 + i%900}}
		data, _ := json.Marshal(env)
		seq := fmt.Sprintf("49600000000000000000000000000000000000000%015d", i+1)
		ev.Records = append(ev.Records, events.KinesisEventRecord{EventID: "shardId-000000000000:" + seq, EventSource: "aws:kinesis",
			Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: env["key"].(string), Data: data}})
	}
	return ev
}

var benthosLine = regexp.MustCompile(`(?m)^BENCH throughput_benthos .*?records_per_s=([0-9.]+).*$`)

func runBenthos(n, keys int) (float64, string, error) {
	root, err := standin.RepoRoot()
	if err != nil {
		return 0, "", err
	}
	cmd := exec.Command("go", "run", ".", "-records", strconv.Itoa(n), "-keys", strconv.Itoa(keys))
	cmd.Dir = filepath.Join(root, "bench", "benthos")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, "", fmt.Errorf("benthos peer: %w", err)
	}
	m := benthosLine.FindSubmatch(out)
	if m == nil {
		return 0, "", fmt.Errorf("benthos peer printed no throughput line:\n%s", out)
	}
	rate, err := strconv.ParseFloat(string(m[1]), 64)
	return rate, string(m[0]), err
}
