package dedupe

import (
	"runtime"
	"testing"
)

// TestCachedEntryBytes measures what a cached claim takes in memory (in
// its segment and in its key's index), which CacheEntriesFor sizes the
// cache by: more than cachedEntryBytes and a function's cache would take
// more than the quarter of its memory it is given.
func TestCachedEntryBytes(t *testing.T) {
	const keys, per = 50, 10_000
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	kls := make([]*keyLedger, keys)
	for k := range kls {
		kl := &keyLedger{segs: map[int64][]Entry{}}
		for s := range per / 2000 {
			es := make([]Entry, 2000)
			for i := range es {
				es[i].ID[0], es[i].ID[1], es[i].ID[2], es[i].ID[3] = byte(k), byte(s), byte(i), byte(i>>8)
			}
			kl.segs[int64(s)] = es
		}
		kl.index()
		kls[k] = kl
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	got := float64(m1.HeapAlloc-m0.HeapAlloc) / float64(keys*per)
	t.Logf("%.0f bytes a cached claim", got)
	if got > cachedEntryBytes {
		t.Fatalf("a cached claim takes %.0f bytes, more than the %d CacheEntriesFor counts", got, cachedEntryBytes)
	}
	runtime.KeepAlive(kls)
}

// In Lambda the cache follows the function's memory: a quarter of it.
func TestCacheFollowsTheFunctionsMemory(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")
	if l := NewLedger(nil, "t", nil); l.cacheMax != CacheEntriesFor(1024) || l.cacheMax < 1_800_000 {
		t.Fatalf("cache of %d entries at 1,024 MB, want %d (an hour of 500 claims a second at least)", l.cacheMax, CacheEntriesFor(1024))
	}
	t.Setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "")
	if l := NewLedger(nil, "t", nil); l.cacheMax != defaultCacheMax {
		t.Fatalf("cache of %d entries outside Lambda, want %d", l.cacheMax, defaultCacheMax)
	}
	if l := NewLedger(nil, "t", nil, WithCacheEntries(10)); l.cacheMax != 10 {
		t.Fatalf("WithCacheEntries(10): %d", l.cacheMax)
	}
}
