package headless

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// DefaultPath is where Debian's chromium package installs the browser.
const DefaultPath = "/usr/bin/chromium"

// ErrNoBrowser is returned when chromium is not installed.
var ErrNoBrowser = errors.New("chromium is not installed (make deps-browser installs it: apt-get install -y chromium)")

// Path returns the chromium to run: $TRIBUTARY_CHROMIUM, /usr/bin/chromium,
// or chromium on PATH.
func Path() (string, error) {
	if p := os.Getenv("TRIBUTARY_CHROMIUM"); p != "" {
		return p, nil
	}
	if _, err := os.Stat(DefaultPath); err == nil {
		return DefaultPath, nil
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p, nil
	}
	return "", ErrNoBrowser
}

// Flags are the command-line switches (without "--") chromium runs with:
// headless, and nothing that reaches for the network (quic, component
// updates, sync, background requests) or for a first-run dialog.
var Flags = []string{"headless", "no-sandbox", "disable-gpu", "disable-quic", "no-first-run",
	"disable-background-networking", "disable-component-update", "disable-sync"}

// Screenshot loads url in a window of width × height pixels and saves a PNG
// of it at path.
func Screenshot(ctx context.Context, url, path string, width, height int) error {
	bin, err := Path()
	if err != nil {
		return err
	}
	profile, err := os.MkdirTemp("", "tributary-chromium-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	_ = os.Remove(abs)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	args := make([]string, 0, len(Flags)+6)
	for _, f := range Flags {
		args = append(args, "--"+f)
	}
	args = append(args, "--user-data-dir="+profile, "--hide-scrollbars",
		"--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height),
		"--virtual-time-budget=2000", "--screenshot="+abs, url)
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.CombinedOutput()
	if _, statErr := os.Stat(abs); err != nil || statErr != nil {
		return fmt.Errorf("headless: %s --screenshot %s: %v %v (%.300s)", bin, url, err, statErr, out)
	}
	return nil
}
