package tail_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/syncbuf"
	"github.com/tributary-dev/tributary/pkg/tail"
)

var awsCfg aws.Config

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(c aws.Config) { awsCfg = c }))
}

// event is a record as the stack's streams carry them: an envelope.
type event struct {
	ID   string         `json:"id"`
	Type string         `json:"type"`
	Key  string         `json:"key"`
	Data map[string]any `json:"data"`
}

// newStream creates a stream of n shards on the stand-in.
func newStream(t *testing.T, kin *kinesis.Client, shards int32) string {
	t.Helper()
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	ctx := context.Background()
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = kin.DeleteStream(context.Background(), &kinesis.DeleteStreamInput{StreamName: aws.String(name), EnforceConsumerDeletion: aws.Bool(true)})
	})
	return name
}

// put puts events one by one and returns each one's shard and sequence number by id.
func put(t *testing.T, kin *kinesis.Client, stream string, evs ...event) map[string][2]string {
	t.Helper()
	at := map[string][2]string{}
	for _, e := range evs {
		b, _ := json.Marshal(e)
		out, err := kin.PutRecord(context.Background(), &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String(e.Key), Data: b})
		if err != nil {
			t.Fatal(err)
		}
		at[e.ID] = [2]string{aws.ToString(out.ShardId), aws.ToString(out.SequenceNumber)}
	}
	return at
}

// ids runs a tail and returns the ids of the records it handed on, in the
// order of each shard (sorted across shards by id for comparison).
func ids(t *testing.T, kin tail.KinesisAPI, o tail.Options) ([]string, tail.Summary) {
	t.Helper()
	var got []string
	sum, err := tail.Run(context.Background(), kin, o, func(r *tail.Record) error {
		var e event
		if err := json.Unmarshal(r.Data, &e); err != nil {
			got = append(got, "not-json:"+string(r.Data))
			return nil
		}
		got = append(got, e.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sorted(got), sum
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func consumers(t *testing.T, kin *kinesis.Client, stream string) []string {
	t.Helper()
	d, err := kin.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := kin.ListStreamConsumers(context.Background(), &kinesis.ListStreamConsumersInput{StreamARN: d.StreamDescriptionSummary.StreamARN})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range out.Consumers {
		names = append(names, aws.ToString(c.ConsumerName))
	}
	return names
}

func TestPositionsAndFilters(t *testing.T) {
	kin := kinesis.NewFromConfig(awsCfg)
	stream := newStream(t, kin, 2)
	early := []event{
		{ID: "e1", Type: "page_view", Key: "user-1", Data: map[string]any{"page": "/", "ms": 420}},
		{ID: "e2", Type: "click", Key: "user-2", Data: map[string]any{"page": "/buy", "items": []any{map[string]any{"sku": "a1"}}}},
		{ID: "e3", Type: "page_view", Key: "user-2", Data: map[string]any{"page": "/buy", "ms": 120.0}},
	}
	at := put(t, kin, stream, early...)
	// Arrival times are the stand-in's clock in milliseconds: the later
	// records arrive in a later millisecond than mid.
	time.Sleep(5 * time.Millisecond)
	mid := time.Now()
	time.Sleep(5 * time.Millisecond)
	late := []event{
		{ID: "e4", Type: "page_view", Key: "user-1", Data: map[string]any{"page": "/about", "ms": 420}},
		{ID: "e5", Type: "click", Key: "user-3", Data: map[string]any{"page": "/", "ok": true}},
	}
	put(t, kin, stream, late...)
	if _, err := kin.PutRecord(context.Background(), &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("user-1"), Data: []byte("plain text")}); err != nil {
		t.Fatal(err)
	}

	where := func(exprs ...string) []tail.Condition {
		var cs []tail.Condition
		for _, e := range exprs {
			c, err := tail.ParseCondition(e)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
		}
		return cs
	}
	all := []string{"e1", "e2", "e3", "e4", "e5", "not-json:plain text"}
	for _, tc := range []struct {
		name   string
		from   tail.Position
		shard  string
		limit  int
		filter tail.Filter
		want   []string
	}{
		{name: "trim_horizon reads every record", from: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, want: all},
		{name: "a time reads what arrived from it", from: tail.Position{Type: types.ShardIteratorTypeAtTimestamp, Time: mid}, want: []string{"e4", "e5", "not-json:plain text"}},
		{name: "latest without -f reads nothing", from: tail.Latest, want: nil},
		{name: "a sequence number reads its shard from it", from: tail.Position{Type: types.ShardIteratorTypeAtSequenceNumber, Sequence: at["e3"][1]}, shard: at["e3"][0],
			want: idsOnShardFrom(t, kin, stream, at["e3"][0], at["e3"][1])},
		{name: "key", from: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, filter: tail.Filter{Key: "user-2"}, want: []string{"e2", "e3"}},
		{name: "type", from: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, filter: tail.Filter{Types: []string{"click"}}, want: []string{"e2", "e5"}},
		{name: "where a string", from: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, filter: tail.Filter{Where: where("data.page=/buy")}, want: []string{"e2", "e3"}},
		{name: "where a number, as a number", from: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, filter: tail.Filter{Where: where("$.data.ms=420.0")}, want: []string{"e1", "e4"}},
		{name: "where an array element", from: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, filter: tail.Filter{Where: where("data.items[0].sku=a1")}, want: []string{"e2"}},
		{name: "where a bool", from: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, filter: tail.Filter{Where: where("data.ok=true")}, want: []string{"e5"}},
		{name: "where !=, missing fields differ", from: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, filter: tail.Filter{Where: where("data.page!=/")}, want: []string{"e2", "e3", "e4"}},
		{name: "all filters at once", from: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, filter: tail.Filter{Key: "user-1", Types: []string{"page_view"}, Where: where("data.page=/about")}, want: []string{"e4"}},
		{name: "-n stops after that many", from: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, shard: at["e1"][0], limit: 1, want: idsOnShardFrom(t, kin, stream, at["e1"][0], "")[:1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.limit
			if limit == 0 {
				limit = 100
			}
			got, sum := ids(t, kin, tail.Options{Stream: stream, From: tc.from, Shard: tc.shard, Limit: limit, Filter: tc.filter})
			if fmt.Sprint(got) != fmt.Sprint(sorted(tc.want)) {
				t.Errorf("got %v, want %v", got, sorted(tc.want))
			}
			if sum.Consumer != "" || !strings.Contains(sum.Fallback, "SubscribeToShard") {
				t.Errorf("on moto (no SubscribeToShard) the tail must poll and say why: consumer %q, fallback %q", sum.Consumer, sum.Fallback)
			}
			if c := consumers(t, kin, stream); len(c) != 0 {
				t.Errorf("consumers left registered: %v", c)
			}
		})
	}
}

// idsOnShardFrom lists, with GetRecords, the ids of the records of shard
// from seq ("" from the start) on: what a tail of that shard must print.
func idsOnShardFrom(t *testing.T, kin *kinesis.Client, stream, shard, seq string) []string {
	t.Helper()
	in := &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
	if seq != "" {
		in.ShardIteratorType, in.StartingSequenceNumber = types.ShardIteratorTypeAtSequenceNumber, aws.String(seq)
	}
	it, err := kin.GetShardIterator(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := kin.GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range out.Records {
		var e event
		if json.Unmarshal(r.Data, &e) != nil {
			got = append(got, "not-json:"+string(r.Data))
			continue
		}
		got = append(got, e.ID)
	}
	if len(got) == 0 {
		t.Fatalf("shard %s holds nothing from %q", shard, seq)
	}
	return got
}

// oneAtATime reads one record per GetRecords call: a shard that takes
// many calls to catch up, as a stream of days does.
type oneAtATime struct{ *kinesis.Client }

func (k oneAtATime) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	in.Limit = aws.Int32(1)
	return k.Client.GetRecords(ctx, in, opts...)
}

// A tail that takes long to catch up says how far it got while it reads,
// even when its filter prints nothing: a tail of a key from trim_horizon
// on a stream of days reads for hours, and was silent until its last line.
func TestProgressWhileCatchingUp(t *testing.T) {
	kin := kinesis.NewFromConfig(awsCfg)
	stream := newStream(t, kin, 1)
	put(t, kin, stream, event{ID: "e1", Key: "user-1"}, event{ID: "e2", Key: "user-1"}, event{ID: "e3", Key: "user-1"})
	var status bytes.Buffer
	got, sum := ids(t, oneAtATime{kin}, tail.Options{Stream: stream, From: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, Limit: 100,
		PollOnly: true, Filter: tail.Filter{Key: "nobody"}, Progress: 300 * time.Millisecond, Status: &status})
	if len(got) != 0 || sum.Read != 3 {
		t.Fatalf("printed %v of %d read, want none of 3", got, sum.Read)
	}
	var lines []string
	for _, l := range strings.Split(status.String(), "\n") {
		if strings.HasPrefix(l, "tail: still catching up:") {
			lines = append(lines, l)
		}
	}
	if len(lines) < 2 {
		t.Fatalf("a tail reading for 3 s said how far it got %d times, want a line every 300ms; status:\n%s", len(lines), status.String())
	}
	last := lines[len(lines)-1]
	if !strings.Contains(last, "record(s) read, 0 printed") || !strings.Contains(last, "1 of 1 shard(s)") || !strings.Contains(last, "arrived") {
		t.Errorf("progress line %q does not say what was read and printed, which shards are behind and where", last)
	}
}

// A following tail that said it was catching up says when it has caught
// up and is following: without it the last word was "still catching up".
func TestFollowSaysWhenCaughtUp(t *testing.T) {
	kin := kinesis.NewFromConfig(awsCfg)
	stream := newStream(t, kin, 1)
	put(t, kin, stream, event{ID: "e1", Key: "user-1"}, event{ID: "e2", Key: "user-1"}, event{ID: "e3", Key: "user-1"})
	var status syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		for ctx.Err() == nil && !strings.Contains(status.String(), "caught up on every shard") {
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
	}()
	_, err := tail.Run(ctx, oneAtATime{kin}, tail.Options{Stream: stream, From: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, Follow: true,
		PollOnly: true, Filter: tail.Filter{Key: "nobody"}, Progress: 300 * time.Millisecond, Status: &status}, func(*tail.Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	out := status.String()
	caught := strings.Index(out, "tail: caught up on every shard after 3 record(s) read, 0 printed; following")
	if !strings.Contains(out, "tail: still catching up:") || caught < 0 || strings.LastIndex(out, "still catching up") > caught {
		t.Errorf("status:\n%s\nwant progress lines, then one saying it caught up after the 3 records", out)
	}
}

// splitStream is a stream whose one shard was split: the closed parent
// holds what was put before, the two children what came after. The
// stand-in cannot show this (moto keeps routing records to the closed
// parent), so this is a fake of the reads a polling tail makes.
type splitStream struct {
	tail.KinesisAPI // nil: a polling tail calls only the methods below
	shards          map[string][]types.Record
}

func (s *splitStream) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return &kinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{StreamARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/split")}}, nil
}

func (s *splitStream) ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	closed := &types.SequenceNumberRange{StartingSequenceNumber: aws.String("1"), EndingSequenceNumber: aws.String("1000")}
	open := &types.SequenceNumberRange{StartingSequenceNumber: aws.String("2000")}
	return &kinesis.ListShardsOutput{Shards: []types.Shard{
		{ShardId: aws.String("shardId-000000000000"), SequenceNumberRange: closed},
		{ShardId: aws.String("shardId-000000000001"), ParentShardId: aws.String("shardId-000000000000"), SequenceNumberRange: open},
		{ShardId: aws.String("shardId-000000000002"), ParentShardId: aws.String("shardId-000000000000"), SequenceNumberRange: open},
	}}, nil
}

// Iterators are "<shard> <next index>"; every position reads from the start.
func (s *splitStream) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(aws.ToString(in.ShardId) + " 0")}, nil
}

func (s *splitStream) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	var shard string
	var next int
	fmt.Sscanf(aws.ToString(in.ShardIterator), "%s %d", &shard, &next)
	recs := s.shards[shard][next:]
	recs = recs[:min(len(recs), int(aws.ToInt32(in.Limit)))]
	out := &kinesis.GetRecordsOutput{Records: recs, MillisBehindLatest: aws.Int64(0)}
	if shard != "shardId-000000000000" || next+len(recs) < len(s.shards[shard]) { // the parent is closed: no next iterator at its end
		out.NextShardIterator = aws.String(fmt.Sprintf("%s %d", shard, next+len(recs)))
	}
	return out, nil
}

// A tail from before a split reads the closed parent to its end before
// the children: a key's records move to a child at the split, and were
// printed out of order when parent and children were read at once.
func TestParentBeforeChildren(t *testing.T) {
	rec := func(id, key string, seq int) types.Record {
		b, _ := json.Marshal(event{ID: id, Key: key})
		return types.Record{Data: b, PartitionKey: aws.String(key), SequenceNumber: aws.String(fmt.Sprint(seq)), ApproximateArrivalTimestamp: aws.Time(time.Now())}
	}
	st := &splitStream{shards: map[string][]types.Record{}}
	// More than one GetRecords call holds: the parent takes two reads, a
	// second apart.
	for i := range 1200 {
		st.shards["shardId-000000000000"] = append(st.shards["shardId-000000000000"], rec(fmt.Sprint("before-", i), fmt.Sprint("user-", i), i+1))
	}
	st.shards["shardId-000000000000"] = append(st.shards["shardId-000000000000"], rec("k-first", "k", 1201))
	st.shards["shardId-000000000001"] = []types.Record{rec("k-second", "k", 2001)}
	var order []string
	sum, err := tail.Run(context.Background(), st, tail.Options{Stream: "split", From: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}, Limit: 1000,
		PollOnly: true, Filter: tail.Filter{Key: "k"}}, func(r *tail.Record) error {
		var e event
		if err := json.Unmarshal(r.Data, &e); err != nil {
			return err
		}
		order = append(order, e.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(order) != "[k-first k-second]" || sum.Read != 1202 {
		t.Errorf("printed %v of %d read, want [k-first k-second] of 1202: the child's record before the parent's", order, sum.Read)
	}
}

// refusingStream is splitStream whose GetShardIterator refuses every
// sequence number, as Kinesis refuses one that did not come from the
// shard (the stand-in takes any number).
type refusingStream struct{ splitStream }

func (s *refusingStream) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return nil, &types.InvalidArgumentException{Message: aws.String("StartingSequenceNumber " + aws.ToString(in.StartingSequenceNumber) +
		" used in GetShardIterator on shard " + aws.ToString(in.ShardId) + " in stream split under account 000000000000 is invalid because it did not come from this stream.")}
}

// A -from sequence number the shard cannot hold is refused naming -from:
// past a closed shard's end, or refused by Kinesis (one that did not come
// from the shard). The tail printed nothing and exited 0, as if the
// shard held no record there.
func TestSequenceNumberTheShardCannotHold(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kin   tail.KinesisAPI
		shard string
		want  string
	}{
		{"past a closed shard's end", &splitStream{}, "shardId-000000000000", "sequence number 99999999999999999999999999 is past the end of shard shardId-000000000000 (its last is 1000): nothing is at or after it"},
		{"refused by Kinesis", &refusingStream{}, "shardId-000000000001", "sequence number 99999999999999999999999999: Kinesis refuses it on shard shardId-000000000001 (StartingSequenceNumber 99999999999999999999999999 used in GetShardIterator on shard shardId-000000000001 in stream split under account 000000000000 is invalid because it did not come from this stream.)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tail.Options{Stream: "split", Shard: tc.shard, PollOnly: true, Limit: 10,
				From: tail.Position{Type: types.ShardIteratorTypeAtSequenceNumber, Sequence: "99999999999999999999999999"}}
			printed := 0
			_, err := tail.Run(context.Background(), tc.kin, o, func(*tail.Record) error { printed++; return nil })
			var fe *tail.FlagError
			if !errors.As(err, &fe) || fe.Flag != "from" || !strings.Contains(fe.Msg, tc.want) {
				t.Errorf("err %v, want a -from error saying %q", err, tc.want)
			}
			if printed != 0 {
				t.Errorf("%d record(s) printed", printed)
			}
		})
	}
}
