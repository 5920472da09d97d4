package tributary

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Whole-stack variants: the tests of a setting the shared fixture (fx,
// cdk.json's context) does not have read one of these stacks, each built
// and synthesized once per test binary, by the first test that asks for
// it. A whole Tributary stack costs seconds of jsii to build and to
// synthesize, so one stack carries several settings where none of them
// changes what another's test asserts; each variant says what it holds and
// which tests read it. A setting whose effect one construct decides is
// tested on that construct in a bare stack instead (see
// TestFlushIntervalDefaultsToTwoMinutes).

// variantStack is a synthesized variant.
type variantStack struct {
	stack    *TributaryStack
	tmpl     cfnTemplate
	nagError []string // unsuppressed AwsSolutions errors
	nagWarn  []string // unsuppressed AwsSolutions warnings
	// assets is the asset dir and pipelinesDir the pipelines directory
	// the stack was given in context; docs are the files written there
	// (name -> JSON).
	assets       string
	pipelinesDir string
	docs         map[string]string
}

// lazyVariant builds its stack on the first get.
type lazyVariant struct {
	name string
	// docs are the pipeline files (name -> JSON) of the variant's
	// pipelines directory.
	docs    func() (map[string]string, error)
	context map[string]any
	props   TributaryStackProps

	once sync.Once
	v    *variantStack
	err  error
}

// get returns the variant's stack, building it if no test has yet; a
// failure to build it fails every test that reads it.
func (l *lazyVariant) get(t *testing.T) *variantStack {
	t.Helper()
	l.once.Do(func() { l.v, l.err = l.build() })
	if l.err != nil {
		t.Fatalf("variant stack %q: %v", l.name, l.err)
	}
	return l.v
}

func (l *lazyVariant) build() (*variantStack, error) {
	if testTmp == "" {
		return nil, fmt.Errorf("no test directory (TestMain sets testTmp)")
	}
	dir, err := os.MkdirTemp(testTmp, "variant-")
	if err != nil {
		return nil, err
	}
	v := &variantStack{assets: filepath.Join(dir, "assets"), pipelinesDir: filepath.Join(dir, "pipelines")}
	writeDummyAssets(v.assets)
	if v.docs, err = l.docs(); err != nil {
		return nil, err
	}
	if err := writeDocs(v.pipelinesDir, v.docs); err != nil {
		return nil, err
	}
	ctx := map[string]any{ContextAssetDir: v.assets, ContextPipelinesDir: v.pipelinesDir}
	for k, val := range l.context {
		ctx[k] = val
	}
	app := newTestApp(filepath.Join(dir, "cdk.out"), ctx)
	props := l.props
	if v.stack, err = NewTributaryStack(app, StackID, &props); err != nil {
		return nil, err
	}
	addNag(app)
	// The nag findings first: Annotations_FromStack synthesizes again
	// (force), Template_FromStack takes the app's last synthesis.
	v.nagError, v.nagWarn = nagFindings(v.stack.Stack)
	v.tmpl = templateOf(v.stack.Stack)
	return v, nil
}

// writeDocs writes docs (name -> JSON) as <name>.json into dir.
func writeDocs(dir string, docs map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, doc := range docs {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(doc), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// repoPipelines is the repository's pipeline files (name -> JSON), with
// replace's files instead of or besides them and without drop's.
func repoPipelines(replace map[string]string, drop ...string) (map[string]string, error) {
	entries, err := os.ReadDir(repoPipelinesDir)
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && !strings.HasSuffix(name, ".schema") {
			b, err := os.ReadFile(filepath.Join(repoPipelinesDir, e.Name()))
			if err != nil {
				return nil, err
			}
			docs[name] = string(b)
		}
	}
	for _, name := range drop {
		delete(docs, name)
	}
	for name, doc := range replace {
		docs[name] = doc
	}
	return docs, nil
}

// tableOnlyPageviews is the repository's pageviews pipeline writing only
// to the table (no results stream) and running two batches per shard, its
// ids kept by key (TestFlushIntervalAndPipelineShapeTheTopology).
func tableOnlyPageviews() (string, error) {
	b, err := os.ReadFile(filepath.Join(repoPipelinesDir, "pageviews.json"))
	if err != nil {
		return "", err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", err
	}
	doc["outputs"] = map[string]any{"table": true}
	doc["parallelizationFactor"] = 2
	doc["dedupeLedger"] = "key" // batches of a shard side by side keep a ledger a key
	raw, err := json.Marshal(doc)
	return string(raw), err
}

// settingsVariant is the stack with every operational setting off its
// default, as cdk synth -c would give them (strings) or cdk.json (numbers):
//
//   - signed ingest (HMAC): TestIngestAuthModes;
//   - an alarm email, 72 hours of events retention, reserved concurrency
//     for aggregate and worker, and errors and iterator age alarm settings:
//     TestOperationsFromContext;
//   - a second join file, orders-payments, beside the repository's:
//     TestJoinFileAddsAJoin;
//   - flush interval "300" and the only aggregation pageviews writing
//     only to the table with two batches per shard (the repository's
//     checkouts, which writes to the results stream, left out):
//     TestFlushIntervalAndPipelineShapeTheTopology.
//
// None of these reads what another changes: the join adds no function URL,
// no secret grant and no alarm of another kind than the ones the settings
// set; signing touches only ingest, its URL and its secret; reserved
// concurrency and alarm settings apply to every function and alarm of
// their kind, whichever pipeline files there are.
var settingsVariant = &lazyVariant{
	name: "settings",
	docs: func() (map[string]string, error) {
		pv, err := tableOnlyPageviews()
		if err != nil {
			return nil, err
		}
		return repoPipelines(map[string]string{"pageviews": pv, "orders-payments": ordersPaymentsJoin}, "checkouts")
	},
	context: map[string]any{
		ContextIngestAuth:           "HMAC",
		ContextAlarmEmail:           "ops@example.com",
		ContextEventsRetentionHours: "72",
		ContextReservedConcurrencyPrefix + FunctionAggregate: 10.0,
		ContextReservedConcurrencyPrefix + FunctionWorker:    "10",
		"tributary:alarm.errors.threshold":                   "3",
		"tributary:alarm.iteratorAge.periodSeconds":          120.0,
		"tributary:alarm.iteratorAge.evaluationPeriods":      "5",
		ContextFlushInterval:                                 "300",
		ContextViewsWriteCapacity:                            "230",
	},
}

// onePipelineVariant is the stack with one pipeline file, the
// repository's pageviews (TestPipelinesFromFiles), and the flush interval
// FlushPerBatch in props over 300 in context: the whole-stack case of
// TestFlushIntervalDefaultsToTwoMinutes, the stack passing its props to
// the pipelines.
var onePipelineVariant = &lazyVariant{
	name: "one pipeline",
	docs: func() (map[string]string, error) {
		docs, err := repoPipelines(nil)
		return map[string]string{"pageviews": docs["pageviews"]}, err
	},
	context: map[string]any{ContextFlushInterval: 300.0},
	props:   TributaryStackProps{FlushInterval: FlushPerBatch},
}

// threePipelinesVariant is the stack with the repository's two
// aggregations and a third, orders, and no join or CEP file
// (TestPipelinesFromFiles), and an errors threshold at the most a ticker
// can count in 5 minutes, 48 (TestErrorsThresholdWithinTheTickersReach:
// at the bound, synth goes on).
var threePipelinesVariant = &lazyVariant{
	name: "three pipelines",
	docs: func() (map[string]string, error) {
		docs, err := repoPipelines(nil)
		return map[string]string{"pageviews": docs["pageviews"], "checkouts": docs["checkouts"], "orders": ordersDoc}, err
	},
	context: map[string]any{"tributary:alarm.errors.threshold": 48.0, "tributary:alarm.errors.periodSeconds": 300.0},
}
