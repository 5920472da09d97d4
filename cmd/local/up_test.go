package main

import "testing"

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

// The banner's make logs of a second make local-up (stack Tributary-<time>
// on the first's stand-in) names its stack: make logs shows Tributary's
// functions unless told.
func TestBannerLogsNamesTheStack(t *testing.T) {
	for _, tc := range []struct{ stack, want string }{
		{"Tributary", "logs"},
		{"Tributary-1765000000", "logs STACK=Tributary-1765000000"},
	} {
		if got := logsArgs(tc.stack); got != tc.want {
			t.Errorf("logsArgs(%s) = %q, want %q", tc.stack, got, tc.want)
		}
	}
}
