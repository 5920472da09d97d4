package dedupe_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/dedupe"
)

// hookedStore calls before with the number (from 1) of each BatchGetItem
// before passing it on.
type hookedStore struct {
	dedupe.Store
	mu     sync.Mutex
	calls  int
	before func(call int)
}

func (h *hookedStore) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	h.mu.Lock()
	h.calls++
	n := h.calls
	h.mu.Unlock()
	if h.before != nil {
		h.before(n)
	}
	return h.Store.BatchGetItem(ctx, in, opts...)
}

// TestASlowSegmentReadDoesNotCompleteANewerHead: two sessions of one
// process read a key's ledger at once. The first read the head when it
// named segment 0; while it reads segment 0, another process seals segment
// 1 and the second session reads the newer head, which names both. When
// the first session's read of segment 0 comes back, the cached copy still
// lacks segment 1: a copy of a claim sealed there must be a duplicate, not
// judged (and committed) on a copy of the ledger without it.
func TestASlowSegmentReadDoesNotCompleteANewerHead(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	opts := []dedupe.Option{dedupe.WithHeadEntries(1), dedupe.WithSegmentEntries(4)}
	other := dedupe.NewLedger(db, table, itemKey, opts...)
	judge(t, other, cand("k", "a1", 1, 0, 1), cand("k", "a2", 2, 0, 1)) // segment 0

	release := make(chan struct{})
	secondReading := make(chan struct{})
	secondDone := make(chan error, 1)
	hs := &hookedStore{Store: db}
	l := dedupe.NewLedger(hs, table, itemKey, opts...)
	hs.before = func(call int) {
		switch call {
		case 2: // the first session is about to read segment 0
			judge(t, other, cand("k", "b1", 3, 1, 1), cand("k", "b2", 4, 1, 1)) // segment 1
			go func() {
				s := l.Begin("", nil)
				secondDone <- s.Judge(ctx, []dedupe.Candidate{cand("k", "z", 9, 2, 1)})
			}()
			<-secondReading
		case 4: // the second session reads segments 0 and 1: slow
			close(secondReading)
			<-release
		}
	}
	s := l.Begin("", nil)
	err := s.Judge(ctx, []dedupe.Candidate{cand("k", "b1", 5, 2, 1)}) // a producer's copy of b1
	if err == nil {
		if failed := s.Commit(ctx, 1); len(failed) > 0 {
			err = failed[0]
		}
	}
	close(release)
	if err2 := <-secondDone; err2 != nil {
		t.Error(err2)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(s.Verdicts()), verdicts(dedupe.Duplicate); got != want {
		t.Fatalf("a copy of a claim sealed in segment 1 judged %v, want %v", got, want)
	}
}

// TestASlowSegmentReadOfAnExpiredLedgerIsNotTakenForItsSuccessor: a key's
// head expires (TTL) and a new ledger starts, numbering its segments from
// 0 again. A read of the old segment 0, still under way when another
// session caches the new head, must not stand in for the new segment 0.
func TestASlowSegmentReadOfAnExpiredLedgerIsNotTakenForItsSuccessor(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	opts := []dedupe.Option{dedupe.WithHeadEntries(1), dedupe.WithSegmentEntries(4)}
	judge(t, dedupe.NewLedger(db, table, itemKey, opts...), cand("k", "a1", 1, 0, 1), cand("k", "a2", 2, 0, 1)) // segment 0

	const later = 3 * 3600 // past the horizon and its slack: the head expired
	release := make(chan struct{})
	secondReading := make(chan struct{})
	secondDone := make(chan error, 1)
	hs := &hookedStore{Store: db}
	l := dedupe.NewLedger(hs, table, itemKey, opts...)
	hs.before = func(call int) {
		switch call {
		case 2: // the first session is about to read the old segment 0
			if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: itemKey("k", dedupe.Head)}); err != nil {
				t.Fatal(err)
			}
			judge(t, dedupe.NewLedger(db, table, itemKey, opts...), cand("k", "b1", 3, later, 1), cand("k", "b2", 4, later, 1)) // the new segment 0
			go func() {
				s := l.Begin("", nil)
				secondDone <- s.Judge(ctx, []dedupe.Candidate{cand("k", "z", 9, later+1, 1)})
			}()
			<-secondReading
		case 4: // the second session reads the new segment 0: slow
			close(secondReading)
			<-release
		}
	}
	s := l.Begin("", nil)
	err := s.Judge(ctx, []dedupe.Candidate{cand("k", "b1", 5, later+1, 1)}) // a producer's copy of b1
	if err == nil {
		if failed := s.Commit(ctx, 1); len(failed) > 0 {
			err = failed[0]
		}
	}
	close(release)
	if err2 := <-secondDone; err2 != nil {
		t.Error(err2)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(s.Verdicts()), verdicts(dedupe.Duplicate); got != want {
		t.Fatalf("a copy of a claim in the new segment 0 judged %v, want %v", got, want)
	}
}

// TestALedgerBegunAgainIsNotTakenForItsPredecessor: a key idle past the
// horizon loses its head to the TTL; another process begins its ledger
// again (segment 0 sealed anew). A warm process that still caches the old
// ledger must not write over the new head, nor take the old segment 0 for
// the new one: a copy of a claim the new ledger holds is a duplicate.
func TestALedgerBegunAgainIsNotTakenForItsPredecessor(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	opts := []dedupe.Option{dedupe.WithHeadEntries(1), dedupe.WithSegmentEntries(4)}
	warm := dedupe.NewLedger(db, table, itemKey, opts...)
	judge(t, warm, cand("k", "a1", 1, 0, 1), cand("k", "a2", 2, 0, 1)) // segment 0
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: itemKey("k", dedupe.Head)}); err != nil {
		t.Fatal(err) // as the TTL does
	}
	const later = 3 * 3600
	judge(t, dedupe.NewLedger(db, table, itemKey, opts...), cand("k", "b1", 3, later, 1), cand("k", "b2", 4, later, 1)) // the new segment 0
	got := judge(t, warm, cand("k", "b1", 5, later+1, 1))
	if want := verdicts(dedupe.Duplicate); fmt.Sprint(got) != want {
		t.Fatalf("a copy of a claim of the new ledger judged %v by a process caching the old one, want %v", got, want)
	}
	got = judge(t, dedupe.NewLedger(db, table, itemKey, opts...), cand("k", "b2", 6, later+2, 1))
	if want := verdicts(dedupe.Duplicate); fmt.Sprint(got) != want {
		t.Fatalf("a copy of b2 judged %v by a fresh process, want %v: the new ledger's claims were written over", got, want)
	}
}
