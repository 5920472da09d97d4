package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/aggregate"
)

// outputLog is an output stream that keeps each result once, by id, and
// refuses the next refuse calls whole (a throttle).
type outputLog struct {
	mu     sync.Mutex
	byID   map[string]aggregate.Output
	copies map[string]int // how often each id was put
	refuse int
}

func (s *outputLog) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse > 0 {
		s.refuse--
		return nil, &kintypes.ProvisionedThroughputExceededException{Message: aws.String("injected: the output stream throttled the call")}
	}
	if s.byID == nil {
		s.byID = map[string]aggregate.Output{}
	}
	out := &kinesis.PutRecordsOutput{}
	for _, r := range in.Records {
		var o aggregate.Output
		if err := json.Unmarshal(r.Data, &o); err != nil {
			return nil, err
		}
		s.byID[o.ID] = o
		if s.copies == nil {
			s.copies = map[string]int{}
		}
		s.copies[o.ID]++
		out.Records = append(out.Records, kintypes.PutRecordsResultEntry{SequenceNumber: aws.String("1"), ShardId: aws.String("shardId-000000000000")})
	}
	return out, nil
}

// of lists key's results, sorted by window then revision, as
// "final [0s,20s) r1 count 1 sum 1" with times from base.
func (s *outputLog) of(key string, base time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var outs []aggregate.Output
	for _, o := range s.byID {
		if o.Key == key {
			outs = append(outs, o)
		}
	}
	sort.Slice(outs, func(i, j int) bool {
		a, b := outs[i], outs[j]
		if !a.Start.Equal(b.Start) {
			return a.Start.Before(b.Start)
		}
		if !a.End.Equal(b.End) {
			return a.End.Before(b.End)
		}
		return a.Revision < b.Revision
	})
	lines := make([]string, len(outs))
	for i, o := range outs {
		lines[i] = fmt.Sprintf("%s [%s,%s) r%d", o.Kind, o.Start.Sub(base), o.End.Sub(base), o.Revision)
		if o.Kind != "retraction" {
			lines[i] += fmt.Sprintf(" count %d sum %g", o.Result.Count, o.Result.Sum)
		}
	}
	return lines
}

// at is one input record of key a (or another key) at an offset in seconds
// from the test's base time, with a value.
type at struct {
	key     string
	seconds float64
	value   int
}

// Session and sliding windows agree with Kafka Streams
// (KStreamSessionWindowAggregate, KStreamSlidingWindowAggregate) on what a
// record does when it arrives, and a final window changes only through a
// late record the correct policy accepts: never because the state forgot
// the records it was computed from. Each case feeds batches through the
// handler, then a record of another key far ahead so every window of key
// a closes, and lists every result of key a on the output stream.
func TestKeyedWindowsFollowKafkaLateness(t *testing.T) {
	const (
		session = `{"kind":"session","gap":"20s"}`
		sliding = `{"kind":"sliding","difference":"30s"}`
		drop    = `"latePolicy":"drop"`
		correct = `"latePolicy":"correct","allowedLateness":"1m"`
	)
	for _, tt := range []struct {
		name    string
		window  string
		policy  string
		batches [][]at
		want    []string
	}{
		{
			// The watermark (85s − 30s) makes [0,20s) final; the record at
			// 0s is then pruned, and must not take its final session with it.
			name: "session: a final session outlives its pruned record", window: session, policy: drop,
			batches: [][]at{{{"a", 0, 1}, {"a", 85, 2}}},
			want:    []string{"final [0s,20s) r1 count 1 sum 1", "final [1m25s,1m45s) r1 count 1 sum 2"},
		},
		{
			name: "session: a final session outlives its pruned record (correct)", window: session, policy: correct,
			batches: [][]at{{{"a", 0, 1}, {"a", 140, 2}}},
			want:    []string{"final [0s,20s) r1 count 1 sum 1", "final [2m20s,2m40s) r1 count 1 sum 2"},
		},
		{
			// Records 15s apart for 150s: one session, open all along,
			// whose first records are far behind the watermark when the
			// session before it is finalized.
			name: "session: a long open session keeps all its records", window: session, policy: drop,
			batches: [][]at{{{"a", -100, 5}, {"a", 0, 1}, {"a", 15, 1}, {"a", 30, 1}, {"a", 45, 1}, {"a", 60, 1}, {"a", 75, 1}},
				{{"a", 90, 1}, {"a", 105, 1}, {"a", 120, 1}, {"a", 135, 1}, {"a", 150, 1}}},
			want: []string{"final [-1m40s,-1m20s) r1 count 1 sum 5", "final [0s,2m50s) r1 count 11 sum 11"},
		},
		{
			// At 90s the watermark is 115s: the record's own session
			// [90s,110s) would be final, but it joins [100s,120s), still
			// open, as Kafka merges it.
			name: "session: a late record that joins an open session counts", window: session, policy: drop,
			batches: [][]at{{{"a", 100, 1}, {"a", 145, 2}}, {{"a", 90, 4}}},
			want:    []string{"final [1m30s,2m0s) r1 count 2 sum 5", "final [2m25s,2m45s) r1 count 1 sum 2"},
		},
		{
			// Under drop a session final when the record came is not
			// merged into (Kafka no longer finds it): the record at 118s is
			// within the gap of [100s,120s), final at watermark 120s, and
			// joins the open [150s,170s) through the record at 135s.
			name: "session: a final session takes no late record under drop", window: session, policy: drop,
			batches: [][]at{{{"a", 100, 1}, {"a", 150, 2}}, {{"a", 135, 8}, {"a", 118, 4}}},
			want:    []string{"final [1m40s,2m0s) r1 count 1 sum 1", "final [1m58s,2m50s) r1 count 3 sum 14"},
		},
		{
			// Windows [−10s,20s] {20}, [10s,40s] {20,40}, [20.001s,50.001s]
			// {40} and [95s,125s] {125}; the pruning that 125s allows must
			// not correct [10s,40s] nor retract [20.001s,50.001s].
			name: "sliding: final windows outlive their pruned records", window: sliding, policy: drop,
			batches: [][]at{{{"a", 20, 1}, {"a", 40, 1}, {"a", 125, 1}}},
			want: []string{"final [-10s,20.001s) r1 count 1 sum 1", "final [10s,40.001s) r1 count 2 sum 2",
				"final [20.001s,50.002s) r1 count 1 sum 1", "final [1m35s,2m5.001s) r1 count 1 sum 1"},
		},
		{
			name: "sliding: final windows outlive their pruned records (correct)", window: sliding, policy: correct,
			batches: [][]at{{{"a", 20, 1}, {"a", 40, 1}, {"a", 185, 1}}},
			want: []string{"final [-10s,20.001s) r1 count 1 sum 1", "final [10s,40.001s) r1 count 2 sum 2",
				"final [20.001s,50.002s) r1 count 1 sum 1", "final [2m35s,3m5.001s) r1 count 1 sum 1"},
		},
		{
			// At 150s the watermark is 175s: the record's left window
			// [120s,150s] is final and not made; it joins [145s,175s],
			// still open, and makes its right window [150.001s,180.001s].
			name: "sliding: a record late for its left window joins the open ones", window: sliding, policy: drop,
			batches: [][]at{{{"a", 175, 1}, {"b", 205, 2}}, {{"a", 150, 4}}},
			want:    []string{"final [2m25s,2m55.001s) r1 count 2 sum 5", "final [2m30.001s,3m0.002s) r1 count 1 sum 1"},
		},
	} {
		for _, path := range []string{perBatch, perInterval} {
			t.Run(tt.name+"/"+path, func(t *testing.T) {
				p, out := pipelineOn(t, `{"name":"kl","key":"key","value":"data.v","windows":[`+tt.window+`],
				  "aggregates":["count","sum"],"outOfOrderness":"30s",`+tt.policy+`,"partitionKeyIsGroupingKey":true}`, nil)
				base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
				f := &feed{t: t, p: p, base: base, path: path}
				send := func(batch []at) { f.batch(batch...) }
				for _, b := range tt.batches {
					send(b)
				}
				send([]at{{"z", 2000, 0}})
				if got := out.of("a", base); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
					t.Errorf("results of key a:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
				}
			})
		}
	}
}
