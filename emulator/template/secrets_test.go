package template

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// secretsTemplate is the shape infra's ingest synthesizes in signed mode (a
// generated secret whose ARN a function reads), plus a JSON secret and one
// with a fixed value.
const secretsTemplate = `{"Resources": {
  "IngestSigningSecret": {"Type": "AWS::SecretsManager::Secret", "Properties": {
    "Description": "signs ingest requests",
    "GenerateSecretString": {"ExcludePunctuation": true, "IncludeSpace": false, "PasswordLength": 64}}},
  "DbCredentials": {"Type": "AWS::SecretsManager::Secret", "Properties": {
    "Name": {"Fn::Sub": "${AWS::StackName}/db"},
    "GenerateSecretString": {"SecretStringTemplate": "{\"username\":\"app\"}", "GenerateStringKey": "password", "PasswordLength": 20}}},
  "Fixed": {"Type": "AWS::SecretsManager::Secret", "Properties": {"SecretString": "not-so-secret"}},
  "Fn": {"Type": "AWS::Lambda::Function", "Metadata": {"tributary:function": "ingest"}, "Properties": {
    "Environment": {"Variables": {
      "INGEST_SECRET_ARN": {"Ref": "IngestSigningSecret"},
      "DB_SECRET": {"Fn::GetAtt": ["DbCredentials", "Id"]}}}}}
}}`

func TestProvisionSecrets(t *testing.T) {
	t.Parallel()
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	tmpl, err := Parse([]byte(secretsTemplate))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Provision(ctx, cfg, tmpl, ProvisionOptions{Stack: "Trib"})
	if err != nil {
		t.Fatal(err)
	}
	sm := secretsmanager.NewFromConfig(cfg)
	value := func(ref any) string {
		t.Helper()
		arn, err := d.Resolve(ref)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(arn, "arn:aws:secretsmanager:") {
			t.Errorf("%v resolves to %q, want the secret's ARN", ref, arn)
		}
		out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
		if err != nil {
			t.Fatalf("GetSecretValue(%s): %v", arn, err)
		}
		return aws.ToString(out.SecretString)
	}

	signing := value(map[string]any{"Ref": "IngestSigningSecret"})
	if !regexp.MustCompile(`^[A-Za-z0-9]{64}$`).MatchString(signing) {
		t.Errorf("generated secret %q: want 64 letters and digits (ExcludePunctuation, no space)", signing)
	}
	var db map[string]string
	if err := json.Unmarshal([]byte(value(map[string]any{"Fn::GetAtt": []any{"DbCredentials", "Id"}})), &db); err != nil || db["username"] != "app" || len(db["password"]) != 20 {
		t.Errorf("JSON secret = %v (%v), want username app and a 20-character password", db, err)
	}
	if got := value(map[string]any{"Ref": "Fixed"}); got != "not-so-secret" {
		t.Errorf("fixed secret = %q", got)
	}
	if _, err := sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String("Trib/db")}); err != nil {
		t.Errorf("the named secret Trib/db: %v", err)
	}

	// The function reads the ARN from its environment.
	fns, err := d.Functions()
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) != 1 || !strings.Contains(fns[0].Env["INGEST_SECRET_ARN"], ":secret:Trib-IngestSigningSecret") {
		t.Errorf("functions %+v: want INGEST_SECRET_ARN resolved to the secret's ARN", fns)
	}
	for _, s := range d.Skipped() {
		if strings.HasPrefix(s.Type, "AWS::SecretsManager::") {
			t.Errorf("skipped %+v: want it provisioned", s)
		}
	}

	// A second Provision keeps the value producers already hold.
	d2, err := Provision(ctx, cfg, tmpl, ProvisionOptions{Stack: "Trib"})
	if err != nil {
		t.Fatal(err)
	}
	d = d2
	if got := value(map[string]any{"Ref": "IngestSigningSecret"}); got != signing {
		t.Errorf("after a second Provision the secret is %q, want %q kept", got, signing)
	}
}

// Both a value and a generator is refused before any call.
func TestProvisionSecretRefusesTwoValues(t *testing.T) {
	t.Parallel()
	tmpl, err := Parse([]byte(`{"Resources": {"S": {"Type": "AWS::SecretsManager::Secret", "Properties": {"SecretString": "x", "GenerateSecretString": {}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Provision(context.Background(), aws.Config{Region: "us-east-1"}, tmpl, ProvisionOptions{})
	if err == nil || !strings.Contains(err.Error(), "Resources.S.Properties: a secret has SecretString or GenerateSecretString, not both") {
		t.Errorf("err %v, want one naming Resources.S.Properties", err)
	}
}
