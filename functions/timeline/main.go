// Command timeline consumes the DynamoDB streams of the Tweets table
// (TWEETS_TABLE_NAME) and of the Follows table (FOLLOWS_TABLE_NAME, with its
// followers index FOLLOWERS_INDEX_NAME) and maintains their join, the
// Timelines table (TIMELINES_TABLE_NAME), keeping tweet records' fan-out
// and follow records' progress in TIMELINE_FANOUT_TABLE_NAME. Records that can never be applied
// are set aside in the quarantine table (QUARANTINE_TABLE_NAME). The logic
// is in package timeline.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/timeline"
)

func main() {
	m := lambdamain.Main{Function: "timeline"}
	tables := timeline.Tables{
		Tweets:    m.RequireTable("TWEETS_TABLE_NAME", "the DynamoDB table of tweets (authorId, tweetId)"),
		Follows:   m.RequireTable("FOLLOWS_TABLE_NAME", "the DynamoDB table of follows (followerId, followeeId)"),
		Followers: m.RequireIndex("FOLLOWERS_INDEX_NAME", "the index of the follows table by followeeId"),
		Timelines: m.RequireTable("TIMELINES_TABLE_NAME", "the DynamoDB table of timelines (userId, sk)"),
		FanOut:    m.RequireTable("TIMELINE_FANOUT_TABLE_NAME", "the DynamoDB table of tweet and follow records' progress (tweet, sequenceNumber)"),
	}
	quarantine := m.RequireTable("QUARANTINE_TABLE_NAME", "the DynamoDB table records that can never be applied are set aside in")
	cfg := m.AWSConfig()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	db := dynamodb.NewFromConfig(cfg)
	mt := metrics.New(os.Stdout, "timeline")
	sink := setaside.New(db, quarantine, setaside.WithFunction(os.Getenv("AWS_LAMBDA_FUNCTION_NAME")),
		setaside.WithMetrics(mt), setaside.WithLogger(log))
	h := timeline.New(db, tables, timeline.WithMetrics(mt), timeline.WithLogger(log), timeline.WithSetAside(sink))
	lambda.Start(lambdamain.Typed(stream.EventDynamoDB, h.Handle))
}
