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

// Moto is started on a port of its own choosing (-p 0) and used where it
// says it runs: two stand-ins started at once can never meet on one port
// (two end-to-end tests once deployed onto one moto: ParameterAlreadyExists).
// A moto that exits before answering is launched again; one that never
// starts says why with its last output.
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
		{"every launch exits", motoAttempts, "moto failed to start"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(ZygoteEnv, "") // the launch of a moto on its own
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			www := filepath.Join(dir, "www", "moto-api")
			if err := os.MkdirAll(www, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			// Stands in for the venv's python3 running the launcher with
			// -p 0: it serves on a port the kernel picks and says which,
			// as werkzeug does.
			serve := `import http.server, os, sys
os.chdir(sys.argv[1])
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
print(" * Running on http://127.0.0.1:%d" % s.server_address[1], file=sys.stderr, flush=True)
s.serve_forever()
`
			if err := os.WriteFile(filepath.Join(dir, "serve.py"), []byte(serve), 0o644); err != nil {
				t.Fatal(err)
			}
			script := "#!/bin/sh\n" +
				"[ \"$5\" = 0 ] || { echo \"want -p 0, got $*\" >&2; exit 2; }\n" +
				"n=$(cat " + dir + "/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > " + dir + "/n\n" +
				"if [ $n -le " + string(rune('0'+tt.failFirst)) + " ]; then echo 'ImportError: moto failed to start' >&2; exit 1; fi\n" +
				"exec " + py + " " + filepath.Join(dir, "serve.py") + " " + filepath.Dir(www) + "\n"
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
			// A second stand-in at once gets a port of its own.
			if err := os.Remove(filepath.Join(dir, "n")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "n"), []byte("9"), 0o644); err != nil {
				t.Fatal(err)
			}
			s2, backend2, err := launchMotoRetrying(context.Background(), filepath.Join(bin, "moto_server"), "launcher.py", io.Discard, "http://127.0.0.1:2")
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Stop()
			if backend2 == backend {
				t.Errorf("two stand-ins on one backend %s", backend)
			}
		})
	}
}

// TestLastWordsLeaveOutTheBanner: how moto ended quotes what it said
// before it ended, without werkzeug's colour codes or its start-up banner
// (which names moto's private port, not the stand-in's address).
func TestLastWordsLeaveOutTheBanner(t *testing.T) {
	banner := "\x1b[31m\x1b[1mWARNING: This is a development server. Do not use it in a production deployment. Use a production WSGI server instead.\x1b[0m\n" +
		" * Running on http://127.0.0.1:46597\n\x1b[33mPress CTRL+C to quit\x1b[0m\n"
	for _, tc := range []struct{ out, want string }{
		{banner, ""},
		{banner + "Traceback (most recent call last):\nMemoryError\n", "Traceback (most recent call last):\nMemoryError"},
	} {
		if got := lastWords(tc.out); got != tc.want {
			t.Errorf("lastWords(%q) = %q, want %q", tc.out, got, tc.want)
		}
	}
}
