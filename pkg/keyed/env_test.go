package keyed

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// EVENTS_STREAM_NAME gives the tick the stream to read before it takes a
// shard for idle; without it the tick goes by the clock, as before; a
// mistyped name stops the function at init, naming the variable, rather
// than failing every tick.
func TestBacklogFromEnv(t *testing.T) {
	client := kinesis.NewFromConfig(aws.Config{Region: "us-east-1"})
	for _, c := range []struct {
		value, wantErr string
		want           bool
	}{
		{"", "", false},
		{"events", "", true},
		{"arn:aws:kinesis:us-east-1:123456789012:stream/events", `EVENTS_STREAM_NAME: "arn:aws:kinesis:us-east-1:123456789012:stream/events" is not a Kinesis stream name`, false},
	} {
		lookup := func(k string) (string, bool) {
			if k == EnvEventsStream && c.value != "" {
				return c.value, true
			}
			return "", false
		}
		opt, err := BacklogFromEnv(lookup, client)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: %v; want %q", c.value, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", c.value, err)
		}
		var o options
		opt(&o)
		if (o.backlog != nil) != c.want {
			t.Errorf("%q: backlog %v; want one: %v", c.value, o.backlog, c.want)
		}
	}
}
