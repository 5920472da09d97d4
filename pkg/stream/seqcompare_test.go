package stream

import (
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestCompareSequence(t *testing.T) {
	const (
		k1 = "49601189658422359378836298521827638475320189012309704721"
		k2 = "49601189658422359378836298521827638475320189012309704722"
		k3 = "49601189658422359378836298522902373528957594348623495186"
	)
	tests := []struct {
		a, b string
		want int
	}{
		{"1", "1", 0},
		{"9", "10", -1},
		{"10", "9", 1},
		{"10", "11", -1},
		{"99", "100", -1},
		{"100", "99", 1},
		{"100", "100", 0},
		{"999", "1000", -1},
		{"0", "00", 0},
		{"0", "1", -1},
		{"007", "7", 0},
		{"0010", "9", 1},
		{"0099", "100", -1},
		{k1, k1, 0},
		{k1, k2, -1}, // the last digit
		{k2, k1, 1},
		{k2, k3, -1},                      // a middle digit
		{"9" + k1[1:], k1, 1},             // the first digit
		{"800000000003126276362", k1, -1}, // 21 digits (DynamoDB Streams) against 56
		{k1, "0000" + k1, 0},
		{k1 + "0", k1, 1}, // 57 digits
		// Not numbers: after every number, among themselves as strings.
		{"", "0", 1},
		{"0", "", -1},
		{"", "", 0},
		{"-1", "1", 1},
		{"+1", "1", 1},
		{"1 ", "2", 1},
		{"abc", "abd", -1},
		{"x", k1, 1},
	}
	for _, tt := range tests {
		if got := CompareSequence(tt.a, tt.b); got != tt.want {
			t.Errorf("CompareSequence(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestCompareSequenceAgreesWithBigInt: on decimal strings of every length
// up to 60 digits, with and without leading zeros, the order is big.Int's.
func TestCompareSequenceAgreesWithBigInt(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	digits := func() string {
		var b strings.Builder
		b.WriteString(strings.Repeat("0", pick(rng, 0, 0, 0, 1, 3)))
		n := 1 + rng.IntN(60)
		for i := range n {
			c := byte('0' + rng.IntN(10))
			if i == 0 && rng.IntN(3) == 0 {
				c = '9'
			}
			b.WriteByte(c)
		}
		return b.String()
	}
	for range 100000 {
		a, b := digits(), digits()
		if rng.IntN(4) == 0 { // neighbours: equal length, one digit apart
			b = a[:len(a)-1] + string('0'+rune(rng.IntN(10)))
		}
		x, _ := new(big.Int).SetString(a, 10)
		y, _ := new(big.Int).SetString(b, 10)
		if got, want := CompareSequence(a, b), x.Cmp(y); got != want {
			t.Fatalf("CompareSequence(%s, %s) = %d, big.Int says %d", a, b, got, want)
		}
	}
}

// TestCompareSequenceIsAnOrder: sorting a mix of numbers and non-numbers
// gives a sequence in which every pair is in order (a strict weak order,
// as slices.SortFunc needs).
func TestCompareSequenceIsAnOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	var xs []string
	for range 300 {
		xs = append(xs, pick(rng, "9", "10", "010", "100", "", "-1", "1a", "a", "0", "00", "49601189658422359378836298521827638475320189012309704721"))
	}
	slices.SortFunc(xs, CompareSequence)
	for i := range xs {
		for j := i + 1; j < len(xs); j++ {
			if CompareSequence(xs[i], xs[j]) > 0 || CompareSequence(xs[j], xs[i]) < 0 {
				t.Fatalf("sorted %q before %q, but they compare the other way", xs[i], xs[j])
			}
		}
	}
}

func BenchmarkCompareSequence(b *testing.B) {
	const x, y = "49601189658422359378836298521827638475320189012309704721", "49601189658422359378836298521827638475320189012309704722"
	b.Run("CompareSequence", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if CompareSequence(x, y) >= 0 {
				b.Fatal("order")
			}
		}
	})
	b.Run("big.Int", func(b *testing.B) { // what pkg/aggregate's seqLE does
		b.ReportAllocs()
		for b.Loop() {
			p, _ := new(big.Int).SetString(x, 10)
			q, _ := new(big.Int).SetString(y, 10)
			if p.Cmp(q) >= 0 {
				b.Fatal("order")
			}
		}
	})
}

// TestIsDecimal: one byte that is not a digit, anywhere in a string long
// enough for the eight-at-a-time check, makes it not a number.
func TestIsDecimal(t *testing.T) {
	base := []byte("12345678901234567")
	if !isDecimal(string(base)) {
		t.Fatal("digits are not decimal")
	}
	for pos := range base {
		for c := range 256 {
			s := slices.Clone(base)
			s[pos] = byte(c)
			if want := '0' <= c && c <= '9'; isDecimal(string(s)) != want {
				t.Errorf("isDecimal(%q) = %t, want %t", s, !want, want)
			}
		}
	}
}
