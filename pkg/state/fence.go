package state

import (
	"fmt"
	"strings"
)

// fenceWidth is wide enough for any Kinesis (up to 128-bit, 39 digits, shown
// as up to 56 digits) or DynamoDB Streams sequence number.
const fenceWidth = 64

// Fence turns a decimal sequence number into a string that DynamoDB compares
// as the number: zero-padded to a fixed width. "9" < "10" holds for fences
// even though it does not for the raw strings.
func Fence(seq string) (string, error) {
	if seq == "" || len(seq) > fenceWidth {
		return "", fmt.Errorf("state: sequence number %q: want 1 to %d decimal digits", seq, fenceWidth)
	}
	for i := 0; i < len(seq); i++ {
		if seq[i] < '0' || seq[i] > '9' {
			return "", fmt.Errorf("state: sequence number %q: want decimal digits only", seq)
		}
	}
	return strings.Repeat("0", fenceWidth-len(seq)) + seq, nil
}

// fenceAttr is the item attribute holding shard's fence.
func fenceAttr(shard string) string { return "f_" + shard }
