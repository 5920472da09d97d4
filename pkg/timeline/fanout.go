package timeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/setaside"
)

// MaxFanOut is how many followers one tweet record is fanned out to on
// write. A tweet whose author has more is written to the author's timeline
// and to those of the first MaxFanOut followers (by followerId, the
// followers index's order), then set aside with the field
// dynamodb.Keys.authorId (category setaside.KindFanOutLimit), counted in
// RecordsSetAside and alarmed, so that the record never holds its shard
// beyond a bounded amount of work. An entry is about five DynamoDB calls
// (some 25 ms); at fanOutConcurrency entries at a time MaxFanOut followers
// take about 16 s, within one 30-second invocation, and progress saved per
// page carries a fan-out cut short into the next of the four deliveries
// the mapping gives a record (MaximumRetryAttempts 3).
const MaxFanOut = 10_000

// fanOutPage is how many followers one Query of the followers index reads,
// and so how often the fan-out's progress is saved: a redelivery repeats
// at most one page's entries (idempotent writes of the same value).
const fanOutPage = 100

// fanOutConcurrency bounds the entries of one page converged at once: each
// is about five sequential DynamoDB calls, so the page takes the time of a
// few entries rather than of a hundred.
const fanOutConcurrency = 16

// fanOutStop is how long before the handler's own deadline (the invoke
// deadline less deadlineMargin) a fan-out starts no more entries: the
// entries already started finish and their progress is saved, so the next
// delivery resumes after them rather than writing them again.
const fanOutStop = time.Second

// fanOutTTL is how long a fan-out's progress item is kept: past the 24-hour
// retention of a DynamoDB stream no delivery of the record can come.
const fanOutTTL = 48 * time.Hour

// Attribute names of the fan-out progress table's items.
const (
	AttrFanOutTweet    = "tweet"          // partition key: fanOutTweetKey(author, tweetId)
	AttrFanOutSequence = "sequenceNumber" // sort key: the stream record's sequence number
	attrAfter          = "after"          // the last follower (followerId) whose entry is done
	attrDone           = "done"           // how many followers' entries are done
	attrState          = "state"          // fanOutRunning, fanOutComplete, fanOutCapped or followLatest
	attrLatest         = "latest"         // a follow's latest tweets: the last tweetId whose entry is done
	attrField          = "field"          // the outcome's RecordError field, if any
	attrKind           = "kind"           // its setaside kind
	attrReason         = "reason"         // its reason
	attrExpiresAt      = "expiresAt"      // TTL, Unix seconds
)

// States of a fan-out's progress item.
const (
	fanOutRunning  = "running"
	fanOutComplete = "complete"
	fanOutCapped   = "capped"
	// followLatest: a follow record's latest tweets are partly done, from
	// the newest down to the tweet its progress names (progress.latest).
	followLatest = "latest"
)

// fanOutTweetKey is the progress item's partition key of a tweet: the
// author's length is spelt out, as in SortKey, so no two tweets share it.
func fanOutTweetKey(author, id string) string {
	return boundedProgressKey(strconv.Itoa(len(author)) + "#" + author + "#" + id)
}

// maxPartitionKeyBytes is DynamoDB's limit on a partition key value.
const maxPartitionKeyBytes = 2048

// boundedProgressKey is k, or, when k is over DynamoDB's limit on a
// partition key (ids near their own limits: an author's id holds 2,048
// bytes, a tweet's 1,024), "sha256#" and k's hash: a form neither key
// starts with. Without it every read and save of such a record's progress
// would be refused, and the record would hold its shard for good.
func boundedProgressKey(k string) string {
	if len(k) <= maxPartitionKeyBytes {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "sha256#" + hex.EncodeToString(sum[:])
}

// progress is a tweet record's fan-out so far, as its progress item holds
// it. The zero value is a fan-out not begun: not even the author's entry
// is done.
type progress struct {
	started bool   // the item exists: the author's entry is done (a follow's latest tweets)
	after   string // every follower up to and including after is done ("" none)
	// latest is, while a follow's latest tweets are partly done (state
	// followLatest, started false), the id of the last of them done, newest
	// first.
	latest string
	done   int
	state  string
	// outcome is the RecordError the record ends with, once known: an entry
	// left out for its size (kept from the delivery that met it) or the
	// fan-out's limit.
	field, kind, reason string
}

// The fixed parts of the progress table's expressions (built once; a save
// fills in values only).
var (
	progressNames = map[string]string{"#a": attrAfter, "#d": attrDone, "#s": attrState,
		"#f": attrField, "#k": attrKind, "#r": attrReason, "#x": attrExpiresAt}
	// The cursor only moves forward: a duplicate invocation behind another
	// does not take it back. A save without a follower (the author's
	// entry alone) only creates the item.
	progressUpdate  = aws.String("SET #d = :d, #s = :s, #x = :x, #a = :a, #f = :f, #k = :k, #r = :r")
	progressAdvance = aws.String("attribute_not_exists(#a) OR #a < :a OR (#a = :a AND #s = :run)")
	progressCreate  = aws.String("attribute_not_exists(#t) OR #s = :latest")
	// A follow's latest tweets are done newest first, so their cursor
	// moves down; any other state is further on.
	latestUpdate  = aws.String("SET #l = :l, #d = :d, #s = :s, #x = :x, #f = :f, #k = :k, #r = :r")
	latestAdvance = aws.String("attribute_not_exists(#t) OR (#s = :s AND #l > :l)")
	latestNames   = map[string]string{"#t": AttrFanOutTweet, "#l": attrLatest, "#d": attrDone, "#s": attrState,
		"#f": attrField, "#k": attrKind, "#r": attrReason, "#x": attrExpiresAt}
	followersFrom       = aws.String("#e = :e")
	followersAfter      = aws.String("#e = :e AND #o > :o")
	followersNames      = map[string]string{"#e": AttrFolloweeID}
	followersAfterNames = map[string]string{"#e": AttrFolloweeID, "#o": AttrFollowerID}
)

// followProgressKey is the progress item's partition key of a follow
// record: it starts with a letter where a tweet's starts with a digit, so
// the two never meet.
func followProgressKey(follower, followee string) string {
	return boundedProgressKey("follow#" + strconv.Itoa(len(follower)) + "#" + follower + "#" + followee)
}

func (h *Handler) progressKey(key, seq string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrFanOutTweet: s(key), AttrFanOutSequence: s(seq)}
}

// loadProgress reads a record's progress (consistently: a delivery must see
// what the one before it saved). key is fanOutTweetKey of a tweet record,
// followProgressKey of a follow record.
func (h *Handler) loadProgress(ctx context.Context, key, seq string) (progress, error) {
	if h.t.FanOut == "" {
		return progress{}, nil
	}
	out, err := h.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &h.t.FanOut, Key: h.progressKey(key, seq), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return progress{}, fmt.Errorf("reading the progress of record %s (%s): %w", seq, key, err)
	}
	if len(out.Item) == 0 {
		return progress{}, nil
	}
	p := progress{started: true, after: str(out.Item, attrAfter), state: str(out.Item, attrState),
		field: str(out.Item, attrField), kind: str(out.Item, attrKind), reason: str(out.Item, attrReason)}
	if p.state == followLatest {
		p.started, p.latest = false, str(out.Item, attrLatest)
	}
	if n, ok := out.Item[attrDone].(*types.AttributeValueMemberN); ok {
		p.done, _ = strconv.Atoi(n.Value)
	}
	return p, nil
}

// saveProgress saves p as the record's progress, unless a duplicate
// invocation has saved a later one (then its own is kept: every entry up
// to either cursor is done, so either is true).
func (h *Handler) saveProgress(ctx context.Context, key, seq string, p progress) error {
	if h.t.FanOut == "" {
		return nil
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                &h.t.FanOut,
		Key:                      h.progressKey(key, seq),
		UpdateExpression:         progressUpdate,
		ConditionExpression:      progressAdvance,
		ExpressionAttributeNames: progressNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":d": &types.AttributeValueMemberN{Value: strconv.Itoa(p.done)},
			":s": s(p.state),
			":x": &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(fanOutTTL).Unix(), 10)},
			":a": s(p.after), ":f": s(p.field), ":k": s(p.kind), ":r": s(p.reason), ":run": s(fanOutRunning),
		},
	}
	if p.after == "" {
		// The author's entry alone (a follow's latest tweets all done):
		// create the item, with no cursor yet, or move on one a follow's
		// latest tweets left partly done.
		in.UpdateExpression = aws.String("SET #d = :d, #s = :s, #x = :x, #f = :f, #k = :k, #r = :r")
		in.ConditionExpression = progressCreate
		delete(in.ExpressionAttributeValues, ":a")
		delete(in.ExpressionAttributeValues, ":run")
		in.ExpressionAttributeValues[":latest"] = s(followLatest)
		in.ExpressionAttributeNames = map[string]string{"#t": AttrFanOutTweet, "#d": attrDone, "#s": attrState,
			"#f": attrField, "#k": attrKind, "#r": attrReason, "#x": attrExpiresAt}
		if p.state != fanOutRunning {
			// A tweet without followers ends here: its outcome is
			// written whatever a duplicate saved.
			in.ConditionExpression = nil
			delete(in.ExpressionAttributeNames, "#t")
			delete(in.ExpressionAttributeValues, ":latest")
		}
	}
	return h.updateProgress(ctx, key, seq, in)
}

// updateProgress makes a save of a record's progress: a condition that
// fails means a duplicate invocation saved a later one, which is kept.
func (h *Handler) updateProgress(ctx context.Context, key, seq string, in *dynamodb.UpdateItemInput) error {
	_, err := h.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("saving the progress of record %s (%s): %w", seq, key, err)
	}
	return nil
}

// saveLatest saves how far a follow record's latest tweets are done
// (p.latest, p.done, and an outcome noteLeft kept), unless the record's
// progress is already further: past its latest tweets, or down to an
// older tweet (a duplicate invocation behind another does not take it
// back).
func (h *Handler) saveLatest(ctx context.Context, key, seq string, p progress) error {
	if h.t.FanOut == "" {
		return nil
	}
	return h.updateProgress(ctx, key, seq, &dynamodb.UpdateItemInput{
		TableName:                &h.t.FanOut,
		Key:                      h.progressKey(key, seq),
		UpdateExpression:         latestUpdate,
		ConditionExpression:      latestAdvance,
		ExpressionAttributeNames: latestNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":l": s(p.latest), ":d": &types.AttributeValueMemberN{Value: strconv.Itoa(p.done)}, ":s": s(followLatest),
			":x": &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(fanOutTTL).Unix(), 10)},
			":f": s(p.field), ":k": s(p.kind), ":r": s(p.reason),
		},
	})
}

// noteLeft keeps, as the record's outcome, the first of the entries left
// out for their size (prefix as tooLargeError takes it), so that a later
// delivery that finishes the record still sets it aside.
func (p *progress) noteLeft(rec *events.DynamoDBEventRecord, prefix string, left []*entryTooLarge) {
	if len(left) > 0 && p.reason == "" {
		re := tooLargeError(rec, prefix, left)
		p.field, p.kind, p.reason = re.Field, re.Kind, re.Reason
	}
}

// outcome is the RecordError a finished fan-out ends with, or nil.
func (p progress) outcome(rec *events.DynamoDBEventRecord) error {
	if p.reason == "" {
		return nil
	}
	return &RecordError{SequenceNumber: rec.Change.SequenceNumber, Field: p.field, Kind: p.kind, Reason: p.reason}
}

// fanOut touches the entry of tweet (author, id) in the author's timeline
// and in those of the author's followers, page by page from where the
// record's progress item says an earlier delivery stopped, at most
// fanOutConcurrency entries at a time and at most MaxFanOut followers. It
// saves its progress after each page and when it stops for the deadline,
// so every delivery of the record makes progress and none repeats more
// than the entries of one page.
func (h *Handler) fanOut(ctx context.Context, rec *events.DynamoDBEventRecord, author, id, createdAt, replaced, prefix string) error {
	seq, key := rec.Change.SequenceNumber, fanOutTweetKey(author, id)
	p, err := h.loadProgress(ctx, key, seq)
	if err != nil {
		return err
	}
	if p.state == fanOutComplete || p.state == fanOutCapped {
		return p.outcome(rec)
	}
	var left []*entryTooLarge
	startDone, resumed, pages := p.done, p.started, 0
	for {
		var users []string
		if !p.started {
			users = append(users, author)
		}
		page, more, err := h.followersPage(ctx, author, p.after)
		if err != nil {
			return err
		}
		last := ""
		if len(page) > 0 {
			last = page[len(page)-1]
		}
		capped := false
		for _, f := range page {
			if f == author {
				continue
			}
			if p.done+len(users)-boolInt(!p.started) == h.maxFanOut {
				capped = true
				break
			}
			users = append(users, f)
		}
		entries := make([]entry, len(users))
		for i, u := range users {
			entries[i] = entry{user: u, author: author, id: id, createdAt: createdAt, replaced: replaced}
		}
		n, pageLeft, err := h.convergeAll(ctx, entries)
		left = append(left, pageLeft...)
		if n > 0 {
			followers := users[:n]
			if !p.started {
				p.started, followers = true, followers[1:]
			}
			p.done += len(followers)
			if n == len(users) && !capped {
				// The whole page is done, the author's own entry if the
				// page had it among them: the cursor passes the page.
				if last != "" {
					p.after = last
				}
			} else if len(followers) > 0 {
				p.after = followers[len(followers)-1]
			}
		}
		p.noteLeft(rec, prefix, left)
		switch {
		case err != nil || n < len(users):
			p.state = fanOutRunning
			if n > 0 {
				if serr := h.saveProgress(ctx, key, seq, p); serr != nil {
					h.log.ErrorContext(ctx, "fan-out progress not saved: a redelivery repeats this page's entries", "sequenceNumber", seq, "error", serr)
				}
			}
			if err == nil {
				err = fmt.Errorf("stopped %v before the invoke deadline after %d of the author's followers (%d in this delivery); a redelivery resumes after follower %q",
					deadlineMargin+h.fanOutStop, p.done, p.done-startDone, p.after)
			}
			return err
		case capped:
			re := &RecordError{SequenceNumber: seq, Field: "dynamodb.Keys." + AttrAuthorID, Kind: setaside.KindFanOutLimit,
				Reason: fmt.Sprintf("%s has more than MaxFanOut (%d) followers: the tweet was written to %s's timeline and to those of the first %d followers by followerId (through %q), not to the others'",
					author, h.maxFanOut, author, h.maxFanOut, p.after)}
			if p.reason != "" {
				re.Reason += "; and " + p.reason
			}
			p.state, p.field, p.kind, p.reason = fanOutCapped, re.Field, re.Kind, re.Reason
			if err := h.saveProgress(ctx, key, seq, p); err != nil {
				return err
			}
			return re
		case !more:
			if !resumed && pages == 0 {
				// Done in one page by this delivery: nothing to resume,
				// and a redelivery converges the same entries to the same
				// values, so the tweet of an author with few followers
				// costs no progress write.
				return p.outcome(rec)
			}
			p.state = fanOutComplete
			if err := h.saveProgress(ctx, key, seq, p); err != nil {
				return err
			}
			return p.outcome(rec)
		}
		pages++
		p.state = fanOutRunning
		if err := h.saveProgress(ctx, key, seq, p); err != nil {
			return err
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// entry is one timeline entry a record touches: tweet id by author in
// user's timeline.
type entry struct {
	user, author, id, createdAt string
	// replaced is the tweet's createdAt before the change being fanned
	// out, when it changed ("" otherwise): its entry leaves the timeline.
	replaced string
}

// convergeAll converges entries, at most fanOutConcurrency at a time,
// starting none once the deadline is fanOutStop away, nor one that, judged
// by the slowest entry so far, would not finish by then (a slow store —
// a latency spike, a loaded stand-in — ran the last ones past the
// deadline, and the progress they made could not be saved). It returns how many
// entries from the start are done (the contiguous prefix: the progress
// cursor may pass only those), the entries among them left out for their
// size, and the first error.
func (h *Handler) convergeAll(ctx context.Context, entries []entry) (int, []*entryTooLarge, error) {
	stopAt, hasDeadline := ctx.Deadline()
	stopAt = stopAt.Add(-h.fanOutStop)
	errs := make([]error, len(entries))
	ran := make([]bool, len(entries))
	sem := make(chan struct{}, fanOutConcurrency)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	var slowest time.Duration
	for i, e := range entries {
		sem <- struct{}{}
		mu.Lock()
		stop, took := failed != nil, slowest
		mu.Unlock()
		if stop || (hasDeadline && !time.Now().Add(took).Before(stopAt)) || ctx.Err() != nil {
			<-sem
			break
		}
		ran[i] = true
		wg.Go(func() {
			defer func() { <-sem }()
			started := time.Now()
			err := h.converge(ctx, e)
			errs[i] = err
			var tl *entryTooLarge
			mu.Lock()
			slowest = max(slowest, time.Since(started))
			if err != nil && !errors.As(err, &tl) && failed == nil {
				failed = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	var left []*entryTooLarge
	n := 0
	for i := range entries {
		if !ran[i] {
			break
		}
		var tl *entryTooLarge
		if errors.As(errs[i], &tl) {
			left = append(left, tl)
		} else if errs[i] != nil {
			break
		}
		n++
	}
	if failed == nil && n < len(entries) && ctx.Err() != nil {
		failed = ctx.Err()
	}
	return n, left, failed
}

// followersPage reads the next page of at most fanOutPage of author's
// followers after the follower after ("" from the first), in the index's
// order, and whether the index may hold more.
func (h *Handler) followersPage(ctx context.Context, author, after string) ([]string, bool, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &h.t.Follows,
		IndexName:                 &h.t.Followers,
		KeyConditionExpression:    followersFrom,
		ExpressionAttributeNames:  followersNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": s(author)},
		Limit:                     aws.Int32(fanOutPage),
	}
	if after != "" {
		in.KeyConditionExpression, in.ExpressionAttributeNames = followersAfter, followersAfterNames
		in.ExpressionAttributeValues[":o"] = s(after)
	}
	out, err := h.db.Query(ctx, in)
	if err != nil {
		return nil, false, fmt.Errorf("reading the followers of %s after %q: %w", author, after, err)
	}
	page := make([]string, 0, len(out.Items))
	for _, it := range out.Items {
		if f := str(it, AttrFollowerID); f != "" {
			page = append(page, f)
		}
	}
	return page, len(out.LastEvaluatedKey) > 0, nil
}
