package timeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/metrics"
)

// Attribute names of the source tables and of the view.
const (
	AttrAuthorID   = "authorId"
	AttrTweetID    = "tweetId"
	AttrCreatedAt  = "createdAt"
	AttrText       = "text"
	AttrFollowerID = "followerId"
	AttrFolloweeID = "followeeId"
	AttrUserID     = "userId"
	AttrSortKey    = "sk"
)

// MaxFanIn is how many of a user's latest tweets (by tweetId, descending) a
// new follow adds to the follower's timeline.
const MaxFanIn = 100

// maxRounds bounds the re-check loop of one entry; past it the sources keep
// changing under the handler and the record is retried later.
const maxRounds = 5

// deadlineMargin is the time Handle keeps before the invoke deadline to
// answer with its batch response.
const deadlineMargin = 500 * time.Millisecond

// ErrUnknownRecord is the reason a stream record whose keys are neither a
// tweet's nor a follow's is reported as failed.
var ErrUnknownRecord = errors.New("timeline: record keys are neither a tweet (authorId, tweetId) nor a follow (followerId, followeeId)")

// store is what the handler needs of DynamoDB.
type store interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

var _ store = (*dynamodb.Client)(nil)

// followerProjection reads only a follow's key: GetItem of a follow asks
// whether it exists.
var followerProjection = func() expression.Expression {
	e, err := expression.NewBuilder().WithProjection(expression.NamesList(expression.Name(AttrFollowerID))).Build()
	if err != nil {
		panic(err) // a constant expression: fails in every test if wrong
	}
	return e
}()

// Tables names the tables and the index the handler uses.
type Tables struct {
	Tweets    string // partition key authorId, sort key tweetId
	Follows   string // partition key followerId, sort key followeeId
	Followers string // index of Follows: partition key followeeId, sort key followerId
	Timelines string // partition key userId, sort key "<createdAt>#<tweetId>"
}

// Handler maintains the Timelines view from the Tweets and Follows streams.
type Handler struct {
	db      store
	t       Tables
	metrics *metrics.Logger
	log     *slog.Logger
}

// Option configures a Handler.
type Option func(*Handler)

// WithMetrics sets where the handler's EMF metrics go.
func WithMetrics(m *metrics.Logger) Option { return func(h *Handler) { h.metrics = m } }

// WithLogger sets the handler's logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// New returns a Handler over db and the tables t.
func New(db store, t Tables, opts ...Option) *Handler {
	h := &Handler{db: db, t: t, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Handle applies a batch of either table's stream records in order and
// reports the first record it could not apply, so Lambda redelivers it and
// the records after it. It stops a moment before the invoke deadline and
// reports the record it was on, rather than be cut off and have the whole
// batch redelivered.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	ctx, cancel := batch.Reserve(ctx, deadlineMargin)
	defer cancel()
	h.metrics.Add("TweetsIn", metrics.Count, 0)
	h.metrics.Add("FollowsIn", metrics.Count, 0)
	h.metrics.Add("ViewWrites", metrics.Count, 0)
	resp, err := batch.DynamoDBInOrder(ctx, ev.Records, h.Record)
	h.metrics.Add("RecordsFailed", metrics.Count, float64(len(resp.BatchItemFailures)))
	if err != nil {
		h.log.ErrorContext(ctx, "record not applied to the timelines", "sequenceNumber", resp.BatchItemFailures[0].ItemIdentifier, "error", err)
	}
	if ferr := h.metrics.Flush(); ferr != nil {
		h.log.ErrorContext(ctx, "writing metrics", "error", ferr)
	}
	return resp, nil
}

// Record applies one stream record of the Tweets or the Follows table.
func (h *Handler) Record(ctx context.Context, rec *events.DynamoDBEventRecord) error {
	keys := rec.Change.Keys
	if a, t, ok := strKeys(keys, AttrAuthorID, AttrTweetID); ok {
		h.metrics.Add("TweetsIn", metrics.Count, 1)
		if err := h.tweet(ctx, rec, a, t); err != nil {
			return fmt.Errorf("tweet %s/%s (record %s): %w", a, t, rec.Change.SequenceNumber, err)
		}
		return nil
	}
	if f, a, ok := strKeys(keys, AttrFollowerID, AttrFolloweeID); ok {
		h.metrics.Add("FollowsIn", metrics.Count, 1)
		if err := h.follow(ctx, f, a); err != nil {
			return fmt.Errorf("follow %s->%s (record %s): %w", f, a, rec.Change.SequenceNumber, err)
		}
		return nil
	}
	return fmt.Errorf("record %s (event %s): %w", rec.Change.SequenceNumber, rec.EventID, ErrUnknownRecord)
}

func strKeys(keys map[string]events.DynamoDBAttributeValue, a, b string) (string, string, bool) {
	va, oka := keys[a]
	vb, okb := keys[b]
	if !oka || !okb || va.DataType() != events.DataTypeString || vb.DataType() != events.DataTypeString {
		return "", "", false
	}
	return va.String(), vb.String(), true
}

// tweet touches the entry of tweet (author, id) in the author's timeline and
// in those of the author's current followers.
func (h *Handler) tweet(ctx context.Context, rec *events.DynamoDBEventRecord, author, id string) error {
	img := rec.Change.NewImage
	if rec.EventName == string(events.DynamoDBOperationTypeRemove) {
		img = rec.Change.OldImage
	}
	c, ok := img[AttrCreatedAt]
	if !ok || c.DataType() != events.DataTypeString || c.String() == "" {
		return fmt.Errorf("%s: missing or not a string in the %s image", AttrCreatedAt, rec.EventName)
	}
	createdAt := c.String()
	users, err := h.followers(ctx, author)
	if err != nil {
		return err
	}
	for _, u := range append([]string{author}, users...) {
		if err := h.converge(ctx, u, author, id, createdAt); err != nil {
			return err
		}
	}
	return nil
}

// follow touches the entries of follower for the followee's latest tweets
// and for every followee tweet already in the follower's timeline.
func (h *Handler) follow(ctx context.Context, follower, followee string) error {
	type ref struct{ id, createdAt string }
	var refs []ref
	seen := map[string]bool{}
	add := func(id, createdAt string) {
		if !seen[id] {
			seen[id] = true
			refs = append(refs, ref{id, createdAt})
		}
	}
	byAuthor, err := expression.NewBuilder().
		WithKeyCondition(expression.Key(AttrAuthorID).Equal(expression.Value(followee))).Build()
	if err != nil {
		return fmt.Errorf("building the query of %s's tweets: %w", followee, err)
	}
	out, err := h.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &h.t.Tweets,
		KeyConditionExpression:    byAuthor.KeyCondition(),
		ExpressionAttributeNames:  byAuthor.Names(),
		ExpressionAttributeValues: byAuthor.Values(),
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(MaxFanIn),
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("reading the tweets of %s: %w", followee, err)
	}
	for _, it := range out.Items {
		add(str(it, AttrTweetID), str(it, AttrCreatedAt))
	}
	if follower != followee {
		ofAuthor, err := expression.NewBuilder().
			WithKeyCondition(expression.Key(AttrUserID).Equal(expression.Value(follower))).
			WithFilter(expression.Name(AttrAuthorID).Equal(expression.Value(followee))).Build()
		if err != nil {
			return fmt.Errorf("building the query of %s's timeline: %w", follower, err)
		}
		var start map[string]types.AttributeValue
		for {
			out, err := h.db.Query(ctx, &dynamodb.QueryInput{
				TableName:                 &h.t.Timelines,
				KeyConditionExpression:    ofAuthor.KeyCondition(),
				FilterExpression:          ofAuthor.Filter(),
				ExpressionAttributeNames:  ofAuthor.Names(),
				ExpressionAttributeValues: ofAuthor.Values(),
				ConsistentRead:            aws.Bool(true),
				ExclusiveStartKey:         start,
			})
			if err != nil {
				return fmt.Errorf("reading the timeline of %s: %w", follower, err)
			}
			for _, it := range out.Items {
				add(str(it, AttrTweetID), str(it, AttrCreatedAt))
			}
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			start = out.LastEvaluatedKey
		}
	}
	for _, r := range refs {
		if err := h.converge(ctx, follower, followee, r.id, r.createdAt); err != nil {
			return err
		}
	}
	return nil
}

// followers lists the users following author, from the followers index.
func (h *Handler) followers(ctx context.Context, author string) ([]string, error) {
	of, err := expression.NewBuilder().
		WithKeyCondition(expression.Key(AttrFolloweeID).Equal(expression.Value(author))).Build()
	if err != nil {
		return nil, fmt.Errorf("building the query of %s's followers: %w", author, err)
	}
	var users []string
	var start map[string]types.AttributeValue
	for {
		out, err := h.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &h.t.Follows,
			IndexName:                 &h.t.Followers,
			KeyConditionExpression:    of.KeyCondition(),
			ExpressionAttributeNames:  of.Names(),
			ExpressionAttributeValues: of.Values(),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("reading the followers of %s: %w", author, err)
		}
		for _, it := range out.Items {
			if f := str(it, AttrFollowerID); f != "" && f != author {
				users = append(users, f)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return users, nil
		}
		start = out.LastEvaluatedKey
	}
}

// converge makes the entry (user, tweet id by author) agree with the
// sources: read, write, read again until a read after the last write agrees
// with it (see the package comment for why that suffices).
func (h *Handler) converge(ctx context.Context, user, author, id, createdAt string) error {
	tw, want, err := h.wanted(ctx, user, author, id)
	if err != nil {
		return err
	}
	for range maxRounds {
		if err := h.write(ctx, user, author, id, createdAt, tw, want); err != nil {
			return err
		}
		tw2, want2, err := h.wanted(ctx, user, author, id)
		if err != nil {
			return err
		}
		if want2 == want && (!want || sameTweet(tw, tw2)) {
			return nil
		}
		tw, want = tw2, want2
	}
	return fmt.Errorf("timeline of %s: tweet %s kept changing over %d rounds", user, id, maxRounds)
}

// wanted reads the sources: the tweet (nil when absent) and whether it
// belongs in user's timeline.
func (h *Handler) wanted(ctx context.Context, user, author, id string) (map[string]types.AttributeValue, bool, error) {
	out, err := h.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &h.t.Tweets,
		Key:            map[string]types.AttributeValue{AttrAuthorID: s(author), AttrTweetID: s(id)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading tweet %s/%s: %w", author, id, err)
	}
	if len(out.Item) == 0 {
		return nil, false, nil
	}
	if user == author {
		return out.Item, true, nil
	}
	f, err := h.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                &h.t.Follows,
		Key:                      map[string]types.AttributeValue{AttrFollowerID: s(user), AttrFolloweeID: s(author)},
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     followerProjection.Projection(),
		ExpressionAttributeNames: followerProjection.Names(),
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading follow %s->%s: %w", user, author, err)
	}
	return out.Item, len(f.Item) > 0, nil
}

func (h *Handler) write(ctx context.Context, user, author, id, createdAt string, tw map[string]types.AttributeValue, want bool) error {
	h.metrics.Add("ViewWrites", metrics.Count, 1)
	if want {
		if c := str(tw, AttrCreatedAt); c != "" {
			createdAt = c
		}
		item := map[string]types.AttributeValue{
			AttrUserID:    s(user),
			AttrSortKey:   s(SortKey(createdAt, id)),
			AttrAuthorID:  s(author),
			AttrTweetID:   s(id),
			AttrCreatedAt: s(createdAt),
		}
		if t, ok := tw[AttrText]; ok {
			item[AttrText] = t
		}
		if _, err := h.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &h.t.Timelines, Item: item}); err != nil {
			return fmt.Errorf("adding tweet %s to the timeline of %s: %w", id, user, err)
		}
		return nil
	}
	_, err := h.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &h.t.Timelines,
		Key:       map[string]types.AttributeValue{AttrUserID: s(user), AttrSortKey: s(SortKey(createdAt, id))},
	})
	if err != nil {
		return fmt.Errorf("removing tweet %s from the timeline of %s: %w", id, user, err)
	}
	return nil
}

// SortKey is the view's sort key of a tweet: "<createdAt>#<tweetId>", so a
// timeline reads newest first with ScanIndexForward=false.
func SortKey(createdAt, tweetID string) string { return createdAt + "#" + tweetID }

func sameTweet(a, b map[string]types.AttributeValue) bool {
	return str(a, AttrCreatedAt) == str(b, AttrCreatedAt) && str(a, AttrText) == str(b, AttrText)
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func str(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
