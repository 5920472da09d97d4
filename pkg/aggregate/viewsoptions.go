package aggregate

import (
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// ViewsOptions are the state options of cfg's views, for every writer of
// them (the function, a rebuild, a benchmark): window items are kept for
// the pipeline's retention past their end, and its session and sliding
// states (one item per key and kind) keyed.StateExpiry past their last
// write plus the longest a late record can still change them
// (allowedLateness after the watermark, which trails by outOfOrderness, or
// by idleTimeout more on an idle shard). A key that stops sending thus has
// its state deleted once no redelivery, replay or correction can need its
// fences or the results it emitted, where it was kept for ever.
func ViewsOptions(cfg *pipeline.Config) []state.Option {
	return []state.Option{
		state.WithRetention(cfg.Retention),
		state.WithKeyedExpiry(keyed.StateExpiry + cfg.Late.AllowedLateness + cfg.OutOfOrderness + cfg.IdleTimeout),
	}
}
