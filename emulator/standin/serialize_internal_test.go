package standin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// signed is a request as the SDK signs it for service (the credential
// scope is what the serializer reads).
func signed(t *testing.T, url, service, target, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20261202/us-east-1/"+service+"/aws4_request, SignedHeaders=host, Signature=x")
	if target != "" {
		r.Header.Set("X-Amz-Target", target)
	}
	return r
}

// A long poll on an empty queue costs moto about one receive a second, not
// one every 50 ms, and a send ends the wait at once.
func TestLongPollAsksMotoOnceASecondAndWakesOnASend(t *testing.T) {
	var receives atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == "AmazonSQS.ReceiveMessage" {
			receives.Add(1)
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer backend.Close()
	ser, err := newSerializer(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(ser)
	defer front.Close()

	poll := func(ctx context.Context, wait string) {
		resp, err := http.DefaultClient.Do(signed(t, front.URL, "sqs", "AmazonSQS.ReceiveMessage", `{"QueueUrl":"q","WaitTimeSeconds":`+wait+`}`).WithContext(ctx))
		if err != nil {
			if ctx.Err() == nil {
				t.Error(err)
			}
			return
		}
		resp.Body.Close()
	}
	poll(context.Background(), "3")
	if n := receives.Load(); n > 5 {
		t.Errorf("a 3 s long poll on an empty queue sent moto %d receives, want about one a second", n)
	}

	receives.Store(0)
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-done }()
	go func() { defer close(done); poll(ctx, "20") }()
	for receives.Load() == 0 { // the first receive found nothing; the poll now waits
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.DefaultClient.Do(signed(t, front.URL, "sqs", "AmazonSQS.SendMessage", `{"QueueUrl":"q","MessageBody":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for receives.Load() < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("the 20 s poll ended although the (fake) receive after the send found nothing")
	default:
	}
	if n := receives.Load(); n != 2 {
		t.Errorf("%d receives after the send, want exactly the one it woke", n)
	}
}

// A request that keeps moto busy for one service does not hold back another
// service's requests; within a service they still go one at a time.
func TestOneServiceWaitsOnlyForItself(t *testing.T) {
	release := make(chan struct{})
	var inside, most atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), "/monitoring/") {
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-release
			inside.Add(-1)
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer backend.Close()
	ser, err := newSerializer(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(ser)
	defer front.Close()

	slow := make(chan error, 2)
	for range 2 {
		go func() {
			resp, err := http.DefaultClient.Do(signed(t, front.URL, "monitoring", "", "Action=GetMetricData"))
			if err == nil {
				resp.Body.Close()
			}
			slow <- err
		}()
	}
	for inside.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	// While CloudWatch's request is held, DynamoDB and its streams answer.
	for _, svc := range []string{"dynamodb", "streams.dynamodb", "kinesis"} {
		resp, err := http.DefaultClient.Do(signed(t, front.URL, svc, "X.Op", `{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	close(release)
	for range 2 {
		if err := <-slow; err != nil {
			t.Fatal(err)
		}
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d CloudWatch requests reached moto at once, want one at a time", m)
	}
}
