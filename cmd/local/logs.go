package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"

	"github.com/tributary-dev/tributary/pkg/cloudwatchlocal"
	"github.com/tributary-dev/tributary/pkg/standin"
)

// logs prints every function log group and the Tributary metrics from the
// stand-in a `make local-up` is running against.
func logs(ctx context.Context, o *options) error {
	endpoint := "http://" + o.addr
	if !standin.Answers(ctx, endpoint) {
		return fmt.Errorf("nothing answers at %s: start the topology with `make local-up` first", endpoint)
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
		fmt.Printf("── %s\n", g)
		if err := cloudwatchlocal.Tail(ctx, cfg, g, since, os.Stdout); err != nil && !errors.Is(err, cloudwatchlocal.ErrNoLogGroup) {
			return err
		}
	}
	metrics, err := cloudwatchlocal.Metrics(ctx, cfg, "Tributary", since)
	if err != nil {
		return err
	}
	fmt.Println("── metrics (namespace Tributary)")
	sort.Slice(metrics, func(i, j int) bool { return metrics[i].String() < metrics[j].String() })
	for _, m := range metrics {
		fmt.Println("  " + m.String())
	}
	return nil
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
