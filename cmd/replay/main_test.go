package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/tributary-dev/tributary/pkg/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/state"
)

func TestParseFrom(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Time
		err  bool
	}{
		{"2026-11-29T10:00:00Z", time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), false},
		{"90m", now.Add(-90 * time.Minute), false},
		{"-1h", time.Time{}, true},
		{"yesterday", time.Time{}, true},
	} {
		got, err := parseFrom(c.in, now)
		if (err != nil) != c.err || !got.Equal(c.want) {
			t.Errorf("parseFrom(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

// From a terminal: current names the table, delete-version refuses it and
// deletes an old one, a rebuild dry run prints the plan and changes nothing,
// and a bad invocation prints the usage.
func TestCommands(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint())
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	for _, tb := range []string{"views", "views-old"} {
		if err := state.CreateTable(ctx, db, tb); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/t/views"), Value: aws.String("views"), Type: ssmtypes.ParameterTypeString}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PIPELINE_CONFIG": `{"name":"p","key":"key","windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count"]}`}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cmd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(ctx, args, lookup, time.Now(), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, _ := cmd("current", "-parameter", "/t/views"); code != 0 || !strings.HasPrefix(out, "views ") {
		t.Errorf("current: %d %q", code, out)
	}
	if code, _, errs := cmd("delete-version", "-parameter", "/t/views", "-table", "views"); code != 1 || !strings.Contains(errs, "refusing to delete the current views table") {
		t.Errorf("delete-version of the current table: %d %q", code, errs)
	}
	if code, _, errs := cmd("delete-version", "-parameter", "/t/views", "-table", "views-old"); code != 0 || !strings.Contains(errs, "deleted table views-old") {
		t.Errorf("delete-version of an old table: %d %q", code, errs)
	}
	if _, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("views-old")}); err == nil {
		t.Error("views-old still exists")
	}
	// The dry run needs the stream to exist to count its shards.
	if code, _, errs := cmd("rebuild", "-parameter", "/t/views", "-stream", "missing", "-from", "1h", "-dry-run"); code != 1 || !strings.Contains(errs, "missing") {
		t.Errorf("rebuild of a missing stream: %d %q", code, errs)
	}
	if code, _, errs := cmd("rebuild", "-parameter", "/t/views"); code != 2 || !strings.Contains(errs, "usage:") {
		t.Errorf("rebuild without -stream/-from: %d %q", code, errs)
	}
	if code, _, errs := cmd("rebuild", "-parameter", "/t/views", "-stream", "s", "-from", "soon"); code != 2 || !strings.Contains(errs, "-from") {
		t.Errorf("rebuild -from soon: %d %q", code, errs)
	}
}
