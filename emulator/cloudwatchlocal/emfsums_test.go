package cloudwatchlocal

import (
	"strings"
	"testing"
)

// TestEMFSums: make logs sums the metrics of the EMF documents it read —
// each dimension set a series of its own, arrays of values counted value by
// value, other namespaces, plain lines and documents CloudWatch would give
// no metrics for left out.
func TestEMFSums(t *testing.T) {
	doc := func(records, lags string) string {
		return `{"_aws":{"Timestamp":1765000000000,"CloudWatchMetrics":[{"Namespace":"Tributary","Dimensions":[["Function"],["Function","Pipeline"]],` +
			`"Metrics":[{"Name":"RecordsIn"},{"Name":"LagMs","Unit":"Milliseconds"}]}]},"Function":"aggregate","Pipeline":"pageviews","RecordsIn":` + records + `,"LagMs":` + lags + `}`
	}
	s := NewEMFSums("Tributary")
	s.Add([]LogEvent{
		{Message: doc("3", "[10,20,20]")},
		{Message: "START RequestId: 1 Version: $LATEST"},
		{Message: doc("2", "5")},
		{Message: `{"_aws":{"Timestamp":1765000000000,"CloudWatchMetrics":[{"Namespace":"Other","Dimensions":[["Function"]],"Metrics":[{"Name":"RecordsIn"}]}]},"Function":"aggregate","RecordsIn":100}`},
		{Message: `{"_aws":{"CloudWatchMetrics":[{"Namespace":"Tributary","Dimensions":[["Function"]],"Metrics":[{"Name":"RecordsIn"}]}]},"Function":"aggregate","RecordsIn":100}`},
	})
	var got []string
	for _, m := range s.Summaries() {
		got = append(got, m.String())
	}
	want := []string{
		"LagMs{Function=aggregate,Pipeline=pageviews} sum=55 count=4 min=5 max=20",
		"LagMs{Function=aggregate} sum=55 count=4 min=5 max=20",
		"RecordsIn{Function=aggregate,Pipeline=pageviews} sum=5 count=2 min=2 max=3",
		"RecordsIn{Function=aggregate} sum=5 count=2 min=2 max=3",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sums:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
