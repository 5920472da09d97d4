package tributary

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// TestArchive: the stack archives the events stream into a bucket that is
// encrypted, private, TLS only and retained, whose objects move to
// Standard-IA after 30 days; the archive function reads the stream through
// its own consumer from its trim horizon, retries a batch for as long as the
// stream keeps it, and may only put objects under archive/.
func TestArchive(t *testing.T) {
	s := fx.stack
	bucketID := logicalID(s.Stack, s.Archive.Bucket)
	b := fx.tmpl.Resources[bucketID]
	if b.DeletionPolicy != "Retain" {
		t.Errorf("bucket DeletionPolicy %q, want Retain: the archive outlives the stack", b.DeletionPolicy)
	}
	assertProps(t, "archive bucket", b.Properties, map[string]any{
		"BucketEncryption": map[string]any{"ServerSideEncryptionConfiguration": []any{
			map[string]any{"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "AES256"}}}},
		"PublicAccessBlockConfiguration": map[string]any{"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true},
		"LifecycleConfiguration": map[string]any{"Rules": []any{map[string]any{
			"Id": "ArchiveToInfrequentAccess", "Prefix": "archive/", "Status": "Enabled",
			"AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 1.0},
			"Transitions":                    []any{map[string]any{"StorageClass": "STANDARD_IA", "TransitionInDays": 30.0}},
		}}},
	})
	tlsOnly := false
	for _, p := range fx.tmpl.ofType("AWS::S3::BucketPolicy") {
		if !reflect.DeepEqual(p.Properties["Bucket"], ref(bucketID)) {
			continue
		}
		for _, st := range asList(p.Properties["PolicyDocument"].(map[string]any)["Statement"]) {
			st := st.(map[string]any)
			cond, _ := st["Condition"].(map[string]any)
			if st["Effect"] == "Deny" && reflect.DeepEqual(cond["Bool"], map[string]any{"aws:SecureTransport": "false"}) {
				tlsOnly = true
			}
		}
	}
	if !tlsOnly {
		t.Error("the archive bucket's policy does not deny requests without TLS")
	}

	fnID, fn := fx.tmpl.function(t, FunctionArchive)
	env := fn.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	if !reflect.DeepEqual(env[EnvArchiveBucketName], ref(bucketID)) {
		t.Errorf("archive function %s = %v, want the bucket's name", EnvArchiveBucketName, env[EnvArchiveBucketName])
	}
	m := fx.tmpl.mappingOf(t, fnID)
	assertProps(t, "archive mapping", m.Properties, map[string]any{
		"StartingPosition":               "TRIM_HORIZON",
		"MaximumRetryAttempts":           10000.0,
		"MaximumRecordAgeInSeconds":      float64(streamRetention(s.Events).Seconds()),
		"MaximumBatchingWindowInSeconds": 60.0,
		"BatchSize":                      10000.0,
	})
	if src, _ := m.Properties["EventSourceArn"].(map[string]any); src == nil || !strings.Contains(resourceName(src), "Consumer") {
		t.Errorf("archive mapping reads %v, want its own stream consumer", m.Properties["EventSourceArn"])
	}
	var onBucket []string
	roleID := fn.Properties["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
	for g := range fx.tmpl.grants(roleID) {
		if strings.Contains(g, bucketID) {
			onBucket = append(onBucket, g)
		}
	}
	sort.Strings(onBucket)
	// The chain heads (package archive) need a read and a write under
	// chain/; ListBucket makes a missing one "no such key", not "access
	// denied".
	if want := []string{"s3:GetObject " + bucketID + ".Arn/chain/*", "s3:ListBucket " + bucketID + ".Arn",
		"s3:PutObject " + bucketID + ".Arn/archive/*", "s3:PutObject " + bucketID + ".Arn/chain/*"}; !reflect.DeepEqual(onBucket, want) {
		t.Errorf("archive function's grants on the bucket: %v, want %v", onBucket, want)
	}
	if _, ok := fx.tmpl.Outputs["ArchiveBucketName"]; !ok {
		t.Error("output ArchiveBucketName missing: replay rebuild -archive-bucket needs it")
	}
}

// TestArchiveContext: the Standard-IA move, an expiry and the batching
// window come from context; a value S3 or Lambda would refuse fails synth
// naming the key.
func TestArchiveContext(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	for _, tc := range []struct {
		name    string
		context map[string]any
		want    map[string]any // lifecycle rule properties
		batch   float64
		err     string
	}{
		{"from context", map[string]any{ContextArchiveInfrequentAccessDays: 45.0, ContextArchiveExpireDays: "400", ContextArchiveBatchingSeconds: 5.0},
			map[string]any{"ExpirationInDays": 400.0, "Transitions": []any{map[string]any{"StorageClass": "STANDARD_IA", "TransitionInDays": 45.0}}}, 5, ""},
		{"before S3 allows", map[string]any{ContextArchiveInfrequentAccessDays: 10.0}, nil, 0, "context tributary:archiveInfrequentAccessDays: 10 days: S3 moves objects to Standard-IA after 30 days at the earliest"},
		{"expiry before the move", map[string]any{ContextArchiveExpireDays: 20.0}, nil, 0, "context tributary:archiveExpireDays: 20 days is not after the move to Standard-IA"},
		{"not days", map[string]any{ContextArchiveExpireDays: "1y"}, nil, 0, `context tributary:archiveExpireDays: "1y" is not a number of days`},
		{"batching over Lambda's 300 s", map[string]any{ContextArchiveBatchingSeconds: 301.0}, nil, 0, "context tributary:archiveBatchingSeconds: 301 is not a whole number of seconds between 0 and 300"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := newTestApp(t.TempDir(), tc.context)
			stack := awscdk.NewStack(app, jsii.String("T"), nil)
			a, err := NewArchive(stack, "Archive", ArchiveProps{AssetDir: assets, Events: testEventsStream(stack), OnFailure: awssqs.NewQueue(stack, jsii.String("F"), nil)})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tmpl := templateOf(stack)
			rule := tmpl.Resources[logicalID(stack, a.Bucket)].Properties["LifecycleConfiguration"].(map[string]any)["Rules"].([]any)[0].(map[string]any)
			assertProps(t, "lifecycle rule", rule, tc.want)
			fnID, _ := tmpl.function(t, FunctionArchive)
			assertProps(t, "archive mapping", tmpl.mappingOf(t, fnID).Properties, map[string]any{"MaximumBatchingWindowInSeconds": tc.batch})
		})
	}
}
