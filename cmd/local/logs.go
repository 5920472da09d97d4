package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"

	"github.com/tributary-dev/tributary/emulator/cloudwatchlocal"
	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/emulator/template"
	"github.com/tributary-dev/tributary/internal/localdeploy"
	"github.com/tributary-dev/tributary/pkg/metrics"
)

// logs prints the log groups of the stack's functions and the Tributary
// metrics their EMF documents give, from the stand-in a `make local-up` is
// running against: per log group, per log stream (one per execution
// environment), one line per invocation (REPORT: request id, duration, peak
// memory) with the function's own lines, and EMF documents as "metrics:
// name=value …". -raw prints the events as stored.
func logs(ctx context.Context, o *options) error {
	return logsTo(ctx, o, os.Stdout, os.Stderr)
}

// Bounds of make logs' reading.
const (
	// logReaders is how many log groups are read at once: one
	// FilterLogEvents page holds up to 10,000 events, so a group is one
	// or two requests; reading a few at once keeps the stand-in busy
	// while the groups before are printed.
	logReaders = 4
	// logsProgressAfter is how long make logs works silently: past it,
	// stderr says how far it got, every logsProgressAfter.
	logsProgressAfter = 2 * time.Second
	// maxLogsSince is the longest -since (SINCE=) taken: the stack's log
	// groups keep their events 7 days (RetentionInDays).
	maxLogsSince = 7 * 24 * time.Hour
)

// groupRead is one log group as read.
type groupRead struct {
	events []cloudwatchlocal.LogEvent
	err    error
}

// logsTo is logs writing to w, and its progress to progress. The log
// groups are those of the functions -template deploys as -stack (a second
// make local-up beside the first deploys Tributary-<time> onto the same
// stand-in, under the same function names); without a template it can
// read, every function's group. They are read a few at once (each in as
// few FilterLogEvents pages as the API allows) and printed in order as
// each is read; the metrics are summed from the EMF documents read.
func logsTo(ctx context.Context, o *options, w, progress io.Writer) error {
	endpoint := "http://" + o.addr
	if !standin.Answers(ctx, endpoint) {
		return fmt.Errorf("nothing answers at %s: start the topology with `make local-up` first (or pass -addr)", endpoint)
	}
	cfg, err := standin.Config(ctx, endpoint)
	if err != nil {
		return err
	}
	since := time.Now().Add(-o.since)
	groups, err := lambdaLogGroups(ctx, cfg)
	if err != nil {
		return err
	}
	if own, err := stackLogGroups(o.template, o.stack); err != nil {
		fmt.Fprintf(w, "! every stack's log groups on %s: %v\n", endpoint, err)
	} else {
		all := groups
		groups = slices.DeleteFunc(slices.Clone(groups), func(g string) bool { return !own[g] })
		if others := stacksWithLogs(o.template, all); len(groups) == 0 && len(others) > 0 {
			return usageError{fmt.Sprintf("-stack %s (make logs STACK=%[1]s): no function of that stack has logs on %s; the stacks that have: %s (a make local-up prints its STACK=)", o.stack, endpoint, strings.Join(others, ", "))}
		}
	}
	if len(groups) == 0 {
		fmt.Fprintf(w, "no log groups of stack %s yet: send some events first\n", o.stack)
	}

	// (The readers end before logsTo returns: cancel runs first.)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reads := make([]chan groupRead, len(groups))
	for i := range reads {
		reads[i] = make(chan groupRead, 1)
	}
	next := make(chan int)
	for range min(logReaders, len(groups)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				events, err := cloudwatchlocal.ReadEvents(ctx, cfg, groups[i], since)
				reads[i] <- groupRead{events, err}
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range groups {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()

	started := time.Now()
	tick := time.NewTicker(o.progressEvery())
	defer tick.Stop()
	sums := cloudwatchlocal.NewEMFSums(metrics.Namespace)
	events := 0
	for i, g := range groups {
		var r groupRead
	wait:
		for {
			select {
			case r = <-reads[i]:
				break wait
			case <-tick.C:
				fmt.Fprintf(progress, "logs: %d of %d log groups read (%d events), reading %s (%s so far)\n", i, len(groups), events, g, time.Since(started).Round(time.Second))
			}
		}
		if errors.Is(r.err, cloudwatchlocal.ErrNoLogGroup) {
			continue
		}
		if r.err != nil {
			return r.err
		}
		events += len(r.events)
		sums.Add(r.events)
		if o.raw {
			fmt.Fprintf(w, "── %s\n", g)
			if err := cloudwatchlocal.WriteEvents(w, r.events); err != nil {
				return err
			}
			continue
		}
		printGroup(w, g, r.events)
	}
	// The metrics are those the EMF documents above give, as CloudWatch
	// extracts them: this stack's functions' only.
	fmt.Fprintf(w, "── metrics (namespace %s, from the EMF documents of the log groups above since %s; sum over the span, count = values)\n", metrics.Namespace, since.Format("15:04:05"))
	for _, m := range sums.Summaries() {
		fmt.Fprintln(w, "  "+m.String())
	}
	return nil
}

// stackLogGroups are the log groups of the functions the template at path
// deploys as stack.
func stackLogGroups(path, stack string) (map[string]bool, error) {
	d, err := localdeploy.Plan(path, stack)
	if err != nil {
		return nil, err
	}
	fns, err := d.Functions()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	own := make(map[string]bool, len(fns))
	for _, f := range fns {
		own[f.LogGroup] = true
	}
	return own, nil
}

// stacksWithLogs are the stacks, sorted, whose functions' log groups as the
// template at path names them are among groups (localdeploy.StacksAmong).
func stacksWithLogs(path string, groups []string) []string {
	return localdeploy.StacksAmong(path, groups, func(d *template.Deployment) ([]string, error) {
		fns, err := d.Functions()
		names := make([]string, len(fns))
		for i, f := range fns {
			names[i] = f.LogGroup
		}
		return names, err
	})
}

var reportLine = regexp.MustCompile(`^REPORT RequestId: (\S+)\s+Duration: ([0-9.]+ ms).*?(Max Memory Used: [^\t]+)`)

// printGroup prints one log group compactly, by log stream.
func printGroup(w io.Writer, group string, events []cloudwatchlocal.LogEvent) {
	by := map[string][]cloudwatchlocal.LogEvent{}
	var streams []string
	invocations := 0
	for _, e := range events {
		if _, ok := by[e.Stream]; !ok {
			streams = append(streams, e.Stream)
		}
		by[e.Stream] = append(by[e.Stream], e)
		if strings.HasPrefix(e.Message, "REPORT RequestId: ") {
			invocations++
		}
	}
	fmt.Fprintf(w, "── %s: %d invocations in %d execution environments (log streams)\n", group, invocations, len(streams))
	for _, s := range streams {
		fmt.Fprintf(w, "   %s\n", s)
		for _, e := range by[s] {
			line, keep := compact(e.Message)
			if keep {
				fmt.Fprintf(w, "     %s %s\n", e.Time.Format("15:04:05.000"), line)
			}
		}
	}
}

// compact shortens one log event: START and END lines go (REPORT says the
// same), REPORT keeps request id, duration and peak memory, an EMF
// document becomes its metric values.
func compact(msg string) (string, bool) {
	switch {
	case strings.HasPrefix(msg, "START RequestId: "), strings.HasPrefix(msg, "END RequestId: "):
		return "", false
	case strings.HasPrefix(msg, "REPORT RequestId: "):
		if m := reportLine.FindStringSubmatch(msg); m != nil {
			return fmt.Sprintf("REPORT %s %s, %s", m[1], m[2], m[3]), true
		}
		return msg, true
	case strings.HasPrefix(msg, "{") && strings.Contains(msg, `"_aws"`):
		var doc map[string]any
		if json.Unmarshal([]byte(msg), &doc) != nil {
			return msg, true
		}
		meta, _ := doc["_aws"].(map[string]any)
		dirs, _ := meta["CloudWatchMetrics"].([]any)
		var parts []string
		for _, d := range dirs {
			dm, _ := d.(map[string]any)
			defs, _ := dm["Metrics"].([]any)
			for _, def := range defs {
				name, _ := def.(map[string]any)["Name"].(string)
				switch v := doc[name].(type) {
				case float64:
					if v != 0 {
						parts = append(parts, fmt.Sprintf("%s=%g", name, v))
					}
				case []any:
					parts = append(parts, fmt.Sprintf("%s=%d values", name, len(v)))
				}
			}
		}
		if len(parts) == 0 {
			return "metrics: all zero", true
		}
		return "metrics: " + strings.Join(parts, " "), true
	}
	return msg, true
}

func lambdaLogGroups(ctx context.Context, cfg aws.Config) ([]string, error) {
	client := cloudwatchlogs.NewFromConfig(cfg)
	var groups []string
	p := cloudwatchlogs.NewDescribeLogGroupsPaginator(client, &cloudwatchlogs.DescribeLogGroupsInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing log groups: %w", err)
		}
		for _, g := range page.LogGroups {
			name := aws.ToString(g.LogGroupName)
			if strings.HasPrefix(name, "/aws/lambda/") || strings.Contains(name, "Tributary") {
				groups = append(groups, name)
			}
		}
	}
	sort.Strings(groups)
	return groups, nil
}
