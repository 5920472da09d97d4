package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/state"
)

// TestVersionsLeaveOutMakeInvokeSamples: a running stack that has applied
// real records, then the console's Kinesis sample as `make invoke` sends
// it (local.FreshSample, then the aggregate function), still reports as
// the positions it reached its real shards' last records and nothing
// else — not the sample's sequence number, under any shard — and its real
// shards' watermarks have not moved; the sample's own watermark is of the
// minute it was sent, not of its fixed 2026-11-29 times nor the future.
func TestVersionsLeaveOutMakeInvokeSamples(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	live := f.liveProcessor()
	f.send("a", 30, 0)
	f.live(ctx, live)
	views := state.NewViews(f.db, f.table, f.cfg.Aggregates)
	before, err := views.Watermarks(ctx, f.cfg.Name)
	if err != nil {
		t.Fatal(err)
	}

	raw, err := os.ReadFile(filepath.Join("..", "..", "events", "aggregate", "kinesis-batch.json"))
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	fresh, _, err := local.FreshSample(raw, sent)
	if err != nil {
		t.Fatal(err)
	}
	var ev events.KinesisEvent
	if err := json.Unmarshal(fresh, &ev); err != nil {
		t.Fatal(err)
	}
	// The sample's page views carry their value in data.ms: the same
	// pipeline, reading that.
	sampleJSON := `{"name":"clicks","key":"key","value":"data.ms","windows":[{"kind":"tumbling","size":"1m"}],
  "aggregates":["count","sum"],"outOfOrderness":"1h"}`
	env := map[string]string{pipeline.EnvVar: sampleJSON, aggregate.EnvViewsParameter: f.param}
	p, err := aggregate.FromEnv(awsCfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "aggregate", &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := p.HandleBatch(ctx, ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the sample: %v %v", resp, err)
	}

	last := map[string]string{} // real shard → its last sequence number
	for _, shard := range f.liveShards {
		it, err := f.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(f.stream), ShardId: aws.String(shard), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		out, err := f.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(out.Records); n > 0 {
			last[shard] = aws.ToString(out.Records[n-1].SequenceNumber)
		}
	}
	vs, err := f.replayer(nil).Versions(ctx, replay.VersionsOptions{Stream: f.stream})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 {
		t.Fatalf("versions %+v: want the stack's table alone", vs)
	}
	got := map[string]string{}
	for _, p := range vs[0].Positions {
		got[p.Shard] = p.Sequence
		if p.Gone {
			t.Errorf("replay versions: reached %s sequence number %s (no longer in the stream): a position no stream holds", p.Shard, p.Sequence)
		}
	}
	if !maps(got, last) {
		t.Errorf("replay versions positions %v, want the real shards' last records %v and nothing else", got, last)
	}
	if !vs[0].Samples {
		t.Errorf("replay versions does not say the table holds make invoke's sample records")
	}

	after, err := views.Watermarks(ctx, f.cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	for shard, wm := range before {
		if a := after[shard]; a == nil || !a.MaxEventTime.Equal(wm.MaxEventTime) || !a.Current().Equal(wm.Current()) {
			t.Errorf("shard %s's watermark moved from %v to %v by the sample", shard, wm, a)
		}
	}
	mine := after[state.SampleShard]
	if mine == nil {
		t.Fatalf("watermarks %v: want the sample's under %s", after, state.SampleShard)
	}
	if at := mine.MaxEventTime; at.After(time.Now()) || at.Before(sent.Add(-2*time.Minute)) {
		t.Errorf("the sample's latest event time is %s, sent at %s: want the minute before it was sent", at.UTC(), sent.UTC())
	}
}
