package cloudwatchlocal

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

func TestParseEMF(t *testing.T) {
	type datum struct {
		ns, name, dims, unit string
		value                *float64
		values, counts       []float64
	}
	f := func(v float64) *float64 { return &v }
	render := func(b emfBatch) []datum {
		var out []datum
		for ns, ds := range b {
			for _, d := range ds {
				var dims []string
				for _, x := range d.Dimensions {
					dims = append(dims, aws.ToString(x.Name)+"="+aws.ToString(x.Value))
				}
				out = append(out, datum{ns, aws.ToString(d.MetricName), strings.Join(dims, ","), string(d.Unit), d.Value, d.Values, d.Counts})
			}
		}
		return out
	}
	tests := []struct {
		name, line string
		want       []datum
		err        string
	}{
		{
			name: "one metric, one dimension set",
			line: `{"_aws":{"Timestamp":1764412860000,"CloudWatchMetrics":[{"Namespace":"Tributary","Dimensions":[["function"]],"Metrics":[{"Name":"Processed","Unit":"Count"}]}]},"function":"aggregate","Processed":12,"requestId":"abc"}`,
			want: []datum{{"Tributary", "Processed", "function=aggregate", "Count", f(12), nil, nil}},
		},
		{
			name: "array of values becomes distinct values with counts",
			line: `{"_aws":{"Timestamp":1764412860000,"CloudWatchMetrics":[{"Namespace":"T","Dimensions":[[]],"Metrics":[{"Name":"Latency","Unit":"Milliseconds"}]}]},"Latency":[5,3,5,5.5]}`,
			want: []datum{{"T", "Latency", "", "Milliseconds", nil, []float64{3, 5, 5.5}, []float64{1, 2, 1}}},
		},
		{
			name: "every dimension set times every metric; unit defaults to None",
			line: `{"_aws":{"Timestamp":1764412860000,"CloudWatchMetrics":[{"Namespace":"T","Dimensions":[["fn"],["fn","key"]],"Metrics":[{"Name":"A"},{"Name":"B","Unit":"Bytes"}]}]},"fn":"f","key":"k1","A":1,"B":2}`,
			want: []datum{
				{"T", "A", "fn=f", "None", f(1), nil, nil},
				{"T", "A", "fn=f,key=k1", "None", f(1), nil, nil},
				{"T", "B", "fn=f", "Bytes", f(2), nil, nil},
				{"T", "B", "fn=f,key=k1", "Bytes", f(2), nil, nil},
			},
		},
		{
			name: "two directives, two namespaces",
			line: `{"_aws":{"Timestamp":1764412860000,"CloudWatchMetrics":[{"Namespace":"N1","Dimensions":[[]],"Metrics":[{"Name":"A"}]},{"Namespace":"N2","Dimensions":[[]],"Metrics":[{"Name":"A"}]}]},"A":7}`,
			want: []datum{{"N1", "A", "", "None", f(7), nil, nil}, {"N2", "A", "", "None", f(7), nil, nil}},
		},
		{name: "timestamp is required", line: `{"_aws":{"CloudWatchMetrics":[]},"A":1}`, err: "_aws.Timestamp is required"},
		{name: "flat dimensions", line: `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"T","Dimensions":["fn"],"Metrics":[{"Name":"A"}]}]},"fn":"f","A":1}`, err: "must be an array of dimension keys (a flat array"},
		{name: "dimension missing on root", line: `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"T","Dimensions":[["fn"]],"Metrics":[{"Name":"A"}]}]},"A":1}`, err: `dimension "fn"`},
		{name: "dimension value not a string", line: `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"T","Dimensions":[["shard"]],"Metrics":[{"Name":"A"}]}]},"shard":3,"A":1}`, err: `dimension "shard" must be a string`},
		{name: "unknown unit", line: `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"T","Dimensions":[[]],"Metrics":[{"Name":"A","Unit":"Things"}]}]},"A":1}`, err: "Unit Things is not a CloudWatch unit"},
		{name: "metric value not a number", line: `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"T","Dimensions":[[]],"Metrics":[{"Name":"A"}]}]},"A":"7"}`, err: `metric "A" is 7, not a number`},
		{name: "metric missing", line: `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"T","Dimensions":[[]],"Metrics":[{"Name":"A"}]}]}}`, err: `metric "A" has no member`},
		{name: "too many values", line: `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"T","Dimensions":[[]],"Metrics":[{"Name":"A"}]}]},"A":[` + strings.Repeat("1,", 100) + `1]}`, err: "has 101 values"},
		{name: "bad storage resolution", line: `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"T","Dimensions":[[]],"Metrics":[{"Name":"A","StorageResolution":5}]}]},"A":1}`, err: "StorageResolution must be 1 or 60"},
		{name: "namespace required", line: `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Dimensions":[[]],"Metrics":[{"Name":"A"}]}]},"A":1}`, err: "Namespace must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !isEMF(tt.line) {
				t.Fatalf("isEMF(%s) = false", tt.line)
			}
			b, err := parseEMF(tt.line)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseEMF: %v, want error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := render(b)
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for _, w := range tt.want {
				found := false
				for _, g := range got {
					if g.ns == w.ns && g.name == w.name && g.dims == w.dims && g.unit == w.unit &&
						((g.value == nil && w.value == nil) || (g.value != nil && w.value != nil && *g.value == *w.value)) &&
						floatsEqual(g.values, w.values) && floatsEqual(g.counts, w.counts) {
						found = true
					}
				}
				if !found {
					t.Errorf("missing %+v in %+v", w, got)
				}
			}
			for _, ds := range b {
				for _, d := range ds {
					if !aws.ToTime(d.Timestamp).Equal(time.UnixMilli(1764412860000)) {
						t.Errorf("timestamp %v, want the document's _aws.Timestamp", aws.ToTime(d.Timestamp))
					}
				}
			}
		})
	}
}

func floatsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestIsEMF(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{`START RequestId: 1 Version: $LATEST`, false},
		{`{"level":"info","msg":"_aws mentioned"}`, false},
		{`  {"_aws":{"CloudWatchMetrics":[]}}`, true},
	}
	for _, tt := range tests {
		if got := isEMF(tt.line); got != tt.want {
			t.Errorf("isEMF(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}
