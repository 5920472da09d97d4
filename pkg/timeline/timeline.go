package timeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
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
// tweet's nor a follow's is set aside.
var ErrUnknownRecord = errors.New("timeline: record keys are neither a tweet (authorId, tweetId) nor a follow (followerId, followeeId)")

// maxSortKeyBytes is DynamoDB's limit on a sort key value.
const maxSortKeyBytes = 1024

// RecordError is a stream record that can never be applied as it is: keys
// that are neither a tweet's nor a follow's, a tweet without createdAt, a
// tweet whose timeline item would exceed DynamoDB's item size. It names the
// record and the field. The handler sets such a record aside and goes on.
type RecordError struct {
	SequenceNumber string
	// Field is the stream record's field at fault, for example
	// "dynamodb.NewImage.text".
	Field  string
	Reason string
	// Kind is the setaside category.
	Kind string
	// Err is ErrUnknownRecord for unknown keys, else nil.
	Err error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("record %s: %s: %s", e.SequenceNumber, e.Field, e.Reason)
}

func (e *RecordError) Unwrap() error { return e.Err }

// entryTooLarge is a timeline entry left out: its item would exceed
// DynamoDB's limit, or the stored tweet cannot be keyed in a timeline.
type entryTooLarge struct {
	user, author, id string
	err              *leftOut
}

func (e *entryTooLarge) Error() string {
	return fmt.Sprintf("the timeline item of tweet %s/%s for %s: %s", e.author, e.id, e.user, e.err.reason)
}

// leftOut is why write kept an entry out of a timeline: the tweet's field
// at fault, the set-aside kind and the reason.
type leftOut struct{ field, kind, reason string }

// tooLargeLeftOut is the leftOut of an item over DynamoDB's limits. The
// sort key is made of the tweet's createdAt, authorId and tweetId: the
// largest of them is named, the one to shorten.
func tooLargeLeftOut(err *limits.TooLargeError, createdAt, author, id string) *leftOut {
	field := err.Field
	if field == AttrSortKey {
		field = AttrCreatedAt
		if len(author) > len(createdAt) && len(author) >= len(id) {
			field = AttrAuthorID
		} else if len(id) > len(createdAt) && len(id) > len(author) {
			field = AttrTweetID
		}
	}
	return &leftOut{field: field, kind: setaside.KindOutputTooLarge, reason: err.Error()}
}

// store is what the handler needs of DynamoDB.
type store interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
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
	Timelines string // partition key userId, sort key SortKey(createdAt, authorId, tweetId)
	// FanOut keeps the progress of tweet and follow records (partition
	// key AttrFanOutTweet: fanOutTweetKey or followProgressKey; sort key
	// AttrFanOutSequence; TTL attribute expiresAt), so a redelivery resumes
	// where the delivery before it stopped. Without it every delivery
	// starts again from the first follower or timeline entry.
	FanOut string
}

// Handler maintains the Timelines view from the Tweets and Follows streams.
type Handler struct {
	db      store
	t       Tables
	sink    *setaside.Sink
	metrics *metrics.Logger
	log     *slog.Logger
	// fanOutStop and maxFanOut are the constants of those names; tests
	// shorten invocations and lower the bound.
	fanOutStop time.Duration
	maxFanOut  int
}

// Option configures a Handler.
type Option func(*Handler)

// WithMetrics sets where the handler's EMF metrics go.
func WithMetrics(m *metrics.Logger) Option { return func(h *Handler) { h.metrics = m } }

// WithSetAside is where records that can never be applied go (the
// quarantine table). Without it such a record is reported as the batch item
// failure, as a transient error is, and nothing is lost.
func WithSetAside(sink *setaside.Sink) Option { return func(h *Handler) { h.sink = sink } }

// WithLogger sets the handler's logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// New returns a Handler over db and the tables t.
func New(db store, t Tables, opts ...Option) *Handler {
	h := &Handler{db: db, t: t, log: slog.New(slog.NewTextHandler(io.Discard, nil)), fanOutStop: fanOutStop, maxFanOut: MaxFanOut}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Handle applies a batch of either table's stream records in order. A
// record that can never be applied (*RecordError) is set aside — kept in
// the quarantine table with the field at fault — and the batch goes on. It
// reports the first record it could not apply for another reason
// (throttling, a timeout, sources that kept changing) so Lambda redelivers
// it and the records after it. It stops a moment before the invoke
// deadline and reports the record it was on, rather than be cut off and
// have the whole batch redelivered.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	if err := stream.CheckDynamoDBEvent(&ev); err != nil {
		return events.DynamoDBEventResponse{}, fmt.Errorf("timeline: %w", err)
	}
	ctx, cancel := batch.Reserve(ctx, deadlineMargin)
	defer cancel()
	h.metrics.Add("TweetsIn", metrics.Count, 0)
	h.metrics.Add("FollowsIn", metrics.Count, 0)
	h.metrics.Add("ViewWrites", metrics.Count, 0)
	h.metrics.Add(setaside.Metric, metrics.Count, 0)
	var failures batch.StreamFailures
	for i := range ev.Records {
		rec := &ev.Records[i]
		err := ctx.Err()
		if err == nil {
			err = h.Record(ctx, rec)
		}
		var re *RecordError
		if errors.As(err, &re) {
			r := setaside.FromDynamoDB(rec)
			r.Field, r.Kind, r.Reason = re.Field, re.Kind, re.Reason
			if err = h.sink.SetAside(ctx, []setaside.Record{r}); err == nil {
				continue
			}
			err = fmt.Errorf("%w; setting it aside: %w", re, err)
		}
		if err != nil {
			failures.Add(rec.Change.SequenceNumber)
			h.log.ErrorContext(ctx, "record not applied to the timelines", "sequenceNumber", rec.Change.SequenceNumber, "error", err)
			break
		}
	}
	h.metrics.Add("RecordsFailed", metrics.Count, float64(failures.Len()))
	if ferr := h.metrics.Flush(); ferr != nil {
		h.log.ErrorContext(ctx, "writing metrics", "error", ferr)
	}
	return failures.DynamoDB(), nil
}

// Record applies one stream record of the Tweets or the Follows table. A
// record that can never be applied is a *RecordError; it is applied as far
// as it can be first (a follow to the followee's tweets that fit, a tweet to
// the timelines it fits).
func (h *Handler) Record(ctx context.Context, rec *events.DynamoDBEventRecord) error {
	switch events.DynamoDBOperationType(rec.EventName) {
	case events.DynamoDBOperationTypeInsert, events.DynamoDBOperationTypeModify, events.DynamoDBOperationTypeRemove:
	default:
		// Anything else was applied as an insert.
		return &RecordError{SequenceNumber: rec.Change.SequenceNumber, Field: "eventName", Kind: setaside.KindInvalid,
			Reason: fmt.Sprintf("event %s: %s is not INSERT, MODIFY or REMOVE", rec.EventID, strictjson.QuoteCut(rec.EventName, 64))}
	}
	keys := rec.Change.Keys
	if err := imageMatchesKeys(rec); err != nil {
		return err
	}
	if a, t, ok := strKeys(keys, AttrAuthorID, AttrTweetID); ok {
		h.metrics.Add("TweetsIn", metrics.Count, 1)
		if err := h.tweet(ctx, rec, a, t); err != nil {
			var re *RecordError
			if errors.As(err, &re) {
				return err
			}
			return fmt.Errorf("tweet %s/%s (record %s): %w", a, t, rec.Change.SequenceNumber, err)
		}
		return nil
	}
	if f, a, ok := strKeys(keys, AttrFollowerID, AttrFolloweeID); ok {
		h.metrics.Add("FollowsIn", metrics.Count, 1)
		if err := h.follow(ctx, rec, f, a); err != nil {
			var re *RecordError
			if errors.As(err, &re) {
				return err
			}
			return fmt.Errorf("follow %s->%s (record %s): %w", f, a, rec.Change.SequenceNumber, err)
		}
		return nil
	}
	return &RecordError{SequenceNumber: rec.Change.SequenceNumber, Field: "dynamodb.Keys", Kind: setaside.KindInvalid,
		Reason: fmt.Sprintf("event %s: %v", rec.EventID, ErrUnknownRecord), Err: ErrUnknownRecord}
}

// imageMatchesKeys refuses a record whose image holds a key attribute
// other than its Keys do: DynamoDB writes both from one item, so only a
// hand-made record disagrees, and the timelines followed Keys (writing to
// bob's timeline for an image of ann's).
func imageMatchesKeys(rec *events.DynamoDBEventRecord) error {
	img, imgName := rec.Change.NewImage, "NewImage"
	if rec.EventName == string(events.DynamoDBOperationTypeRemove) {
		img, imgName = rec.Change.OldImage, "OldImage"
	}
	for name, k := range rec.Change.Keys {
		v, ok := img[name]
		if !ok || k.DataType() != events.DataTypeString {
			continue // a missing image is each case's to name
		}
		if v.DataType() != events.DataTypeString || v.String() != k.String() {
			return &RecordError{SequenceNumber: rec.Change.SequenceNumber, Field: "dynamodb." + imgName + "." + name, Kind: setaside.KindInvalid,
				Reason: fmt.Sprintf("event %s: the %s holds another %s than the record's Keys (%s): DynamoDB writes both from one item", rec.EventID, imgName, name, strictjson.QuoteCut(k.String(), 64))}
		}
	}
	return nil
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
// in those of the author's current followers (fanOut: in pages, resuming
// where an earlier delivery of the record stopped, at most MaxFanOut).
func (h *Handler) tweet(ctx context.Context, rec *events.DynamoDBEventRecord, author, id string) error {
	img, imgName := rec.Change.NewImage, "NewImage"
	if rec.EventName == string(events.DynamoDBOperationTypeRemove) {
		img, imgName = rec.Change.OldImage, "OldImage"
	}
	c, ok := img[AttrCreatedAt]
	if !ok || c.DataType() != events.DataTypeString || c.String() == "" {
		return &RecordError{SequenceNumber: rec.Change.SequenceNumber, Field: "dynamodb." + imgName + "." + AttrCreatedAt, Kind: setaside.KindInvalid,
			Reason: fmt.Sprintf("tweet %s/%s: missing or not a string in the %s image", author, id, rec.EventName)}
	}
	if strings.Contains(c.String(), "#") {
		return &RecordError{SequenceNumber: rec.Change.SequenceNumber, Field: "dynamodb." + imgName + "." + AttrCreatedAt, Kind: setaside.KindInvalid,
			Reason: fmt.Sprintf("tweet %s/%s: %s holds '#', which ends createdAt in the timeline's sort key; a time has none", author, id, strictjson.QuoteCut(c.String(), 64))}
	}
	return h.fanOut(ctx, rec, author, id, c.String(), replacedCreatedAt(rec, c.String()), "dynamodb."+imgName+".")
}

// replacedCreatedAt is the createdAt a MODIFY record's tweet had before it
// ("" when it had none it could be keyed by, or the same): createdAt is in
// the timeline's sort key, so a changed one is another entry, and the one
// keyed by the old time must leave every timeline (left, a later delete or
// unfollow, keyed by the new time, never removed it).
func replacedCreatedAt(rec *events.DynamoDBEventRecord, createdAt string) string {
	if rec.EventName != string(events.DynamoDBOperationTypeModify) {
		return ""
	}
	old, ok := rec.Change.OldImage[AttrCreatedAt]
	if !ok || old.DataType() != events.DataTypeString || old.String() == "" || old.String() == createdAt || strings.Contains(old.String(), "#") {
		return ""
	}
	return old.String()
}

// tooLargeError is the RecordError of a record some of whose timeline
// entries were left out for their size. prefix is the record's image
// ("dynamodb.NewImage.") when the entries are the record's own tweet, ""
// when they are other tweets (a follow): the follow holds no field of
// theirs, so it is named by its followeeId, and the reason names the
// tweet's field.
func tooLargeError(rec *events.DynamoDBEventRecord, prefix string, left []*entryTooLarge) *RecordError {
	first := left[0]
	field, reason := prefix+first.err.field, first.err.reason
	if prefix == "" {
		field = "dynamodb.NewImage." + AttrFolloweeID
		reason = fmt.Sprintf("a stored tweet of the followee, by its %s: %s", first.err.field, reason)
	}
	users := make([]string, 0, min(len(left), 5))
	for _, l := range left[:min(len(left), 5)] {
		users = append(users, strictjson.Cut(l.user, 64)+"'s (tweet "+strictjson.Cut(l.author, 64)+"/"+strictjson.Cut(l.id, 64)+")")
	}
	more := ""
	if len(left) > 5 {
		more = fmt.Sprintf(" and %d more", len(left)-5)
	}
	return &RecordError{SequenceNumber: rec.Change.SequenceNumber, Field: field, Kind: first.err.kind,
		Reason: fmt.Sprintf("%s, so the tweet is left out of %s%s timeline; the record was applied to every timeline it fits",
			reason, strings.Join(users, ", "), more)}
}

// converge makes the entry (user, tweet id by author) agree with the
// sources: read, write, read again until a read after the last write agrees
// with it (see the package comment for why that suffices). An entry whose
// item would exceed DynamoDB's limit is kept out of the timeline (deleted)
// and reported as *entryTooLarge: the view is the join of the tweets that
// fit, which is still a function of the sources, so the argument holds.
// An entry whose tweet's createdAt changed (e.replaced) also has the entry
// keyed by the old time deleted, unless the tweet holds that time again.
func (h *Handler) converge(ctx context.Context, e entry) error {
	user, author, id, createdAt := e.user, e.author, e.id, e.createdAt
	tw, want, err := h.wanted(ctx, user, author, id)
	if err != nil {
		return err
	}
	if e.replaced != "" && str(tw, AttrCreatedAt) != e.replaced {
		if _, err := h.write(ctx, user, author, id, e.replaced, nil, false); err != nil {
			return err
		}
	}
	for range maxRounds {
		tooLarge, err := h.write(ctx, user, author, id, createdAt, tw, want)
		if err != nil {
			return err
		}
		tw2, want2, err := h.wanted(ctx, user, author, id)
		if err != nil {
			return err
		}
		if want2 == want && (!want || sameTweet(tw, tw2)) {
			if tooLarge != nil {
				return &entryTooLarge{user: user, author: author, id: id, err: tooLarge}
			}
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

// write puts the entry's item when want, else deletes it. An item over
// DynamoDB's limits (checked before the write; a ValidationException about
// the item's size is taken as the same answer) is deleted instead, and the
// size error returned with a nil error. So is a stored tweet whose
// createdAt holds '#' (the record's own image is checked, but a follow
// reads tweets from the table): two tweets could share its sort key; and
// one whose createdAt is missing or not a string, which no timeline can
// place (its records are set aside).
func (h *Handler) write(ctx context.Context, user, author, id, createdAt string, tw map[string]types.AttributeValue, want bool) (*leftOut, error) {
	h.metrics.Add("ViewWrites", metrics.Count, 1)
	var left *leftOut
	if want {
		switch c := str(tw, AttrCreatedAt); {
		case c == "":
			// A tweet record without a time is set aside, but a follow
			// reads the tweet from its table: keyed by an empty time the
			// entry would sort below every other and outlive the tweet.
			left = &leftOut{field: AttrCreatedAt, kind: setaside.KindInvalid,
				reason: "the stored tweet's createdAt is missing or not a string, so it has no place in a timeline"}
			want = false
		case strings.Contains(c, "#"):
			left = &leftOut{field: AttrCreatedAt, kind: setaside.KindInvalid,
				reason: fmt.Sprintf("the stored tweet's createdAt %s holds '#', which ends createdAt in the timeline's sort key; a time has none", strictjson.QuoteCut(c, 64))}
			want = false // delete what the record's createdAt keys, if anything
		case c != "":
			createdAt = c
		}
	}
	if sk := SortKey(createdAt, author, id); len(sk) > maxSortKeyBytes {
		// No such entry can exist, so there is nothing to delete either.
		if want {
			left = tooLargeLeftOut(&limits.TooLargeError{What: "the sort key " + AttrSortKey + " (<createdAt>#<len(authorId)>#<authorId>#<tweetId>)", Field: AttrSortKey,
				Bytes: len(sk), Limit: maxSortKeyBytes, FieldBytes: len(sk)}, createdAt, author, id)
		}
		return left, nil
	}
	if want {
		item := map[string]types.AttributeValue{
			AttrUserID:    s(user),
			AttrSortKey:   s(SortKey(createdAt, author, id)),
			AttrAuthorID:  s(author),
			AttrTweetID:   s(id),
			AttrCreatedAt: s(createdAt),
		}
		if t, ok := tw[AttrText]; ok {
			item[AttrText] = t
		}
		tooLarge := checkItem(item)
		if tooLarge == nil {
			out, err := h.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &h.t.Timelines, Item: item, ReturnValues: types.ReturnValueAllOld})
			if err == nil {
				if len(out.Attributes) == 0 {
					// The entry's first write under this sort key: an
					// entry written before it may hold the legacy one.
					return nil, h.deleteLegacy(ctx, user, id, createdAt)
				}
				return nil, nil
			}
			if tooLarge = sizeRefused(err, item); tooLarge == nil {
				return nil, fmt.Errorf("adding tweet %s to the timeline of %s: %w", id, user, err)
			}
		}
		left = tooLargeLeftOut(tooLarge, createdAt, author, id)
	}
	_, err := h.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &h.t.Timelines,
		Key:       map[string]types.AttributeValue{AttrUserID: s(user), AttrSortKey: s(SortKey(createdAt, author, id))},
	})
	if err != nil {
		return nil, fmt.Errorf("removing tweet %s from the timeline of %s: %w", id, user, err)
	}
	return left, h.deleteLegacy(ctx, user, id, createdAt)
}

// legacyKeysBefore bounds the tweets whose entries may hold a legacy sort
// key ("<createdAt>#<tweetId>", without the author: two authors' tweets of
// one id and time were one entry), written before SortKey named the
// author. An entry of a tweet created before it, at its first write under
// the new key and at its removal, deletes the legacy key too, so an
// upgraded view holds each entry once; later tweets cost nothing more.
const legacyKeysBefore = "2026-12-04T00:00:00Z"

// deleteLegacy deletes the legacy sort key of a tweet's entry, when the
// tweet may have one.
func (h *Handler) deleteLegacy(ctx context.Context, user, id, createdAt string) error {
	if createdAt >= legacyKeysBefore {
		return nil
	}
	h.metrics.Add("ViewWrites", metrics.Count, 1)
	_, err := h.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &h.t.Timelines,
		Key:       map[string]types.AttributeValue{AttrUserID: s(user), AttrSortKey: s(createdAt + "#" + id)},
	})
	if err != nil {
		return fmt.Errorf("removing tweet %s's legacy entry from the timeline of %s: %w", id, user, err)
	}
	return nil
}

// checkItem checks a timeline item against DynamoDB's item size.
func checkItem(item map[string]types.AttributeValue) *limits.TooLargeError {
	var tl *limits.TooLargeError
	if errors.As(limits.CheckItem(item), &tl) {
		tl.What = "the timeline item"
		return tl
	}
	return nil
}

// sizeRefused is the size error of a PutItem DynamoDB refused for the
// item's size (a stand-in may count sizes a little differently), nil for
// any other error.
func sizeRefused(err error, item map[string]types.AttributeValue) *limits.TooLargeError {
	var ae smithy.APIError
	if !limits.IsItemTooLarge(err) || !errors.As(err, &ae) {
		return nil
	}
	tl := &limits.TooLargeError{What: "the timeline item (refused by DynamoDB: " + ae.ErrorMessage() + ")",
		Bytes: limits.ItemSize(item), Limit: limits.DynamoDBItemBytes}
	if l := limits.Largest(item, 1); len(l) == 1 {
		tl.Field, tl.FieldBytes = l[0].Name, l[0].Bytes
	}
	return tl
}

// SortKey is the view's sort key of a tweet:
// "<createdAt>#<len(authorId)>#<authorId>#<tweetId>", so a timeline reads
// newest first with ScanIndexForward=false. A tweet id is unique only per
// author (the Tweets table's key is the pair), so the author is in the key:
// two authors' tweets of one id and time are two entries. createdAt holds no
// '#' (tweet refuses one, and write leaves out a stored tweet with one) and
// the author's length is spelt out, so no two tweets share a key, whatever
// '#' their ids hold.
func SortKey(createdAt, authorID, tweetID string) string {
	return createdAt + "#" + strconv.Itoa(len(authorID)) + "#" + authorID + "#" + tweetID
}

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
