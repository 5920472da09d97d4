package handler_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/internal/syncbuf"
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

// Solo is an aggregate with a codec bug that only a merge shows: it
// encodes one value, and fails for a window merging more (a session of two
// records), while each record, held alone, encodes.
type Solo struct{ N int64 }

func (s *Solo) Add(int64)     { s.N++ }
func (s *Solo) Merge(o *Solo) { s.N += o.N }

func (s *Solo) MarshalBinary() ([]byte, error) {
	if s.N > 1 {
		return nil, fmt.Errorf("solo: cannot encode %d values", s.N)
	}
	return binary.AppendVarint(nil, s.N), nil
}

func (s *Solo) UnmarshalBinary(p []byte) error {
	v, n := binary.Varint(p)
	if n <= 0 {
		return errors.New("solo: truncated")
	}
	s.N = v
	return nil
}

func (s *Solo) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf(`{"N":%d}`, s.N)), nil }

// TestWindowThatFailsToEncodeWhenClosedIsSetAside: /k's session merges two
// records, and its aggregate fails to encode when the session closes. The
// close comes in a batch holding another /k record (the fold) or only
// /ok's (the close). Before, the session's result was only logged: the
// state was written without it, its records were pruned, nothing was set
// aside or counted, and no alarm fired. Now the state is not written (it
// still holds the session's records), the fold's /k record is set aside,
// a copy of /k's state is set aside once (field state), each reason naming
// the session's window and the aggregate's error; /ok's results come out.
func TestWindowThatFailsToEncodeWhenClosedIsSetAside(t *testing.T) {
	for _, c := range []struct {
		name string
		jump []rec // the batch whose watermark passes /k's session
		want []string
	}{
		{name: "fold", jump: []rec{{seq: 200, env: request("j0", "/k", 3600, `{"ms":1}`)}, {seq: 201, env: request("j1", "/ok", 3601, `{"ms":1}`)}},
			want: []string{"key 200", "state"}},
		{name: "close", jump: []rec{{seq: 200, env: request("j0", "/ok", 3600, `{"ms":1}`)}},
			want: []string{"state"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := setup(t)
			h, err := handler.NewWindowed[Solo](cfg, selectLatency, handler.WithSession(time.Minute), handler.WithOutOfOrderness(time.Second),
				handler.WithLogger(quiet), handler.WithMetrics(nil))
			if err != nil {
				t.Fatal(err)
			}
			mustBatch(t, h, kinesisRecords([]rec{
				{seq: 100, env: request("e0", "/k", 1, `{"ms":1}`)},
				{seq: 101, env: request("e1", "/k", 2, `{"ms":1}`)},
				{seq: 102, env: request("e2", "/ok", 1, `{"ms":1}`)},
			}))
			mustBatch(t, h, kinesisRecords(c.jump))
			for _, at := range []time.Time{base.Add(3 * time.Hour), base.Add(4 * time.Hour)} {
				if _, err := h.Tick(ctx, at); err != nil {
					t.Fatalf("tick at %s: %v; want /k set aside, not a failure", at.Format("15:04"), err)
				}
			}
			var got []string
			for _, a := range asideOfTable(t, cfg.QuarantineTable) {
				for _, want := range []string{`key "/k"`, "2026-11-29T10:00:01.000Z/2026-11-29T10:01:02.000Z", "solo: cannot encode 2 values"} {
					if !strings.Contains(a.Reason, want) {
						t.Errorf("set aside %s field %q: reason %q\n  does not say %q", a.SequenceNumber, a.Field, a.Reason, want)
					}
				}
				if a.Category != setaside.KindStateBudget || len(a.Data) == 0 {
					t.Errorf("set aside %s field %q as %s with %d bytes of data; want %s with its data", a.SequenceNumber, a.Field, a.Category, len(a.Data), setaside.KindStateBudget)
				}
				if a.Field == "key" {
					got = append(got, "key "+a.SequenceNumber)
				} else {
					got = append(got, a.Field)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("set aside %v; want %v", got, c.want)
			}
			if s := h.Stats(); s.SetAside != int64(len(c.want)) {
				t.Errorf("SetAside %d; want %d", s.SetAside, len(c.want))
			}
			byID, _ := results(t, cfg.OutputStream)
			if d := strings.Join(describe(byID), "\n"); !strings.Contains(d, "/ok 10:00:01") || strings.Contains(d, "/k ") {
				t.Errorf("results\n%s\nwant /ok's first session, none of /k's", d)
			}
		})
	}
}

// Wordy reads no state it did not write, and its error quotes the whole
// encoding it was given, as an aggregate whose type changed may.
type Wordy struct{ N int64 }

func (w *Wordy) Add(int64)      { w.N++ }
func (w *Wordy) Merge(o *Wordy) { w.N += o.N }

func (w *Wordy) MarshalBinary() ([]byte, error) {
	return binary.AppendVarint([]byte("wordy"), w.N), nil
}

func (w *Wordy) UnmarshalBinary(p []byte) error {
	if !bytes.HasPrefix(p, []byte("wordy")) {
		return fmt.Errorf("wordy: not a Wordy: %x", p)
	}
	v, n := binary.Varint(p[5:])
	if n <= 0 {
		return errors.New("wordy: truncated")
	}
	w.N = v
	return nil
}

func (w *Wordy) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf(`{"N":%d}`, w.N)), nil }

// TestUnreadableStateReasonIsBounded: /bad's state was written by a Bulk
// (15 KB), and the handler now aggregates Wordy, whose decoding error
// quotes the 15 KB in hex. Before, the set-aside reasons repeated all 30 KB,
// so the quarantine table cut them at 4 KB, dropping what to do about it,
// and every batch and tick that met the key logged 30 KB. Now the error is
// cut in the middle, as an encoding error is: the reason keeps the key,
// the error's start and the advice, and no log line repeats it whole.
func TestUnreadableStateReasonIsBounded(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	h, err := handler.NewWindowed[Bulk](cfg, selectLatency, handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	mustBatch(t, h, kinesisRecords([]rec{{seq: 100, env: request("e0", "/bad", 1, `{"ms":1}`)}}))
	var logs syncbuf.Buffer
	if h, err = handler.NewWindowed[Wordy](cfg, selectLatency, handler.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))), handler.WithMetrics(nil)); err != nil {
		t.Fatal(err)
	}
	mustBatch(t, h, kinesisRecords([]rec{
		{seq: 101, env: request("e1", "/bad", 2, `{"ms":2}`)},
		{seq: 102, env: request("e2", "/good", 200, `{"ms":3}`)},
	}))
	if _, err := h.Tick(ctx, base.Add(time.Hour)); err != nil {
		t.Fatalf("tick: %v", err)
	}
	aside := asideOfTable(t, cfg.QuarantineTable)
	if len(aside) != 2 {
		t.Fatalf("set aside %d items; want /bad's record and its state", len(aside))
	}
	for _, a := range aside {
		for _, want := range []string{`key "/bad"`, "wordy: not a Wordy: ", "deploy code that reads it or delete the item, then redrive"} {
			if !strings.Contains(a.Reason, want) {
				t.Errorf("set aside %s field %q: reason (%d bytes) %q\n  does not say %q", a.SequenceNumber, a.Field, len(a.Reason), a.Reason, want)
			}
		}
		if len(a.Reason) > 1024 {
			t.Errorf("set aside %s field %q: reason is %d bytes; want at most 1 KiB", a.SequenceNumber, a.Field, len(a.Reason))
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if len(line) > 2048 {
			t.Errorf("a log line of %d bytes: %.200s…", len(line), line)
		}
	}
}
