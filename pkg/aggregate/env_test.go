package aggregate_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/tributary-dev/tributary/pkg/aggregate"
)

// Configuration errors name the variable; a fixed table needs no AWS call.
// (Resolving the parameter and following a swap is tested against the
// stand-in in package replay.)
func TestViewsTableFromEnv(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     map[string]string
		table   string
		wantErr string
	}{
		{"fixed table", map[string]string{aggregate.EnvViewsTable: "views"}, "views", ""},
		{"neither", map[string]string{}, "", aggregate.EnvViewsTable},
		{"empty table", map[string]string{aggregate.EnvViewsTable: ""}, "", aggregate.EnvViewsTable},
		{"a space after the table", map[string]string{aggregate.EnvViewsTable: "views "}, "", aggregate.EnvViewsTable + `: "views " is not a DynamoDB table name`},
		{"refresh not a number", map[string]string{aggregate.EnvViewsParameter: "/p", aggregate.EnvViewsRefresh: "soon"}, "", aggregate.EnvViewsRefresh},
		{"refresh zero", map[string]string{aggregate.EnvViewsParameter: "/p", aggregate.EnvViewsRefresh: "0"}, "", aggregate.EnvViewsRefresh},
		// A warm instance would never see a replay's swap (cmd/replay
		// refuses the same values); 10^10 s overflowed to the default.
		{"refresh over an hour", map[string]string{aggregate.EnvViewsParameter: "/p", aggregate.EnvViewsRefresh: "3601"}, "", aggregate.EnvViewsRefresh + `: "3601" is not a whole number of seconds from 1 to 3600`},
		{"refresh 10^9", map[string]string{aggregate.EnvViewsParameter: "/p", aggregate.EnvViewsRefresh: "1000000000"}, "", aggregate.EnvViewsRefresh},
		{"refresh overflowing", map[string]string{aggregate.EnvViewsParameter: "/p", aggregate.EnvViewsRefresh: "10000000000"}, "", aggregate.EnvViewsRefresh},
	} {
		t.Run(c.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
			vt, err := aggregate.ViewsTableFromEnv(context.Background(), aws.Config{}, lookup, nil)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one naming %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := vt.Current(context.Background()); got != c.table {
				t.Errorf("table %q, want %q", got, c.table)
			}
		})
	}
}

// The ticker's EVENTS_STREAM_NAME is optional; a mistyped one stops the
// function at cold start naming it, rather than fail every tick.
func TestFromEnvChecksTheEventsStream(t *testing.T) {
	const cfg = `{"name":"p","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"]}`
	for _, c := range []struct{ events, wantErr string }{
		{"", ""},
		{"events", ""},
		{"events ", aggregate.EnvEventsStream + `: "events " is not a Kinesis stream name`},
	} {
		env := map[string]string{"PIPELINE_CONFIG": cfg, aggregate.EnvViewsTable: "views", aggregate.EnvEventsStream: c.events}
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		_, err := aggregate.FromEnv(aws.Config{Region: "us-east-1"}, lookup, "ticker", io.Discard, io.Discard)
		if (c.wantErr == "" && err != nil) || (c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr))) {
			t.Errorf("EVENTS_STREAM_NAME %q: %v; want %q", c.events, err, c.wantErr)
		}
	}
}
