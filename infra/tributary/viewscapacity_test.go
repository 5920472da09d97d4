package tributary

import "testing"

// TestViewsCapacity: the pipelines' views table is on demand by default
// (no scaling), and provisioned when the context gives it write capacity
// (settingsVariant: 230, read left to a quarter, 58): the table at that
// capacity, its open-windows index at 5 each, and every one of the four
// auto scaled between it and ten times it at 70 % utilization.
func TestViewsCapacity(t *testing.T) {
	views := func(tmpl cfnTemplate, s *TributaryStack) map[string]any {
		return tmpl.Resources[logicalID(s.Stack, s.Pipelines.Views)].Properties
	}
	if p := views(fx.tmpl, fx.stack); p["BillingMode"] != "PAY_PER_REQUEST" || p["ProvisionedThroughput"] != nil {
		t.Errorf("default views table: BillingMode %v, ProvisionedThroughput %v; want on demand", p["BillingMode"], p["ProvisionedThroughput"])
	}
	if n := len(fx.tmpl.ofType("AWS::ApplicationAutoScaling::ScalableTarget")); n != 0 {
		t.Errorf("default stack: %d scalable targets, want none", n)
	}

	v := settingsVariant.get(t)
	p := views(v.tmpl, v.stack)
	if p["BillingMode"] != nil && p["BillingMode"] != "PROVISIONED" {
		t.Errorf("views table BillingMode %v, want provisioned (CloudFormation's default when absent)", p["BillingMode"])
	}
	assertProps(t, "views table", p, map[string]any{
		"ProvisionedThroughput": map[string]any{"WriteCapacityUnits": 230.0, "ReadCapacityUnits": 58.0},
	})
	gsis, _ := p["GlobalSecondaryIndexes"].([]any)
	if len(gsis) != 1 {
		t.Fatalf("views indexes %v, want the open-windows index", gsis)
	}
	assertProps(t, "open-windows index", gsis[0].(map[string]any), map[string]any{
		"IndexName": ViewsOpenIndex, "ProvisionedThroughput": map[string]any{"WriteCapacityUnits": 5.0, "ReadCapacityUnits": 5.0},
	})
	type bounds struct{ min, max float64 }
	want := map[string]bounds{
		"dynamodb:table:WriteCapacityUnits": {230, 2300}, "dynamodb:table:ReadCapacityUnits": {58, 580},
		"dynamodb:index:WriteCapacityUnits": {5, 50}, "dynamodb:index:ReadCapacityUnits": {5, 50},
	}
	targets := v.tmpl.ofType("AWS::ApplicationAutoScaling::ScalableTarget")
	if len(targets) != len(want) {
		t.Fatalf("%d scalable targets, want %d", len(targets), len(want))
	}
	for id, tg := range targets {
		dim, _ := tg.Properties["ScalableDimension"].(string)
		b, ok := want[dim]
		if !ok || tg.Properties["MinCapacity"] != b.min || tg.Properties["MaxCapacity"] != b.max {
			t.Errorf("%s: %s from %v to %v; want %v", id, dim, tg.Properties["MinCapacity"], tg.Properties["MaxCapacity"], b)
		}
		delete(want, dim)
	}
	for id, pol := range v.tmpl.ofType("AWS::ApplicationAutoScaling::ScalingPolicy") {
		cfg, _ := pol.Properties["TargetTrackingScalingPolicyConfiguration"].(map[string]any)
		if cfg["TargetValue"] != 70.0 {
			t.Errorf("%s: target %v, want 70 %% utilization", id, cfg["TargetValue"])
		}
	}
	if n := len(v.tmpl.ofType("AWS::ApplicationAutoScaling::ScalingPolicy")); n != 4 {
		t.Errorf("%d scaling policies, want 4", n)
	}
}
