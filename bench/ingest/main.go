package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/pkg/ingest"
)

func main() {
	requests := flag.Int("requests", 400, "requests (batches) per side")
	perRequest := flag.Int("events", 25, "events per request")
	concurrency := flag.Int("concurrency", 8, "concurrent producers")
	policy := flag.String("policy", string(ingest.Backpressure), "policy of the route posted to: buffer, backpressure or drop")
	timeout := flag.Duration("timeout", 10*time.Second, "per-request deadline, as the function's timeout")
	limit := flag.Duration("limit", 50*time.Second, "stop the whole run after this long")
	cpuRequests := flag.Int("cpu-requests", 2000, "requests per run of the handler-CPU measurement (ingest_cpu; 0 skips it)")
	cpuRuns := flag.Int("cpu-runs", 5, "runs of the handler-CPU measurement")
	flag.Parse()
	if *cpuRequests > 0 {
		if err := measureCPU(*cpuRequests, *perRequest, max(1, *cpuRuns)); err != nil {
			fmt.Fprintf(os.Stderr, "bench/ingest: handler CPU: %v\n", err)
			os.Exit(1)
		}
	}
	cfg := config{requests: *requests, perRequest: *perRequest, concurrency: *concurrency,
		policy: ingest.Policy(*policy), timeout: *timeout}
	ctx, cancel := context.WithTimeout(context.Background(), *limit)
	defer cancel()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "bench/ingest: %v\n", err)
		os.Exit(1)
	}
}

type config struct {
	requests, perRequest, concurrency int
	policy                            ingest.Policy
	timeout                           time.Duration
}

func run(ctx context.Context, cfg config) error {
	if cfg.requests < 1 || cfg.perRequest < 1 || cfg.perRequest > 500 || cfg.concurrency < 1 {
		return fmt.Errorf("-requests and -concurrency must be at least 1 and -events 1 to 500")
	}
	if _, err := ingest.ParseRoutes(fmt.Sprintf(`{"/": %q}`, cfg.policy)); err != nil {
		return fmt.Errorf("-policy: %w", err)
	}
	srv, err := standin.Start(ctx, standin.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer srv.Stop()
	awsCfg, err := standin.Config(ctx, srv.Endpoint())
	if err != nil {
		return err
	}
	client := kinesis.NewFromConfig(awsCfg)
	for _, name := range []string{"ingest-bench", "peer-bench"} {
		if err := createStream(ctx, client, name); err != nil {
			return err
		}
	}

	h := ingest.New(client, "ingest-bench", ingest.WithRoutes(map[string]ingest.Policy{"/": cfg.policy}),
		ingest.WithLogger(slog.New(slog.DiscardHandler)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: functionURL(h.Handle, cfg.timeout), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	url := "http://" + ln.Addr().String() + "/"

	bodies := make([][]byte, cfg.requests)
	batches := make([][]types.PutRecordsRequestEntry, cfg.requests)
	for i := range bodies {
		bodies[i], batches[i] = batch(i, cfg.perRequest)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.concurrency}, Timeout: cfg.timeout + 5*time.Second}

	// Warm up both paths (connections, moto's first-call costs), unmeasured.
	warm := min(cfg.requests, 2*cfg.concurrency)
	if _, err := load(ctx, warm, cfg.concurrency, func(ctx context.Context, i int) (int, error) { return post(ctx, hc, url, bodies[i]) }); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if _, err := load(ctx, warm, cfg.concurrency, func(ctx context.Context, i int) (int, error) { return putDirect(ctx, client, "peer-bench", batches[i]) }); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}

	// The two sides alternate in rounds, ingest first then peer first
	// (ABBA), so that the stand-in's drift over the run (its memory, its
	// warming up, other work on the machine) weighs on both alike.
	var in, peer result
	const rounds = 4
	for r := range rounds {
		lo, hi := r*cfg.requests/rounds, (r+1)*cfg.requests/rounds
		if lo == hi {
			continue
		}
		sides := []func() error{
			func() error {
				res, err := load(ctx, hi-lo, cfg.concurrency, func(ctx context.Context, i int) (int, error) { return post(ctx, hc, url, bodies[lo+i]) })
				in.add(res)
				return err
			},
			func() error {
				res, err := load(ctx, hi-lo, cfg.concurrency, func(ctx context.Context, i int) (int, error) {
					return putDirect(ctx, client, "peer-bench", batches[lo+i])
				})
				peer.add(res)
				return err
			},
		}
		if r%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return err
			}
		}
	}
	fmt.Printf("BENCH ingest_throughput events_per_s=%.0f p50_ms=%.1f p99_ms=%.1f requests=%d events_per_request=%d concurrency=%d policy=%s accepted=%d not_accepted=%d\n",
		in.rate(), in.pct(50), in.pct(99), cfg.requests, cfg.perRequest, cfg.concurrency, cfg.policy, in.accepted, cfg.requests*cfg.perRequest-in.accepted)
	fmt.Printf("BENCH ingest_peer_putrecords events_per_s=%.0f p50_ms=%.1f p99_ms=%.1f requests=%d accepted=%d\n",
		peer.rate(), peer.pct(50), peer.pct(99), cfg.requests, peer.accepted)
	fmt.Printf("BENCH ingest_ratio overhead=%.2f\n", peer.rate()/in.rate())
	return nil
}

func createStream(ctx context.Context, client *kinesis.Client, name string) error {
	if _, err := client.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(2)}); err != nil {
		return fmt.Errorf("creating stream %s: %w", name, err)
	}
	w := kinesis.NewStreamExistsWaiter(client, func(o *kinesis.StreamExistsWaiterOptions) { o.MinDelay = 100 * time.Millisecond })
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, 30*time.Second); err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	return nil
}

// batch is request i: its events as an ingest body and, for the peer, as
// PutRecords entries (the producer's bytes as they are).
func batch(i, n int) ([]byte, []types.PutRecordsRequestEntry) {
	now := time.Now().UTC()
	var body bytes.Buffer
	entries := make([]types.PutRecordsRequestEntry, n)
	body.WriteByte('[')
	for j := range n {
		key := fmt.Sprintf("user-%d", (i*n+j)%100)
		ev := fmt.Sprintf(`{"id":"r%d-e%d","type":"page_view","key":%q,"occurredAt":%q,"sentAt":%q,"data":{"path":"/pricing","ms":%d}}`,
			i, j, key, now.Add(-time.Second).Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), j)
		if j > 0 {
			body.WriteByte(',')
		}
		body.WriteString(ev)
		entries[j] = types.PutRecordsRequestEntry{Data: []byte(ev), PartitionKey: aws.String(key)}
	}
	body.WriteByte(']')
	return body.Bytes(), entries
}

// result is one side's measurements.
type result struct {
	wall      time.Duration
	latencies []time.Duration
	accepted  int
}

func (r *result) add(o result) {
	r.wall += o.wall
	r.latencies = append(r.latencies, o.latencies...)
	r.accepted += o.accepted
}

func (r result) rate() float64 { return float64(r.accepted) / r.wall.Seconds() }

func (r result) pct(p int) float64 {
	if len(r.latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return float64(s[max(i, 0)].Microseconds()) / 1000
}

// load runs do for 0..n-1 on c workers and times each call; do returns the
// events accepted. It stops at the first error.
func load(ctx context.Context, n, c int, do func(ctx context.Context, i int) (int, error)) (result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	lat := make([]time.Duration, n)
	var accepted atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				k, err := do(ctx, i)
				lat[i] = time.Since(t0)
				if err != nil {
					cancel(fmt.Errorf("request %d: %w", i, err))
					return
				}
				accepted.Add(int64(k))
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return result{}, err
	}
	return result{wall: time.Since(start), latencies: lat, accepted: int(accepted.Load())}, nil
}

// post sends one body to ingest and returns how many events it accepted.
// A 429 or 503 is not an error: the events not accepted are counted so.
func post(ctx context.Context, hc *http.Client, url string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	switch resp.StatusCode {
	case http.StatusAccepted, http.StatusTooManyRequests, http.StatusServiceUnavailable:
	default:
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var r ingest.Response
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("status %d, body %s: %w", resp.StatusCode, b, err)
	}
	return r.Accepted, nil
}

// putDirect is the peer: one PutRecords call, no retry.
func putDirect(ctx context.Context, client *kinesis.Client, name string, entries []types.PutRecordsRequestEntry) (int, error) {
	out, err := client.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(name), Records: entries})
	if err != nil {
		return 0, err
	}
	return len(entries) - int(aws.ToInt32(out.FailedRecordCount)), nil
}

// functionURL serves a Function URL handler over net/http: the request
// becomes an events.LambdaFunctionURLRequest (payload format 2.0, minimal)
// with a deadline of timeout, as Lambda's invoke deadline.
func functionURL(handle func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error), timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 6<<20)) // Lambda's request payload limit
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, "request body over 6 MB", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		headers := make(map[string]string, len(r.Header))
		for k, v := range r.Header {
			headers[strings.ToLower(k)] = strings.Join(v, ",")
		}
		req := events.LambdaFunctionURLRequest{
			Version:        "2.0",
			RawPath:        r.URL.Path,
			RawQueryString: r.URL.RawQuery,
			Headers:        headers,
		}
		req.RequestContext.HTTP.Method = r.Method
		req.RequestContext.HTTP.Path = r.URL.Path
		req.RequestContext.HTTP.SourceIP, _, _ = net.SplitHostPort(r.RemoteAddr)
		req.RequestContext.TimeEpoch = time.Now().UnixMilli()
		if utf8.Valid(body) {
			req.Body = string(body)
		} else {
			req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		resp, err := handle(ctx, req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out := []byte(resp.Body)
		if resp.IsBase64Encoded {
			if out, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
				http.Error(w, "handler returned invalid base64", http.StatusBadGateway)
				return
			}
		}
		for k, v := range resp.Headers {
			w.Header().Set(k, v)
		}
		status := resp.StatusCode
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		_, _ = w.Write(out)
	})
}
