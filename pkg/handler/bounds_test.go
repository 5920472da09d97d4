package handler_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// TestOptionsPastThePipelinesBoundsAreRefused builds handlers with each
// duration and number an option takes just past the bound a pipeline
// file has for it, and at it. Past it, construction fails naming the
// option (or the Config field): an out-of-orderness of the largest
// duration was taken, and two ticks after one record its window was put
// out as final and the next record dropped as late; a table name the
// service cannot take failed every batch instead of the cold start. At
// the bound the handler is built.
func TestOptionsPastThePipelinesBoundsAreRefused(t *testing.T) {
	const huge = time.Duration(math.MaxInt64)
	year, day := pipeline.MaxWindowDuration, pipeline.MaxOutOfOrderness
	correct := func(d time.Duration) []handler.Option {
		return []handler.Option{handler.WithLatePolicy(handler.Correct), handler.WithAllowedLateness(d)}
	}
	cfg := handler.Config{Name: "bounds", StateTable: "state", OutputStream: "out", QuarantineTable: "quarantine", DynamoDB: db, Kinesis: kin}
	for _, c := range []struct {
		name   string
		change func(*handler.Config)
		opts   []handler.Option
		refuse string // "": built
	}{
		{"out-of-orderness of the largest duration", nil, []handler.Option{handler.WithOutOfOrderness(huge)}, "WithOutOfOrderness"},
		{"out-of-orderness past a day", nil, []handler.Option{handler.WithOutOfOrderness(pipeline.MaxOutOfOrderness + time.Second)}, "WithOutOfOrderness"},
		{"out-of-orderness of a day", nil, []handler.Option{handler.WithOutOfOrderness(pipeline.MaxOutOfOrderness)}, ""},
		{"idle timeout of the largest duration", nil, []handler.Option{handler.WithIdleTimeout(huge)}, "WithIdleTimeout"},
		{"idle timeout past a day", nil, []handler.Option{handler.WithIdleTimeout(pipeline.MaxIdleTimeout + time.Second)}, "WithIdleTimeout"},
		{"idle timeout of a day", nil, []handler.Option{handler.WithIdleTimeout(pipeline.MaxIdleTimeout)}, ""},
		{"tumbling window of 292 years", nil, []handler.Option{handler.WithWindow(huge.Truncate(time.Millisecond))}, "WithWindow"},
		{"tumbling window past a year", nil, []handler.Option{handler.WithWindow(year + time.Millisecond)}, "WithWindow"},
		{"tumbling window of a year", nil, []handler.Option{handler.WithWindow(year)}, ""},
		{"hopping window past a year", nil, []handler.Option{handler.WithHopping(year+24*time.Hour, 24*time.Hour)}, "WithHopping"},
		{"sliding difference past a year", nil, []handler.Option{handler.WithSliding(year + time.Millisecond)}, "WithSliding"},
		{"sliding difference of a year", nil, []handler.Option{handler.WithSliding(year)}, ""},
		{"session gap of 292 years", nil, []handler.Option{handler.WithSession(huge.Truncate(time.Millisecond))}, "WithSession"},
		{"session gap of a year", nil, []handler.Option{handler.WithSession(year)}, ""},
		{"allowed lateness of the largest duration", nil, correct(huge.Truncate(time.Millisecond)), "WithAllowedLateness"},
		{"allowed lateness past a year", nil, correct(pipeline.MaxRetention + time.Millisecond), "WithAllowedLateness"},
		{"allowed lateness of a year", nil, correct(pipeline.MaxRetention), ""},
		{"concurrency of the largest int", nil, []handler.Option{handler.WithConcurrency(math.MaxInt)}, "WithConcurrency"},
		{"concurrency past a batch's records", nil, []handler.Option{handler.WithConcurrency(handler.MaxConcurrency + 1)}, "WithConcurrency"},
		{"concurrency of a batch's records", nil, []handler.Option{handler.WithConcurrency(handler.MaxConcurrency)}, ""},
		{"every bound at once", nil, append(correct(pipeline.MaxRetention), handler.WithSession(year),
			handler.WithOutOfOrderness(day), handler.WithIdleTimeout(pipeline.MaxIdleTimeout)), ""},
		{"quarantine table no table can be named", func(c *handler.Config) { c.QuarantineTable = "not a table!!" }, nil, "Config.QuarantineTable"},
		{"state table of two characters", func(c *handler.Config) { c.StateTable = "st" }, nil, "Config.StateTable"},
		{"state table's ARN", func(c *handler.Config) {
			c.StateTable = "arn:aws:dynamodb:us-east-1:123456789012:table/state"
		}, nil, ""},
		{"output stream's ARN", func(c *handler.Config) {
			c.OutputStream = "arn:aws:kinesis:us-east-1:123456789012:stream/out"
		}, nil, "Config.OutputStream"},
		{"output stream with a space", func(c *handler.Config) { c.OutputStream = "out " }, nil, "Config.OutputStream"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := cfg
			if c.change != nil {
				c.change(&cfg)
			}
			_, err := handler.NewWindowed[Tally](cfg, selectLatency, append(c.opts, handler.WithLogger(quiet), handler.WithMetrics(nil))...)
			switch {
			case c.refuse == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.refuse != "" && (err == nil || !strings.Contains(err.Error(), c.refuse)):
				t.Errorf("got %v; want it refused naming %s", err, c.refuse)
			}
		})
	}
}

// TestHugeOutOfOrderness is the trial's case end to end: one record, two
// ticks a minute apart, then a later record in the same window. Built at
// all, such a handler must keep the window open and count both records;
// with the bounds it is refused at construction instead.
func TestHugeOutOfOrderness(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	now := base
	h, err := handler.NewWindowed[Tally](cfg, selectLatency, handler.WithWindow(time.Minute),
		handler.WithOutOfOrderness(time.Duration(math.MaxInt64)), handler.WithIdleTimeout(30*time.Second),
		handler.WithLogger(quiet), handler.WithMetrics(nil), handler.WithClock(func() time.Time { return now }))
	if err != nil {
		if !strings.Contains(err.Error(), "WithOutOfOrderness") {
			t.Fatalf("refused without naming WithOutOfOrderness: %v", err)
		}
		return
	}
	mustBatch(t, h, kinesisRecords([]rec{{1, request("a", "k", 1, `{"ms":1}`)}}))
	for _, at := range []time.Duration{time.Minute, 2 * time.Minute} {
		if _, err := h.Tick(ctx, base.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	mustBatch(t, h, kinesisRecords([]rec{{2, request("b", "k", 2, `{"ms":2}`)}}))
	if st := h.Stats(); st.Late != 0 {
		t.Errorf("stats %+v: a record within the window's out-of-orderness was dropped as late", st)
	}
	if byID, _ := results(t, cfg.OutputStream); len(byID) != 0 {
		t.Errorf("results %v: a window out-of-orderness keeps open was put out as final", describe(byID))
	}
}
