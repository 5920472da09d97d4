package main

import (
	"fmt"
	"net"
	"strings"
	"testing"
)

// The banner's make invoke reaches this run's Lambda API: make invoke asks
// port 3001 unless LAMBDA_PORT says otherwise, and finding nothing there it
// brings up a private stack instead, so a make local-up on another port
// (-lambda-port) must name it or the event never reaches it.
func TestBannerInvokeNamesTheLambdaPort(t *testing.T) {
	tests := []struct{ invokeURL, want string }{
		{"http://127.0.0.1:3001", "make invoke FN=ingest EVENT=events/ingest/function-url-post.json"},
		{"http://127.0.0.1:40123", "make invoke FN=ingest EVENT=events/ingest/function-url-post.json LAMBDA_PORT=40123"},
	}
	for _, tc := range tests {
		if got := invokeCommand(tc.invokeURL); got != tc.want {
			t.Errorf("invokeCommand(%s) = %q, want %q", tc.invokeURL, got, tc.want)
		}
	}
}

// A second make local-up beside a running one stops before the stand-in
// step, naming the taken port and the flag that moves it: it used to say it
// would deploy onto the first one's stand-in, then fail on the port.
func TestPortsFreeNamesATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	if err := portsFree(ports{url: 0, lambda: -1, dashboard: 0}); err != nil {
		t.Errorf("any free port and none: %v, want no error", err)
	}
	err = portsFree(ports{url: 0, lambda: taken, dashboard: -1})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d for the Lambda Invoke API is in use", taken)) || !strings.Contains(err.Error(), "-lambda-port moves this one") {
		t.Errorf("a taken Lambda port: %v, want it named with the flag that moves it", err)
	}
}
