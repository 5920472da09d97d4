package local

import (
	"testing"

	"github.com/tributary-dev/tributary/emulator/eventsource"
	"github.com/tributary-dev/tributary/emulator/template"
)

// A batch retried after its invocation timed out is delivered twice but
// written once: Distinct counts its records once, Records twice.
func TestDistinctCountsARetriedBatchOnce(t *testing.T) {
	s := newStats()
	obs := s.observer("aggregate", template.MappingSpec{LogicalID: "M", SourceARN: "arn:aws:kinesis:us-east-1:1:stream/events"})
	batch := eventsource.Event{Type: eventsource.EventBatch, Shard: "shardId-0", Size: 3, Records: []string{"1", "2", "3"}}
	timedOut := batch
	timedOut.FunctionError = "Unhandled"
	obs.Observe(timedOut)
	obs.Observe(batch)
	if got := s.Distinct("aggregate"); got != 3 {
		t.Errorf("Distinct = %d, want the batch's 3 records once", got)
	}
	if got := s.Of("aggregate").Records; got != 6 {
		t.Errorf("Records = %d, want both deliveries' 6", got)
	}
	if got := s.Distinct("enrich"); got != 0 {
		t.Errorf("Distinct of a function without deliveries = %d, want 0", got)
	}
}
