package main

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Each row of docs/performance.md's table of bench/load runs is a bill:
// total = Lambda + DynamoDB + CloudWatch (bill.total), and its × Flink is
// total / flinkMonthly(). A row whose parts do not add up to its total was
// not copied from one run's line.
func TestPerformanceRowsAddUp(t *testing.T) {
	b, err := os.ReadFile("../../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	money := func(s string) float64 {
		v, err := strconv.ParseFloat(strings.NewReplacer("$", "", ",", "").Replace(strings.TrimSpace(s)), 64)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return v
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		// | load | path | write units / event | Lambda | DynamoDB | CloudWatch | total a month | × Flink |
		if len(cells) != 10 || !strings.Contains(cells[4], "$") || !strings.Contains(cells[7], "$") {
			continue
		}
		n++
		lambda, ddb, cw, total, ratio := money(cells[4]), money(cells[5]), money(cells[6]), money(cells[7]), money(cells[8])
		if sum := lambda + ddb + cw; math.Abs(sum-total) > 0.015 {
			t.Errorf("%s | %s: Lambda %.2f + DynamoDB %.2f + CloudWatch %.2f = %.2f, the row says %.2f",
				strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2]), lambda, ddb, cw, sum, total)
		}
		if r := total / flinkMonthly(); math.Abs(r-ratio) > 0.006 {
			t.Errorf("%s | %s: %.2f / Flink %.2f = %.3f, the row says %.2f", strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2]), total, flinkMonthly(), r, ratio)
		}
	}
	if n < 10 {
		t.Fatalf("only %d rows read", n)
	}
}
