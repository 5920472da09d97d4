package redrive

import "testing"

// TestProgressLinesAreBounded: a run prints its first batch's count and
// then about a hundred lines whatever the DLQ's size, where a line per
// batch of 10 was 100,000 lines for a million messages.
func TestProgressLinesAreBounded(t *testing.T) {
	for _, tc := range []struct {
		total, batch int
		most         int
	}{
		{25, 10, 3},
		{1_000, 10, 101},
		{1_000_000, 10, 101},
		{1_000_000, 7, 101},
	} {
		lines, printed := 0, -1
		for moved := tc.batch; moved <= tc.total; moved += tc.batch {
			if progressDue(printed, moved, tc.total) {
				lines++
				printed = moved
			}
		}
		if lines == 0 || lines > tc.most {
			t.Errorf("%d messages in batches of %d: %d progress lines, want 1 to %d", tc.total, tc.batch, lines, tc.most)
		}
	}
}
