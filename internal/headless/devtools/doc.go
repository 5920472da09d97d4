// Package devtools starts headless chromium under the Chrome DevTools
// protocol (chromedp) for tests that drive a page: load it, wait, read the
// DOM.
package devtools
