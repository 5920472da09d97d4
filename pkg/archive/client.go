package archive

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// NewS3Client is the S3 client the archiver and the reader use: path-style
// addresses when cfg names an endpoint (the local stand-in, LocalStack:
// no bucket host names there), and no log line for each object S3 answers
// without a checksum (the archiver's objects are written without one; gzip
// checks the bytes on reading).
func NewS3Client(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = cfg.BaseEndpoint != nil
		o.DisableLogOutputChecksumValidationSkipped = true
	})
}
