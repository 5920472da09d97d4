package stream

import "strings"

// CompareSequenceNumbers compares two Kinesis or DynamoDB Streams sequence
// numbers as the decimal numbers they are, returning -1, 0 or +1. Comparing
// them as strings is wrong when their lengths differ ("9" > "10").
func CompareSequenceNumbers(a, b string) int {
	a = strings.TrimLeft(a, "0")
	b = strings.TrimLeft(b, "0")
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return strings.Compare(a, b)
}
