package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/nodepeer"
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
	dir, err := os.MkdirTemp("", "tributary-bench-cost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	for _, n := range cfg.events {
		for _, pct := range cfg.dupPcts {
			evs := withDuplicates(generate(n, cfg.keys, workloadWindow), pct)
			file := filepath.Join(dir, fmt.Sprintf("events-%d-%d.jsonl", n, pct))
			if err := writeJSONL(file, evs); err != nil {
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
	counter.Reset()
	start := time.Now()
	if err := f(); err != nil {
		return cost{}, err
	}
	elapsed := time.Since(start)
	snap := counter.Snapshot()
	wu, err := snap.WriteUnits(ctx, db)
	if err != nil {
		return cost{}, err
	}
	reads := 0
	for _, op := range []string{"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"} {
		reads += snap.Operation(op).Requests
	}
	return cost{writeRequests: snap.WriteRequests(), readRequests: reads, wcu: wu.Total, rcu: snap.ReadUnits(), elapsed: elapsed}, nil
}

// powertoolsPeer is the Powertools peer's run.mjs and the node to run it.
type powertoolsPeer = nodepeer.Peer

func preparePowertools(ctx context.Context, root string, log io.Writer) (powertoolsPeer, error) {
	return nodepeer.Prepare(ctx, root, "run.mjs", log)
}

// peerResult is what run.mjs prints.
type peerResult struct {
	Events    int            `json:"events"`
	Batches   int            `json:"batches"`
	Processed int            `json:"processed"`
	Applied   int            `json:"applied"`
	ElapsedMs float64        `json:"elapsedMs"`
	Counts    map[string]int `json:"counts"`
}

var tableRun int

// runPowertools runs the peer on the events in file against fresh tables and
// checks that the counts table ends up as want.
func runPowertools(ctx context.Context, db *dynamodb.Client, counter *standin.Counter, endpoint string, peer powertoolsPeer, file string, batch int, want map[string]int) (cost, error) {
	tableRun++
	idem, counts := fmt.Sprintf("pt-idempotency-%d", tableRun), fmt.Sprintf("pt-counts-%d", tableRun)
	if err := createPowertoolsTables(ctx, db, idem, counts); err != nil {
		return cost{}, err
	}
	var res peerResult
	c, err := measure(ctx, db, counter, func() error {
		cmd := exec.CommandContext(ctx, peer.Node, peer.Script, "--events", file, "--batch", fmt.Sprint(batch),
			"--counts-table", counts, "--idempotency-table", idem)
		cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL="+endpoint, "AWS_REGION="+standin.Region,
			"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_SESSION_TOKEN=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w\n%s", peer.Script, err, stderr.String())
		}
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			return fmt.Errorf("%s printed %q, not its JSON result: %w", peer.Script, stdout.String(), err)
		}
		return nil
	})
	if err != nil {
		return cost{}, err
	}
	if err := sameCounts("the peer's own report", res.Counts, want); err != nil {
		return cost{}, err
	}
	got, err := scanCounts(ctx, db, counts)
	if err != nil {
		return cost{}, err
	}
	if err := sameCounts("table "+counts, got, want); err != nil {
		return cost{}, err
	}
	return c, nil
}

func createPowertoolsTables(ctx context.Context, db *dynamodb.Client, idem, counts string) error {
	// Powertools' documented schema: partition key "id", TTL on "expiration".
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(idem),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	}); err != nil {
		return fmt.Errorf("create table %s: %w", idem, err)
	}
	if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(idem),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("expiration"), Enabled: aws.Bool(true)},
	}); err != nil {
		return fmt.Errorf("enable TTL on %s: %w", idem, err)
	}
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(counts),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("key"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("window"), KeyType: ddbtypes.KeyTypeRange},
		},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("key"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("window"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
	}); err != nil {
		return fmt.Errorf("create table %s: %w", counts, err)
	}
	return nil
}

// scanCounts reads the counts table as "<key>|<window>" → count.
func scanCounts(ctx context.Context, db *dynamodb.Client, table string) (map[string]int, error) {
	out := map[string]int{}
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", table, err)
		}
		for _, item := range page.Items {
			k, _ := item["key"].(*ddbtypes.AttributeValueMemberS)
			w, _ := item["window"].(*ddbtypes.AttributeValueMemberS)
			n, _ := item["count"].(*ddbtypes.AttributeValueMemberN)
			if k == nil || w == nil || n == nil {
				return nil, fmt.Errorf("scan %s: item %v lacks key, window or count", table, item)
			}
			var c int
			if _, err := fmt.Sscan(n.Value, &c); err != nil {
				return nil, fmt.Errorf("scan %s: count %q of %s|%s: %w", table, n.Value, k.Value, w.Value, err)
			}
			out[k.Value+"|"+w.Value] = c
		}
	}
	return out, nil
}

// sameCounts says how got differs from want, naming the first differences.
func sameCounts(what string, got, want map[string]int) error {
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
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	return fmt.Errorf("%s: counts differ from the expected ones: %s", what, strings.Join(diffs, "; "))
}

// writeJSONL writes one envelope per line.
func writeJSONL(file string, evs []stream.Envelope) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for i := range evs {
		if err := enc.Encode(&evs[i]); err != nil {
			return fmt.Errorf("encode record %s: %w", evs[i].ID, err)
		}
	}
	return os.WriteFile(file, b.Bytes(), 0o644)
}
