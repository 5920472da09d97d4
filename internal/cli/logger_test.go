package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aws/smithy-go/logging"
)

// TestQuietLogger: the SDK's warning about draining an answer whose call
// had ended is dropped; its other lines still reach stderr.
func TestQuietLogger(t *testing.T) {
	for _, tc := range []struct {
		format string
		args   []any
		kept   bool
	}{
		{"failed to discard remaining HTTP response body, this may affect connection reuse: %v", []any{"context canceled"}, false},
		{"failed to close HTTP response body, this may affect connection reuse: %v", []any{"use of closed network connection"}, true},
		{"request has failed, retrying: %v", []any{"throttled"}, true},
	} {
		var buf bytes.Buffer
		quietLogger{logging.NewStandardLogger(&buf)}.Logf(logging.Warn, tc.format, tc.args...)
		if got := strings.Contains(buf.String(), strings.SplitN(tc.format, ",", 2)[0]); got != tc.kept {
			t.Errorf("%q: written %v (%q), want %v", tc.format, got, buf.String(), tc.kept)
		}
	}
}
