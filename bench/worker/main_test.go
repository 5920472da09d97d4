package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/testtools"
	"github.com/tributary-dev/tributary/pkg/idempotency"
	"github.com/tributary-dev/tributary/pkg/worker"
)

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	testtools.Need(t, "the Powertools peer needs Node 20+ and the stand-in needs Python 3", tools...)
}

// The whole driver on 20 messages: the three variants really run against the
// counting stand-in, each leaves every task's result exactly once (run fails
// otherwise), and the requests per message are what each layer makes: the
// side effect alone, and a conditional put, the side effect and the
// COMPLETED update with idempotency, for Tributary and Powertools alike.
func TestDriver(t *testing.T) {
	t.Parallel()
	needTools(t, "node", "python3")
	var out, log bytes.Buffer
	if err := run(context.Background(), config{messages: 20, batch: 10, verbose: true}, &out, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		`^BENCH worker_idempotency messages=20 dynamodb_requests_per_msg=3\.00 p50_ms=(\d+\.\d\d) p99_ms=(\d+\.\d\d) batch=10 dynamodb_requests=60 elapsed_ms=\d+$`,
		`^BENCH worker_no_idempotency messages=20 dynamodb_requests_per_msg=1\.00 p50_ms=(\d+\.\d\d) p99_ms=(\d+\.\d\d) batch=10 dynamodb_requests=20 elapsed_ms=\d+$`,
		`^BENCH worker_powertools messages=20 dynamodb_requests_per_msg=3\.00 p50_ms=(\d+\.\d\d) p99_ms=(\d+\.\d\d) batch=10 dynamodb_requests=60 elapsed_ms=\d+$`,
		`^BENCH worker_ratio idempotency_overhead_requests=2\.00 powertools_per_tributary_requests=1\.00$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("printed %q, want %d BENCH lines", out.String(), len(want))
	}
	for i, re := range want {
		m := regexp.MustCompile(re).FindStringSubmatch(lines[i])
		if m == nil {
			t.Errorf("line %d = %q, want it to match %s", i+1, lines[i], re)
			continue
		}
		if len(m) < 3 {
			continue
		}
		p50, _ := strconv.ParseFloat(m[1], 64)
		p99, _ := strconv.ParseFloat(m[2], 64)
		if p50 <= 0 || p99 < p50 {
			t.Errorf("line %d = %q: p50 must be positive and p99 at least p50", i+1, lines[i])
		}
	}
}

// The exactly-once check catches a side effect that ran twice: a batch
// delivered twice runs the task twice without the idempotency layer, and once
// with it.
func TestRedeliveryRunsTheSideEffectOnceOnlyWithIdempotency(t *testing.T) {
	t.Parallel()
	needTools(t, "python3")
	ctx := context.Background()
	db := dynamodb.NewFromConfig(standintest.Config(t, standintest.Start(t)))
	for _, tb := range []string{"results-idempotency", "results-plain"} {
		if err := worker.CreateResultsTable(ctx, db, tb); err != nil {
			t.Fatal(err)
		}
	}
	if err := idempotency.CreateTable(ctx, db, "idem"); err != nil {
		t.Fatal(err)
	}
	store, err := idempotency.New(db, "idem", worker.IdempotencyConfig(functionName))
	if err != nil {
		t.Fatal(err)
	}
	tasks := generate(3)
	tests := []struct {
		name, table string
		layer       doer
		wantErr     string
	}{
		{"idempotency", "results-idempotency", store, ""},
		{"no idempotency", "results-plain", passThrough{}, "task task-00000: 2 executions, want 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 {
				if _, err := runGo(ctx, db, tt.layer, tt.table, tasks, 2, io.Discard); err != nil {
					t.Fatal(err)
				}
			}
			got, err := scanResults(ctx, db, tt.table)
			if err != nil {
				t.Fatal(err)
			}
			err = exactlyOnce(got, tasks)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("exactlyOnce: %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("exactlyOnce: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestExactlyOnce(t *testing.T) {
	tasks := generate(2)
	good := map[string]item{tasks[0].id: {tasks[0].digest, "1"}, tasks[1].id: {tasks[1].digest, "1"}}
	tests := []struct {
		name    string
		edit    func(map[string]item)
		wantErr string
	}{
		{"each once", func(map[string]item) {}, ""},
		{"missing", func(m map[string]item) { delete(m, tasks[1].id) }, "task task-00001: no result"},
		{"twice", func(m map[string]item) { m[tasks[0].id] = item{tasks[0].digest, "2"} }, "task task-00000: 2 executions, want 1"},
		{"wrong digest", func(m map[string]item) { m[tasks[1].id] = item{"ab", "1"} }, "task task-00001: digest ab, want " + tasks[1].digest},
		{"stranger", func(m map[string]item) { m["task-x"] = item{"ab", "1"} }, "task task-x: a result for a task never sent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]item{}
			for k, v := range good {
				got[k] = v
			}
			tt.edit(got)
			err := exactlyOnce(got, tasks)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("exactlyOnce: %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("exactlyOnce: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		ds   []time.Duration
		p    int
		want time.Duration
	}{
		{ds, 50, 50 * time.Millisecond},
		{ds, 99, 99 * time.Millisecond},
		{ds, 100, 100 * time.Millisecond},
		{ds[:1], 99, 100 * time.Millisecond},
		{nil, 50, 0},
	}
	for _, tt := range tests {
		if got := percentile(tt.ds, tt.p); got != tt.want {
			t.Errorf("percentile(%d durations, %d) = %v, want %v", len(tt.ds), tt.p, got, tt.want)
		}
	}
}
