package main

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/pkg/stream"
)

// ---------------------------------------------------------------------------
// INTEGRATOR: wire Tributary's aggregate handler here.
// ---------------------------------------------------------------------------
//
// runTributary processes evs with Tributary's exactly-once windowed count
// (1-minute tumbling windows on event time, count per key) against the
// stand-in at endpoint, in batches of batch records delivered one after the
// other as one shard's event source mapping would, in mode:
//
//   - "per-batch": one fenced conditional write per (key, window) per batch;
//   - "per-interval": Lambda's tumbling-window state as the accumulator,
//     flushed once per interval (one write per (key, window) per flush).
//
// It creates the tables it needs itself (fresh names per call: the same
// endpoint serves every run) and must return an error when the resulting
// view does not hold exactly the expected count per (key, window) (see
// expectedCounts). The driver counts every DynamoDB write made during this
// call, so setup must make none (CreateTable is not a write and is not
// counted); reads are counted separately.
//
// Until it is wired it returns errNotWired and the driver prints no
// Tributary or ratio line (no number is made up).
func runTributary(ctx context.Context, endpoint string, evs []stream.Envelope, batch int, mode string) error {
	_, _, _, _ = ctx, endpoint, evs, batch
	return fmt.Errorf("tributary %s: %w", mode, errNotWired)
}
