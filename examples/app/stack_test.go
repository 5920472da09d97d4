package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// The functions the app deploys, by asset name.
var assetNames = []string{"ingest", "quarantine", "aggregate", "ticker", "statuscodes", "receipts"}

type resource struct {
	Type       string
	Properties map[string]any
	Metadata   map[string]any
}

// synth builds the app's stack as `cdk synth` does (cdk.json's context,
// cdk-nag's AwsSolutions checks) over stand-in bootstraps and the given
// pipelines directory, and returns its resources and unsuppressed nag
// findings.
func synth(t *testing.T, pipelinesDir string) (map[string]resource, []string, error) {
	rs, findings, _, err := synthStack(t, pipelinesDir)
	return rs, findings, err
}

// synthStack is synth that also returns the stack, to resolve its
// resources' logical ids.
func synthStack(t *testing.T, pipelinesDir string) (map[string]resource, []string, *ShopStack, error) {
	t.Helper()
	assets := t.TempDir()
	for _, n := range assetNames {
		if err := os.MkdirAll(filepath.Join(assets, n), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(assets, n, "bootstrap"), []byte(n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile("cdk.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Context["@aws-cdk/core:annotationsInValidationReport"] = false
	app := awscdk.NewApp(&awscdk.AppProps{Context: &cfg.Context, Outdir: jsii.String(t.TempDir())})
	s, err := NewShopStack(app, "Shop", ShopStackProps{AssetDir: assets, PipelinesDir: pipelinesDir})
	if err != nil {
		return nil, nil, nil, err
	}
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	// Annotations_FromStack synthesizes the app (anew each time, so an
	// app.Synth before it would be a second synthesis) and
	// Template_FromStack reads that synthesis.

	var findings []string
	a := assertions.Annotations_FromStack(s.Stack)
	rule := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
	for _, m := range append(*a.FindError(jsii.String("*"), rule), *a.FindWarning(jsii.String("*"), rule)...) {
		findings = append(findings, *m.Id+": "+strings.SplitN(m.Entry.Data.(string), "\n", 2)[0])
	}
	b, err := json.Marshal(assertions.Template_FromStack(s.Stack, nil).ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct{ Resources map[string]resource }
	if err := json.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	return tmpl.Resources, findings, s, nil
}

func functionsByAsset(rs map[string]resource) map[string][]resource {
	out := map[string][]resource{}
	for _, r := range rs {
		if r.Type == "AWS::Lambda::Function" {
			if name, ok := r.Metadata["tributary:function"].(string); ok {
				out[name] = append(out[name], r)
			}
		}
	}
	return out
}

func env(r resource) map[string]any {
	e, _ := r.Properties["Environment"].(map[string]any)
	v, _ := e["Variables"].(map[string]any)
	return v
}

func compact(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestShopStack: the app deploys one aggregate and one ticker per file in
// pipelines/, each running its file; the functions of its own (statuscodes
// with its state table; receipts with its queue, DLQ and idempotency
// table); a dashboard per pipeline; alarms; and passes cdk-nag.
func TestShopStack(t *testing.T) {
	rs, findings, s, err := synthStack(t, "pipelines")
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) > 0 {
		t.Errorf("cdk-nag findings (%d):\n%s", len(findings), strings.Join(findings, "\n"))
	}
	fns := functionsByAsset(rs)
	for _, kind := range []string{"aggregate", "ticker"} {
		got := map[string]string{}
		for _, f := range fns[kind] {
			p, _ := f.Metadata["tributary:pipeline"].(string)
			got[p], _ = env(f)["PIPELINE_CONFIG"].(string)
		}
		want := map[string]string{
			"orders":  compact(t, "pipelines/orders.json"),
			"signups": compact(t, "pipelines/signups.json"),
		}
		if len(got) != len(want) {
			t.Errorf("%s functions for pipelines %v, want orders and signups", kind, keys(got))
		}
		for name, cfg := range want {
			if got[name] != cfg {
				t.Errorf("%s of %s: PIPELINE_CONFIG %q, want the file %q", kind, name, got[name], cfg)
			}
		}
	}
	for _, n := range []string{"ingest", "quarantine", "statuscodes", "receipts"} {
		if len(fns[n]) != 1 {
			t.Errorf("%d %s functions, want 1", len(fns[n]), n)
		}
	}
	if sc := fns["statuscodes"]; len(sc) == 1 {
		for _, v := range []string{"STATE_TABLE_NAME", "OUTPUT_STREAM_NAME", "QUARANTINE_TABLE_NAME"} {
			if env(sc[0])[v] == nil {
				t.Errorf("statuscodes has no %s", v)
			}
		}
	}
	assertReceipts(t, rs, s)
	count := map[string]int{}
	for _, r := range rs {
		count[r.Type]++
	}
	if count["AWS::CloudWatch::Dashboard"] != 2 {
		t.Errorf("%d dashboards, want one per pipeline (2)", count["AWS::CloudWatch::Dashboard"])
	}
	// Two pipelines read the events stream through consumers of their own.
	if count["AWS::Kinesis::StreamConsumer"] < 2 {
		t.Errorf("%d stream consumers, want at least one per pipeline", count["AWS::Kinesis::StreamConsumer"])
	}
	if count["AWS::CloudWatch::Alarm"] == 0 || count["AWS::SNS::Topic"] != 1 {
		t.Errorf("%d alarms and %d topics: NewOperations should alarm everything to one topic", count["AWS::CloudWatch::Alarm"], count["AWS::SNS::Topic"])
	}
}

// TestAddingAFileAddsAPipeline: a third file is a third aggregate and
// ticker, with no code change; a bad one fails synth naming file and field.
func TestAddingAFileAddsAPipeline(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"orders.json", "signups.json"} {
		raw, err := os.ReadFile(filepath.Join("pipelines", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refunds := `{"name": "refunds", "eventTypes": ["refund"], "key": "data.region", "value": "data.cents",
  "windows": [{"kind": "tumbling", "size": "1h"}], "aggregates": ["count", "sum"]}`
	if err := os.WriteFile(filepath.Join(dir, "refunds.json"), []byte(refunds), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, _, err := synth(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range functionsByAsset(rs)["aggregate"] {
		names = append(names, f.Metadata["tributary:pipeline"].(string))
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "orders,refunds,signups" {
		t.Errorf("aggregates for %v, want orders, refunds and signups", names)
	}

	bad := strings.Replace(refunds, `"1h"`, `"an hour"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "refunds.json"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = synth(t, dir)
	if err == nil || !strings.Contains(err.Error(), "refunds.json") || !strings.Contains(err.Error(), "windows[0].size") {
		t.Errorf("synth with a bad size: %v, want an error naming refunds.json and windows[0].size", err)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func logicalID(s *ShopStack, c constructs.IConstruct) string {
	el, ok := c.(awscdk.CfnElement)
	if !ok {
		el = c.Node().DefaultChild().(awscdk.CfnElement)
	}
	return s.Resolve(el.LogicalId()).(string)
}

// assertReceipts: the receipts task handler's function reads its queue
// (batch item failures) and knows its idempotency table (id, TTL on
// expiration); the queue redrives to its DLQ, and the DLQ's depth alarms.
func assertReceipts(t *testing.T, rs map[string]resource, s *ShopStack) {
	t.Helper()
	fns := functionsByAsset(rs)["receipts"]
	if len(fns) != 1 {
		t.Fatalf("%d receipts functions, want 1", len(fns))
	}
	h := s.Receipts
	qID, dlqID, tableID, fnID := logicalID(s, h.Queue), logicalID(s, h.DLQ), logicalID(s, h.Idempotency), logicalID(s, h.Function.Function)
	if got, want := env(fns[0])["IDEMPOTENCY_TABLE_NAME"], map[string]any{"Ref": tableID}; !reflect.DeepEqual(got, want) {
		t.Errorf("receipts: IDEMPOTENCY_TABLE_NAME = %v, want %v", got, want)
	}
	if q := rs[qID]; q.Type != "AWS::SQS::Queue" || !reflect.DeepEqual(q.Properties["RedrivePolicy"].(map[string]any)["deadLetterTargetArn"],
		map[string]any{"Fn::GetAtt": []any{dlqID, "Arn"}}) {
		t.Errorf("receipts queue %s: RedrivePolicy %v, want its DLQ %s", q.Type, q.Properties["RedrivePolicy"], dlqID)
	}
	tbl := rs[tableID]
	if tbl.Type != "AWS::DynamoDB::Table" ||
		!reflect.DeepEqual(tbl.Properties["KeySchema"], []any{map[string]any{"AttributeName": "id", "KeyType": "HASH"}}) ||
		!reflect.DeepEqual(tbl.Properties["TimeToLiveSpecification"], map[string]any{"AttributeName": "expiration", "Enabled": true}) {
		t.Errorf("receipts idempotency table: %s %v %v; want partition key id, TTL on expiration", tbl.Type, tbl.Properties["KeySchema"], tbl.Properties["TimeToLiveSpecification"])
	}
	var mapped, alarmed bool
	for _, r := range rs {
		switch r.Type {
		case "AWS::Lambda::EventSourceMapping":
			if reflect.DeepEqual(r.Properties["FunctionName"], map[string]any{"Ref": fnID}) {
				mapped = reflect.DeepEqual(r.Properties["EventSourceArn"], map[string]any{"Fn::GetAtt": []any{qID, "Arn"}}) &&
					reflect.DeepEqual(r.Properties["FunctionResponseTypes"], []any{"ReportBatchItemFailures"})
			}
		case "AWS::CloudWatch::Alarm":
			b, _ := json.Marshal(r.Properties["Dimensions"])
			alarmed = alarmed || strings.Contains(string(b), `"`+dlqID+`"`)
		}
	}
	if !mapped {
		t.Errorf("receipts: no mapping from its queue %s with ReportBatchItemFailures", qID)
	}
	if !alarmed {
		t.Errorf("receipts: no alarm on its DLQ %s", dlqID)
	}
}
