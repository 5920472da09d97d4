package shardorder

import "sort"

// Queue holds shards waiting to be read and the shards being read. It is
// not safe for concurrent use: its reader's loop owns it.
type Queue[T any] struct {
	waiting map[string]entry[T]
	reading map[string]bool
}

type entry[T any] struct {
	v                T
	parent, adjacent string
}

// Shard is one shard Ready hands out to be read, with what Wait kept for it.
type Shard[T any] struct {
	ID    string
	Value T
}

// New returns an empty queue.
func New[T any]() *Queue[T] {
	return &Queue[T]{waiting: map[string]entry[T]{}, reading: map[string]bool{}}
}

// Wait adds shard id, split or merged from parent and adjacent ("" for
// none), to be read with v once neither parent is waiting or being read.
func (q *Queue[T]) Wait(id, parent, adjacent string, v T) {
	q.waiting[id] = entry[T]{v: v, parent: parent, adjacent: adjacent}
}

// Waiting is how many shards wait.
func (q *Queue[T]) Waiting() int { return len(q.waiting) }

// Ready takes, in id order, the waiting shards none of whose parents is
// waiting or being read, and marks them being read until Done.
func (q *Queue[T]) Ready() []Shard[T] {
	busy := func(id string) bool { _, w := q.waiting[id]; return w || q.reading[id] }
	var ready []Shard[T]
	for id, e := range q.waiting {
		if !busy(e.parent) && !busy(e.adjacent) {
			ready = append(ready, Shard[T]{ID: id, Value: e.v})
		}
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].ID < ready[j].ID })
	for _, s := range ready {
		delete(q.waiting, s.ID)
		q.reading[s.ID] = true
	}
	return ready
}

// Done says shard id is read to its end: its children may be Ready.
func (q *Queue[T]) Done(id string) { delete(q.reading, id) }
