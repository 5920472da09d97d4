// Command timeline consumes the DynamoDB streams of the Tweets table
// (TWEETS_TABLE_NAME) and of the Follows table (FOLLOWS_TABLE_NAME, with its
// followers index FOLLOWERS_INDEX_NAME) and maintains their join, the
// Timelines table (TIMELINES_TABLE_NAME). The logic is in package timeline.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/timeline"
)

func main() {
	m := lambdamain.Main{Function: "timeline"}
	tables := timeline.Tables{
		Tweets:    m.RequireEnv("TWEETS_TABLE_NAME", "the DynamoDB table of tweets (authorId, tweetId)"),
		Follows:   m.RequireEnv("FOLLOWS_TABLE_NAME", "the DynamoDB table of follows (followerId, followeeId)"),
		Followers: m.RequireEnv("FOLLOWERS_INDEX_NAME", "the index of the follows table by followeeId"),
		Timelines: m.RequireEnv("TIMELINES_TABLE_NAME", "the DynamoDB table of timelines (userId, sk)"),
	}
	cfg := m.AWSConfig()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	h := timeline.New(dynamodb.NewFromConfig(cfg), tables,
		timeline.WithMetrics(metrics.New(os.Stdout, "timeline")), timeline.WithLogger(log))
	lambda.Start(h.Handle)
}
