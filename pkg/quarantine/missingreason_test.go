package quarantine

import (
	"fmt"
	"strings"
	"testing"
)

// TestMissingReasonCountsTheRange: a batch's range in the shard can hold
// more records than the batch (filter criteria let only some in), so the
// reason for records left uncopied counts what was copied of the range; it
// said "found 2270 of the batch's 100 records".
func TestMissingReasonCountsTheRange(t *testing.T) {
	c := collector{info: &BatchInfo{BatchSize: 100, StartSequenceNumber: "1", EndSequenceNumber: "5000"}}
	for i := 1; i <= 2270; i++ {
		c.out = append(c.out, fetched{seq: fmt.Sprint(i)})
	}
	got := c.result(fmt.Errorf("%w at 16776800 bytes", errCutShort)).missing
	for _, want := range []string{"copied 2270 records of the range from sequence number 1 to 5000", "a batch of 100", "the others were not read"} {
		if !strings.Contains(got, want) {
			t.Errorf("reason %q\nwant it to say %q", got, want)
		}
	}
	if strings.Contains(got, "2270 of the batch's 100") {
		t.Errorf("reason %q counts the copied records as part of the batch", got)
	}
}
