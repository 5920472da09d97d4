package local

import (
	"testing"

	"github.com/tributary-dev/tributary/emulator/template"
)

// TestInstancesFor: a queue consumer gets as many execution environments as
// its mappings' MaximumConcurrency lets Lambda run (capped locally), so that
// load balancing over environments shows; reserved concurrency caps it.
func TestInstancesFor(t *testing.T) {
	two := 2
	tests := []struct {
		name     string
		reserved *int
		mappings []template.MappingSpec
		want     int
	}{
		{"stream consumer", nil, []template.MappingSpec{{FunctionLogicalID: "Fn", SourceKind: template.SourceKinesis}}, 2},
		{"queue consumer, MaximumConcurrency 10", nil, []template.MappingSpec{{FunctionLogicalID: "Fn", SourceKind: template.SourceSQS, MaximumConcurrency: 10}}, maxEnvironments},
		{"queue consumer, MaximumConcurrency 2", nil, []template.MappingSpec{{FunctionLogicalID: "Fn", SourceKind: template.SourceSQS, MaximumConcurrency: 2}}, 2},
		{"queue consumer, no MaximumConcurrency", nil, []template.MappingSpec{{FunctionLogicalID: "Fn", SourceKind: template.SourceSQS}}, maxEnvironments},
		{"another function's queue", nil, []template.MappingSpec{{FunctionLogicalID: "Other", SourceKind: template.SourceSQS, MaximumConcurrency: 10}}, 2},
		{"reserved concurrency wins", &two, []template.MappingSpec{{FunctionLogicalID: "Fn", SourceKind: template.SourceSQS, MaximumConcurrency: 10}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := template.FunctionSpec{LogicalID: "Fn", ReservedConcurrency: tt.reserved}
			if got := instancesFor(f, tt.mappings); got != tt.want {
				t.Errorf("instancesFor = %d, want %d", got, tt.want)
			}
		})
	}
}
