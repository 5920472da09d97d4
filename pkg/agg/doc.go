// Package agg is Tributary's mergeable aggregates: the value of one window
// for one key, built record by record with Add and combined with Merge
// (panes into hopping windows, partial results of different shards or
// batches into the stored one, sessions into the session that bridges them).
//
// A Spec says which aggregates a pipeline computes: count, sum, min, max,
// mean (sum/count), distinct (an approximate count of distinct values, a
// HyperLogLog sketch) and quantiles (a DDSketch with 1% relative accuracy).
// A State holds one window's aggregates and encodes to a compact binary form
// (a DynamoDB binary attribute) or its base64 text (Lambda's tumbling-window
// state is a map of strings). Merge is associative and commutative, so
// partial states can be combined in any grouping and order.
//
// Add does not allocate for count, sum, min, max and mean; the sketches
// allocate as they grow.
package agg
