package local

import (
	"reflect"
	"testing"

	"github.com/tributary-dev/tributary/emulator/template"
)

func TestFunctionNames(t *testing.T) {
	specs := []template.FunctionSpec{
		{LogicalID: "Ingest1", Binary: "ingest"},
		{LogicalID: "PipelinesPageviewsAggregate", Binary: "aggregate", Pipeline: "pageviews"},
		{LogicalID: "PipelinesCheckoutsAggregate", Binary: "aggregate", Pipeline: "checkouts"},
		{LogicalID: "PipelinesPageviewsTicker", Binary: "ticker", Pipeline: "pageviews"},
		{LogicalID: "PipelinesCheckoutsTicker", Binary: "ticker", Pipeline: "checkouts"},
		{LogicalID: "WorkerA", Binary: "worker"},
		{LogicalID: "WorkerB", Binary: "worker"}, // no pipeline to tell them apart
		{LogicalID: "Custom", Binary: ""},        // no tributary:function metadata
		{LogicalID: "Single", Binary: "statuscodes", Pipeline: "statuscodes"},
	}
	want := map[string]string{
		"Ingest1":                     "ingest",
		"PipelinesPageviewsAggregate": "aggregate-pageviews",
		"PipelinesCheckoutsAggregate": "aggregate-checkouts",
		"PipelinesPageviewsTicker":    "ticker-pageviews",
		"PipelinesCheckoutsTicker":    "ticker-checkouts",
		"WorkerA":                     "worker-WorkerA",
		"WorkerB":                     "worker-WorkerB",
		"Custom":                      "Custom",
		"Single":                      "statuscodes",
	}
	if got := functionNames(specs); !reflect.DeepEqual(got, want) {
		t.Errorf("functionNames =\n%v\nwant\n%v", got, want)
	}
	// One pipeline: the names are the binaries, as before several pipelines.
	one := functionNames(specs[:2])
	if one["PipelinesPageviewsAggregate"] != "aggregate" {
		t.Errorf("a single aggregate function is named %q, want aggregate", one["PipelinesPageviewsAggregate"])
	}
}
