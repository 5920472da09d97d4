package local

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/emulator/template"
)

// Provision creates the resources of one dependency level at once and
// reports each from its own goroutine: the report takes notes from all of
// them (a map written from two goroutines stopped `make local` with a
// fatal "concurrent map writes" once in a while) and keeps every one.
func TestDeployReportTakesNotesFromConcurrentProvisioning(t *testing.T) {
	tpl := &template.Template{Resources: map[string]template.Resource{}}
	const writers, each = 16, 200
	for w := range writers {
		tpl.Resources[fmt.Sprintf("Queue%d", w)] = template.Resource{Type: "AWS::SQS::Queue"}
	}
	r := newDeployReport(tpl)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r.add(fmt.Sprintf("Queue%d: note %d ignored locally", w, i))
			}
		}()
	}
	wg.Wait()
	if len(r.order) != each {
		t.Fatalf("%d distinct notes, want %d", len(r.order), each)
	}
	for _, note := range r.order {
		if ids := r.notes[note]; len(ids) != writers {
			t.Errorf("note %q applies to %d resources, want %d: %s", note, len(ids), writers, strings.Join(ids, ","))
		}
	}
}

// Notes name each resource once and tell apart resources whose constructs
// share an id (every pipeline's TickerFailures queue).
func TestDeployReportTellsApartConstructsOfOneID(t *testing.T) {
	tpl := &template.Template{Resources: map[string]template.Resource{
		"PipelinesPageviewsTickerFailuresA1": {Type: "AWS::SQS::Queue", Metadata: map[string]any{"aws:cdk:path": "Tributary/Pipelines/Pageviews/TickerFailures/Resource"}},
		"PipelinesCheckoutsTickerFailuresB2": {Type: "AWS::SQS::Queue", Metadata: map[string]any{"aws:cdk:path": "Tributary/Pipelines/Checkouts/TickerFailures/Resource"}},
		"WorkTasksC3":                        {Type: "AWS::SQS::Queue", Metadata: map[string]any{"aws:cdk:path": "Tributary/Work/Tasks/Resource"}},
	}}
	r := newDeployReport(tpl)
	for id := range tpl.Resources {
		r.add(id + ": queue encryption ignored locally")
	}
	var b strings.Builder
	r.print(&b, &template.Deployment{}, 0)
	want := "not as on AWS: queue encryption ignored locally — PipelinesCheckoutsTickerFailuresB2, PipelinesPageviewsTickerFailuresA1, Tasks"
	if !strings.Contains(b.String(), want) {
		t.Errorf("report:\n%s\nwant a line with %q", b.String(), want)
	}
}
