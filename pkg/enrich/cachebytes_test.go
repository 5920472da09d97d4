package enrich_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/enrich"
)

// TestCacheBytesAreBounded: the keys a shard's cache holds are bounded, but
// profiles are up to 128 KiB each, and an instance keeps a cache for every
// shard it ran. The caches' memory is bounded as a whole (on a 256 MB
// function some 150,000 keys of 1 KB profiles ran it out of memory, and
// each crash took a retry): a shard's cache over the bound starts afresh,
// and another shard's cache gives way to the one just used. Either way the
// next batch reads the table and joins the right profile.
func TestCacheBytesAreBounded(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1000)
	profiles := func(shard int) []events.KinesisEventRecord {
		var docs [][]byte
		for k := range 4 {
			docs = append(docs, changed(cdc.TypeChanged, fmt.Sprintf("s%d-u%d", shard, k), 1, map[string]any{"plan": "pro", "bio": big}))
		}
		return onShard(shard, 1, docs...)
	}
	views := func(shard, seq int) []events.KinesisEventRecord {
		var docs [][]byte
		for k := range 4 {
			docs = append(docs, activity(fmt.Sprintf("v%d-%d-%d", shard, seq, k), fmt.Sprintf("s%d-u%d", shard, k)))
		}
		return onShard(shard, seq, docs...)
	}
	for _, tc := range []struct {
		name  string
		bytes int64
		// hits of shard 0's views after shard 0 then shard 1 ran
		wantHits int64
	}{
		{"both shards fit", 64 << 10, 4},
		{"one shard fits: shard 1's cache drops shard 0's", 6 << 10, 0},
		{"no shard fits: each starts afresh", 2 << 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := newStream(t, "enriched")
			h := enrich.New(db, kin, joinTable(t), out, fastBackoff, enrich.WithMaxCacheBytes(tc.bytes))
			handleOK(t, h, profiles(0))
			handleOK(t, h, profiles(1))
			before := h.Stats()
			handleOK(t, h, views(0, 100))
			if hits := h.Stats().CacheHits - before.CacheHits; hits != tc.wantHits {
				t.Errorf("shard 0's views: %d keys from the cache, want %d", hits, tc.wantHits)
			}
			got := byID(t, output(t, out))
			for k := range 4 {
				if id := fmt.Sprintf("v0-100-%d", k); plan(got[id]) != "pro" {
					t.Errorf("%s joined plan %q, want pro", id, plan(got[id]))
				}
			}
		})
	}
}

// onShard is docs as Lambda records of shard n of the synthetic stream,
// their sequence numbers from first on.
func onShard(n, first int, docs ...[]byte) []events.KinesisEventRecord {
	recs := synthetic(docs...)
	for i := range recs {
		seq := fmt.Sprintf("4960118965842235937883629852%028d", first+i)
		recs[i].Kinesis.SequenceNumber = seq
		recs[i].EventID = fmt.Sprintf("shardId-%012d:%s", n, seq)
	}
	return recs
}
