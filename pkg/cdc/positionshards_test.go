package cdc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/cdc"
)

// shardedStreams is a busy table's stream: one closed shard and several
// open ones (one per partition), which moto cannot show (it gives a table's
// stream one shard). Each open shard holds pages pages of one record, and
// every GetRecords answers after delay. DescribeStream pages the shards
// three at a time.
type shardedStreams struct {
	open  int
	pages int
	delay time.Duration
	fail  string // GetRecords on this shard fails
	calls atomic.Int64
}

func shardID(i int) string { return fmt.Sprintf("shardId-%02d", i) }

func shardSeq(i, page int) string { return fmt.Sprintf("%d%05d", 100+i, page) }

// want is the position: the closed shard's ending sequence number and each
// open shard's last record.
func (s *shardedStreams) want() map[string]string {
	m := map[string]string{"shardId-closed": "99000"}
	for i := range s.open {
		m[shardID(i)] = shardSeq(i, s.pages-1)
	}
	return m
}

func (s *shardedStreams) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	all := []streamtypes.Shard{{ShardId: aws.String("shardId-closed"), SequenceNumberRange: &streamtypes.SequenceNumberRange{
		StartingSequenceNumber: aws.String("98000"), EndingSequenceNumber: aws.String("99000")}}}
	for i := range s.open {
		all = append(all, streamtypes.Shard{ShardId: aws.String(shardID(i)), SequenceNumberRange: &streamtypes.SequenceNumberRange{
			StartingSequenceNumber: aws.String(shardSeq(i, 0))}})
	}
	from := 0
	for i, sh := range all {
		if in.ExclusiveStartShardId != nil && aws.ToString(sh.ShardId) == *in.ExclusiveStartShardId {
			from = i + 1
		}
	}
	page := all[from:min(len(all), from+3)]
	out := &dynamodbstreams.DescribeStreamOutput{StreamDescription: &streamtypes.StreamDescription{StreamArn: in.StreamArn, Shards: page}}
	if from+3 < len(all) {
		out.StreamDescription.LastEvaluatedShardId = page[len(page)-1].ShardId
	}
	return out, nil
}

func (s *shardedStreams) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(aws.ToString(in.ShardId) + "/0")}, nil
}

func (s *shardedStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	s.calls.Add(1)
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var i, page int
	shard, p, _ := strings.Cut(aws.ToString(in.ShardIterator), "/")
	fmt.Sscan(strings.TrimPrefix(shard, "shardId-"), &i)
	fmt.Sscan(p, &page)
	if shard == s.fail {
		return nil, errors.New("ExpiredIteratorException: the iterator expired")
	}
	out := &dynamodbstreams.GetRecordsOutput{NextShardIterator: aws.String(fmt.Sprintf("%s/%d", shard, page+1))}
	if page < s.pages {
		out.Records = []streamtypes.Record{{Dynamodb: &streamtypes.StreamRecord{SequenceNumber: aws.String(shardSeq(i, page))}}}
	}
	return out, nil
}

// TestPositionReadsOpenShardsTogether: a busy table's stream has an open
// shard per partition, and the position read them one after another: the
// snapshot waited for the sum of every shard's read (and the function gave
// up at half its time on a table cmd/snapshot was not needed for). It now
// reads several at once: the same position, in about one shard's time.
func TestPositionReadsOpenShardsTogether(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	db, kin := dynamodb.NewFromConfig(cfg), kinesis.NewFromConfig(cfg)
	createProfiles(t, db, "profiles")
	createKinesis(t, kin, "events", 1)

	streams := &shardedStreams{open: 6, pages: 2, delay: 100 * time.Millisecond}
	var log bytes.Buffer
	h := cdc.New(kin, "events", cdc.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	start := time.Now()
	pos, _, err := h.Snapshot(context.Background(), db, streams, "profiles")
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(pos.Shards, streams.want()) {
		t.Errorf("position %v, want %v", pos.Shards, streams.want())
	}
	// Each open shard: its pages, then maxEmptyReads (3) empty pages.
	sum := time.Duration(streams.open*(streams.pages+3)) * streams.delay
	if took > sum/2 {
		t.Errorf("the position of %d open shards took %v; reading them one after another takes %v, want under half that", streams.open, took, sum)
	}
	for i := range streams.open {
		if !strings.Contains(log.String(), "read an open shard to its tip") || !strings.Contains(log.String(), "shard="+shardID(i)+" ") {
			t.Errorf("no progress line for %s:\n%s", shardID(i), log.String())
		}
	}
}

// TestPositionStopsEveryReader: when one shard's read fails, or the
// position has used half the invocation's time, the error names a shard
// and the other shards' readers stop rather than read on in the background.
func TestPositionStopsEveryReader(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	db, kin := dynamodb.NewFromConfig(cfg), kinesis.NewFromConfig(cfg)
	createProfiles(t, db, "profiles")
	createKinesis(t, kin, "events", 1)

	for _, tc := range []struct {
		name    string
		fail    string
		timeout time.Duration
		want    []string
	}{
		{"a shard's read fails", shardID(4), 0, []string{"shard " + shardID(4), "ExpiredIteratorException"}},
		{"half the invocation's time", "", 1200 * time.Millisecond, []string{"shard shardId-", "half", "cmd/snapshot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A shard takes 200 pages of 20 ms: 4 s, 24 s for the six.
			streams := &shardedStreams{open: 6, pages: 200, delay: 20 * time.Millisecond, fail: tc.fail}
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			h := cdc.New(kin, "events")
			start := time.Now()
			_, counts, err := h.Snapshot(ctx, db, streams, "profiles")
			took := time.Since(start)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v; want it to say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "context canceled") {
				t.Errorf("err = %v; want the first error, not a stopped reader's", err)
			}
			if took > 2*time.Second {
				t.Errorf("took %v; want it to stop within a shard's read (4 s)", took)
			}
			if counts.Published != 0 {
				t.Errorf("published %d records; want none", counts.Published)
			}
			calls := streams.calls.Load()
			time.Sleep(200 * time.Millisecond)
			if more := streams.calls.Load() - calls; more > 0 {
				t.Errorf("%d GetRecords calls after the snapshot returned; want the readers stopped", more)
			}
		})
	}
}
