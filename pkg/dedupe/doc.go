// Package dedupe suppresses producer duplicates: an event whose id was
// already accepted within a horizon has no second effect, whichever way it
// came back (a producer retrying after a timeout or a 429, one request holding
// an id twice, a copy sent minutes later).
//
// Lambda's own retries are handled elsewhere, by sequence-number fences
// (package state): they redeliver the same record. A producer's copy is a new
// record with a new sequence number, so it needs the event's own identity.
//
// # Identity and claims
//
// An event is identified by its key and id: ids need to be unique per key
// (the key is the Kinesis partition key, so every copy of an event lands on
// the same shard, in order, and one key's ledger is enough to see them all).
// The identity is the first 128 bits of SHA-256 over key and id: for n ids of
// one key within the horizon the chance that two distinct ids collide — the
// only way a real event could be taken for a duplicate — is about n²/2¹²⁹,
// 1.5·10⁻²⁷ for a million.
//
// The first record that carries an identity claims it: the ledger keeps, per
// identity, a fingerprint of the record that claimed it (shard and sequence
// number), a fingerprint of its content (type, occurredAt, data), and when it
// arrived. A record whose identity is claimed by itself is Lambda redelivering
// it (the fences decide what it still has to do); by another record with the
// same content, a Duplicate; with other content, a Conflict — a different
// event reusing the id, refused with a reason rather than merged.
//
// The content reads data as a JSON value (ContentOf: strictjson's canonical
// spelling, the one es.Command.Fingerprint hashes), so a producer's retry
// that re-encodes the same data — keys in another order, white space,
// "ü" for "ü", "\/" for "/" — is a Duplicate. Claims made before it
// did hold the data's spelling less its white space (SpellingOf): a
// candidate carries that form too when it differs (ContentsOf,
// Candidate.Spelling), and a claim holding either is the same content, so
// the deploy that changed the fingerprint turns no copy of an event claimed
// before it into a Conflict. The other way round there is no such help: a
// version from before, rolled back to within the horizon, compares
// spellings only, and takes the copy of an event whose data is not spelt
// canonically (keys out of order), claimed by the newer version, for a
// Conflict. (A deploy does not meet it: a shard's batches, and so a key's
// claims, are judged one invocation after another.)
//
// # The ledger
//
// Each key has one small head item, rewritten with optimistic concurrency
// (its version) when a batch (per-batch path) or an interval (per-interval
// path) claims new identities, and sealed segment items written once, when the
// head would outgrow its budget (so a hot key never outgrows DynamoDB's 400 KB
// item, and a rewrite is billed for a small item), merged when a key has
// many (below). A warm process keeps each
// key's ledger in memory; a stale copy can only lack claims, which makes a
// record look New, and New records are only accepted once the conditional
// write of the head succeeds — when it fails, DynamoDB hands back the head as
// it is and the key is judged again. Duplicate and Redelivered verdicts never
// need that check: claims are immutable.
//
// A head that would outgrow its budget seals its oldest claims, 24 at a
// time: 864 bytes, and with the item's names, key and TTL (the views
// table's: 44 bytes beside the pipeline's name and the key) one write unit
// while the pipeline's name and the key take 116 bytes or less together.
// The rest stay in the head — no more than the commit brought — which
// holds at most 24 claims, and only as many as fit one write unit beside
// its key, version, TTL (50 bytes beside the pipeline's name and key) and
// the names of its live segments (3 bytes each, 5 once merged): a key
// naming many segments seals sooner, in segments of fewer claims. Sealing
// the whole head and the commit's claims, as the ledger did, wrote 25 to
// 48 claims, 0.9 to 1.8 KB, most of them two write units (bench/load at
// 100 events a second over 1,000 keys: 1.8 units a seal, the segments'
// 0.058 write units an event; now one, 0.042, at 0.9 KB a seal). A commit
// whose new claims alone outgrow the head (a hot key) seals them with the
// head's in segments of up to 8,000: a large segment is billed by its
// bytes however it is cut, and fewer segments are merged less.
//
// Sealing is two plain writes, the segment then the head, at half a
// transaction's write units: the head's conditional write is the commit,
// and only the segments a head names are read. A segment's item is its
// number and a salt, a hash of its claims, which the head records, and it
// is put only where no item is or the same claims are (else under the next
// salt): a process sealing other claims from a stale head, whose head write
// then fails, never overwrites a segment another process committed; what
// it wrote, named by no head, expires.
//
// # Hash ranges
//
// A ledger a key writes a head for every key a commit has new claims of:
// at 100 events a second over 1,000 keys, a flush every two minutes
// rewrites about 500 heads a shard, a write unit each, for a dozen claims
// of 36 bytes each. WithRanges keeps the claims of every key whose MD5
// falls in one sixteenth of the hash space (RangeOf) in one ledger
// instead: the range is the ledger's key, and a commit writes, per range
// with new claims, one head and one segment of its claims (a commit
// whose claims outgrow the head seals them, as a hot key's), billed by
// their bytes. Kinesis places a record by the MD5 of its partition key,
// which is the event's key, so each shard's keys fill ranges of their own
// — eight for each of two shards — and a reshard's children take whole
// ranges, or share the one at their bound. A range shared by two shards,
// or by batches of one shard read side by side, sees the other's commits
// as any stale copy does: its conditional write fails, and it judges
// again on what it is handed back.
//
// One of two shards sharing a range may be hours behind the other, so a
// range does not drop claims by the horizon counted back from the newest
// arrival it holds (the shard ahead would take the claims the shard behind
// still judges its copies against): it names a segment until the
// segment's TTL passes — the horizon and an hour after it was written, or
// after its newest claim's arrival when later — as long as a key's items
// live; a merge keeps the latest TTL of the segments it merges. So a range
// holds its claims of the horizon and an hour of wall-clock time, and a
// range is judged whole (complete): a process holds every claim of the
// ranges it judges, about 720,000 at 100 events a second at the default
// horizon, and past its cache (CacheEntriesFor) reads whole ranges again at
// each batch, where a ledger a key reads only the keys it misses.
//
// WithPredecessor names the ledger of the other layout a deploy moved
// from, with the claims made before it: while a ledger is younger than the
// horizon and an hour (firstVersion: its first commit's newest arrival,
// and for a range not before the wall clock then, so a shard hours behind
// that writes a range first does not end its young time early), a record
// it would take for new is first judged against the stored claims of the
// predecessor, read only. Only the claims stored there count: records of
// one batch sharing an id are the ledger's own to judge. A ledger with no
// head yet is young. An interval carried through the deploy holds its
// claims under the other layout's keys: per key into ranges they are
// settled under their ranges (Regroup); under a range into a ledger a
// key, they are settled in the range and written there (Session.theirs).
// A ledger's own age cannot say when the layout last changed (a key whose
// ledger began before a range layout came and went is old), so the
// pipeline's layout marker says it (WithLayoutMarker, layout.go): one item
// naming the layout that last took over and since when, read at each Judge
// and rewritten by the first process of the other layout. Every ledger is
// young for the horizon and an hour from the change, whichever way it
// went, and claims an interval carried through it under the other
// layout's keys judge the copies after them (Session.theirsByID): a change
// back, or a roll-forward after a rollback, keeps every claim. For a few
// minutes after it the other layout's heads are read again at each Judge
// (instances of the code before, which Lambda may still run, claim there),
// then once an interval while young (intervals carried through the change
// write there at their flush). Code from before the marker (8 December)
// neither reads nor writes it: a rollback to it finds the newer code's
// claims in the other layout only for ledgers young by their own age, and
// rolling forward after it needs the marker deleted first; otherwise
// copies of events claimed in between count again.
//
// # Hot keys: merged segments
//
// The head names its live segments (about 5 bytes each: a number and a
// salt). A key that seals a segment at every commit over a long horizon
// would name ever more — at 168h and a seal every 4.4 s, 136,000 of them,
// past DynamoDB's 400 KB item, and every commit of the key would fail — so
// when more than 128 (WithMaxSegments) are live, a seal also merges
// adjacent segments of one size tier, four (else three, else two), the
// smallest first, into a new segment that takes their place in the head.
// A tier is a factor of four in claims, rounded, from a sealed segment
// (24) up to a full one (8,000), so a claim is merged again a few times:
// four from the smallest tier to the largest, fewer when it expires first,
// more where claims past the horizon leave merges short and shorter runs
// are merged (modelled below: 3.2 times at 1h, 8.3 at 24h, 8.1 at 168h;
// 2.8, 7.5 and 6.0 when a seal took the whole head, 25 claims there;
// TestModelAHotKey fails past 10). The
// merged segment is put like a sealed one, before the head; the segments
// it replaces stay until they expire, for a process still holding the
// head that named them. Merging leaves out claims past the horizon and
// never drops one within it.
//
// What a hot key costs (TestModelAHotKey: a claim a commit, 24 every
// 4.4 s, pipeline pageviews and a 10-byte key, measured over a second
// horizon's commits): at the default 1h the head is 0.8 KB on average and
// at most 1 KB, one write unit a rewrite, and a seal every 12 commits (the
// names of 128 segments leave room for about 11 claims) writes 2.35 units
// of segments, merges included: 1.20 write units a commit in all, where
// sealing the whole head past 24 made 1.69 (a head of up to 1.5 KB, 1.54
// units a rewrite, and 3.6 units a seal every 25 commits). At 24h, 0.8 KB,
// one unit a rewrite and 3.9 a seal every 9.7 commits: 1.40 a commit (1.95
// before); at most 128 segments: where no adjacent run of one tier fits a
// segment (neighbours either side of a tier's bound, as a hot key's
// commits of 30 and 50 claims seal them), the adjacent pair with the
// fewest claims is merged, of sizes within four times of each other (up
// to 188 were left before it, 179 before the seals of one unit). At 168h
// (2732281, 7 December) the names of up to 520 segments make a head of
// 2.7 KB on average and 3.1 KB at most, 3 units a rewrite, and a seal
// every 19 commits writes 6.6: 3.35 a commit; no fewer than the 412
// segments of 8,000 that its 3.3 million claims take can be named. Before
// pairs were merged it was 3.31 (626 segments named, 3.7 units a seal
// every 12 commits); with any pair merged, whatever its sizes, 8.94: each
// seal was merged into a full neighbour and rewrote it, a claim merged
// 167 times and 141 units a seal (TestAHotKeyPastItsSegmentsIsNotMergedAgainAndAgain
// keeps that from coming back, at a smaller scale). Past 128 segments of several thousand claims (790,000 to a
// million within the horizon) the head grows by about 5 bytes for every
// 5,000 to 8,000 claims more: at 168h, 3.3 million claims, more than a
// Lambda function's cache holds. The head names at most 4,096 segments
// (WithSegmentLimit: about 20 KB, some 20 to 32 million claims merged): a key
// whose claims within the horizon need more lets its oldest segments go
// early, counted in Stats.DroppedEarly (the functions' DedupeDroppedEarly
// metric and a warning), and copies of those events count again — rather
// than a head that reaches the item limit and fails every commit of the
// key, holding its shard.
//
// A head whose segments are first to next−1 in order (no merge yet) is
// written as before merges: first, next and a salt each; a merged one as
// a list of numbers and salts.
//
// Claims older than the horizon (by the claiming record's arrival time) are
// dropped; a copy that arrives later than that counts again.
//
// # Expiry
//
// With WithTTLAttribute, DynamoDB deletes a key's items once they can hold
// no live claim: each expires the horizon and an hour (ttlSlack) after the
// newest arrival of its claims — but never sooner than the horizon and an
// hour after it is written (WithClock). Records read again long after they
// arrived (cmd/replay rebuild from the archive, a replay from the stream's
// retention, a consumer catching up on a backlog older than the horizon)
// would otherwise write items whose time to live has already passed, which
// DynamoDB may delete at any moment while the rebuild still needs them: a
// process starting cold, or a batch retried after a crash, would read the
// ledger back without those claims and count a copy again. The floor keeps
// a rebuild's claims while it reads each horizon's worth of records within
// the horizon and an hour of wall-clock time; live records, arriving now,
// keep arrival + horizon + an hour.
package dedupe
