package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// checker runs the demo's checks, each under a deadline of its own (within
// the demo's -timeout), and prints how long each took, so that a slow check
// is named, and a check whose result never arrives fails at its own deadline
// saying what did not arrive instead of holding the run until -timeout.
type checker struct {
	limit time.Duration // -check-timeout
}

// check runs f with a deadline of c.limit and prints "⏱ what: took" on w
// when it succeeds. A check that runs out of its own time is an error
// naming what and the limit.
func (c checker) check(ctx context.Context, w io.Writer, what string, f func(context.Context) error) error {
	began := time.Now()
	cctx, cancel := context.WithTimeout(ctx, c.limit)
	defer cancel()
	err := f(cctx)
	took := roundDuration(time.Since(began))
	switch {
	case err == nil:
		fmt.Fprintf(w, "    ⏱ %s: %s\n", what, took)
	case ctx.Err() == nil && cctx.Err() != nil:
		return &checkDeadlineError{fmt.Errorf("%s: not there after %s, its own deadline (-check-timeout %s; make local LOCAL_FLAGS=-check-timeout=5m waits longer): %w", what, took, c.limit, err)}
	}
	return err
}

// checkDeadlineError is a check that ran out of its own time (-check-timeout)
// while the demo's (-timeout) had time left: the run says so, and not that
// the demo ran out.
type checkDeadlineError struct{ err error }

func (e *checkDeadlineError) Error() string { return e.err.Error() }
func (e *checkDeadlineError) Unwrap() error { return e.err }
