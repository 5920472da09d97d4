package dedupe

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/memdb"
)

// Two sets of claims whose salts meet never overwrite one another: a seal
// whose first salt's item holds other claims (another process's segment,
// committed or not) puts its segment under the next salt, which its head
// names, and leaves the other item as it was.
func TestASealWhoseSaltIsTakenTakesTheNext(t *testing.T) {
	ctx := context.Background()
	mem := memdb.New(map[string]memdb.Schema{"t": {PK: "pk", SK: "sk"}})
	itemKey := func(key string, seg int64) map[string]types.AttributeValue {
		sk := "head"
		if seg != Head {
			sk = fmt.Sprintf("seg#%d", seg)
		}
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
	now := uint32(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC).Unix())
	cand := func(id string, seq int) Candidate {
		return Candidate{Key: "k", Entry: Entry{ID: IdentityOf("k", id),
			Content: ContentOf("view", time.Unix(int64(now), 0), []byte(`{}`)),
			Claim:   ClaimOf("shardId-000000000000", fmt.Sprint(seq)), Arrival: now}}
	}
	claims := []Candidate{cand("a", 1), cand("b", 2), cand("c", 3)}
	seg := make([]Entry, len(claims))
	for i, c := range claims {
		seg[i] = c.Entry
	}
	entries := appendEntries(nil, seg)
	// Another segment's claims already hold segment 0's first salt.
	taken := itemKey("k", 0<<saltBits|int64(saltOf(entries, 0)))
	other := []byte("other claims")
	planted := map[string]types.AttributeValue{attrEntries: &types.AttributeValueMemberB{Value: other}}
	for n, v := range taken {
		planted[n] = v
	}
	if _, err := mem.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: planted}); err != nil {
		t.Fatal(err)
	}
	l := NewLedger(mem, "t", itemKey, WithHeadEntries(2), WithSegmentEntries(8))
	s := l.Begin("", nil)
	if err := s.Judge(ctx, claims); err != nil {
		t.Fatal(err)
	}
	if failed := s.Commit(ctx, 1); len(failed) > 0 {
		t.Fatalf("sealing with its first salt taken: %v", failed[0])
	}
	if got := mem.Item("t", taken)[attrEntries].(*types.AttributeValueMemberB).Value; !bytes.Equal(got, other) {
		t.Fatalf("the item holding other claims was overwritten: %q", got)
	}
	head := mem.Item("t", itemKey("k", Head))
	salts, err := decodeSalts(head[attrSalts].(*types.AttributeValueMemberB).Value, 0, 1)
	if err != nil || salts[0].salt != saltOf(entries, 1) {
		t.Fatalf("the head names segment 0 by salt %v (%v), want the second, %d", salts, err, saltOf(entries, 1))
	}
	fresh := NewLedger(mem, "t", itemKey, WithHeadEntries(2), WithSegmentEntries(8))
	s = fresh.Begin("", nil)
	copies := []Candidate{cand("a", 4), cand("b", 5), cand("c", 6)}
	if err := s.Judge(ctx, copies); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.Verdicts()); got != fmt.Sprint([]Verdict{Duplicate, Duplicate, Duplicate}) {
		t.Fatalf("copies of the sealed claims judged %s by a fresh process", got)
	}
}
