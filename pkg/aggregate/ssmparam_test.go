package aggregate_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/aggregate"
)

// The views parameter is read from the stand-in's SSM as the SDK's client
// reads it: the value, a refresh that sees a swap, and SSM's own error for
// a parameter that does not exist.
func TestSSMParametersReadsTheStandIn(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	sdk := ssm.NewFromConfig(cfg)
	put := func(v string) {
		t.Helper()
		if _, err := sdk.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/tributary/views"), Value: aws.String(v),
			Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true)}); err != nil {
			t.Fatal(err)
		}
	}
	put("views-v1")
	p := aggregate.NewSSMParameters(cfg)
	if v, err := p.Parameter(ctx, "/tributary/views"); err != nil || v != "views-v1" {
		t.Fatalf("Parameter = %q, %v; want views-v1", v, err)
	}
	now := func() time.Time { return clockNow }
	vt := aggregate.NewViewsTable(p, "/tributary/views", time.Minute, now, nil)
	if err := vt.Resolve(ctx); err != nil {
		t.Fatal(err)
	}
	put("views-v2")
	if got := vt.Current(ctx); got != "views-v1" {
		t.Errorf("within the refresh interval: %q, want views-v1", got)
	}
	clockNow = clockNow.Add(2 * time.Minute)
	if got := vt.Current(ctx); got != "views-v2" {
		t.Errorf("after the refresh interval: %q, want views-v2", got)
	}

	_, err := p.Parameter(ctx, "/tributary/missing")
	var se *aggregate.SSMError
	if !errors.As(err, &se) || se.Code != "ParameterNotFound" {
		t.Errorf("a missing parameter: %v, want SSM's ParameterNotFound", err)
	}
}

var clockNow = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// Throttling and 5xx answers are retried; other errors are not; the
// request is signed for SSM with the session token.
func TestSSMParametersRetriesThrottling(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.Header.Get("X-Amz-Target") != "AmazonSSM.GetParameter" || !strings.Contains(r.Header.Get("Authorization"), "/ssm/aws4_request") ||
			r.Header.Get("X-Amz-Security-Token") != "token" {
			http.Error(w, `{"__type":"BadRequest","message":"unsigned"}`, http.StatusBadRequest)
			return
		}
		switch {
		case strings.Contains(r.URL.Path, "x") || n == 1:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.ssm#ThrottlingException","message":"Rate exceeded"}`))
		case n == 2:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"__type":"InternalServerError","message":"oops"}`))
		default:
			_, _ = w.Write([]byte(`{"Parameter":{"Name":"/p","Type":"String","Value":"views-v3","Version":3}}`))
		}
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIA", SecretAccessKey: "s", SessionToken: "token"}, nil
		})}
	v, err := aggregate.NewSSMParameters(cfg).Parameter(context.Background(), "/p")
	if err != nil || v != "views-v3" || calls.Load() != 3 {
		t.Fatalf("Parameter = %q, %v after %d calls; want views-v3 on the third", v, err, calls.Load())
	}

	calls.Store(10)
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"AccessDeniedException","message":"not allowed"}`))
	}))
	defer denied.Close()
	cfg.BaseEndpoint = aws.String(denied.URL)
	_, err = aggregate.NewSSMParameters(cfg).Parameter(context.Background(), "/p")
	var se *aggregate.SSMError
	if !errors.As(err, &se) || se.Code != "AccessDeniedException" || calls.Load() != 11 {
		t.Errorf("access denied: %v after %d calls, want AccessDeniedException, not retried", err, calls.Load()-10)
	}
}
