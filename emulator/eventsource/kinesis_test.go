package eventsource_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/eventsource"
)

func TestKinesisItemFailureResumesFromLowestFailedRecord(t *testing.T) {
	needStandin(t)
	t.Parallel()
	stream := uniqueName(t, "")
	arn := createStream(t, stream, 1)
	failURL, failARN := createQueue(t, uniqueName(t, "-failures"), nil)
	fn, log := startFunction(t, "itemfailure", nil)

	// Poison at index 4; index 7 too, to check Lambda takes the lowest.
	data := make([]string, 10)
	for i := range data {
		data[i] = fmt.Sprintf(`{"n":%d,"poison":%v}`, i, i == 4 || i == 7)
	}
	seqs := putRecords(t, stream, "k", data...)

	var batchesMu sync.Mutex
	var batches [][]string
	p, err := eventsource.NewKinesis(awsCfg, eventsource.Settings{
		FunctionName: "faulty", SourceARN: arn, BatchSize: 10, StartingPosition: eventsource.TrimHorizon,
		ReportBatchItemFailures: true, MaximumRetryAttempts: 1, OnFailureARN: failARN, Enabled: true,
	}, fn, eventsource.ObserverFunc(func(e eventsource.Event) {
		if e.Type == eventsource.EventBatch {
			batchesMu.Lock()
			batches = append(batches, e.Records)
			batchesMu.Unlock()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)

	invs := log.invocations()
	// Observers see which records each batch carried (the local runner's
	// fan-out check counts them per mapping).
	batchesMu.Lock()
	if len(batches) != 2 || !slices.Equal(batches[0], seqs) || !slices.Equal(batches[1], seqs[4:]) {
		t.Errorf("observed batch records %v, want %v then %v", batches, seqs, seqs[4:])
	}
	batchesMu.Unlock()
	if len(invs) != 2 {
		t.Fatalf("function was invoked %d times, want 2 (the batch, then the retry from the lowest failure): %+v", len(invs), invs)
	}
	if !slices.Equal(invs[0].IDs, seqs) {
		t.Errorf("first batch = %v, want all ten records %v", invs[0].IDs, seqs)
	}
	if !slices.Equal(invs[1].IDs, seqs[4:]) {
		t.Errorf("retry = %v, want the records from the lowest failed sequence number on %v: before it nothing is redelivered", invs[1].IDs, seqs[4:])
	}
	recs := onFailureRecords(t, failURL)
	if len(recs) != 1 || recs[0].KinesisBatchInfo == nil {
		t.Fatalf("on-failure records = %+v, want one with KinesisBatchInfo", recs)
	}
	info := recs[0].KinesisBatchInfo
	if info.StartSequenceNumber != seqs[4] || info.EndSequenceNumber != seqs[9] || info.BatchSize != 6 || info.ShardID != "shardId-000000000000" || info.StreamArn != arn {
		t.Errorf("KinesisBatchInfo = %+v, want shardId-000000000000 %s..%s, 6 records, stream %s", info, seqs[4], seqs[9], arn)
	}
	if c := recs[0].RequestContext; c.Condition != eventsource.RetryAttemptsExhausted || c.ApproximateInvokeCount != 2 {
		t.Errorf("requestContext = %+v, want RetryAttemptsExhausted after 2 invocations", c)
	}

	// The shard moved on: new records are processed.
	later := putRecords(t, stream, "k", `{"n":10}`, `{"n":11}`)
	waitIdle(t, p, 20*time.Second)
	if got := log.deliveries(); got[later[0]] != 1 || got[later[1]] != 1 {
		t.Errorf("records after the given-up batch were delivered %d and %d times, want once each", got[later[0]], got[later[1]])
	}
	if s := p.Stats(); s.ItemFailures != 4 || s.OnFailure != 6 || s.Retries != 1 {
		t.Errorf("stats = %+v, want 4 item failures (2 per invocation), 6 records on failure, 1 retry", s)
	}
}

func TestKinesisBisectIsolatesThePoisonRecord(t *testing.T) {
	needStandin(t)
	t.Parallel()
	stream := uniqueName(t, "")
	arn := createStream(t, stream, 1)
	failURL, failARN := createQueue(t, uniqueName(t, "-failures"), nil)
	fn, log := startFunction(t, "error", nil)

	data := make([]string, 8)
	for i := range data {
		data[i] = fmt.Sprintf(`{"n":%d,"poison":%v}`, i, i == 5)
	}
	seqs := putRecords(t, stream, "k", data...)
	p, err := eventsource.NewKinesis(awsCfg, eventsource.Settings{
		FunctionName: "faulty", SourceARN: arn, BatchSize: 8, BisectBatchOnFunctionError: true,
		MaximumRetryAttempts: 1, OnFailureARN: failARN, Enabled: true,
	}, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)

	var sizes []int
	for _, inv := range log.invocations() {
		sizes = append(sizes, inv.Size)
	}
	// 8 fails → 4 ok, 4 fails → 2 ok... the poison alone fails, is retried
	// once (MaximumRetryAttempts 1; splitting consumed none), then the rest.
	want := []int{8, 4, 4, 2, 1, 1, 1, 2}
	if !slices.Equal(sizes, want) {
		t.Errorf("batch sizes = %v, want %v (bisection down to the poison record)", sizes, want)
	}
	got := log.deliveries()
	for i, s := range seqs {
		if i != 5 && got[s] == 0 {
			t.Errorf("good record %d (%s) never delivered", i, s)
		}
	}
	recs := onFailureRecords(t, failURL)
	if len(recs) != 1 || recs[0].KinesisBatchInfo == nil {
		t.Fatalf("on-failure records = %+v, want one", recs)
	}
	if info := recs[0].KinesisBatchInfo; info.StartSequenceNumber != seqs[5] || info.EndSequenceNumber != seqs[5] || info.BatchSize != 1 {
		t.Errorf("KinesisBatchInfo = %+v, want the poison record %s alone", info, seqs[5])
	}
	if s := p.Stats(); s.Bisects != 3 {
		t.Errorf("stats = %+v, want 3 bisections", s)
	}
}

func TestKinesisRetryLimitSendsBatchToOnFailureAndMovesOn(t *testing.T) {
	needStandin(t)
	// A crashing function (os.Exit) is handled exactly like one that returns an error.
	for _, mode := range []string{"error", "crash"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			stream := uniqueName(t, "")
			arn := createStream(t, stream, 1)
			failURL, failARN := createQueue(t, uniqueName(t, "-failures"), nil)
			fn, log := startFunction(t, mode, nil)
			seqs := putRecords(t, stream, "k", `{"n":0}`, `{"n":1}`, `{"n":2,"poison":true}`, `{"n":3}`, `{"n":4}`)
			p, err := eventsource.NewKinesis(awsCfg, eventsource.Settings{
				FunctionName: "faulty", SourceARN: arn, BatchSize: 5, MaximumRetryAttempts: 2, OnFailureARN: failARN, Enabled: true,
			}, fn, nil)
			if err != nil {
				t.Fatal(err)
			}
			run(t, p)
			waitIdle(t, p, 20*time.Second)

			invs := log.invocations()
			if len(invs) != 3 {
				t.Fatalf("invoked %d times, want 3 (1 + MaximumRetryAttempts 2)", len(invs))
			}
			for i, inv := range invs {
				if !slices.Equal(inv.IDs, seqs) {
					t.Errorf("invocation %d = %v, want the whole batch %v", i, inv.IDs, seqs)
				}
			}
			recs := onFailureRecords(t, failURL)
			if len(recs) != 1 {
				t.Fatalf("on-failure records = %+v, want one", recs)
			}
			r := recs[0]
			if r.KinesisBatchInfo == nil || r.KinesisBatchInfo.ShardID != "shardId-000000000000" ||
				r.KinesisBatchInfo.StartSequenceNumber != seqs[0] || r.KinesisBatchInfo.EndSequenceNumber != seqs[4] || r.KinesisBatchInfo.BatchSize != 5 {
				t.Errorf("KinesisBatchInfo = %+v, want shard 0, %s..%s, 5 records", r.KinesisBatchInfo, seqs[0], seqs[4])
			}
			if r.RequestContext.Condition != eventsource.RetryAttemptsExhausted || r.RequestContext.ApproximateInvokeCount != 3 ||
				r.RequestContext.FunctionArn != "arn:aws:lambda:us-east-1:123456789012:function:faulty" || r.RequestContext.RequestID == "" {
				t.Errorf("requestContext = %+v", r.RequestContext)
			}
			if r.ResponseContext.StatusCode != 200 || r.ResponseContext.FunctionError != "Unhandled" || r.Version != "1.0" {
				t.Errorf("responseContext = %+v, version %q", r.ResponseContext, r.Version)
			}
			if _, err := time.Parse("2006-01-02T15:04:05.000Z", r.KinesisBatchInfo.ApproximateArrivalOfFirstRecord); err != nil {
				t.Errorf("approximateArrivalOfFirstRecord: %v", err)
			}

			later := putRecords(t, stream, "k", `{"n":5}`, `{"n":6}`)
			waitIdle(t, p, 20*time.Second)
			if got := log.deliveries(); got[later[0]] != 1 || got[later[1]] != 1 {
				t.Errorf("the shard did not move on: later records delivered %d/%d times", got[later[0]], got[later[1]])
			}
		})
	}
}

func TestKinesisMaximumRecordAgeGivesUpOnOldRecords(t *testing.T) {
	needStandin(t)
	t.Parallel()
	stream := uniqueName(t, "")
	arn := createStream(t, stream, 1)
	failURL, failARN := createQueue(t, uniqueName(t, "-failures"), nil)
	fn, log := startFunction(t, "error", nil)
	seqs := putRecords(t, stream, "k", `{"n":0}`, `{"n":1,"poison":true}`)
	p, err := eventsource.NewKinesis(awsCfg, eventsource.Settings{
		FunctionName: "faulty", SourceARN: arn, BatchSize: 10, MaximumRetryAttempts: -1,
		MaximumRecordAge: 1500 * time.Millisecond, OnFailureARN: failARN, Enabled: true,
	}, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)

	if n := len(log.invocations()); n < 2 {
		t.Errorf("invoked %d times before the records expired; infinite retries should retry", n)
	}
	recs := onFailureRecords(t, failURL)
	if len(recs) != 1 || recs[0].KinesisBatchInfo == nil {
		t.Fatalf("on-failure records = %+v, want one", recs)
	}
	if c := recs[0].RequestContext.Condition; c != eventsource.RecordAgeExceeded {
		t.Errorf("condition = %s, want RecordAgeExceeded", c)
	}
	if info := recs[0].KinesisBatchInfo; info.StartSequenceNumber != seqs[0] || info.EndSequenceNumber != seqs[1] {
		t.Errorf("KinesisBatchInfo = %+v, want %s..%s", info, seqs[0], seqs[1])
	}
	later := putRecords(t, stream, "k", `{"n":2}`)
	waitIdle(t, p, 20*time.Second)
	if got := log.deliveries(); got[later[0]] != 1 {
		t.Errorf("the shard did not move on after the record age was exceeded")
	}
}

func TestKinesisStartingPositionLatestSkipsOlderRecords(t *testing.T) {
	needStandin(t)
	t.Parallel()
	stream := uniqueName(t, "")
	arn := createStream(t, stream, 1)
	fn, log := startFunction(t, "", nil)
	old := putRecords(t, stream, "k", `{"n":0}`)
	p, err := eventsource.NewKinesis(awsCfg, eventsource.Settings{FunctionName: "faulty", SourceARN: arn, StartingPosition: eventsource.Latest, Enabled: true}, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)
	fresh := putRecords(t, stream, "k", `{"n":1}`)
	waitIdle(t, p, 20*time.Second)
	got := log.deliveries()
	if got[old[0]] != 0 || got[fresh[0]] != 1 {
		t.Errorf("LATEST: record before Run delivered %d times (want 0), after %d times (want 1)", got[old[0]], got[fresh[0]])
	}
}

func TestKinesisParallelizationFactorKeepsOrderPerKey(t *testing.T) {
	needStandin(t)
	t.Parallel()
	stream := uniqueName(t, "")
	arn := createStream(t, stream, 1)
	fn, err := startFunctionPool(t, 3)
	if err != nil {
		t.Fatal(err)
	}
	seqsByKey := map[string][]string{}
	for i := 0; i < 4; i++ {
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			seqsByKey[k] = append(seqsByKey[k], putRecords(t, stream, k, fmt.Sprintf(`{"k":%q,"i":%d}`, k, i))...)
		}
	}
	p, err := eventsource.NewKinesis(awsCfg, eventsource.Settings{FunctionName: "faulty", SourceARN: arn, BatchSize: 2, ParallelizationFactor: 3, Enabled: true}, fn.fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)
	// Each key's records reach the function in sequence order, once each.
	pos := map[string]int{}
	for _, inv := range fn.log.invocations() {
		for _, id := range inv.IDs {
			pos[id] = len(pos)
		}
	}
	for k, seqs := range seqsByKey {
		for i, s := range seqs {
			if _, ok := pos[s]; !ok {
				t.Fatalf("key %s record %s never delivered", k, s)
			}
			if i > 0 && pos[s] < pos[seqs[i-1]] {
				t.Errorf("key %s: record %s delivered before %s", k, s, seqs[i-1])
			}
		}
	}
	if got := p.Stats().Records; got != 20 {
		t.Errorf("delivered %d records, want 20", got)
	}
}

func TestKinesisStartingPositionAtTimestamp(t *testing.T) {
	needStandin(t)
	t.Parallel()
	stream := uniqueName(t, "")
	arn := createStream(t, stream, 1)
	fn, log := startFunction(t, "", nil)
	old := putRecords(t, stream, "k", `{"n":0}`)
	time.Sleep(100 * time.Millisecond)
	at := time.Now()
	time.Sleep(100 * time.Millisecond)
	fresh := putRecords(t, stream, "k", `{"n":1}`)
	p, err := eventsource.NewKinesis(awsCfg, eventsource.Settings{FunctionName: "faulty", SourceARN: arn,
		StartingPosition: eventsource.AtTimestamp, StartingPositionTimestamp: at, Enabled: true}, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)
	got := log.deliveries()
	if got[old[0]] != 0 || got[fresh[0]] != 1 {
		t.Errorf("AT_TIMESTAMP: record before the timestamp delivered %d times (want 0), after %d times (want 1)", got[old[0]], got[fresh[0]])
	}
}

func TestKinesisBatchingWindowGathersRecords(t *testing.T) {
	needStandin(t)
	t.Parallel()
	stream := uniqueName(t, "")
	arn := createStream(t, stream, 1)
	fn, log := startFunction(t, "", nil)
	p, err := eventsource.NewKinesis(awsCfg, eventsource.Settings{FunctionName: "faulty", SourceARN: arn, BatchSize: 10,
		MaximumBatchingWindow: 800 * time.Millisecond, Enabled: true}, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)
	seqs := putRecords(t, stream, "k", `{"n":0}`)
	time.Sleep(200 * time.Millisecond)
	seqs = append(seqs, putRecords(t, stream, "k", `{"n":1}`)...)
	waitIdle(t, p, 20*time.Second)
	invs := log.invocations()
	if len(invs) != 1 || !slices.Equal(invs[0].IDs, seqs) {
		t.Errorf("invocations = %+v, want one batch with both records gathered in the batching window", invs)
	}
}
