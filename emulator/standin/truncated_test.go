package standin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/emulator/standin"
)

// An answer cut short on its way from moto (the proxy losing its
// connection mid-body under load) is asked again, not failed as if the
// code under test had done something wrong.
func TestATruncatedAnswerIsAskedAgain(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if calls.Add(1) == 1 {
			w.Header().Set("Content-Length", "100")
			_, _ = w.Write([]byte(`{"Items":[{"pk":{"S":"a`)) // and the connection closes
			return
		}
		_, _ = w.Write([]byte(`{"Count":0,"Items":[],"ScannedCount":0}`))
	}))
	defer srv.Close()
	cfg, err := standin.Config(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dynamodb.NewFromConfig(cfg).Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String("t"),
		KeyConditionExpression: aws.String("pk = :k"), ExpressionAttributeValues: nil})
	if err != nil || calls.Load() != 2 {
		t.Fatalf("%d calls, error %v; want the truncated answer asked again once", calls.Load(), err)
	}
}
