package handler_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// Brittle is an aggregate with a codec bug: a value read back from the
// state item no longer encodes (as a version change that reads the old
// shape but cannot write it would).
type Brittle struct {
	N      int64
	loaded bool
}

func (b *Brittle) Add(int64)        { b.N++ }
func (b *Brittle) Merge(o *Brittle) { b.N += o.N }

func (b *Brittle) MarshalBinary() ([]byte, error) {
	if b.loaded {
		return nil, errors.New("brittle: cannot encode a value read back")
	}
	return binary.AppendVarint(nil, b.N), nil
}

func (b *Brittle) UnmarshalBinary(p []byte) error {
	v, n := binary.Varint(p)
	if n <= 0 {
		return errors.New("brittle: truncated")
	}
	b.N, b.loaded = v, true
	return nil
}

func (b *Brittle) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf(`{"N":%d}`, b.N)), nil }

// TestAggregateThatFailsToEncodeIsNamedInTheSetAsideReason: a record
// whose key's aggregate no longer encodes is set aside, and the reason says
// the aggregate failed to encode, with its error. Two ways: the key's
// stored window no longer encodes, so its state cannot be written when the
// next batch's record opens another window ("write"); or a record merged
// into a window near its MaxAggregateBytes is measured on a copy that does
// not encode ("merge"). Before, the first reason said the state would be
// 360,001 bytes, over its item's budget (only a log line said why), and the
// second was the bare error: a user lowered limits that were not the cause.
func TestAggregateThatFailsToEncodeIsNamedInTheSetAsideReason(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    []handler.Option
		batches [][]rec
	}{
		{name: "write", batches: [][]rec{
			{{seq: 100, env: request("e0", "/k", 1, `{"ms":1}`)}},
			{{seq: 101, env: request("e1", "/k", 61, `{"ms":1}`)}},
		}},
		{name: "merge", opts: []handler.Option{handler.WithLimits(handler.Limits{MaxOpenWindows: 2, MaxAggregateBytes: 1})}, batches: [][]rec{
			{{seq: 100, env: request("e0", "/k", 1, `{"ms":1}`)}, {seq: 101, env: request("e1", "/k", 2, `{"ms":1}`)}},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := setup(t)
			opts := append([]handler.Option{handler.WithWindow(time.Minute), handler.WithOutOfOrderness(10 * time.Minute),
				handler.WithLogger(quiet), handler.WithMetrics(nil)}, c.opts...)
			h, err := handler.NewWindowed[Brittle](cfg, selectLatency, opts...)
			if err != nil {
				t.Fatal(err)
			}
			for i, b := range c.batches {
				resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: kinesisRecords(b)})
				if err != nil || len(resp.BatchItemFailures) > 0 {
					t.Fatalf("batch %d: %+v %v; want no failure", i, resp, err)
				}
			}
			aside := asideOfTable(t, cfg.QuarantineTable)
			if len(aside) != 1 || aside[0].SequenceNumber != "101" {
				t.Fatalf("set aside %+v; want record 101 alone", aside)
			}
			a := aside[0]
			for _, want := range []string{`key "/k"`, "failed to encode", "brittle: cannot encode a value read back"} {
				if !strings.Contains(a.Reason, want) {
					t.Errorf("reason %q\n  does not say %q", a.Reason, want)
				}
			}
			if strings.Contains(a.Reason, "bytes") || a.Category != setaside.KindStateBudget || a.Field != "key" {
				t.Errorf("set aside as %s field %q: %q; want %s, field key, with no size as its cause", a.Category, a.Field, a.Reason, setaside.KindStateBudget)
			}
		})
	}
}
