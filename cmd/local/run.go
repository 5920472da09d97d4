package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/emulator/cloudwatchlocal"
	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/internal/headless"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// topology is what the demo needs to find in the deployed template, read
// from the functions' environment so it follows the CDK app.
type topology struct {
	ingestURL  string
	eventsName string
	quarantine string
	windows    *local.Windows   // the pipeline the page views go to
	pipelines  []*local.Windows // every deployed pipeline, by name
	// viewsParameter names the SSM parameter holding the current views
	// table (aggregate's VIEWS_PARAMETER_NAME); "" if the stack has none.
	viewsParameter string
}

func findTopology(s *local.Stack) (topology, error) {
	specs, err := s.Deployment().Functions()
	if err != nil {
		return topology{}, err
	}
	var t topology
	for _, f := range specs {
		switch f.Binary {
		case "ingest":
			t.eventsName = f.Env["EVENTS_STREAM_NAME"]
		case "quarantine":
			t.quarantine = f.Env["QUARANTINE_TABLE_NAME"]
		case "aggregate":
			t.viewsParameter = f.Env["VIEWS_PARAMETER_NAME"]
		}
	}
	t.ingestURL = s.URL("ingest")
	if t.pipelines, err = s.FindPipelines(); err != nil {
		return t, err
	}
	if t.windows = pipelineOf(t.pipelines, "page_view", "data.ms"); t.windows == nil {
		return t, fmt.Errorf("no deployed pipeline reads page_view events with value data.ms (pipelines/pageviews.json): the sample traffic would be counted nowhere")
	}
	var missing []string
	for name, v := range map[string]string{"ingest function URL": t.ingestURL, "ingest EVENTS_STREAM_NAME": t.eventsName,
		"quarantine QUARANTINE_TABLE_NAME": t.quarantine} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("the template lacks %s", strings.Join(missing, ", "))
	}
	return t, nil
}

// ports are the ports a command serves on (0: any free port).
type ports struct{ url, lambda, dashboard int }

// startStack starts (or reuses) the stand-in and brings the topology up on it.
func startStack(ctx context.Context, o *options, tm *timings, p ports) (*standin.Server, *local.Stack, error) {
	// Before the stand-in step: a second make local-up beside a running one
	// stops here, not after saying it would deploy onto the first's stand-in.
	if err := local.PortsFree(o.template, p.url, p.lambda, p.dashboard); err != nil {
		var pe *local.PortsError
		if errors.As(err, &pe) {
			return nil, nil, usageError{pe.Msg}
		}
		return nil, nil, err
	}
	warnStaleTemplate(o, os.Stdout)
	began := time.Now()
	stackName := freshStack
	srv, err := standinFor(ctx, o, began, os.Stdout)
	if err != nil {
		return nil, nil, err
	}
	if srv.Reused() {
		stackName = fmt.Sprintf("Tributary-%d", time.Now().Unix())
	}
	tm.since("stand-in", began)
	var logf func(fn, line string)
	if o.verbose {
		logf = func(fn, line string) { fmt.Printf("    [%s] %s\n", fn, line) }
	}
	var progress io.Writer = os.Stdout
	if o.progress != nil {
		progress = o.progress
	}
	began = time.Now()
	stack, err := local.Up(ctx, local.Options{
		Template:      o.template,
		Functions:     o.bin,
		Endpoint:      srv.Endpoint(),
		Stack:         stackName,
		URLPort:       p.url,
		LambdaPort:    p.lambda,
		DashboardPort: p.dashboard,
		Progress:      progress,
		Verbose:       o.verbose,
		Logs:          logf,
		ScheduleEvery: o.scheduleEvery,
		MaxBatchingWindow: func() time.Duration {
			if o.cmd == "run" {
				return o.batchWindow
			}
			return 0
		}(),
	})
	tm.since("deploy and start", began)
	if err != nil {
		_ = srv.Stop()
		return nil, nil, err
	}
	return srv, stack, nil
}

// freshStack is the stack name of a deployment onto a stand-in of its own
// (one that was reused gets a name of its own: startStack).
const freshStack = "Tributary"

// standinFor starts the stand-in at o.addr, or reuses what answers there
// (LocalStack, a make local-up), saying which. Another make local's
// stand-in is not reused: it stops when that run ends, with whatever this
// run deployed onto it, so this run starts one of its own on a free port.
func standinFor(ctx context.Context, o *options, began time.Time, w io.Writer) (*standin.Server, error) {
	name := "make " + o.command()
	if o.cmd == "invoke" {
		name = "make invoke"
	}
	owner := standin.Owner{Command: name, PID: os.Getpid(), StopsWithRun: o.cmd != "up"}
	srv, err := standin.Start(ctx, standin.Options{Addr: o.addr, Reuse: true, Log: nil, Progress: w, Owner: owner})
	if err != nil {
		return nil, err
	}
	switch {
	case srv.Reused() && srv.Found().StopsWithRun():
		fmt.Fprintf(w, "! %s answers on %s: the stand-in of %s. This run starts one of its own on a free port.\n",
			srv.Found().Kind, o.addr, srv.Found().Owner)
		if srv, err = standin.Start(ctx, standin.Options{Addr: "127.0.0.1:0", Owner: owner}); err != nil {
			return nil, err
		}
		addr := strings.TrimPrefix(srv.Endpoint(), "http://")
		fmt.Fprintf(w, "▸ started the AWS stand-in, moto %s, on %s in %s\n", standin.MotoVersion, addr, roundDuration(time.Since(began)))
		if o.cmd == "up" {
			fmt.Fprintf(w, "  Other commands reach it with TRIBUTARY_STANDIN_ADDR=%s (for example TRIBUTARY_STANDIN_ADDR=%[1]s make results).\n", addr)
		}
	case srv.Reused():
		// Something already answers there (LocalStack, a make local-up):
		// say what; the caller gives this run resources of its own so
		// that earlier data cannot skew its results.
		fmt.Fprintf(w, "! found %s on %s: this run deploys onto it, as a stack of its own, and leaves its resources there.\n", srv.Found(), o.addr)
		if owner := srv.Found().Owner; owner != nil {
			fmt.Fprintf(w, "  It lasts as long as %s: stopping that one (Ctrl-C there) stops its stand-in, and this run with it.\n", owner)
		}
		other := standin.OtherAddr(o.addr)
		fmt.Fprintf(w, "  For a stand-in of its own, pick a free address: TRIBUTARY_STANDIN_ADDR=%s make %s (or -addr %[1]s).\n", other, o.command())
	case strings.HasSuffix(o.addr, ":0"): // any free port: say which
		fmt.Fprintf(w, "▸ started the AWS stand-in, moto %s, on %s in %s\n", standin.MotoVersion, strings.TrimPrefix(srv.Endpoint(), "http://"), roundDuration(time.Since(began)))
	default:
		fmt.Fprintf(w, "▸ nothing listened on %s: started the AWS stand-in, moto %s, there in %s\n", o.addr, standin.MotoVersion, roundDuration(time.Since(began)))
	}
	return srv, nil
}

// demoFailed is the run's error when the demo failed with err after took:
// the demo's own deadline (-timeout) is named only when that is what ran
// out, not when one check ran out of its own (-check-timeout).
func demoFailed(err error, timeout, took time.Duration) error {
	var own *checkDeadlineError
	if errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &own) {
		return fmt.Errorf("the demo did not finish within -timeout %s (after %s of it; a loaded machine can take longer: make local LOCAL_FLAGS=-timeout=12m): %w",
			timeout, took.Round(time.Second), err)
	}
	return err
}

// command is the make target that runs the current subcommand.
func (o *options) command() string {
	if o.cmd == "up" {
		return "local-up"
	}
	return "local"
}

// outcome is what the run showed, for its summary.
type outcome struct {
	sent, sample, followers, late  int
	keyed                          int
	pipelines                      []string // "<n> <what> in pipeline <name>", one per pipeline besides the page views
	windows, resent, corrected     int
	quarantinedSeq                 string
	tasks, taskMessages, workerEnv int
	screenshot                     string
}

func run(ctx context.Context, o *options) (err error) {
	tm := loadTimings(o.root)
	defer tm.done()
	srv, stack, err := startStack(ctx, o, tm, ports{o.port("url-port", o.urlPort, false), o.port("lambda-port", o.lambdaPort, false), o.port("dashboard-port", o.dashboardPort, false)})
	if err != nil {
		return err
	}
	stopped := false
	stopAll := func() error {
		if stopped {
			return nil
		}
		stopped = true
		return errors.Join(stack.Close(), srv.Stop())
	}
	defer func() { err = errors.Join(err, stopAll()) }()

	demoStart := time.Now()
	var out outcome
	if err := demo(ctx, o, stack, &out); err != nil {
		return demoFailed(err, o.timeout, time.Since(demoStart))
	}
	tm.since("demo", demoStart)
	if crashes := stack.Crashes(); len(crashes) > 0 {
		var b strings.Builder
		for _, c := range crashes {
			fmt.Fprintf(&b, "\n  %s (request %s): %s", c.Function, c.RequestID, c.Message)
		}
		return fmt.Errorf("%d function invocations crashed (Runtime.ExitError: the runtime process exited; make logs, or make local LOCAL_FLAGS=-v, shows its last lines):%s", len(crashes), b.String())
	}

	// The dashboard page reads what it shows from the stand-in: a widget
	// that cannot read its data fails the run, naming it (each read is
	// retried a few times first). The screenshot then shows this reading.
	checkBegan := time.Now()
	if err := stack.CheckDashboards(ctx, os.Stdout); err != nil {
		return err
	}
	tm.since("dashboard check", checkBegan)

	if o.screenshot != "" && stack.DashboardURL() != "" {
		began := time.Now()
		if err := headless.Screenshot(ctx, stack.DashboardURL(), o.screenshot, 1400, stack.DashboardHeight()); err != nil {
			fmt.Printf("▸ dashboard screenshot not taken: %v\n", err)
		} else {
			out.screenshot = o.screenshot
		}
		tm.since("screenshot", began)
	}

	began := time.Now()
	if err := stopAll(); err != nil {
		return err
	}
	tm.since("stop", began)

	fmt.Println("▸ summary")
	fmt.Printf("  ✓ %d events sent (%d sample events through ingest, %d valid records written after a malformed one, %d late event, %d in a request sent twice under one Idempotency-Key):\n", out.sent, out.sample, out.followers, out.late, out.keyed)
	fmt.Printf("    each counted exactly once in %d windows; %d resent copies suppressed by event id\n", out.windows, out.resent)
	for _, p := range out.pipelines {
		fmt.Printf("  ✓ %s, side by side with the page views: each window's count, sum and max as sent\n", p)
	}
	fmt.Printf("  ✓ the malformed record (sequence number %s) set aside at once with its data and the field at fault; the late event applied as a correction\n", out.quarantinedSeq)
	fmt.Println("  ✓ a profile change joined by stream position; the timeline equal to the join after every change")
	fmt.Println("  ✓ a search joined with its click, one unmatched once the watermark passed the bound, the click-through rate; CEP rules added and deleted while detect ran")
	fmt.Println("  ✓ seats booked by commands on an event log (a refusal, a conflict, a retried command answered alike); views projected, and rebuilt from the log equal to the live ones")
	fmt.Printf("  ✓ %d tasks from %d messages over %d worker environments, each side effect once; a poison task dead-lettered and redriven once\n", out.tasks, out.taskMessages, out.workerEnv)
	fmt.Println("  ✓ a function of your own (examples/functions/statuscodes): each route's status mix per minute as sent, a resent request counted once, status 999 set aside naming data.status")
	if out.screenshot != "" {
		fmt.Printf("  dashboard screenshot (the results view, each pipeline's health charts, then the stack's dashboards, as the page showed them): %s\n", out.screenshot)
	}
	fmt.Printf("  %s\n", tm)
	fmt.Println("  next: `make local-up` keeps all this running for events of your own (README.md, Your first pipeline; docs/local.md); `make test` runs the tests")
	return nil
}

// demo sends the sample traffic and checks every outcome.
func demo(ctx context.Context, o *options, stack *local.Stack, out *outcome) error {
	began := time.Now()
	topo, err := findTopology(stack)
	if err != nil {
		return err
	}
	cfg := stack.Config()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	c := checker{limit: o.checkTimeout}
	w := topo.windows
	now := time.Now().UTC()
	from, to := now.Truncate(time.Minute).Add(-time.Duration(o.minutes+1)*time.Minute), now.Add(time.Hour)

	// The joins, the queue work, event sourcing and statuscodes do not
	// touch the page views the windows part counts, nor one another's
	// types, keys, tables or queues, so each runs alongside it and beside
	// the others (each mostly waits on a hop through a mapping); their
	// lines are printed after the windows part's, each part's together.
	sideChecks := []struct {
		what string
		run  func(ctx context.Context, w io.Writer) error
	}{
		{"stream–table and table–table joins", func(ctx context.Context, w io.Writer) error {
			return demoJoins(ctx, stack, topo.ingestURL, w)
		}},
		{"stream–stream join", func(ctx context.Context, w io.Writer) error {
			return demoStreamJoin(ctx, stack, topo.ingestURL, w)
		}},
		{"CEP rules", func(ctx context.Context, w io.Writer) error {
			return demoCEPRules(ctx, stack, topo.ingestURL, w)
		}},
		{"tasks, dead letter and redrive", func(ctx context.Context, w io.Writer) error {
			return demoWork(ctx, stack, w, out)
		}},
		{"event sourcing", func(ctx context.Context, w io.Writer) error {
			return demoEventSourcing(ctx, stack, w)
		}},
		{"statuscodes, a function of your own", func(ctx context.Context, w io.Writer) error { // emulator/local/handlers.go
			return local.DemoStatusCodes(ctx, stack, topo.ingestURL, w)
		}},
	}
	sideOut := make([]bytes.Buffer, len(sideChecks))
	sideErrs := make([]error, len(sideChecks))
	var sideWG sync.WaitGroup
	for i, sc := range sideChecks {
		sideWG.Add(1)
		go func() {
			defer sideWG.Done()
			sideErrs[i] = c.check(ctx, &sideOut[i], sc.what, func(ctx context.Context) error { return sc.run(ctx, &sideOut[i]) })
		}()
	}
	sideDone := make(chan struct{})
	go func() { sideWG.Wait(); close(sideDone) }()
	// sideErr waits for every side part and writes their lines, in order.
	sideErr := func() error {
		select {
		case <-sideDone:
		case <-ctx.Done():
			return ctx.Err()
		}
		for i := range sideOut {
			_, _ = os.Stdout.Write(sideOut[i].Bytes())
		}
		return errors.Join(sideErrs...)
	}

	traffic := local.Traffic{Keys: o.keys, Minutes: o.minutes, Max: o.max, Seed: o.seed, Now: now, Skew: -3 * time.Hour}
	evs, want := traffic.Generate()
	out.sample = len(evs)
	co := pipelineOf(topo.pipelines, "checkout", "data.amount")
	demoOf := map[string]string{w.Pipeline.Name: "the page views below"}
	if co != nil {
		demoOf[co.Pipeline.Name] = "checkout events by region"
	}
	var samples []*local.Windows // the pipelines a user added
	for _, p := range topo.pipelines {
		if p == w || p == co {
			continue
		}
		if ok, why := local.Checkable(p.Pipeline, demoTypes); ok {
			samples = append(samples, p)
			demoOf[p.Pipeline.Name] = "sample events made from its file, checked"
		} else {
			demoOf[p.Pipeline.Name] = "not checked here: " + why
		}
	}
	printPipelines(os.Stdout, topo.pipelines, demoOf)
	fmt.Printf("▸ sending %d events for %d keys over %d event-time minutes to ingest %s\n", len(evs), o.keys, o.minutes, topo.ingestURL)
	fmt.Printf("  (every 4th key's device clock is 3h behind: occurredAt + (receivedAt − sentAt) puts it back)\n")
	if err := c.check(ctx, os.Stdout, "sample events accepted by ingest", func(ctx context.Context) error {
		_, err := local.Send(ctx, topo.ingestURL, evs, 100, os.Stdout)
		return err
	}); err != nil {
		return err
	}
	var others []*pipelineDemo
	if co != nil {
		d, err := sendCheckouts(ctx, co, topo.ingestURL, o, now, from, to)
		if err != nil {
			return err
		}
		others = append(others, d)
	}
	for _, p := range samples {
		d, err := sendSample(ctx, p, topo.ingestURL, o, now, to)
		if err != nil {
			return err
		}
		others = append(others, d)
	}
	fmt.Printf("▸ waiting for %s to apply them (one conditional write per key and window per batch)\n", w.Function)
	if err := c.check(ctx, os.Stdout, fmt.Sprintf("%d sample events applied by %s", want.Total(), w.Function), func(ctx context.Context) error {
		_, err := w.Wait(ctx, want, from, to, nil, os.Stdout)
		return err
	}); err != nil {
		return err
	}
	for _, d := range others {
		// Before the resend below, which counts what reaches the page
		// views' function: none of their events is in flight then.
		if _, err := d.wait(ctx, 2*time.Minute, os.Stdout); err != nil {
			return err
		}
	}
	// What arrived before this is read from the archive by the rebuild
	// below, what arrived after from the stream.
	seam := time.Now()
	resend := evs[:min(25, len(evs))]
	out.resent = len(resend)
	fmt.Printf("▸ a producer that timed out resends %d of those events (the same bytes: same ids, new records on the stream)\n", len(resend))
	if err := c.check(ctx, os.Stdout, "resent copies suppressed", func(ctx context.Context) error {
		_, err := w.ResendAndCheck(ctx, stack.Stats(), topo.ingestURL, resend, want, from, to)
		return err
	}); err != nil {
		return err
	}
	fmt.Printf("  the %d copies reached %s and each was suppressed by its event id: every window unchanged\n", len(resend), w.Function)

	// A malformed record followed, in the same batch, by valid ones: the
	// functions set it aside at once, with its data and the field at fault,
	// and the valid ones are applied in the same batch.
	followers := local.FollowerEvents(now, 5)
	out.followers = len(followers)
	for _, e := range followers {
		want[local.WindowKey{Key: e.Key, Window: e.OccurredAt.Truncate(time.Minute).Format(time.RFC3339)}]++
	}
	fmt.Println("▸ a producer that bypasses ingest writes a malformed record and 5 valid ones after it, in one PutRecords")
	seq, err := local.PutPoisonAndFollowers(ctx, cfg, topo.eventsName, followers)
	if err != nil {
		return err
	}
	out.quarantinedSeq = seq
	fmt.Printf("  the functions reading the events stream set sequence number %s aside at once (it can never succeed) and apply the 5 after it: no retry, the shard moves on\n", seq)
	var recs []local.QuarantinedRecord
	if err := c.check(ctx, os.Stdout, fmt.Sprintf("sequence number %s in quarantine table %s", seq, topo.quarantine), func(ctx context.Context) (err error) {
		recs, err = local.WaitQuarantined(ctx, cfg, topo.quarantine, seq)
		return err
	}); err != nil {
		return err
	}
	for _, r := range recs {
		if r.SequenceNumber == seq {
			if r.Kind == "set-aside" {
				// The reason names the record and field itself ("record N:
				// field F: ..."): shown once, after the item's own field.
				reason := r.Reason
				if i := strings.Index(reason, "field "+r.Field+": "); i >= 0 {
					reason = reason[i+len("field "+r.Field+": "):]
				}
				// Field and reason may repeat a key the producer chose:
				// shown as make setaside shows them (cli.Shown).
				fmt.Printf("    quarantined seq %s set aside by %s: field %s: %s data=%q\n", r.SequenceNumber, r.Function, cli.Shown(r.Field), cli.Shown(truncate(reason, 60)), truncate(string(r.Data), 60))
			} else {
				fmt.Printf("    quarantined seq %s condition=%s data=%q\n", r.SequenceNumber, r.Condition, truncate(string(r.Data), 60))
			}
		}
	}

	late := local.LateEvent(traffic, now)
	out.late = 1
	want[local.WindowKey{Key: late.Key, Window: late.OccurredAt.Truncate(time.Minute).Format(time.RFC3339)}]++
	fmt.Printf("▸ a late event for %s at %s: its window is final, so under the correct policy it is applied\n", late.Key, late.OccurredAt.Format("15:04:05"))
	fmt.Println("  as a correction: the window's revision goes up and a correction with the previous value is emitted")
	if _, err := local.Send(ctx, topo.ingestURL, []stream.Envelope{late}, 1, io.Discard); err != nil {
		return err
	}
	corrected := func(vs []state.View) bool {
		for _, v := range vs {
			if v.Key == late.Key && v.Window.Start.Equal(late.OccurredAt.Truncate(time.Minute)) {
				return v.Revision >= 2
			}
		}
		return false
	}
	fmt.Printf("  waiting for the %d valid records after the malformed one and the late event to be applied\n", len(followers))
	var vs []state.View
	if err := c.check(ctx, os.Stdout, fmt.Sprintf("the %d valid records and the late event's correction applied by %s", len(followers), w.Function), func(ctx context.Context) (err error) {
		vs, err = w.Wait(ctx, want, from, to, corrected, os.Stdout)
		return err
	}); err != nil {
		return err
	}
	sideBegan := time.Now()
	err = sideErr()
	if err != nil {
		return err
	}
	fmt.Printf("    ⏱ joins, CEP, tasks, event sourcing and statuscodes (started with the windows part, each timed above from its own start): done %s after the windows part\n", roundDuration(time.Since(sideBegan)))
	// The Idempotency-Key check counts aggregate's records exactly, so it
	// runs once the joins (which send through ingest too) are done.
	keyedBefore := want.Total()
	if err := c.check(ctx, os.Stdout, "a request under an Idempotency-Key written once", func(ctx context.Context) error {
		return demoIdempotencyKey(ctx, topo.ingestURL, topo.eventsName, w, stack, want, from, to)
	}); err != nil {
		return err
	}
	out.keyed = want.Total() - keyedBefore
	if err := c.check(ctx, io.Discard, "every window as sent", func(ctx context.Context) (err error) {
		vs, err = w.Wait(ctx, want, from, to, corrected, io.Discard)
		return err
	}); err != nil {
		return err
	}
	// Fan-out, once nothing more is sent: every subscriber of the events
	// stream got every record (compare the tasks, each to one worker).
	var fan local.FanOut
	if err := c.check(ctx, io.Discard, "fan-out to every subscriber of "+topo.eventsName, func(ctx context.Context) (err error) {
		fan, err = stack.FanOut(ctx, topo.eventsName, time.Minute) // returns as soon as every subscriber has every record
		return err
	}); err != nil {
		return err
	}
	fmt.Print("▸ ")
	fan.Print(os.Stdout)
	if !fan.Complete() {
		return fmt.Errorf("fan-out: a subscriber of %s missed records: %+v", topo.eventsName, fan.Subscribers)
	}
	if topo.viewsParameter != "" {
		fmt.Printf("▸ archive: the archive function keeps %s in S3 past its retention; a rebuild reads it up to a seam and the stream after\n", topo.eventsName)
		if err := c.check(ctx, os.Stdout, "a rebuild across the archive's seam, equal to the live views", func(ctx context.Context) error {
			return local.ArchiveRebuild{Stream: topo.eventsName, Parameter: topo.viewsParameter, Pipelines: topo.pipelines, Check: w,
				From: began, Seam: seam}.Run(ctx, stack, want, from, to, os.Stdout)
		}); err != nil {
			return err
		}
	}
	out.sent = want.Total()
	out.windows = len(vs)
	fmt.Printf("▸ pipeline %s: windows in DynamoDB table %s (a window is final once the shard's watermark passes its end)\n", w.Pipeline.Name, w.Table)
	fmt.Println("  SENT is what this run sent for the window, COUNT what the table holds; REVISION 0 = open, 1 = final, 2+ = corrected")
	bad := local.PrintWindows(os.Stdout, w.Kind(), want, vs)
	var badOthers []string
	for _, d := range others {
		vs, err := d.wait(ctx, 30*time.Second, io.Discard)
		if err != nil {
			return err
		}
		if n := d.report(vs); n > 0 {
			badOthers = append(badOthers, fmt.Sprintf("pipeline %s: %d windows differ from what was sent", d.w.Pipeline.Name, n))
		}
		out.pipelines = append(out.pipelines, fmt.Sprintf("%d %s in pipeline %s", d.sent, d.what, d.w.Pipeline.Name))
	}
	fmt.Println("▸ event source mappings (RECORDS counts every delivery, retried batches included; ITEM FAILURES are records a")
	fmt.Println("  function reported failed; TO ON-FAILURE are records given up on and described on the failures queue)")
	stack.Stats().Print(os.Stdout)
	var outs []string
	if err := c.check(ctx, io.Discard, "output stream "+w.Output+" read", func(ctx context.Context) (err error) {
		outs, err = w.ReadOutputs(ctx)
		return err
	}); err != nil {
		return err
	}
	if len(outs) > 0 {
		printOutputs(w.Output, outs)
	}
	// The section lists aggregate's, worker's and enrich's series: read
	// again (an endpoint may show data points late) until it holds some, or
	// fail at the check's deadline saying what it holds.
	var shown, all []cloudwatchlocal.MetricSummary
	if err := c.check(ctx, os.Stdout, "CloudWatch metrics read back", func(ctx context.Context) error {
		if err := stack.FlushLogs(ctx); err != nil {
			return err
		}
		for {
			ms, err := cloudwatchlocal.MetricsBetween(ctx, cfg, "Tributary", began, time.Now())
			if err != nil {
				return err
			}
			all = ms
			var missing error
			if shown, missing = runMetrics(ms); missing == nil {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (%w)", missing, ctx.Err())
			case <-time.After(time.Second):
			}
		}
	}); err != nil {
		return fmt.Errorf("the CloudWatch metrics of this run: %w", err)
	}
	fmt.Println("▸ CloudWatch metrics of this run (namespace Tributary, data points stamped since the run began):")
	fmt.Println("  sum = total over the run, count = data points (one per invocation that published the metric); aggregate's by pipeline")
	for _, m := range shown {
		note := ""
		if own := stack.OwnMetric(m); own != m.Sum {
			note = fmt.Sprintf("   (this run put %g: another run on this endpoint published the rest)", own)
		}
		fmt.Printf("    %s%s\n", m, note)
	}
	fmt.Printf("  %s\n", seriesCount(all))
	if bad > 0 {
		return fmt.Errorf("pipeline %s: %d windows differ from what was sent", w.Pipeline.Name, bad)
	}
	if len(badOthers) > 0 {
		return errors.New(strings.Join(badOthers, "; "))
	}
	return nil
}

// runMetrics picks the series the metrics section shows from ms: those of
// aggregate (a series per pipeline), worker and enrich, which every run
// publishes. It returns an error saying so when there are none.
func runMetrics(ms []cloudwatchlocal.MetricSummary) ([]cloudwatchlocal.MetricSummary, error) {
	var shown []cloudwatchlocal.MetricSummary
	functions := map[string]bool{}
	for _, m := range ms {
		f := m.Dimensions["Function"]
		functions[f] = true
		if f == "aggregate" || f == "worker" || f == "enrich" {
			shown = append(shown, m)
		}
	}
	if len(shown) == 0 {
		names := make([]string, 0, len(functions))
		for f := range functions {
			names = append(names, fmt.Sprintf("%q", f))
		}
		sort.Strings(names)
		return nil, fmt.Errorf("the endpoint holds %d series with data points in namespace Tributary since the run began (functions: %s), none of aggregate, worker or enrich",
			len(ms), strings.Join(names, ", "))
	}
	return shown, nil
}

// seriesCount says how many metric series (metric and dimension pairs)
// the run published in all, every function's, by function: what
// CloudWatch bills as custom metrics.
func seriesCount(ms []cloudwatchlocal.MetricSummary) string {
	by := map[string]int{}
	for _, m := range ms {
		by[m.Dimensions["Function"]]++
	}
	fns := make([]string, 0, len(by))
	for f := range by {
		fns = append(fns, f)
	}
	sort.Slice(fns, func(i, j int) bool { return by[fns[i]] > by[fns[j]] || by[fns[i]] == by[fns[j]] && fns[i] < fns[j] })
	parts := make([]string, len(fns))
	for i, f := range fns {
		parts[i] = fmt.Sprintf("%s %d", f, by[f])
	}
	return fmt.Sprintf("%d metric series in all (%s): CloudWatch bills each as a custom metric (docs/cost.md)", len(ms), strings.Join(parts, ", "))
}

// demoIdempotencyKey sends one request twice under the same
// Idempotency-Key, as a client that timed out waiting for the answer does:
// the second answer is the first, byte for byte, and nothing is written
// again. The windows its events count in are those of their event times
// as the stream carries them: occurredAt moved by receivedAt − sentAt
// (ingest stamps receivedAt), so a request sent as a minute ends may put
// them in the next.
func demoIdempotencyKey(ctx context.Context, url, eventsStream string, w *local.Windows, stack *local.Stack, want local.Counts, from, to time.Time) error {
	evs := local.FollowerEvents(time.Now().UTC(), 3)
	for i := range evs {
		evs[i].ID, evs[i].Key = fmt.Sprintf("keyed-%d", i), "user-01"
	}
	const key = "make-local-retry-1"
	fmt.Printf("▸ a request of %d events sent twice with Idempotency-Key %s (the client timed out and retried)\n", len(evs), key)
	s1, b1, err := local.Post(ctx, url, evs, key)
	if err != nil {
		return err
	}
	s2, b2, err := local.Post(ctx, url, evs, key)
	if err != nil {
		return err
	}
	if s1 != http.StatusAccepted {
		return fmt.Errorf("ingest answered the request under Idempotency-Key %s with %d %s, want %d", key, s1, truncate(string(b1), 200), http.StatusAccepted)
	}
	if s1 != s2 || string(b1) != string(b2) {
		return fmt.Errorf("the retried request got %d %s, the first %d %s: not the same answer", s2, b2, s1, b1)
	}
	fmt.Printf("  both answers: %d %s (the second replayed from the request's record)\n", s1, truncate(string(b1), 80))
	// Ingest answers once the events are on the stream: count the records
	// carrying each event's id there (what a mapping delivered counts
	// retried batches and other traffic too), and take each event's window
	// from the time ingest gave it.
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	written, err := local.WrittenEvents(ctx, stack.Config(), eventsStream, ids)
	if err != nil {
		return err
	}
	for _, e := range evs {
		if n := len(written[e.ID]); n != 1 {
			return fmt.Errorf("stream %s carries %d records of event %s for the two requests, want 1: the retry was written again, or the first not at all", eventsStream, n, e.ID)
		}
		want[local.WindowKey{Key: e.Key, Window: written[e.ID][0].Truncate(time.Minute).Format(time.RFC3339)}]++
	}
	if _, err := w.Wait(ctx, want, from, to, nil, io.Discard); err != nil {
		return err
	}
	fmt.Printf("  the stream got %d records, once: each event counted once\n", len(evs))
	return nil
}

func printOutputs(stream string, outs []string) {
	counts := map[string]int{}
	var correction, session string
	for _, o := range outs {
		var out struct{ Type, Window string }
		if json.Unmarshal([]byte(o), &out) != nil {
			continue
		}
		kind, _, _ := strings.Cut(out.Window, ":")
		counts[out.Type+" "+kind]++
		if out.Type == "correction" && correction == "" {
			correction = o
		}
		if kind == "session" && out.Type == "final" && session == "" {
			session = o
		}
	}
	fmt.Printf("▸ output stream %s: %d records (final results, corrections and retractions, by window kind)\n", stream, len(outs))
	for _, k := range sortedKeys(counts) {
		fmt.Printf("    %-22s %d\n", k, counts[k])
	}
	for _, o := range []string{session, correction} {
		if o != "" {
			fmt.Printf("    %s\n", truncate(o, 260))
		}
	}
}

// demoJoins shows the two joins on live tables: a profile change flowing
// through cdc into the enriched events after it (stream–table), and a
// timeline following tweets, follows and unfollows (table–table).
func demoJoins(ctx context.Context, stack *local.Stack, ingestURL string, w io.Writer) error {
	enr, err := stack.FindEnrichment()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "▸ stream–table join: profiles table %s ─cdc─► events ─enrich─► %s\n", enr.Profiles, enr.Enriched)
	fmt.Fprintln(w, "  (a change's changelog record and the activity after it share the key's shard, so the join is by stream position)")
	if err := enr.Demo(ctx, ingestURL, w); err != nil {
		return err
	}
	tl, err := stack.FindTimelines()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "▸ table–table join: tweets ⋈ follows ─timeline─► %s, after each change\n", tl.View)
	return tl.Demo(ctx, w)
}

// demoStreamJoin shows the stream–stream join: a search joined with its
// click, and one with none emitted as unmatched once the watermark passes
// the bound.
func demoStreamJoin(ctx context.Context, stack *local.Stack, ingestURL string, w io.Writer) error {
	j, err := stack.FindJoinsAndRules()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "▸ stream–stream join %s ⋈ %s by session within %s (%s join, pipelines/%s.json) ─join─► %s\n",
		j.Join.Left, j.Join.Right, j.Join.Within, j.Join.Kind, j.Join.Name, j.JoinsStream)
	return j.DemoJoin(ctx, ingestURL, w)
}

// demoCEPRules shows CEP rules added and deleted through the rules
// function's URL while detect runs (their own keys and event types: it
// runs beside the join).
func demoCEPRules(ctx context.Context, stack *local.Stack, ingestURL string, w io.Writer) error {
	j, err := stack.FindJoinsAndRules()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "▸ CEP: rules in DynamoDB table %s, added and removed at runtime ─detect─► %s\n", j.RulesTable, j.MatchesStream)
	return j.DemoRules(ctx, ingestURL, w)
}

// demoEventSourcing shows the event-sourced seat reservations: commands
// accepted and refused, a conflict, a retry, read-your-writes, the
// projections catching up, a snapshot, and a rebuild of the views from the
// log swapped in and equal to the live ones.
func demoEventSourcing(ctx context.Context, stack *local.Stack, w io.Writer) error {
	e, err := stack.FindEventSourcing()
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "▸ event sourcing: commands ─► event store ─table stream─► publish ─► Kinesis ─► project ─► views")
	return e.Demo(ctx, w)
}

// demoWork shows load balancing with idempotent side effects — tasks on the
// Tasks queue go each to one worker environment, the same tasks sent again
// are not run again; then a task that fails permanently reaches the DLQ with
// its reason, the cause is fixed, and a redrive runs it once.
func demoWork(ctx context.Context, stack *local.Stack, w io.Writer, out *outcome) error {
	work, err := stack.FindWork()
	if err != nil {
		return err
	}
	cfg := stack.Config()
	fmt.Fprintln(w, "▸ 30 tasks on the Tasks queue: load balancing, each message to one worker invocation")
	ids, err := work.SendTasks(ctx, cfg, 1, 30)
	if err != nil {
		return err
	}
	if _, err := work.WaitExecutions(ctx, cfg, ids, w); err != nil {
		return err
	}
	// A task's side effect is written before its idempotency record is
	// completed and its message deleted: a copy sent in between finds the
	// record in progress and comes back only after the queue's visibility
	// timeout (6 minutes). The producer here retries once the first run is
	// over, as the line below says.
	if err := work.WaitDrained(ctx, cfg); err != nil {
		return err
	}
	fmt.Fprintln(w, "▸ a producer retries: tasks 1–10 sent again; the idempotency record returns their stored result")
	if _, err := work.SendTasks(ctx, cfg, 1, 10); err != nil {
		return err
	}
	if err := work.WaitDrained(ctx, cfg); err != nil {
		return err
	}
	runs, err := work.WaitExecutions(ctx, cfg, ids, io.Discard)
	if err != nil {
		return err
	}
	twice := 0
	for _, id := range ids {
		if runs[id] != 1 {
			twice++
			fmt.Fprintf(w, "    %s ran %d times\n", id, runs[id])
		}
	}
	if twice > 0 {
		return fmt.Errorf("%d tasks' side effects ran more than once", twice)
	}
	out.tasks, out.taskMessages = len(ids), 40
	fmt.Fprintf(w, "    40 messages, 30 tasks, each task's side effect ran exactly once (table %s)\n", work.Results)
	envs, err := work.Environments(ctx, cfg, ids)
	if err != nil {
		return err
	}
	out.workerEnv = len(envs)
	fmt.Fprintf(w, "  load balancing: %s; each side effect once\n", describeEnvironments(len(ids), envs))
	return demoDeadLetter(ctx, stack, work, w)
}

// describeEnvironments is "30 tasks over 3 worker environments: 1a2b3c 11 ·
// 4d5e6f 10 · 7a8b9c 9", each environment named by the end of its log stream.
func describeEnvironments(tasks int, envs map[string]int) string {
	names := make([]string, 0, len(envs))
	for e := range envs {
		names = append(names, e)
	}
	sort.Slice(names, func(i, j int) bool {
		if envs[names[i]] != envs[names[j]] {
			return envs[names[i]] > envs[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, e := range names {
		short := e
		if _, id, ok := strings.Cut(e, "]"); ok && len(id) >= 6 {
			short = id[:6]
		}
		if e == "" {
			short = "(unrecorded)"
		}
		parts[i] = fmt.Sprintf("%s %d", short, envs[e])
	}
	return fmt.Sprintf("%d tasks over %d worker environments (by log stream): %s", tasks, len(envs), strings.Join(parts, " · "))
}

// demoDeadLetter delivers a task that needs a task never sent on its last
// receive: the worker dead-letters it with the reason; the DLQ depth metric
// shows it; the operator runs the missing task and redrives; the task runs
// once.
func demoDeadLetter(ctx context.Context, stack *local.Stack, work *local.Work, w io.Writer) error {
	cfg := stack.Config()
	since := time.Now().Add(-time.Second)
	const task, missing = 31, 99
	fmt.Fprintf(w, "▸ %s needs the result of %s (data.after), which nobody sent: SQS does not order the queue, so it waits through its receives, 6 minutes apart\n", local.TaskID(task), local.TaskID(missing))
	fmt.Fprintln(w, "  (shown here on its last receive, the 5th, handed to the worker directly rather than 24 minutes later: four visibility timeouts)")
	if _, err := stack.DeliverOnLastReceive(ctx, work, task, missing); err != nil {
		return err
	}
	if err := work.WaitDeadLettered(ctx, cfg, 1); err != nil {
		return err
	}
	fmt.Fprintf(w, "  still missing on its last receive, the worker sent it to the DLQ %s with the reason (redrive -dry-run):\n", work.DLQName)
	var listing strings.Builder
	if _, err := work.ShowDeadLetters(ctx, cfg, &listing); err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimRight(listing.String(), "\n"), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "reason:") { // the reason whole: its remedy is at its end
			line = truncate(line, 220)
		}
		fmt.Fprintf(w, "    %s\n", line)
	}
	if err := printDLQDepth(ctx, stack, work, since, 1, w); err != nil {
		return err
	}
	fmt.Fprintf(w, "▸ the operator fixes the cause: %s is sent and runs\n", local.TaskID(missing))
	dep, err := work.SendTask(ctx, cfg, missing, 0)
	if err != nil {
		return err
	}
	if _, err := work.WaitExecutions(ctx, cfg, []string{dep}, io.Discard); err != nil {
		return err
	}
	res, err := work.Redrive(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "▸ redrive %s → Tasks: %s (the dead-letter attributes are dropped on the way back)\n", work.DLQName, res)
	if res.Moved != 1 {
		return fmt.Errorf("redrive moved %d messages, want 1", res.Moved)
	}
	runs, err := work.WaitExecutions(ctx, cfg, []string{local.TaskID(task)}, io.Discard)
	if err != nil {
		return err
	}
	if err := work.WaitDrained(ctx, cfg); err != nil {
		return err
	}
	if n := runs[local.TaskID(task)]; n != 1 {
		return fmt.Errorf("%s ran %d times after the redrive, want 1", local.TaskID(task), n)
	}
	fmt.Fprintf(w, "    %s ran exactly once\n", local.TaskID(task))
	// The metric has one-second periods and reports each period's maximum:
	// read it from the first whole second after the drain, so that a data
	// point of the depth before the redrive in the same second cannot count.
	drained := time.Now().Truncate(time.Second).Add(time.Second)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(drained)):
	}
	return printDLQDepth(ctx, stack, work, drained, 0, w)
}

// printDLQDepth publishes the queues' AWS/SQS metrics (as SQS does every
// minute on AWS) and prints the DLQ's depth read back from CloudWatch — what
// the DLQ alarm watches.
func printDLQDepth(ctx context.Context, stack *local.Stack, work *local.Work, since time.Time, want float64, w io.Writer) error {
	if err := stack.PublishQueueMetrics(ctx); err != nil {
		return err
	}
	v, _, ok, err := cloudwatchlocal.LatestQueueMetric(ctx, stack.Config(), cloudwatchlocal.MetricMessagesVisible, work.DLQName, since)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no %s %s data for %s in CloudWatch", cloudwatchlocal.SQSNamespace, cloudwatchlocal.MetricMessagesVisible, work.DLQName)
	}
	state := "OK"
	if v >= 1 {
		state = "ALARM"
	}
	fmt.Fprintf(w, "  DLQ depth (CloudWatch %s %s{QueueName=%s}): %g → its alarm would be %s\n",
		cloudwatchlocal.SQSNamespace, cloudwatchlocal.MetricMessagesVisible, work.DLQName, v, state)
	if v != want {
		return fmt.Errorf("DLQ depth metric %g, want %g", v, want)
	}
	return nil
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
