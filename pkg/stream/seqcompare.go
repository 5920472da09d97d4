package stream

import (
	"cmp"
	"encoding/binary"
	"strings"
)

// CompareSequence compares two Kinesis (or DynamoDB Streams) sequence
// numbers as the decimal numbers they are, returning -1, 0 or +1, without
// parsing them into big integers: leading zeros are dropped, then the
// shorter number is the smaller, and numbers of one length compare byte by
// byte ("9" < "10" < "100"; a 56-digit Kinesis number costs a length check
// and one memcmp).
//
// Only strings of ASCII digits are numbers. Any other string (empty, a
// sign, a space) sorts after every number and compares with other such
// strings byte by byte, so the order stays total — safe for sorting — and
// agrees with numeric order wherever both are numbers.
func CompareSequence(a, b string) int {
	da, db := isDecimal(a), isDecimal(b)
	switch {
	case da && db:
	case da:
		return -1
	case db:
		return 1
	default:
		return strings.Compare(a, b)
	}
	a, b = trimZeros(a), trimZeros(b)
	if len(a) != len(b) {
		return cmp.Compare(len(a), len(b))
	}
	return strings.Compare(a, b)
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	// Eight bytes at a time: each is a digit when its high nibble is 3 both
	// as it is and with 6 added (a carry out of a byte >= 0xFA only happens
	// when that byte's high nibble is already wrong).
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := binary.LittleEndian.Uint64([]byte(s[i : i+8]))
		const highs, threes, sixes = 0xF0F0F0F0F0F0F0F0, 0x3030303030303030, 0x0606060606060606
		if x&highs != threes || (x+sixes)&highs != threes {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i]-'0' > 9 {
			return false
		}
	}
	return true
}

func trimZeros(s string) string {
	i := 0
	for i < len(s) && s[i] == '0' {
		i++
	}
	return s[i:]
}
