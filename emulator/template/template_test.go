package template

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	streamName = "Tributary-EventsB1C4C2F7"
	streamARN  = "arn:aws:kinesis:us-east-1:123456789012:stream/" + streamName
	queueName  = "Tributary-Failures2B2F1BFB"
	queueARN   = "arn:aws:sqs:us-east-1:123456789012:" + queueName
	dlqName    = "Tributary-FailuresDlq5D2B7B53"
)

func mustLoad(t *testing.T, path string) *Template {
	t.Helper()
	tmpl, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func mustPlan(t *testing.T, opts ProvisionOptions) *Deployment {
	t.Helper()
	d, err := Plan(mustLoad(t, "testdata/Tributary.template.json"), opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// parse decodes a JSON literal the way Load does (numbers as json.Number).
func parse(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

func TestLoadNamesTheStackAfterTheFile(t *testing.T) {
	tmpl := mustLoad(t, "testdata/Tributary.template.json")
	if tmpl.Name != "Tributary" {
		t.Errorf("Name = %q, want Tributary", tmpl.Name)
	}
	if got := tmpl.Resources["Ingest6A2A8F0C"].Metadata[FunctionMetadataKey]; got != "ingest" {
		t.Errorf("ingest metadata = %v", got)
	}
}

func TestResolve(t *testing.T) {
	d := mustPlan(t, ProvisionOptions{})
	tests := []struct {
		name, in, want, err string
	}{
		{name: "literal", in: `"plain"`, want: "plain"},
		{name: "number prints as written", in: `1209600`, want: "1209600"},
		{name: "boolean", in: `true`, want: "true"},
		{name: "Ref stream is its name", in: `{"Ref":"EventsB1C4C2F7"}`, want: streamName},
		{name: "GetAtt stream Arn", in: `{"Fn::GetAtt":["EventsB1C4C2F7","Arn"]}`, want: streamARN},
		{name: "GetAtt dotted form", in: `{"Fn::GetAtt":"EventsB1C4C2F7.Arn"}`, want: streamARN},
		{name: "Ref table is its name", in: `{"Ref":"Counts8E0E1E4B"}`, want: "Tributary-Counts8E0E1E4B"},
		{name: "GetAtt table Arn", in: `{"Fn::GetAtt":["Counts8E0E1E4B","Arn"]}`, want: "arn:aws:dynamodb:us-east-1:123456789012:table/Tributary-Counts8E0E1E4B"},
		{name: "Ref queue is its URL", in: `{"Ref":"Failures2B2F1BFB"}`, want: "https://sqs.us-east-1.amazonaws.com/123456789012/" + queueName},
		{name: "GetAtt queue Arn", in: `{"Fn::GetAtt":["Failures2B2F1BFB","Arn"]}`, want: queueARN},
		{name: "GetAtt QueueName", in: `{"Fn::GetAtt":["FailuresDlq5D2B7B53","QueueName"]}`, want: dlqName},
		{name: "Ref function is its name", in: `{"Ref":"Aggregate9C3D1E2F"}`, want: "Tributary-Aggregate9C3D1E2F"},
		{name: "GetAtt function Arn", in: `{"Fn::GetAtt":["Aggregate9C3D1E2F","Arn"]}`, want: "arn:aws:lambda:us-east-1:123456789012:function:Tributary-Aggregate9C3D1E2F"},
		{name: "GetAtt role Arn", in: `{"Fn::GetAtt":["IngestServiceRole0A3E1B55","Arn"]}`, want: "arn:aws:iam::123456789012:role/Tributary-IngestServiceRole0A3E1B55"},
		{name: "GetAtt url FunctionArn follows the target", in: `{"Fn::GetAtt":["IngestFunctionUrl4E3F2C1B","FunctionArn"]}`, want: "arn:aws:lambda:us-east-1:123456789012:function:Tributary-Ingest6A2A8F0C"},
		{name: "pseudo parameters", in: `{"Fn::Join":[":",[{"Ref":"AWS::Partition"},{"Ref":"AWS::Region"},{"Ref":"AWS::AccountId"},{"Ref":"AWS::URLSuffix"},{"Ref":"AWS::StackName"}]]}`, want: "aws:us-east-1:123456789012:amazonaws.com:Tributary"},
		{name: "Join of refs", in: `{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},":iam::aws:policy/x"]]}`, want: "arn:aws:iam::aws:policy/x"},
		{name: "Sub with GetAtt, pseudo and escape", in: `{"Fn::Sub":"${EventsB1C4C2F7.Arn}|${AWS::Region}|${!Literal}"}`, want: streamARN + "|us-east-1|${Literal}"},
		{name: "Sub with variables", in: `{"Fn::Sub":["${Q}/x/${AWS::AccountId}",{"Q":{"Ref":"EventsB1C4C2F7"}}]}`, want: streamName + "/x/123456789012"},
		{name: "Select from GetAZs", in: `{"Fn::Select":[1,{"Fn::GetAZs":""}]}`, want: "us-east-1b"},
		{name: "Select from Split", in: `{"Fn::Select":["2",{"Fn::Split":["/","a/b/c"]}]}`, want: "c"},
		{name: "If on a template condition", in: `{"Fn::If":["CDKMetadataAvailable","yes","no"]}`, want: "yes"},
		{name: "Ref to a parameter gives its default", in: `{"Ref":"BootstrapVersion"}`, want: "/cdk-bootstrap/hnb659fds/version"},
		{name: "unknown resource", in: `{"Ref":"Nope"}`, err: `Ref to "Nope": no such resource`},
		{name: "unknown attribute names resource and attribute", in: `{"Fn::GetAtt":["EventsB1C4C2F7","Bogus"]}`, err: "attribute Bogus of AWS::Kinesis::Stream is not known locally"},
		{name: "StreamArn only after Provision", in: `{"Fn::GetAtt":["QuarantineA9F6A7C1","StreamArn"]}`, err: "QuarantineA9F6A7C1 is not provisioned yet"},
		{name: "exports are not local", in: `{"Fn::ImportValue":"Shared-Thing"}`, err: "cross-stack exports are not available locally"},
		{name: "list is not a string", in: `{"Fn::GetAZs":""}`, err: "a list, not a string"},
		{name: "Select out of range", in: `{"Fn::Select":[9,["a"]]}`, err: "index 9 out of range"},
		{name: "unsupported function", in: `{"Fn::Cidr":["10.0.0.0/16",2,8]}`, err: "Fn::Cidr is not supported locally"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.Resolve(parse(t, tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Resolve(%s) = %q, %v; want error containing %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%s): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("Resolve(%s) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestResolveErrorNamesThePropertyPath(t *testing.T) {
	tmpl := mustLoad(t, "testdata/Tributary.template.json")
	fn := tmpl.Resources["Ingest6A2A8F0C"]
	fn.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)["BROKEN"] = map[string]any{"Ref": "Missing"}
	d, err := Plan(tmpl, ProvisionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Functions()
	want := `Resources.Ingest6A2A8F0C.Properties.Environment.Variables.BROKEN.Ref: Ref to "Missing"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Functions() error = %v, want it to contain %q", err, want)
	}
}

func TestFunctions(t *testing.T) {
	d := mustPlan(t, ProvisionOptions{Stack: "Dev"})
	// What only Provision learns, set by hand for this offline test.
	if err := d.SetAttribute("QuarantineA9F6A7C1", "StreamArn", "arn:aws:dynamodb:us-east-1:123456789012:table/Dev-QuarantineA9F6A7C1/stream/2026-11-29T10:00:00.000"); err != nil {
		t.Fatal(err)
	}
	fns, err := d.Functions()
	if err != nil {
		t.Fatal(err)
	}
	four := 4
	want := []FunctionSpec{
		{
			LogicalID: "Aggregate9C3D1E2F", Binary: "aggregate", FunctionName: "Dev-Aggregate9C3D1E2F",
			ARN: "arn:aws:lambda:us-east-1:123456789012:function:Dev-Aggregate9C3D1E2F",
			Env: map[string]string{
				"COUNTS_TABLE_NAME":       "Dev-Counts8E0E1E4B",
				"COUNTS_TABLE_ARN":        "arn:aws:dynamodb:us-east-1:123456789012:table/Dev-Counts8E0E1E4B",
				"POWERTOOLS_SERVICE_NAME": "Dev-aggregate",
			},
			Timeout: time.Minute, MemoryMB: 512, Architecture: "arm64", ReservedConcurrency: &four,
			Runtime: "provided.al2023", Handler: "bootstrap",
			LogGroup: "/aws/lambda/Dev-Aggregate9C3D1E2F", LogFormat: "Text",
		},
		{
			LogicalID: "Ingest6A2A8F0C", Binary: "ingest", FunctionName: "Dev-Ingest6A2A8F0C",
			ARN:     "arn:aws:lambda:us-east-1:123456789012:function:Dev-Ingest6A2A8F0C",
			Env:     map[string]string{"EVENTS_STREAM_NAME": "Dev-EventsB1C4C2F7", "LOG_LEVEL": "info"},
			Timeout: 10 * time.Second, MemoryMB: 256, Architecture: "arm64",
			Runtime: "provided.al2023", Handler: "bootstrap",
			AssetPath: "asset.3f1b5c0f8e2d4a6b9c7e1f0a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c",
			// LoggingConfig.LogGroup: a log group of the stack, not /aws/lambda/<name>.
			LogGroup: "Dev-IngestLogGroupD4E5F6A7", LogFormat: "JSON",
		},
		{
			LogicalID: "QuarantineFn3B4C5D6E", Binary: "quarantine", FunctionName: "Dev-QuarantineFn3B4C5D6E",
			ARN: "arn:aws:lambda:us-east-1:123456789012:function:Dev-QuarantineFn3B4C5D6E",
			Env: map[string]string{
				"QUARANTINE_TABLE_NAME": "Dev-QuarantineA9F6A7C1",
				"QUARANTINE_STREAM_ARN": "arn:aws:dynamodb:us-east-1:123456789012:table/Dev-QuarantineA9F6A7C1/stream/2026-11-29T10:00:00.000",
				"FAILURES_QUEUE_URL":    "https://sqs.us-east-1.amazonaws.com/123456789012/Dev-Failures2B2F1BFB",
				"DLQ_NAME":              "Dev-FailuresDlq5D2B7B53",
				"EVENTS_ARN_SUB":        "arn:aws:kinesis:us-east-1:123456789012:stream/Dev-EventsB1C4C2F7|us-east-1|${Literal}",
				"FIRST_AZ":              "us-east-1a",
			},
			// AWS defaults: 128 MB, x86_64.
			Timeout: 30 * time.Second, MemoryMB: 128, Architecture: "x86_64",
			Runtime: "provided.al2023", Handler: "bootstrap",
			LogGroup: "/aws/lambda/Dev-QuarantineFn3B4C5D6E", LogFormat: "Text",
		},
	}
	if !reflect.DeepEqual(fns, want) {
		t.Errorf("Functions() =\n%+v\nwant\n%+v", fns, want)
	}
}

func TestFunctionNameFromTemplateWins(t *testing.T) {
	tmpl := mustLoad(t, "testdata/Tributary.template.json")
	tmpl.Resources["Ingest6A2A8F0C"].Properties["FunctionName"] = map[string]any{"Fn::Sub": "${AWS::StackName}-ingest"}
	d, err := Plan(tmpl, ProvisionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Resolve(map[string]any{"Fn::GetAtt": []any{"Ingest6A2A8F0C", "Arn"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "arn:aws:lambda:us-east-1:123456789012:function:Tributary-ingest"; got != want {
		t.Errorf("Arn = %q, want %q", got, want)
	}
}

func TestMappings(t *testing.T) {
	d := mustPlan(t, ProvisionOptions{})
	ddbStream := "arn:aws:dynamodb:us-east-1:123456789012:table/Tributary-QuarantineA9F6A7C1/stream/2026-11-29T10:00:00.000"
	if err := d.SetAttribute("QuarantineA9F6A7C1", "StreamArn", ddbStream); err != nil {
		t.Fatal(err)
	}
	ms, err := d.Mappings()
	if err != nil {
		t.Fatal(err)
	}
	want := []MappingSpec{
		{
			LogicalID: "AggregateKinesisEventSourceTributaryEvents5E6F7A8B", FunctionLogicalID: "Aggregate9C3D1E2F",
			SourceLogicalID: "EventsB1C4C2F7", SourceARN: streamARN, SourceKind: SourceKinesis,
			BatchSize: 500, MaxBatchingWindow: time.Second, StartingPosition: "TRIM_HORIZON",
			ReportBatchItemFailures: true, BisectBatchOnFunctionError: true, MaximumRetryAttempts: 3,
			MaximumRecordAge: time.Hour, OnFailureARN: queueARN, ParallelizationFactor: 1, Enabled: true,
		},
		{
			// Defaults: batch 100, retries -1, no record age limit.
			LogicalID: "QuarantineFnDynamoDBEventSourceTributaryQuarantine1C2D3E4F", FunctionLogicalID: "QuarantineFn3B4C5D6E",
			SourceLogicalID: "QuarantineA9F6A7C1", SourceARN: ddbStream, SourceKind: SourceDynamoDB,
			BatchSize: 100, StartingPosition: "LATEST", MaximumRetryAttempts: -1,
			TumblingWindow: time.Minute, ParallelizationFactor: 2,
			FilterPatterns: []string{`{"eventName":["INSERT"]}`}, Enabled: false,
		},
		{
			LogicalID: "QuarantineFnSqsEventSourceTributaryFailures7F8A9B0C", FunctionLogicalID: "QuarantineFn3B4C5D6E",
			SourceLogicalID: "Failures2B2F1BFB", SourceARN: queueARN, SourceKind: SourceSQS,
			BatchSize: 10, ReportBatchItemFailures: true, MaximumRetryAttempts: -1,
			ParallelizationFactor: 1, MaximumConcurrency: 2, Enabled: true,
		},
	}
	if !reflect.DeepEqual(ms, want) {
		t.Errorf("Mappings() =\n%+v\nwant\n%+v", ms, want)
	}
}

func TestMappingDefaultsAndErrors(t *testing.T) {
	base := `{"Resources":{
	  "Q1": {"Type":"AWS::SQS::Queue"},
	  "S1": {"Type":"AWS::Kinesis::Stream","Properties":{"ShardCount":1}},
	  "F1": {"Type":"AWS::Lambda::Function","Properties":{"FunctionName":"fn"}},
	  "M1": {"Type":"AWS::Lambda::EventSourceMapping","Properties":%s}}}`
	tests := []struct {
		name, props string
		check       func(MappingSpec) string
		err         string
	}{
		{
			name:  "SQS batch defaults to 10",
			props: `{"FunctionName":{"Ref":"F1"},"EventSourceArn":{"Fn::GetAtt":["Q1","Arn"]}}`,
			check: func(m MappingSpec) string {
				if m.BatchSize != 10 || m.SourceKind != SourceSQS || !m.Enabled {
					return "want batch 10, sqs, enabled"
				}
				return ""
			},
		},
		{
			name:  "stream batch defaults to 100; function by literal name",
			props: `{"FunctionName":"fn","EventSourceArn":{"Fn::GetAtt":["S1","Arn"]},"StartingPosition":"LATEST","MaximumRecordAgeInSeconds":-1}`,
			check: func(m MappingSpec) string {
				if m.BatchSize != 100 || m.FunctionLogicalID != "F1" || m.MaximumRetryAttempts != -1 || m.MaximumRecordAge != 0 {
					return "want batch 100, F1, retries -1, no age limit"
				}
				return ""
			},
		},
		{
			name:  "function by ARN; AT_TIMESTAMP",
			props: `{"FunctionName":{"Fn::GetAtt":["F1","Arn"]},"EventSourceArn":{"Fn::GetAtt":["S1","Arn"]},"StartingPosition":"AT_TIMESTAMP","StartingPositionTimestamp":1764410400.5}`,
			check: func(m MappingSpec) string {
				if m.FunctionLogicalID != "F1" || !m.StartingPositionTimestamp.Equal(time.Unix(1764410400, 5e8)) {
					return "want F1 and the timestamp"
				}
				return ""
			},
		},
		{
			name:  "stream without starting position",
			props: `{"FunctionName":{"Ref":"F1"},"EventSourceArn":{"Fn::GetAtt":["S1","Arn"]}}`,
			err:   "Resources.M1.Properties.StartingPosition: required for a kinesis source",
		},
		{
			name:  "unknown function",
			props: `{"FunctionName":"other","EventSourceArn":{"Fn::GetAtt":["Q1","Arn"]}}`,
			err:   `Resources.M1.Properties.FunctionName: "other" is not a function of this template`,
		},
		{
			name:  "unsupported source",
			props: `{"FunctionName":{"Ref":"F1"},"EventSourceArn":"arn:aws:kafka:us-east-1:123456789012:cluster/x/y"}`,
			err:   "other sources are not emulated",
		},
		{
			name:  "batch size not a number",
			props: `{"FunctionName":{"Ref":"F1"},"EventSourceArn":{"Fn::GetAtt":["Q1","Arn"]},"BatchSize":"many"}`,
			err:   `Resources.M1.Properties.BatchSize: "many" is not an integer`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := Parse([]byte(strings.Replace(base, "%s", tt.props, 1)))
			if err != nil {
				t.Fatal(err)
			}
			d, err := Plan(tmpl, ProvisionOptions{Stack: "T"})
			if err != nil {
				t.Fatal(err)
			}
			ms, err := d.Mappings()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Mappings() = %+v, %v; want error containing %q", ms, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(ms[0]); msg != "" {
				t.Errorf("%+v: %s", ms[0], msg)
			}
		})
	}
}

func TestURLs(t *testing.T) {
	d := mustPlan(t, ProvisionOptions{})
	us, err := d.URLs()
	if err != nil {
		t.Fatal(err)
	}
	want := []URLSpec{{
		LogicalID: "IngestFunctionUrl4E3F2C1B", FunctionLogicalID: "Ingest6A2A8F0C", AuthType: "NONE", InvokeMode: "BUFFERED",
		Cors: &Cors{AllowMethods: []string{"POST"}, AllowOrigins: []string{"*"}, MaxAge: 5 * time.Minute},
	}}
	if !reflect.DeepEqual(us, want) {
		t.Errorf("URLs() = %+v, want %+v", us, want)
	}
}

func TestOutputsUseWhatTheRunnerSets(t *testing.T) {
	d := mustPlan(t, ProvisionOptions{})
	if err := d.SetAttribute("IngestFunctionUrl4E3F2C1B", "FunctionUrl", "http://127.0.0.1:9000/"); err != nil {
		t.Fatal(err)
	}
	out, err := d.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"IngestUrl":        "http://127.0.0.1:9000/",
		"EventsStreamName": streamName,
		"FailuresQueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/" + queueName,
		"CountsTableArn":   "arn:aws:dynamodb:us-east-1:123456789012:table/Tributary-Counts8E0E1E4B",
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("Outputs() = %v, want %v", out, want)
	}
}

func TestSkippedSaysWhatIsNotEmulated(t *testing.T) {
	tests := []struct {
		region       string
		wantMetadata bool
	}{
		{"us-east-1", true},
		// CDKMetadataAvailable is false there: the resource does not exist.
		{"cn-north-1", false},
	}
	for _, tt := range tests {
		t.Run(tt.region, func(t *testing.T) {
			d := mustPlan(t, ProvisionOptions{Region: tt.region})
			got := map[string]Skipped{}
			for _, s := range d.Skipped() {
				got[s.LogicalID] = s
			}
			for _, id := range []string{"IngestServiceRole0A3E1B55", "IngestServiceRoleDefaultPolicy7C4D5E2A", "Ingestinvokefunctionurl5B6C7D8E", "FailuresDlqPolicyE1B4A0C2"} {
				if s, ok := got[id]; !ok || s.RunByRunner || !strings.Contains(s.Reason, "permissions") {
					t.Errorf("%s: got %+v, want skipped because permissions are not enforced", id, s)
				}
			}
			for _, id := range []string{"Ingest6A2A8F0C", "AggregateKinesisEventSourceTributaryEvents5E6F7A8B", "IngestFunctionUrl4E3F2C1B"} {
				if s, ok := got[id]; !ok || !s.RunByRunner {
					t.Errorf("%s: got %+v, want run by the runner", id, s)
				}
			}
			for _, id := range []string{"EventsB1C4C2F7", "Counts8E0E1E4B", "Failures2B2F1BFB"} {
				if _, ok := got[id]; ok {
					t.Errorf("%s is provisioned, not skipped", id)
				}
			}
			if _, ok := got["CDKMetadata"]; ok != tt.wantMetadata {
				t.Errorf("CDKMetadata listed = %v, want %v", ok, tt.wantMetadata)
			}
		})
	}
}

func TestGeneratedNames(t *testing.T) {
	long := strings.Repeat("VeryLongLogicalId", 8) + "ABCD1234"
	tests := []struct {
		name, stack, id, suffix string
		max                     int
		want                    string
	}{
		{"fits", "Tributary", "EventsB1C4C2F7", "", 128, "Tributary-EventsB1C4C2F7"},
		{"fifo suffix", "Tributary", "OrdersFifo9A8B7C6D", ".fifo", 80, "Tributary-OrdersFifo9A8B7C6D.fifo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := generatedName(tt.stack, tt.id, tt.max, tt.suffix); got != tt.want {
				t.Errorf("generatedName = %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("too long is trimmed, stable and distinct", func(t *testing.T) {
		a := generatedName("Tributary", long, 80, ".fifo")
		b := generatedName("Tributary", long+"X", 80, ".fifo")
		if len(a) != 80 || !strings.HasSuffix(a, ".fifo") || !strings.HasPrefix(a, "Tributary-VeryLong") {
			t.Errorf("trimmed name %q (%d chars)", a, len(a))
		}
		if a == b {
			t.Errorf("two long ids trimmed to the same name %q", a)
		}
		if a != generatedName("Tributary", long, 80, ".fifo") {
			t.Error("trimmed name is not stable")
		}
	})
}

func TestPlanRejects(t *testing.T) {
	tests := []struct {
		name, tmpl string
		opts       ProvisionOptions
		err        string
	}{
		{
			name: "cycle",
			tmpl: `{"Resources":{"A":{"Type":"AWS::SQS::Queue","Properties":{"RedrivePolicy":{"deadLetterTargetArn":{"Fn::GetAtt":["B","Arn"]},"maxReceiveCount":1}}},"B":{"Type":"AWS::SQS::Queue","DependsOn":"A"}}}`,
			err:  "circular dependency A → B → A",
		},
		{
			name: "DependsOn unknown",
			tmpl: `{"Resources":{"A":{"Type":"AWS::SQS::Queue","DependsOn":["Ghost"]}}}`,
			err:  `Resources.A.DependsOn: no resource "Ghost"`,
		},
		{
			name: "bad stack name",
			tmpl: `{"Resources":{"A":{"Type":"AWS::SQS::Queue"}}}`,
			opts: ProvisionOptions{Stack: "my stack"},
			err:  `ProvisionOptions.Stack "my stack"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := Parse([]byte(tt.tmpl))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Plan(tmpl, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Plan: %v, want error containing %q", err, tt.err)
			}
		})
	}
}
