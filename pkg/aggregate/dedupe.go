package aggregate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Suppression of producer duplicates by event id (package dedupe): a batch
// (per-batch path) judges its records against their keys' ledgers (or
// their hash ranges', with dedupeLedger "range": NewLedger) and commits
// their claims, one conditional write per ledger with new ids, before any
// window is written; an interval (per-interval path) carries its new
// claims in Lambda's window state (past its share of it, in overflow
// items) and commits them at the flush, so the ledger costs one write per
// key per interval, or a head and a segment per range.

// Keys of the tumbling-window state used by dedupe.
const (
	statePending  = "dd" // claims made in the interval, not yet written
	stateInterval = "di" // a nonce naming the interval (and the generation of its claims)
)

// ledgerStore is what a ledger in the views table needs of DynamoDB.
type ledgerStore interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// NewLedger returns the dedupe ledger of cfg's pipeline, kept in its views
// table, or nil when the pipeline does not suppress duplicates by id.
//
// With dedupeLedger "range" the claims are kept by hash range
// (dedupe.WithRanges): a flush writes a head and a segment for each of the
// shard's ranges, about eight, where a ledger a key writes a head for every
// key with records. Either layout reads the other's stored claims, read
// only, while its own ledger is younger than the horizon and an hour, or
// the pipeline's layout changed less than that before (dedupe.WithPredecessor,
// dedupe.WithLayoutMarker): a deploy that changes the layout, either way,
// or rolls a change back, keeps every claim made before it.
func NewLedger(db ledgerStore, table string, cfg *pipeline.Config, opts ...dedupe.Option) *dedupe.Ledger {
	if cfg.DedupeHorizon <= 0 {
		return nil
	}
	base := append([]dedupe.Option{dedupe.WithHorizon(cfg.DedupeHorizon), dedupe.WithTTLAttribute(state.TTLAttribute)}, opts...)
	byKey := func(more ...dedupe.Option) *dedupe.Ledger {
		return dedupe.NewLedger(db, table, state.LedgerKey(cfg.Name), slices.Concat(base, more)...)
	}
	byRange := func(more ...dedupe.Option) *dedupe.Ledger {
		return dedupe.NewLedger(db, table, state.RangeLedgerKey(cfg.Name), slices.Concat(base, []dedupe.Option{dedupe.WithRanges()}, more)...)
	}
	// The layout before is read while a ledger is young. Keys' ledgers
	// read for a range's young ids take a quarter of the process's cache;
	// ranges read for a key's must be held whole, as they are read
	// (a range is judged whole), so they take the process's share.
	marker := dedupe.WithLayoutMarker(state.LedgerLayoutKey(cfg.Name))
	if cfg.DedupeLedger == pipeline.DedupeLedgerRange {
		return byRange(marker, dedupe.WithPredecessor(byKey(dedupe.WithCacheEntries(dedupe.DefaultCacheEntries()/4))))
	}
	return byKey(marker, dedupe.WithPredecessor(byRange()))
}

// candidateOf is a decoded record's identity for the ledger.
func candidateOf(shard string, rec *stream.KinesisRecord, env *stream.Envelope) dedupe.Candidate {
	arrival := rec.ApproximateArrivalTimestamp
	if arrival.IsZero() {
		arrival = env.ReceivedAt
	}
	if arrival.IsZero() {
		arrival = time.Now()
	}
	content, spelling := dedupe.ContentsOf(env.Type, env.OccurredAt, env.Data)
	return dedupe.Candidate{Key: env.Key, Entry: dedupe.Entry{
		ID:      dedupe.IdentityOf(env.Key, env.ID),
		Content: content,
		Claim:   dedupe.ClaimOf(shard, rec.SequenceNumber),
		Arrival: uint32(arrival.Unix()),
	}, Spelling: spelling}
}

// judgeBatch judges a batch's records and commits their claims. Records of
// a key whose commit failed (a transient error) are not routed and are
// reported failed, so they come again.
func (p *Processor) judgeBatch(ctx context.Context, c *collector) error {
	if p.ledger == nil || len(c.cands) == 0 {
		return nil
	}
	before := p.ledger.Stats()
	s := p.ledger.Begin("", nil)
	if err := s.Judge(ctx, c.cands); err != nil {
		return fmt.Errorf("aggregate: dedupe: %w", err)
	}
	failed := s.Commit(ctx, p.concurrency)
	c.verdicts = s.Verdicts()
	if len(failed) > 0 {
		bad := map[string]bool{}
		for _, f := range failed {
			bad[f.Key] = true
			p.log.Error("dedupe ledger write failed: its records will be retried", "shard", c.shard, "ledger", dedupe.KeyName(f.Key), "error", f.Err.Error())
		}
		for i := range c.decoded {
			d := &c.decoded[i]
			if d.cand >= 0 && bad[p.ledger.KeyOf(c.cands[d.cand].Key)] {
				c.verdicts[d.cand] = 0 // not judged: neither applied nor suppressed
				c.failures.Add(d.seq)
			}
		}
	}
	p.countDedupe(c, before, nil)
	return nil
}

// judgeInterval judges one invocation's records of an interval against the
// ledger, the claims the state carries and those of the interval's
// overflow items (ovf: of this invocation's keys; of every key at the
// flush); the final invocation commits them all (an error then fails
// the invocation: Lambda retries it with the same state). It returns the
// dedupe entries of the next state and the names of the overflow items it
// wrote; st is not changed (Lambda may send it again).
//
// The claims the state carries are bounded by budget (carriedBudget) in
// the window state Lambda allows 1 MB for: past it they are written as
// overflow items (overflow.go), and the state carries their names.
func (p *Processor) judgeInterval(ctx context.Context, c *collector, st map[string]string, final bool, budget int, ovf overflow, at string) (map[string]string, []string, error) {
	next := map[string]string{}
	if p.ledger == nil {
		return next, nil, nil
	}
	carried, err := dedupe.DecodePending(st[statePending])
	if err != nil {
		return nil, nil, fmt.Errorf("aggregate: window state %q: %w", statePending, err)
	}
	// Claims carried per key by code from before the hash ranges.
	carried = p.ledger.Regroup(carried)
	nonce := st[stateInterval]
	if nonce == "" {
		nonce = newNonce()
	}
	// The overflow claims to judge against: those of this batch's keys,
	// and, when the invocation may commit early (busy keys, below), of the
	// keys the state carries claims of: an early commit writes those, and
	// a key's claims are written together, or a claim in an item would
	// meet at the flush a later copy's claim committed before it, and be
	// taken for one another record made first. (Settling every carried
	// key's overflowed claims at each invocation cost 40 % more CPU a
	// record at 10,000 keys, where no invocation commits early.)
	var keys map[string]bool
	early := len(ovf) == 0 // no item: nothing to load with the carried claims, and no map on the common path
	if !final && !early {
		keys = make(map[string]bool, len(c.cands))
		for i := range c.cands {
			keys[p.ledger.KeyOf(c.cands[i].Key)] = true
		}
		n, all := len(c.cands), len(keys)
		for k, es := range carried {
			n += len(es)
			if !keys[k] {
				all++
			}
		}
		// At most n claims of all keys pending after judging.
		early = dedupe.EncodedPendingSize(n) > budget && !overflowCheaper(dedupe.PendingBytes("", n), all)
		if early {
			for k := range carried {
				keys[k] = true
			}
		}
	}
	spilled := ovf.claimsOf(keys)
	judged := withOverflowClaims(carried, spilled)
	before := p.ledger.Stats()
	s := p.ledger.Begin(c.shard+"/"+nonce, judged)
	if err := s.Judge(ctx, c.cands); err != nil {
		return nil, nil, fmt.Errorf("aggregate: dedupe: %w", err)
	}
	var names []string
	pending := map[string][]dedupe.Entry{}
	if final {
		failed := s.Commit(ctx, p.concurrency)
		if len(failed) > 0 {
			return nil, nil, fmt.Errorf("aggregate: dedupe ledger of %s: %w (and %d more ledgers)", dedupe.KeyName(failed[0].Key), failed[0].Err, len(failed)-1)
		}
		// Written claims were read afresh by no one else yet: a new
		// generation makes every process read the ledger again.
		nonce = newNonce()
	} else {
		pending = withoutOverflowClaims(s.Pending(), spilled)
		n := 0
		for _, es := range pending {
			n += len(es)
		}
		switch {
		case dedupe.EncodedPendingSize(n) <= budget:
		case !early || overflowCheaper(dedupe.PendingBytes("", n), len(pending)):
			// An overflow item (always right; the only way when the
			// carried keys' overflowed claims were not judged with
			// them, early unforeseen).
			if names, err = p.writeOverflowClaims(ctx, c.shard, at, pending); err != nil {
				return nil, nil, fmt.Errorf("aggregate: dedupe: %w", err)
			}
			pending = nil
		default:
			// Few keys with many claims each (busy keys): a write per
			// key now costs less than their bytes in an overflow item
			// (and again at the flush). A key whose write fails keeps
			// its claims pending.
			s.Commit(ctx, p.concurrency)
			pending = withoutOverflowClaims(s.Pending(), spilled)
			// Written claims were read afresh by no one else yet: a
			// new generation makes every process read the ledger again.
			nonce = newNonce()
		}
	}
	c.verdicts = s.Verdicts()
	if enc := dedupe.EncodePending(pending); enc != "" {
		next[statePending] = enc
	}
	next[stateInterval] = nonce
	raced := s.Raced
	if !final && len(spilled) > 0 {
		// A raced claim in an overflow item stays there, and is met
		// again by each invocation with its key: counted once, at the
		// flush, which settles every claim.
		raced = nil
		for _, r := range s.Raced {
			if !slices.Contains(spilled[r.Key], r.Entry) {
				raced = append(raced, r)
			}
		}
	}
	p.countDedupe(c, before, raced)
	return next, names, nil
}

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// countDedupe publishes what judging did and names each conflict.
func (p *Processor) countDedupe(c *collector, before dedupe.Stats, raced []dedupe.Candidate) {
	dups, conflicts := 0, 0
	for i, v := range c.verdicts {
		switch v {
		case dedupe.Duplicate:
			dups++
		case dedupe.Conflict:
			conflicts++
			p.log.Warn("event id reused with other content: refused, not applied",
				"shard", c.shard, "sequenceNumber", c.seqOfCand(i), "key", c.cands[i].Key, "id", c.ids[i], "field", "id",
				"reason", "an event with this key and id was accepted earlier with a different type, occurredAt or data")
		}
	}
	after := p.ledger.Stats()
	p.metrics.Add("DuplicatesSuppressed", metrics.Count, float64(dups))
	p.metrics.Add("DuplicateConflicts", metrics.Count, float64(conflicts))
	p.metrics.Add("LedgerWrites", metrics.Count, float64(after.Writes-before.Writes))
	p.metrics.Add("LedgerReads", metrics.Count, float64(after.Reads-before.Reads))
	p.metrics.Add("WriteRequests", metrics.Count, float64(after.Writes-before.Writes))
	if n := after.DroppedEarly - before.DroppedEarly; n > 0 {
		p.metrics.Add("DedupeDroppedEarly", metrics.Count, float64(n))
		p.log.Warn("a dedupe ledger's claims (a key's, or a hash range's) passed its segment limit: its oldest were let go before the horizon, and copies of those events are no longer suppressed",
			"shard", c.shard, "claims", n, "horizon", p.cfg.DedupeHorizon.String())
	}
	if len(raced) > 0 {
		p.metrics.Add("DedupeRaces", metrics.Count, float64(len(raced)))
		p.log.Error("claims carried through an interval were made first by another record: their events may be counted twice",
			"shard", c.shard, "claims", len(raced), "ledger", dedupe.KeyName(raced[0].Key))
	}
}

// seqOfCand is the sequence number of candidate i.
func (c *collector) seqOfCand(i int) string {
	for j := range c.decoded {
		if c.decoded[j].cand == i {
			return c.decoded[j].seq
		}
	}
	return ""
}
