package cdc_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/cdc"
)

// writeChanges makes n changes to the profiles table, 25 a call.
func writeChanges(t *testing.T, db *dynamodb.Client, table string, n int) {
	t.Helper()
	for i := 0; i < n; i += 25 {
		var reqs []ddbtypes.WriteRequest
		for j := i; j < min(n, i+25); j++ {
			reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: map[string]ddbtypes.AttributeValue{
				"userId": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprint("u-", j)}, "version": &ddbtypes.AttributeValueMemberN{Value: "1"}}}})
		}
		if _, err := db.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{table: reqs}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPositionShowsProgress: taking the position reads each open shard of
// the table's stream from its oldest record to its tip, which on a busy
// table is minutes of GetRecords before the first item is published; it
// said nothing meanwhile. It now logs each open shard it read, with the
// records read, so a person sees where the time went.
func TestPositionShowsProgress(t *testing.T) {
	ctx := context.Background()
	db, streams, kin := standIn(t)
	createProfiles(t, db, "profiles")
	createKinesis(t, kin, "events", 1)
	writeChanges(t, db, "profiles", 60)

	var log bytes.Buffer
	h := cdc.New(kin, "events", cdc.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	pos, _, err := h.Snapshot(ctx, db, streams, "profiles")
	if err != nil {
		t.Fatal(err)
	}
	records := 0
	for _, line := range strings.Split(log.String(), "\n") {
		if !strings.Contains(line, "read an open shard to its tip") {
			continue
		}
		var n int
		if _, err := fmt.Sscan(line[strings.Index(line, "records=")+len("records="):], &n); err == nil && strings.Contains(line, "shard=") {
			records += n
		}
	}
	if records != 60 {
		t.Errorf("the log counts %d records read for the position of %d shards, want the 60 changes:\n%s", records, len(pos.Shards), log.String())
	}
}

// slowStreams answers GetRecords after a delay: a stream whose open shards
// hold hours of changes.
type slowStreams struct {
	*dynamodbstreams.Client
	delay time.Duration
}

func (s slowStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Client.GetRecords(ctx, in, optFns...)
}

// TestPositionStopsBeforeTheDeadline: a position that takes more than half
// the invocation's time leaves too little for the scan: the snapshot
// function ran on until Lambda killed it ("Task timed out", no answer).
// It now stops, publishing nothing, with an error naming the shard, the
// records read and what to do instead.
func TestPositionStopsBeforeTheDeadline(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	db, streams, kin := dynamodb.NewFromConfig(cfg), dynamodbstreams.NewFromConfig(cfg), kinesis.NewFromConfig(cfg)
	createProfiles(t, db, "profiles")
	createKinesis(t, kin, "events", 1)
	writeChanges(t, db, "profiles", 5)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	h := cdc.New(kin, "events")
	_, counts, err := h.Snapshot(ctx, db, slowStreams{streams, 400 * time.Millisecond}, "profiles")
	if err == nil || !strings.Contains(err.Error(), "half") || !strings.Contains(err.Error(), "cmd/snapshot") || !strings.Contains(err.Error(), "shard") {
		t.Fatalf("err = %v; want one saying the position took half the time and to run cmd/snapshot", err)
	}
	if ctx.Err() != nil {
		t.Errorf("it stopped at the deadline (%v), not before it", ctx.Err())
	}
	if counts.Published != 0 {
		t.Errorf("published %d records; want none", counts.Published)
	}
	if got := readKinesis(t, kin, "events"); len(got) != 0 {
		t.Errorf("%d records on the stream; want none", len(got))
	}
}
