package powertools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/nodepeer"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Cost is what one measured span consumed in DynamoDB.
type Cost struct {
	WriteRequests int
	ReadRequests  int
	WCU           int
	RCU           float64
	Elapsed       time.Duration
	// WCUByTable and WriteRequestsByTable split WCU and WriteRequests by
	// table.
	WCUByTable           map[string]int
	WriteRequestsByTable map[string]int
}

// Measure runs f with the counter reset and returns the DynamoDB requests
// and capacity units it caused (write units by standin.Counts.WriteUnits,
// read units by standin.Counts.ReadUnits).
func Measure(ctx context.Context, db *dynamodb.Client, counter *standin.Counter, f func() error) (Cost, error) {
	counter.Reset()
	start := time.Now()
	if err := f(); err != nil {
		return Cost{}, err
	}
	elapsed := time.Since(start)
	snap := counter.Snapshot()
	wu, err := snap.WriteUnits(ctx, db)
	if err != nil {
		return Cost{}, err
	}
	reads := 0
	for _, op := range []string{"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"} {
		reads += snap.Operation(op).Requests
	}
	byTable := map[string]int{}
	for t := range snap.Tables {
		byTable[t] = snap.TableWriteRequests(t)
	}
	return Cost{WriteRequests: snap.WriteRequests(), ReadRequests: reads, WCU: wu.Total, RCU: snap.ReadUnits(), Elapsed: elapsed,
		WCUByTable: wu.ByTable, WriteRequestsByTable: byTable}, nil
}

// Peer is the Powertools peer's run.mjs and the node to run it.
type Peer = nodepeer.Peer

// Prepare finds node and the peer's script under root, installing its
// packages when they are missing (nodepeer.Prepare).
func Prepare(ctx context.Context, root string, log io.Writer) (Peer, error) {
	return nodepeer.Prepare(ctx, root, "run.mjs", log)
}

// Result is a measured run of the peer and the tables it wrote.
type Result struct {
	Cost
	IdempotencyTable, CountsTable string
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

var tableRun atomic.Int64

// Run runs the peer on the events in file (one envelope per line, see
// WriteJSONL) in batches of batch against fresh tables on the stand-in at
// endpoint, and checks that the counts table ends up as want
// ("<key>|<minute, RFC 3339 UTC>" → count).
func Run(ctx context.Context, db *dynamodb.Client, counter *standin.Counter, endpoint string, peer Peer, file string, batch int, want map[string]int) (Result, error) {
	n := tableRun.Add(1)
	idem, counts := fmt.Sprintf("pt-idempotency-%d-%d", os.Getpid(), n), fmt.Sprintf("pt-counts-%d-%d", os.Getpid(), n)
	if err := createTables(ctx, db, idem, counts); err != nil {
		return Result{}, err
	}
	var res peerResult
	c, err := Measure(ctx, db, counter, func() error {
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
		return Result{}, err
	}
	if err := SameCounts("the peer's own report", res.Counts, want); err != nil {
		return Result{}, err
	}
	got, err := scanCounts(ctx, db, counts)
	if err != nil {
		return Result{}, err
	}
	if err := SameCounts("table "+counts, got, want); err != nil {
		return Result{}, err
	}
	return Result{Cost: c, IdempotencyTable: idem, CountsTable: counts}, nil
}

func createTables(ctx context.Context, db *dynamodb.Client, idem, counts string) error {
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

// SameCounts says how got differs from want, naming the first differences.
func SameCounts(what string, got, want map[string]int) error {
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

// WriteJSONL writes one envelope per line: the peer's input.
func WriteJSONL(file string, evs []stream.Envelope) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for i := range evs {
		if err := enc.Encode(&evs[i]); err != nil {
			return fmt.Errorf("encode record %s: %w", evs[i].ID, err)
		}
	}
	return os.WriteFile(file, b.Bytes(), 0o644)
}
