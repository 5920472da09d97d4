package standintest

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// QueryCounter is a DynamoDB client of the stand-in that counts what its
// Query calls return: the items and the requests, what a read costs, for
// tests that a read stops where it should.
type QueryCounter struct {
	*dynamodb.Client
	mu             sync.Mutex
	items, queries int
}

// Query is the client's Query, counted.
func (c *QueryCounter) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.Client.Query(ctx, in, opts...)
	if err == nil {
		c.mu.Lock()
		c.items += len(out.Items)
		c.queries++
		c.mu.Unlock()
	}
	return out, err
}

// Take returns the items and requests counted since the last Take and
// starts counting again.
func (c *QueryCounter) Take() (items, queries int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	items, queries = c.items, c.queries
	c.items, c.queries = 0, 0
	return items, queries
}
