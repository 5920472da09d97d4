package handler_test

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

func kinCreate(name string) *kinesis.CreateStreamInput {
	return &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)}
}

// readResults waits for the stream and reads its records as strings.
func readResults(name string) []string {
	ctx := context.Background()
	w := kinesis.NewStreamExistsWaiter(kin, func(o *kinesis.StreamExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, 20*time.Second); err != nil {
		return []string{err.Error()}
	}
	shards, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, sh := range shards.Shards {
		it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return []string{err.Error()}
		}
		page, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			return []string{err.Error()}
		}
		for _, r := range page.Records {
			out = append(out, string(r.Data))
		}
	}
	return out
}
