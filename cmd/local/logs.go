package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"

	"github.com/tributary-dev/tributary/emulator/cloudwatchlocal"
	"github.com/tributary-dev/tributary/emulator/standin"
)

// logs prints every function log group and the Tributary metrics from the
// stand-in a `make local-up` is running against: per log group, per log
// stream (one per execution environment), one line per invocation (REPORT:
// request id, duration, peak memory) with the function's own lines, and EMF
// documents as "metrics: name=value …". -raw prints the events as stored.
func logs(ctx context.Context, o *options) error {
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
	if len(groups) == 0 {
		fmt.Println("no /aws/lambda/* log groups yet: send some events first")
	}
	for _, g := range groups {
		if o.raw {
			fmt.Printf("── %s\n", g)
			if err := cloudwatchlocal.Tail(ctx, cfg, g, since, os.Stdout); err != nil && !errors.Is(err, cloudwatchlocal.ErrNoLogGroup) {
				return err
			}
			continue
		}
		events, err := cloudwatchlocal.ReadEvents(ctx, cfg, g, since)
		if errors.Is(err, cloudwatchlocal.ErrNoLogGroup) {
			continue
		}
		if err != nil {
			return err
		}
		printGroup(g, events)
	}
	metrics, err := cloudwatchlocal.Metrics(ctx, cfg, "Tributary", since)
	if err != nil {
		return err
	}
	fmt.Printf("── metrics (namespace Tributary, since %s; sum over the span, count = data points)\n", since.Format("15:04:05"))
	sort.Slice(metrics, func(i, j int) bool { return metrics[i].String() < metrics[j].String() })
	for _, m := range metrics {
		fmt.Println("  " + m.String())
	}
	return nil
}

var reportLine = regexp.MustCompile(`^REPORT RequestId: (\S+)\s+Duration: ([0-9.]+ ms).*?(Max Memory Used: [^\t]+)`)

// printGroup prints one log group compactly, by log stream.
func printGroup(group string, events []cloudwatchlocal.LogEvent) {
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
	fmt.Printf("── %s: %d invocations in %d execution environments (log streams)\n", group, invocations, len(streams))
	for _, s := range streams {
		fmt.Printf("   %s\n", s)
		for _, e := range by[s] {
			line, keep := compact(e.Message)
			if keep {
				fmt.Printf("     %s %s\n", e.Time.Format("15:04:05.000"), line)
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
