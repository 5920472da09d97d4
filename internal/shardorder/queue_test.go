package shardorder_test

import (
	"fmt"
	"testing"

	"github.com/tributary-dev/tributary/internal/shardorder"
)

func ids[T any](ss []shardorder.Shard[T]) string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return fmt.Sprint(out)
}

// A split's children wait for their parent, a merge's child for both its
// parents, and a shard whose parent is not being read (expired, or not
// asked for) is ready at once.
func TestChildrenWaitForTheirParents(t *testing.T) {
	q := shardorder.New[int]()
	q.Wait("s0", "", "", 0)
	q.Wait("s1", "s0", "", 1)
	q.Wait("s2", "s0", "", 2)
	q.Wait("s3", "s1", "s2", 3)
	q.Wait("s9", "gone", "", 9)
	if got := ids(q.Ready()); got != "[s0 s9]" {
		t.Fatalf("first ready %s, want [s0 s9]", got)
	}
	if got := ids(q.Ready()); got != "[]" {
		t.Fatalf("ready again before s0 is done: %s, want none", got)
	}
	q.Done("s0")
	if got := ids(q.Ready()); got != "[s1 s2]" {
		t.Fatalf("after s0: %s, want [s1 s2]", got)
	}
	q.Done("s1")
	if got := ids(q.Ready()); got != "[]" {
		t.Fatalf("the merge's child with s2 still read: %s, want none", got)
	}
	q.Done("s2")
	r := q.Ready()
	if ids(r) != "[s3]" || r[0].Value != 3 || q.Waiting() != 0 {
		t.Fatalf("after s1 and s2: %v (waiting %d), want s3 with its value and none waiting", r, q.Waiting())
	}
}
