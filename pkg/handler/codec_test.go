package handler

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/window"
)

// sumAgg is a sum and a count, for the codec's tests.
type sumAgg struct{ N, Sum int64 }

func (a *sumAgg) Add(v int64)     { a.N++; a.Sum += v }
func (a *sumAgg) Merge(o *sumAgg) { a.N += o.N; a.Sum += o.Sum }
func (a *sumAgg) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct{ N, Sum int64 }{a.N, a.Sum})
}
func (a *sumAgg) MarshalBinary() ([]byte, error) {
	return binary.AppendVarint(binary.AppendVarint(nil, a.N), a.Sum), nil
}
func (a *sumAgg) UnmarshalBinary(b []byte) error {
	n, k := binary.Varint(b)
	if k <= 0 {
		return errors.New("truncated")
	}
	s, k2 := binary.Varint(b[k:])
	if k2 <= 0 || k+k2 != len(b) {
		return errors.New("malformed")
	}
	a.N, a.Sum = n, s
	return nil
}

func testOperator(w windows) *windowed[sumAgg, int64, *sumAgg] {
	return &windowed[sumAgg, int64, *sumAgg]{name: "h", kind: w, late: window.LateRule{Policy: window.Correct, AllowedLateness: time.Minute},
		lim: DefaultLimits, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func one(t time.Time, v int64) value[*sumAgg] {
	a := &sumAgg{}
	a.Add(v)
	b, _ := a.MarshalBinary()
	return value[*sumAgg]{t: t.UnixMilli(), single: a, size: len(b)}
}

// TestStateVersion1StillDecodes reads the state a tumbling handler wrote
// before version 2 (an open window and a final result in the outbox): the
// result is sent as it was, and the open window goes on collecting.
func TestStateVersion1StillDecodes(t *testing.T) {
	var opts options
	WithWindow(time.Minute)(&opts)
	op := testOperator(opts.win)
	agg := func(n, sum int64) []byte { b, _ := (&sumAgg{n, sum}).MarshalBinary(); return b }
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	// Version 1: open windows, then the outbox; each (start, records, length, aggregate).
	v1 := []byte{stateVersion1}
	for _, ws := range [][]struct {
		start  time.Time
		n, sum int64
	}{{{start.Add(time.Minute), 2, 30}}, {{start, 3, 7}}} {
		v1 = binary.AppendUvarint(v1, uint64(len(ws)))
		for _, w := range ws {
			b := agg(w.n, w.sum)
			v1 = binary.AppendVarint(v1, w.start.UnixMilli())
			v1 = binary.AppendUvarint(v1, uint64(w.n))
			v1 = binary.AppendUvarint(v1, uint64(len(b)))
			v1 = append(v1, b...)
		}
	}
	st, err := op.NewState("/a", v1)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := st.Render()
	if err != nil || len(recs) != 1 || !strings.Contains(string(recs[0].Data), `"id":"h//a/2026-11-29T10:00:00.000Z/2026-11-29T10:01:00.000Z","type":"final"`) ||
		!strings.Contains(string(recs[0].Data), `"records":3,"final":true,"result":{"N":3,"Sum":7}`) {
		t.Fatalf("the outbox of a version 1 state: %q, %v; want the first minute's final result", recs, err)
	}
	st.Compact()
	st.Add(one(start.Add(90*time.Second), 5), start.Add(80*time.Second))
	st.Advance(start.Add(3 * time.Minute))
	recs, _ = st.Render()
	if len(recs) != 1 || !strings.Contains(string(recs[0].Data), `"records":3,"final":true,"result":{"N":3,"Sum":35}`) {
		t.Fatalf("the open window of a version 1 state, with one more record: %q", recs)
	}
	if _, err := testOperator(windows{kind: "session", def: window.Defined{Gap: time.Second}}).NewState("/a", v1); err == nil {
		t.Errorf("a session handler read a tumbling handler's state")
	}
}

// TestStateEncodingReadsBack encodes states of every kind, with held
// records late and on time, final windows within the allowed lateness and
// an outbox, and checks that each decodes to the same bytes; and that
// truncated states are refused, not misread.
func TestStateEncodingReadsBack(t *testing.T) {
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, opt := range []Option{WithWindow(time.Minute), WithHopping(time.Minute, 20*time.Second), WithSliding(10 * time.Second), WithSession(5 * time.Second)} {
		var o options
		opt(&o)
		op := testOperator(o.win)
		st, _ := op.NewState("/a", nil)
		for i, at := range []int{1, 3, 40, 70, 20, 200, 130, 2} {
			st.Add(one(start.Add(time.Duration(at)*time.Second), int64(i)), start.Add(time.Duration(at)*time.Second-5*time.Second))
			if i == 4 {
				st.Advance(start.Add(65 * time.Second))
			}
		}
		blob, err := st.Encode(nil)
		if err != nil {
			t.Fatalf("%s: %v", o.win.kind, err)
		}
		back, err := op.NewState("/a", blob)
		if err != nil {
			t.Fatalf("%s: %v", o.win.kind, err)
		}
		if again, err := back.Encode(nil); err != nil || !bytes.Equal(again, blob) {
			t.Errorf("%s: %x read back as %x", o.win.kind, blob, again)
		}
		if st.Outbox() == 0 {
			t.Errorf("%s: no results in the outbox: the state tests less than it should", o.win.kind)
		}
		for n := 1; n < len(blob); n++ {
			if _, err := op.NewState("/a", blob[:n]); err == nil {
				t.Errorf("%s: the state cut to %d of %d bytes decoded", o.win.kind, n, len(blob))
				break
			}
		}
	}
}
