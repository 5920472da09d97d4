package template

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// s3Template is the shape infra's NewArchive synthesizes: a bucket without
// a name, its TLS-only policy, and a function given its name.
const s3Template = `{"Resources": {
  "ArchiveBucket1A2B3C4D": {"Type": "AWS::S3::Bucket", "Properties": {
    "BucketEncryption": {"ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]},
    "LifecycleConfiguration": {"Rules": [{"Status": "Enabled", "Transitions": [{"StorageClass": "STANDARD_IA", "TransitionInDays": 30}]}]}}},
  "ArchiveBucketPolicy": {"Type": "AWS::S3::BucketPolicy", "Properties": {"Bucket": {"Ref": "ArchiveBucket1A2B3C4D"}, "PolicyDocument": {}}},
  "Fn": {"Type": "AWS::Lambda::Function", "Properties": {
    "Environment": {"Variables": {"ARCHIVE_BUCKET_NAME": {"Ref": "ArchiveBucket1A2B3C4D"}}}}}
}}`

// TestProvisionS3Bucket: the bucket is created under a lower-case
// generated name the function's environment resolves to, its objects
// survive a second Provision, and what is not applied locally is noted.
func TestProvisionS3Bucket(t *testing.T) {
	t.Parallel()
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	tmpl, err := Parse([]byte(s3Template))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Provision(ctx, cfg, tmpl, ProvisionOptions{Stack: "Trib"})
	if err != nil {
		t.Fatal(err)
	}
	const name = "trib-archivebucket1a2b3c4d"
	for _, c := range []struct {
		in   any
		want string
	}{
		{map[string]any{"Ref": "ArchiveBucket1A2B3C4D"}, name},
		{map[string]any{"Fn::GetAtt": []any{"ArchiveBucket1A2B3C4D", "Arn"}}, "arn:aws:s3:::" + name},
	} {
		if v, err := d.Resolve(c.in); err != nil || v != c.want {
			t.Errorf("Resolve(%v) = %q, %v; want %q", c.in, v, err, c.want)
		}
	}
	client := newS3(cfg)
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String("archive/x"), Body: bytes.NewReader([]byte("kept"))}); err != nil {
		t.Fatalf("putting into the provisioned bucket: %v", err)
	}
	d2, err := Provision(ctx, cfg, tmpl, ProvisionOptions{Stack: "Trib"})
	if err != nil {
		t.Fatalf("second Provision: %v", err)
	}
	if _, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(name), Key: aws.String("archive/x")}); err != nil {
		t.Errorf("the object is gone after a second Provision: %v", err)
	}
	if notes := strings.Join(d2.Notes(), "\n"); !strings.Contains(notes, "BucketEncryption, LifecycleConfiguration of bucket "+name+" are not applied locally") {
		t.Errorf("notes %q: want one saying encryption and lifecycle are not applied locally", notes)
	}
	for _, s := range d.Skipped() {
		if s.Type == "AWS::S3::Bucket" || (s.Type == "AWS::S3::BucketPolicy" && !strings.Contains(s.Reason, "not enforced locally")) {
			t.Errorf("skipped %+v", s)
		}
	}
}
