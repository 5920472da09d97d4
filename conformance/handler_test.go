package conformance

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/handler"
)

// TestHandlerKafkaStreamsConformance runs the histories of
// TestKafkaStreamsConformance (the same seeds, kinds and policies) through
// a handler of package handler — a user's own aggregate of count, sum, min
// and max, with the history's window kind, out-of-orderness and late
// policy — and compares it with Kafka Streams as the declared pipelines
// are compared: every final window's bounds and value, its revisions on
// the output stream (final, corrections carrying the previous value,
// retractions), each revision a value Kafka's window had at the end of a
// batch, and the records dropped as late. A handler keeps no views: its
// results are on the output stream only.
func TestHandlerKafkaStreamsConformance(t *testing.T) {
	buildOracle(t)
	o := startOracle(t)
	tallies := map[string]*tally{}
	for _, k := range kinds {
		for _, p := range policies {
			tl := &tally{}
			tallies[k.name+"/"+p] = tl
			for s := 1; s <= *seeds; s++ {
				h := newHistory(k, p, uint64(s))
				t.Run(h.id(), func(t *testing.T) {
					o.submit(h.kafka())
					got := runHandler(t, h)
					c := compare(h, got, o.result(t, h.id()))
					tl.add(c)
					c.report(t, h)
				})
			}
		}
	}
	for _, k := range kinds {
		for _, p := range policies {
			if tl := tallies[k.name+"/"+p]; tl.histories > 0 {
				t.Logf("%-16s %3d histories: %6d windows compared, %5d mismatched, %3d explained; dropped as late: Kafka %d, handler %d (%d histories differ)",
					k.name+"/"+p, tl.histories, tl.windows, tl.mismatched, tl.explained, tl.kafkaDropped, tl.projectDropped, tl.droppedDiffer)
			}
		}
	}
}

// handlerOptions are the history's window kind, timing and late policy as
// a handler's options.
func handlerOptions(h *history) []handler.Option {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	opts := []handler.Option{handler.WithOutOfOrderness(outOfOrderness), handler.WithIdleTimeout(idleTimeout),
		handler.WithDedupeHorizon(time.Hour), handler.WithMetrics(nil), handler.WithLogger(slog.New(slog.NewJSONHandler(io.Discard, nil)))}
	switch h.kind.name {
	case "tumbling":
		opts = append(opts, handler.WithWindow(ms(h.kind.sizeMs)))
	case "hopping":
		opts = append(opts, handler.WithHopping(ms(h.kind.sizeMs), ms(h.kind.advanceMs)))
	case "sliding":
		opts = append(opts, handler.WithSliding(ms(h.kind.differenceMs)))
	case "session":
		opts = append(opts, handler.WithSession(ms(h.kind.gapMs)))
	}
	if h.policy == "correct" {
		opts = append(opts, handler.WithLatePolicy(handler.Correct), handler.WithAllowedLateness(allowedLateness))
	}
	return opts
}

// runHandler plays h against a handler as runProject plays it against the
// aggregate function: the raw Lambda event bytes through Handler.Invoke,
// and the schedule's ticks through a second Handler (another Lambda
// container) over the same in-process DynamoDB and output stream.
func runHandler(t *testing.T, h *history) projectResult {
	t.Helper()
	ctx := context.Background()
	db := memdb.New(map[string]memdb.Schema{viewsTable: memdb.ViewsTable, quarantine: memdb.QuarantineTable})
	out := &handlerStream{ids: map[string][]byte{}}
	cfg := handler.Config{Name: "conformance", StateTable: viewsTable, OutputStream: resultsStream, QuarantineTable: quarantine,
		DynamoDB: db, Kinesis: out, Function: "conformance"}
	newHandler := func() *handler.Handler {
		hd, err := handler.NewWindowed[readings](cfg, selectReading, handlerOptions(h)...)
		if err != nil {
			t.Fatal(err)
		}
		return hd
	}
	fn, ticker := newHandler(), newHandler()
	var newest int64
	for n, inv := range h.invocations {
		raw, err := fn.Invoke(ctx, kinesisEvent(h, inv.first, inv.last))
		if err != nil {
			t.Fatalf("invocation %d (arrivals %d..%d): %v", n, inv.first, inv.last, err)
		}
		var resp events.KinesisEventResponse
		if err := json.Unmarshal(raw, &resp); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("invocation %d (arrivals %d..%d) answered %s (%v): no write fails here", n, inv.first, inv.last, raw, err)
		}
		for i := inv.first; i <= inv.last; i++ {
			newest = max(newest, h.events[h.arrivals[i].event].t)
		}
		if inv.tick {
			if _, err := ticker.Tick(ctx, time.UnixMilli(newest)); err != nil {
				t.Fatalf("tick after invocation %d: %v", n, err)
			}
		}
	}
	for i := range 3 {
		if _, err := ticker.Tick(ctx, time.UnixMilli(newest).Add(time.Hour+time.Duration(i)*idleTimeout)); err != nil {
			t.Fatalf("final tick %d: %v", i, err)
		}
	}
	if st := fn.Stats(); st.SetAside > 0 {
		t.Fatalf("the handler set %d records aside: none may be", st.SetAside)
	}
	return projectResult{outputs: out.results, lateDropped: int(fn.Stats().Late), conflicts: out.conflicts, noViews: true}
}

// handlerStream is the handler's output stream as a consumer reads it:
// each result once by its id, in the order first put, as an
// aggregate.Output (the form compare reads), and a second emission of an
// id with other bytes a conflict.
type handlerStream struct {
	mu        sync.Mutex
	seq       int
	ids       map[string][]byte
	results   []aggregate.Output
	conflicts []string
}

func (s *handlerStream) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &kinesis.PutRecordsOutput{Records: make([]ktypes.PutRecordsResultEntry, len(in.Records))}
	for i, e := range in.Records {
		var r handler.Result
		if err := json.Unmarshal(e.Data, &r); err != nil {
			return nil, fmt.Errorf("output record %d is not a handler.Result: %w", i, err)
		}
		if prev, ok := s.ids[r.ID]; ok {
			if !bytes.Equal(prev, e.Data) {
				s.conflicts = append(s.conflicts, fmt.Sprintf("%s emitted as %s and as %s", r.ID, prev, e.Data))
			}
		} else {
			o, err := outputOfResult(r)
			if err != nil {
				return nil, fmt.Errorf("output record %d: %w", i, err)
			}
			s.ids[r.ID] = bytes.Clone(e.Data)
			s.results = append(s.results, o)
		}
		s.seq++
		seq, sh := fmt.Sprintf("49%054d", s.seq), shard
		out.Records[i] = ktypes.PutRecordsResultEntry{SequenceNumber: &seq, ShardId: &sh}
	}
	zero := int32(0)
	out.FailedRecordCount = &zero
	return out, nil
}

// outputOfResult is a handler's result in the declared pipelines' terms.
func outputOfResult(r handler.Result) (aggregate.Output, error) {
	o := aggregate.Output{ID: r.ID, Kind: r.Type, Key: r.Key, Start: r.WindowStart, End: r.WindowEnd, Revision: r.Revision}
	if r.Type != handler.RetractionType {
		if err := json.Unmarshal(r.Result, &o.Result); err != nil {
			return o, fmt.Errorf("result of %s: %w", r.ID, err)
		}
		if o.Result.Count != uint64(r.Records) {
			return o, fmt.Errorf("%s counts %d records, its result %d", r.ID, r.Records, o.Result.Count)
		}
	}
	if r.Previous != nil {
		o.Previous = new(agg.Result)
		if err := json.Unmarshal(r.Previous, o.Previous); err != nil {
			return o, fmt.Errorf("previous of %s: %w", r.ID, err)
		}
	}
	return o, nil
}

// readings is the conformance handler's aggregate: count, sum, min and max
// of data.v, rendered as the declared pipelines render them.
type readings struct {
	Count         uint64
	Sum, Min, Max int64
}

func (r *readings) Add(v int64) { r.Merge(&readings{Count: 1, Sum: v, Min: v, Max: v}) }

func (r *readings) Merge(o *readings) {
	switch {
	case o.Count == 0:
		return
	case r.Count == 0:
		*r = *o
		return
	}
	r.Count += o.Count
	r.Sum += o.Sum
	r.Min, r.Max = min(r.Min, o.Min), max(r.Max, o.Max)
}

func (r *readings) MarshalBinary() ([]byte, error) {
	b := binary.AppendUvarint(nil, r.Count)
	if r.Count == 0 {
		return b, nil
	}
	b = binary.AppendVarint(b, r.Sum)
	b = binary.AppendVarint(b, r.Min)
	return binary.AppendVarint(b, r.Max), nil
}

func (r *readings) UnmarshalBinary(b []byte) error {
	*r = readings{}
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return errors.New("readings: truncated")
	}
	r.Count, b = n, b[k:]
	if n == 0 {
		return nil
	}
	for _, p := range []*int64{&r.Sum, &r.Min, &r.Max} {
		v, k := binary.Varint(b)
		if k <= 0 {
			return errors.New("readings: truncated")
		}
		*p, b = v, b[k:]
	}
	if len(b) != 0 {
		return errors.New("readings: bytes after the aggregate")
	}
	return nil
}

// MarshalJSON renders the aggregates as the declared pipelines' results
// name them (agg.Result).
func (r *readings) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Count uint64 `json:"count"`
		Sum   int64  `json:"sum"`
		Min   int64  `json:"min"`
		Max   int64  `json:"max"`
	}{r.Count, r.Sum, r.Min, r.Max})
}

// selectReading reads the histories' events: key and data.v.
func selectReading(ev *handler.Event) (string, int64, error) {
	var d struct {
		V json.Number `json:"v"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return "", 0, handler.Refuse("data", "not a JSON object: %v", err)
	}
	v, err := strconv.ParseInt(d.V.String(), 10, 64)
	if err != nil {
		return "", 0, handler.Refuse("data.v", "%q is not an integer", d.V)
	}
	return ev.Key, v, nil
}
