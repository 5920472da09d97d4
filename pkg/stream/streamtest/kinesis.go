package streamtest

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// PayloadLimit is Lambda's limit on an invocation's payload, 6 MB
// (6,291,456 bytes): the largest event an event source mapping delivers.
const PayloadLimit = 6 << 20

// Names a deployed stack's records carry.
const (
	Region    = "us-east-1"
	StreamARN = "arn:aws:kinesis:us-east-1:123456789012:stream/Tributary-EventsStream1B2C3D4E-xQ7pZk9LmN2a"
	RoleARN   = "arn:aws:iam::123456789012:role/Tributary-AggregateFnServiceRoleA1B2C3D4-3KfG8hJ2mN5p"
	ShardID   = "shardId-000000000000"
)

// KinesisEvent describes an event to build.
type KinesisEvent struct {
	Records int       // how many records
	Keys    int       // distinct entity keys, cycled (0: 50)
	First   int       // index of the first record: sequence numbers and ids go on from there
	Start   time.Time // the first record's occurredAt (zero: 2026-11-29T10:41:00Z)
	// Spacing is the event time between records (0: 10ms).
	Spacing time.Duration

	// Window makes it a tumbling-window event; WindowStart/End default to
	// the minute around Start.
	Window            bool
	WindowStart       time.Time
	WindowEnd         time.Time
	State             map[string]string
	Final             bool
	TerminatedEarly   bool
	EventSourceARN    string // "" : StreamARN
	InvokeIdentityARN string // "": RoleARN
}

// Sequence is the sequence number of record i: 56 digits, as Kinesis
// numbers them.
func Sequence(i int) string {
	return "4960118965842235937883629852182763847532018901" + fmt.Sprintf("%010d", i+1)
}

// Envelope is the data of record i: the JSON ingest writes onto the stream.
func (e KinesisEvent) Envelope(i int) []byte {
	e = e.defaults()
	occurred := e.Start.Add(time.Duration(i) * e.Spacing)
	sent := occurred.Add(40 * time.Millisecond)
	received := sent.Add(112 * time.Millisecond)
	b := make([]byte, 0, 256)
	b = append(b, `{"id":"evt-`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `","type":"page_view","key":"`...)
	b = append(b, e.key(i)...)
	b = append(b, `","occurredAt":"`...)
	b = occurred.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, `","sentAt":"`...)
	b = sent.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, `","receivedAt":"`...)
	b = received.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, `","data":{"path":"/pricing","ms":`...)
	b = strconv.AppendInt(b, int64(100+i%900), 10)
	b = append(b, "}}"...)
	return b
}

func (e KinesisEvent) key(i int) string { return fmt.Sprintf("user-%04d", i%e.Keys) }

func (e KinesisEvent) defaults() KinesisEvent {
	if e.Keys <= 0 {
		e.Keys = 50
	}
	if e.Start.IsZero() {
		e.Start = time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)
	}
	if e.Spacing == 0 {
		e.Spacing = 10 * time.Millisecond
	}
	if e.EventSourceARN == "" {
		e.EventSourceARN = StreamARN
	}
	if e.InvokeIdentityARN == "" {
		e.InvokeIdentityARN = RoleARN
	}
	if e.Window && e.WindowStart.IsZero() {
		e.WindowStart = e.Start.Truncate(time.Minute)
		e.WindowEnd = e.WindowStart.Add(time.Minute)
	}
	return e
}

// JSON is the event as Lambda delivers it.
func (e KinesisEvent) JSON() []byte {
	e = e.defaults()
	b := make([]byte, 0, e.Records*900+512)
	b = append(b, `{"Records":[`...)
	for n := range e.Records {
		if n > 0 {
			b = append(b, ',')
		}
		b = e.appendRecord(b, e.First+n)
	}
	b = append(b, ']')
	if e.Window {
		b = append(b, `,"window":{"start":"`...)
		b = e.WindowStart.UTC().AppendFormat(b, time.RFC3339)
		b = append(b, `","end":"`...)
		b = e.WindowEnd.UTC().AppendFormat(b, time.RFC3339)
		b = append(b, `"},"state":{`...)
		keys := make([]string, 0, len(e.State))
		for k := range e.State {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for n, k := range keys {
			if n > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, k) // the state this package builds is ASCII
			b = append(b, ':')
			b = strconv.AppendQuote(b, e.State[k])
		}
		b = append(b, `},"shardId":"`+ShardID+`","eventSourceARN":"`...)
		b = append(b, e.EventSourceARN...)
		b = append(b, `","isFinalInvokeForWindow":`...)
		b = strconv.AppendBool(b, e.Final)
		b = append(b, `,"isWindowTerminatedEarly":`...)
		b = strconv.AppendBool(b, e.TerminatedEarly)
	}
	return append(b, '}')
}

func (e KinesisEvent) appendRecord(b []byte, i int) []byte {
	seq := Sequence(i)
	env := e.Envelope(i)
	arrival := e.Start.Add(time.Duration(i)*e.Spacing + 152*time.Millisecond)
	b = append(b, `{"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":"`...)
	b = append(b, e.key(i)...)
	b = append(b, `","sequenceNumber":"`...)
	b = append(b, seq...)
	b = append(b, `","data":"`...)
	b = base64.StdEncoding.AppendEncode(b, env)
	b = append(b, `","approximateArrivalTimestamp":`...)
	b = strconv.AppendInt(b, arrival.Unix(), 10)
	b = append(b, '.')
	b = append(b, fmt.Sprintf("%03d", arrival.Nanosecond()/1e6)...)
	b = append(b, `},"eventSource":"aws:kinesis","eventVersion":"1.0","eventID":"`+ShardID+`:`...)
	b = append(b, seq...)
	b = append(b, `","eventName":"aws:kinesis:record","invokeIdentityArn":"`...)
	b = append(b, e.InvokeIdentityARN...)
	b = append(b, `","awsRegion":"`+Region+`","eventSourceARN":"`...)
	b = append(b, e.EventSourceARN...)
	return append(b, `"}`...)
}

// MaxRecords is the largest number of records an event shaped as e (its
// Records ignored) can have within limit bytes.
func MaxRecords(e KinesisEvent, limit int) int {
	lo, hi := 0, 1
	for size(e, hi) <= limit {
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 { // size(lo) <= limit < size(hi)
		mid := (lo + hi) / 2
		if size(e, mid) <= limit {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

func size(e KinesisEvent, n int) int {
	e.Records = n
	return len(e.JSON())
}
