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
		v, err := strconv.ParseFloat(plainNumber(s), 64)
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

// docs/performance.md's table of this run's loads is docs/bench-run.txt's
// BENCH load, load_provisioned and load_nolog lines, number for number:
// a row that differs from its line was not copied from the run the page
// names, and a line with no row is a figure the page leaves out.
func TestPerformanceRowsAreTheRunsLines(t *testing.T) {
	page, err := os.ReadFile("../../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.ReadFile("../../docs/bench-run.txt")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[[2]string][]string{}
	for _, line := range strings.Split(string(page), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 10 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[[2]string{cells[1], cells[2]}] = cells[3:9]
	}
	// want is a row as the line says it: write units, then the dollars.
	type want struct {
		load, path string
		cells      []string
	}
	var wants []want
	lambda := map[string]string{} // per-interval Lambda dollars by load, for the provisioned rows
	for _, line := range strings.Split(string(run), "\n") {
		name, kv, ok := benchLine(line)
		if !ok || !strings.HasPrefix(name, "load") || kv["total_usd"] == "" {
			continue // not a priced line
		}
		n, k := kv["events_per_s"], kv["keys"]
		load := loadLabel(t, n, k)
		switch name {
		case "load":
			lambda[n+"x"+k+kv["path"]] = kv["lambda_usd"]
			wants = append(wants, want{load, pathLabel(kv["path"]), []string{kv["wcu_per_event"], kv["lambda_usd"], kv["dynamodb_usd"], kv["cloudwatch_usd"], kv["total_usd"], kv["flink_ratio"]}})
		case "load_powertools":
			wants = append(wants, want{load, "Powertools-style", []string{kv["wcu_per_event"], kv["lambda_usd"], kv["dynamodb_usd"], kv["cloudwatch_usd"], kv["total_usd"], kv["flink_ratio"]}})
		case "load_provisioned":
			l, ok := lambda[n+"x"+k+kv["path"]]
			if !ok {
				t.Fatalf("bench-run.txt: %q comes before its load line", line)
			}
			wants = append(wants, want{load, pathLabel(kv["path"]) + ", views table provisioned", []string{"", l, kv["dynamodb_usd"], kv["cloudwatch_usd"], kv["total_usd"], kv["flink_ratio"]}})
		case "load_nolog":
			wants = append(wants,
				want{load, "per interval, `outputs.log` false", []string{kv["wcu_per_event"], kv["lambda_usd"], kv["dynamodb_usd"], kv["cloudwatch_usd"], kv["total_usd"], kv["flink_ratio"]}},
				want{load, "per interval, `outputs.log` false, views table provisioned", []string{kv["wcu_per_event"], kv["lambda_usd"], kv["provisioned_dynamodb_usd"], kv["provisioned_cloudwatch_usd"], kv["provisioned_total_usd"], kv["provisioned_flink_ratio"]}})
		}
	}
	if len(wants) < 10 {
		t.Fatalf("bench-run.txt has %d priced lines; want the loads of make bench", len(wants))
	}
	for _, w := range wants {
		got, ok := rows[[2]string{w.load, w.path}]
		if !ok {
			t.Errorf("docs/performance.md has no row | %s | %s |", w.load, w.path)
			continue
		}
		for i, c := range w.cells {
			if c == "" {
				continue
			}
			if plainNumber(got[i]) != c {
				t.Errorf("| %s | %s |: column %d is %q, the run's line says %s", w.load, w.path, i+3, got[i], c)
			}
		}
	}
}

// plainNumber is a table cell's figure as a BENCH line writes it: no
// dollar sign, thousands separators or bold.
func plainNumber(cell string) string {
	return strings.NewReplacer("$", "", ",", "", "*", "").Replace(strings.TrimSpace(cell))
}

// benchLine splits a BENCH line into its name and key=value fields.
func benchLine(line string) (string, map[string]string, bool) {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "BENCH" {
		return "", nil, false
	}
	kv := make(map[string]string, len(f))
	for _, x := range f[2:] {
		k, v, _ := strings.Cut(x, "=")
		kv[k] = v
	}
	return f[1], kv, true
}

// loadLabel is the page's name for a load: 100/s, 1,000 keys.
func loadLabel(t *testing.T, events, keys string) string {
	t.Helper()
	group := func(s string) string {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("bench-run.txt: %q is not a count", s)
		}
		return group3(n)
	}
	return group(events) + "/s, " + group(keys) + " keys"
}

// group3 writes n with a comma between each three digits.
func group3(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// pathLabel is the page's name for a write path.
func pathLabel(path string) string {
	switch path {
	case "per-interval":
		return "per interval (default)"
	case "per-batch":
		return "per batch"
	}
	return path
}
