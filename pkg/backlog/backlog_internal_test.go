package backlog

import (
	"testing"
	"time"
)

// earlier takes zero for no bound, on either side.
func TestEarlier(t *testing.T) {
	t0, t1 := time.Unix(100, 0), time.Unix(200, 0)
	for _, tt := range []struct{ a, b, want time.Time }{
		{t0, t1, t0}, {t1, t0, t0}, {time.Time{}, t1, t1}, {t1, time.Time{}, t1}, {time.Time{}, time.Time{}, time.Time{}},
	} {
		if got := earlier(tt.a, tt.b); !got.Equal(tt.want) {
			t.Errorf("earlier(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
