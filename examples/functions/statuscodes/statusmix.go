package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// EventType is the type of the events the function reads.
const EventType = "http_request"

// Status codes outside [MinStatus, MaxStatus] are refused (the record is
// set aside naming data.status), which bounds a StatusMix: at most 500
// distinct codes, so a window's aggregate stays a few kilobytes.
const (
	MinStatus = 100
	MaxStatus = 599
)

// Status is an HTTP status code within [MinStatus, MaxStatus].
type Status uint16

// StatusMix counts a route's responses per status class (1xx–5xx) and per
// exact code. It is a mergeable aggregate (handler.Aggregate): counts add,
// so Merge is associative and commutative, and its encoding lists codes in
// ascending order, so equal mixes encode alike.
type StatusMix struct {
	Classes [5]int64         // [0] 1xx … [4] 5xx
	Codes   map[Status]int64 // per exact code
}

// Add counts one response; a code outside the bounds is not counted
// (SelectStatus refuses it before it gets here).
func (m *StatusMix) Add(s Status) {
	if s < MinStatus || s > MaxStatus {
		return
	}
	m.Classes[s/100-1]++
	if m.Codes == nil {
		m.Codes = map[Status]int64{}
	}
	m.Codes[s]++
}

// Merge adds o's counts.
func (m *StatusMix) Merge(o *StatusMix) {
	for i, n := range o.Classes {
		m.Classes[i] += n
	}
	for s, n := range o.Codes {
		if m.Codes == nil {
			m.Codes = map[Status]int64{}
		}
		m.Codes[s] += n
	}
}

// Total is the number of responses counted.
func (m *StatusMix) Total() int64 {
	var n int64
	for _, c := range m.Classes {
		n += c
	}
	return n
}

// ErrorRate is the share of 5xx responses (0 without responses).
func (m *StatusMix) ErrorRate() float64 {
	if t := m.Total(); t > 0 {
		return float64(m.Classes[4]) / float64(t)
	}
	return 0
}

// MarshalBinary encodes the codes in ascending order, each as the code and
// its count (uvarints); the classes are their sums, not encoded.
func (m *StatusMix) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 2+4*len(m.Codes))
	b = binary.AppendUvarint(b, uint64(len(m.Codes)))
	for s := Status(MinStatus); s <= MaxStatus; s++ {
		if n := m.Codes[s]; n > 0 {
			b = binary.AppendUvarint(b, uint64(s))
			b = binary.AppendUvarint(b, uint64(n))
		}
	}
	return b, nil
}

// UnmarshalBinary decodes MarshalBinary's encoding.
func (m *StatusMix) UnmarshalBinary(b []byte) error {
	*m = StatusMix{}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > MaxStatus-MinStatus+1 {
		return errors.New("statusmix: bad code count")
	}
	b = b[k:]
	for range n {
		s, k1 := binary.Uvarint(b)
		if k1 <= 0 || s < MinStatus || s > MaxStatus {
			return errors.New("statusmix: bad code")
		}
		c, k2 := binary.Uvarint(b[k1:])
		if k2 <= 0 || c == 0 || c > math.MaxInt64 {
			return errors.New("statusmix: bad count")
		}
		b = b[k1+k2:]
		if m.Codes == nil {
			m.Codes = map[Status]int64{}
		}
		m.Codes[Status(s)] = int64(c)
		m.Classes[s/100-1] += int64(c)
	}
	if len(b) != 0 {
		return errors.New("statusmix: trailing bytes")
	}
	return nil
}

// MarshalJSON is a window's result: the total, the counts per class and
// per code, and the 5xx error rate.
func (m *StatusMix) MarshalJSON() ([]byte, error) {
	codes := make(map[string]int64, len(m.Codes))
	for s, n := range m.Codes {
		codes[strconv.Itoa(int(s))] = n
	}
	return json.Marshal(struct {
		Total     int64            `json:"total"`
		Classes   map[string]int64 `json:"classes"`
		Codes     map[string]int64 `json:"codes"`
		ErrorRate float64          `json:"errorRate"`
	}{m.Total(), map[string]int64{"1xx": m.Classes[0], "2xx": m.Classes[1], "3xx": m.Classes[2], "4xx": m.Classes[3], "5xx": m.Classes[4]},
		codes, math.Round(m.ErrorRate()*1e4) / 1e4})
}

// SelectStatus reads events of type http_request: key = the route (the
// envelope's key, e.g. "/checkout"), value = data.status. Other types are
// skipped; a missing, non-integer or out-of-range status is refused naming
// data.status. data is read with the one strict reader (package
// strictjson): its other fields are skipped, but a key spelt as status in
// another case ("Status") is refused naming it, where encoding/json would
// count it as the status.
func SelectStatus(ev *handler.Event) (string, Status, error) {
	if ev.Type != EventType {
		return "", 0, handler.ErrSkip
	}
	var d struct {
		Status json.RawMessage `json:"status"`
	}
	if err := strictjson.Decode(ev.Data, &d, strictjson.Options{MaxBytes: len(ev.Data), Name: "data", AllowUnknown: true}); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return "", 0, handler.Refuse(strictjson.JoinPath("data", se.Path), "%s", se.Reason)
		}
		return "", 0, handler.Refuse("data", "not a JSON object: %v", err)
	}
	if len(d.Status) == 0 {
		return "", 0, handler.Refuse("data.status", "missing: an http_request needs its status code")
	}
	code, err := strconv.Atoi(string(d.Status))
	if err != nil || code < MinStatus || code > MaxStatus {
		return "", 0, handler.Refuse("data.status", "%s is not an HTTP status code (an integer %d–%d)", d.Status, MinStatus, MaxStatus)
	}
	return ev.Key, Status(code), nil
}

var _ handler.Aggregate[Status, *StatusMix] = (*StatusMix)(nil)

func (s Status) String() string { return fmt.Sprint(uint16(s)) }
