package tributary

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestSavedQueries: the pipeline has its four saved Logs Insights queries,
// named in a folder per pipeline: the results of a key (a parameter) and
// the top keys over the log groups of the functions that log its results
// (aggregate, ticker); a record's path by event id (a parameter) and the
// records set aside over every function's log group.
func TestSavedQueries(t *testing.T) {
	groups := functionLogGroupIDs(t)
	refs := func(names ...string) []any {
		var out []any
		for _, n := range names {
			out = append(out, ref(groups[n]))
		}
		return out
	}
	// Every function's log group, in stackFunctions' order.
	var all []any
	for _, fn := range stackFunctions(fx.stack.Stack) {
		all = append(all, ref(logicalID(fx.stack.Stack, fn.fn.LogGroup())))
	}
	byName := map[string]cfnResource{}
	for _, q := range fx.tmpl.ofType("AWS::Logs::QueryDefinition") {
		byName[q.Properties["Name"].(string)] = q
	}
	for _, c := range []struct {
		name   string
		groups []any
		query  []string // lines of the query, each exactly
		param  string
	}{
		{"Tributary/pageviews/results of a key over a time range", refs(FunctionAggregate, FunctionTicker), []string{
			"fields @timestamp, resultType, window, start, end, revision, count, sum, mean, min, max, p50, p99",
			`| filter msg = "window result" and pipeline = "pageviews" and key = "{{key}}"`,
			"| sort start asc", "| limit 10000"}, "key"},
		{"Tributary/pageviews/top keys by count in the last hour", refs(FunctionAggregate, FunctionTicker), []string{
			`filter msg = "window result" and pipeline = "pageviews" and window = "tumbling:1m0s"`,
			"| stats sum(countDelta) as events, count(*) as results by key", "| sort events desc", "| limit 20"}, ""},
		{"Tributary/pageviews/a record's path by event id", all, []string{
			"fields @timestamp, @log, level, msg, key, id, shard, sequenceNumber, field, reason, error",
			`| filter @message like "{{eventId}}"`, "| sort @timestamp asc", "| limit 1000"}, "eventId"},
		{"Tributary/pageviews/records set aside or quarantined, and why", all, []string{
			"fields @timestamp, @log, msg, function, source, shard, sequenceNumber, messageId, field, kind, reason, condition, error",
			"| filter msg like " + setAsideMessages, "| sort @timestamp desc", "| limit 1000"}, ""},
	} {
		q, ok := byName[c.name]
		if !ok {
			t.Errorf("no saved query %q; have %v", c.name, keysOf(byName))
			continue
		}
		if !reflect.DeepEqual(q.Properties["LogGroupNames"], c.groups) {
			t.Errorf("%s reads %v, want %v", c.name, q.Properties["LogGroupNames"], c.groups)
		}
		if got := q.Properties["QueryString"]; got != strings.Join(c.query, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", c.name, got, strings.Join(c.query, "\n"))
		}
		params := asList(q.Properties["Parameters"])
		switch {
		case c.param == "" && len(params) > 0:
			t.Errorf("%s has parameters %v", c.name, params)
		case c.param != "" && (len(params) != 1 || params[0].(map[string]any)["Name"] != c.param || params[0].(map[string]any)["Description"] == nil):
			t.Errorf("%s: parameters %v, want one described, named %s", c.name, params, c.param)
		}
	}
	if want := 4 * len(fx.stack.Pipelines.Pipelines); len(byName) != want {
		t.Errorf("%d saved queries, want 4 per pipeline, %d", len(byName), want)
	}
}

// The set-aside filter matches what each function logs when it gives a
// record up, and not the lines of records that went through.
func TestSetAsideMessages(t *testing.T) {
	re := strings.TrimSuffix(strings.TrimPrefix(setAsideMessages, "/"), "/")
	for msg, want := range map[string]bool{
		"record set aside": true, "quarantined": true, "failed batch not fully readable": true,
		"poison record: reported as a batch item failure": true, "event id reused with other content: refused, not applied": true,
		"unparseable message: left on the queue for its DLQ": true, "record cannot be joined": true,
		"change cannot become a changelog record": true, "record not applied to the timelines": true,
		"window result": false, "tick": false, "views table changed": false, "duplicate task: returning the stored result": false,
	} {
		if got := mustMatch(t, re, msg); got != want {
			t.Errorf("%q matched: %v, want %v", msg, got, want)
		}
	}
}

// TestTopKeysRule: the Contributor Insights rule ranks the pipeline's keys
// by the events their results add (countDelta, finals and corrections, in
// the tumbling windows), over the log groups that hold the results.
func TestTopKeysRule(t *testing.T) {
	all := fx.tmpl.ofType("AWS::CloudWatch::InsightRule")
	if len(all) != len(fx.stack.Pipelines.Pipelines) {
		t.Fatalf("%d Contributor Insights rules, want one per pipeline", len(all))
	}
	rules := map[string]cfnResource{}
	for id, r := range all {
		if tokenText(t, r.Properties["RuleName"]) == StackID+"-pageviews-top-keys" {
			rules[id] = r
		}
	}
	if len(rules) != 1 {
		t.Fatalf("no rule %s-pageviews-top-keys", StackID)
	}
	groups := functionLogGroupIDs(t)
	for id, r := range rules {
		if r.Properties["RuleState"] != "ENABLED" {
			t.Errorf("rule %s is %v", id, r.Properties["RuleState"])
		}
		var body map[string]any
		text := tokenText(t, r.Properties["RuleBody"])
		if err := json.Unmarshal([]byte(text), &body); err != nil {
			t.Fatalf("rule body is not JSON: %v\n%s", err, text)
		}
		want := map[string]any{
			"Schema":        map[string]any{"Name": "CloudWatchLogRule", "Version": 1.0},
			"AggregateOn":   "Sum",
			"LogFormat":     "JSON",
			"LogGroupNames": []any{"${" + groups[FunctionAggregate] + "}", "${" + groups[FunctionTicker] + "}"},
			"Contribution": map[string]any{
				"Keys":    []any{"$.key"},
				"ValueOf": "$.countDelta",
				"Filters": []any{
					map[string]any{"Match": "$.msg", "In": []any{"window result"}},
					map[string]any{"Match": "$.pipeline", "In": []any{"pageviews"}},
					map[string]any{"Match": "$.window", "In": []any{"tumbling:1m0s"}},
					map[string]any{"Match": "$.resultType", "In": []any{"final", "correction"}},
				},
			},
		}
		for k, w := range want {
			if !reflect.DeepEqual(body[k], w) {
				gj, _ := json.Marshal(body[k])
				wj, _ := json.Marshal(w)
				t.Errorf("rule body %s = %s, want %s", k, gj, wj)
			}
		}
		if len(body) != len(want) {
			t.Errorf("rule body has %d keys, want %d: %s", len(body), len(want), text)
		}
	}
}

func sortedFunctionNames() []string {
	var out []string
	for _, fn := range stackFunctions(fx.stack.Stack) {
		out = append(out, fn.name)
	}
	return out
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func mustMatch(t *testing.T, re, s string) bool {
	t.Helper()
	r, err := regexp.Compile(re)
	if err != nil {
		t.Fatalf("%s: %v", re, err)
	}
	return r.MatchString(s)
}
