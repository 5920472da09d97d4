package eventsource_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/eventsource"
)

func TestDynamoDBStreamsCheckpointAndOnFailure(t *testing.T) {
	needStandin(t)
	t.Parallel()
	table := uniqueName(t, "")
	arn := createTable(t, table)
	failURL, failARN := createQueue(t, uniqueName(t, "-failures"), nil)
	fn, log := startFunction(t, "itemfailure", nil)
	for i := 0; i < 6; i++ {
		putItem(t, table, fmt.Sprintf("item-%d", i), i == 2)
	}
	p, err := eventsource.NewDynamoDBStreams(awsCfg, eventsource.Settings{
		FunctionName: "faulty", SourceARN: arn, BatchSize: 6, ReportBatchItemFailures: true,
		MaximumRetryAttempts: 1, OnFailureARN: failARN, Enabled: true,
	}, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 20*time.Second)

	invs := log.invocations()
	if len(invs) != 2 {
		t.Fatalf("invoked %d times, want 2: %+v", len(invs), invs)
	}
	seqs := invs[0].IDs
	if len(seqs) != 6 || invs[0].Source != "aws:dynamodb" {
		t.Fatalf("first batch = %+v, want the 6 inserts", invs[0])
	}
	if len(invs[0].Poison) != 1 || invs[0].Poison[0] != seqs[2] {
		t.Fatalf("poison = %v, want the third record %s", invs[0].Poison, seqs[2])
	}
	if !slices.Equal(invs[1].IDs, seqs[2:]) {
		t.Errorf("retry = %v, want from the failed record on %v", invs[1].IDs, seqs[2:])
	}
	recs := onFailureRecords(t, failURL)
	if len(recs) != 1 || recs[0].DDBStreamBatchInfo == nil || recs[0].KinesisBatchInfo != nil {
		t.Fatalf("on-failure records = %+v, want one with DDBStreamBatchInfo", recs)
	}
	info := recs[0].DDBStreamBatchInfo
	if info.StartSequenceNumber != seqs[2] || info.EndSequenceNumber != seqs[5] || info.BatchSize != 4 || info.StreamArn != arn || info.ShardID == "" {
		t.Errorf("DDBStreamBatchInfo = %+v, want %s..%s, 4 records, stream %s", info, seqs[2], seqs[5], arn)
	}
	if _, err := time.Parse("2006-01-02T15:04:05Z", info.ApproximateArrivalOfFirstRecord); err != nil {
		t.Errorf("approximateArrivalOfFirstRecord: %v", err)
	}
	if c := recs[0].RequestContext.Condition; c != eventsource.RetryAttemptsExhausted {
		t.Errorf("condition = %s", c)
	}

	putItem(t, table, "item-later", false)
	waitIdle(t, p, 20*time.Second)
	invs = log.invocations()
	if len(invs) != 3 || invs[2].Size != 1 || !seqLess(seqs[5], invs[2].First) {
		t.Errorf("after the given-up batch the shard should move on to the new item; invocations %+v", invs)
	}
}
