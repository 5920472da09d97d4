package devtools

import (
	"context"
	"fmt"

	"github.com/chromedp/chromedp"

	"github.com/tributary-dev/tributary/internal/headless"
)

// Start launches chromium with the flags of package headless and a fresh
// profile under profileDir, and returns a browser context; stop ends the
// browser.
func Start(ctx context.Context, profileDir string) (context.Context, context.CancelFunc, error) {
	path, err := headless.Path()
	if err != nil {
		return nil, nil, err
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.UserDataDir(profileDir), chromedp.WindowSize(1400, 1000)}
	for _, f := range headless.Flags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	// Start the browser now, so that a failure to start is an error here.
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		return nil, nil, fmt.Errorf("devtools: starting %s: %w", path, err)
	}
	return bctx, func() { cancelBrowser(); cancelAlloc() }, nil
}
