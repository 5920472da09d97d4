package tributary

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// ordersPaymentsJoin is a second join file, as a user would add it to
// pipelines/.
const ordersPaymentsJoin = `{
  "$schema": "./pipeline.schema.json",
  "kind": "join",
  "name": "orders-payments",
  "left": "order_placed",
  "right": "payment",
  "within": "10m",
  "joinType": "inner"
}`

// repoDirWith is a copy of the repository's pipelines directory with more
// files (name -> JSON).
func repoDirWith(t *testing.T, more map[string]string) string {
	t.Helper()
	entries, err := os.ReadDir(repoPipelinesDir)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && !strings.HasSuffix(name, ".schema") {
			docs[name] = readRepoPipeline(t, name)
		}
	}
	for name, doc := range more {
		docs[name] = doc
	}
	return writePipelineDir(t, docs)
}

// TestJoinFileAddsAJoin: a join file added to the pipelines directory
// deploys a second join with no code change: its own function (JOIN_CONFIG
// its file), its own mapping (every record: no filter), state table, joins
// stream and schedule, its own alarms (by {Function, Pipeline} for what it
// sets aside), its own dashboard and outputs; the first join is unchanged.
// The stack is settingsVariant, whose pipelines directory is the
// repository's with orders-payments.json added (and its aggregations
// changed, which no join reads).
func TestJoinFileAddsAJoin(t *testing.T) {
	v := settingsVariant.get(t)
	dir, s, tmpl := v.pipelinesDir, v.stack, v.tmpl
	var names []string
	for _, j := range s.Joins {
		names = append(names, j.Config.Name)
	}
	if want := []string{"orders-payments", "search-click"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("joins %v, want %v", names, want)
	}

	seen := map[string]string{}
	for _, tc := range []struct{ name, left, right string }{{"orders-payments", "order_placed", "payment"}, {"search-click", "search", "click"}} {
		fnID, fn := tmpl.pipelineFunction(t, FunctionJoin, tc.name)
		if other, ok := seen[fnID]; ok {
			t.Fatalf("joins %s and %s share function %s", other, tc.name, fnID)
		}
		seen[fnID] = tc.name
		env := fn.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(readFile(t, filepath.Join(dir, tc.name+".json")))); err != nil {
			t.Fatal(err)
		}
		if env[EnvJoinConfig] != want.String() {
			t.Errorf("%s: JOIN_CONFIG %v, want its file %s", tc.name, env[EnvJoinConfig], want.String())
		}
		m := tmpl.mappingOf(t, fnID)
		assertProps(t, tc.name+" mapping", m.Properties, map[string]any{
			"FilterCriteria": nil, // every record, so its tick sees the shard's progress (TestStreamJoin)
		})
		for _, v := range []string{EnvJoinStateTableName, EnvJoinsStreamName} {
			id := env[v].(map[string]any)["Ref"].(string)
			if other, ok := seen[id]; ok {
				t.Errorf("joins %s and %s share %s %s", other, tc.name, v, id)
			}
			seen[id] = tc.name
		}
		assertTick(t, tmpl, fnID, logicalID(s.Stack, s.TickerFailures))

		// Alarms of its own: errors, throttles, iterator age on its
		// function, records set aside on its own series.
		kinds := map[string]bool{}
		for _, a := range tmpl.ofType("AWS::CloudWatch::Alarm") {
			dims, _ := json.Marshal(a.Properties["Dimensions"])
			switch {
			case strings.Contains(string(dims), `"Ref":"`+fnID+`"`):
				kinds[a.Properties["MetricName"].(string)] = true
			case strings.Contains(string(dims), `"Value":"`+tc.name+`"`) && strings.Contains(string(dims), `"Value":"join"`):
				kinds[a.Properties["MetricName"].(string)] = true
			}
		}
		for _, k := range []string{"Errors", "Throttles", "IteratorAge", "RecordsSetAside"} {
			if !kinds[k] {
				t.Errorf("%s: no %s alarm of its own (it has %v)", tc.name, k, kinds)
			}
		}

		// A dashboard of its own, showing its function.
		var boards []string
		for id, d := range tmpl.ofType("AWS::CloudWatch::Dashboard") {
			body, _ := json.Marshal(d.Properties["DashboardBody"])
			if strings.Contains(string(body), `"Ref":"`+fnID+`"`) && strings.Contains(string(body), "Join "+tc.name) {
				boards = append(boards, id)
			}
		}
		if len(boards) != 1 {
			t.Errorf("%s: %d dashboards show its function under its name, want 1 (%v)", tc.name, len(boards), boards)
		}
		for _, o := range []string{"JoinsStreamName", "JoinStateTableName", "DashboardName"} {
			if _, ok := tmpl.Outputs[exportedName(tc.name)+o]; !ok {
				t.Errorf("no output %s%s", exportedName(tc.name), o)
			}
		}
	}
}

// TestOperatorFilesKeepDeployedIDs: the join and the detection deployed
// before they were pipeline files (infra/tributary/join.json and cep.json)
// keep every logical id, so updating a deployed stack keeps their tables,
// streams, consumer, mappings and the rules URL instead of replacing them.
// testdata/deployed-operator-ids.json lists the resources under
// SearchClickJoin/ and Detection/ in the template synthesized before the
// move.
func TestOperatorFilesKeepDeployedIDs(t *testing.T) {
	var want map[string]string
	if err := json.Unmarshal([]byte(readFile(t, "testdata/deployed-operator-ids.json")), &want); err != nil {
		t.Fatal(err)
	}
	if len(want) < 20 {
		t.Fatalf("testdata lists %d resources", len(want))
	}
	for id, typ := range want {
		r, ok := fx.tmpl.Resources[id]
		switch {
		case !ok:
			t.Errorf("%s (%s) is gone from the template: a deployed stack would replace it", id, typ)
		case r.Type != typ:
			t.Errorf("%s is a %s, was a %s", id, r.Type, typ)
		}
	}
}

// TestBadOperatorFileStopsSynth: a join or CEP file the function would
// refuse at init stops synth, naming the file and the field.
func TestBadOperatorFileStopsSynth(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"orders-payments", `{"kind": "join", "name": "orders-payments", "left": "order", "right": "order", "within": "10m"}`,
			`orders-payments.json: right: "order" is the left type too`},
		{"orders-payments", `{"kind": "join", "name": "orders-payments", "left": "order", "right": "payment", "within": "20h", "allowedLateness": "5h"}`,
			"orders-payments.json: within: within + before + allowedLateness is 25h0m0s"},
		{"orders-payments", `{"kind": "join", "name": "orders-payments", "left": "order", "right": "payment", "within": "10m", "key": "data.orderId"}`,
			"orders-payments.json: partitionKeyIsJoinKey: "},
		{"orders-payments", `{"kind": "join", "name": "orders-payments", "left": "order", "right": "payment", "withn": "10m"}`,
			`orders-payments.json: withn: unknown field; did you mean "within"?`},
		{"fraud", `{"kind": "cep", "name": "fraud", "outOfOrderness": "2h"}`,
			`fraud.json: outOfOrderness: "2h": want a whole number of milliseconds from 0s to 1h0m0s`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			dir := repoDirWith(t, map[string]string{tc.name: tc.doc})
			assets := t.TempDir()
			writeDummyAssets(assets)
			app := newTestApp(t.TempDir(), map[string]any{ContextPipelinesDir: dir, ContextAssetDir: assets})
			_, err := NewTributaryStack(app, StackID, nil)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, tc.want)) {
				t.Errorf("NewTributaryStack = %v, want an error containing %q", err, filepath.Join(dir, tc.want))
			}
		})
	}
}

// TestJoinFromFileIsStrict: a join file the stack and the function would
// read differently (a key twice) or that is not UTF-8 is refused naming the
// file and the field.
func TestJoinFromFileIsStrict(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"kind":"join","name":"j","left":"search","right":"click","left":"view","within":"1m"}`, `j.json: left: duplicate object key "left"`},
		{`{"kind":"join","name":"j","left":"sea` + "\xff" + `rch","right":"click","within":"1m"}`, "j.json: left: invalid UTF-8"},
		{`{"kind":"join","name":"j","left":"search\ud800","right":"click","within":"1m"}`, "j.json: left: invalid UTF-8"},
	} {
		f, err := pipeline.NewFile("j.json", []byte(tc.doc))
		if err == nil {
			_, err = JoinFromFile(f)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.doc, err, tc.want)
		}
	}
	f, err := pipeline.NewFile("j.json", []byte(`{"kind":"join","name":"j","left":"search","right":"click","within":"1m"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := JoinFromFile(f); err != nil || c.Left != "search" || c.Path != "j.json" {
		t.Errorf("a valid join: %+v %v", c, err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
