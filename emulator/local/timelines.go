package local

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/timeline"
)

// Timelines is the deployed table–table join: its source tables and view,
// as the timeline function's environment in the template names them.
type Timelines struct {
	Tweets, Follows, View string
	db                    *dynamodb.Client
}

// FindTimelines reads the timeline function's tables from the deployment.
func (s *Stack) FindTimelines() (*Timelines, error) {
	specs, err := s.deployment.Functions()
	if err != nil {
		return nil, err
	}
	for _, f := range specs {
		if f.Binary != "timeline" {
			continue
		}
		t := &Timelines{Tweets: f.Env["TWEETS_TABLE_NAME"], Follows: f.Env["FOLLOWS_TABLE_NAME"],
			View: f.Env["TIMELINES_TABLE_NAME"], db: dynamodb.NewFromConfig(s.cfg)}
		if t.Tweets == "" || t.Follows == "" || t.View == "" {
			return nil, fmt.Errorf("the timeline function lacks TWEETS_TABLE_NAME, FOLLOWS_TABLE_NAME or TIMELINES_TABLE_NAME in the template")
		}
		return t, nil
	}
	return nil, fmt.Errorf("the template has no timeline function")
}

// timelineStep is one change to the source tables and the timeline the
// view must then converge to (the join computed by hand).
type timelineStep struct {
	say  string
	do   func(ctx context.Context) error
	user string
	want []string // tweet ids, oldest first
}

// Demo changes the tweets and follows tables step by step — tweets, a
// follow, a deletion, an unfollow — and after each waits for the timeline
// function to bring the view to the join of the tables, printing it.
func (t *Timelines) Demo(ctx context.Context, out io.Writer) error {
	base := time.Now().UTC().Truncate(time.Second)
	tweet := func(author, id string, age time.Duration, text string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := t.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &t.Tweets, Item: map[string]types.AttributeValue{
				timeline.AttrAuthorID:  &types.AttributeValueMemberS{Value: author},
				timeline.AttrTweetID:   &types.AttributeValueMemberS{Value: id},
				timeline.AttrCreatedAt: &types.AttributeValueMemberS{Value: base.Add(-age).Format(time.RFC3339)},
				timeline.AttrText:      &types.AttributeValueMemberS{Value: text},
			}})
			return err
		}
	}
	follow := func(follower, followee string, on bool) func(context.Context) error {
		key := map[string]types.AttributeValue{
			timeline.AttrFollowerID: &types.AttributeValueMemberS{Value: follower},
			timeline.AttrFolloweeID: &types.AttributeValueMemberS{Value: followee},
		}
		return func(ctx context.Context) error {
			if on {
				_, err := t.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &t.Follows, Item: key})
				return err
			}
			_, err := t.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &t.Follows, Key: key})
			return err
		}
	}
	unTweet := func(author, id string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := t.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &t.Tweets, Key: map[string]types.AttributeValue{
				timeline.AttrAuthorID: &types.AttributeValueMemberS{Value: author},
				timeline.AttrTweetID:  &types.AttributeValueMemberS{Value: id},
			}})
			return err
		}
	}
	steps := []timelineStep{
		{"ada tweets a1; bob tweets b1 and b2", func(ctx context.Context) error {
			for _, f := range []func(context.Context) error{tweet("ada", "a1", 5*time.Minute, "hello"),
				tweet("bob", "b1", 4*time.Minute, "first"), tweet("bob", "b2", 3*time.Minute, "second")} {
				if err := f(ctx); err != nil {
					return err
				}
			}
			return nil
		}, "ada", []string{"a1"}},
		{"ada follows bob: his earlier tweets join her timeline", follow("ada", "bob", true), "ada", []string{"a1", "b1", "b2"}},
		{"bob deletes b1", unTweet("bob", "b1"), "ada", []string{"a1", "b2"}},
		{"bob tweets b3", tweet("bob", "b3", time.Minute, "third"), "ada", []string{"a1", "b2", "b3"}},
		{"ada unfollows bob: his tweets leave her timeline", follow("ada", "bob", false), "ada", []string{"a1"}},
	}
	for _, s := range steps {
		fmt.Fprintf(out, "    %s\n", s.say)
		if err := s.do(ctx); err != nil {
			return fmt.Errorf("timeline demo: %s: %w", s.say, err)
		}
		got, err := t.waitFor(ctx, s.user, s.want)
		if err != nil {
			return fmt.Errorf("timeline demo: after %q: %w", s.say, err)
		}
		fmt.Fprintf(out, "      timeline(%s) = [%s]\n", s.user, strings.Join(got, " "))
	}
	return nil
}

// waitFor polls user's timeline until it lists want (oldest first) or ctx
// ends, and returns the last timeline read.
func (t *Timelines) waitFor(ctx context.Context, user string, want []string) ([]string, error) {
	var got []string
	for {
		var err error
		if got, err = t.read(ctx, user); err != nil {
			return nil, err
		}
		if slices.Equal(got, want) {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, fmt.Errorf("timeline(%s) is [%s], want [%s]: %w", user, strings.Join(got, " "), strings.Join(want, " "), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// read returns user's timeline: the tweet ids of the view, oldest first.
func (t *Timelines) read(ctx context.Context, user string) ([]string, error) {
	expr, err := expression.NewBuilder().WithKeyCondition(expression.Key(timeline.AttrUserID).Equal(expression.Value(user))).Build()
	if err != nil {
		return nil, err
	}
	out, err := t.db.Query(ctx, &dynamodb.QueryInput{TableName: &t.View, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()})
	if err != nil {
		return nil, fmt.Errorf("reading timeline(%s) from %s: %w", user, t.View, err)
	}
	ids := make([]string, 0, len(out.Items))
	for _, it := range out.Items {
		if v, ok := it[timeline.AttrTweetID].(*types.AttributeValueMemberS); ok {
			ids = append(ids, v.Value)
		}
	}
	return ids, nil
}
