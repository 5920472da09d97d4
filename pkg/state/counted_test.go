package state_test

import (
	"context"
	"testing"
)

// FirstToCount takes the first flush of an interval and refuses its
// repeats; a later interval is first again, an earlier one never.
func TestFirstToCountTakesEachIntervalOnce(t *testing.T) {
	f := newViews(t)
	ctx := context.Background()
	for i, tt := range []struct {
		shard, lastSeq string
		want           bool
	}{
		{"shard-0", "49600000000000000000000000009", true},
		{"shard-0", "49600000000000000000000000009", false}, // the final invocation again
		{"shard-1", "49600000000000000000000000009", true},  // another shard's interval
		{"shard-0", "49600000000000000000000000100", true},  // the next interval
		{"shard-0", "49600000000000000000000000050", false}, // an earlier one
	} {
		first, err := f.views.FirstToCount(ctx, "p", tt.shard, tt.lastSeq)
		if err != nil || first != tt.want {
			t.Errorf("call %d: FirstToCount(%s, %s) = %v, %v; want %v", i, tt.shard, tt.lastSeq, first, err, tt.want)
		}
	}
	if _, err := f.views.FirstToCount(ctx, "p", "shard-0", "not a sequence number"); err == nil {
		t.Error("FirstToCount took a sequence number that is not one")
	}
}
