package standin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// serializer sits in front of moto and lets one request per AWS service
// through at a time.
//
// moto 5.2.5 serves requests on threads without locking its in-memory
// backends: concurrent PutRecords hand out the same Kinesis sequence number
// twice and lose records, and concurrent UpdateItem ADDs lose updates (the
// stand-in conformance tests found 78 of 8,000 records and 1 of 1,600 updates
// lost). Real AWS does neither, and the exactly-once guarantees are tested
// against this endpoint, so requests are serialized here. moto is effectively
// single-threaded anyway (8 concurrent clients were no faster than one).
// Its services keep separate backends, so the lock is per service (those
// that share a backend, DynamoDB and its streams, SQS and SNS, share one):
// a slow request of one service, such as a CloudWatch GetMetricData over
// every data point of a run (over a second), takes its turns at the Python
// interpreter beside the others instead of holding all of them back.
//
// An SQS long poll must not hold the lock for up to 20 s: ReceiveMessage is
// forwarded with WaitTimeSeconds 0, without the lock in between, until a
// message arrives or the wait is over. It is repeated as soon as any SQS
// request that can make a message visible (a send, a visibility change, a
// message move) has passed, and otherwise every idleReceive, for messages
// whose visibility timeout or delay ran out: a waiting poller costs the one
// moto a request a second, not twenty.
type serializer struct {
	locks   sync.Map // service (see lock) → *sync.Mutex
	backend *url.URL
	proxy   *httputil.ReverseProxy
	client  *http.Client

	sqsMu      sync.Mutex
	sqsChanged chan struct{} // closed (and replaced) after a request that can make a message visible
}

const idleReceive = time.Second

// lockGroups maps a signing name to the lock of the services that share
// its backend in moto; any other service has a lock of its own.
var lockGroups = map[string]string{"streams.dynamodb": "dynamodb", "sns": "sqs"}

// lock is the mutex of r's service, named by the credential scope of its
// SigV4 signature (Credential=<key>/<date>/<region>/<service>/aws4_request);
// an unsigned request shares one lock with every other unsigned one.
func (s *serializer) lock(r *http.Request) *sync.Mutex {
	service := ""
	if _, cred, ok := strings.Cut(r.Header.Get("Authorization"), "Credential="); ok {
		if parts := strings.Split(strings.SplitN(cred, ",", 2)[0], "/"); len(parts) == 5 {
			service = parts[3]
		}
	}
	if g, ok := lockGroups[service]; ok {
		service = g
	}
	m, _ := s.locks.LoadOrStore(service, new(sync.Mutex))
	return m.(*sync.Mutex)
}

// sqsWrites are the SQS actions after which a waiting receive looks again.
var sqsWrites = map[string]bool{
	"AmazonSQS.SendMessage": true, "AmazonSQS.SendMessageBatch": true,
	"AmazonSQS.ChangeMessageVisibility": true, "AmazonSQS.ChangeMessageVisibilityBatch": true,
	"AmazonSQS.StartMessageMoveTask": true, "AmazonSQS.PurgeQueue": true,
}

// changed is closed after the next request that can make a message visible.
func (s *serializer) changed() <-chan struct{} {
	s.sqsMu.Lock()
	defer s.sqsMu.Unlock()
	return s.sqsChanged
}

func (s *serializer) signalSQS() {
	s.sqsMu.Lock()
	defer s.sqsMu.Unlock()
	close(s.sqsChanged)
	s.sqsChanged = make(chan struct{})
}

func newSerializer(backend string) (*serializer, error) {
	u, err := url.Parse(backend)
	if err != nil {
		return nil, fmt.Errorf("standin: backend %q: %w", backend, err)
	}
	transport := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	return &serializer{
		backend: u,
		proxy: &httputil.ReverseProxy{
			Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
			Transport: transport,
			// A client that gives up (a poller shutting down) is not an error worth a log line.
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				if r.Context().Err() == nil {
					http.Error(w, "standin: "+err.Error(), http.StatusBadGateway)
				}
			},
		},
		client:     &http.Client{Transport: transport},
		sqsChanged: make(chan struct{}),
	}, nil
}

func (s *serializer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Amz-Target") == "AmazonSQS.ReceiveMessage" {
		s.receiveMessage(w, r)
		return
	}
	if sqsWrites[r.Header.Get("X-Amz-Target")] {
		defer s.signalSQS()
	}
	mu := s.lock(r)
	mu.Lock()
	defer mu.Unlock()
	s.proxy.ServeHTTP(w, r)
}

// receiveMessage turns a long poll into short polls taken one at a time.
func (s *serializer) receiveMessage(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in map[string]any
	if err := json.Unmarshal(body, &in); err != nil {
		mu := s.lock(r)
		mu.Lock()
		defer mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.proxy.ServeHTTP(w, r)
		return
	}
	wait := time.Duration(0)
	if v, ok := in["WaitTimeSeconds"].(float64); ok {
		wait = time.Duration(v * float64(time.Second))
	}
	in["WaitTimeSeconds"] = 0
	short, _ := json.Marshal(in)
	deadline := time.Now().Add(wait)
	for {
		changed := s.changed() // before the receive: a send during it wakes the next wait
		status, header, out, err := s.forward(r.Context(), r, short)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		if status != http.StatusOK || hasMessages(out) || !time.Now().Before(deadline) {
			for k, v := range header {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(status)
			_, _ = w.Write(out)
			return
		}
		t := time.NewTimer(min(idleReceive, time.Until(deadline)))
		select {
		case <-r.Context().Done():
			t.Stop()
			return
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

func (s *serializer) forward(ctx context.Context, r *http.Request, body []byte) (int, http.Header, []byte, error) {
	u := *s.backend
	u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header = r.Header.Clone()
	req.Header.Del("Content-Length")
	req.Host = r.Host
	mu := s.lock(r)
	mu.Lock()
	defer mu.Unlock()
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out, err
}

func hasMessages(out []byte) bool {
	var resp struct {
		Messages []json.RawMessage `json:"Messages"`
	}
	return json.Unmarshal(out, &resp) == nil && len(resp.Messages) > 0
}

// serve starts the serializer on ln in front of backend, wrapped by wrap when set.
func serve(ln net.Listener, backend string, owner Owner, wrap func(http.Handler) http.Handler) (*http.Server, error) {
	ser, err := newSerializer(backend)
	if err != nil {
		return nil, err
	}
	var h http.Handler = ser
	if wrap != nil {
		h = wrap(ser)
	}
	h = withOwner(h, owner)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}

// OwnerPath is where a stand-in says who started it (an Owner as JSON), for
// Probe. No AWS API has a path under /_tributary/.
const OwnerPath = "/_tributary/standin"

// withOwner answers GET OwnerPath with owner and passes every other request
// to next.
func withOwner(next http.Handler, owner Owner) http.Handler {
	body, _ := json.Marshal(owner) // a struct of strings, ints and bools: cannot fail
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == OwnerPath {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
			return
		}
		next.ServeHTTP(w, r)
	})
}
