package timeline

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// followScanPage is how many items of the follower's timeline one Query
// evaluates (DynamoDB applies Limit before the filter on the followee), and
// so how often a follow record's progress is saved.
const followScanPage = 500

// The fixed parts of the follow's queries (built once; a query fills in
// values only).
var (
	tweetsOf          = aws.String("#a = :a")
	tweetsOfNames     = map[string]string{"#a": AttrAuthorID}
	tweetsBefore      = aws.String("#a = :a AND #t < :t")
	tweetsBeforeNames = map[string]string{"#a": AttrAuthorID, "#t": AttrTweetID}
	timelineOf        = aws.String("#u = :u")
	timelineByAuthor  = aws.String("#a = :a")
	timelineOfNames   = map[string]string{"#u": AttrUserID, "#a": AttrAuthorID}
)

// follow touches the entries of follower for the followee's latest
// MaxFanIn tweets, then for every followee tweet already in the follower's
// timeline, which it reads followScanPage items at a time (a timeline has
// no bound). Like a tweet's fan-out it converges up to fanOutConcurrency
// entries at once, saves its progress in the FanOut table after the latest
// tweets and after each page of the timeline, stops fanOutStop before the
// deadline, and a redelivery resumes where the delivery before stopped; so
// an unfollow of an author whose tweets fill much of a long timeline
// completes over deliveries rather than start again at each and hold its
// shard.
func (h *Handler) follow(ctx context.Context, rec *events.DynamoDBEventRecord, follower, followee string) error {
	seq, key := rec.Change.SequenceNumber, followProgressKey(follower, followee)
	p, err := h.loadProgress(ctx, key, seq)
	if err != nil {
		return err
	}
	if p.state == fanOutComplete {
		return p.outcome(rec)
	}
	var left []*entryTooLarge
	stopped := func(err error, startDone int) error {
		if err == nil {
			err = fmt.Errorf("stopped %v before the invoke deadline after %d entries (%d in this delivery); a redelivery resumes after %q",
				deadlineMargin+h.fanOutStop, p.done, p.done-startDone, p.after)
		}
		return err
	}
	// saved: an earlier delivery saved progress (a follow's latest tweets
	// partly done count); latestSaved: the progress saved has the latest
	// tweets all done.
	startDone, saved, latestSaved := p.done, p.started || p.latest != "", p.started
	// done saves the outcome when an earlier delivery saved progress (a
	// later one must not redo the work); a follow done by one delivery in
	// one page saves nothing, as a tweet's fan-out does not.
	done := func() error {
		if saved {
			p.state = fanOutComplete
			if err := h.saveProgress(ctx, key, seq, p); err != nil {
				return err
			}
		}
		return p.outcome(rec)
	}
	latest := map[string]bool{}
	if !p.started {
		entries, err := h.latestTweets(ctx, follower, followee, p.latest, MaxFanIn-p.done)
		if err != nil {
			return err
		}
		n, l, err := h.convergeAll(ctx, entries)
		left = append(left, l...)
		p.noteLeft(rec, "", left)
		if err != nil || n < len(entries) {
			// The redelivery resumes after the entries done, newest
			// first: a store that fails one call in a hundred must not
			// make it start all MaxFanIn again each time.
			if n > 0 {
				p.latest, p.done, p.state = entries[n-1].id, p.done+n, followLatest
				if serr := h.saveLatest(ctx, key, seq, p); serr != nil {
					h.log.ErrorContext(ctx, "follow progress not saved: a redelivery repeats these latest tweets", "sequenceNumber", seq, "error", serr)
				}
			}
			return stopped(err, startDone)
		}
		for _, e := range entries {
			latest[e.id] = true
		}
		p.started, p.done = true, p.done+n
	}
	if follower == followee {
		return done()
	}
	for {
		entries, last, err := h.timelinePage(ctx, follower, followee, p.after)
		if err != nil {
			return err
		}
		// An entry the latest tweets converged in this delivery is done.
		entries = slices.DeleteFunc(entries, func(e timelineEntry) bool { return latest[e.id] })
		todo := make([]entry, len(entries))
		for i, e := range entries {
			todo[i] = e.entry
		}
		n, l, err := h.convergeAll(ctx, todo)
		left = append(left, l...)
		p.noteLeft(rec, "", left)
		p.done += n
		if err != nil || n < len(entries) {
			if n > 0 || !latestSaved {
				// The latest tweets, and the page's entries up to the
				// first not done.
				if n > 0 {
					p.after = entries[n-1].sk
				}
				p.state = fanOutRunning
				if serr := h.saveProgress(ctx, key, seq, p); serr != nil {
					h.log.ErrorContext(ctx, "follow progress not saved: a redelivery repeats this page's entries", "sequenceNumber", seq, "error", serr)
				} else {
					saved, latestSaved = true, true
				}
			}
			return stopped(err, startDone)
		}
		if last == "" {
			return done()
		}
		p.after, p.state = last, fanOutRunning
		if err := h.saveProgress(ctx, key, seq, p); err != nil {
			return err
		}
		saved, latestSaved = true, true
	}
}

// latestTweets reads the followee's latest tweets, at most limit, newest
// first, older than the tweet id before when it is not "", as entries of
// the follower's timeline.
func (h *Handler) latestTweets(ctx context.Context, follower, followee, before string, limit int) ([]entry, error) {
	if limit <= 0 {
		return nil, nil
	}
	in := &dynamodb.QueryInput{
		TableName:                 &h.t.Tweets,
		KeyConditionExpression:    tweetsOf,
		ExpressionAttributeNames:  tweetsOfNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": s(followee)},
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(int32(limit)),
		ConsistentRead:            aws.Bool(true),
	}
	if before != "" {
		in.KeyConditionExpression, in.ExpressionAttributeNames = tweetsBefore, tweetsBeforeNames
		in.ExpressionAttributeValues[":t"] = s(before)
	}
	out, err := h.db.Query(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("reading the tweets of %s: %w", followee, err)
	}
	entries := make([]entry, 0, len(out.Items))
	for _, it := range out.Items {
		entries = append(entries, entry{user: follower, author: followee, id: str(it, AttrTweetID), createdAt: str(it, AttrCreatedAt)})
	}
	return entries, nil
}

// timelineEntry is an entry found in a timeline, with its sort key (the
// follow's cursor).
type timelineEntry struct {
	entry
	sk string
}

// timelinePage reads the next followScanPage items of follower's timeline
// after the sort key after ("" from the first), consistently, and returns
// the followee's entries among them and the sort key to go on after ("" at
// the end of the timeline).
func (h *Handler) timelinePage(ctx context.Context, follower, followee, after string) ([]timelineEntry, string, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &h.t.Timelines,
		KeyConditionExpression:    timelineOf,
		FilterExpression:          timelineByAuthor,
		ExpressionAttributeNames:  timelineOfNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": s(follower), ":a": s(followee)},
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(followScanPage),
	}
	if after != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{AttrUserID: s(follower), AttrSortKey: s(after)}
	}
	out, err := h.db.Query(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("reading the timeline of %s after %q: %w", follower, after, err)
	}
	entries := make([]timelineEntry, 0, len(out.Items))
	for _, it := range out.Items {
		entries = append(entries, timelineEntry{
			entry: entry{user: follower, author: followee, id: str(it, AttrTweetID), createdAt: str(it, AttrCreatedAt)},
			sk:    str(it, AttrSortKey)})
	}
	return entries, str(out.LastEvaluatedKey, AttrSortKey), nil
}
