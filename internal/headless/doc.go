// Package headless runs Debian's chromium, headless: make local's screenshot
// of the dashboard page, with the browser's own --screenshot (so the runner
// does not carry a DevTools client), and, in package devtools, the browser
// the dashboard's test drives. The machine's network is closed, so the
// browser is started with everything that would look something up switched
// off, and with a fresh profile each time.
package headless
