package archive_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tributary-dev/tributary/pkg/archive"
	"github.com/tributary-dev/tributary/pkg/metrics"
)

// emfLine is one EMF document as CloudWatch reads it.
type emfLine struct {
	AWS struct {
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct{ Name, Unit string }
		}
	} `json:"_aws"`
	Function string
	values   map[string]any
}

// emfLines parses what a metrics.Logger wrote, one document a line.
func emfLines(t *testing.T, out string) []emfLine {
	t.Helper()
	var docs []emfLine
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var d emfLine
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("not an EMF line: %q: %v", sc.Text(), err)
		}
		if err := json.Unmarshal(sc.Bytes(), &d.values); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	return docs
}

// archiveMetrics are the archiver's metrics and their units.
var archiveMetrics = map[string]string{
	archive.MetricRecordsArchived:      "Count",
	archive.MetricObjectsWritten:       "Count",
	archive.MetricBytesWritten:         "Bytes",
	archive.MetricChainHeadsUnreadable: "Count",
	archive.MetricChainRestarts:        "Count",
}

// TestArchiverMetrics: each invocation writes one EMF document, under
// Function=archive, with the records and objects it wrote, the bytes
// those objects hold in the bucket (gzip'd), and each chain problem it
// met — a chain head changed by hand (not JSON, a field it does not write,
// a link that goes backwards) or a batch that begins inside the head's
// last batch (a late duplicate of an earlier batch) — every metric
// present, 0 when nothing happened, so an alarm on it sees a data point;
// an invocation that fails counts what it wrote before failing.
func TestArchiverMetrics(t *testing.T) {
	type step struct{ from, to int }
	for _, tc := range []struct {
		name    string
		before  []step // handed first, their metrics not checked
		head    string // the shard's chain head is then replaced with this ("": left)
		step    step   // the invocation whose metrics are checked
		stopAt  int    // its stopAt'th archive object fails (0: none)
		records int    // want RecordsArchived
		objects int    // want ObjectsWritten
		// unreadable and restarts: want ChainHeadsUnreadable and
		// ChainRestarts.
		unreadable, restarts int
	}{
		{name: "a first batch across an hour", step: step{50, 64}, records: 15, objects: 2},
		{name: "the next batch", before: []step{{1, 5}}, step: step{6, 10}, records: 5, objects: 1},
		{name: "a retried batch", before: []step{{1, 5}, {6, 10}}, step: step{6, 12}, records: 7, objects: 1},
		{name: "a chain head that is not JSON", before: []step{{1, 5}}, head: `{"first":"1",`,
			step: step{6, 10}, records: 5, objects: 1, unreadable: 1},
		{name: "a chain head with a field the archiver does not write", before: []step{{1, 5}},
			head: `{"first":"1","after":"","afterHour":"","last":"5","lastHour":"2026-11-30T09","note":"edited"}`,
			step: step{6, 10}, records: 5, objects: 1, unreadable: 1},
		{name: "a chain head whose link goes backwards", before: []step{{1, 5}},
			head: `{"first":"1","after":"3","afterHour":"2026-11-30T09","last":"5","lastHour":"2026-11-30T09"}`,
			step: step{6, 10}, records: 5, objects: 1, unreadable: 1},
		{name: "a chain head whose first is after its last", before: []step{{1, 5}},
			head: `{"first":"9","after":"","afterHour":"","last":"5","lastHour":"2026-11-30T09"}`,
			step: step{6, 10}, records: 5, objects: 1, unreadable: 1},
		{name: "a late duplicate of an earlier batch", before: []step{{1, 5}, {6, 10}}, step: step{1, 5},
			records: 5, objects: 1, restarts: 1},
		{name: "a chain head moved past the batch by hand", before: []step{{1, 5}},
			head: `{"first":"3","after":"2","afterHour":"2026-11-30T09","last":"8","lastHour":"2026-11-30T09"}`,
			step: step{6, 10}, records: 5, objects: 1, restarts: 1},
		{name: "stopped before its second object", before: []step{{50, 55}}, step: step{56, 64}, stopAt: 2,
			records: 4, objects: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client, bucket := newBucket(t)
			var out bytes.Buffer
			fs := &faultyS3{Client: client}
			a := archive.NewArchiver(fs, bucket, archive.WithMetrics(metrics.New(&out, "archive")))
			for _, st := range tc.before {
				if err := a.Handle(ctx, batch(st.from, st.to)); err != nil {
					t.Fatalf("batch %d-%d: %v", st.from, st.to, err)
				}
			}
			if tc.head != "" {
				put(t, client, bucket, archive.ChainKey("events", chainShard), []byte(tc.head))
			}
			out.Reset()
			fs.stopAt = tc.stopAt
			if err := a.Handle(ctx, batch(tc.step.from, tc.step.to)); (err != nil) != (tc.stopAt > 0) {
				t.Fatalf("batch %d-%d: %v, want an error: %t", tc.step.from, tc.step.to, err, tc.stopAt > 0)
			}

			docs := emfLines(t, out.String())
			if len(docs) != 1 {
				t.Fatalf("%d EMF documents, want one per invocation:\n%s", len(docs), out.String())
			}
			d := docs[0]
			if d.Function != "archive" || len(d.AWS.CloudWatchMetrics) != 1 ||
				d.AWS.CloudWatchMetrics[0].Namespace != metrics.Namespace ||
				!reflect.DeepEqual(d.AWS.CloudWatchMetrics[0].Dimensions, [][]string{{"Function"}}) {
				t.Errorf("document %s: want namespace %s, dimension Function=archive", out.String(), metrics.Namespace)
			}
			units := map[string]string{}
			for _, m := range d.AWS.CloudWatchMetrics[0].Metrics {
				units[m.Name] = m.Unit
			}
			if !reflect.DeepEqual(units, archiveMetrics) {
				t.Errorf("metrics and units %v, want %v", units, archiveMetrics)
			}
			want := map[string]float64{
				archive.MetricRecordsArchived:      float64(tc.records),
				archive.MetricObjectsWritten:       float64(tc.objects),
				archive.MetricBytesWritten:         float64(bytesInBucket(t, client, bucket, tc.step.from, tc.step.to, tc.stopAt)),
				archive.MetricChainHeadsUnreadable: float64(tc.unreadable),
				archive.MetricChainRestarts:        float64(tc.restarts),
			}
			for name, v := range want {
				if got, ok := d.values[name].(float64); !ok || got != v {
					t.Errorf("%s = %v, want %v", name, d.values[name], v)
				}
			}
		})
	}
}

// bytesInBucket is the size, as S3 lists it, of the archive objects of
// chainShard that hold records from to to, one object per arrival hour
// (records 60 and later arrive in hour 10), the first only if stopAt is
// set: the objects a batch of those records wrote.
func bytesInBucket(t *testing.T, client *s3.Client, bucket string, from, to, stopAt int) int64 {
	t.Helper()
	var runs [][2]int
	if from < 60 {
		runs = append(runs, [2]int{from, min(to, 59)})
	}
	if to >= 60 {
		runs = append(runs, [2]int{max(from, 60), to})
	}
	if stopAt > 0 {
		runs = runs[:stopAt-1]
	}
	out, err := client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(archive.Prefix)})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, r := range runs {
		found := 0
		for _, o := range out.Contents {
			name, ok := archive.ParseKey(aws.ToString(o.Key))
			if ok && name.Shard == chainShard && name.First == strconv.Itoa(r[0]) && name.Last == strconv.Itoa(r[1]) {
				n += aws.ToInt64(o.Size)
				found++
			}
		}
		if found != 1 {
			t.Fatalf("%d objects hold records %d-%d, want one", found, r[0], r[1])
		}
	}
	return n
}
