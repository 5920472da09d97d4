package join_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/emit"
	"github.com/tributary-dev/tributary/pkg/join"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// oneShard is the joins stream on the stand-in as one shard's write limit
// shows it: 1 MiB a second, entries past it refused with Kinesis'
// ProvisionedThroughputExceededException — the fault moto cannot show. Its
// second is the time the handler's backoff waits between attempts (wait
// advances it); each new invocation starts a new second.
type oneShard struct {
	emit.Putter
	mu   sync.Mutex
	left int // bytes the current second still takes
}

func (s *oneShard) newSecond() { s.mu.Lock(); s.left = 1 << 20; s.mu.Unlock() }

func (s *oneShard) wait(attempt int) time.Duration {
	d := emit.Backoff(attempt)
	s.mu.Lock()
	s.left = min(1<<20, s.left+int(int64(1<<20)*int64(d)/int64(time.Second)))
	s.mu.Unlock()
	return 0
}

func (s *oneShard) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	s.mu.Lock()
	var taken []kintypes.PutRecordsRequestEntry
	res := make([]kintypes.PutRecordsResultEntry, len(in.Records))
	failed := int32(0)
	for i, e := range in.Records {
		n := limits.KinesisRecordSize(e.Data, aws.ToString(e.PartitionKey))
		if n > s.left {
			s.left = 0
			res[i] = kintypes.PutRecordsResultEntry{ErrorCode: aws.String("ProvisionedThroughputExceededException"), ErrorMessage: aws.String("Rate exceeded for shard")}
			failed++
			continue
		}
		s.left -= n
		taken = append(taken, e)
		res[i] = kintypes.PutRecordsResultEntry{SequenceNumber: aws.String("1"), ShardId: aws.String("shardId-000000000000")}
	}
	s.mu.Unlock()
	if len(taken) > 0 {
		if _, err := s.Putter.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: in.StreamName, Records: taken}, opts...); err != nil {
			return nil, err
		}
	}
	return &kinesis.PutRecordsOutput{Records: res, FailedRecordCount: aws.Int32(failed)}, nil
}

// TestOutputsFitTheJoinsStream sends one session's searches and then a
// batch of clicks that each join them, to a joins stream of one shard (as
// the stack deploys it: 1 MiB a second). A fold's outputs are put in one
// go and put again whole on every retry, so they must be a part the shard
// takes, however many records the batch holds and however many each one
// joins: the batch completes over a few Lambda resumptions (the fold
// checkpoints), every pair reaches the stream, and a click that alone
// would make more joined records than the bound is set aside naming the
// key, not retried for ever.
func TestOutputsFitTheJoinsStream(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name              string
		searches, clicks  int
		searchData, click int // bytes of data
		aside             bool
	}{
		// 100 clicks joining two searches of 16 KB: 3.3 MB of joined
		// records from one batch.
		{"a batch's outputs", 2, 100, 16_000, 10, false},
		// 2,000 small searches open, then a click of 16 KB: it alone
		// would make 2,000 joined records of 16 KB, 33 MB.
		{"one record's outputs", 2000, 1, 10, 16_000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := join.Parse([]byte(`{"name":"wide","left":"search","right":"click","within":"1h","joinType":"inner"}`))
			if err != nil {
				t.Fatal(err)
			}
			table, out, quarantine := newResources(t)
			shard := &oneShard{Putter: kin}
			h := join.New(cfg, state.NewViews(db, table, nil), shard, out, join.DefaultLimits,
				keyed.WithLogger(quiet), keyed.WithSetAside(setaside.New(db, quarantine)), keyed.WithBackoff(shard.wait))

			pad := func(n int) json.RawMessage { return json.RawMessage(`{"p":"` + strings.Repeat("x", n) + `"}`) }
			var recs []record
			add := func(typ string, i, ms int, data json.RawMessage) {
				at := base.Add(time.Duration(ms) * time.Millisecond)
				recs = append(recs, record{shard: "shardId-000000000000", seq: 100 + len(recs),
					env: stream.Envelope{ID: fmt.Sprintf("%s%d", typ, i), Type: typ, Key: "hot", OccurredAt: at, SentAt: at, ReceivedAt: at, Data: data}})
			}
			for i := range tc.searches {
				add("search", i, i, pad(tc.searchData))
			}
			for i := range tc.clicks {
				add("click", i, tc.searches+i, pad(tc.click))
			}
			// Lambda's mapping: batches of 100, each resumed from the
			// lowest failed record.
			krecs := kinesisRecords(recs)
			invocations := 0
			for start := 0; start < len(krecs); {
				end := min(start+100, len(krecs))
				shard.newSecond()
				invocations++
				if invocations > 60 {
					t.Fatalf("the batch at record %d still fails after %d invocations: its outputs never fit the joins stream", start, invocations)
				}
				resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: krecs[start:end]})
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.BatchItemFailures) == 0 {
					start = end
					continue
				}
				for i := start; i < end; i++ {
					if krecs[i].Kinesis.SequenceNumber == resp.BatchItemFailures[0].ItemIdentifier {
						start = i
					}
				}
			}
			joined := map[string]bool{}
			for _, b := range keyedtest.ReadAll(t, kin, out) {
				var env stream.Envelope
				if err := stream.Unmarshal(b, &env); err != nil {
					t.Fatal(err)
				}
				joined[env.ID] = true
			}
			scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(quarantine)})
			if err != nil {
				t.Fatal(err)
			}
			if tc.aside {
				if len(joined) != 0 || scan.Count != 1 {
					t.Fatalf("%d pairs joined, %d records set aside; want the click set aside", len(joined), scan.Count)
				}
				it, err := setaside.Load(ctx, db, quarantine, "arn:aws:kinesis:us-east-1:123456789012:stream/events/shardId-000000000000", krecs[len(krecs)-1].Kinesis.SequenceNumber)
				if err != nil || it == nil {
					t.Fatalf("click not set aside: %v", err)
				}
				if it.Field != "key" || it.Category != setaside.KindStateBudget || !strings.Contains(it.Reason, "2000") {
					t.Errorf("set aside as field %q kind %q reason %q; want key, %s and the searches it would join", it.Field, it.Category, it.Reason, setaside.KindStateBudget)
				}
				return
			}
			if want := tc.searches * tc.clicks; len(joined) != want || scan.Count != 0 {
				t.Fatalf("%d pairs joined, %d records set aside; want %d pairs", len(joined), scan.Count, want)
			}
			t.Logf("%d invocations", invocations)
		})
	}
}
