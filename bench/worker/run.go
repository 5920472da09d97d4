package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/nodepeer"
	"github.com/tributary-dev/tributary/pkg/idempotency"
	"github.com/tributary-dev/tributary/pkg/worker"
)

// functionName is the Go worker's function name (the idempotency key prefix).
const functionName = "bench-worker"

// result is what one variant cost.
type result struct {
	requests  int
	latencies []time.Duration
	elapsed   time.Duration
}

func (r result) perMsg(n int) float64 { return float64(r.requests) / float64(n) }

// line is the variant's BENCH line.
func (r result) line(name string, n, batch int) string {
	return fmt.Sprintf("BENCH %s messages=%d dynamodb_requests_per_msg=%.2f p50_ms=%.2f p99_ms=%.2f batch=%d dynamodb_requests=%d elapsed_ms=%d",
		name, n, r.perMsg(n), ms(percentile(r.latencies, 50)), ms(percentile(r.latencies, 99)), batch, r.requests, r.elapsed.Milliseconds())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile is the nearest-rank p-th percentile of ds (0 when empty).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100 // ceil(p/100 · n)
	return s[max(rank, 1)-1]
}

// run starts a counting stand-in and measures the three variants on the same
// messages.
func run(ctx context.Context, cfg config, out, log io.Writer) error {
	root, err := standin.RepoRoot()
	if err != nil {
		return err
	}
	peer, err := preparePowertools(ctx, root, log)
	if err != nil {
		return err
	}
	srv, counter, err := standin.StartCounting(ctx, standin.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer srv.Stop()
	awsCfg, err := standin.Config(ctx, srv.Endpoint())
	if err != nil {
		return err
	}
	db := dynamodb.NewFromConfig(awsCfg)
	tasks := generate(cfg.messages)
	n := len(tasks)
	for _, t := range []string{"idem-go", "idem-powertools"} {
		if err := idempotency.CreateTable(ctx, db, t); err != nil {
			return err
		}
	}
	for _, t := range []string{"results-idempotency", "results-plain", "results-powertools"} {
		if err := worker.CreateResultsTable(ctx, db, t); err != nil {
			return err
		}
	}

	cfg.logf(log, "tributary with idempotency: %d messages", n)
	store, err := idempotency.New(db, "idem-go", worker.IdempotencyConfig(functionName))
	if err != nil {
		return err
	}
	idem, err := measure(counter, func() (result, error) { return runGo(ctx, db, store, "results-idempotency", tasks, cfg.batch, log) })
	if err != nil {
		return fmt.Errorf("tributary with idempotency: %w", err)
	}
	cfg.logf(log, "tributary without idempotency: %d messages", n)
	plain, err := measure(counter, func() (result, error) { return runGo(ctx, db, passThrough{}, "results-plain", tasks, cfg.batch, log) })
	if err != nil {
		return fmt.Errorf("tributary without idempotency: %w", err)
	}
	cfg.logf(log, "powertools: %d messages", n)
	pt, err := measure(counter, func() (result, error) {
		return runPowertools(ctx, peer, srv.Endpoint(), "idem-powertools", "results-powertools", tasks, cfg.batch)
	})
	if err != nil {
		return fmt.Errorf("powertools: %w", err)
	}
	for table, what := range map[string]string{"results-idempotency": "tributary with idempotency", "results-plain": "tributary without idempotency", "results-powertools": "powertools"} {
		got, err := scanResults(ctx, db, table)
		if err != nil {
			return err
		}
		if err := exactlyOnce(got, tasks); err != nil {
			return fmt.Errorf("%s: table %s: %w", what, table, err)
		}
	}

	fmt.Fprintln(out, idem.line("worker_idempotency", n, cfg.batch))
	fmt.Fprintln(out, plain.line("worker_no_idempotency", n, cfg.batch))
	fmt.Fprintln(out, pt.line("worker_powertools", n, cfg.batch))
	ratio := "inf"
	if idem.requests > 0 {
		ratio = fmt.Sprintf("%.2f", float64(pt.requests)/float64(idem.requests))
	}
	fmt.Fprintf(out, "BENCH worker_ratio idempotency_overhead_requests=%.2f powertools_per_tributary_requests=%s\n",
		idem.perMsg(n)-plain.perMsg(n), ratio)
	return nil
}

// measure runs f with the counter reset and adds the DynamoDB requests it
// caused, failed ones (conditional checks) included.
func measure(counter *standin.Counter, f func() (result, error)) (result, error) {
	counter.Reset()
	start := time.Now()
	r, err := f()
	if err != nil {
		return result{}, err
	}
	r.elapsed = time.Since(start)
	for _, op := range counter.Snapshot().DynamoDB {
		r.requests += op.Requests
	}
	return r, nil
}

// doer is what worker.New takes as its idempotency layer.
type doer interface {
	Do(ctx context.Context, payload []byte, fn func(ctx context.Context) ([]byte, error)) ([]byte, error)
}

var _ doer = (*idempotency.Store)(nil)

// passThrough is no idempotency layer: every message runs its side effect.
type passThrough struct{}

func (passThrough) Do(ctx context.Context, _ []byte, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	return fn(ctx)
}

// timed records how long each call of the layer it wraps takes.
type timed struct {
	next      doer
	latencies []time.Duration
}

func (t *timed) Do(ctx context.Context, payload []byte, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	start := time.Now()
	out, err := t.next.Do(ctx, payload, fn)
	t.latencies = append(t.latencies, time.Since(start))
	return out, err
}

// runGo calls pkg/worker's handler with the tasks in SQS events of batch
// messages, as Lambda would, and fails on any reported message.
func runGo(ctx context.Context, db *dynamodb.Client, layer doer, results string, tasks []task, batch int, log io.Writer) (result, error) {
	t := &timed{next: layer}
	h := worker.New(t, db, results, worker.WithLogger(slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	for _, ev := range sqsEvents(tasks, batch) {
		// A Lambda invocation has a deadline; the idempotency lock ends there.
		ictx, cancel := context.WithTimeout(ctx, time.Minute)
		resp, err := h.Handle(ictx, ev)
		cancel()
		if err != nil {
			return result{}, err
		}
		if len(resp.BatchItemFailures) > 0 {
			return result{}, fmt.Errorf("the handler reported %d of %d messages failed, first %s",
				len(resp.BatchItemFailures), len(ev.Records), resp.BatchItemFailures[0].ItemIdentifier)
		}
	}
	if len(t.latencies) != len(tasks) {
		return result{}, fmt.Errorf("%d of %d messages reached the idempotency layer", len(t.latencies), len(tasks))
	}
	return result{latencies: t.latencies}, nil
}

// powertoolsPeer is the Powertools peer's worker.mjs and the node to run it.
type powertoolsPeer = nodepeer.Peer

func preparePowertools(ctx context.Context, root string, log io.Writer) (powertoolsPeer, error) {
	return nodepeer.Prepare(ctx, root, "worker.mjs", log)
}

// peerReport is what worker.mjs prints.
type peerReport struct {
	Messages    int       `json:"messages"`
	Batches     int       `json:"batches"`
	Applied     int       `json:"applied"`
	LatenciesMs []float64 `json:"latenciesMs"`
}

// runPowertools runs the peer on the tasks' bodies, fed on stdin one per line.
func runPowertools(ctx context.Context, peer powertoolsPeer, endpoint, idem, results string, tasks []task, batch int) (result, error) {
	var in bytes.Buffer
	for _, t := range tasks {
		in.WriteString(t.body)
		in.WriteByte('\n')
	}
	cmd := exec.CommandContext(ctx, peer.Node, peer.Script, "--batch", fmt.Sprint(batch),
		"--results-table", results, "--idempotency-table", idem)
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL="+endpoint, "AWS_REGION="+standin.Region,
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_SESSION_TOKEN=")
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = &in, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%s: %w\n%s", peer.Script, err, stderr.String())
	}
	var rep peerReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return result{}, fmt.Errorf("%s printed %q, not its JSON report: %w", peer.Script, stdout.String(), err)
	}
	if rep.Messages != len(tasks) || rep.Applied != len(tasks) || len(rep.LatenciesMs) != len(tasks) {
		return result{}, fmt.Errorf("%s handled %d messages, applied %d, timed %d; want %d of each",
			peer.Script, rep.Messages, rep.Applied, len(rep.LatenciesMs), len(tasks))
	}
	r := result{latencies: make([]time.Duration, len(rep.LatenciesMs))}
	for i, l := range rep.LatenciesMs {
		r.latencies[i] = time.Duration(l * float64(time.Millisecond))
	}
	return r, nil
}

// item is a results item as the side effect leaves it.
type item struct {
	digest     string
	executions string
}

// scanResults reads a results table by task id.
func scanResults(ctx context.Context, db *dynamodb.Client, table string) (map[string]item, error) {
	out := map[string]item{}
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", table, err)
		}
		for _, it := range page.Items {
			id, _ := it[worker.AttrTaskID].(*ddbtypes.AttributeValueMemberS)
			d, _ := it[worker.AttrDigest].(*ddbtypes.AttributeValueMemberS)
			x, _ := it[worker.AttrExecutions].(*ddbtypes.AttributeValueMemberN)
			if id == nil || d == nil || x == nil {
				return nil, fmt.Errorf("scan %s: item %v lacks %s, %s or %s", table, it, worker.AttrTaskID, worker.AttrDigest, worker.AttrExecutions)
			}
			out[id.Value] = item{digest: d.Value, executions: x.Value}
		}
	}
	return out, nil
}

// exactlyOnce says how got differs from one item per task with executions 1
// and the task's digest, naming the first differences.
func exactlyOnce(got map[string]item, tasks []task) error {
	var diffs []string
	want := map[string]bool{}
	for _, t := range tasks {
		want[t.id] = true
		it, ok := got[t.id]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("task %s: no result", t.id))
		case it.executions != "1":
			diffs = append(diffs, fmt.Sprintf("task %s: %s executions, want 1", t.id, it.executions))
		case it.digest != t.digest:
			diffs = append(diffs, fmt.Sprintf("task %s: digest %s, want %s", t.id, it.digest, t.digest))
		}
	}
	for id := range got {
		if !want[id] {
			diffs = append(diffs, fmt.Sprintf("task %s: a result for a task never sent", id))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	slices.Sort(diffs)
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	return fmt.Errorf("side effects not exactly once: %s", strings.Join(diffs, "; "))
}
