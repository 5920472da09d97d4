package idempotency

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/internal/ddbtable"
)

// CreateTable creates an idempotency table named name (partition key id,
// on-demand), as the CDK stack declares it; for tests and local runs. The
// TTL on expiration is the stack's business: Do does not rely on it, since it
// compares expiration itself.
func CreateTable(ctx context.Context, db ddbtable.Creator, name string) error {
	if err := ddbtable.Create(ctx, db, name, AttrID, ""); err != nil {
		return fmt.Errorf("idempotency: %w", err)
	}
	return nil
}
