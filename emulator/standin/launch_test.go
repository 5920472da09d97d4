package standin

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A moto that exits before answering (its private port taken between
// FreePort and its bind, as when several test parts start motos at once)
// is launched again on another port; one that never starts says why with
// its last output.
func TestLaunchMotoRetriesAnEarlyExit(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed (the stand-in's own prerequisite)")
	}
	for _, tt := range []struct {
		name      string
		failFirst int // launches that exit at once
		wantErr   string
	}{
		{"first launch exits, the second answers", 1, ""},
		{"two exit, the third answers", 2, ""},
		{"every launch exits", motoAttempts, "Address already in use"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			www := filepath.Join(dir, "www", "moto-api")
			if err := os.MkdirAll(www, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			// Stands in for the venv's python3 running the launcher: $5 is
			// moto's port (launcher -H 127.0.0.1 -p PORT).
			script := "#!/bin/sh\n" +
				"n=$(cat " + dir + "/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > " + dir + "/n\n" +
				"if [ $n -le " + string(rune('0'+tt.failFirst)) + " ]; then echo 'OSError: [Errno 98] Address already in use' >&2; exit 1; fi\n" +
				"cd " + filepath.Dir(www) + " && exec " + py + " -m http.server --bind 127.0.0.1 $5\n"
			if err := os.WriteFile(filepath.Join(bin, "python3"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			s, backend, err := launchMotoRetrying(context.Background(), filepath.Join(bin, "moto_server"), "launcher.py", io.Discard, "http://127.0.0.1:1")
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, errMotoExited) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want moto exited quoting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			if !Answers(context.Background(), backend) {
				t.Errorf("%s does not answer", backend)
			}
		})
	}
}
