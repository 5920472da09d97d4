package local

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadAtLeastReadsAgainWhileBehind: a view still behind after one
// bounded wait (503) is read again, and the answer once it caught up is the
// one returned; the minVersion and wait the function bounds are sent.
func TestReadAtLeastReadsAgainWhileBehind(t *testing.T) {
	for _, behind := range []int{0, 1, 3} {
		var reads atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := reads.Add(1)
			if q := r.URL.Query(); q.Get("minVersion") != "30" || q.Get("wait") != "5s" || q.Get("show") != "s1" {
				t.Errorf("read %d: query %s, want minVersion=30, wait=5s and show=s1", n, r.URL.RawQuery)
			}
			if int(n) <= behind {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":"the availability view of show s1 is at version 26, behind the 30 asked for (minVersion), after waiting 5s; read again","version":26}`))
				return
			}
			_, _ = w.Write([]byte(`{"showId":"s1","version":30,"free":6}`))
		}))
		e := &EventSourcing{URL: srv.URL, http: srv.Client()}
		a, err := e.readAtLeast(context.Background(), "ada's bookings on s1", "/customers/ada/bookings", map[string][]string{"show": {"s1"}}, 30, time.Minute)
		srv.Close()
		if err != nil || a.Status != http.StatusOK || a.Version != 30 {
			t.Fatalf("view behind for %d reads: %d %s, %v; want 200 at version 30", behind, a.Status, a.Body, err)
		}
		if got := int(reads.Load()); got != behind+1 {
			t.Fatalf("view behind for %d reads: read %d times, want %d", behind, got, behind+1)
		}
	}
}

// TestReadAtLeastSaysHowFarTheViewGot: a view that has not caught up when
// the wait's bound has passed is an error naming the view, the version
// asked and the last answer.
func TestReadAtLeastSaysHowFarTheViewGot(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"behind","version":26}`))
	}))
	defer srv.Close()
	e := &EventSourcing{URL: srv.URL, http: srv.Client()}
	_, err := e.readAtLeast(context.Background(), "availability of s1", "/shows/s1/availability", nil, 30, 0)
	if err == nil || !strings.Contains(err.Error(), "availability of s1") || !strings.Contains(err.Error(), "version 30") || !strings.Contains(err.Error(), `"version":26`) {
		t.Fatalf("readAtLeast on a view always behind: %v, want an error naming the view and version 30", err)
	}
}
