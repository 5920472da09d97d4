package dedupe

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/limits"
)

// TestASegmentLimitSetHighStillFitsTheHead: WithSegmentLimit set past what
// a head can name within DynamoDB's item limit is held to what fits: a key
// that reaches it lets its oldest segments go, rather than writing a head
// DynamoDB refuses at every commit of the key, which would hold its shard —
// what the limit is for.
func TestASegmentLimitSetHighStillFitsTheHead(t *testing.T) {
	ctx := context.Background()
	mem := memdb.New(map[string]memdb.Schema{"t": {PK: "pk", SK: "sk"}})
	itemKey := func(key string, seg int64) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}, "sk": &types.AttributeValueMemberS{Value: fmt.Sprint(seg)}}
	}
	l := NewLedger(mem, "t", itemKey, WithSegmentLimit(1<<20), WithMaxSegments(1<<20), WithSegmentEntries(1))
	// A key whose head names 70,000 full segments (of one claim: no two
	// merge), far apart in number (as merged segments are): 7 bytes each
	// in the head, 490 KB.
	const segments, at = 70_000, 1_800_000_000
	kl := &keyLedger{next: segments << 26}
	for i := 0; i < segments; i++ {
		r := segRef{n: int64(i) << 26, salt: 1<<19 + uint32(i%1000)}
		kl.live = append(kl.live, r)
		kl.setSeg(r.item(), []Entry{{ID: IdentityOf("hot", fmt.Sprint(i)), Arrival: at}})
	}
	l.mu.Lock()
	p := l.plan("hot", kl, []Entry{{ID: IdentityOf("hot", "new"), Arrival: at}}, at)
	l.mu.Unlock()
	if _, err := l.write(ctx, p); err != nil {
		t.Fatalf("committing a claim of a key past the segment limit: %v; want its oldest segments let go and the head written", err)
	}
	head, err := l.headItem("hot", p.after)
	if err != nil {
		t.Fatal(err)
	}
	if n := limits.ItemSize(head); n > limits.DynamoDBItemBytes-4096 {
		t.Errorf("the head is %d bytes; want room under DynamoDB's %d", n, limits.DynamoDBItemBytes)
	}
	if st := l.Stats(); st.DroppedEarly == 0 {
		t.Errorf("DroppedEarly 0; want the segments let go counted")
	}
}
