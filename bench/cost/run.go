package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/bench/internal/powertools"
	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// cost is what one run consumed.
type cost struct {
	writeRequests int
	readRequests  int
	wcu           int
	rcu           float64
	elapsed       time.Duration
}

func per1k(n float64, events int) float64 { return n * 1000 / float64(events) }

// run starts a counting stand-in and measures every workload, duplicate
// share, batch size and path.
func run(ctx context.Context, cfg config, out, log io.Writer) error {
	root, err := standin.RepoRoot()
	if err != nil {
		return err
	}
	peer, err := powertools.Prepare(ctx, root, log)
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
	dir, err := os.MkdirTemp("", "tributary-bench-cost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	for _, n := range cfg.events {
		for _, pct := range cfg.dupPcts {
			evs := withDuplicates(generate(n, cfg.keys, workloadWindow), pct)
			file := filepath.Join(dir, fmt.Sprintf("events-%d-%d.jsonl", n, pct))
			if err := powertools.WriteJSONL(file, evs); err != nil {
				return err
			}
			want, withCopies := expectedCounts(evs), countsWithCopies(evs)
			keys := keysOf(evs)
			for _, batch := range cfg.batches {
				cfg.logf(log, "powertools: %d records (%d%% copies), batch %d", len(evs), pct, batch)
				pt, err := runPowertools(ctx, db, counter, srv.Endpoint(), peer, file, batch, want)
				if err != nil {
					return fmt.Errorf("powertools, %d events, batch %d: %w", n, batch, err)
				}
				fmt.Fprintf(out, "BENCH powertools batch=%d dup_pct=%d events=%d writes=%d wcu=%d reads=%d rcu=%.1f wcu_per_1k=%.1f\n",
					batch, pct, len(evs), pt.writeRequests, pt.wcu, pt.readRequests, pt.rcu, per1k(float64(pt.wcu), len(evs)))
				for _, path := range cfg.paths {
					for _, suppress := range []bool{true, false} {
						cfg.logf(log, "tributary %s, suppression %v: %d records, batch %d", path, suppress, len(evs), batch)
						tr, err := prepareTributary(ctx, db, evs, suppress)
						if err != nil {
							return err
						}
						c, err := measure(ctx, db, counter, func() error { return tr.process(ctx, batch, path) })
						if err != nil {
							return fmt.Errorf("tributary %s, %d events, batch %d: %w", path, n, batch, err)
						}
						expect := want
						if !suppress {
							expect = withCopies
						}
						if err := tr.check(ctx, keys, expect); err != nil {
							return fmt.Errorf("tributary %s, %d events, batch %d, suppression %v: %w", path, n, batch, suppress, err)
						}
						fmt.Fprintf(out, "BENCH dedupe path=%s batch=%d dup_pct=%d suppression=%s events=%d writes=%d wcu=%d reads=%d rcu=%.1f writes_per_1k=%.1f wcu_per_1k=%.1f powertools_wcu_per_1k=%.1f ratio_wcu=%s\n",
							path, batch, pct, onOff(suppress), len(evs), c.writeRequests, c.wcu, c.readRequests, c.rcu,
							per1k(float64(c.writeRequests), len(evs)), per1k(float64(c.wcu), len(evs)), per1k(float64(pt.wcu), len(evs)), ratio(pt.wcu, c.wcu))
						if pct == 0 && suppress {
							fmt.Fprintf(out, "BENCH cost path=%s batch=%d events=%d writes=%d wcu=%d reads=%d rcu=%.1f powertools_writes=%d powertools_wcu=%d ratio_wcu=%s\n",
								path, batch, len(evs), c.writeRequests, c.wcu, c.readRequests, c.rcu, pt.writeRequests, pt.wcu, ratio(pt.wcu, c.wcu))
						}
					}
				}
			}
		}
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func keysOf(evs []stream.Envelope) []string {
	seen := map[string]bool{}
	var keys []string
	for i := range evs {
		if !seen[evs[i].Key] {
			seen[evs[i].Key] = true
			keys = append(keys, evs[i].Key)
		}
	}
	return keys
}

func ratio(a, b int) string {
	if b == 0 {
		return "inf"
	}
	return fmt.Sprintf("%.1f", float64(a)/float64(b))
}

// measure runs f with the counter reset and returns the DynamoDB requests
// and capacity units it caused.
func measure(ctx context.Context, db *dynamodb.Client, counter *standin.Counter, f func() error) (cost, error) {
	c, err := powertools.Measure(ctx, db, counter, f)
	if err != nil {
		return cost{}, err
	}
	return cost{writeRequests: c.WriteRequests, readRequests: c.ReadRequests, wcu: c.WCU, rcu: c.RCU, elapsed: c.Elapsed}, nil
}

// runPowertools runs the peer on the events in file and checks that the
// counts table ends up as want.
func runPowertools(ctx context.Context, db *dynamodb.Client, counter *standin.Counter, endpoint string, peer powertools.Peer, file string, batch int, want map[string]int) (cost, error) {
	r, err := powertools.Run(ctx, db, counter, endpoint, peer, file, batch, want)
	if err != nil {
		return cost{}, err
	}
	return cost{writeRequests: r.WriteRequests, readRequests: r.ReadRequests, wcu: r.WCU, rcu: r.RCU, elapsed: r.Elapsed}, nil
}

// sameCounts says how got differs from want (powertools.SameCounts).
func sameCounts(what string, got, want map[string]int) error {
	return powertools.SameCounts(what, got, want)
}
