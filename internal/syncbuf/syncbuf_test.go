package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers and a reader at once: under -race a Buffer without its lock
// fails here, and every write is kept.
func TestConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 400) {
		t.Errorf("got %d bytes, want 400", len(got))
	}
	if c := b.Bytes(); len(c) != 400 {
		t.Errorf("Bytes: %d, want 400", len(c))
	}
}
