package main

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/bench/internal/deployed"
	"github.com/tributary-dev/tributary/bench/internal/sdkcost"
	"github.com/tributary-dev/tributary/internal/memdb"
)

// storeWork is what the in-process store did answering requests: work
// DynamoDB does on its own servers, not the handler's.
type storeWork struct {
	requests int
	ops      map[string]int // requests by operation, for the SDK's cost (sdkcost)
	cpu      time.Duration  // the calling thread's CPU time inside the calls
	allocs   uint64         // heap allocations inside the calls
}

// meteredStore is memdb with each request's own CPU time (and, with
// allocs, its heap allocations) counted, so the benchmark can charge them
// to the store and not to the handler (bench/load's keep-up takes the
// store's time off likewise). The handler builds each request before the
// call and reads the answer after it: that work stays the handler's. Calls
// are serialized (memdb serializes them anyway), and the benchmark runs on
// one core, so what happens between the readings before and after a call
// is the store's.
type meteredStore struct {
	db     *memdb.DB
	allocs bool
	// sdk, when set, keeps a sample of the requests made, for the SDK's
	// cost per request (sdkcost.Measure).
	sdk *sdkcost.Sampler

	mu sync.Mutex
	w  storeWork
	ms runtime.MemStats
}

var _ deployed.Store = (*meteredStore)(nil)

// take returns the store's work since the last take.
func (s *meteredStore) take() storeWork {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.w
	s.w = storeWork{}
	return w
}

// metered runs one request and counts its work.
func metered[T any](s *meteredStore, op string, in any, call func() (T, error)) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The readings' own cost is inside the span: it is the benchmark's,
	// not the handler's. (Reading the allocations stops the world, and the
	// runtime's threads that wakes cost CPU time outside the span: a store
	// counting allocations is not timed, see deployment.)
	c0 := threadCPU()
	if s.allocs {
		runtime.ReadMemStats(&s.ms)
	}
	a0 := s.ms.Mallocs
	out, err := call()
	if s.allocs {
		runtime.ReadMemStats(&s.ms)
	}
	c1 := threadCPU()
	s.w.requests++
	if s.w.ops == nil {
		s.w.ops = map[string]int{}
	}
	s.w.ops[op]++
	if err == nil && s.sdk != nil {
		s.sdk.Keep(op, in, out)
	}
	s.w.cpu += max(0, c1-c0) // never negative, should the thread have changed after all
	s.w.allocs += s.ms.Mallocs - a0
	return out, err
}

func (s *meteredStore) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return metered(s, "UpdateItem", in, func() (*dynamodb.UpdateItemOutput, error) { return s.db.UpdateItem(ctx, in, opts...) })
}

func (s *meteredStore) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return metered(s, "DeleteItem", in, func() (*dynamodb.DeleteItemOutput, error) { return s.db.DeleteItem(ctx, in, opts...) })
}

func (s *meteredStore) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return metered(s, "GetItem", in, func() (*dynamodb.GetItemOutput, error) { return s.db.GetItem(ctx, in, opts...) })
}

func (s *meteredStore) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return metered(s, "Query", in, func() (*dynamodb.QueryOutput, error) { return s.db.Query(ctx, in, opts...) })
}

func (s *meteredStore) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return metered(s, "BatchGetItem", in, func() (*dynamodb.BatchGetItemOutput, error) { return s.db.BatchGetItem(ctx, in, opts...) })
}

func (s *meteredStore) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return metered(s, "PutItem", in, func() (*dynamodb.PutItemOutput, error) { return s.db.PutItem(ctx, in, opts...) })
}

func (s *meteredStore) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return metered(s, "TransactWriteItems", in, func() (*dynamodb.TransactWriteItemsOutput, error) { return s.db.TransactWriteItems(ctx, in, opts...) })
}

func (s *meteredStore) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return metered(s, "BatchWriteItem", in, func() (*dynamodb.BatchWriteItemOutput, error) { return s.db.BatchWriteItem(ctx, in, opts...) })
}
