package tributary

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"
)

// TestViewsRegistry: the parameter's initial value is the views table; each
// reader gets its name and refresh interval in env, may read it (and only
// read it), and may use the rebuilt versions <views>-v* as it uses views.
func TestViewsRegistry(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("Registry"), nil)
	views := awsdynamodb.NewTable(stack, jsii.String("Views"), &awsdynamodb.TableProps{
		PartitionKey:                     &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:                          &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:                      awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: jsii.Bool(true)},
	})
	agg := NewGoFunction(stack, "Agg", GoFunctionProps{Name: FunctionAggregate, AssetDir: assets})
	tick := NewGoFunction(stack, "Tick", GoFunctionProps{Name: FunctionTicker, AssetDir: assets})
	other := NewGoFunction(stack, "Other", GoFunctionProps{Name: FunctionIngest, AssetDir: assets})
	r := NewViewsRegistry(stack, "ViewsRegistry", views, agg, tick)
	addNag(app)
	tmpl := templateOf(stack)

	paramID := logicalID(stack, r.Parameter)
	param, ok := tmpl.Resources[paramID]
	if !ok || param.Type != "AWS::SSM::Parameter" {
		t.Fatalf("no AWS::SSM::Parameter %s", paramID)
	}
	viewsID := logicalID(stack, views)
	assertProps(t, "parameter", param.Properties, map[string]any{"Type": "String", "Value": ref(viewsID), "Tier": "Standard"})

	for _, name := range []string{FunctionAggregate, FunctionTicker} {
		_, fn := tmpl.function(t, name)
		env, _ := fn.Properties["Environment"].(map[string]any)
		assertProps(t, name+" environment", env, map[string]any{"Variables": map[string]any{
			EnvViewsParameterName: ref(paramID),
			EnvViewsRefresh:       "30",
		}})
	}
	_, ing := tmpl.function(t, FunctionIngest)
	if env, _ := ing.Properties["Environment"].(map[string]any); env != nil {
		if vars, _ := env["Variables"].(map[string]any); vars[EnvViewsParameterName] != nil {
			t.Errorf("a function not passed as a reader got %s", EnvViewsParameterName)
		}
	}

	for _, fn := range []*GoFunction{agg, tick} {
		grants := tmpl.grants(logicalID(stack, fn.Role))
		var ssmGrants []string
		for g := range grants {
			if strings.HasPrefix(g, "ssm:") {
				ssmGrants = append(ssmGrants, g)
			}
		}
		if len(ssmGrants) != 1 || !strings.HasPrefix(ssmGrants[0], "ssm:GetParameter ") || !strings.Contains(ssmGrants[0], "parameter/") || !strings.Contains(ssmGrants[0], paramID) {
			t.Errorf("%s: ssm grants %v, want only ssm:GetParameter on the parameter", fn.Name, ssmGrants)
		}
		for _, g := range []string{
			"dynamodb:UpdateItem " + viewsID + ".Arn-v*",
			"dynamodb:GetItem " + viewsID + ".Arn-v*",
			"dynamodb:Query " + viewsID + ".Arn-v*",
			"dynamodb:Query " + viewsID + ".Arn-v*/index/" + ViewsOpenIndex,
		} {
			if !grants[g] {
				t.Errorf("%s: role lacks %s; it has %v", fn.Name, g, grants)
			}
		}
		if grants["dynamodb:DeleteTable "+viewsID+".Arn-v*"] || grants["dynamodb:CreateTable "+viewsID+".Arn-v*"] {
			t.Errorf("%s may create or delete versions: that is the operator's replay, not the function's", fn.Name)
		}
	}
	for g := range tmpl.grants(logicalID(stack, other.Role)) {
		if strings.HasPrefix(g, "ssm:") || strings.Contains(g, viewsID) {
			t.Errorf("a function not passed as a reader may %s", g)
		}
	}

	t.Run("cdk-nag", func(t *testing.T) {
		errs, warns := nagFindings(stack)
		for _, e := range append(errs, warns...) {
			t.Errorf("cdk-nag: %s", e)
		}
	})
}
