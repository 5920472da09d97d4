package ingest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/internal/envvar"
)

// Environment variables EnvOptions reads; all are optional, except that
// INGEST_AUTH=HMAC needs INGEST_SECRET_ARN.
const (
	// EnvRoutes is a JSON object from Function URL path to policy, for
	// example {"/": "buffer", "/metrics": "drop", "/orders": "backpressure"}.
	// Unset: {"/": "backpressure"}.
	EnvRoutes = "INGEST_ROUTES"
	// EnvDropSample is N in "log 1 in N dropped events". Unset: 100.
	EnvDropSample = "INGEST_DROP_SAMPLE"
	// EnvIdempotencyTable names the DynamoDB table of request records
	// (package idempotency's schema). Unset: the Idempotency-Key header is
	// refused.
	EnvIdempotencyTable = "INGEST_IDEMPOTENCY_TABLE"
	// EnvIdempotencyExpiry is how long a key is remembered (a Go duration
	// such as 24h, between 1m and 168h). Unset: DefaultIdempotencyExpiry.
	EnvIdempotencyExpiry = "INGEST_IDEMPOTENCY_EXPIRY"
	// EnvMaxEventAge is the oldest an event may be when sent (a Go
	// duration; the stack sets the events stream's retention). Unset:
	// DefaultMaxEventAge.
	EnvMaxEventAge = "INGEST_MAX_EVENT_AGE"
	// EnvAuth is how producers authenticate: AWS_IAM (SigV4, checked by
	// the function URL) or HMAC (signed requests, checked by the handler).
	// Unset: AWS_IAM.
	EnvAuth = "INGEST_AUTH"
	// EnvSecretARN is the Secrets Manager secret signed requests are
	// checked with (INGEST_AUTH=HMAC).
	EnvSecretARN = "INGEST_SECRET_ARN"
)

// Auth modes (INGEST_AUTH).
const (
	AuthIAM  = "AWS_IAM"
	AuthHMAC = "HMAC"
)

// Clients are the AWS clients the options from the environment may need:
// DynamoDB for EnvIdempotencyTable, Secrets Manager for INGEST_AUTH=HMAC.
type Clients struct {
	DynamoDB       requestTable
	SecretsManager secretReader
}

// secretLoadTimeout bounds reading the signing secret at init.
const secretLoadTimeout = 10 * time.Second

// EnvOptions reads the optional INGEST_* variables with getenv (os.Getenv
// in main) and returns the options they set. A malformed value is an error
// naming the variable; unset variables keep the defaults. With
// INGEST_AUTH=HMAC it reads the signing secret now, so that a missing
// secret or permission fails the function's init naming it.
func EnvOptions(ctx context.Context, getenv func(string) string, c Clients) ([]Option, error) {
	var opts []Option
	if v := strings.TrimSpace(getenv(EnvRoutes)); v != "" {
		routes, err := ParseRoutes(v)
		if err != nil {
			return nil, fmt.Errorf("environment variable %s: %w", EnvRoutes, err)
		}
		opts = append(opts, WithRoutes(routes))
	}
	if v := strings.TrimSpace(getenv(EnvDropSample)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("environment variable %s: %q is not a whole number of at least 1 (log 1 in N dropped events)", EnvDropSample, v)
		}
		opts = append(opts, WithDropSample(n))
	}
	if v := strings.TrimSpace(getenv(EnvMaxEventAge)); v != "" {
		d, err := envDuration(EnvMaxEventAge, v, time.Minute, 365*24*time.Hour)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithMaxEventAge(d))
	}
	if table := strings.TrimSpace(getenv(EnvIdempotencyTable)); table != "" {
		if err := envvar.Check(table, envvar.Table); err != nil {
			return nil, fmt.Errorf("environment variable %s: %w", EnvIdempotencyTable, err)
		}
		expiry := DefaultIdempotencyExpiry
		if v := strings.TrimSpace(getenv(EnvIdempotencyExpiry)); v != "" {
			d, err := envDuration(EnvIdempotencyExpiry, v, time.Minute, 7*24*time.Hour)
			if err != nil {
				return nil, err
			}
			expiry = d
		}
		if c.DynamoDB == nil {
			return nil, fmt.Errorf("environment variable %s is set but no DynamoDB client was given", EnvIdempotencyTable)
		}
		opts = append(opts, WithIdempotency(NewRequestStore(c.DynamoDB, table), expiry))
	}
	switch auth := strings.TrimSpace(getenv(EnvAuth)); auth {
	case "", AuthIAM:
	case AuthHMAC:
		arn := strings.TrimSpace(getenv(EnvSecretARN))
		if arn == "" {
			return nil, fmt.Errorf("environment variable %s is not set: %s=%s checks signatures with that secret", EnvSecretARN, EnvAuth, AuthHMAC)
		}
		if c.SecretsManager == nil {
			return nil, fmt.Errorf("environment variable %s=%s but no Secrets Manager client was given", EnvAuth, AuthHMAC)
		}
		secret := NewSecretsManagerSecret(c.SecretsManager, arn)
		lctx, cancel := context.WithTimeout(ctx, secretLoadTimeout)
		defer cancel()
		if err := secret.Load(lctx); err != nil {
			return nil, fmt.Errorf("environment variable %s: %w", EnvSecretARN, err)
		}
		opts = append(opts, WithSignedRequests(secret))
	default:
		return nil, fmt.Errorf("environment variable %s: %q is not %s or %s", EnvAuth, auth, AuthIAM, AuthHMAC)
	}
	return opts, nil
}

func envDuration(name, v string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || d > hi {
		return 0, fmt.Errorf("environment variable %s: %q is not a duration between %s and %s (such as 24h)", name, v, lo, hi)
	}
	return d, nil
}
