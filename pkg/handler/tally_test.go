package handler_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/tributary-dev/tributary/pkg/handler"
)

// Tally is the tests' aggregate of latencies (ms): count, sum, max and how
// often each distinct value was seen (so a window's size grows with its
// distinct values, for the limits' tests).
type Tally struct {
	N, Sum, Max int64
	Seen        map[int64]int64
}

func (t *Tally) Add(v int64) {
	t.N++
	t.Sum += v
	t.Max = max(t.Max, v)
	if t.Seen == nil {
		t.Seen = map[int64]int64{}
	}
	t.Seen[v]++
}

func (t *Tally) Merge(o *Tally) {
	t.N += o.N
	t.Sum += o.Sum
	t.Max = max(t.Max, o.Max)
	for v, n := range o.Seen {
		if t.Seen == nil {
			t.Seen = map[int64]int64{}
		}
		t.Seen[v] += n
	}
}

func (t *Tally) MarshalBinary() ([]byte, error) {
	b := binary.AppendVarint(nil, t.N)
	b = binary.AppendVarint(b, t.Sum)
	b = binary.AppendVarint(b, t.Max)
	vs := make([]int64, 0, len(t.Seen))
	for v := range t.Seen {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	b = binary.AppendVarint(b, int64(len(vs)))
	for _, v := range vs {
		b = binary.AppendVarint(b, v)
		b = binary.AppendVarint(b, t.Seen[v])
	}
	return b, nil
}

func (t *Tally) UnmarshalBinary(b []byte) error {
	var vals []int64
	for len(b) > 0 {
		v, n := binary.Varint(b)
		if n <= 0 {
			return errors.New("tally: truncated")
		}
		vals, b = append(vals, v), b[n:]
	}
	if len(vals) < 4 || len(vals) != 4+2*int(vals[3]) {
		return errors.New("tally: malformed")
	}
	*t = Tally{N: vals[0], Sum: vals[1], Max: vals[2]}
	for i := 4; i < len(vals); i += 2 {
		if t.Seen == nil {
			t.Seen = map[int64]int64{}
		}
		t.Seen[vals[i]] = vals[i+1]
	}
	return nil
}

// MarshalJSON is the window's result.
func (t *Tally) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		N, Sum, Max int64
		Distinct    int
	}{t.N, t.Sum, t.Max, len(t.Seen)})
}

// selectLatency reads events of type "request": key = the envelope's key,
// value = data.ms, a whole number of milliseconds 0–60000.
func selectLatency(ev *handler.Event) (string, int64, error) {
	if ev.Type != "request" {
		return "", 0, handler.ErrSkip
	}
	var d struct {
		MS *json.Number `json:"ms"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return "", 0, handler.Refuse("data", "not a JSON object: %v", err)
	}
	if d.MS == nil {
		return "", 0, handler.Refuse("data.ms", "missing")
	}
	ms, err := strconv.ParseInt(d.MS.String(), 10, 64)
	if err != nil || ms < 0 || ms > 60000 {
		return "", 0, handler.Refuse("data.ms", "%s is not a whole number of milliseconds 0–60000", d.MS)
	}
	return ev.Key, ms, nil
}
