package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A check whose result never arrives fails at its own deadline naming what
// did not arrive, while the demo's deadline is far off; a check that holds
// says how long it took; an error of the check is returned as it is.
func TestCheckDeadlineOfItsOwn(t *testing.T) {
	failed := errors.New("the table answered 400")
	for _, tc := range []struct {
		name    string
		f       func(ctx context.Context) error
		wantErr []string // substrings; nil: no error
		wantOut string
	}{
		{"holds", func(context.Context) error { return nil }, nil, "⏱ windows applied: "},
		{"never arrives", func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}, []string{"windows applied: not there after", "-check-timeout 20ms", context.DeadlineExceeded.Error()}, ""},
		{"fails", func(context.Context) error { return failed }, []string{failed.Error()}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			demo, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			var out bytes.Buffer
			err := checker{limit: 20 * time.Millisecond}.check(demo, &out, "windows applied", tc.f)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("check: %v", err)
				}
			} else {
				if err == nil {
					t.Fatal("check returned nil")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				if demo.Err() != nil {
					t.Errorf("the demo's own deadline ended: %v", demo.Err())
				}
			}
			if !strings.Contains(out.String(), tc.wantOut) || (tc.wantOut == "" && out.Len() > 0) {
				t.Errorf("printed %q, want %q", out.String(), tc.wantOut)
			}
		})
	}
}

// The run names the deadline that ran out: a check's own (-check-timeout)
// is reported as the check said it, never as the demo's -timeout.
func TestDemoFailedNamesTheDeadlineThatRanOut(t *testing.T) {
	demo, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	checkErr := checker{limit: 10 * time.Millisecond}.check(demo, &bytes.Buffer{}, "tasks drained", func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	for _, tc := range []struct {
		name        string
		err         error
		want, avoid string
	}{
		{"a check's own deadline", checkErr, "tasks drained: not there after", "did not finish within -timeout"},
		{"the demo's deadline", fmt.Errorf("waiting for windows: %w", context.DeadlineExceeded), "the demo did not finish within -timeout 6m0s (after 6m0s of it", "-check-timeout"},
		{"another error", errors.New("the table answered 400"), "the table answered 400", "-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := demoFailed(tc.err, 6*time.Minute, 6*time.Minute).Error()
			if !strings.Contains(got, tc.want) || strings.Contains(got, tc.avoid) {
				t.Errorf("error %q: want %q in it and not %q", got, tc.want, tc.avoid)
			}
		})
	}
}
