package template

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	eventsARN = "arn:aws:events:us-east-1:123456789012:rule/"
	jobsURL   = "https://sqs.us-east-1.amazonaws.com/123456789012/Tributary-Jobs9C8D7E6F"
)

func planSchedules(t *testing.T) *Deployment {
	t.Helper()
	d, err := Plan(mustLoad(t, "testdata/schedules.template.json"), ProvisionOptions{Stack: "Tributary"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSchedules(t *testing.T) {
	d := planSchedules(t)
	got, err := d.Schedules()
	if err != nil {
		t.Fatal(err)
	}
	want := []ScheduleSpec{
		{
			LogicalID:  "HourlyReport4E5F6A7B",
			Name:       "Tributary-hourly",
			ARN:        eventsARN + "Tributary-hourly",
			Expression: "rate(2 hours)",
			Rate:       2 * time.Hour,
			// The queue target is left out (noted); Input is resolved.
			Targets: []ScheduleTarget{
				{ID: "Report", FunctionLogicalID: "ReportFn5E6F7A8B", Input: `{"table":"` + jobsURL + `"}`},
				{ID: "Detail", FunctionLogicalID: "TickerFn1A2B3C4D", InputPath: "$.detail"},
			},
		},
		{
			LogicalID:  "TickerSchedule0A1B2C3D",
			Name:       "Tributary-TickerSchedule0A1B2C3D",
			ARN:        eventsARN + "Tributary-TickerSchedule0A1B2C3D",
			Expression: "rate(1 minute)",
			Rate:       time.Minute,
			Targets:    []ScheduleTarget{{ID: "Target0", FunctionLogicalID: "TickerFn1A2B3C4D"}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Schedules() =\n%+v\nwant\n%+v", got, want)
	}
}

// TestScheduledRulesInSkippedAndNotes: a rule the runner plays is listed as
// run by the runner, like functions and mappings; every other rule says why
// it does not run, and where a user would expect it to run, a note says so.
func TestScheduledRulesInSkippedAndNotes(t *testing.T) {
	d := planSchedules(t)
	skipped := map[string]Skipped{}
	for _, s := range d.Skipped() {
		skipped[s.LogicalID] = s
	}
	tests := []struct {
		id       string
		byRunner bool
		reason   string
		note     string // "" for none naming the rule
	}{
		{"TickerSchedule0A1B2C3D", true, "played by the local runner's schedules", ""},
		{"HourlyReport4E5F6A7B", true, "played by the local runner's schedules",
			"rule HourlyReport4E5F6A7B: target Queue is not a Lambda function; only Lambda targets are invoked locally"},
		{"Nightly8C9D0E1F", false, "schedule cron(0 3 * * ? *) is not played locally",
			"rule Nightly8C9D0E1F: schedule cron(0 3 * * ? *) is not played locally (only rate(...) expressions are); invoke ReportFn5E6F7A8B by hand to run it"},
		{"Paused2A3B4C5D", false, "the rule is DISABLED", ""},
		{"OnUpload6E7F8A9B", false, "EventBridge rules on event patterns are not emulated", ""},
		{"QueueOnly0C1D2E3F", false, "no Lambda target",
			"rule QueueOnly0C1D2E3F: target Jobs is not a Lambda function"},
		{"Transformed4A5B6C7D", false, "no Lambda target",
			"rule Transformed4A5B6C7D: target Shaped has an InputTransformer, which is not applied locally; the target is not invoked"},
	}
	notes := d.Notes()
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			s, ok := skipped[tt.id]
			if !ok || s.RunByRunner != tt.byRunner || !strings.Contains(s.Reason, tt.reason) {
				t.Errorf("Skipped entry %+v (listed %v), want RunByRunner %v and a reason containing %q", s, ok, tt.byRunner, tt.reason)
			}
			var mine []string
			for _, n := range notes {
				if strings.HasPrefix(n, "rule "+tt.id+":") {
					mine = append(mine, n)
				}
			}
			switch {
			case tt.note == "" && len(mine) > 0:
				t.Errorf("notes %q, want none", mine)
			case tt.note != "" && (len(mine) != 1 || !strings.HasPrefix(mine[0], tt.note)):
				t.Errorf("notes %q, want one starting %q", mine, tt.note)
			}
		})
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		expr string
		want time.Duration
		err  string
	}{
		{"rate(1 minute)", time.Minute, ""},
		{"rate(5 minutes)", 5 * time.Minute, ""},
		{"rate(1 hour)", time.Hour, ""},
		{"rate(12 hours)", 12 * time.Hour, ""},
		{"rate(1 day)", 24 * time.Hour, ""},
		{"rate(7 days)", 7 * 24 * time.Hour, ""},
		{" rate( 2 hours ) ", 2 * time.Hour, ""},
		{"rate(1 minutes)", 0, "singular when the value is 1"},
		{"rate(5 minute)", 0, "plural when the value is above 1"},
		{"rate(0 minutes)", 0, "positive whole number"},
		{"rate(2 weeks)", 0, `unit "weeks" is not minute(s), hour(s) or day(s)`},
		{"rate(1.5 hours)", 0, "is not a rate expression"},
		{"cron(0 3 * * ? *)", 0, "is not a rate expression"},
		{"rate(99999999999999999999 minutes)", 0, "positive whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := ParseRate(tt.expr)
			switch {
			case tt.err == "" && (err != nil || got != tt.want):
				t.Errorf("ParseRate = %v, %v; want %v", got, err, tt.want)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("ParseRate = %v, %v; want an error containing %q", got, err, tt.err)
			}
		})
	}
}

func TestSchedulesRejects(t *testing.T) {
	const fn = `"Fn":{"Type":"AWS::Lambda::Function"}`
	tests := []struct {
		name, tmpl, err string
	}{
		{
			name: "rate AWS refuses",
			tmpl: `{"Resources":{` + fn + `,"R":{"Type":"AWS::Events::Rule","Properties":{"ScheduleExpression":"rate(1 minutes)","Targets":[{"Id":"T","Arn":{"Fn::GetAtt":["Fn","Arn"]}}]}}}}`,
			err:  `Resources.R.Properties.ScheduleExpression: "rate(1 minutes)": the unit is singular`,
		},
		{
			name: "Input and InputPath",
			tmpl: `{"Resources":{` + fn + `,"R":{"Type":"AWS::Events::Rule","Properties":{"ScheduleExpression":"rate(1 minute)","Targets":[{"Id":"T","Arn":{"Fn::GetAtt":["Fn","Arn"]},"Input":"{}","InputPath":"$.detail"}]}}}}`,
			err:  "Resources.R.Properties.Targets[0]: Input and InputPath are both set",
		},
		{
			name: "function ARN from elsewhere",
			tmpl: `{"Resources":{` + fn + `,"R":{"Type":"AWS::Events::Rule","Properties":{"ScheduleExpression":"rate(1 minute)","Targets":[{"Id":"T","Arn":"arn:aws:lambda:us-east-1:123456789012:function:elsewhere"}]}}}}`,
			err:  `Resources.R.Properties.Targets[0].Arn: "arn:aws:lambda:us-east-1:123456789012:function:elsewhere" is not a function of this template`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := Parse([]byte(tt.tmpl))
			if err != nil {
				t.Fatal(err)
			}
			d, err := Plan(tmpl, ProvisionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Schedules()
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Schedules: %v, want an error containing %q", err, tt.err)
			}
		})
	}
}
