package local_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/emulator/template"
)

// TestResourcesNameWhatEachToolNeeds: deployed onto the stand-in, the
// banner of `make local-up` names every stream, table, queue (with its
// DLQ) and the views parameter, and gives a command for replay, redrive
// (one per DLQ) and snapshot with the deployed names filled in, and the
// results reader's commands (make results, and cmd/results with the names)
// and make tail's.
func TestResourcesNameWhatEachToolNeeds(t *testing.T) {
	t.Parallel()
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	tpl, err := template.Load("testdata/operators.template.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := template.Provision(ctx, cfg, tpl, template.ProvisionOptions{Stack: "Tributary"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := local.FindResources(ctx, cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	res.Print(&b)
	out := strings.Join(strings.Fields(b.String()), " ") // alignment aside
	name := func(id string) string {
		for _, s := range d.Streams() {
			if s.LogicalID == id {
				return s.Name
			}
		}
		for _, tb := range d.Tables() {
			if tb.LogicalID == id {
				return tb.Name
			}
		}
		for _, q := range d.Queues() {
			if q.LogicalID == id {
				return q.Name
			}
		}
		t.Fatalf("no resource %s", id)
		return ""
	}
	events, views, profiles := name("EventsD32975C2"), name("ViewsC0DDE3FE"), name("ProfilesCDCProfiles4B4A3E71")
	tasks, tasksDLQ, failures, failuresDLQ := name("Tasks0BA6A452"), name("TasksDlqDCE5596F"), name("Failures8A3E1A2F"), name("FailuresDlq819D63D9")
	param := res.ViewsParameter
	if param == "" || res.CurrentViews != views {
		t.Fatalf("views parameter %q names %q, want one naming %s", param, res.CurrentViews, views)
	}
	for _, want := range []string{
		"Events " + events + " (events: replay -stream, snapshot -stream)",
		"WindowResults " + name("WindowResults0D7FBD53") + " (window results: results -follow -stream)",
		"Views " + views + " (the current views table: replay)", "Profiles " + profiles + " (the CDC table: snapshot -table)",
		"Tasks " + tasks + " (dead letters go to " + tasksDLQ + ")",
		"TasksDlq " + tasksDLQ + " (DLQ of " + tasks + ": redrive -dlq)",
		"Failures " + failures + " (dead letters go to " + failuresDLQ + ")", "FailuresDlq " + failuresDLQ,
		"CurrentViews " + param + " (names " + views + ": results -parameter, replay -parameter)",
		"make results KEY=user-1 ", "make results FOLLOW=1 ",
		"go run ./cmd/results -parameter " + param + " -key user-1 -from 1h",
		"go run ./cmd/results -follow -stream " + name("WindowResults0D7FBD53"),
		"go run ./cmd/replay rebuild -pipeline pipelines/ -stream " + events + " -parameter " + param + " -from 10m",
		"go run ./cmd/replay versions -stream " + events + " -parameter " + param,
		"go run ./cmd/replay rollback -pipeline pipelines/ -stream " + events + " -parameter " + param,
		"go run ./cmd/redrive -dlq " + tasksDLQ + " -dry-run",
		"go run ./cmd/redrive -dlq " + failuresDLQ + " -dry-run",
		"go run ./cmd/snapshot -table " + profiles + " -stream " + events + " -key-attribute userId",
		"make tail STREAM=events KEY=user-1",
		"make setaside",
		"make putback SOURCE=",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the banner lacks %q:\n%s", want, b.String())
		}
	}
}

// With several pipelines, the banner's results commands name one and say
// which there are (make results asks for one then).
func TestResourcesNameAPipelineWhenSeveralRun(t *testing.T) {
	r := &local.Resources{Stack: "Tributary", ViewsParameter: "/tributary/views", CurrentViews: "Tributary-Views", ResultsStream: "Tributary-WindowResults",
		Pipelines: []string{"pageviews", "checkouts"}, EventsStream: "Tributary-Events", ArchiveBucket: "tributary-archive"}
	var b bytes.Buffer
	r.Print(&b)
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"PIPELINE= one of checkouts, pageviews",
		"make results PIPELINE=pageviews KEY=user-1",
		"go run ./cmd/results -pipeline pageviews -parameter /tributary/views -key user-1",
		"make results PIPELINE=pageviews FOLLOW=1",
		"go run ./cmd/results -pipeline pageviews -follow -stream Tributary-WindowResults",
		// A rebuild writes a version of the shared views table: every pipeline.
		"go run ./cmd/replay rebuild -pipeline pipelines/pageviews.json -pipeline pipelines/checkouts.json -stream Tributary-Events -parameter /tributary/views -from 30m -archive-bucket tributary-archive -archive-until 5m",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the banner lacks %q:\n%s", want, b.String())
		}
	}
}

// The make commands the banner gives (results, tail, logs) reach the
// stand-in at TRIBUTARY_STANDIN_ADDR, default 127.0.0.1:4566: on another
// address (TRIBUTARY_STANDIN_ADDR=127.0.0.1:4567 make local-up, or a stand-in
// of its own on a free port) each carries it, or, pasted into another
// terminal, it would ask whatever answers on 4566 — nothing, or LocalStack
// with a stack of the same name.
func TestBannerCommandsCarryTheStandInAddress(t *testing.T) {
	tests := []struct {
		endpoint string
		prefix   string
	}{
		{"http://127.0.0.1:4566", ""},
		{"http://127.0.0.1:4567", "TRIBUTARY_STANDIN_ADDR=127.0.0.1:4567 "},
	}
	for _, tc := range tests {
		r := &local.Resources{Stack: "Tributary", ViewsParameter: "/tributary/views", CurrentViews: "Tributary-Views", ResultsStream: "Tributary-WindowResults",
			Pipelines: []string{"pageviews"}, EventsStream: "Tributary-Events", Endpoint: tc.endpoint}
		var b bytes.Buffer
		r.Print(&b)
		out := strings.Join(strings.Fields(b.String()), " ")
		for _, want := range []string{"make results KEY=user-1", "make results FOLLOW=1", "make tail STREAM=events KEY=user-1"} {
			if !strings.Contains(out, " "+tc.prefix+want) {
				t.Errorf("endpoint %s: the banner lacks %q:\n%s", tc.endpoint, tc.prefix+want, b.String())
			}
		}
		if tc.prefix == "" && strings.Contains(out, "TRIBUTARY_STANDIN_ADDR") {
			t.Errorf("endpoint %s (the default): the banner names TRIBUTARY_STANDIN_ADDR:\n%s", tc.endpoint, b.String())
		}
		if got, want := r.Make("logs"), tc.prefix+"make logs"; got != want {
			t.Errorf("endpoint %s: Make(logs) = %q, want %q", tc.endpoint, got, want)
		}
	}
}
