package state

import (
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/window"
)

// The memory of full listing chunks is bounded: a container that lives for
// days, a window a minute, keeps at most listingChunksKept listings' worth,
// and forgets them all past that (a writer then probes the full chunks of
// an old window once more, if it writes it again at all).
func TestListingChunksAreBounded(t *testing.T) {
	var c listingChunks
	at := func(i int) window.Window {
		start := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
		return window.Window{Start: start, End: start.Add(time.Minute)}
	}
	c.full("~open#p#shard", "tumbling:1m0s", at(0), 2)
	if got := c.first("~open#p#shard", "tumbling:1m0s", at(0)); got != 3 {
		t.Fatalf("after chunk 2 was found full: first chunk to try %d, want 3", got)
	}
	for i := 1; i <= listingChunksKept; i++ {
		c.full("~open#p#shard", "tumbling:1m0s", at(i), 0)
	}
	n := 0
	c.m.Range(func(any, any) bool { n++; return true })
	if n > listingChunksKept {
		t.Fatalf("%d listings remembered, want at most %d", n, listingChunksKept)
	}
	if got := c.first("~open#p#shard", "tumbling:1m0s", at(0)); got != 0 {
		t.Fatalf("the oldest listing is still remembered past the bound (first chunk %d)", got)
	}
}
