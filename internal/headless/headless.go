// Package headless drives Debian's chromium, headless, through the Chrome
// DevTools protocol (chromedp): the local dashboard's browser test and the
// screenshot `make local` saves. The machine's network is closed, so the
// browser is started with everything that would look something up switched
// off, and with a fresh profile each time.
package headless

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"
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

// flags are the command-line switches chromium runs with: headless, and
// nothing that reaches for the network (quic, component updates, sync,
// background requests) or for a first-run dialog.
var flags = []string{"headless", "no-sandbox", "disable-gpu", "disable-quic", "no-first-run",
	"disable-background-networking", "disable-component-update", "disable-sync"}

// Start launches chromium with a fresh profile under profileDir and returns
// a browser context; cancel stops the browser.
func Start(ctx context.Context, profileDir string) (context.Context, context.CancelFunc, error) {
	path, err := Path()
	if err != nil {
		return nil, nil, err
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.UserDataDir(profileDir), chromedp.WindowSize(1400, 1000)}
	for _, f := range flags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	// Start the browser now, so that a failure to start is an error here.
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		return nil, nil, fmt.Errorf("headless: starting %s: %w", path, err)
	}
	return bctx, func() { cancelBrowser(); cancelAlloc() }, nil
}

// Screenshot loads url, waits for the page to settle for wait, and saves a
// PNG of the whole page at path.
func Screenshot(ctx context.Context, url, path string, wait time.Duration) error {
	profile, err := os.MkdirTemp("", "tributary-chromium-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	bctx, stop, err := Start(ctx, profile)
	if err != nil {
		return err
	}
	defer stop()
	if err := chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("main")), chromedp.Sleep(wait)); err != nil {
		return fmt.Errorf("headless: loading %s: %w", url, err)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("headless: screenshot of %s: %w", url, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}
