package main

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/emulator/local/localtest"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// setAside reads what the stack's aggregate functions set aside (their
// quarantine tables are small in a test).
func setAside(t *testing.T, ctx context.Context, stack *local.Stack, db *dynamodb.Client) []setaside.Item {
	t.Helper()
	specs, err := stack.Deployment().Functions()
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]bool{}
	for _, f := range specs {
		if q := f.Env[aggregate.EnvQuarantineTable]; f.Binary == "aggregate" && q != "" {
			tables[q] = true
		}
	}
	if len(tables) == 0 {
		t.Fatalf("no aggregate function has a %s", aggregate.EnvQuarantineTable)
	}
	var out []setaside.Item
	for table := range tables {
		p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, av := range page.Items {
				var it setaside.Item
				if attributevalue.UnmarshalMap(av, &it) == nil && it.Kind == setaside.ItemSetAside {
					out = append(out, it)
				}
			}
		}
	}
	return out
}

// viewsState is what a pipeline's views table says of each shard: the
// highest fence any item holds for it and its watermark.
type viewsState struct {
	fences     map[string]string // shard → highest fence (zero-padded)
	watermarks map[string]window.Watermark
	// samples counts the items that hold a fence of a sample's sequence
	// number for a shard, by shard.
	samples map[string]int
}

// readViews scans table (the local stack's views table is small).
func readViews(t *testing.T, ctx context.Context, db *dynamodb.Client, table, pipeline string, sampleFences map[string]bool) viewsState {
	t.Helper()
	vs := viewsState{fences: map[string]string{}, watermarks: map[string]window.Watermark{}, samples: map[string]int{}}
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		out, err := db.Scan(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			pk, _ := it["pk"].(*types.AttributeValueMemberS)
			if pk != nil && pk.Value == "watermark#"+pipeline {
				sk := it["sk"].(*types.AttributeValueMemberS).Value
				var wm window.Watermark
				if b, ok := it["wm"].(*types.AttributeValueMemberB); !ok || wm.UnmarshalBinary(b.Value) != nil {
					t.Fatalf("watermark item of %s: %v", sk, it)
				}
				vs.watermarks[sk] = wm
			}
			for name, v := range it {
				s, ok := v.(*types.AttributeValueMemberS)
				shard, fence := strings.CutPrefix(name, "f_")
				if !ok || !fence {
					continue
				}
				if s.Value > vs.fences[shard] {
					vs.fences[shard] = s.Value
				}
				if sampleFences[s.Value] {
					vs.samples[shard]++
				}
			}
		}
		if out.LastEvaluatedKey == nil {
			return vs
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// sampleFences reads a Kinesis sample's sequence numbers as fences.
func sampleFences(t *testing.T, file string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Records []struct {
			Kinesis struct{ SequenceNumber string }
		}
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, r := range ev.Records {
		f, err := state.Fence(r.Kinesis.SequenceNumber)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = true
	}
	return out
}

// `make invoke` with a console sample, as docs/local.md has a new user do
// right after `make local-up`, then real traffic: no real shard takes the
// sample's sequence numbers as its position or its fixed 2026-11-29 times
// as its watermark, the sample's records are counted under a shard of their
// own at the time they are sent, and the traffic after it is counted
// exactly. Samples sharing an event id (the function URL sample's evt-0001
// and the Kinesis sample's), and the same sample sent twice, are each
// counted: nothing is set aside as an id reused with other content.
func TestInvokeSampleLeavesRealShardsAlone(t *testing.T) {
	stack, root, _ := localtest.Up(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, err := stack.FindPipeline("pageviews")
	if err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(stack.Config())

	sample := filepath.Join(root, "events", "aggregate", "kinesis-batch.json")
	fences := sampleFences(t, sample)

	u, err := url.Parse(stack.InvokeURL())
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	// The function URL sample first: its evt-0001 of user-42 is the
	// aggregate sample's id with other data. Then the aggregate sample
	// twice: each make invoke is a new delivery.
	ingestSample := filepath.Join(root, "events", "ingest", "function-url-post.json")
	if err := invoke(ctx, &options{root: root, fn: "ingest", event: ingestSample, lambdaPort: port}); err != nil {
		t.Fatalf("make invoke FN=ingest EVENT=%s: %v", ingestSample, err)
	}
	for range 2 {
		if err := invoke(ctx, &options{root: root, fn: w.Function, event: sample, lambdaPort: port}); err != nil {
			t.Fatalf("make invoke FN=%s EVENT=%s: %v", w.Function, sample, err)
		}
	}
	// A function that fails makes make invoke fail (exit 1), naming it,
	// after printing its answer: the snapshot function refuses a
	// misspelt field.
	bad := filepath.Join(t.TempDir(), "misspelt.json")
	if err := os.WriteFile(bad, []byte(`{"tabel": "profiles"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := invoke(ctx, &options{root: root, fn: "snapshot", event: bad, lambdaPort: port}); err == nil || !strings.Contains(err.Error(), "snapshot failed on "+bad+" (FunctionError") {
		t.Errorf("make invoke FN=snapshot with a misspelt field = %v; want it to fail naming the function, the event and the FunctionError", err)
	}
	// Each counted: the aggregate sample's user-42 twice and user-7 once
	// per invocation, and the function URL sample's user-42 once (through
	// the stream); none set aside as an id reused with other content.
	counted, cancelCounted := context.WithTimeout(ctx, time.Minute)
	wantSamples := local.Counts{{Key: "user-42"}: 5, {Key: "user-7"}: 2}
	from := sent.Add(-10 * time.Minute).Truncate(time.Minute)
	vs, err := w.Wait(counted, wantSamples, from, time.Now().Add(time.Hour), nil, io.Discard)
	cancelCounted()
	if err != nil {
		vs, _ = w.Read(ctx, wantSamples.Keys(), from, time.Now().Add(time.Hour))
	}
	perKey := map[string]int{}
	for k, n := range local.Counted(vs) {
		perKey[k.Key] += n
	}
	if perKey["user-42"] != 5 || perKey["user-7"] != 2 {
		t.Errorf("after make invoke of the ingest sample, then the aggregate sample twice, the windows count %v; want user-42 5 and user-7 2, each invocation counted", perKey)
	}
	for _, it := range setAside(t, ctx, stack, db) {
		if it.Category == setaside.KindDuplicateConflict {
			t.Errorf("record %s of %s set aside as %s: %s", it.SequenceNumber, it.Source, it.Category, it.Reason)
		}
	}
	// checkShards: no real shard holds the sample's positions, and every
	// watermark is of this run's times.
	checkShards := func(when string) viewsState {
		t.Helper()
		vs := readViews(t, ctx, db, w.Table, w.Pipeline.Name, fences)
		for shard, n := range vs.samples {
			t.Errorf("%s: %d items hold the sample's sequence number as shard %s's position", when, n, shard)
		}
		for shard, wm := range vs.watermarks {
			if wm.MaxEventTime.Before(sent.Add(-2 * time.Minute)) {
				t.Errorf("%s: shard %s's watermark is %s (latest event %s): the sample's fixed times became its position", when, shard, wm.Current().UTC(), wm.MaxEventTime.UTC())
			}
		}
		return vs
	}
	after := checkShards("after make invoke")
	mine, ok := after.watermarks[local.SampleShard]
	if !ok {
		t.Fatalf("watermarks after make invoke %v: want the sample's records under their own shard %s", after.watermarks, local.SampleShard)
	}
	if mine.MaxEventTime.After(time.Now()) {
		t.Errorf("the sample's shard's latest event time is %s, after it was sent (%s)", mine.MaxEventTime, sent.UTC())
	}

	// Real page views after it: counted exactly, under the real shards.
	now := time.Now().UTC()
	traffic := local.Traffic{Keys: 3, Minutes: 1, Max: 4, Seed: 5, Now: now}
	evs, want := traffic.Generate()
	if n, err := local.Send(ctx, stack.URL("ingest"), evs, 50, io.Discard); err != nil || n != len(evs) {
		t.Fatalf("Send: accepted %d of %d: %v", n, len(evs), err)
	}
	from, to := now.Truncate(time.Minute).Add(-5*time.Minute), now.Add(time.Hour)
	if _, err := w.Wait(ctx, want, from, to, nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	final := checkShards("after the traffic")
	if len(final.watermarks) < 2 {
		t.Errorf("watermarks %v: want the real shards' beside the sample's", final.watermarks)
	}
	if got := final.watermarks[local.SampleShard]; !got.MaxEventTime.Equal(mine.MaxEventTime) {
		t.Errorf("the sample's shard's latest event time moved from %s to %s: real records reached it", mine.MaxEventTime, got.MaxEventTime)
	}
}
