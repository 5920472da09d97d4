package standin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

// ProbePatience bounds how long Probe waits for the first AWS answer of an
// address that accepts connections. moto answers at once; LocalStack builds
// its service catalog on its first request, which took 15 s on the 2-core
// machine this project is checked on, and longer while other work runs.
const ProbePatience = 90 * time.Second

// probeNotice is how long Probe waits quietly before saying that it waits.
const probeNotice = 2 * time.Second

// Found is what answers AWS calls at an address.
type Found struct {
	// Kind names it: "moto", "LocalStack <version> (<edition>)", or "an AWS
	// endpoint of unknown kind". Empty when nothing listens at the address.
	Kind string
	// Account is the account id its STS GetCallerIdentity answered
	// (moto: 123456789012, LocalStack: 000000000000); empty when it
	// answered the call with an AWS error instead.
	Account string
	// Waited is how long its first AWS answer took.
	Waited time.Duration
	// Owner is who started it, when it is a Tributary stand-in (moto
	// behind another run's serializer); nil for anything else.
	Owner *Owner
}

// StopsWithRun reports whether what answers is a stand-in that another
// run started and stops when that run ends (a make local): whoever
// deploys onto it loses it then.
func (f Found) StopsWithRun() bool { return f.Owner != nil && f.Owner.StopsWithRun }

// Listening reports whether something answered at the address.
func (f Found) Listening() bool { return f.Kind != "" }

// String is what a banner prints: "LocalStack 2026.3.0 (community),
// account 000000000000, first answer after 14.9s".
func (f Found) String() string {
	if !f.Listening() {
		return "nothing"
	}
	s := f.Kind
	if f.Owner != nil {
		s += ", the stand-in of " + f.Owner.String()
	}
	if f.Account != "" {
		s += ", account " + f.Account
	}
	return s + ", first answer after " + f.Waited.Round(100*time.Millisecond).String()
}

// BusyError is an address that accepts connections but does not answer as
// an AWS endpoint within the probe's patience: no stand-in can start there.
type BusyError struct {
	Addr   string
	Reason string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("standin: %s is in use by something that is not an AWS endpoint (%s): stop it, or pick a free address (TRIBUTARY_STANDIN_ADDR=%s, or -addr)",
		e.Addr, e.Reason, OtherAddr(e.Addr))
}

// Probe says what answers at addr (host:port on this machine). Nothing
// listening is Found{} and no error. Something listening is asked a real
// AWS call, STS GetCallerIdentity, and given up to patience for its first
// answer (0 means ProbePatience); an AWS answer (a result or an AWS error
// such as an unknown client) makes it an AWS endpoint, named by its own
// health or dashboard page. Anything else is a *BusyError naming addr.
// When the answer takes longer than a moment and progress is not nil, a
// line there says what Probe waits for.
func Probe(ctx context.Context, addr string, patience time.Duration, progress io.Writer) (Found, error) {
	if patience <= 0 {
		patience = ProbePatience
	}
	conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return Found{}, ctx.Err()
		}
		return Found{}, nil // nothing listens there
	}
	conn.Close()

	endpoint := "http://" + addr
	began := time.Now()
	if progress != nil {
		notice := time.AfterFunc(probeNotice, func() {
			fmt.Fprintf(progress, "  something listens on %s: waiting up to %s for its first AWS answer (STS GetCallerIdentity; LocalStack takes about 15 s on its first request)\n",
				addr, patience)
		})
		defer notice.Stop()
	}
	account, err := callerAccount(ctx, endpoint, patience)
	waited := time.Since(began)
	if err != nil {
		if ctx.Err() != nil {
			return Found{}, ctx.Err()
		}
		return Found{}, &BusyError{Addr: addr, Reason: err.Error()}
	}
	kind, owner := identify(ctx, endpoint)
	return Found{Kind: kind, Account: account, Waited: waited, Owner: owner}, nil
}

// callerAccount asks endpoint STS GetCallerIdentity once (no retry), within
// patience. It returns the account id, "" with no error when the endpoint
// answered with an AWS error, or why the answer was not an AWS one.
func callerAccount(ctx context.Context, endpoint string, patience time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	client := sts.New(sts.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   &http.Client{Timeout: patience},
		Retryer:      aws.NopRetryer{},
	})
	out, err := client.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err == nil {
		return aws.ToString(out.Account), nil
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() != "" && api.ErrorCode() != "UnknownError" {
		return "", nil // an AWS error answer: it speaks the protocol
	}
	if ctx.Err() != nil || isTimeout(err) {
		return "", fmt.Errorf("it accepted a connection but did not answer STS GetCallerIdentity within %s", patience)
	}
	return "", fmt.Errorf("its answer to STS GetCallerIdentity is not an AWS one: %s", firstLine(err.Error(), 200))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// firstLine is s up to its first newline, at most n bytes.
func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// identify names the AWS endpoint at endpoint: LocalStack by its health
// endpoint (asked first: LocalStack answers moto's path as an S3 bucket),
// moto by its dashboard API (also behind another run's stand-in, which
// says who started it at OwnerPath).
func identify(ctx context.Context, endpoint string) (string, *Owner) {
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) ([]byte, int) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+path, nil)
		if err != nil {
			return nil, 0
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return b, resp.StatusCode
	}
	if b, status := get("/_localstack/health"); status == http.StatusOK {
		var h struct{ Version, Edition string }
		if json.Unmarshal(b, &h) == nil && h.Version != "" {
			if h.Edition == "" || h.Edition == "unknown" { // host mode says unknown
				return "LocalStack " + h.Version, nil
			}
			return fmt.Sprintf("LocalStack %s (%s)", h.Version, h.Edition), nil
		}
		return "LocalStack", nil
	}
	if b, status := get("/moto-api/"); status == http.StatusOK && strings.Contains(strings.ToLower(string(b)), "moto") {
		var owner *Owner
		if b, status := get(OwnerPath); status == http.StatusOK {
			var o Owner
			if json.Unmarshal(b, &o) == nil && o.Command != "" {
				owner = &o
			}
		}
		return "moto", owner
	}
	return "an AWS endpoint of unknown kind", nil
}
