package aggregate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// ParameterReader reads the value of an SSM String parameter.
type ParameterReader interface {
	Parameter(ctx context.Context, name string) (string, error)
}

// SSMParameters reads SSM parameters with one GetParameter request each:
// SSM's JSON 1.1 protocol, signed with Signature Version 4 by the SDK's
// signer, sent to the regional endpoint (or the configuration's
// BaseEndpoint, AWS_ENDPOINT_URL under the local runner). Throttling, 5xx
// answers and network errors are retried three times with backoff, as the
// SDK's standard retryer does.
//
// Why not the SDK's SSM client: the function makes this one call, at init
// and then every VIEWS_REFRESH_SECONDS, and the client package costs every
// aggregate and ticker binary about 2.9 MB and 3 ms of package init at each
// cold start (its request schemas are built when the process starts).
type SSMParameters struct {
	cfg      aws.Config
	endpoint string
	signer   *v4.Signer
	client   aws.HTTPClient
	now      func() time.Time
	backoff  func(attempt int) time.Duration
}

// NewSSMParameters returns a reader for cfg's region, credentials and
// endpoint.
func NewSSMParameters(cfg aws.Config) *SSMParameters {
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	endpoint := aws.ToString(cfg.BaseEndpoint)
	if endpoint == "" {
		endpoint = ssmEndpoint(cfg.Region)
	}
	return &SSMParameters{
		cfg: cfg, endpoint: strings.TrimRight(endpoint, "/") + "/", signer: v4.NewSigner(), client: client, now: time.Now,
		backoff: func(attempt int) time.Duration {
			d := min(20*time.Second, 50*time.Millisecond<<attempt)
			return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
		},
	}
}

// ssmEndpoint is SSM's regional endpoint: the DNS suffix of the region's
// partition, as the SDK's partition table has it.
func ssmEndpoint(region string) string {
	suffix := "amazonaws.com"
	for _, p := range []struct{ prefix, suffix string }{
		{"cn-", "amazonaws.com.cn"},
		{"us-isob-", "sc2s.sgov.gov"},
		{"us-isof-", "csp.hci.ic.gov"},
		{"us-iso-", "c2s.ic.gov"},
		{"eu-isoe-", "cloud.adc-e.uk"},
		{"eusc-", "amazonaws.eu"},
	} {
		if strings.HasPrefix(region, p.prefix) {
			suffix = p.suffix
			break
		}
	}
	return "https://ssm." + region + "." + suffix
}

// SSMError is an error SSM answered with.
type SSMError struct {
	Status  int
	Code    string // e.g. ParameterNotFound, AccessDeniedException
	Message string
}

func (e *SSMError) Error() string {
	return fmt.Sprintf("SSM GetParameter: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

func (e *SSMError) retryable() bool {
	if e.Status >= 500 || e.Status == http.StatusTooManyRequests {
		return true
	}
	switch e.Code {
	case "ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded", "InternalServerError":
		return true
	}
	return false
}

const ssmAttempts = 3

// Parameter returns the parameter's value.
func (s *SSMParameters) Parameter(ctx context.Context, name string) (string, error) {
	body, err := json.Marshal(struct {
		Name string `json:"Name"`
	}{name})
	if err != nil {
		return "", err
	}
	var last error
	for attempt := 0; attempt < ssmAttempts; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(s.backoff(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return "", errors.Join(last, ctx.Err())
			case <-t.C:
			}
		}
		v, err := s.get(ctx, body)
		if err == nil {
			return v, nil
		}
		last = err
		var se *SSMError
		var ne net.Error
		switch {
		case errors.As(err, &se) && se.retryable():
		case errors.As(err, &ne), errors.Is(err, io.ErrUnexpectedEOF):
		default:
			return "", err
		}
		if ctx.Err() != nil {
			return "", err
		}
	}
	return "", last
}

func (s *SSMParameters) get(ctx context.Context, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "AmazonSSM.GetParameter")
	if s.cfg.Credentials == nil {
		return "", errors.New("SSM GetParameter: no credentials in the AWS configuration")
	}
	creds, err := s.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return "", fmt.Errorf("SSM GetParameter: credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	if err := s.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "ssm", s.cfg.Region, s.now()); err != nil {
		return "", fmt.Errorf("SSM GetParameter: signing: %w", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
			Msg     string `json:"Message"`
		}
		_ = json.Unmarshal(raw, &e)
		code := e.Type
		if i := strings.LastIndexByte(code, '#'); i >= 0 {
			code = code[i+1:]
		}
		if code == "" {
			code = resp.Header.Get("X-Amzn-ErrorType")
			code, _, _ = strings.Cut(code, ":")
		}
		msg := e.Message
		if msg == "" {
			msg = e.Msg
		}
		if msg == "" && code == "" {
			msg = strings.TrimSpace(string(raw))
		}
		return "", &SSMError{Status: resp.StatusCode, Code: code, Message: msg}
	}
	var out struct {
		Parameter *struct {
			Value *string `json:"Value"`
		} `json:"Parameter"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", fmt.Errorf("SSM GetParameter: answer %.200q: %w", raw, err)
	}
	if out.Parameter == nil || out.Parameter.Value == nil {
		return "", nil
	}
	return *out.Parameter.Value, nil
}
