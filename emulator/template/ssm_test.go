package template

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// ssmTemplate is the shape infra's NewViewsRegistry synthesizes: a String
// parameter whose value is the views table's name, read by a function.
const ssmTemplate = `{"Resources": {
  "Views": {"Type": "AWS::DynamoDB::Table", "Properties": {
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
    "BillingMode": "PAY_PER_REQUEST"}},
  "CurrentViews": {"Type": "AWS::SSM::Parameter", "Properties": {
    "Name": {"Fn::Sub": "/tributary/${AWS::StackName}/current-views"},
    "Type": "String", "Value": {"Ref": "Views"}, "Description": "the views table the functions use"}},
  "Unnamed": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "StringList", "Value": "a,b"}},
  "Fn": {"Type": "AWS::Lambda::Function", "Properties": {
    "Environment": {"Variables": {"VIEWS_PARAMETER_NAME": {"Ref": "CurrentViews"}}}}}
}}`

func TestProvisionSSMParameter(t *testing.T) {
	t.Parallel()
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	tmpl, err := Parse([]byte(ssmTemplate))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Provision(ctx, cfg, tmpl, ProvisionOptions{Stack: "Trib"})
	if err != nil {
		t.Fatal(err)
	}
	const name = "/tributary/Trib/current-views"
	sc := ssm.NewFromConfig(cfg)
	got, err := sc.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	if err != nil {
		t.Fatalf("parameter %s: %v", name, err)
	}
	if aws.ToString(got.Parameter.Value) != "Trib-Views" || got.Parameter.Type != ssmtypes.ParameterTypeString {
		t.Errorf("parameter = %s %q, want String Trib-Views (the table's physical name)", got.Parameter.Type, aws.ToString(got.Parameter.Value))
	}
	for _, c := range []struct {
		in   any
		want string
	}{
		{map[string]any{"Ref": "CurrentViews"}, name},
		{map[string]any{"Fn::GetAtt": []any{"CurrentViews", "Value"}}, "Trib-Views"},
		{map[string]any{"Fn::GetAtt": []any{"CurrentViews", "Type"}}, "String"},
		{map[string]any{"Ref": "Unnamed"}, "Trib-Unnamed"},
	} {
		if v, err := d.Resolve(c.in); err != nil || v != c.want {
			t.Errorf("Resolve(%v) = %q, %v; want %q", c.in, v, err, c.want)
		}
	}
	if list, err := sc.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("Trib-Unnamed")}); err != nil || list.Parameter.Type != ssmtypes.ParameterTypeStringList {
		t.Errorf("generated-name StringList parameter: %+v %v", list, err)
	}
	for _, s := range d.Skipped() {
		if strings.HasPrefix(s.Type, "AWS::SSM::") {
			t.Errorf("skipped %+v: want it provisioned", s)
		}
	}

	// A replay swaps the value; provisioning again keeps it.
	if _, err := sc.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String("Trib-Views-v2"), Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	d2, err := Provision(ctx, cfg, tmpl, ProvisionOptions{Stack: "Trib"})
	if err != nil {
		t.Fatal(err)
	}
	got, err = sc.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	if err != nil || aws.ToString(got.Parameter.Value) != "Trib-Views-v2" {
		t.Errorf("after a second Provision the parameter is %v (%v), want the swapped Trib-Views-v2 kept", got, err)
	}
	if v, _ := d2.Resolve(map[string]any{"Fn::GetAtt": []any{"CurrentViews", "Value"}}); v != "Trib-Views-v2" {
		t.Errorf("GetAtt Value after the swap = %q, want Trib-Views-v2", v)
	}
	if notes := strings.Join(d2.Notes(), "\n"); !strings.Contains(notes, "kept its value Trib-Views-v2") {
		t.Errorf("notes %q: want one saying the parameter kept its changed value", notes)
	}
}

// The type is checked before any call, so no endpoint is needed.
func TestProvisionSSMParameterRefusesSecureString(t *testing.T) {
	t.Parallel()
	cfg := aws.Config{Region: "us-east-1"}
	tmpl, err := Parse([]byte(`{"Resources": {"P": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "SecureString", "Value": "x"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Provision(context.Background(), cfg, tmpl, ProvisionOptions{})
	if err == nil || !strings.Contains(err.Error(), "Resources.P.Properties.Type") {
		t.Errorf("err %v, want one naming Resources.P.Properties.Type", err)
	}
}
