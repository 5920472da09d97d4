package template

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ScheduleSpec is an enabled AWS::Events::Rule with a rate(...) schedule and
// Lambda targets, as the local runner plays it: every Rate it invokes each
// target with an EventBridge "Scheduled Event".
type ScheduleSpec struct {
	LogicalID string
	// Name is the rule's physical name; ARN its ARN, which the scheduled
	// event lists in resources.
	Name, ARN string
	// Expression is the ScheduleExpression as written, e.g. "rate(1 minute)".
	Expression string
	Rate       time.Duration
	// Targets are the rule's Lambda targets; targets of other kinds are
	// left out, with a note (see Deployment.Notes).
	Targets []ScheduleTarget
}

// ScheduleTarget is one Lambda target of a scheduled rule.
type ScheduleTarget struct {
	// ID is the target's Id within the rule.
	ID string
	// FunctionLogicalID is the function the target invokes.
	FunctionLogicalID string
	// Input, when not empty, is the constant JSON the target gets instead of
	// the event. InputPath, when not empty, is the JSONPath of the part of
	// the event the target gets ("$.detail"). At most one is set.
	Input     string
	InputPath string
}

// rulePlay is what Plan decided about a rule: played by the runner, or
// skipped with a reason; notes say where the local run differs from AWS.
type rulePlay struct {
	played bool
	reason string
	notes  []string
}

// classifyRule decides, from the rule's properties as written, whether the
// local runner plays it. Only what cannot be resolved yet is left to
// Schedules, which reports it as an error.
func (d *Deployment) classifyRule(id string) rulePlay {
	p := d.t.Resources[id].Properties
	expr, hasExpr := p["ScheduleExpression"]
	if !hasExpr {
		return rulePlay{reason: "EventBridge rules on event patterns are not emulated; only rate(...) schedules are played"}
	}
	if state, _ := p["State"].(string); state == "DISABLED" {
		return rulePlay{reason: "the rule is DISABLED; AWS does not run it either"}
	}
	s, ok := expr.(string)
	if !ok {
		// Written with intrinsics: resolvable now unless it refers to what
		// only Provision learns, in which case Schedules reports it.
		var err error
		if s, err = d.resolveString(expr, "Resources."+id+".Properties.ScheduleExpression"); err != nil {
			s = "rate(?)"
		}
	}
	if !strings.HasPrefix(strings.TrimSpace(s), "rate(") {
		return rulePlay{
			reason: fmt.Sprintf("schedule %s is not played locally; only rate(...) schedules are", s),
			notes: []string{fmt.Sprintf("rule %s: schedule %s is not played locally (only rate(...) expressions are); invoke %s by hand to run it",
				id, s, strings.Join(d.lambdaTargetNames(p), ", "))},
		}
	}
	var out rulePlay
	targets, _ := p["Targets"].([]any)
	lambdas := 0
	for i, t := range targets {
		m, _ := t.(map[string]any)
		tid, _ := m["Id"].(string)
		if tid == "" {
			tid = strconv.Itoa(i)
		}
		switch {
		case !d.isLambdaTarget(m["Arn"]):
			out.notes = append(out.notes, fmt.Sprintf("rule %s: target %s is not a Lambda function; only Lambda targets are invoked locally", id, tid))
		case m["InputTransformer"] != nil:
			out.notes = append(out.notes, fmt.Sprintf("rule %s: target %s has an InputTransformer, which is not applied locally; the target is not invoked", id, tid))
		default:
			lambdas++
		}
	}
	if lambdas == 0 {
		out.reason = "the schedule has no Lambda target the runner can invoke"
		return out
	}
	out.played = true
	out.reason = "played by the local runner's schedules"
	return out
}

// isLambdaTarget reports whether a target's Arn (as written) is a function
// of the template or a Lambda function ARN.
func (d *Deployment) isLambdaTarget(arn any) bool {
	for _, ref := range d.t.refsOf(arn) {
		switch d.t.Resources[ref].Type {
		case "AWS::Lambda::Function", "AWS::Lambda::Alias", "AWS::Lambda::Version":
			return true
		}
	}
	s, ok := arn.(string)
	return ok && strings.Contains(s, ":lambda:") && strings.Contains(s, ":function:")
}

// lambdaTargetNames names the functions a rule targets, by logical id, for
// notes.
func (d *Deployment) lambdaTargetNames(p map[string]any) []string {
	var names []string
	targets, _ := p["Targets"].([]any)
	for _, t := range targets {
		m, _ := t.(map[string]any)
		for _, ref := range d.t.refsOf(m["Arn"]) {
			if d.t.Resources[ref].Type == "AWS::Lambda::Function" {
				names = append(names, ref)
			}
		}
	}
	if len(names) == 0 {
		return []string{"its targets"}
	}
	return names
}

// Schedules returns the template's scheduled rules that the local runner
// plays, in logical id order: enabled rules (State ENABLED or absent) with a
// rate(...) ScheduleExpression and at least one Lambda target. Rules it does
// not play are in Skipped, and what a local run leaves out of a rule (a cron
// schedule, a target that is not a function) is in Notes.
//
// A rate expression is refused as AWS refuses it: the value is a positive
// whole number and the unit minute, hour or day — singular for 1, plural
// otherwise ("rate(1 minute)", "rate(5 minutes)").
func (d *Deployment) Schedules() ([]ScheduleSpec, error) {
	var out []ScheduleSpec
	for _, id := range d.idsOfType("AWS::Events::Rule") {
		if !d.ruleIsPlayed(id) {
			continue
		}
		pr, err := d.resolvedProps(id)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		ph := d.res[id]
		s := ScheduleSpec{LogicalID: id, Name: ph.name, ARN: ph.attrs["Arn"]}
		d.mu.Unlock()
		if s.Expression, err = pr.str("ScheduleExpression"); err != nil {
			return nil, err
		}
		if s.Rate, err = ParseRate(s.Expression); err != nil {
			return nil, fmt.Errorf("template: %s: %w", pr.at("ScheduleExpression"), err)
		}
		targets, err := pr.objs("Targets")
		if err != nil {
			return nil, err
		}
		raw, _ := d.t.Resources[id].Properties["Targets"].([]any)
		for i, tp := range targets {
			var rawArn any
			if i < len(raw) {
				m, _ := raw[i].(map[string]any)
				rawArn = m["Arn"]
			}
			if !d.isLambdaTarget(rawArn) || tp.has("InputTransformer") {
				continue // noted by Plan
			}
			t := ScheduleTarget{}
			if t.ID, err = tp.str("Id"); err != nil {
				return nil, err
			}
			if t.FunctionLogicalID, err = d.functionOf(rawArn, tp, "Arn"); err != nil {
				return nil, err
			}
			if t.Input, err = tp.str("Input"); err != nil {
				return nil, err
			}
			if t.InputPath, err = tp.str("InputPath"); err != nil {
				return nil, err
			}
			if t.Input != "" && t.InputPath != "" {
				return nil, fmt.Errorf("template: %s: Input and InputPath are both set; a target takes at most one", tp.path)
			}
			s.Targets = append(s.Targets, t)
		}
		out = append(out, s)
	}
	return out, nil
}

func (d *Deployment) ruleIsPlayed(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.playedRules[id]
}

var rateRE = regexp.MustCompile(`^rate\(\s*(\d+)\s+([a-z]+)\s*\)$`)

// ParseRate reads an EventBridge rate expression: "rate(1 minute)",
// "rate(5 minutes)", "rate(1 hour)", "rate(2 days)".
func ParseRate(expr string) (time.Duration, error) {
	m := rateRE.FindStringSubmatch(strings.TrimSpace(expr))
	if m == nil {
		return 0, fmt.Errorf("%q is not a rate expression such as \"rate(5 minutes)\"", expr)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q: the value must be a positive whole number", expr)
	}
	units := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}
	unit, plural := strings.CutSuffix(m[2], "s")
	per, ok := units[unit]
	if !ok {
		return 0, fmt.Errorf("%q: unit %q is not minute(s), hour(s) or day(s)", expr, m[2])
	}
	switch {
	case n == 1 && plural:
		return 0, fmt.Errorf("%q: the unit is singular when the value is 1 (%s)", expr, unit)
	case n > 1 && !plural:
		return 0, fmt.Errorf("%q: the unit is plural when the value is above 1 (%ss)", expr, unit)
	}
	return time.Duration(n) * per, nil
}
