package setaside

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/internal/ddbtable"
)

// CreateTable creates a quarantine table with the schema the stack
// declares (partition key source, sort key sequenceNumber, on demand), for
// tests and tools.
func CreateTable(ctx context.Context, db ddbtable.Creator, name string) error {
	if err := ddbtable.Create(ctx, db, name, "source", "sequenceNumber"); err != nil {
		return fmt.Errorf("setaside: %w", err)
	}
	return nil
}
