package dedupe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/limits"
)

// Store is what a Ledger needs of DynamoDB.
type Store interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

var _ Store = (*dynamodb.Client)(nil)

// ItemKey returns the primary key of one of key's ledger items: the head when
// segment is Head, otherwise sealed segment number segment. It lets the
// ledger live in a table of its user (the views table, a join table) under
// keys that cannot meet the user's own.
type ItemKey func(key string, segment int64) map[string]types.AttributeValue

// Head is the segment number ItemKey is given for the head item.
const Head int64 = -1

// Attribute names of ledger items.
const (
	attrVersion = "v"  // head: version, bumped by every write
	attrEntries = "e"  // head and segments: encoded entries
	attrFirst   = "sf" // head: the first segment that may still hold live claims
	attrNext    = "sn" // head: the number the next sealed segment gets
	// attrSalts is the head's salt of each live sealed segment, first to
	// next−1, uvarints: a segment sealed with salt s is the item of
	// segment number n<<saltBits | s (itemOf), 0 meaning n itself (a
	// segment sealed in a transaction, before salts). A head whose live
	// segments are not first to next−1 (some were merged) has attrList
	// instead of attrFirst and attrSalts.
	attrSalts = "ss"
	// attrList is the head's live segments, oldest first, when they are
	// not first to next−1: per segment its number, zigzag uvarint of the
	// difference from the one before (from 0 for the first), and its salt,
	// a uvarint.
	attrList = "sl"
)

// saltBits is how many low bits of a sealed segment's item number are its
// salt (saltOf): two writers sealing segment n of one key at once, with
// other claims, write two items, and the loser's, never named by a head,
// cannot overwrite the winner's; the same claims make the same item, the
// same bytes of claims (its TTL follows the clock of its write: setTTL).
const saltBits = 20

// saltOf is a segment's salt at try: a hash of its encoded claims and try,
// never 0 (the salt of a segment sealed before salts).
func saltOf(entries []byte, try int) uint32 {
	h := fnv.New64a()
	_, _ = h.Write(entries)
	_, _ = h.Write([]byte{byte(try)})
	return uint32(h.Sum64()%(1<<saltBits-1)) + 1
}

// maxRefBytes is the most a segment takes in the head's list (attrList):
// its number's difference, a varint, and its salt, a uvarint below
// 1<<saltBits.
const maxRefBytes = binary.MaxVarintLen64 + (saltBits+6)/7

// saltTries bounds the salts a seal tries for its segment's item.
const saltTries = 8

// Defaults. A head seals its claims 24 at a time (sealUnit): 864 bytes,
// and with the names, key and TTL of the views table's items
// (state.LedgerKey: "dedupe#<pipeline>#<key>", "seg#" and 12 digits; 44
// bytes beside the pipeline's name and the key) one write unit, 1 KB,
// while the pipeline's name and the key take 116 bytes or less together.
// The head holds at most 24 claims, and only as many as fit one write
// unit beside its key, version and TTL (50 bytes beside the pipeline's
// name and key) and the names of its live segments (about 3 bytes each, 5
// once merged): headRoom. A segment of 8,000 entries is 288 KB, well
// within an item. A head names at most 128 live segments (about 640
// bytes) while merging adjacent ones can keep it there (see plan).
const (
	DefaultHorizon   = time.Hour
	defaultHeadMax   = 24
	defaultSegMax    = 8000
	defaultMaxSegs   = 128
	defaultSegLimit  = 4096
	mergeRun         = 4       // segments a merge takes when they fit one segment
	defaultCacheMax  = 1 << 20 // entries kept in memory across keys
	ttlSlack         = time.Hour
	maxBatchGet      = 100
	maxWriteAttempts = 8
)

// Ledger is the claims of one scope (a pipeline, a consumer), per key, in a
// DynamoDB table, with a warm in-memory copy. Safe for concurrent use.
type Ledger struct {
	db       Store
	table    string
	itemKey  ItemKey
	horizon  time.Duration
	ttlAttr  string
	headMax  int
	segMax   int
	maxSegs  int
	segLimit int
	cacheMax int
	// now is the wall clock, which floors the TTL of what is written
	// (setTTL).
	now func() time.Time
	// ranges: the claims of the keys of one hash range share a ledger
	// (WithRanges); prev is the ledger of the other layout, which this one
	// took over from (WithPredecessor).
	ranges bool
	prev   *Ledger
	// marker is the pipeline's layout marker (WithLayoutMarker), or nil.
	marker *layoutMarker

	mu      sync.Mutex
	cache   map[string]*keyLedger
	entries int    // cached entries across keys
	clock   uint64 // use counter for eviction
	stats   Stats
}

// Stats counts a Ledger's requests, for metrics and benchmarks.
type Stats struct {
	Reads, Writes, Conflicts, Seals int
	// DroppedEarly counts claims a head let go of before the horizon:
	// a key so hot that even merged its segments pass WithSegmentLimit
	// (see plan). Copies of those events are no longer suppressed.
	DroppedEarly int
}

// Option configures a Ledger.
type Option func(*Ledger)

// WithHorizon sets how long a claim is kept (default DefaultHorizon).
func WithHorizon(d time.Duration) Option { return func(l *Ledger) { l.horizon = d } }

// WithTTLAttribute names the table's TTL attribute, so expired ledger items
// are deleted by DynamoDB ("" writes none).
func WithTTLAttribute(name string) Option { return func(l *Ledger) { l.ttlAttr = name } }

// WithClock sets the wall clock (default time.Now). An item written now
// lives at least the horizon and an hour from now, whatever the arrival
// times of its claims (setTTL); tests fix it so that the items they
// compare are the same from run to run.
func WithClock(now func() time.Time) Option { return func(l *Ledger) { l.now = now } }

// WithRanges keeps the claims of every key whose hash falls in one of
// Ranges equal ranges in one ledger (RangeOf), rather than a ledger a key:
// a commit writes one head, and one segment of the commit's claims, per
// range with new claims, where a ledger a key writes a head per key. See
// the package documentation, "Hash ranges".
func WithRanges() Option { return func(l *Ledger) { l.ranges = true } }

// WithPredecessor names the ledger of the other layout (by key, or by hash
// range: WithRanges) that this one took over from, with the claims made
// before the deploy: while a ledger is younger than the horizon and an hour
// (young), the records it would take for new are judged against prev's
// stored claims first, read only, and prev's verdict stands where it holds
// a claim on the identity.
func WithPredecessor(prev *Ledger) Option { return func(l *Ledger) { l.prev = prev } }

// WithHeadEntries bounds the head item's claims (default 24), which a
// head that fills up seals that many at a time (default: a segment of one
// write unit, 1 KB); the head holds fewer while more would take it past
// the write units the rest of it takes.
func WithHeadEntries(n int) Option { return func(l *Ledger) { l.headMax = max(1, n) } }

// WithSegmentEntries bounds a sealed segment (default 8,000 entries, 288 KB).
func WithSegmentEntries(n int) Option { return func(l *Ledger) { l.segMax = max(1, n) } }

// WithMaxSegments is how many live sealed segments a key's head names
// before adjacent ones are merged (default 128, at least 2; a
// WithSegmentLimit below it is merged toward instead).
func WithMaxSegments(n int) Option { return func(l *Ledger) { l.maxSegs = max(2, n) } }

// WithSegmentLimit is the most live sealed segments a key's head names at
// all (default 4,096: a head of about 20 KB, some 32 million claims in
// merged segments; at most what a head can name within DynamoDB's item
// limit, about 31,000). A key whose claims within the horizon need more has
// its oldest segments let go of early, counted in Stats.DroppedEarly,
// rather than a head that grows to DynamoDB's item limit and then fails
// every commit of the key, holding its shard.
func WithSegmentLimit(n int) Option { return func(l *Ledger) { l.segLimit = max(1, n) } }

// WithCacheEntries bounds the in-memory copy (default: CacheEntriesFor the
// Lambda function's memory, AWS_LAMBDA_FUNCTION_MEMORY_SIZE, else 1,048,576
// entries, about 140 MB); least recently used keys are dropped past it and
// read again when needed.
func WithCacheEntries(n int) Option { return func(l *Ledger) { l.cacheMax = max(1, n) } }

// cachedEntryBytes is what one cached claim takes in memory, its entry in
// its segment or head and in its key's index (TestCachedEntryBytes).
const cachedEntryBytes = 136

// CacheEntriesFor is the in-memory copy a function of memoryMB keeps: a
// quarter of its memory (the heap grows to twice what is live between
// collections). The cache must hold the claims of the horizon for every key
// a function sees, or each invocation reads the segments of the keys it
// evicted again: at 1,000 events a second over 10 keys, one function's
// 1,048,576 entries (1 h of 500 events a second is 1.8 million) turned
// into about 600 segment reads a key and interval, 0.9 read units an event
// (bench/load). At 1,024 MB it is about 1.97 million claims, an hour of 500
// events a second: the stack's two shards at 1,000.
func CacheEntriesFor(memoryMB int) int { return max(1<<16, memoryMB<<20/4/cachedEntryBytes) }

// DefaultCacheEntries is CacheEntriesFor the running Lambda function's
// memory, or 1,048,576 entries outside Lambda: the cache a Ledger keeps
// without WithCacheEntries.
func DefaultCacheEntries() int {
	if mb, err := strconv.Atoi(os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")); err == nil && mb > 0 {
		return CacheEntriesFor(mb)
	}
	return defaultCacheMax
}

// NewLedger returns the ledger kept in table under the keys itemKey gives.
func NewLedger(db Store, table string, itemKey ItemKey, opts ...Option) *Ledger {
	l := &Ledger{db: db, table: table, itemKey: itemKey, horizon: DefaultHorizon,
		headMax: defaultHeadMax, segMax: defaultSegMax, maxSegs: defaultMaxSegs, segLimit: defaultSegLimit, cacheMax: DefaultCacheEntries(),
		now: time.Now, cache: map[string]*keyLedger{}}
	for _, o := range opts {
		o(l)
	}
	if l.segMax*entrySize > limits.DynamoDBItemBytes-4096 {
		l.segMax = (limits.DynamoDBItemBytes - 4096) / entrySize
	}
	// The head must name every segment the limit lets live, whatever
	// their numbers, beside its own claims.
	if fit := (limits.DynamoDBItemBytes - 4096 - l.headMax*entrySize) / maxRefBytes; l.segLimit > fit {
		l.segLimit = max(1, fit)
	}
	return l
}

// Horizon is how long claims are kept.
func (l *Ledger) Horizon() time.Duration { return l.horizon }

// Stats returns the requests made so far.
func (l *Ledger) Stats() Stats {
	l.mu.Lock()
	st := l.stats
	l.mu.Unlock()
	if l.prev != nil {
		// Its reads while young; its writes, claims carried in under its
		// keys (Session.theirs).
		ps := l.prev.Stats()
		st.Reads += ps.Reads
		st.Writes += ps.Writes
	}
	return st
}

// keyLedger is one key's claims as last seen in the table.
type keyLedger struct {
	version int64
	head    []Entry
	next    int64 // the number the next sealed (or merged) segment gets
	// live is each live sealed segment, oldest first.
	live []segRef
	segs map[int64][]Entry // by item number; made by setSeg at the first segment
	// newest is each segment's newest arrival, by item number, set with
	// segs: a hot key over a long horizon holds millions of claims, which
	// each commit would otherwise scan to find the horizon.
	newest map[int64]uint32
	// expires is each segment's expiry (its TTL, Unix seconds), by item
	// number, where known: a ledger of hash ranges (WithRanges) lets a
	// segment go by it, not by its claims' arrival (see plan).
	expires map[int64]int64
	byID    map[Identity]Entry // each identity's newest claim
	// earlier holds the older claims of identities claimed again after
	// the horizon, kept until they expire: a record of the batch that made
	// the older claim, redelivered, must still find its own claim.
	earlier map[Identity][]Entry
	tag     string // the interval this copy was read or written in
	// loading marks a head read (or handed back by a failed write) whose
	// segments are not read yet: judged on, it would take a copy whose
	// claim is in a segment for a new event. Other sessions read it again.
	loading bool
	lastUse uint64
}

// setSeg records the claims of the segment at item. A key's ledger has no
// segment until its head first fills up, so the map is made then, not
// with every key read.
func (k *keyLedger) setSeg(item int64, es []Entry) {
	if k.segs == nil {
		k.segs, k.newest = map[int64][]Entry{}, map[int64]uint32{}
	}
	k.segs[item] = es
	k.newest[item] = maxArrival(es)
}

// setExpiry records the expiry of the segment at item (0: not known).
func (k *keyLedger) setExpiry(item, exp int64) {
	if exp == 0 {
		return
	}
	if k.expires == nil {
		k.expires = map[int64]int64{}
	}
	k.expires[item] = exp
}

// newestInSegments is the newest arrival of k's segments' claims.
func (k *keyLedger) newestInSegments() uint32 {
	var n uint32
	for _, a := range k.newest {
		n = max(n, a)
	}
	return n
}

// keepSegments takes the segments prev holds that k names too: sealed
// segments never change, and an item number holds one segment's claims
// while it lives (a segment is put only where no item is or the same
// claims are; its salt is a hash of them).
func (k *keyLedger) keepSegments(prev *keyLedger) {
	for _, r := range k.live {
		if seg, ok := prev.segs[r.item()]; ok {
			k.setSeg(r.item(), seg)
			k.setExpiry(r.item(), prev.expires[r.item()])
		}
	}
}

// segRef names a sealed segment: its number and salt.
type segRef struct {
	n    int64
	salt uint32 // 0: none (sealed before salts)
}

// item is the segment's item number (ItemKey's segment): n<<saltBits|salt,
// or n when it has no salt.
func (r segRef) item() int64 {
	if r.salt == 0 {
		return r.n
	}
	return r.n<<saltBits | int64(r.salt)
}

// complete reports whether k holds the claims of every live segment.
func (k *keyLedger) complete() bool {
	for _, r := range k.live {
		if _, ok := k.segs[r.item()]; !ok {
			return false
		}
	}
	return true
}

func (k *keyLedger) size() int {
	n := len(k.head)
	for _, s := range k.segs {
		n += len(s)
	}
	return n
}

func (k *keyLedger) index() {
	k.byID = make(map[Identity]Entry, k.size())
	k.earlier = nil
	for _, r := range k.live {
		for _, e := range k.segs[r.item()] {
			k.indexOne(e)
		}
	}
	for _, e := range k.head {
		k.indexOne(e)
	}
}

// indexOne adds a claim to k's index: its identity's newest claim, the
// others shadowed (earlier).
func (k *keyLedger) indexOne(e Entry) {
	old, ok := k.byID[e.ID]
	switch {
	case !ok:
		k.byID[e.ID] = e
	case old == e:
	case e.Arrival >= old.Arrival:
		k.byID[e.ID] = e
		k.shadow(old)
	default:
		k.shadow(e)
	}
}

// unindexOne takes a claim out of k's index, as indexing k without it
// would leave it: the newest of its identity's other claims takes its
// place when it was the newest.
func (k *keyLedger) unindexOne(e Entry) {
	older := k.earlier[e.ID]
	if cur, ok := k.byID[e.ID]; ok && cur == e {
		if len(older) == 0 {
			delete(k.byID, e.ID)
			return
		}
		newest := 0
		for i := range older {
			if older[i].Arrival >= older[newest].Arrival {
				newest = i
			}
		}
		k.byID[e.ID] = older[newest]
		older = slices.Delete(older, newest, newest+1)
	} else if i := slices.Index(older, e); i >= 0 {
		older = slices.Delete(older, i, i+1)
	}
	if len(older) == 0 {
		delete(k.earlier, e.ID)
	} else {
		k.earlier[e.ID] = older
	}
}

func (k *keyLedger) shadow(e Entry) {
	if k.earlier == nil {
		k.earlier = map[Identity][]Entry{}
	}
	k.earlier[e.ID] = append(k.earlier[e.ID], e)
}

// claimAt returns the claim on id in force when a record that arrived at
// arrival came: the newest claim made at or before it (the newest of all
// when none was).
func (k *keyLedger) claimAt(id Identity, arrival uint32) (Entry, bool) {
	e, ok := k.byID[id]
	if !ok || e.Arrival <= arrival {
		return e, ok
	}
	var best Entry
	found := false
	for _, o := range k.earlier[id] {
		if o.Arrival <= arrival && (!found || o.Arrival > best.Arrival) {
			best, found = o, true
		}
	}
	if found {
		return best, true
	}
	return e, true
}

func maxArrival(es []Entry) uint32 {
	var m uint32
	for i := range es {
		m = max(m, es[i].Arrival)
	}
	return m
}

// Verdict is what the ledger says of one record.
type Verdict uint8

// The verdicts.
const (
	// New: no live claim on the identity; the record claims it and has its effect.
	New Verdict = iota + 1
	// Redelivered: the record itself claimed the identity before (Lambda
	// retried it); it goes on, and the fences decide what it still has to do.
	Redelivered
	// Duplicate: another record with the same content claimed it: no effect.
	Duplicate
	// Conflict: another record with other content claimed it: no effect, and
	// the record is refused with a reason.
	Conflict
)

func (v Verdict) String() string {
	switch v {
	case New:
		return "new"
	case Redelivered:
		return "redelivered"
	case Duplicate:
		return "duplicate"
	case Conflict:
		return "conflict"
	}
	return "unknown"
}

// Applies reports whether a record with this verdict has its effect.
func (v Verdict) Applies() bool { return v == New || v == Redelivered }

// Candidate is one record to judge.
type Candidate struct {
	Key string // the event's key (its partition key)
	Entry
	// Spelling is the record's content as a claim made before ContentOf
	// read data as a JSON value holds it (ContentsOf), zero when that is
	// Entry.Content: a claim with it is the same content, so a copy
	// arriving after the deploy of a record claimed before is a Duplicate,
	// not a Conflict. Such claims are past every ledger's horizon (at most
	// pipeline.MaxDedupeHorizon, 168h) that long after the deploy; Spelling
	// may go in a release after that.
	Spelling Fingerprint
}

// sameContent reports whether a claim's content is the candidate's, in
// either of the two forms claims hold (Candidate.Spelling).
func (c *Candidate) sameContent(claim Fingerprint) bool {
	return claim == c.Content || c.Spelling != (Fingerprint{}) && claim == c.Spelling
}

// Session judges the records of one batch, or of one invocation of an
// interval, and commits their new claims.
type Session struct {
	l       *Ledger
	tag     string
	cands   []Candidate
	verdict []Verdict
	lkeys   []string // each candidate's ledger key (Ledger.KeyOf)
	// earlier holds the verdicts the predecessor gave (WithPredecessor),
	// by candidate: records claimed in the other layout before this one
	// took over, never judged against this one.
	earlier map[int]Verdict
	keys    map[string]*sessionKey
	// Raced lists claims carried through an interval that another record
	// made first (see Commit): their effect is already in the interval's
	// partial aggregates and cannot be taken out.
	Raced   []Candidate
	carried map[string][]Entry // not yet settled against the ledger
	// theirs are claims carried under the predecessor's ledger keys (an
	// interval a range ledger began, a deploy to a ledger a key before its
	// flush): they are carried on, and committed to the predecessor, where
	// this ledger looks them up while young.
	theirs map[string][]Entry
	// theirsByID indexes theirs: a copy of one of them later in the
	// interval is judged on it, as on a claim carried under its own key.
	theirsByID map[Identity]Entry
}

type sessionKey struct {
	cands   []int   // indexes into Session.cands, in order
	carried []Entry // claims made earlier in the interval, not yet written
	pending []Entry // carried + claims made in this session
	byID    map[Identity]Entry
	dirty   bool // has claims the ledger does not hold yet
	// basis is the copy of the key's ledger the verdicts were made on:
	// a commit writes on it only, since another session of this Ledger
	// may have replaced the cached copy meanwhile (its own write, or a
	// fresher read) with one holding claims these verdicts never saw.
	basis *keyLedger
}

// Begin starts a session. tag is "" on the per-batch path; on the
// per-interval path it names the interval (shard and window start, plus a
// generation bumped by every early commit), and carried holds the claims
// made earlier in the interval, per key, not yet written (see Pending).
// Within an interval only the interval's own invocations write a key's
// ledger, so a copy read in it stays good until the interval commits.
func (l *Ledger) Begin(tag string, carried map[string][]Entry) *Session {
	s := &Session{l: l, tag: tag, keys: map[string]*sessionKey{}, carried: l.Regroup(carried)}
	if !l.ranges && l.prev != nil && l.prev.ranges {
		for k, es := range s.carried {
			if IsRange(k) {
				if s.theirs == nil {
					s.theirs = map[string][]Entry{}
					s.carried = maps.Clone(s.carried)
				}
				s.theirs[k] = es
				delete(s.carried, k)
			}
		}
		if len(s.theirs) > 0 {
			s.theirsByID = map[Identity]Entry{}
		}
		for _, es := range s.theirs {
			for _, e := range es {
				if have, ok := s.theirsByID[e.ID]; !ok || e.Arrival > have.Arrival {
					s.theirsByID[e.ID] = e
				}
			}
		}
	}
	return s
}

// key is the session's entry for key, made with room for n claims (the
// claims carried to it from earlier in the interval, about to be settled)
// when it has none yet.
func (s *Session) key(key string, n int) *sessionKey {
	if sk, ok := s.keys[key]; ok {
		return sk
	}
	sk := &sessionKey{
		byID:    make(map[Identity]Entry, n),
		carried: make([]Entry, 0, n),
		pending: make([]Entry, 0, n),
	}
	s.keys[key] = sk
	return sk
}

// Judge loads what it needs of the keys' ledgers and judges cands in order
// (a later copy in the same batch is a Duplicate of the first). The
// verdicts of New records are provisional until Commit; Verdicts gives the
// final ones. The first Judge of a session also settles the claims carried
// into it: those the ledger already holds are dropped. A session is judged
// once (every caller judges its batch's records in one call): a second
// Judge does not read again the keys the first loaded, so what another
// process committed for them in between is not seen.
func (s *Session) Judge(ctx context.Context, cands []Candidate) error {
	if err := s.l.readLayout(ctx); err != nil {
		return err
	}
	base := len(s.cands)
	s.cands = append(s.cands, cands...)
	s.verdict = append(s.verdict, make([]Verdict, len(cands))...)
	var keys []string
	for key := range s.carried {
		keys = append(keys, key)
	}
	for i := range cands {
		lk := s.l.KeyOf(cands[i].Key)
		s.lkeys = append(s.lkeys, lk)
		sk := s.key(lk, 0)
		if len(sk.cands) == 0 {
			keys = append(keys, lk)
		}
		sk.cands = append(sk.cands, base+i)
	}
	if err := s.load(ctx, keys); err != nil {
		return err
	}
	if s.l.prev != nil {
		var young []int
		for i := base; i < len(s.cands); i++ {
			if s.l.young(s.l.cache[s.lkeys[i]], s.cands[i].Arrival) {
				young = append(young, i)
			}
		}
		if len(young) > 0 {
			s.l.mu.Unlock()
			if err := s.judgeEarlier(ctx, young); err != nil {
				return err
			}
			if err := s.load(ctx, keys); err != nil {
				return err
			}
		}
	}
	defer s.l.mu.Unlock()
	for key, es := range s.carried {
		kl, sk := s.l.cache[key], s.key(key, len(es))
		for _, e := range es {
			s.settle(kl, sk, Candidate{Key: key, Entry: e})
		}
	}
	s.carried = nil
	for i := base; i < len(s.cands); i++ {
		lk := s.lkeys[i]
		s.verdict[i] = s.judgeAt(i, s.l.cache[lk], s.keys[lk])
	}
	for key, sk := range s.keys {
		sk.basis = s.l.cache[key]
	}
	return nil
}

// load reads what the session needs of keys' ledgers and returns with
// s.l.mu held and every one of them in the cache.
func (s *Session) load(ctx context.Context, keys []string) error {
	for attempt := 0; ; attempt++ {
		if err := s.l.ensure(ctx, keys, s.tag); err != nil {
			return err
		}
		s.l.mu.Lock()
		loaded := true
		for _, k := range keys {
			if kl := s.l.cache[k]; kl == nil || kl.loading {
				loaded = false // dropped meanwhile by another session's failure, or being read again
			}
		}
		if loaded {
			return nil
		}
		s.l.mu.Unlock()
		if attempt == maxWriteAttempts {
			return ErrConflict
		}
	}
}

// judgeEarlier judges the candidates at idx against the claims the
// predecessor holds (WithPredecessor), read only: those it holds a claim
// on keep its verdict. Claims among the candidates themselves are this
// ledger's to judge (a record of the batch may be claimed here by an
// earlier delivery of another).
func (s *Session) judgeEarlier(ctx context.Context, idx []int) error {
	prev := s.l.prev
	ps := prev.Begin(s.l.predecessorTag(s.tag), nil)
	keys := make([]string, 0, len(idx))
	for _, i := range idx {
		keys = append(keys, prev.KeyOf(s.cands[i].Key))
	}
	if err := ps.load(ctx, keys); err != nil {
		return fmt.Errorf("the dedupe ledgers of the layout before (dedupeLedger): %w", err)
	}
	defer prev.mu.Unlock()
	for j, i := range idx {
		c := &s.cands[i]
		kl := prev.cache[keys[j]]
		e, ok := kl.claimAt(c.ID, c.Arrival)
		if !ok || e.Arrival < prev.cutoff(c.Arrival) {
			continue
		}
		if s.earlier == nil {
			s.earlier = map[int]Verdict{}
		}
		s.earlier[i] = verdictOn(e, c)
	}
	return nil
}

// judgeAt decides candidate i: the predecessor's verdict when it held a
// claim on it, else judge's. s.l.mu held.
func (s *Session) judgeAt(i int, kl *keyLedger, sk *sessionKey) Verdict {
	if v, ok := s.earlier[i]; ok {
		return v
	}
	return s.judge(kl, sk, &s.cands[i])
}

// settle takes a claim carried from earlier in the interval: still to be
// written (kept), written already (an earlier commit of this interval that
// did not hear back: dropped), or made first by another record (Raced).
// s.l.mu held.
func (s *Session) settle(kl *keyLedger, sk *sessionKey, c Candidate) {
	switch s.judge(kl, sk, &c) {
	case New:
		sk.carried = append(sk.carried, c.Entry)
	case Redelivered:
	default:
		s.Raced = append(s.Raced, c)
	}
}

// judge decides one candidate; s.l.mu held.
func (s *Session) judge(kl *keyLedger, sk *sessionKey, c *Candidate) Verdict {
	cutoff := s.l.cutoff(c.Arrival)
	e, ok := sk.byID[c.ID]
	if !ok && kl != nil {
		e, ok = kl.claimAt(c.ID, c.Arrival)
	}
	if !ok {
		e, ok = s.theirsByID[c.ID]
	}
	if ok && e.Arrival >= cutoff {
		return verdictOn(e, c)
	}
	sk.pending = append(sk.pending, c.Entry)
	sk.byID[c.ID] = c.Entry
	sk.dirty = true
	return New
}

// verdictOn is the verdict on c of e, a live claim on its identity.
func verdictOn(e Entry, c *Candidate) Verdict {
	switch {
	case e.Claim == c.Claim:
		return Redelivered
	case c.sameContent(e.Content):
		return Duplicate
	default:
		return Conflict
	}
}

func (l *Ledger) cutoff(arrival uint32) uint32 {
	h := uint32(l.horizon / time.Second)
	if arrival <= h {
		return 0
	}
	return arrival - h
}

// Verdicts returns the verdict of every candidate judged, in order.
func (s *Session) Verdicts() []Verdict { return s.verdict }

// Candidates returns every candidate judged, in order.
func (s *Session) Candidates() []Candidate { return s.cands }

// Pending returns the claims made in the interval and not yet written, per
// key: what the per-interval path carries in Lambda's window state.
func (s *Session) Pending() map[string][]Entry {
	out := map[string][]Entry{}
	for key, sk := range s.keys {
		if sk.dirty && len(sk.pending) > 0 {
			out[key] = sk.pending
		}
	}
	for key, es := range s.theirs {
		out[key] = es
	}
	return out
}

// PendingCount is the number of claims Pending would return.
func (s *Session) PendingCount() int {
	n := 0
	for _, sk := range s.keys {
		if sk.dirty {
			n += len(sk.pending)
		}
	}
	for _, es := range s.theirs {
		n += len(es)
	}
	return n
}

// KeyError is a commit that failed for one key (a transient error: its
// records must be retried).
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("dedupe ledger of %s: %v", KeyName(e.Key), e.Err)
}
func (e *KeyError) Unwrap() error { return e.Err }

// Commit writes the session's new claims, one conditional write per key with
// new claims (and one more write per segment a head that fills up seals). A key whose
// ledger changed since it was read is read again and its records judged
// again, so Verdicts may change from New. It returns the keys whose write
// failed, with their errors; their records' verdicts are not final and they
// must be retried. concurrency bounds parallel writes.
func (s *Session) Commit(ctx context.Context, concurrency int) []*KeyError {
	var (
		mu     sync.Mutex
		failed []*KeyError
		wg     sync.WaitGroup
		sem    = make(chan struct{}, max(1, concurrency))
	)
	keys := make([]string, 0, len(s.keys))
	for key, sk := range s.keys {
		if sk.dirty {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := s.commitKey(ctx, key); err != nil {
				mu.Lock()
				failed = append(failed, &KeyError{Key: key, Err: err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(s.theirs) > 0 {
		// Settled against the predecessor and written there.
		ps := s.l.prev.Begin(s.tag, s.theirs)
		err := ps.Judge(ctx, nil)
		if err == nil {
			failed = append(failed, ps.Commit(ctx, concurrency)...)
		} else {
			for k := range s.theirs {
				failed = append(failed, &KeyError{Key: k, Err: err})
			}
		}
		s.Raced = append(s.Raced, ps.Raced...)
		if err == nil && !slices.ContainsFunc(failed, func(f *KeyError) bool { return IsRange(f.Key) }) {
			s.theirs = nil
		}
	}
	sort.Slice(failed, func(i, j int) bool { return failed[i].Key < failed[j].Key })
	return failed
}

// ErrConflict is returned when a key's ledger kept changing under a commit.
var ErrConflict = errors.New("dedupe: the ledger kept changing; giving up for now")

func (s *Session) commitKey(ctx context.Context, key string) error {
	l := s.l
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		l.mu.Lock()
		kl := l.cache[key]
		sk := s.keys[key]
		if kl == nil || kl.loading {
			// Dropped from the cache since it was judged: read it and
			// judge this key's records again before writing.
			l.mu.Unlock()
			if err := l.ensure(ctx, []string{key}, s.tag); err != nil {
				return err
			}
			l.mu.Lock()
			if kl := l.cache[key]; kl != nil && !kl.loading {
				s.rejudge(key)
			}
			l.mu.Unlock()
			continue
		}
		if sk.basis != kl {
			s.rejudge(key) // judged on another copy: judge on this one
		}
		if !sk.dirty {
			l.mu.Unlock()
			return nil
		}
		plan := l.plan(key, kl, sk.pending, s.oldest(sk))
		l.mu.Unlock()

		old, err := l.write(ctx, plan)
		if err == nil {
			l.mu.Lock()
			l.installOver(key, plan, s.tag)
			sk.dirty = false
			sk.carried, sk.pending = nil, nil
			sk.byID = map[Identity]Entry{}
			l.mu.Unlock()
			return nil
		}
		if !errors.Is(err, errHeadChanged) {
			return err
		}
		// Another writer got there first: take the head it left, read the
		// segments it sealed, and judge this key's records again.
		l.count(func(s *Stats) { s.Conflicts++ })
		if len(old) == 0 {
			// The store did not hand the head back: read it.
			if err := l.loadHeads(ctx, []string{key}, s.tag); err != nil {
				l.forget([]string{key})
				return err
			}
			if err := l.loadSegments(ctx, []string{key}); err != nil {
				l.forget([]string{key})
				return err
			}
			l.mu.Lock()
			s.rejudge(key)
			l.mu.Unlock()
			continue
		}
		l.mu.Lock()
		kl2, err := l.fromHead(old)
		if err != nil {
			l.mu.Unlock()
			return err
		}
		if prev := l.cache[key]; prev != nil {
			kl2.keepSegments(prev)
		}
		kl2.loading = true
		l.put(key, kl2, s.tag)
		l.mu.Unlock()
		if err := l.loadSegments(ctx, []string{key}); err != nil {
			l.forget([]string{key})
			return err
		}
		l.mu.Lock()
		s.rejudge(key)
		l.mu.Unlock()
	}
	return ErrConflict
}

// rejudge judges a key's carried claims and candidates again against a
// fresher ledger. s.l.mu held.
func (s *Session) rejudge(key string) {
	kl := s.l.cache[key]
	sk := s.keys[key]
	sk.basis = kl
	carried := sk.carried
	sk.carried, sk.pending, sk.byID, sk.dirty = nil, nil, map[Identity]Entry{}, false
	for _, e := range carried {
		s.settle(kl, sk, Candidate{Key: key, Entry: e})
	}
	for _, i := range sk.cands {
		s.verdict[i] = s.judgeAt(i, kl, sk)
	}
}

// oldest is the arrival of the oldest record the session judged of a key
// (carried claims included; 0: none).
func (s *Session) oldest(sk *sessionKey) uint32 {
	var m uint32
	take := func(a uint32) {
		if m == 0 || a < m {
			m = a
		}
	}
	for _, i := range sk.cands {
		take(s.cands[i].Arrival)
	}
	for _, e := range sk.pending {
		take(e.Arrival)
	}
	return m
}

// writePlan is one key's next write.
type writePlan struct {
	key     string
	version int64 // the head's version it expects
	after   *keyLedger
	// segs is after's live segments, oldest first: those kept (item set)
	// and those to seal, new or merged (fresh), whose items write sets.
	segs []planSegment
	// droppedEarly is how many claims within the horizon the plan lets
	// go of: its oldest segments, past the segment limit.
	droppedEarly int
	// basis is the ledger the plan was made on, added the claims it adds,
	// and dropped the claims of the segments it lets go (of a range's:
	// installOver updates basis's index by them rather than indexing every
	// claim again).
	basis   *keyLedger
	added   []Entry
	dropped [][]Entry
}

// planSegment is one live segment of a plan.
type planSegment struct {
	ref   segRef  // its name; of a fresh one, the number (write picks the salt)
	es    []Entry // its claims
	fresh bool    // to be put before the head
	// unread: its claims are not held (never so for a ledger judged on),
	// so it is never merged.
	unread bool
	// expires is its expiry where known (keyLedger.expires); of a fresh
	// one, what its TTL is to be (0: setTTL's).
	expires int64
}

// plan computes key's ledger after adding pending: claims past the horizon
// dropped, the oldest claims sealed into segments of sealUnit when the head
// would outgrow its budget (all of them, in segments of up to segMax, when
// pending alone does), and adjacent segments merged while more than
// maxSegs are live (merge).
// The horizon is counted back from oldest, the arrival of the session's
// oldest record of the key (when not 0), not from the newest claim: a batch
// whose arrivals span more than the horizon is redelivered whole, and its
// first records must still find the claims they were judged against.
// l.mu held.
func (l *Ledger) plan(key string, kl *keyLedger, pending []Entry, oldest uint32) *writePlan {
	newest := max(maxArrival(kl.head), maxArrival(pending), kl.newestInSegments())
	if oldest != 0 {
		newest = min(newest, oldest)
	}
	cutoff := l.cutoff(newest)
	if l.ranges {
		// A range's claims come from every shard whose keys fall in it,
		// and one shard may be hours behind another: counted back from
		// the newest arrival, the horizon would drop claims the shard
		// behind still judges copies against. Claims are kept instead
		// until their segment's TTL, at least the horizon and an hour
		// after it was written, as a key's items are (setTTL).
		cutoff = 0
	}
	head := make([]Entry, 0, len(kl.head)+len(pending))
	for _, e := range kl.head {
		if e.Arrival >= cutoff {
			head = append(head, e)
		}
	}
	head = append(head, pending...)
	after := &keyLedger{version: kl.version + 1, next: kl.next}
	if kl.version == 0 {
		begun := maxArrival(pending)
		if l.ranges {
			// A range's first version says when it took over (young): not
			// before now, whatever the arrivals of a shard hours behind
			// that happens to write it first.
			begun = max(begun, uint32(l.now().Unix()))
		}
		after.version = firstVersion(begun)
	}
	p := &writePlan{key: key, version: kl.version, after: after, basis: kl, added: pending}
	// Segments whose newest claim is past the horizon are no longer named
	// (a segment not loaded is never taken for an expired one).
	now := l.now().Unix()
	for _, r := range kl.live {
		seg, ok := kl.segs[r.item()]
		exp := kl.expires[r.item()]
		if l.ranges && exp == 0 && ok && len(seg) > 0 {
			// No TTL read back (a ledger without WithTTLAttribute): the
			// horizon and an hour after its newest claim's arrival.
			exp = int64(kl.newest[r.item()]) + int64((l.horizon+ttlSlack)/time.Second)
		}
		if ok && kl.newest[r.item()] < cutoff || l.ranges && exp != 0 && exp < now {
			if ok {
				p.dropped = append(p.dropped, seg)
			}
			continue
		}
		p.segs = append(p.segs, planSegment{ref: r, es: seg, unread: !ok, expires: exp})
	}
	seal := func(es []Entry) {
		p.segs = append(p.segs, planSegment{ref: segRef{n: after.next}, es: es, fresh: true, expires: l.expiry(maxArrival(es))})
		after.next++
	}
	if len(head) > 0 {
		switch room := min(l.headMax, l.headRoom(key, after, p.segs, head)); {
		case len(head) <= room:
		case len(pending) > l.headMax:
			// A hot key: its new claims alone outgrow the head. They are
			// sealed with the head's, in segments as large as they go
			// (segMax): a segment's write units follow its bytes whatever
			// its size, and fewer, larger segments are merged less often.
			for start := 0; start < len(head); start += l.segMax {
				seal(head[start:min(start+l.segMax, len(head))])
			}
			head = nil
		default:
			// The oldest claims are sealed sealUnit at a time, segments of
			// one write unit, until the rest fit the head's room; what is
			// over it and short of a unit is sealed whole (a smaller
			// segment, where a head past its write unit would be billed
			// twice over: at this write and the next). Sealing the whole
			// head and the new claims, as a head past headMax once was,
			// wrote 25 to 48 claims, 0.9 to 1.8 KB: mostly two write units.
			unit := l.sealUnit()
			for len(head) > room {
				n := min(unit, len(head))
				seal(head[:n])
				head = head[n:]
			}
		}
	}
	after.head = head
	l.merge(p, cutoff)
	if over := len(p.segs) - l.segLimit; over > 0 {
		for _, s := range p.segs[:over] {
			if !s.unread {
				p.dropped = append(p.dropped, s.es)
			}
			for _, e := range s.es {
				if e.Arrival >= cutoff { // those past it were let go anyway
					p.droppedEarly++
				}
			}
		}
		p.segs = slices.Delete(p.segs, 0, over)
	}
	return p
}

// headRoom is how many claims key's head can hold without its item taking
// more write units than the rest of it does (one, unless it names so many
// segments that they alone take more): its key, version, the number the
// next segment gets, its TTL, and the names of segs and of one segment
// more, the one a seal adds, with the longest salt. Each live segment
// takes about 3 bytes of the head (5 once merges leave gaps), so a key
// with many leaves less room for claims than headMax. head is the claims
// it is to hold, for the TTL.
func (l *Ledger) headRoom(key string, after *keyLedger, segs []planSegment, head []Entry) int {
	probe := &keyLedger{version: after.version, next: after.next + 1, live: make([]segRef, 0, len(segs)+1)}
	for _, s := range segs {
		probe.live = append(probe.live, s.ref)
	}
	probe.live = append(probe.live, segRef{n: after.next, salt: 1<<saltBits - 1})
	item := l.headAttrs(key, probe)
	l.setTTL(item, max(1, maxArrival(head)))
	rest := limits.ItemSize(item)
	units := max(1, (rest+writeUnitBytes-1)/writeUnitBytes)
	return (units*writeUnitBytes - rest) / entrySize
}

// writeUnitBytes is what one DynamoDB write unit writes: an item of up to
// 1 KB (as limits.ItemSize counts), one unit more for each KB past it.
const writeUnitBytes = 1 << 10

// sealUnit is how many claims a head that fills up seals at a time
// (headMax, or segMax when that is smaller): 24 by default, a segment of
// one write unit (see the defaults), and the merges' smallest tier.
func (l *Ledger) sealUnit() int { return min(l.headMax, l.segMax) }

// merge merges adjacent segments of p while more than maxSegs are live, so
// a hot key's head names a bounded number of them whatever the horizon:
// each time mergeRun adjacent segments of one tier (or fewer, down to two,
// when no such run is there), the lowest tier first and of those the
// newest, if they fit one segment, into a fresh segment in their place
// (and when no run of one tier fits, the adjacent pair with the fewest
// claims that does, of sizes within mergeRun times of each other);
// claims past cutoff are left out. A segment's tier is how many times
// mergeRun a sealed segment (sealUnit claims) it holds, rounded: from 2,
// 8, 32 and 128 times (48, 192, 768 and 3,072 claims by default), so
// that four segments of one tier, even sealed short of sealUnit (a head
// whose room is less, headRoom), make one of the next, and a claim is
// merged again only into a segment about mergeRun times its own: about
// log₄(segMax/sealUnit) times, four with the defaults (24, 96, 384, 1,536,
// 6,144 claims; more where claims past the horizon leave a merge short),
// up to segments of 6,144 to 8,000 claims. A key whose claims fill more
// segments than maxSegs at that size (a hot key over a long horizon: about
// 5 bytes a segment) has a head of about 5 bytes a 6,144 claims.
func (l *Ledger) merge(p *writePlan, cutoff uint32) {
	tier := func(s planSegment) int {
		if s.unread {
			return -1 // never merged
		}
		t := 0
		for n := 2 * len(s.es) / l.sealUnit(); n >= mergeRun; n /= mergeRun {
			t++
		}
		return t
	}
	// A segment limit set below maxSegs is merged toward too: past it
	// claims are let go (plan), which a merge keeps.
	for len(p.segs) > min(l.maxSegs, l.segLimit) {
		tiers := make([]int, len(p.segs))
		for i := range p.segs {
			tiers[i] = tier(p.segs[i])
		}
		best, bestLen, bestTier := -1, 0, 0
		for run := min(mergeRun, len(p.segs)); run >= 2 && best < 0; run-- {
			for i := 0; i+run <= len(p.segs); i++ {
				t, total := tiers[i], 0
				for j := i; j < i+run; j++ {
					total += len(p.segs[j].es) // claims past cutoff count too: they are left out once merged
					if tiers[j] != t {
						t = -1
					}
				}
				if t < 0 || total > l.segMax {
					continue
				}
				if best < 0 || t <= bestTier { // ties: the newest run, which lives longest
					best, bestLen, bestTier = i, run, t
				}
			}
		}
		if best < 0 {
			// No run of one tier fits: neighbours whose sizes straddle a
			// tier's bound (a hot key's commits of 30 and 50 claims)
			// would never merge, and the live segments would grow until
			// the segment limit let claims within the horizon go. The
			// adjacent pair with the fewest claims that fits is merged
			// instead — of sizes within a tier of each other (mergeRun
			// times), as a run's are: a fresh seal merged into a full
			// neighbour would rewrite that neighbour at every seal of a
			// key whose claims fill more than maxSegs full segments (at
			// 168h a claim was merged 167 times); such a key's head
			// names more segments instead.
			for i := 0; i+2 <= len(p.segs); i++ {
				if tiers[i] < 0 || tiers[i+1] < 0 {
					continue
				}
				a, b := len(p.segs[i].es), len(p.segs[i+1].es)
				if max(a, b) > mergeRun*max(1, min(a, b)) {
					continue
				}
				if total := a + b; total <= l.segMax && (best < 0 || total <= bestTier) {
					best, bestLen, bestTier = i, 2, total
				}
			}
		}
		if best < 0 {
			return
		}
		var es []Entry
		var exp int64 // the latest of theirs: a merge never keeps a claim longer
		for _, s := range p.segs[best : best+bestLen] {
			for _, e := range s.es {
				if e.Arrival >= cutoff {
					es = append(es, e)
				}
			}
			if exp >= 0 && s.expires > 0 {
				exp = max(exp, s.expires)
			} else {
				exp = -1 // one not known
			}
		}
		if exp < 0 {
			exp = l.expiry(maxArrival(es)) // what putSegment writes then
		}
		if !l.ranges {
			exp = 0 // setTTL's: a key's claims go by their arrival (plan)
		}
		merged := planSegment{ref: segRef{n: p.after.next}, es: es, fresh: true, expires: max(exp, 0)}
		p.after.next++
		p.segs = slices.Replace(p.segs, best, best+bestLen, merged)
	}
}

var errHeadChanged = errors.New("dedupe: head changed")

// firstVersion is the version of a head written where none is, from the
// arrival (Unix seconds) of the newest claim it adds: arrival × 2^20 + 1,
// not 1. A key idle past the horizon loses its head to the TTL and its
// ledger begins again; a process still caching the old ledger must not
// find its version in the new head, or its write, conditioned on that
// version, would replace the new ledger's claims with the old one's. The
// old head expires no sooner than a horizon after its newest claim arrived
// and after it was last written (setTTL's floor), so live claims that
// begin the new ledger arrived a horizon after the old one's began, and a
// ledger is written far less than 2^20 times a second, so its versions
// stay below the new one's. Records read again (a backlog, a replay) may
// begin it with claims that arrived before the old one's; the new versions
// are then below the old ones, by 2^20 a second of arrival, which serves
// as well. Only claims of about the old ledger's first second — the same
// records read twice into one ledger, while a process caching the first
// pass still writes — could meet its versions; cmd/replay rebuild writes a
// ledger of its own. The same claims give the same version, so runs on the
// stand-in and in memory write the same items.
func firstVersion(arrival uint32) int64 { return int64(arrival)<<20 + 1 }

// write makes a plan's writes: the fresh segments (sealed or merged), if
// any, each a PutItem of an item of its own (itemOf: its number and a salt
// from its claims), then the head with a conditional PutItem. The head is
// the commit: a segment no head names is never read, and expires (its
// TTL); a process that dies between the two, or a head condition that
// fails, leaves only such a segment. Segments a merge replaced stay until
// they expire, for a process still holding the head that named them. A
// segment is put only where no item is or the same claims' bytes are, so
// even two sets of claims whose salts meet never overwrite one another:
// the later takes the next salt (saltOf's try). Two plain writes cost half the
// transaction's write units. On errHeadChanged it returns the head as it
// is in the table.
func (l *Ledger) write(ctx context.Context, p *writePlan) (map[string]types.AttributeValue, error) {
	sealed := false
	p.after.live = make([]segRef, 0, len(p.segs))
	p.after.segs, p.after.newest = nil, nil
	for i := range p.segs {
		s := &p.segs[i]
		if s.fresh {
			salt, err := l.putSegment(ctx, p.key, s.ref.n, s.es, s.expires)
			if err != nil {
				return nil, err
			}
			s.ref.salt, sealed = salt, true
		}
		p.after.live = append(p.after.live, s.ref)
		if !s.unread {
			p.after.setSeg(s.ref.item(), s.es)
			p.after.setExpiry(s.ref.item(), s.expires)
		}
	}
	head, err := l.headItem(p.key, p.after)
	if err != nil {
		return nil, err
	}
	cond, names, values := versionCondition(p.version)
	l.count(func(s *Stats) {
		s.Writes++
		if sealed {
			s.Seals++
		}
	})
	_, err = l.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(l.table), Item: head,
		ConditionExpression: cond, ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, errHeadChanged
	}
	if err != nil {
		return nil, fmt.Errorf("writing the ledger head: %w", err)
	}
	if p.droppedEarly > 0 {
		l.count(func(s *Stats) { s.DroppedEarly += p.droppedEarly })
	}
	return nil, nil
}

// putSegment puts key's new segment n, claims seg, where no item is, or an
// item with the same claims (a retry of this seal): under its first salt,
// or, when another set of claims holds that item, the next (saltTries at
// most). It returns the salt used, which the head names.
func (l *Ledger) putSegment(ctx context.Context, key string, n int64, seg []Entry, exp int64) (uint32, error) {
	entries := appendEntries(make([]byte, 0, len(seg)*entrySize), seg)
	for try := 0; try < saltTries; try++ {
		ref := segRef{n: n, salt: saltOf(entries, try)}
		item := l.itemKey(key, ref.item())
		item[attrEntries] = &types.AttributeValueMemberB{Value: entries}
		if exp > 0 && l.ttlAttr != "" {
			item[l.ttlAttr] = &types.AttributeValueMemberN{Value: strconv.FormatInt(exp, 10)}
		} else {
			l.setTTL(item, maxArrival(seg))
		}
		if err := limits.CheckItem(item); err != nil {
			return 0, fmt.Errorf("dedupe ledger segment %d of %s: %w", n, KeyName(key), err)
		}
		l.count(func(s *Stats) { s.Writes++ })
		_, err := l.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(l.table), Item: item,
			ConditionExpression: condSegmentFree, ExpressionAttributeNames: segmentNames,
			ExpressionAttributeValues: map[string]types.AttributeValue{":e": item[attrEntries]},
		})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			continue // another segment's claims hold this salt's item
		}
		if err != nil {
			return 0, fmt.Errorf("sealing the ledger head: segment %d: %w", n, err)
		}
		return ref.salt, nil
	}
	return 0, fmt.Errorf("sealing the ledger head: segment %d of %s: %d salts all hold other claims", n, KeyName(key), saltTries)
}

// A segment is put where no item is, or the same claims are.
var (
	condSegmentFree = aws.String("attribute_not_exists(#e) OR #e = :e")
	segmentNames    = map[string]string{"#e": attrEntries}
)

func versionCondition(version int64) (*string, map[string]string, map[string]types.AttributeValue) {
	if version == 0 {
		return condNoVersion, versionNames, nil
	}
	return condVersionIs, versionNames, map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: strconv.FormatInt(version, 10)}}
}

// The head's version condition: its texts and names are the same in every
// write, so the requests share them (a request is only read).
var (
	condNoVersion = aws.String("attribute_not_exists(#v)")
	condVersionIs = aws.String("#v = :v")
	versionNames  = map[string]string{"#v": attrVersion}
)

func (l *Ledger) headItem(key string, kl *keyLedger) (map[string]types.AttributeValue, error) {
	item := l.headAttrs(key, kl)
	l.setTTL(item, max(maxArrival(kl.head), kl.newestInSegments()))
	if err := limits.CheckItem(item); err != nil {
		return nil, fmt.Errorf("dedupe ledger head of %s: %w", KeyName(key), err)
	}
	return item, nil
}

// headAttrs is kl's head item without its TTL.
func (l *Ledger) headAttrs(key string, kl *keyLedger) map[string]types.AttributeValue {
	item := l.itemKey(key, Head)
	item[attrVersion] = &types.AttributeValueMemberN{Value: strconv.FormatInt(kl.version, 10)}
	item[attrEntries] = &types.AttributeValueMemberB{Value: appendEntries(make([]byte, 0, len(kl.head)*entrySize), kl.head)}
	item[attrNext] = &types.AttributeValueMemberN{Value: strconv.FormatInt(kl.next, 10)}
	if first, salts, ok := contiguous(kl); ok {
		item[attrFirst] = &types.AttributeValueMemberN{Value: strconv.FormatInt(first, 10)}
		if salts != nil {
			item[attrSalts] = &types.AttributeValueMemberB{Value: salts}
		}
	} else {
		item[attrList] = &types.AttributeValueMemberB{Value: appendList(nil, kl.live)}
	}
	return item
}

// setTTL sets item's expiry: a horizon and ttlSlack after the newest
// arrival of its claims (Unix seconds), and never less than that from now.
// Records read again long after they arrived (a rebuild from the archive,
// a replay from the stream's retention, a backlog past the horizon) would
// otherwise write items whose TTL has passed, which DynamoDB may delete at
// any time while the rebuild still needs them: a cold process, or a batch
// retried after a crash, would then find the claims gone and count a copy
// again. Floored at the write, an item outlives a rebuild that reads each
// horizon's worth of records within the horizon and ttlSlack of wall-clock
// time (at least half as fast as the stream ran, at the default horizon).
func (l *Ledger) setTTL(item map[string]types.AttributeValue, newest uint32) {
	if l.ttlAttr == "" || newest == 0 {
		return
	}
	item[l.ttlAttr] = &types.AttributeValueMemberN{Value: strconv.FormatInt(l.expiry(newest), 10)}
}

// expiry is the TTL of an item written now whose newest claim arrived at
// newest: the horizon and an hour after the later of the two.
func (l *Ledger) expiry(newest uint32) int64 {
	return max(int64(newest), l.now().Unix()) + int64((l.horizon+ttlSlack)/time.Second)
}

func (l *Ledger) count(f func(*Stats)) {
	l.mu.Lock()
	f(&l.stats)
	l.mu.Unlock()
}

// ensure makes the cache hold keys' ledgers, read within tag when tag is set.
func (l *Ledger) ensure(ctx context.Context, keys []string, tag string) error {
	l.mu.Lock()
	var missing []string
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		kl, ok := l.cache[k]
		if !ok || kl.loading || (tag != "" && kl.tag != tag) {
			missing = append(missing, k)
			continue
		}
		l.clock++
		kl.lastUse = l.clock
	}
	l.evict()
	l.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	if err := l.loadHeads(ctx, missing, tag); err != nil {
		l.forget(missing)
		return err
	}
	if err := l.loadSegments(ctx, missing); err != nil {
		// A head without its segments would judge a copy new: read both
		// again next time.
		l.forget(missing)
		return err
	}
	return nil
}

// forget drops keys from the cache.
func (l *Ledger) forget(keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if kl, ok := l.cache[k]; ok {
			l.entries -= kl.size()
			delete(l.cache, k)
		}
	}
}

// loadHeads reads keys' heads, strongly consistent, and caches them.
func (l *Ledger) loadHeads(ctx context.Context, keys []string, tag string) error {
	got, err := l.batchGet(ctx, keys, func(k string) map[string]types.AttributeValue { return l.itemKey(k, Head) })
	if err != nil {
		return fmt.Errorf("reading dedupe ledger heads: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		kl, err := l.fromHead(got[k])
		if err != nil {
			return fmt.Errorf("dedupe ledger head of %s: %w", KeyName(k), err)
		}
		prev := l.cache[k]
		if prev != nil && kl.version != 0 && kl.version == prev.version && !prev.loading && prev.complete() {
			// The head this process last wrote or read, unchanged (a
			// version is written once): the copy it holds is good for
			// tag too. A range's holds a shard's claims of the horizon,
			// which indexing again at each interval would cost.
			prev.tag = tag
			l.clock++
			prev.lastUse = l.clock
			continue
		}
		if prev != nil {
			kl.keepSegments(prev)
		}
		kl.loading = true // until loadSegments has read its segments
		l.put(k, kl, tag)
	}
	return nil
}

// loadSegments reads the live segments of keys that the cache lacks.
func (l *Ledger) loadSegments(ctx context.Context, keys []string) error {
	type ref struct {
		key  string
		item int64 // its item number (segRef.item), read with the head
	}
	l.mu.Lock()
	var refs []ref
	for _, k := range keys {
		kl := l.cache[k]
		if kl == nil {
			continue
		}
		missing := false
		for _, r := range kl.live {
			if _, ok := kl.segs[r.item()]; !ok {
				refs = append(refs, ref{k, r.item()})
				missing = true
			}
		}
		if !missing {
			kl.loading = false
		}
	}
	l.mu.Unlock()
	if len(refs) == 0 {
		return nil
	}
	names := make([]string, len(refs))
	byName := map[string]ref{}
	for i, r := range refs {
		names[i] = r.key + "\x00" + strconv.FormatInt(r.item, 10)
		byName[names[i]] = r
	}
	got, err := l.batchGet(ctx, names, func(name string) map[string]types.AttributeValue {
		r := byName[name]
		return l.itemKey(r.key, r.item)
	})
	if err != nil {
		return fmt.Errorf("reading dedupe ledger segments: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	touched := map[string]bool{}
	for name, r := range byName {
		kl := l.cache[r.key]
		if kl == nil || !slices.ContainsFunc(kl.live, func(s segRef) bool { return s.item() == r.item }) {
			// Dropped, or a head read meanwhile no longer names the item
			// (expired, merged, or a ledger begun again after its head
			// expired): this read is no segment of it.
			continue
		}
		var es []Entry
		if item := got[name]; item != nil {
			b, _ := item[attrEntries].(*types.AttributeValueMemberB)
			if b != nil {
				if es, err = decodeEntries(nil, b.Value); err != nil {
					return fmt.Errorf("dedupe ledger segment item %d of %s: %w", r.item, KeyName(r.key), err)
				}
			}
		}
		// A segment gone (expired by TTL) holds nothing live; a range
		// lets it go at its next write (reads are strongly consistent).
		kl.setSeg(r.item, es)
		if got[name] == nil && l.ranges {
			kl.setExpiry(r.item, 1)
		}
		if item := got[name]; item != nil && l.ttlAttr != "" {
			if n, ok := item[l.ttlAttr].(*types.AttributeValueMemberN); ok {
				if exp, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
					kl.setExpiry(r.item, exp)
				}
			}
		}
		l.entries += len(es)
		touched[r.key] = true
	}
	for k := range touched {
		l.cache[k].index()
	}
	for _, k := range keys {
		if kl := l.cache[k]; kl != nil {
			// Complete only when every live segment is read, here or
			// elsewhere: the copy cached now may be a newer head (read by
			// another session meanwhile) naming segments this read did
			// not ask for.
			kl.loading = !kl.complete()
		}
	}
	return nil
}

// batchGet reads the items named by names (keyed by name), strongly
// consistent, retrying unprocessed keys.
func (l *Ledger) batchGet(ctx context.Context, names []string, keyOf func(string) map[string]types.AttributeValue) (map[string]map[string]types.AttributeValue, error) {
	out := make(map[string]map[string]types.AttributeValue, len(names))
	var buf [128]byte // a key's text, built here for most keys
	for start := 0; start < len(names); start += maxBatchGet {
		chunk := names[start:min(start+maxBatchGet, len(names))]
		byKey := make(map[string]string, len(chunk))
		req := types.KeysAndAttributes{ConsistentRead: aws.Bool(true), Keys: make([]map[string]types.AttributeValue, 0, len(chunk))}
		var keyAttrs []string
		for _, n := range chunk {
			k := keyOf(n)
			if keyAttrs == nil {
				for a := range k {
					keyAttrs = append(keyAttrs, a)
				}
				sort.Strings(keyAttrs)
			}
			byKey[string(appendKeyText(buf[:0], keyAttrs, k))] = n
			req.Keys = append(req.Keys, k)
		}
		pendingReq := map[string]types.KeysAndAttributes{l.table: req}
		for try := 0; len(pendingReq) > 0; try++ {
			if try > 0 {
				if err := sleep(ctx, backoff(try)); err != nil {
					return nil, err
				}
			}
			l.count(func(s *Stats) { s.Reads++ })
			res, err := l.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pendingReq})
			if err != nil {
				return nil, err
			}
			for _, item := range res.Responses[l.table] {
				if n, ok := byKey[string(appendKeyText(buf[:0], keyAttrs, item))]; ok {
					out[n] = item
				}
			}
			pendingReq = res.UnprocessedKeys
		}
	}
	return out, nil
}

// appendKeyText appends the text that identifies an item by its key
// attributes (strings, numbers or binaries) to b.
func appendKeyText(b []byte, attrs []string, item map[string]types.AttributeValue) []byte {
	for _, a := range attrs {
		switch v := item[a].(type) {
		case *types.AttributeValueMemberS:
			b = append(b, v.Value...)
		case *types.AttributeValueMemberN:
			b = append(b, v.Value...)
		case *types.AttributeValueMemberB:
			b = append(b, v.Value...)
		}
		b = append(b, 0)
	}
	return b
}

func backoff(try int) time.Duration {
	return min(time.Duration(1<<min(try, 6))*10*time.Millisecond, time.Second)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// fromHead decodes a head item (nil: no head yet). l.mu held or not needed.
// It leaves the claims unindexed: both callers add the sealed segments they
// already hold, then put indexes head and segments together.
func (l *Ledger) fromHead(item map[string]types.AttributeValue) (*keyLedger, error) {
	kl := &keyLedger{}
	if len(item) == 0 {
		return kl, nil
	}
	var err error
	if kl.version, err = numAttr(item, attrVersion); err != nil {
		return nil, err
	}
	if kl.next, err = numAttr(item, attrNext); err != nil {
		return nil, err
	}
	if b, ok := item[attrEntries].(*types.AttributeValueMemberB); ok {
		if kl.head, err = decodeEntries(nil, b.Value); err != nil {
			return nil, err
		}
	}
	if b, ok := item[attrList].(*types.AttributeValueMemberB); ok {
		if kl.live, err = decodeList(b.Value, kl.next); err != nil {
			return nil, err
		}
		return kl, nil
	}
	first, err := numAttr(item, attrFirst)
	if err != nil {
		return nil, err
	}
	var salts []byte
	if b, ok := item[attrSalts].(*types.AttributeValueMemberB); ok {
		salts = b.Value
	}
	if kl.live, err = decodeSalts(salts, first, kl.next); err != nil {
		return nil, err
	}
	return kl, nil
}

// contiguous reports whether kl's live segments are first to next−1 in
// order, as a head without merges names them (attrFirst and attrSalts),
// and returns first and the salts: a uvarint each, or nil when none has
// one (segments sealed before salts).
func contiguous(kl *keyLedger) (int64, []byte, bool) {
	first := kl.next - int64(len(kl.live))
	salted := false
	for i, r := range kl.live {
		if r.n != first+int64(i) {
			return 0, nil, false
		}
		salted = salted || r.salt != 0
	}
	if !salted {
		return first, nil, true
	}
	salts := make([]byte, 0, 3*len(kl.live))
	for _, r := range kl.live {
		salts = binary.AppendUvarint(salts, uint64(r.salt))
	}
	return first, salts, true
}

// decodeSalts reads a head without merges: exactly one salt below
// 1<<saltBits per segment first to next−1 (no attribute: every salt 0).
func decodeSalts(b []byte, first, next int64) ([]segRef, error) {
	if first < 0 || first > next {
		return nil, fmt.Errorf("attribute %s: %d is not within 0–%d", attrFirst, first, next)
	}
	if next-first > limits.DynamoDBItemBytes {
		return nil, fmt.Errorf("attributes %s and %s: %d segments cannot be named in one item", attrFirst, attrNext, next-first)
	}
	out := make([]segRef, 0, next-first)
	for n := first; n < next; n++ {
		var v uint64
		if b != nil {
			var k int
			v, k = binary.Uvarint(b)
			if k <= 0 || v >= 1<<saltBits {
				return nil, fmt.Errorf("attribute %s: segment %d's salt is malformed", attrSalts, n)
			}
			b = b[k:]
		}
		out = append(out, segRef{n: n, salt: uint32(v)})
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("attribute %s: %d bytes past segment %d's salt", attrSalts, len(b), next-1)
	}
	return out, nil
}

// appendList appends the head's list of live segments (attrList).
func appendList(dst []byte, live []segRef) []byte {
	var prev int64
	for _, r := range live {
		dst = binary.AppendVarint(dst, r.n-prev)
		dst = binary.AppendUvarint(dst, uint64(r.salt))
		prev = r.n
	}
	return dst
}

// decodeList is appendList's inverse: each segment's number within 0 to
// next−1, named once, and its salt below 1<<saltBits.
func decodeList(b []byte, next int64) ([]segRef, error) {
	var out []segRef
	var prev int64
	seen := map[int64]bool{}
	for len(b) > 0 {
		d, k := binary.Varint(b)
		if k <= 0 {
			return nil, fmt.Errorf("attribute %s: segment %d's number is malformed", attrList, len(out))
		}
		b = b[k:]
		salt, k := binary.Uvarint(b)
		if k <= 0 || salt >= 1<<saltBits {
			return nil, fmt.Errorf("attribute %s: segment %d's salt is malformed", attrList, len(out))
		}
		b = b[k:]
		n := prev + d
		if n < 0 || n >= next {
			return nil, fmt.Errorf("attribute %s: segment number %d is not within 0–%d", attrList, n, next-1)
		}
		if seen[n] {
			return nil, fmt.Errorf("attribute %s: segment %d is named twice", attrList, n)
		}
		seen[n] = true
		out = append(out, segRef{n: n, salt: uint32(salt)})
		prev = n
	}
	return out, nil
}

func numAttr(item map[string]types.AttributeValue, name string) (int64, error) {
	n, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s is missing or not a number", name)
	}
	return strconv.ParseInt(n.Value, 10, 64)
}

// install caches a ledger just written. l.mu held.
func (l *Ledger) install(key string, kl *keyLedger, tag string) { l.put(key, kl, tag) }

// installOver caches the ledger a plan wrote. A range's, when the cache
// still holds the ledger the plan was made on, takes over that ledger's
// index and updates it by the claims the plan added and let go: a range
// holds a shard's claims of the horizon, which indexing whole at every
// commit (each batch, on the per-batch path) would cost. The ledger it
// replaces is no longer judged on: sessions judge on the cache, and one
// that read it is judged again at its commit (Session.commitKey). l.mu
// held.
func (l *Ledger) installOver(key string, p *writePlan, tag string) {
	old := l.cache[key]
	if !l.ranges || old == nil || old != p.basis || old.loading || old.byID == nil {
		l.install(key, p.after, tag)
		return
	}
	after := p.after
	after.byID, after.earlier = old.byID, old.earlier
	old.byID, old.earlier = nil, nil
	for _, es := range p.dropped {
		for _, e := range es {
			after.unindexOne(e)
		}
	}
	for _, e := range p.added {
		after.indexOne(e)
	}
	l.store(key, after, tag)
}

// put replaces key's cached ledger, indexing its claims (head and every
// segment it holds). l.mu held.
func (l *Ledger) put(key string, kl *keyLedger, tag string) {
	kl.index()
	l.store(key, kl, tag)
}

// store replaces key's cached ledger with kl, indexed. l.mu held.
func (l *Ledger) store(key string, kl *keyLedger, tag string) {
	if old, ok := l.cache[key]; ok {
		l.entries -= old.size()
	}
	// Callers' keys may share a buffer the next batch reuses (a map
	// assignment stores the key given, even over an existing entry).
	key = strings.Clone(key)
	l.clock++
	kl.tag, kl.lastUse = tag, l.clock
	l.cache[key] = kl
	l.entries += kl.size()
}

// evict drops least recently used keys while the cache holds too much. l.mu held.
//
// Each cached ledger counts as one entry more than its claims, so that the
// ledgers of keys with none (a predecessor's, looked up for keys it never
// saw) are bounded too.
func (l *Ledger) evict() {
	if l.entries+len(l.cache) <= l.cacheMax {
		return
	}
	type use struct {
		key string
		at  uint64
	}
	uses := make([]use, 0, len(l.cache))
	for k, kl := range l.cache {
		uses = append(uses, use{k, kl.lastUse})
	}
	sort.Slice(uses, func(i, j int) bool { return uses[i].at < uses[j].at })
	for _, u := range uses {
		if l.entries+len(l.cache) <= l.cacheMax*3/4 {
			return
		}
		l.entries -= l.cache[u.key].size()
		delete(l.cache, u.key)
	}
}

// Table is the table the ledger lives in.
func (l *Ledger) Table() string { return l.table }
