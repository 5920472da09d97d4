package lambdamain

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/tributary-dev/tributary/internal/envvar"
)

// IdleConnsPerHost is how many idle connections a function keeps to each
// endpoint. The aggregate handler makes up to 64 requests at once
// (aggregate.DefaultConcurrency), the keyed runners and the windowed
// handlers 16; the SDK's default transport keeps 10, so every burst closed
// those past them and opened them again, a TLS handshake each on AWS.
const IdleConnsPerHost = 64

// Main is one function's init.
type Main struct{ Function string }

// AWSConfig is the AWS configuration of a function running on Lambda or
// under the local runner; it stops the function naming what is missing.
// See Config.
func (m Main) AWSConfig() aws.Config {
	cfg, err := Config(os.LookupEnv)
	if err != nil {
		m.Fail("loading the AWS configuration: %v", err)
	}
	return cfg
}

// Config builds the AWS configuration from the environment Lambda gives a
// function: the region (AWS_REGION, else AWS_DEFAULT_REGION) and the
// execution role's credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN; Lambda sets them for the life of the execution
// environment, and config.LoadDefaultConfig would read the same ones first).
// AWS_ENDPOINT_URL, when set (the local runner sets the stand-in's), points
// every client at it, unless AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true.
//
// It does not read shared config files, profiles, SSO, web identity or the
// instance metadata service as config.LoadDefaultConfig does: a function
// never has them, and leaving that code out takes about 2.5 MB off every
// binary and its init. Per-service endpoint variables
// (AWS_ENDPOINT_URL_<SERVICE>), AWS_MAX_ATTEMPTS and AWS_RETRY_MODE are not
// read either; the SDK's default retryer applies. Its HTTP client is the
// SDK's, keeping IdleConnsPerHost idle connections per endpoint.
func Config(lookup func(string) (string, bool)) (aws.Config, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	region := get("AWS_REGION")
	if region == "" {
		region = get("AWS_DEFAULT_REGION")
	}
	if region == "" {
		return aws.Config{}, fmt.Errorf("environment variable AWS_REGION is not set (Lambda sets it)")
	}
	creds := aws.Credentials{
		AccessKeyID:     get("AWS_ACCESS_KEY_ID"),
		SecretAccessKey: get("AWS_SECRET_ACCESS_KEY"),
		SessionToken:    get("AWS_SESSION_TOKEN"),
		AccountID:       get("AWS_ACCOUNT_ID"),
		Source:          "EnvConfigCredentials",
	}
	if creds.AccessKeyID == "" {
		return aws.Config{}, fmt.Errorf("environment variable AWS_ACCESS_KEY_ID is not set (Lambda sets the execution role's credentials)")
	}
	if creds.SecretAccessKey == "" {
		return aws.Config{}, fmt.Errorf("environment variable AWS_SECRET_ACCESS_KEY is not set (Lambda sets the execution role's credentials)")
	}
	cfg := aws.Config{
		Region: region,
		HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = IdleConnsPerHost
		}),
		Credentials: aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return creds, nil
		})),
	}
	if ep := get("AWS_ENDPOINT_URL"); ep != "" && !strings.EqualFold(get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"), "true") {
		cfg.BaseEndpoint = aws.String(ep)
	}
	return cfg, nil
}

// RequireTable returns the variable's value, a DynamoDB table's name (or
// ARN), or stops the function naming the variable and what it is for: unset,
// empty, or a value DynamoDB would refuse (a space after it, another
// service's ARN; package envvar).
func (m Main) RequireTable(name, what string) string { return m.requireName(name, what, envvar.Table) }

// RequireIndex is RequireTable for a DynamoDB index's name.
func (m Main) RequireIndex(name, what string) string { return m.requireName(name, what, envvar.Index) }

// RequireStream is RequireTable for a Kinesis stream's name (not its ARN).
func (m Main) RequireStream(name, what string) string {
	return m.requireName(name, what, envvar.Stream)
}

// RequireBucket is RequireTable for an S3 bucket's name.
func (m Main) RequireBucket(name, what string) string {
	return m.requireName(name, what, envvar.Bucket)
}

func (m Main) requireName(name, what string, kind envvar.Kind) string {
	v, err := envvar.Name(os.LookupEnv, name, what, kind)
	if err != nil {
		m.Fail("%v", err)
	}
	return v
}

// Fail stops the function at init with a message on stderr.
func (m Main) Fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, m.Function+": "+format+"\n", args...)
	os.Exit(1)
}
