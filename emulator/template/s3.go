package template

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// s3API is what Provision needs of S3.
type s3API interface {
	CreateBucket(ctx context.Context, in *s3.CreateBucketInput, opts ...func(*s3.Options)) (*s3.CreateBucketOutput, error)
}

var _ s3API = (*s3.Client)(nil)

// newS3 is an S3 client for the endpoint: path-style, as a local endpoint
// has no bucket host names.
func newS3(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
}

// bucketName is the generated name of an AWS::S3::Bucket without
// BucketName: CloudFormation's <stack>-<logical id>-<suffix>, lower case as
// S3 requires.
func bucketName(stack, logicalID string) string {
	return strings.ToLower(generatedName(stack, logicalID, 63, ""))
}

// bucket creates an AWS::S3::Bucket with the template's BucketName (or a
// generated one); Ref is its name, Fn::GetAtt Arn its ARN. A bucket that
// exists is reused with its objects, as a stack update keeps them.
// Encryption, lifecycle rules and the bucket policy are not applied locally
// (a note says so): the stand-in keeps objects as they are put.
func (p *provisioner) bucket(ctx context.Context, id string, ph *physicalResource) error {
	pr, err := p.d.resolvedProps(id)
	if err != nil {
		return err
	}
	in := &s3.CreateBucketInput{Bucket: aws.String(ph.name)}
	if p.d.region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(p.d.region)}
	}
	_, err = p.s3.CreateBucket(ctx, in)
	var owned *s3types.BucketAlreadyOwnedByYou
	switch {
	case errors.As(err, &owned):
		ph.reused = true
		p.d.report(fmt.Sprintf("reused S3 bucket %s", ph.name))
	case err != nil:
		return fmt.Errorf("create bucket: %w", err)
	default:
		p.d.report(fmt.Sprintf("created S3 bucket %s", ph.name))
	}
	var unapplied []string
	for _, prop := range []string{"BucketEncryption", "LifecycleConfiguration", "VersioningConfiguration", "ObjectLockConfiguration", "ReplicationConfiguration"} {
		if pr.has(prop) {
			unapplied = append(unapplied, prop)
		}
	}
	if len(unapplied) > 0 {
		p.d.note(fmt.Sprintf("%s: %s of bucket %s are not applied locally (objects stay as put)", id, strings.Join(unapplied, ", "), ph.name))
	}
	return nil
}
