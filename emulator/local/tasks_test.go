package local_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/cloudwatchlocal"
)

// TestWorkLoadBalancedPoisonDeadLetteredAndRedriven plays the work part of
// `make local` on the real template: tasks spread over several worker
// environments with each side effect once; a task whose dependency was never
// sent reaches the DLQ on its last receive with its reason, shows in the DLQ
// depth metric, and after the dependency runs, a redrive runs it exactly once.
func TestWorkLoadBalancedPoisonDeadLetteredAndRedriven(t *testing.T) {
	t.Parallel()
	stack, _ := startTopology(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	cfg := stack.Config()
	work, err := stack.FindWork()
	if err != nil {
		t.Fatal(err)
	}
	ids, err := work.SendTasks(ctx, cfg, 1, 15)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := work.WaitExecutions(ctx, cfg, ids, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if runs[id] != 1 {
			t.Errorf("%s ran %d times, want 1", id, runs[id])
		}
	}
	envs, err := work.Environments(ctx, cfg, ids)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for env, n := range envs {
		if !strings.Contains(env, "[$LATEST]") {
			t.Errorf("environment %q does not look like a Lambda log stream name", env)
		}
		total += n
	}
	if len(envs) < 2 || total != len(ids) {
		t.Errorf("tasks by environment %v: want the %d tasks spread over at least 2 environments", envs, len(ids))
	}

	since := time.Now().Add(-time.Second)
	// A missing dependency waits through the queue's receives, 6 minutes
	// apart; the worker dead-letters it on the last (the 5th).
	if _, err := stack.DeliverOnLastReceive(ctx, work, 31, 99); err != nil {
		t.Fatal(err)
	}
	if err := work.WaitDeadLettered(ctx, cfg, 1); err != nil {
		t.Fatal(err)
	}
	var listing strings.Builder
	if n, err := work.ShowDeadLetters(ctx, cfg, &listing); err != nil || n != 1 {
		t.Fatalf("DLQ listing: %d messages, %v; want 1", n, err)
	}
	for _, want := range []string{"reason: message ", "task task-031: field data.after: task task-099 has no result", "on receive 5 of 5", `Tributary.DeadLetter.ReceiveCount (Number) = "5"`} {
		if !strings.Contains(listing.String(), want) {
			t.Errorf("DLQ listing lacks %q:\n%s", want, listing.String())
		}
	}
	depth := func() float64 {
		t.Helper()
		if err := stack.PublishQueueMetrics(ctx); err != nil {
			t.Fatal(err)
		}
		v, _, ok, err := cloudwatchlocal.LatestQueueMetric(ctx, cfg, cloudwatchlocal.MetricMessagesVisible, work.DLQName, since)
		if err != nil || !ok {
			t.Fatalf("no DLQ depth metric: %v", err)
		}
		return v
	}
	if d := depth(); d != 1 {
		t.Errorf("DLQ depth metric %v, want 1", d)
	}

	if _, err := work.SendTask(ctx, cfg, 99, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := work.WaitExecutions(ctx, cfg, []string{"task-099"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	res, err := work.Redrive(ctx, cfg)
	if err != nil || res.Moved != 1 {
		t.Fatalf("redrive: %v, %v; want 1 moved", res, err)
	}
	runs, err = work.WaitExecutions(ctx, cfg, []string{"task-031"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := work.WaitDrained(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if runs["task-031"] != 1 {
		t.Errorf("task-031 ran %d times after the redrive, want 1", runs["task-031"])
	}
	time.Sleep(1100 * time.Millisecond) // the next point is in a later second
	if d := depth(); d != 0 {
		t.Errorf("DLQ depth metric %v after the redrive, want 0", d)
	}
}
