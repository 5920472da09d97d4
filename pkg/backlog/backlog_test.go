package backlog_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/backlog"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/window"
)

var kin *kinesis.Client

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(cfg aws.Config) { kin = kinesis.NewFromConfig(cfg) }))
}

// put puts n records on the stream's only shard and returns their
// sequence numbers.
func put(t *testing.T, name string, n int) []string {
	t.Helper()
	var seqs []string
	for range n {
		out, err := kin.PutRecord(context.Background(), &kinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String("k"), Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, aws.ToString(out.SequenceNumber))
	}
	return seqs
}

// The first record after the one a function committed is found with its
// arrival; after the last one there is none; a shard the stream does not
// have holds none.
func TestFirstAfterFindsTheRecordsAFunctionHasNotProcessed(t *testing.T) {
	ctx := context.Background()
	keyedtest.CreateStream(t, kin, "backlog", 1)
	before := time.Now().Add(-time.Minute)
	seqs := put(t, "backlog", 3)
	b := backlog.New(kin, "backlog")
	for _, tt := range []struct {
		name, shard, after string
		found              bool
	}{
		{"records after the first", "shardId-000000000000", seqs[0], true},
		{"one record after the second", "shardId-000000000000", seqs[1], true},
		{"nothing after the last", "shardId-000000000000", seqs[2], false},
		{"a shard the stream does not have", "shardId-000000000009", seqs[0], false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			arrived, found, err := b.FirstAfter(ctx, tt.shard, tt.after)
			if err != nil {
				t.Fatal(err)
			}
			if found != tt.found {
				t.Fatalf("found %v, want %v", found, tt.found)
			}
			if found && (arrived.Before(before) || arrived.After(time.Now().Add(time.Minute))) {
				t.Errorf("arrived %v, want the record's arrival, about now", arrived)
			}
		})
	}
}

// A stream that cannot be read is an error naming the stream and shard,
// not "nothing to read": the ticker must not take the shard for idle.
func TestFirstAfterSaysWhatItCouldNotRead(t *testing.T) {
	b := backlog.New(failing{}, "events")
	_, found, err := b.FirstAfter(context.Background(), "shardId-000000000001", "49")
	if err == nil || found {
		t.Fatalf("found %v, error %v; want an error", found, err)
	}
	for _, want := range []string{"events", "shardId-000000000001", "throttled"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// failing answers as a throttled Kinesis does (what moto cannot show).
type failing struct{}

func (failing) GetShardIterator(context.Context, *kinesis.GetShardIteratorInput, ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("throttled")}
}

func (failing) GetRecords(context.Context, *kinesis.GetRecordsInput, ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	return nil, errors.New("not reached")
}

// fixed is a Reader that answers every shard the same way, counting reads.
type fixed struct {
	arrived time.Time
	found   bool
	err     error
	reads   int
}

func (f *fixed) FirstAfter(context.Context, string, string) (time.Time, bool, error) {
	f.reads++
	return f.arrived, f.found, f.err
}

// IdleHold bounds an idle advance by the first unprocessed record's
// arrival, keeps a caller's lower hold, asks nothing when the advance
// would not move or no position is known, and stops the advance when the
// stream cannot be read.
func TestIdleHold(t *testing.T) {
	base := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	const idle = 30 * time.Second
	// A watermark whose event time stopped at base, its idle clock
	// started then: at base+5m an advance would take it to base+4m25s.
	wm := func() *window.Watermark {
		w := window.NewWatermark(5 * time.Second)
		w.Observe(base)
		w.AdvanceIdle(base, idle)
		return w
	}
	now := base.Add(5 * time.Minute)
	for _, tt := range []struct {
		name        string
		r           *fixed
		through     string
		hold        time.Time
		wantBound   time.Time
		wantWaiting bool
		wantErr     bool
		wantReads   int
	}{
		{"nothing unread: the caller's hold", &fixed{}, "7", time.Time{}, time.Time{}, false, false, 1},
		{"a record waits: idle + out-of-orderness before it arrived", &fixed{arrived: base.Add(time.Minute), found: true}, "7", time.Time{},
			base.Add(time.Minute - 35*time.Second), true, false, 1},
		{"a lower hold of the caller stays", &fixed{arrived: base.Add(time.Minute), found: true}, "7", base.Add(10 * time.Second),
			base.Add(10 * time.Second), true, false, 1},
		{"no position stored: no read", &fixed{found: true}, "", time.Time{}, time.Time{}, false, false, 0},
		{"the stream cannot be read: no advance", &fixed{err: errors.New("throttled")}, "7", time.Time{}, base.Add(-5 * time.Second), false, true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bound, waiting, err := backlog.IdleHold(context.Background(), tt.r, "shardId-000000000000", tt.through, wm(), idle, tt.hold, now)
			if (err != nil) != tt.wantErr || !bound.Equal(tt.wantBound) || waiting != tt.wantWaiting || tt.r.reads != tt.wantReads {
				t.Errorf("bound %v waiting %v error %v after %d reads; want %v %v error %v after %d",
					bound, waiting, err, tt.r.reads, tt.wantBound, tt.wantWaiting, tt.wantErr, tt.wantReads)
			}
		})
	}
	t.Run("an advance that would not move asks nothing", func(t *testing.T) {
		r := &fixed{found: true}
		if _, _, err := backlog.IdleHold(context.Background(), r, "shardId-000000000000", "7", wm(), idle, time.Time{}, base.Add(10*time.Second)); err != nil || r.reads != 0 {
			t.Errorf("%d reads, error %v; want none", r.reads, err)
		}
	})
}
