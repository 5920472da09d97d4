package enrich

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// A producer's copy of an activity event (same key and id, package dedupe)
// must not be enriched a second time: before a batch is joined its activity
// records are judged against the keys' ledgers, kept in the join table, and
// their ids committed (one conditional write per key with new ids); copies
// are left out of the join, and an id reused with other content is set
// aside. Changelog records are not judged: their versions order them.

// WithDedupe suppresses producer copies of activity events with ledger
// (NewLedger); without it every record is enriched.
func WithDedupe(ledger *dedupe.Ledger) Option { return func(h *Handler) { h.ledger = ledger } }

// NewLedger is the dedupe ledger kept in the join table named table
// (partition key pk: "dedupe#<key>" for a key's head, "dedupeseg#<n>#<key>"
// for its sealed segments, apart from the "k#" and "t#" items), with
// claims kept for horizon and expired by the table's TTL attribute
// expiresAt. A horizon of 0 returns nil: no suppression.
//
// A key may hold '#': were a segment "dedupe#<key>#<n>", key "u#7"'s head
// would be the item of key u's segment 7. No head starts "dedupeseg#",
// and the segment number ends at the first '#' after it.
func NewLedger(db dedupe.Store, table string, horizon time.Duration) *dedupe.Ledger {
	if horizon <= 0 {
		return nil
	}
	key := func(k string, seg int64) map[string]types.AttributeValue {
		pk := "dedupe#" + k
		if seg != dedupe.Head {
			pk = "dedupeseg#" + strconv.FormatInt(seg, 10) + "#" + k
		}
		return map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: pk}}
	}
	return dedupe.NewLedger(db, table, key, dedupe.WithHorizon(horizon), dedupe.WithTTLAttribute(TTLAttribute))
}

// TTLAttribute is the join table's time-to-live attribute (set on the
// ledger's items only).
const TTLAttribute = "expiresAt"

// screenCopies judges ps's activity records and commits their ids. It
// returns the records to join (copies and conflicts left out), the records
// to set aside (ids reused with other content), and the index in the batch
// of the first record that must be retried (a key whose ledger could not
// be written), or -1.
func (h *Handler) screenCopies(ctx context.Context, shard string, ps []parsed) ([]parsed, []setaside.Record, int, error) {
	if h.ledger == nil {
		return ps, nil, -1, nil
	}
	var cands []dedupe.Candidate
	var at []int // index in ps of each candidate
	for i := range ps {
		if ps[i].isChange {
			continue
		}
		arrival := ps[i].rec.Kinesis.ApproximateArrivalTimestamp.Time
		if arrival.IsZero() {
			arrival = ps[i].env.ReceivedAt
		}
		content, spelling := dedupe.ContentsOf(ps[i].env.Type, ps[i].env.OccurredAt, ps[i].env.Data)
		cands = append(cands, dedupe.Candidate{Key: ps[i].key, Entry: dedupe.Entry{
			ID:      dedupe.IdentityOf(ps[i].key, ps[i].env.ID),
			Content: content,
			Claim:   dedupe.ClaimOf(shard, ps[i].rawSeq),
			Arrival: uint32(arrival.Unix()),
		}, Spelling: spelling})
		at = append(at, i)
	}
	if len(cands) == 0 {
		return ps, nil, -1, nil
	}
	s := h.ledger.Begin("", nil)
	if err := s.Judge(ctx, cands); err != nil {
		return nil, nil, -1, fmt.Errorf("enrich: dedupe: %w", err)
	}
	failed := s.Commit(ctx, 8)
	retryFrom := -1
	bad := map[string]bool{}
	for _, f := range failed {
		bad[f.Key] = true
		h.log.ErrorContext(ctx, "dedupe ledger write failed: the key's records will be retried", "key", f.Key, "error", f.Err)
	}
	skip := make([]bool, len(ps))
	var aside []setaside.Record
	for j, v := range s.Verdicts() {
		i := at[j]
		switch {
		case bad[cands[j].Key]:
			if retryFrom < 0 || ps[i].idx < retryFrom {
				retryFrom = ps[i].idx
			}
		case v == dedupe.Duplicate:
			skip[i] = true
			h.dups.Add(1)
		case v == dedupe.Conflict:
			skip[i] = true
			h.conflicts.Add(1)
			r := setaside.FromKinesis(ps[i].rec)
			r.Field, r.Kind = "id", setaside.KindDuplicateConflict
			r.Reason = fmt.Sprintf("event id %q of key %q was accepted earlier with a different type, occurredAt or data; this record is refused, not enriched", ps[i].env.ID, ps[i].key)
			aside = append(aside, r)
		}
	}
	out := ps[:0:0]
	for i := range ps {
		if !skip[i] && (retryFrom < 0 || ps[i].idx < retryFrom) {
			out = append(out, ps[i])
		}
	}
	return out, aside, retryFrom, nil
}

// emitDedupe adds the batch's dedupe counts to the metrics.
func (h *Handler) emitDedupe(dups, conflicts int64) {
	if h.metrics == nil {
		return
	}
	h.metrics.Add("DuplicatesSuppressed", metrics.Count, float64(dups))
	h.metrics.Add("DuplicateConflicts", metrics.Count, float64(conflicts))
}
