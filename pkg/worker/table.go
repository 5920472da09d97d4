package worker

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/internal/ddbtable"
)

// CreateResultsTable creates a results table named name (partition key
// taskId, on-demand), as the CDK stack declares it; for tests and local runs.
func CreateResultsTable(ctx context.Context, db ddbtable.Creator, name string) error {
	if err := ddbtable.Create(ctx, db, name, AttrTaskID, ""); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}
