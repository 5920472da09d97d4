package ingest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Policy is what a route does when Kinesis cannot take events as fast as
// producers send them (the notes' three options: drop, buffer, backpressure).
type Policy string

const (
	// Backpressure retries failed entries a bounded number of times, then
	// answers 429 (all throttled) or 503 with Retry-After and per-event
	// results; the producer resends only the events not accepted.
	Backpressure Policy = "backpressure"
	// Buffer uses the stream as the buffer: failed entries are retried with
	// jittered backoff until the invocation's deadline (minus a margin),
	// and only then is the answer 503 naming the events not accepted.
	Buffer Policy = "buffer"
	// Drop drops throttled entries at once (counted in the Dropped metric,
	// 1 in N logged) and answers 202 marking them dropped. Other failures
	// are retried and answered as Backpressure does.
	Drop Policy = "drop"
)

// DefaultRoutes is the routing when none is configured: every event posted
// to the URL's root gets backpressure.
func DefaultRoutes() map[string]Policy { return map[string]Policy{"/": Backpressure} }

// defaultDropSample is N in "log 1 in N dropped events" by default.
const defaultDropSample = 100

// ParseRoutes reads a routes document: a JSON object from path (starting
// with "/") to policy name, read by package strictjson (a path twice is
// refused, not the last policy taken).
func ParseRoutes(doc string) (map[string]Policy, error) {
	var raw map[string]string
	if err := strictjson.Decode([]byte(doc), &raw, strictjson.Options{Name: "routes"}); err != nil {
		return nil, fmt.Errorf(`not a JSON object of path to policy such as {"/": "backpressure"}: %w`, err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("no routes: name at least one path")
	}
	routes := make(map[string]Policy, len(raw))
	for _, path := range slices.Sorted(maps.Keys(raw)) {
		if !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("route %q: a path starts with /", path)
		}
		p := Policy(raw[path])
		switch p {
		case Backpressure, Buffer, Drop:
		default:
			return nil, fmt.Errorf("route %q: policy %q is not one of %s, %s, %s", path, raw[path], Buffer, Backpressure, Drop)
		}
		routes[path] = p
	}
	return routes, nil
}

// WithRoutes sets which path gets which policy (a copy is kept). Paths
// not in routes are answered 404.
func WithRoutes(routes map[string]Policy) Option {
	return func(h *Handler) { h.routes = maps.Clone(routes) }
}

// WithDropSample sets N in "log 1 in N dropped events" (at least 1).
func WithDropSample(n int) Option { return func(h *Handler) { h.dropSample = max(n, 1) } }

// routeList describes the known routes for a 404.
func routeList(routes map[string]Policy) string {
	var b strings.Builder
	for i, path := range slices.Sorted(maps.Keys(routes)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s)", path, routes[path])
	}
	return b.String()
}
