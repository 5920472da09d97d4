// Package timeline maintains a materialized view of a table–table join:
// the timelines of a Twitter-like service, Tweets ⋈ Follows, kept up to date
// from both tables' DynamoDB streams by one handler.
//
// The sources are the Tweets table (partition key authorId, sort key
// tweetId; attributes createdAt and text) and the Follows table (partition
// key followerId, sort key followeeId) with a global secondary index on
// followeeId listing a user's followers. The view is the Timelines table:
// partition key userId, sort key "<createdAt>#<len(authorId)>#<authorId>#<tweetId>"
// (SortKey: a tweet id is unique only per author), one item per tweet a
// user sees. The view is defined as
//
//	timeline(U) = {tweets by U} ∪ {tweets by A : U follows A}
//
// over the tables' current contents.
//
// # Records
//
// A tweet change (INSERT, MODIFY or REMOVE of tweet t by A) touches the
// entry (U, t) of A and of every user U the followers index lists for A. A
// follow change (F follows or unfollows A) touches the entries (F, t) of A's
// latest MaxFanIn tweets in Tweets and of every tweet by A already in F's
// timeline (a consistent query of the view, page by page: see below).
//
// # Fan-out of a tweet: pages, progress, a bound
//
// A tweet record's entries are the author's and then its followers', in
// the followers index's order (by followerId). The handler reads the index
// a page of 100 followers at a time, converges the page's entries 16 at a
// time, and after each page saves the record's progress in the FanOut
// table: one item per tweet record (partition key "<len(authorId)>#<authorId>#<tweetId>",
// or "sha256#" and its hash when that is over DynamoDB's 2,048 bytes, as
// ids near their own limits make it; sort key the record's sequence
// number, kept 48 hours) holding the last
// follower done. The save is a conditional write that only moves the
// cursor forward, so a duplicate invocation behind another cannot take it
// back. Near the invoke deadline the handler starts no new entry, lets
// those started finish, saves how far it got and reports the record
// failed; Lambda redelivers from it, and the redelivery resumes after the
// cursor. So every delivery makes progress, an entry is written again only
// if a delivery failed mid-page (the writes are idempotent), and a
// delivery of a record whose fan-out spanned pages and is complete writes
// nothing. A fan-out one delivery finishes in one page (an author with at
// most 100 followers, the usual case) saves nothing: a redelivery
// converges its few entries to the same values again, and the tweet costs
// one read of the progress table, not a write.
//
// A follow record works the same way: it converges the followee's latest
// MaxFanIn tweets, then reads the follower's timeline followScanPage (500)
// items at a time (Limit before the filter on the followee, so a page is
// bounded whatever the timeline holds) and converges the followee's entries
// among them, saving its progress (the last sort key done, under the
// partition key "follow#<len(followerId)>#<followerId>#<followeeId>") after
// the latest tweets and after each page; a delivery that stops among the
// latest tweets (its deadline, or a call the store refused) saves the id
// of the last one done, newest first, and the redelivery reads on from it
// rather than converging all MaxFanIn again. An unfollow of an author whose
// tweets fill a long timeline, or a follow meeting many of the followee's
// entries already there, completes over deliveries instead of starting
// again at each. Reading a timeline costs in proportion to its length
// (the filter does not reduce read units); a follow is rare next to a
// tweet, and the timelines table has no index by author that would avoid
// it.
//
// A tweet is fanned out on write to at most MaxFanOut (10,000) followers.
// A tweet whose author has more is written to the author's timeline and to
// those of the first MaxFanOut followers by followerId, then set aside
// (field dynamodb.Keys.authorId, category fan-out-limit) rather than hold
// its shard: the other followers' timelines do not show it, and a later
// REMOVE or MODIFY of it reaches the same first MaxFanOut. The package has
// no read path that could merge such an author's tweets into a timeline
// when it is read (what fan-out-on-read systems do for such accounts).
//
// # One entry: re-check, write, re-check
//
// The handler never trusts the record's image to decide an entry. For each
// touched entry (U, t by A) it reads the sources at processing time with
// consistent reads — GetItem of tweet (A, t) and of follow (U, A) — computes
// want = "t exists and (U = A or U follows A)", writes the deterministic
// item (PutItem of the tweet's current content, or DeleteItem), then reads
// the sources again; if want changed in between it writes again, until a
// read after its last write agrees with it (a few rounds, then the record
// fails and is retried). Every write is idempotent, so redelivery, bisected
// batches and duplicate invocations only repeat writes of the same value.
//
// # Why the view converges in any interleaving of the two streams
//
// The two streams are separate shards: a tweet and a follow can be
// processed in either order, and concurrently. Take one entry (U, t by A)
// after every record was processed, and the last write W to it. Its writer
// read the sources after W (the loop above) and that read agreed with W. If
// the sources changed after that read so that the entry should now differ,
// a change c to tweet t or to follow (U, A) happened after W, and c's
// record was processed after c, so after W:
//
//   - t was removed (entry present, should not be): the REMOVE touches U if
//     U still follows A when it is processed; if U had unfollowed in the
//     meantime, that unfollow's record touches every tweet by A in U's
//     timeline, which includes t (W was the last write).
//   - U unfollowed A: the unfollow touches t via U's timeline, as above.
//   - t was inserted or U followed A (entry absent, should be present): of
//     the tweet INSERT and the follow INSERT, the one processed later reads
//     both as present and touches (U, t): the tweet through the followers
//     index, the follow through A's tweets.
//
// A tweet record's fan-out may span deliveries: it "touches U" when it
// reads the page of the index that lists U, and a follow made after that
// read is the follow record's to apply, as above.
//
// In each case some processing touched (U, t) after W and wrote again,
// contradicting that W was last. So the final view equals the join of the
// final tables, whatever the interleaving, redelivery or duplication.
//
// Two assumptions bound the argument, and a user should know them: the
// followers index is a GSI, so a follow made a moment before a tweet may be
// missing from it for the index's propagation delay (usually well under a
// second); and a follow back-fills only A's latest MaxFanIn tweets (by
// tweetId, descending), so older tweets do not enter a new follower's
// timeline. A tweet's createdAt is part of the view's sort key, so a MODIFY
// that changes it moves the entry: its fan-out deletes, in each timeline it
// converges, the entry keyed by the OldImage's time (unless the tweet holds
// that time again by then), and the entry at the new time converges as any
// other. A follower a capped fan-out leaves out keeps the old entry.
//
// # Records that can never be applied
//
// A record whose keys are neither a tweet's nor a follow's, a tweet without
// a string createdAt, and a tweet whose timeline item would exceed
// DynamoDB's limits (400 KB for the item as DynamoDB counts it, 1 KB for the
// sort key; checked before the write, and a ValidationException about the
// item's size taken as the same answer) can never be applied as they are.
// Such a tweet is kept out of every timeline (its entry deleted), so the
// view is the join of the tweets that fit — still a function of the
// sources, so the argument above holds. The record is applied as far as it
// can be, then set aside (package setaside: the stream record as JSON, its
// sequence number and a reason naming the field, for example
// "dynamodb.NewImage.text", in the quarantine table, counted in
// RecordsSetAside), and the batch goes on; a follow that meets such a tweet
// is set aside after being applied to the others, with the field
// "dynamodb.NewImage.followeeId" (the follow holds none of the tweet's) and
// a reason naming the tweet and its field (so is a follow
// that meets a stored tweet whose createdAt is missing, not a string or
// holds '#': the tweet is left out of the follower's timeline, as its own
// record left it out of every other).
//
// A tweet whose author has more than MaxFanOut followers is set aside too,
// after being applied to the first MaxFanOut (see Fan-out above).
//
// Other failures (throttling, timeouts, sources that keep changing, a
// fan-out cut short by the deadline) are transient: they are reported by
// sequence number (the first record that failed; Lambda resumes there,
// and a fan-out resumes after its saved cursor). The handler emits EMF metrics TweetsIn,
// FollowsIn, ViewWrites, RecordsFailed and RecordsSetAside.
package timeline
