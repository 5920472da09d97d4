package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/pkg/local"
	"github.com/tributary-dev/tributary/pkg/standin"
)

// topology is what the demo needs to find in the deployed template, read
// from the functions' environment so it follows the CDK app.
type topology struct {
	ingestURL   string
	eventsName  string
	countsTable string
	quarantine  string
}

func findTopology(s *local.Stack) (topology, error) {
	specs, err := s.Deployment().Functions()
	if err != nil {
		return topology{}, err
	}
	var t topology
	for _, f := range specs {
		switch f.Binary {
		case "ingest":
			t.eventsName = f.Env["EVENTS_STREAM_NAME"]
		case "aggregate":
			t.countsTable = f.Env["COUNTS_TABLE_NAME"]
		case "quarantine":
			t.quarantine = f.Env["QUARANTINE_TABLE_NAME"]
		}
	}
	t.ingestURL = s.URL("ingest")
	var missing []string
	for name, v := range map[string]string{"ingest function URL": t.ingestURL, "ingest EVENTS_STREAM_NAME": t.eventsName,
		"aggregate COUNTS_TABLE_NAME": t.countsTable, "quarantine QUARANTINE_TABLE_NAME": t.quarantine} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("the template lacks %s", strings.Join(missing, ", "))
	}
	return t, nil
}

// startStack starts (or reuses) the stand-in and brings the topology up on it.
func startStack(ctx context.Context, o *options, urlPort int) (*standin.Server, *local.Stack, error) {
	began := time.Now()
	fmt.Printf("▸ AWS stand-in on %s\n", o.addr)
	srv, err := standin.Start(ctx, standin.Options{Addr: o.addr, Reuse: true, Log: nil})
	if err != nil {
		return nil, nil, err
	}
	stackName := "Tributary"
	if srv.Reused() {
		// Something already answers there (LocalStack, or a `make local-up`):
		// give this run its own resources so earlier data cannot skew the results.
		stackName = fmt.Sprintf("Tributary-%d", time.Now().Unix())
		fmt.Printf("  reusing the endpoint already answering at %s; resources prefixed %s\n", srv.Endpoint(), stackName)
	} else {
		fmt.Printf("  moto %s started in %s\n", standin.MotoVersion, time.Since(began).Round(time.Millisecond))
	}
	var logf func(fn, line string)
	if o.verbose {
		logf = func(fn, line string) { fmt.Printf("    [%s] %s\n", fn, line) }
	}
	stack, err := local.Up(ctx, local.Options{
		Template:  o.template,
		Functions: o.bin,
		Endpoint:  srv.Endpoint(),
		Stack:     stackName,
		URLPort:   urlPort,
		Progress:  os.Stdout,
		Logs:      logf,
	})
	if err != nil {
		_ = srv.Stop()
		return nil, nil, err
	}
	return srv, stack, nil
}

func run(ctx context.Context, o *options) (err error) {
	began := time.Now()
	srv, stack, err := startStack(ctx, o, 0)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("▸ stopping functions, mappings and the stand-in")
		err = errors.Join(err, stack.Close(), srv.Stop())
	}()
	topo, err := findTopology(stack)
	if err != nil {
		return err
	}
	cfg := stack.Config()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	traffic := local.Traffic{Keys: o.keys, Minutes: o.minutes, Max: o.max, Seed: o.seed, Now: time.Now(), Skew: -3 * time.Hour}
	evs, want := traffic.Generate()
	fmt.Printf("▸ sending %d events for %d keys over %d event-time minutes to ingest %s\n", len(evs), o.keys, o.minutes, topo.ingestURL)
	fmt.Printf("  (every 4th key's device clock is 3h behind: occurredAt + (receivedAt − sentAt) puts it back)\n")
	if _, err := local.Send(ctx, topo.ingestURL, evs, 100, os.Stdout); err != nil {
		return err
	}
	fmt.Println("▸ waiting for aggregate to count them per key and minute")
	if _, err := local.WaitCounts(ctx, cfg, topo.countsTable, want, os.Stdout); err != nil {
		return err
	}

	fmt.Println("▸ a producer that bypasses ingest writes a malformed record onto the events stream")
	seq, err := local.PutRaw(ctx, cfg, topo.eventsName, "user-00", []byte(`{"id":"broken-1","key":"user-00","occurredAt":"yesterday"}`))
	if err != nil {
		return err
	}
	fmt.Printf("  sequence number %s: aggregate reports it as a batch item failure, the mapping retries,\n", seq)
	fmt.Println("  then sends the batch's metadata to the failures queue; quarantine fetches and keeps the record")
	recs, err := local.WaitQuarantined(ctx, cfg, topo.quarantine, seq)
	if err != nil {
		return err
	}
	for _, r := range recs {
		fmt.Printf("    quarantined %s seq %s condition=%s data=%q\n", r.Source[strings.LastIndex(r.Source, "/")+1:], r.SequenceNumber, r.Condition, truncate(string(r.Data), 60))
	}

	second := local.Traffic{Keys: o.keys, Minutes: o.minutes, Max: 5, Seed: o.seed + 1, Now: time.Now(), Skew: -3 * time.Hour}
	evs2, want2 := second.Generate()
	for k, v := range want2 {
		want[k] += v
	}
	fmt.Printf("▸ the shard moved on: sending %d more events\n", len(evs2))
	if _, err := local.Send(ctx, topo.ingestURL, evs2, 100, os.Stdout); err != nil {
		return err
	}
	got, err := local.WaitCounts(ctx, cfg, topo.countsTable, want, os.Stdout)
	if err != nil {
		return err
	}
	fmt.Printf("▸ per-key counts in DynamoDB table %s\n", topo.countsTable)
	bad := local.PrintCounts(os.Stdout, want, got)
	fmt.Println("▸ event source mappings")
	stack.Stats().Print(os.Stdout)
	if bad > 0 {
		return fmt.Errorf("%d (key, minute) counts differ from what was sent", bad)
	}
	fmt.Printf("▸ all %d events counted exactly; malformed record quarantined; total %s\n", want.Total(), time.Since(began).Round(time.Millisecond))
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
