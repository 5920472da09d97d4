package eventsource_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/emulator/eventsource"
	"github.com/tributary-dev/tributary/emulator/rie"
	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/faultyfn/fntest"
	"github.com/tributary-dev/tributary/internal/testtools"
)

// One stand-in serves the whole package (each test uses its own streams,
// tables and queues), and one build of the test function.
var (
	bootstrap string
	awsCfg    aws.Config
	noStandin string // why the stand-in is unavailable, if it is
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "eventsource-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if bootstrap, err = fntest.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := rie.Install(context.Background(), os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := exec.LookPath("python3"); err != nil {
		noStandin = "python3 is not installed, so the moto stand-in cannot be installed; install Python 3 to run this test"
		return m.Run()
	}
	srv, err := standin.Start(context.Background(), standin.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Stop()
	if awsCfg, err = standin.Config(context.Background(), srv.Endpoint()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func needStandin(t testing.TB) {
	t.Helper()
	if noStandin != "" {
		testtools.Missing(t, noStandin)
	}
}

// invocation is the line faultyfn logs for every event it is given.
type invocation struct {
	Source          string   `json:"source"`
	Size            int      `json:"size"`
	First           string   `json:"first"`
	Last            string   `json:"last"`
	IDs             []string `json:"ids"`
	Poison          []string `json:"poison"`
	Window          *struct{ Start, End string }
	State           map[string]string `json:"state"`
	Final           bool              `json:"final"`
	TerminatedEarly bool              `json:"terminatedEarly"`
}

// fnLog collects the function's invocation lines.
type fnLog struct {
	mu    sync.Mutex
	invs  []invocation
	other []string
}

func (l *fnLog) add(_, line string) {
	var v struct {
		Invocation *invocation `json:"invocation"`
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &v) == nil && v.Invocation != nil {
		l.invs = append(l.invs, *v.Invocation)
		return
	}
	l.other = append(l.other, line)
}

func (l *fnLog) invocations() []invocation {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]invocation(nil), l.invs...)
}

// deliveries counts how often each id was given to the function.
func (l *fnLog) deliveries() map[string]int {
	n := map[string]int{}
	for _, inv := range l.invocations() {
		for _, id := range inv.IDs {
			n[id]++
		}
	}
	return n
}

// startFunction runs faultyfn under RIE with FAULT_MODE mode.
func startFunction(t *testing.T, mode string, env map[string]string) (*rie.Function, *fnLog) {
	t.Helper()
	l := &fnLog{}
	e := map[string]string{"FAULT_MODE": mode}
	for k, v := range env {
		e[k] = v
	}
	fn, err := rie.Start(context.Background(), rie.Config{Name: "faulty-" + strings.ToLower(t.Name()), Bootstrap: bootstrap, Env: e, Timeout: 5 * time.Second, Logs: l.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fn.Stop() })
	return fn, l
}

type pooled struct {
	fn  *rie.Function
	log *fnLog
}

// startFunctionPool runs faultyfn (no faults) in n execution environments.
func startFunctionPool(t *testing.T, n int) (*pooled, error) {
	t.Helper()
	l := &fnLog{}
	fn, err := rie.Start(context.Background(), rie.Config{Name: "pool", Bootstrap: bootstrap, Instances: n, Logs: l.add})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = fn.Stop() })
	return &pooled{fn: fn, log: l}, nil
}

// capture is an Invoker that records payloads and answers with success.
type capture struct {
	mu       sync.Mutex
	payloads [][]byte
}

func (c *capture) Invoke(_ context.Context, payload []byte) (rie.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.payloads = append(c.payloads, append([]byte(nil), payload...))
	return rie.Result{Payload: []byte(`{}`)}, nil
}

func (c *capture) all() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.payloads...)
}

// run runs p until the test ends and fails the test if Run fails.
func run(t *testing.T, p *eventsource.Poller) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func waitIdle(t *testing.T, p *eventsource.Poller, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := p.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

func createStream(t *testing.T, name string, shards int32) string {
	t.Helper()
	ctx := context.Background()
	k := kinesis.NewFromConfig(awsCfg)
	if _, err := k.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: &name, ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatal(err)
	}
	out, err := k.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: &name})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.StreamDescriptionSummary.StreamARN)
}

// putRecords puts one record per data value, all with partition key key,
// and returns their sequence numbers.
func putRecords(t *testing.T, stream, key string, data ...string) []string {
	t.Helper()
	k := kinesis.NewFromConfig(awsCfg)
	var seqs []string
	for _, d := range data {
		out, err := k.PutRecord(context.Background(), &kinesis.PutRecordInput{StreamName: &stream, PartitionKey: &key, Data: []byte(d)})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, aws.ToString(out.SequenceNumber))
	}
	return seqs
}

func createQueue(t *testing.T, name string, attrs map[string]string) (url, arn string) {
	t.Helper()
	ctx := context.Background()
	c := sqs.NewFromConfig(awsCfg)
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl), a.Attributes["QueueArn"]
}

// drainQueue receives every message now in the queue.
func drainQueue(t *testing.T, url string) []sqstypes.Message {
	t.Helper()
	c := sqs.NewFromConfig(awsCfg)
	var msgs []sqstypes.Message
	for {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return msgs
		}
		msgs = append(msgs, out.Messages...)
	}
}

// onFailureRecord is what Lambda sends to a stream's on-failure destination.
type onFailureRecord struct {
	RequestContext struct {
		RequestID              string `json:"requestId"`
		FunctionArn            string `json:"functionArn"`
		Condition              string `json:"condition"`
		ApproximateInvokeCount int    `json:"approximateInvokeCount"`
	} `json:"requestContext"`
	ResponseContext struct {
		StatusCode      int    `json:"statusCode"`
		ExecutedVersion string `json:"executedVersion"`
		FunctionError   string `json:"functionError"`
	} `json:"responseContext"`
	Version            string     `json:"version"`
	Timestamp          string     `json:"timestamp"`
	KinesisBatchInfo   *batchInfo `json:"KinesisBatchInfo"`
	DDBStreamBatchInfo *batchInfo `json:"DDBStreamBatchInfo"`
}

type batchInfo struct {
	ShardID                         string `json:"shardId"`
	StartSequenceNumber             string `json:"startSequenceNumber"`
	EndSequenceNumber               string `json:"endSequenceNumber"`
	ApproximateArrivalOfFirstRecord string `json:"approximateArrivalOfFirstRecord"`
	ApproximateArrivalOfLastRecord  string `json:"approximateArrivalOfLastRecord"`
	BatchSize                       int    `json:"batchSize"`
	StreamArn                       string `json:"streamArn"`
}

func onFailureRecords(t *testing.T, url string) []onFailureRecord {
	t.Helper()
	var out []onFailureRecord
	for _, m := range drainQueue(t, url) {
		var r onFailureRecord
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &r); err != nil {
			t.Fatalf("on-failure message is not JSON: %v: %s", err, aws.ToString(m.Body))
		}
		out = append(out, r)
	}
	return out
}

func createTable(t *testing.T, name string) (streamARN string) {
	t.Helper()
	d := dynamodb.NewFromConfig(awsCfg)
	out, err := d.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            &name,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.TableDescription.LatestStreamArn)
}

func putItem(t *testing.T, table, id string, poison bool) {
	t.Helper()
	_, err := dynamodb.NewFromConfig(awsCfg).PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: map[string]ddbtypes.AttributeValue{
		"id":     &ddbtypes.AttributeValueMemberS{Value: id},
		"poison": &ddbtypes.AttributeValueMemberBOOL{Value: poison},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// seqLess compares sequence numbers as numbers.
func seqLess(a, b string) bool {
	x, _ := new(big.Int).SetString(a, 10)
	y, _ := new(big.Int).SetString(b, 10)
	return x.Cmp(y) < 0
}

var nameSeq atomic.Int64

// uniqueName makes resource names unique per test (and per run, with -count).
func uniqueName(t *testing.T, suffix string) string {
	n := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	if len(n) > 50 {
		n = n[len(n)-50:]
	}
	return fmt.Sprintf("%s-%d%s", strings.Trim(n, "-"), nameSeq.Add(1), suffix)
}
