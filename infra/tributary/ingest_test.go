package tributary

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/jsii-runtime-go"
)

// ingestEnv is ingest's environment in the default (AWS_IAM) stack.
func ingestEnv(s *TributaryStack) map[string]any {
	return map[string]any{
		EnvEventsStreamName:       ref(logicalID(s.Stack, s.Events)),
		EnvIngestRoutes:           IngestRoutes,
		EnvIngestDropSample:       "100",
		EnvIngestIdempotencyTable: ref(logicalID(s.Stack, s.Ingest.Requests)),
		EnvIngestMaxEventAge:      "168h", // the events stream keeps records 7 days by default (tributary:eventsRetentionHours)
		EnvIngestAuth:             "AWS_IAM",
	}
}

// ingestTables is ingest's table for TestTables: the Idempotency-Key
// records, package idempotency's schema (id, TTL on expiration), on-demand
// (TestTables checks the billing mode and point-in-time recovery).
func ingestTables(s *TributaryStack) []struct {
	name  string
	id    string
	props map[string]any
} {
	return []struct {
		name  string
		id    string
		props map[string]any
	}{{
		name: "IngestRequests",
		id:   logicalID(s.Stack, s.Ingest.Requests),
		props: map[string]any{
			"KeySchema":               []any{map[string]any{"AttributeName": "id", "KeyType": "HASH"}},
			"AttributeDefinitions":    []any{map[string]any{"AttributeName": "id", "AttributeType": "S"}},
			"GlobalSecondaryIndexes":  nil,
			"StreamSpecification":     nil,
			"TimeToLiveSpecification": map[string]any{"AttributeName": "expiration", "Enabled": true},
		},
	}}
}

// TestIngestRequestsTable: the records' table is on-demand (a request costs
// two writes, whatever the traffic), expires records by TTL, goes with the
// stack (records live a day), and is an output.
func TestIngestRequestsTable(t *testing.T) {
	s := fx.stack
	id := logicalID(s.Stack, s.Ingest.Requests)
	r := fx.tmpl.Resources[id]
	assertProps(t, id, r.Properties, map[string]any{
		"BillingMode":             "PAY_PER_REQUEST",
		"TimeToLiveSpecification": map[string]any{"AttributeName": "expiration", "Enabled": true},
	})
	if got := fx.tmpl.Outputs["IngestRequestsTableName"].Value; !reflect.DeepEqual(got, ref(id)) {
		t.Errorf("output IngestRequestsTableName = %v, want the table", got)
	}
	// Like every table (ProtectState), it is kept on destroy: a producer
	// retrying against a redeployed stack still gets its first answer.
	if r.DeletionPolicy != "Retain" || r.Properties["DeletionProtectionEnabled"] != true {
		t.Errorf("DeletionPolicy %q, DeletionProtectionEnabled %v; want Retain and true", r.DeletionPolicy, r.Properties["DeletionProtectionEnabled"])
	}
}

// exactGrants checks that role roleID is allowed exactly want (plus writing
// its own log group).
func exactGrants(t *testing.T, tmpl cfnTemplate, roleID, logGroupID string, want []string) {
	t.Helper()
	got := tmpl.grants(roleID)
	logs := logGroupID + ".Arn"
	want = append(want, "logs:CreateLogStream "+logs, "logs:PutLogEvents "+logs)
	for _, g := range want {
		if !got[g] {
			t.Errorf("ingest's role lacks %s", g)
		}
	}
	for g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("ingest's role allows %s, which ingest does not call", g)
		}
	}
}

func TestIngestGrantsOnlyWhatItCalls(t *testing.T) {
	s := fx.stack
	events := logicalID(s.Stack, s.Events) + ".Arn"
	requests := logicalID(s.Stack, s.Ingest.Requests) + ".Arn"
	exactGrants(t, fx.tmpl, logicalID(s.Stack, s.Ingest.Function.Role), logicalID(s.Stack, s.Ingest.Function.LogGroup), []string{
		"kinesis:PutRecords " + events,
		"dynamodb:PutItem " + requests,
		"dynamodb:UpdateItem " + requests,
		"dynamodb:GetItem " + requests,
	})
}

// TestIngestAuthModes: AWS_IAM by default (no secret, no public
// permission); HMAC from context makes the URL NONE only together with the
// function's signature check (INGEST_AUTH=HMAC) and its secret, which the
// role may read and nothing else may; cdk-nag stays clean, its one finding
// (SMG4, no rotation Lambda) suppressed with the reason. The HMAC stack is
// settingsVariant, whose other settings leave ingest, the URLs and the
// secret alone.
func TestIngestAuthModes(t *testing.T) {
	if n := len(fx.tmpl.ofType("AWS::SecretsManager::Secret")); n != 0 || fx.stack.Ingest.Secret != nil {
		t.Errorf("the AWS_IAM stack has %d secrets, want none", n)
	}

	v := settingsVariant.get(t)
	stack, tmpl := v.stack, v.tmpl
	if stack.Ingest.Secret == nil {
		t.Fatalf("the stack with %s HMAC has no signing secret", ContextIngestAuth)
	}
	if stack.AssetDirUsed != v.assets {
		t.Errorf("asset dir = %s, want %s from context", stack.AssetDirUsed, v.assets)
	}
	secretID := logicalID(stack.Stack, stack.Ingest.Secret)
	secret := tmpl.Resources[secretID]
	assertProps(t, secretID, secret.Properties, map[string]any{
		"GenerateSecretString": map[string]any{"PasswordLength": 64.0, "ExcludePunctuation": true, "IncludeSpace": false},
		"SecretString":         nil,
	})
	fnID, fn := tmpl.function(t, FunctionIngest)
	vars := fn.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	if vars[EnvIngestAuth] != "HMAC" || !reflect.DeepEqual(vars[EnvIngestSecretArn], ref(secretID)) {
		t.Errorf("ingest env %v, want INGEST_AUTH=HMAC and INGEST_SECRET_ARN = the secret", vars)
	}
	requests := logicalID(stack.Stack, stack.Ingest.Requests) + ".Arn"
	exactGrants(t, tmpl, logicalID(stack.Stack, stack.Ingest.Function.Role), logicalID(stack.Stack, stack.Ingest.Function.LogGroup), []string{
		"kinesis:PutRecords " + logicalID(stack.Stack, stack.Events) + ".Arn",
		"dynamodb:PutItem " + requests,
		"dynamodb:UpdateItem " + requests,
		"dynamodb:GetItem " + requests,
		"secretsmanager:GetSecretValue " + secretID,
	})
	ingestRole := logicalID(stack.Stack, stack.Ingest.Function.Role)
	for roleID := range tmpl.ofType("AWS::IAM::Role") {
		for g := range tmpl.grants(roleID) {
			if roleID != ingestRole && strings.HasPrefix(g, "secretsmanager:") {
				t.Errorf("role %s may %s: only ingest reads the signing secret", roleID, g)
			}
		}
	}
	// Every NONE URL is a function that checks signatures itself; the
	// rules function's and event sourcing's commands URLs stay AWS_IAM.
	urls := tmpl.ofType("AWS::Lambda::Url")
	none := 0
	for id, u := range urls {
		if u.Properties["AuthType"] != "NONE" {
			if u.Properties["AuthType"] != "AWS_IAM" {
				t.Errorf("%s: AuthType %v", id, u.Properties["AuthType"])
			}
			continue
		}
		none++
		if !reflect.DeepEqual(u.Properties["TargetFunctionArn"], getAtt(fnID, "Arn")) {
			t.Errorf("%s: %v, want ingest's URL with AuthType NONE", id, u.Properties)
		}
	}
	if none != 1 || len(urls) != 3 {
		t.Fatalf("%d function URLs, %d with AuthType NONE; want ingest's NONE and the rules and commands functions' AWS_IAM", len(urls), none)
	}
	if got := tmpl.Outputs["IngestSecretArn"].Value; !reflect.DeepEqual(got, ref(secretID)) {
		t.Errorf("output IngestSecretArn = %v, want the secret", got)
	}
	for _, e := range append(v.nagError, v.nagWarn...) {
		t.Errorf("cdk-nag with signed requests: %s", e)
	}
	sups := nagSuppressions(secret)
	if len(sups) != 1 || sups[0].ID != "AwsSolutions-SMG4" || !strings.Contains(sups[0].Reason, "rotated by hand") {
		t.Errorf("secret's nag suppressions %+v, want one AwsSolutions-SMG4 saying how it is rotated", sups)
	}
}

func TestIngestAuthRejects(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{"NONE", `tributary:ingestAuth "NONE": a public URL without any check is no longer offered; use HMAC`},
		{"hmac", `tributary:ingestAuth "hmac": want AWS_IAM or HMAC`},
	} {
		if _, err := ingestAuth("", tc.value); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ingestAuth(%q) = %v, want %q", tc.value, err, tc.want)
		}
	}
}

// TestIngestMaxEventAgeFollowsTheStream: ingest's age limit is the events
// stream's retention, whatever it is set to.
func TestIngestMaxEventAgeFollowsTheStream(t *testing.T) {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Retention"), nil)
	week := awskinesis.NewStream(stack, jsii.String("Week"), &awskinesis.StreamProps{RetentionPeriod: awscdk.Duration_Days(jsii.Number(7))})
	if got := durationEnv(streamRetention(week)); got != "168h" {
		t.Errorf("a 7-day stream gives %s, want 168h", got)
	}
	if got := streamRetention(testEventsStream(stack)); got != 24*time.Hour {
		t.Errorf("a stream with the default retention gives %s, want 24h", got)
	}
}
