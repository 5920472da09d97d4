package aggregate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Several pipelines run the same aggregate and ticker binaries, one
// function each: their metrics carry the one dimension set ["Function",
// "Pipeline"] (a series per pipeline, what the stack's alarms and
// dashboards read), with Pipeline = the config's name, and no rollup under
// Function alone, which CloudWatch would bill as a second custom metric.
func TestFromEnvMetricsCarryThePipeline(t *testing.T) {
	ctx := context.Background()
	table := fmt.Sprintf("pipelinedim-%d", tableSeq.Add(1))
	quarantine := table + "-quarantine"
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	if err := setaside.CreateTable(ctx, db, quarantine); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"PIPELINE_CONFIG": `{"name":"checkouts","eventTypes":["checkout"],"key":"key","value":"data.amount",
			"windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"],"latePolicy":"drop"}`,
		aggregate.EnvViewsTable:      table,
		aggregate.EnvQuarantineTable: quarantine,
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	var out bytes.Buffer
	p, err := aggregate.FromEnv(awsCfg, lookup, "aggregate", &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Minute)
	recs := []record{
		{shard: "shardId-000000000000", seq: 1, env: stream.Envelope{ID: "c1", Type: "checkout", Key: "eu-west", OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{"amount":1250}`)}},
		{shard: "shardId-000000000000", seq: 2, env: stream.Envelope{ID: "c2", Type: "checkout", Key: "eu-west", OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{"amount":"lots"}`)}},
	}
	if resp, err := p.HandleBatch(ctx, kinesisEvent(recs)); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch: %+v %v", resp, err)
	}
	docs := emfDocs(t, &out)
	checkDimensions(t, "aggregate", docs)
	if got := sumOf(docs, "RecordsIn"); got != 1 {
		t.Errorf("RecordsIn %v, want 1 (the valid checkout)", got)
	}
	// The set-aside sink shares the logger: its count is per pipeline too.
	if got := sumOf(docs, "RecordsSetAside"); got != 1 {
		t.Errorf("RecordsSetAside %v, want 1 (the checkout whose amount is not a number)", got)
	}

	out.Reset()
	ticker, err := aggregate.FromEnv(awsCfg, lookup, "ticker", &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, now := range []time.Time{time.Now().Add(time.Hour), time.Now().Add(2 * time.Hour)} {
		if _, err := ticker.Tick(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	checkDimensions(t, "ticker", emfDocs(t, &out))
}

type emfDoc struct {
	AWS struct {
		CloudWatchMetrics []struct {
			Dimensions [][]string
			Metrics    []struct{ Name string }
		}
	} `json:"_aws"`
	Function, Pipeline string
	raw                map[string]any
}

func emfDocs(t *testing.T, buf *bytes.Buffer) []emfDoc {
	t.Helper()
	var out []emfDoc
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	for sc.Scan() {
		var d emfDoc
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("not an EMF line: %q: %v", sc.Text(), err)
		}
		_ = json.Unmarshal(sc.Bytes(), &d.raw)
		out = append(out, d)
	}
	return out
}

func checkDimensions(t *testing.T, function string, docs []emfDoc) {
	t.Helper()
	if len(docs) == 0 {
		t.Fatalf("%s wrote no EMF document", function)
	}
	for _, d := range docs {
		if d.Function != function || d.Pipeline != "checkouts" {
			t.Errorf("%s: Function=%q Pipeline=%q, want %s and checkouts", function, d.Function, d.Pipeline, function)
		}
		got := fmt.Sprint(d.AWS.CloudWatchMetrics[0].Dimensions)
		if got != "[[Function Pipeline]]" {
			t.Errorf("%s: dimension sets %s, want [[Function Pipeline]]", function, got)
		}
	}
}

func sumOf(docs []emfDoc, name string) float64 {
	var s float64
	for _, d := range docs {
		if v, ok := d.raw[name].(float64); ok {
			s += v
		}
	}
	return s
}
