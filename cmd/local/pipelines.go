package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/pkg/state"
)

// The demo's pipelines: every pipeline file deploys an aggregate function
// of its own (pipelines/<name>.json), and the demo sends each pipeline it
// knows its traffic — page views to the one reading page_view events,
// checkouts to the one reading checkout events — and checks each one's
// windows against what it sent.

// pipelineOf is the deployed pipeline that reads events of type t with
// value path value, or nil.
func pipelineOf(ps []*local.Windows, t, value string) *local.Windows {
	for _, p := range ps {
		if len(p.Pipeline.EventTypes) > 0 && p.Pipeline.Matches(t) && p.Pipeline.Value.String() == value {
			return p
		}
	}
	return nil
}

// printPipelines says which pipelines run, each in its own function, and
// what the demo sends each.
func printPipelines(w io.Writer, ps []*local.Windows, demo map[string]string) {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Pipeline.Name
	}
	fmt.Fprintf(w, "▸ %d pipelines from pipelines/*.json, side by side (one aggregate function and ticker each, one views table): %s\n", len(ps), strings.Join(names, ", "))
	for _, p := range ps {
		what := demo[p.Pipeline.Name]
		if what == "" {
			what = "no sample traffic for its event types here: send some with curl (README: Your first pipeline)"
		}
		types := "every type"
		if len(p.Pipeline.EventTypes) > 0 {
			types = strings.Join(p.Pipeline.EventTypes, ", ")
		}
		value := p.Pipeline.Value.String()
		if value == "" {
			value = "none"
		}
		logged := ""
		if !p.Pipeline.Outputs.Log {
			logged = ", results not logged (outputs.log false)"
		}
		fmt.Fprintf(w, "  %-10s %s: %s windows of %s by %s, value %s, late policy %s%s — %s\n", p.Pipeline.Name, p.Function, p.Kind(), types, p.Pipeline.Key, value, p.Pipeline.Late.Policy, logged, what)
	}
}

// demoTypes are the event types the rest of the demo sends through
// ingest for its own checks; a pipeline reading one of them gets no sample
// traffic of its own (its windows would count those too).
var demoTypes = []string{"page_view", "checkout", "purchase", "search", "click", "payment", "payment_failed", "http_request"}

// pipelineDemo is one pipeline's part of the run besides the page views:
// its events are sent next to them, its windows checked at the end.
type pipelineDemo struct {
	w        *local.Windows
	want     local.Expected
	sent     int
	what     string // what was sent, for the summary
	from, to time.Time
}

// sendCheckouts sends the checkout traffic (in event-time order: the
// pipeline drops late records) through ingest.
func sendCheckouts(ctx context.Context, w *local.Windows, ingestURL string, o *options, now time.Time, from, to time.Time) (*pipelineDemo, error) {
	c := local.Checkouts{Regions: []string{"ap-south", "eu-west", "us-east"}, Minutes: o.minutes, Max: 6, Seed: o.seed, Now: now}
	evs, want := c.Generate()
	fmt.Printf("▸ sending %d checkout events (key = region, data.amount in cents) for %d regions over %d event-time minutes, for pipeline %s\n",
		len(evs), len(c.Regions), c.Minutes, w.Pipeline.Name)
	if _, err := local.Send(ctx, ingestURL, evs, 100, io.Discard); err != nil {
		return nil, err
	}
	return &pipelineDemo{w: w, want: want, sent: len(evs), what: "checkout events", from: from, to: to}, nil
}

// sendSample sends a pipeline the demo has no traffic of its own for (one
// a user added) sample events made from its config, and says what it sent.
func sendSample(ctx context.Context, w *local.Windows, ingestURL string, o *options, now, to time.Time) (*pipelineDemo, error) {
	s := local.Sample{Pipeline: w.Pipeline, Keys: 3, Windows: 3, Max: 5, Seed: o.seed, Now: now}
	evs, want, first := s.Generate()
	fmt.Printf("▸ sending %d %s events made from pipelines/%s.json (keys %s-1…%d at %s, value %s) over its last %d %s windows, for pipeline %s\n",
		len(evs), w.Pipeline.EventTypes[0], w.Pipeline.Name, w.Pipeline.Name, s.Keys, w.Pipeline.Key, valueOf(w), s.Windows, w.Kind(), w.Pipeline.Name)
	if _, err := local.Send(ctx, ingestURL, evs, 100, io.Discard); err != nil {
		return nil, err
	}
	return &pipelineDemo{w: w, want: want, sent: len(evs), what: w.Pipeline.EventTypes[0] + " events", from: first.Add(-time.Minute), to: to}, nil
}

func valueOf(w *local.Windows) string {
	if w.Pipeline.Value.IsZero() {
		return "none"
	}
	return w.Pipeline.Value.String()
}

// wait waits until the pipeline's windows hold what was sent; after
// timeout it returns the windows as they are, for the report to show what
// differs.
func (c *pipelineDemo) wait(ctx context.Context, timeout time.Duration, progress io.Writer) ([]state.View, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	vs, err := c.w.WaitTotals(wctx, c.want, c.from, c.to, progress)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return vs, nil // the report shows what differs, and the run fails
	}
	return vs, err
}

// report prints the pipeline's windows next to what was sent and returns
// the number that differ.
func (c *pipelineDemo) report(vs []state.View) int {
	fmt.Printf("▸ pipeline %s: windows in DynamoDB table %s (the same table as every pipeline: items keyed by pipeline name)\n", c.w.Pipeline.Name, c.w.Table)
	return local.PrintTotals(os.Stdout, c.w, c.want, vs)
}
