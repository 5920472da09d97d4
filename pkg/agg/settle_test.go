package agg

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestSettledStateIsOnlyRead: the windows of a pane share one state, and
// a flush encodes them at once (package aggregate). After Settle, encoding
// the state and reading its result write nothing, so goroutines doing both
// at once all get the encoding it had (run under -race, as make test does,
// it fails on a state whose encoding compacts its sketch in place).
func TestSettledStateIsOnlyRead(t *testing.T) {
	spec, err := NewSpec([]string{"count", "sum", "min", "max", "mean", "distinct", "quantiles"}, []float64{0.5, 0.99})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 7, 40, 500, 5000} {
		t.Run(fmt.Sprint(n, " values"), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			st := spec.New()
			for i := range n {
				st.Add(float64(rng.IntN(100_000))-1000, []byte(fmt.Sprint(i%97)))
			}
			st.Settle()
			want, err := st.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			wantResult := fmt.Sprint(st.Result())
			var wg sync.WaitGroup
			errs := make(chan string, 16)
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 20 {
						got, err := st.MarshalBinary()
						if err != nil || !bytes.Equal(got, want) {
							errs <- fmt.Sprintf("encoding %x (%v), want %x", got, err, want)
							return
						}
						if r := fmt.Sprint(st.Result()); r != wantResult {
							errs <- fmt.Sprintf("result %s, want %s", r, wantResult)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}
