package batch

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

func kinesisIDs(r events.KinesisEventResponse) []string {
	var out []string
	for _, f := range r.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

func TestStreamFailuresLowestFirst(t *testing.T) {
	tests := []struct {
		name   string
		add    []string
		want   []string
		lowest string
	}{
		{name: "none", add: nil, want: nil, lowest: ""},
		{name: "one", add: []string{"49601189658422359378836298521827638475320189012309704722"}, want: []string{"49601189658422359378836298521827638475320189012309704722"}, lowest: "49601189658422359378836298521827638475320189012309704722"},
		{name: "numeric not lexical order", add: []string{"100", "99", "1000"}, want: []string{"99", "100", "1000"}, lowest: "99"},
		{name: "duplicates once", add: []string{"7", "7", "5"}, want: []string{"5", "7"}, lowest: "5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f StreamFailures
			for _, s := range tt.add {
				f.Add(s)
			}
			k := f.Kinesis()
			if k.BatchItemFailures == nil {
				t.Error("BatchItemFailures is nil; Lambda wants an empty list for success")
			}
			if got := kinesisIDs(k); !slices.Equal(got, tt.want) {
				t.Errorf("Kinesis() = %v, want %v", got, tt.want)
			}
			d := f.DynamoDB()
			if len(d.BatchItemFailures) != len(tt.want) || (len(tt.want) > 0 && d.BatchItemFailures[0].ItemIdentifier != tt.want[0]) {
				t.Errorf("DynamoDB() = %v, want %v", d.BatchItemFailures, tt.want)
			}
			if f.Lowest() != tt.lowest {
				t.Errorf("Lowest() = %q, want %q", f.Lowest(), tt.lowest)
			}
		})
	}
}

func TestKinesisInOrderStopsAtFirstFailure(t *testing.T) {
	recs := make([]events.KinesisEventRecord, 5)
	for i, s := range []string{"10", "20", "30", "40", "50"} {
		recs[i].Kinesis.SequenceNumber = s
	}
	boom := errors.New("boom")
	tests := []struct {
		name      string
		failAt    map[string]bool
		wantSeen  []string
		wantFails []string
	}{
		{name: "all good", wantSeen: []string{"10", "20", "30", "40", "50"}},
		{name: "third fails", failAt: map[string]bool{"30": true, "50": true}, wantSeen: []string{"10", "20", "30"}, wantFails: []string{"30"}},
		{name: "first fails", failAt: map[string]bool{"10": true}, wantSeen: []string{"10"}, wantFails: []string{"10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []string
			resp, err := KinesisInOrder(context.Background(), recs, func(_ context.Context, r *events.KinesisEventRecord) error {
				seen = append(seen, r.Kinesis.SequenceNumber)
				if tt.failAt[r.Kinesis.SequenceNumber] {
					return boom
				}
				return nil
			})
			if !slices.Equal(seen, tt.wantSeen) {
				t.Errorf("processed %v, want %v", seen, tt.wantSeen)
			}
			if got := kinesisIDs(resp); !slices.Equal(got, tt.wantFails) {
				t.Errorf("failures %v, want %v", got, tt.wantFails)
			}
			if (err != nil) != (tt.wantFails != nil) {
				t.Errorf("err = %v", err)
			}
		})
	}
}

func TestDynamoDBInOrder(t *testing.T) {
	recs := make([]events.DynamoDBEventRecord, 3)
	for i, s := range []string{"111", "222", "333"} {
		recs[i].Change.SequenceNumber = s
	}
	resp, err := DynamoDBInOrder(context.Background(), recs, func(_ context.Context, r *events.DynamoDBEventRecord) error {
		if r.Change.SequenceNumber == "222" {
			return errors.New("bad")
		}
		return nil
	})
	if err == nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "222" {
		t.Errorf("got %v, %v; want failure at 222", resp, err)
	}
}

func TestInOrderStopsAtDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n, err := InOrder(ctx, 4, func(_ context.Context, i int) error {
		if i == 1 {
			cancel() // the deadline passes while record 1 is processed
		}
		return nil
	})
	if n != 2 || !errors.Is(err, context.Canceled) {
		t.Errorf("InOrder = %d, %v; want 2, context.Canceled", n, err)
	}
}

func msg(id, group string) events.SQSMessage {
	m := events.SQSMessage{MessageId: id, Body: id}
	if group != "" {
		m.Attributes = map[string]string{"MessageGroupId": group}
	}
	return m
}

func TestSQS(t *testing.T) {
	tests := []struct {
		name      string
		msgs      []events.SQSMessage
		failing   map[string]bool
		wantSeen  []string
		wantFails []string
	}{
		{
			name:     "standard queue: only the failed one",
			msgs:     []events.SQSMessage{msg("a", ""), msg("b", ""), msg("c", "")},
			failing:  map[string]bool{"b": true},
			wantSeen: []string{"a", "b", "c"}, wantFails: []string{"b"},
		},
		{
			name:     "FIFO: the group's later messages fail too, other groups go on",
			msgs:     []events.SQSMessage{msg("a1", "A"), msg("b1", "B"), msg("a2", "A"), msg("b2", "B"), msg("a3", "A")},
			failing:  map[string]bool{"a2": true},
			wantSeen: []string{"a1", "b1", "a2", "b2"}, wantFails: []string{"a2", "a3"},
		},
		{
			name:     "FIFO: nothing fails",
			msgs:     []events.SQSMessage{msg("a1", "A"), msg("a2", "A")},
			wantSeen: []string{"a1", "a2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []string
			resp, errs := SQS(context.Background(), tt.msgs, func(_ context.Context, m *events.SQSMessage) error {
				seen = append(seen, m.MessageId)
				if tt.failing[m.MessageId] {
					return errors.New("failed")
				}
				return nil
			})
			var got []string
			for _, f := range resp.BatchItemFailures {
				got = append(got, f.ItemIdentifier)
			}
			if !slices.Equal(seen, tt.wantSeen) {
				t.Errorf("processed %v, want %v", seen, tt.wantSeen)
			}
			if !slices.Equal(got, tt.wantFails) {
				t.Errorf("failures %v, want %v", got, tt.wantFails)
			}
			if len(errs) != len(tt.wantFails) {
				t.Errorf("errors %v", errs)
			}
			for _, e := range errs {
				if e.MessageID == "a3" && !errors.Is(e.Err, ErrGroupBlocked) {
					t.Errorf("a3 failed with %v, want ErrGroupBlocked", e.Err)
				}
			}
		})
	}
}

func TestReserveEndsBeforeTheDeadline(t *testing.T) {
	dl := time.Now().Add(time.Hour)
	parent, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	ctx, cancel2 := Reserve(parent, time.Second)
	defer cancel2()
	if got, _ := ctx.Deadline(); !got.Equal(dl.Add(-time.Second)) {
		t.Errorf("deadline %s, want %s", got, dl.Add(-time.Second))
	}
	ctx3, cancel3 := Reserve(context.Background(), time.Second)
	defer cancel3()
	if _, ok := ctx3.Deadline(); ok {
		t.Error("a context without deadline got one")
	}
}
