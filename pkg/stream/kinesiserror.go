package stream

import (
	"encoding/json"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// locateError names where a Kinesis event that encoding/json refused goes
// wrong: the first value, in document order, that does not decode as its
// field's type on its own (its error then is the error), or the record or
// field where the JSON breaks off (err, encoding/json's error for the whole
// event, is the error). window says whether the event has a window, which
// decides whether the window properties are decoded at all.
func locateError(raw []byte, window bool, err error) error {
	l := locator{d: raw, window: window, rec: -1}
	l.top()
	e := &KinesisEventError{Record: l.rec, Field: l.field, Err: err}
	if l.err != nil {
		e.Err = l.err
	}
	if reason, ok := strictjson.TypeReason(e.Err); ok {
		e.Err = &wrongTypeError{reason: reason, err: e.Err}
	}
	return e
}

// wrongTypeError is encoding/json's refusal of a value of the wrong type
// said in JSON's words ("must be a JSON array, not a string"), where its
// own names the Go type ("[]events.KinesisEventRecord"), which tells the
// sender of a test event nothing.
type wrongTypeError struct {
	reason string
	err    error
}

func (e *wrongTypeError) Error() string { return e.reason }
func (e *wrongTypeError) Unwrap() error { return e.err }

// locator walks an event the way decodeFast does, decoding each value with
// encoding/json into its field's type, until one fails or the JSON breaks.
type locator struct {
	d      []byte
	window bool
	done   bool
	rec    int
	field  string
	err    error
}

// at stops the walk at rec and field (err nil: the JSON breaks there).
func (l *locator) at(rec int, field string, err error) {
	if !l.done {
		l.rec, l.field, l.err, l.done = rec, field, err, true
	}
}

// leaf checks the value at d[i] by decoding it into v (nil: only its
// syntax) and returns the index past it, or -1 having stopped the walk.
func (l *locator) leaf(i, rec int, field string, v any) int {
	e := skipValue(l.d, i)
	if e < 0 {
		l.at(rec, field, nil)
		return -1
	}
	if v != nil {
		if err := json.Unmarshal(l.d[i:e], v); err != nil {
			l.at(rec, field, err)
			return -1
		}
	}
	return e
}

// object walks the members of the object at d[i] (its '{'), handing each
// value's index and the key's index in names to member, which returns the
// index past the value or -1. A broken object stops the walk at rec and
// field.
func (l *locator) object(i, rec int, field string, names []string, member func(f, i int) int) int {
	d := l.d
	if i = skipSpace(d, i+1); i < len(d) && d[i] == '}' {
		return i + 1
	}
	for {
		var f int
		if i, f = memberKey(d, i, names); i >= 0 {
			i = member(f, i)
		}
		var more bool
		if i >= 0 {
			i, more = nextMember(d, i)
		}
		if i < 0 {
			l.at(rec, field, nil)
			return -1
		}
		if !more {
			return i
		}
	}
}

func (l *locator) top() {
	d := l.d
	i := skipSpace(d, 0)
	if i >= len(d) || d[i] != '{' {
		l.at(-1, "", nil)
		return
	}
	l.object(i, -1, "", topNames, func(f, i int) int {
		switch {
		case f == topRecords:
			return l.records(i)
		case f == len(topNames) || !l.window:
			return l.leaf(i, -1, "", nil)
		case f == topWindow && d[i] == '{':
			return l.object(i, -1, "window", windowNames, func(f, i int) int {
				if f == len(windowNames) {
					return l.leaf(i, -1, "window", nil)
				}
				return l.leaf(i, -1, "window."+windowNames[f], new(events.RFC3339EpochTime))
			})
		case f == topWindow:
			return l.leaf(i, -1, "window", new(events.Window))
		case f == topState:
			return l.leaf(i, -1, "state", new(map[string]string))
		case f == topShardID || f == topEventSourceARN:
			return l.leaf(i, -1, topNames[f], new(string))
		default:
			return l.leaf(i, -1, topNames[f], new(bool))
		}
	})
}

func (l *locator) records(i int) int {
	d := l.d
	if d[i] != '[' {
		return l.leaf(i, -1, "Records", new([]events.KinesisEventRecord))
	}
	n := 0
	if i = skipSpace(d, i+1); i < len(d) && d[i] == ']' {
		return i + 1
	}
	for {
		switch {
		case i >= len(d):
			i = -1
		case d[i] == '{':
			i = l.record(i, n)
		default:
			i = l.leaf(i, n, "", new(events.KinesisEventRecord))
		}
		if i >= 0 {
			i = skipSpace(d, i)
		}
		switch {
		case i < 0 || i >= len(d):
			l.at(n, "", nil)
			return -1
		case d[i] == ',':
			i = skipSpace(d, i+1)
			n++
		case d[i] == ']':
			return i + 1
		default:
			l.at(n, "", nil)
			return -1
		}
	}
}

func (l *locator) record(i, n int) int {
	return l.object(i, n, "", recordNames, func(f, i int) int {
		switch {
		case f < recKinesis:
			return l.leaf(i, n, recordNames[f], new(string))
		case f == recKinesis && l.d[i] == '{':
			return l.object(i, n, "kinesis", kinesisNames, func(f, i int) int {
				switch f {
				case kinTime:
					return l.leaf(i, n, "kinesis."+kinesisNames[f], new(events.SecondsEpochTime))
				case kinData:
					return l.leaf(i, n, "kinesis."+kinesisNames[f], new([]byte))
				case len(kinesisNames):
					return l.leaf(i, n, "kinesis", nil)
				}
				return l.leaf(i, n, "kinesis."+kinesisNames[f], new(string))
			})
		case f == recKinesis:
			return l.leaf(i, n, "kinesis", new(events.KinesisRecord))
		}
		return l.leaf(i, n, "", nil)
	})
}
