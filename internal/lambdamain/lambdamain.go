// Package lambdamain is what every function's thin main needs before
// lambda.Start: the AWS configuration, and configuration errors that stop
// the function at init naming the variable, as Lambda reports an init failure.
package lambdamain

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Main is one function's init.
type Main struct{ Function string }

// AWSConfig loads the default AWS configuration; AWS_ENDPOINT_URL, when set
// (the local runner), points every client at the stand-in.
func (m Main) AWSConfig() aws.Config {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		m.Fail("loading the AWS configuration: %v", err)
	}
	return cfg
}

// RequireEnv returns the variable's value, or stops the function naming it
// and what it is for.
func (m Main) RequireEnv(name, what string) string {
	v := os.Getenv(name)
	if v == "" {
		m.Fail("environment variable %s is not set (%s)", name, what)
	}
	return v
}

// Fail stops the function at init with a message on stderr.
func (m Main) Fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, m.Function+": "+format+"\n", args...)
	os.Exit(1)
}
