package stream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// KinesisBatch is one Lambda Kinesis event, decoded from the bytes the
// runtime hands the function in one pass: a plain Kinesis event (what
// events.KinesisEvent holds) or, when it has a window, a tumbling-window
// event (events.KinesisTimeWindowEvent). Decode it with Decode and reuse it:
// its record slice and the arena holding the records' data are kept from
// one call to the next.
type KinesisBatch struct {
	// Records are the event's records in stream order.
	Records []KinesisRecord
	// TimeWindow is true for a tumbling-window event: one whose "window" is
	// present and not null, the test the aggregate function has always used.
	// The embedded properties are set only then (zero otherwise, as decoding
	// into events.KinesisEvent leaves them). State's map is reused by the
	// next Decode.
	TimeWindow bool
	events.TimeWindowProperties

	text  []byte            // the batch's strings and the records' data; the strings become one string at the end
	spans []recordSpans     // where each record's strings are in text
	state []stateEntry      // the window state's entries, in document order
	own   map[string]string // State's map, reused
	dirty int               // Records[:dirty] may hold a past batch's strings and data
}

// KinesisRecord is one record of a KinesisBatch: aws-lambda-go's
// events.KinesisEventRecord flattened, with the same values.
//
// The strings of a batch share one allocation (with a copy of the batch's
// data, for DecodeEnvelope), so holding on to one keeps all of that alive:
// clone a string kept for long. Data lives in a buffer the batch reuses: it
// is valid until the next Decode on the same batch and must not be
// modified; copy what must outlive it.
type KinesisRecord struct {
	EventID        string // "shardId-000000000000:<sequence number>"
	EventSourceARN string
	PartitionKey   string
	SequenceNumber string // decimal; compare with CompareSequence
	// ApproximateArrivalTimestamp is when Kinesis accepted the record, as
	// events.SecondsEpochTime decodes it (seconds with a fraction, local
	// time zone).
	ApproximateArrivalTimestamp time.Time
	KinesisSchemaVersion        string
	Data                        []byte // base64-decoded
	EncryptionType              string
	AWSRegion                   string
	EventName                   string
	EventSource                 string
	EventVersion                string
	InvokeIdentityARN           string

	dataText string // Data's bytes as a string ("" when not decoded by the single pass)
}

// KinesisEventError is a Lambda Kinesis event that cannot be decoded. It
// names where: Record is the index in Records of the record holding the
// bad value (-1 for the event's own fields or the document as a whole) and
// Field the value's JSON path within that record or the event
// ("kinesis.data", "window.start"; "" for the whole record or document).
type KinesisEventError struct {
	Record int
	Field  string
	Err    error
}

func (e *KinesisEventError) Error() string {
	var where string
	switch {
	case e.Record >= 0 && e.Field != "":
		where = "Records[" + strconv.Itoa(e.Record) + "]." + e.Field + ": "
	case e.Record >= 0:
		where = "Records[" + strconv.Itoa(e.Record) + "]: "
	case e.Field != "":
		where = e.Field + ": "
	}
	return "kinesis event: " + where + e.Err.Error()
}

func (e *KinesisEventError) Unwrap() error { return e.Err }

// Decode replaces b's contents with the Lambda Kinesis event in raw. The
// result is what encoding/json gives decoding raw into
// events.KinesisTimeWindowEvent when raw has a window that is not null and
// into events.KinesisEvent otherwise, and raw fails exactly when that does;
// the error is a *KinesisEventError naming the record and field, or an
// *EventShapeError when raw is not a JSON object (CheckEventObject).
//
// Decode reads raw once, in a single pass for events shaped as Lambda
// sends them (escapes, unusual keys and nulls included); what that pass is
// not sure of (a record array given twice, values of the wrong type, JSON
// errors) is decoded with encoding/json and aws-lambda-go's types instead.
// raw is not kept.
func (b *KinesisBatch) Decode(raw []byte) error {
	b.reset()
	if err := CheckEventObject(raw, EventKinesis); err != nil {
		return err
	}
	// The strings and data of an event take less room than its JSON (but
	// for invalid UTF-8, which may grow; text then moves, harmlessly).
	if cap(b.text) < len(raw) {
		b.text = make([]byte, 0, len(raw))
	}
	var err error
	if !b.decodeFast(raw) {
		b.dirty = max(b.dirty, len(b.Records))
		err = b.decodeSlow(raw)
	}
	// Let go of the strings and data of records past this batch's end.
	if n := min(b.dirty, cap(b.Records)); n > len(b.Records) {
		clear(b.Records[len(b.Records):n])
	}
	b.dirty = len(b.Records)
	return err
}

func (b *KinesisBatch) reset() {
	b.Records = b.Records[:0]
	b.TimeWindow = false
	b.TimeWindowProperties = events.TimeWindowProperties{}
	b.text = b.text[:0]
	b.spans = b.spans[:0]
	b.state = b.state[:0]
}

// KinesisEvent returns b as aws-lambda-go's type (records share b's data).
func (b *KinesisBatch) KinesisEvent() events.KinesisEvent {
	ev := events.KinesisEvent{Records: make([]events.KinesisEventRecord, len(b.Records))}
	for i := range b.Records {
		ev.Records[i] = b.Records[i].EventRecord()
	}
	return ev
}

// KinesisTimeWindowEvent returns b as aws-lambda-go's tumbling-window type
// (records share b's data).
func (b *KinesisBatch) KinesisTimeWindowEvent() events.KinesisTimeWindowEvent {
	return events.KinesisTimeWindowEvent{KinesisEvent: b.KinesisEvent(), TimeWindowProperties: b.TimeWindowProperties}
}

// EventRecord returns r as aws-lambda-go's type (sharing r's data).
func (r *KinesisRecord) EventRecord() events.KinesisEventRecord {
	return events.KinesisEventRecord{
		AwsRegion: r.AWSRegion, EventID: r.EventID, EventName: r.EventName, EventSource: r.EventSource,
		EventSourceArn: r.EventSourceARN, EventVersion: r.EventVersion, InvokeIdentityArn: r.InvokeIdentityARN,
		Kinesis: events.KinesisRecord{
			ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: r.ApproximateArrivalTimestamp},
			Data:                        r.Data, EncryptionType: r.EncryptionType, PartitionKey: r.PartitionKey,
			SequenceNumber: r.SequenceNumber, KinesisSchemaVersion: r.KinesisSchemaVersion,
		},
	}
}

func (r *KinesisRecord) setFrom(ev *events.KinesisEventRecord) {
	*r = KinesisRecord{
		EventID: ev.EventID, EventSourceARN: ev.EventSourceArn, PartitionKey: ev.Kinesis.PartitionKey,
		SequenceNumber:              ev.Kinesis.SequenceNumber,
		ApproximateArrivalTimestamp: ev.Kinesis.ApproximateArrivalTimestamp.Time,
		KinesisSchemaVersion:        ev.Kinesis.KinesisSchemaVersion, Data: ev.Kinesis.Data,
		EncryptionType: ev.Kinesis.EncryptionType, AWSRegion: ev.AwsRegion, EventName: ev.EventName,
		EventSource: ev.EventSource, EventVersion: ev.EventVersion, InvokeIdentityARN: ev.InvokeIdentityArn,
	}
}

// ---- the single pass ------------------------------------------------------

// JSON names of the event's fields, as aws-lambda-go's struct tags spell
// them; keys match them as encoding/json matches keys to fields (exactly,
// else case-insensitively).
var (
	topNames     = []string{"Records", "window", "state", "shardId", "eventSourceARN", "isFinalInvokeForWindow", "isWindowTerminatedEarly"}
	recordNames  = []string{"awsRegion", "eventID", "eventName", "eventSource", "eventSourceARN", "eventVersion", "invokeIdentityArn", "kinesis"}
	kinesisNames = []string{"approximateArrivalTimestamp", "data", "encryptionType", "partitionKey", "sequenceNumber", "kinesisSchemaVersion"}
	windowNames  = []string{"start", "end"}
)

// Indexes into topNames.
const (
	topRecords = iota
	topWindow
	topState
	topShardID
	topEventSourceARN
	topFinal
	topTerminated
)

// Indexes into recordNames and kinesisNames.
const (
	recKinesis = 7
	kinTime    = 0
	kinData    = 1
	kinText    = 2 // kinesisNames[2:] are strings
)

// A record's strings, by position in recordSpans: recordNames[:7] first,
// then kinesisNames[2:].
const (
	txtEventID        = 1
	txtEventSourceARN = 4
	txtKinesis        = 7              // + index in kinesisNames - kinText
	txtData           = txtKinesis + 4 // the record's data, decoded
	numTexts          = txtData + 1
)

// span is a string in KinesisBatch.text. plain says its bytes are a JSON
// string's contents as they are (printable ASCII, no quote or backslash).
type span struct {
	off, end int
	plain    bool
}

type recordSpans [numTexts]span

var noSpans recordSpans // never written

type stateEntry struct{ key, value span }

// topScan is what the pass learned about the event's own fields; the
// window properties matter only if the event turns out to have a window.
type topScan struct {
	records   bool // Records was seen
	window    bool // window was seen; its last value was not null
	propsBad  bool // a window property would fail to decode
	stateSet  bool // state is a map (not null or absent)
	shardID   span
	sourceARN span
}

// decodeFast decodes raw into b in one pass; false means it did not (b is
// left for decodeSlow to reset and fill).
func (b *KinesisBatch) decodeFast(d []byte) bool {
	var top topScan
	i := skipSpace(d, 0)
	if i >= len(d) || d[i] != '{' {
		return false
	}
	if i = skipSpace(d, i+1); i < len(d) && d[i] == '}' {
		i++
	} else {
		for {
			var field int
			if i, field = memberKey(d, i, topNames); i < 0 {
				return false
			}
			switch field {
			case topRecords:
				if top.records {
					// A second array decodes into the first one's elements:
					// leave that to encoding/json.
					return false
				}
				top.records = true
				i = b.scanRecords(d, i)
			case topWindow:
				i = b.scanWindow(d, i, &top)
			case topState:
				i = b.scanState(d, i, &top)
			case topShardID, topEventSourceARN:
				sp := &top.shardID
				if field == topEventSourceARN {
					sp = &top.sourceARN
				}
				var ok bool
				if i, ok = b.textValue(d, i, sp, span{}); !ok {
					top.propsBad = true
					i = skipValue(d, i)
				}
			case topFinal, topTerminated:
				p := &b.IsFinalInvokeForWindow
				if field == topTerminated {
					p = &b.IsWindowTerminatedEarly
				}
				switch {
				case hasLiteral(d, i, "true"):
					*p, i = true, i+len("true")
				case hasLiteral(d, i, "false"):
					*p, i = false, i+len("false")
				case hasLiteral(d, i, "null"):
					i += len("null")
				default:
					top.propsBad = true
					i = skipValue(d, i)
				}
			default:
				i = skipValue(d, i)
			}
			if i < 0 {
				return false
			}
			var more bool
			if i, more = nextMember(d, i); i < 0 {
				return false
			}
			if !more {
				break
			}
		}
	}
	if skipSpace(d, i) != len(d) {
		return false
	}

	if top.window {
		if top.propsBad {
			return false // encoding/json's error
		}
		b.TimeWindow = true
	}
	b.finish(&top)
	return true
}

// memberKey reads `"key" :` at d[i] (the start of a member) and returns the
// index of its value and the key's index in names (len(names): unknown).
func memberKey(d []byte, i int, names []string) (int, int) {
	if i >= len(d) || d[i] != '"' {
		return -1, 0
	}
	ks := i + 1
	field := -1
	// Keys as Lambda writes them are a name and its closing quote.
	for f, name := range names {
		if e := ks + len(name); e < len(d) && d[e] == '"' && string(d[ks:e]) == name {
			field, i = f, e+1
			break
		}
	}
	if field < 0 {
		var flags uint8
		if i, flags = scanString(d, ks); i < 0 {
			return -1, 0
		}
		field = lookupName(d[ks:i-1], flags, names)
	}
	if i = skipSpace(d, i); i >= len(d) || d[i] != ':' {
		return -1, 0
	}
	if i = skipSpace(d, i+1); i >= len(d) {
		return -1, 0
	}
	return i, field
}

// nextMember reads what follows a value in an object: a comma (more=true,
// i at the next member) or the closing brace (i just past it).
func nextMember(d []byte, i int) (int, bool) {
	if i = skipSpace(d, i); i >= len(d) {
		return -1, false
	}
	switch d[i] {
	case ',':
		return skipSpace(d, i+1), true
	case '}':
		return i + 1, false
	}
	return -1, false
}

// lookupName returns the index in names of the field the key k (the bytes
// between its quotes) selects, as encoding/json selects it: the unescaped
// key equal to a name, else equal to one under its case folding. len(names)
// means no field.
func lookupName(k []byte, flags uint8, names []string) int {
	var scratch [64]byte
	if flags&strEscape != 0 {
		k = appendUnquoted(scratch[:0], k)
		flags = 0
		for _, c := range k {
			if c >= 0x80 {
				flags = strNonASCII
				break
			}
		}
	}
	for f, name := range names {
		if string(k) == name {
			return f
		}
	}
	if flags&strNonASCII != 0 {
		// Only ſ and the Kelvin sign fold to ASCII letters; fold the key
		// as encoding/json does and compare.
		var folded [64]byte
		k = appendFoldedKey(folded[:0], k)
	}
	for f, name := range names {
		if asciiEqualFold(k, name) {
			return f
		}
	}
	return len(names)
}

// appendFoldedKey appends k folded as encoding/json folds keys: ASCII
// letters to upper case, every other rune to the smallest rune of its
// case-folding orbit (so ſ becomes S and the Kelvin sign K).
func appendFoldedKey(out, k []byte) []byte {
	for i := 0; i < len(k); {
		if c := k[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(k[i:])
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		out = utf8.AppendRune(out, r)
		i += n
	}
	return out
}

// scanRecords reads the Records value at d[i]: null or an array of records.
func (b *KinesisBatch) scanRecords(d []byte, i int) int {
	if hasLiteral(d, i, "null") {
		return i + len("null")
	}
	if d[i] != '[' {
		return -1
	}
	if i = skipSpace(d, i+1); i < len(d) && d[i] == ']' {
		return i + 1
	}
	for {
		if i >= len(d) {
			return -1
		}
		b.Records = append(b.Records, KinesisRecord{})
		b.spans = append(b.spans, recordSpans{})
		switch {
		case d[i] == '{':
			i = b.scanRecord(d, i, len(b.Records)-1)
		case hasLiteral(d, i, "null"):
			i += len("null") // a zero record
		default:
			return -1
		}
		if i < 0 {
			return -1
		}
		if i = skipSpace(d, i); i >= len(d) {
			return -1
		}
		switch d[i] {
		case ',':
			i = skipSpace(d, i+1)
		case ']':
			return i + 1
		default:
			return -1
		}
	}
}

// prevSpans is the previous record's strings (zero spans for the first):
// a string equal to the previous record's shares its bytes.
func (b *KinesisBatch) prevSpans(n int) *recordSpans {
	if n == 0 {
		return &noSpans
	}
	return &b.spans[n-1]
}

// scanRecord reads the record object at d[i] into Records[n].
func (b *KinesisBatch) scanRecord(d []byte, i, n int) int {
	rec, sp, prev := &b.Records[n], &b.spans[n], b.prevSpans(n)
	if i = skipSpace(d, i+1); i < len(d) && d[i] == '}' {
		return i + 1
	}
	for {
		var field int
		if i, field = memberKey(d, i, recordNames); i < 0 {
			return -1
		}
		switch {
		case field < recKinesis:
			var ok bool
			if i, ok = b.textValue(d, i, &sp[field], prev[field]); !ok {
				return -1
			}
		case field == recKinesis:
			switch {
			case d[i] == '{':
				i = b.scanKinesis(d, i, rec, sp, prev)
			case hasLiteral(d, i, "null"):
				i += len("null")
			default:
				return -1
			}
		default:
			i = skipValue(d, i)
		}
		if i < 0 {
			return -1
		}
		var more bool
		if i, more = nextMember(d, i); i < 0 || !more {
			return i
		}
	}
}

// scanKinesis reads a record's kinesis object at d[i].
func (b *KinesisBatch) scanKinesis(d []byte, i int, rec *KinesisRecord, sp, prev *recordSpans) int {
	if i = skipSpace(d, i+1); i < len(d) && d[i] == '}' {
		return i + 1
	}
	for {
		var field int
		if i, field = memberKey(d, i, kinesisNames); i < 0 {
			return -1
		}
		switch {
		case field == kinTime:
			i = scanArrival(d, i, &rec.ApproximateArrivalTimestamp)
		case field == kinData:
			i = b.scanData(d, i, &rec.Data, &sp[txtData])
		case field < len(kinesisNames):
			t := txtKinesis + field - kinText
			var ok bool
			if i, ok = b.textValue(d, i, &sp[t], prev[t]); !ok {
				return -1
			}
		default:
			i = skipValue(d, i)
		}
		if i < 0 {
			return -1
		}
		var more bool
		if i, more = nextMember(d, i); i < 0 || !more {
			return i
		}
	}
}

// textValue reads a string field's value at d[i] into *sp: a string, or
// null (which leaves the field as it was). ok=false for any other value
// (i unchanged). A string equal to prev's shares its bytes.
func (b *KinesisBatch) textValue(d []byte, i int, sp *span, prev span) (int, bool) {
	switch d[i] {
	case '"':
		s := i + 1
		// The same plain text as the previous record's, then the closing
		// quote: a JSON string with that value, no need to scan it.
		if prev.plain {
			if e := s + prev.end - prev.off; e < len(d) && d[e] == '"' && bytes.Equal(d[s:e], b.text[prev.off:prev.end]) {
				*sp = prev
				return e + 1, true
			}
		}
		e, flags := scanString(d, s)
		if e < 0 {
			return i, false
		}
		off := len(b.text)
		b.text = appendText(b.text, d, rawText{start: s, end: e - 1, flags: flags})
		if bytes.Equal(b.text[off:], b.text[prev.off:prev.end]) {
			b.text = b.text[:off]
			*sp = prev
			return e, true
		}
		*sp = span{off, len(b.text), flags == 0}
		return e, true
	case 'n':
		if hasLiteral(d, i, "null") {
			return i + len("null"), true
		}
	}
	return i, false
}

// emptyData is the data of a record whose data is "": empty, not nil, as
// encoding/json decodes it.
var emptyData = []byte{}

// scanData reads a record's data at d[i]: base64 text (decoded into text,
// as encoding/json decodes a []byte, *sp saying where) or null (nil).
func (b *KinesisBatch) scanData(d []byte, i int, data *[]byte, sp *span) int {
	if hasLiteral(d, i, "null") {
		*data, *sp = nil, span{}
		return i + len("null")
	}
	if d[i] != '"' {
		return -1 // an array of numbers also decodes into []byte: encoding/json's business
	}
	s := i + 1
	// Base64 text needs no scan as a JSON string: it ends at the first
	// quote, and if the bytes before it decode, they are all of the base64
	// alphabet (no escape, no control byte) or a raw CR or LF, which
	// base64 skips but JSON refuses.
	if q := bytes.IndexByte(d[s:], '"'); q >= 0 {
		if src := d[s : s+q]; bytes.IndexByte(src, '\n') < 0 && bytes.IndexByte(src, '\r') < 0 {
			if e := b.decodeData(src, data, sp); e {
				return s + q + 1
			}
		}
	}
	e, flags := scanString(d, s)
	if e < 0 {
		return -1
	}
	src := d[s : e-1]
	if flags != 0 {
		var scratch [256]byte
		src = appendUnquoted(scratch[:0], src)
	}
	if !b.decodeData(src, data, sp) {
		return -1
	}
	return e
}

// decodeData base64-decodes src onto text as *data (*sp says where); false
// if src is not base64 (text is as it was).
func (b *KinesisBatch) decodeData(src []byte, data *[]byte, sp *span) bool {
	if len(src) == 0 {
		*data, *sp = emptyData, span{}
		return true
	}
	// text only grows within a batch: records already decoded keep the
	// bytes they point to if it moves.
	off := len(b.text)
	max := base64.StdEncoding.DecodedLen(len(src))
	b.text = slices.Grow(b.text, max)
	n, err := base64.StdEncoding.Decode(b.text[off:off+max], src)
	if err != nil {
		return false
	}
	b.text = b.text[:off+n]
	*data = b.text[off : off+n : off+n]
	*sp = span{off: off, end: off + n}
	return true
}

// scanArrival reads approximateArrivalTimestamp at d[i] as
// events.SecondsEpochTime decodes it: a number of seconds (null is 0).
func scanArrival(d []byte, i int, t *time.Time) int {
	var epoch float64
	if hasLiteral(d, i, "null") {
		i += len("null")
	} else {
		e := skipNumber(d, i)
		if e < 0 {
			return -1
		}
		f, err := strconv.ParseFloat(string(d[i:e]), 64)
		if err != nil {
			return -1
		}
		epoch, i = f, e
	}
	// aws-lambda-go's SecondsEpochTime.UnmarshalJSON, to the bit.
	epochSec := int64(epoch)
	epochNano := int64((epoch - float64(epochSec)) * float64(1000000000))
	*t = time.Unix(epochSec, epochNano)
	return i
}

// scanWindow reads the window value at d[i]: null, or an object with start
// and end. Each time is parsed where it stands: in an event with a window,
// encoding/json parses every one (and fails on the first bad one); in one
// without, none.
func (b *KinesisBatch) scanWindow(d []byte, i int, top *topScan) int {
	if hasLiteral(d, i, "null") {
		top.window = false
		return i + len("null")
	}
	top.window = true
	if d[i] != '{' {
		top.propsBad = true
		return skipValue(d, i)
	}
	if i = skipSpace(d, i+1); i < len(d) && d[i] == '}' {
		return i + 1
	}
	for {
		var field int
		if i, field = memberKey(d, i, windowNames); i < 0 {
			return -1
		}
		switch {
		case field == len(windowNames):
			i = skipValue(d, i)
		case d[i] != '"':
			top.propsBad = true // null too: RFC3339EpochTime parses "" and fails
			i = skipValue(d, i)
		default:
			s := i + 1
			e, flags := scanString(d, s)
			if e < 0 {
				return -1
			}
			var scratch [64]byte
			t, err := time.Parse(time.RFC3339, string(appendText(scratch[:0], d, rawText{start: s, end: e - 1, flags: flags})))
			if err != nil {
				top.propsBad = true
			}
			if field == 0 {
				b.Window.Start.Time = t
			} else {
				b.Window.End.Time = t
			}
			i = e
		}
		if i < 0 {
			return -1
		}
		var more bool
		if i, more = nextMember(d, i); i < 0 || !more {
			return i
		}
	}
}

// scanState reads the state value at d[i]: null or an object of strings.
func (b *KinesisBatch) scanState(d []byte, i int, top *topScan) int {
	if hasLiteral(d, i, "null") {
		top.stateSet = false
		b.state = b.state[:0]
		return i + len("null")
	}
	if d[i] != '{' {
		top.propsBad = true
		return skipValue(d, i)
	}
	top.stateSet = true // a second state object adds to the first's map
	if i = skipSpace(d, i+1); i < len(d) && d[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return -1
		}
		ks := i + 1
		ke, kflags := scanString(d, ks)
		if ke < 0 {
			return -1
		}
		if i = skipSpace(d, ke); i >= len(d) || d[i] != ':' {
			return -1
		}
		if i = skipSpace(d, i+1); i >= len(d) {
			return -1
		}
		off := len(b.text)
		b.text = appendText(b.text, d, rawText{start: ks, end: ke - 1, flags: kflags})
		entry := stateEntry{key: span{off: off, end: len(b.text)}}
		var ok bool
		if i, ok = b.textValue(d, i, &entry.value, span{}); !ok {
			top.propsBad = true
			i = skipValue(d, i)
		}
		b.state = append(b.state, entry)
		if i < 0 {
			return -1
		}
		var more bool
		if i, more = nextMember(d, i); i < 0 || !more {
			return i
		}
	}
}

// finish turns the spans into strings: one allocation for the batch.
func (b *KinesisBatch) finish(top *topScan) {
	all := string(b.text)
	str := func(s span) string { return all[s.off:s.end] }
	for n := range b.Records {
		r, sp := &b.Records[n], &b.spans[n]
		r.AWSRegion, r.EventID, r.EventName = str(sp[0]), str(sp[txtEventID]), str(sp[2])
		r.EventSource, r.EventSourceARN, r.EventVersion = str(sp[3]), str(sp[txtEventSourceARN]), str(sp[5])
		r.InvokeIdentityARN = str(sp[6])
		r.EncryptionType, r.PartitionKey = str(sp[txtKinesis]), str(sp[txtKinesis+1])
		r.SequenceNumber, r.KinesisSchemaVersion = str(sp[txtKinesis+2]), str(sp[txtKinesis+3])
		r.dataText = str(sp[txtData])
	}
	if !b.TimeWindow {
		b.TimeWindowProperties = events.TimeWindowProperties{}
		return
	}
	b.ShardID, b.EventSourceARN = str(top.shardID), str(top.sourceARN)
	if top.stateSet {
		if b.own == nil {
			b.own = make(map[string]string, len(b.state))
		}
		clear(b.own)
		for _, e := range b.state {
			b.own[str(e.key)] = str(e.value)
		}
		b.State = b.own
	}
}

// ---- everything else: encoding/json ---------------------------------------

// decodeSlow decodes raw as the aggregate function always has: a probe for
// the window, then encoding/json into aws-lambda-go's type.
func (b *KinesisBatch) decodeSlow(raw []byte) error {
	b.reset()
	var probe struct {
		Window json.RawMessage `json:"window"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return locateError(raw, false, err)
	}
	var records []events.KinesisEventRecord
	if len(probe.Window) > 0 && string(probe.Window) != "null" {
		var ev events.KinesisTimeWindowEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return locateError(raw, true, err)
		}
		records = ev.Records
		b.TimeWindow, b.TimeWindowProperties = true, ev.TimeWindowProperties
	} else {
		var ev events.KinesisEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return locateError(raw, false, err)
		}
		records = ev.Records
	}
	b.Records = slices.Grow(b.Records, len(records))[:len(records)]
	for i := range records {
		b.Records[i].setFrom(&records[i])
	}
	return nil
}

// RecordFromEvent returns aws-lambda-go's record as a KinesisRecord (sharing
// its data), for handlers that take events.KinesisEvent values.
func RecordFromEvent(ev *events.KinesisEventRecord) KinesisRecord {
	var r KinesisRecord
	r.setFrom(ev)
	return r
}
