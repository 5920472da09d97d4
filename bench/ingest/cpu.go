package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/ingest"
	"github.com/tributary-dev/tributary/pkg/metrics"
)

// The handler's own CPU, with no stand-in behind it: the Function URL
// event's bytes as Lambda hands them to the runtime go through
// lambda.NewHandler(h.Handle) — aws-lambda-go's decode of the event into
// events.LambdaFunctionURLRequest, the handler, the encode of its response,
// as lambda.Start does — with an in-process Kinesis that accepts every
// record (the SDK's serialization and HTTP are left out, on both sides).
// The floor does only what any function in ingest's place must: decode the
// same event, split the body into its events and build the PutRecords
// request (data and partition key per event), handed to the same Kinesis.
// Both are timed by process CPU on one core, the median of runs.

// acceptAll is an in-process Kinesis PutRecords that accepts every record.
type acceptAll struct {
	mu  sync.Mutex
	seq int
}

func (k *acceptAll) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := &kinesis.PutRecordsOutput{Records: make([]types.PutRecordsResultEntry, len(in.Records)), FailedRecordCount: aws.Int32(0)}
	for i := range in.Records {
		k.seq++
		out.Records[i] = types.PutRecordsResultEntry{SequenceNumber: aws.String(strconv.Itoa(k.seq)), ShardId: aws.String("shardId-000000000000")}
	}
	return out, nil
}

// functionURLEvent is request body as the Function URL event Lambda
// delivers (payload format 2.0), as JSON.
func functionURLEvent(body []byte) ([]byte, error) {
	req := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/", RawQueryString: "",
		Headers: map[string]string{"content-type": "application/json", "host": "abcdefghij.lambda-url.us-east-1.on.aws",
			"user-agent": "producer/1.0", "x-forwarded-proto": "https", "x-forwarded-for": "203.0.113.7", "content-length": strconv.Itoa(len(body))},
		Body: string(body),
	}
	req.RequestContext.AccountID = "anonymous"
	req.RequestContext.RequestID = "c3a1f2de-8c4b-4b9e-9a57-2d1f0e6b7a11"
	req.RequestContext.DomainName = "abcdefghij.lambda-url.us-east-1.on.aws"
	req.RequestContext.DomainPrefix = "abcdefghij"
	req.RequestContext.Time = "29/Nov/2026:10:41:00 +0000"
	req.RequestContext.TimeEpoch = 1796208060000
	req.RequestContext.HTTP.Method = "POST"
	req.RequestContext.HTTP.Path = "/"
	req.RequestContext.HTTP.Protocol = "HTTP/1.1"
	req.RequestContext.HTTP.SourceIP = "203.0.113.7"
	req.RequestContext.HTTP.UserAgent = "producer/1.0"
	return json.Marshal(req)
}

// floorPut is the floor: decode the event, split the body, build and hand
// over the PutRecords request.
func floorPut(ctx context.Context, k *acceptAll, stream string, raw []byte) error {
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return err
	}
	var evs []json.RawMessage
	if err := json.Unmarshal([]byte(req.Body), &evs); err != nil {
		return err
	}
	in := &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: make([]types.PutRecordsRequestEntry, len(evs))}
	for i, e := range evs {
		var key struct {
			Key string `json:"key"`
		}
		if err := json.Unmarshal(e, &key); err != nil {
			return err
		}
		in.Records[i] = types.PutRecordsRequestEntry{Data: e, PartitionKey: aws.String(key.Key)}
	}
	_, err := k.PutRecords(ctx, in)
	return err
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuPerEvent runs do over every request once per run and returns the
// median and range of CPU microseconds per event.
func cpuPerEvent(runs, events int, reqs [][]byte, do func(raw []byte) error) (med, lo, hi float64, err error) {
	var per []float64
	for range runs {
		runtime.GC()
		c0 := processCPU()
		for _, raw := range reqs {
			if err := do(raw); err != nil {
				return 0, 0, 0, err
			}
		}
		per = append(per, float64((processCPU()-c0).Nanoseconds())/1000/float64(events))
	}
	slices.Sort(per)
	return per[len(per)/2], per[0], per[len(per)-1], nil
}

// measureCPU prints the BENCH ingest_cpu line.
func measureCPU(requests, perRequest, runs int) error {
	prev := runtime.GOMAXPROCS(1) // one core
	defer runtime.GOMAXPROCS(prev)
	ctx := context.Background()
	k := &acceptAll{}
	opts, err := ingest.EnvOptions(ctx, func(string) string { return "" }, ingest.Clients{})
	if err != nil {
		return err
	}
	h := ingest.New(k, "events", append(opts, ingest.WithLogger(slog.New(slog.DiscardHandler)), ingest.WithMetrics(metrics.New(discard{}, "ingest")))...)
	handler := lambda.NewHandler(h.Handle)
	reqs := make([][]byte, requests)
	for i := range reqs {
		body, _ := batch(i, perRequest)
		if reqs[i], err = functionURLEvent(body); err != nil {
			return err
		}
	}
	// Check once, outside the measured spans, that ingest accepts every event.
	out, err := handler.Invoke(ctx, reqs[0])
	if err != nil {
		return err
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != 202 {
		return fmt.Errorf("ingest answered %s (%v), want 202", out, err)
	}
	var r ingest.Response
	if err := json.Unmarshal([]byte(resp.Body), &r); err != nil || r.Accepted != perRequest {
		return fmt.Errorf("ingest accepted %d of %d events (%v): %s", r.Accepted, perRequest, err, resp.Body)
	}
	total := requests * perRequest
	in, inLo, inHi, err := cpuPerEvent(runs, total, reqs, func(raw []byte) error {
		_, err := handler.Invoke(ctx, raw)
		return err
	})
	if err != nil {
		return err
	}
	fl, flLo, flHi, err := cpuPerEvent(runs, total, reqs, func(raw []byte) error { return floorPut(ctx, k, "events", raw) })
	if err != nil {
		return err
	}
	fmt.Printf("BENCH ingest_cpu us_per_event=%.2f us_per_event_min=%.2f us_per_event_max=%.2f floor_us_per_event=%.2f floor_min=%.2f floor_max=%.2f floor_ratio=%.2f events_per_request=%d requests=%d runs=%d\n",
		in, inLo, inHi, fl, flLo, flHi, in/fl, perRequest, requests, runs)
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
