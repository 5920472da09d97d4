package state_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// Two finalizes of one key's sessions can run at once (a batch and the
// ticker). When a late record merges a final session away, the faster one
// writes the retraction (revision 2) while the slower one still holds the
// final result (revision 1): its write must not bring the retracted session
// back.
func TestPutWindowNeverGoesBackARevision(t *testing.T) {
	ctx := context.Background()
	w := window.Of(1_764_410_400_000, 1_764_410_420_000)
	ref := state.KeyedRef{Pipeline: "p", Key: "k", Kind: "session:20s"}
	blob := func(v float64) []byte {
		s := spec.New()
		s.Add(v, nil)
		b, err := s.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tt := range []struct {
		name   string
		writes []struct {
			rev       int
			retracted bool
		}
		want string // the session as a query sees it
	}{
		{"final r1 then retraction r2", []struct {
			rev       int
			retracted bool
		}{{1, false}, {2, true}}, "none"},
		{"retraction r2, then the slower final r1", []struct {
			rev       int
			retracted bool
		}{{2, true}, {1, false}}, "none"},
		{"final r1 written twice", []struct {
			rev       int
			retracted bool
		}{{1, false}, {1, false}}, "r1 sum 1"},
		{"correction r2 after final r1", []struct {
			rev       int
			retracted bool
		}{{1, false}, {2, false}}, "r2 sum 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newViews(t)
			for _, wr := range tt.writes {
				if err := f.views.PutWindow(ctx, ref, w, blob(float64(wr.rev)), 1, wr.rev, wr.retracted); err != nil {
					t.Fatal(err)
				}
			}
			vs, err := f.views.Query(ctx, "p", "k", "session:20s", w.Start, w.End)
			if err != nil {
				t.Fatal(err)
			}
			got := "none"
			if len(vs) == 1 {
				got = fmt.Sprintf("r%d sum %g", vs[0].Revision, vs[0].Result.Sum)
			} else if len(vs) > 1 {
				got = fmt.Sprintf("%d windows", len(vs))
			}
			if got != tt.want {
				t.Errorf("the session reads %s, want %s", got, tt.want)
			}
		})
	}
}
