package setaside

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Item kinds (the kind attribute of the quarantine table).
const (
	// ItemSetAside is a record a function set aside itself.
	ItemSetAside = "set-aside"
	// ItemRecord is a record of a range Lambda gave up on, copied by
	// quarantine from its stream.
	ItemRecord = "record"
	// ItemMissing notes records of such a range that could not be read.
	ItemMissing = "missing"
	// ItemChunk holds a part of a record's data beyond the first.
	ItemChunk = "chunk"
)

// Retention is how long a record is kept (the TTL in expiresAt).
const Retention = 14 * 24 * time.Hour

// ChunkBytes is the most data one item holds. It leaves room in
// DynamoDB's 400 KB for the item's other attributes (bounded below), and
// fits stand-ins that count binary data by its base64 length (moto refuses
// items over 405,000 bytes so counted: 256 KiB is 349,528 in base64).
const ChunkBytes = 256 << 10

// MaxDataBytes bounds the data kept of one record (64 items); the records
// Lambda delivers are far smaller (a 6 MB invocation payload). Past it the
// data is kept truncated, with dataTruncated set and dataBytes the full
// size.
const MaxDataBytes = 64 * ChunkBytes

// Bounds of the other attributes, so that an item always fits: with every
// attribute at its bound and ChunkBytes of data (349,528 bytes as base64)
// an item is about 373,000 bytes, and about 395,000 with MaxFunctions
// entries at theirs, under DynamoDB's 400 KB and the stand-in's 405,000
// (TestBoundedItemFits holds every attribute to one of these).
const (
	maxSourceBytes   = 2048 // DynamoDB's partition key limit
	maxSequenceBytes = 1000 // DynamoDB's sort key limit is 1024; room for "#001"
	maxReasonBytes   = 4096
	maxTextBytes     = 1024 // kind, field, function, partition key, event id, ...
	// maxTimeBytes bounds the times kept as text (failedAt, setAsideAt,
	// approximateArrival...): RFC 3339 with nanoseconds and an offset is
	// 35 bytes.
	maxTimeBytes = 64
	// maxRedacted and maxRedactedBytes bound the list of fields removed as
	// personal data (a DynamoDB stream record has two images, so two
	// entries of about 26 bytes in practice); the reason repeats the list,
	// so it must fit well within maxReasonBytes.
	maxRedacted      = 8
	maxRedactedBytes = 256
)

// ErrUnwritable marks an item no write can ever store: no source or
// sequence number, a key over DynamoDB's limit, an item over 400 KB. A
// caller that gets it must not retry the same input: it sets the input
// aside (or reports it) instead.
var ErrUnwritable = errors.New("setaside: item can never be written")

// Item is one row of the quarantine table: a record set aside by a
// function (kind ItemSetAside), a record of a failed range (ItemRecord), a
// note that some records of a range could not be read (ItemMissing, sort
// key "<start>-<end>", no data), or a part of a record's data (ItemChunk).
type Item struct {
	Source         string `dynamodbav:"source"`
	SequenceNumber string `dynamodbav:"sequenceNumber"`
	Kind           string `dynamodbav:"kind"`
	// Data is the record's data, or its first ChunkBytes when DataChunks > 1
	// (Load reassembles it).
	Data []byte `dynamodbav:"data,omitempty"`
	// DataBytes is the full size of the record's data.
	DataBytes int `dynamodbav:"dataBytes,omitempty"`
	// DataChunks is how many items hold the data (this one and
	// DataChunks-1 chunk items), when more than one.
	DataChunks int `dynamodbav:"dataChunks,omitempty"`
	// ChunkOf is a chunk item's record's kind (ItemSetAside, ItemRecord),
	// so that a copy of a record never replaces the chunks of one set
	// aside (Keep); absent on chunks written before it was kept.
	ChunkOf string `dynamodbav:"chunkOf,omitempty"`
	// DataTruncated is set when the data was over MaxDataBytes (or, in
	// items written before chunking, over 350 KB) and only its start kept.
	DataTruncated      bool   `dynamodbav:"dataTruncated,omitempty"`
	PartitionKey       string `dynamodbav:"partitionKey,omitempty"`
	EventID            string `dynamodbav:"eventID,omitempty"`
	EventName          string `dynamodbav:"eventName,omitempty"`
	ApproximateArrival string `dynamodbav:"approximateArrival,omitempty"`

	// Function is the function that set the record aside (ItemSetAside).
	Function string `dynamodbav:"function,omitempty"`
	// Field names the field at fault ("" for the whole record).
	Field string `dynamodbav:"field,omitempty"`
	// Category is the record's Kind (KindUnparseable, ...).
	Category string `dynamodbav:"category,omitempty"`
	// Rule is what Field must hold for Function to read the record (see
	// Rule), when the function says.
	Rule *Rule `dynamodbav:"rule,omitempty"`
	// IDTaken is set when Function took the record's event id in its
	// dedupe ledger before it set the record aside (see Record.IDTaken).
	IDTaken bool `dynamodbav:"idTaken,omitempty"`
	// SetAsideAt is when the function set it aside (RFC 3339).
	SetAsideAt string `dynamodbav:"setAsideAt,omitempty"`
	// Functions keeps, by function name, what each function that set the
	// record aside said of it (Entry): a record of a stream several
	// functions consume may be set aside by more than one, each for its
	// own field. The attributes above are the last one's; SetAsides tells
	// each one's. Absent on items written before it was kept (their one
	// function is the attributes above) and for a function without a name.
	Functions map[string]Entry `dynamodbav:"functions,omitempty"`

	// Set on ItemRecord and ItemMissing items, from Lambda's on-failure
	// record.
	Condition     string `dynamodbav:"condition,omitempty"`
	FunctionError string `dynamodbav:"functionError,omitempty"` // absent when the function answered with batch item failures
	FunctionArn   string `dynamodbav:"functionArn,omitempty"`
	RequestID     string `dynamodbav:"requestId,omitempty"`
	FailedAt      string `dynamodbav:"failedAt,omitempty"`

	ExpiresAt int64 `dynamodbav:"expiresAt"`

	// Reason says why the record is here (every kind but ItemChunk), and
	// what was removed from its data (Redacted).
	Reason string `dynamodbav:"reason,omitempty"`
	// Redacted lists the fields removed from Data because they hold
	// personal data ("dynamodb.OldImage.personal"; see PersonalAttribute).
	Redacted []string `dynamodbav:"redacted,omitempty"`

	// Set on ItemMissing items.
	StartSequenceNumber             string `dynamodbav:"startSequenceNumber,omitempty"`
	EndSequenceNumber               string `dynamodbav:"endSequenceNumber,omitempty"`
	BatchSize                       int    `dynamodbav:"batchSize,omitempty"`
	RecordsFound                    *int   `dynamodbav:"recordsFound,omitempty"`
	ApproximateArrivalOfFirstRecord string `dynamodbav:"approximateArrivalOfFirstRecord,omitempty"`
	ApproximateArrivalOfLastRecord  string `dynamodbav:"approximateArrivalOfLastRecord,omitempty"`

	// Set by package putback when it puts the record back on its stream:
	// when (RFC 3339) and the sequence number the stream gave the copy.
	PutBackAt       string `dynamodbav:"putBackAt,omitempty"`
	PutBackSequence string `dynamodbav:"putBackSequence,omitempty"`
}

// ChunkKey is the sort key of the i-th chunk item (1-based) of the record
// with sort key seq.
func ChunkKey(seq string, i int) string { return fmt.Sprintf("%s#%03d", seq, i) }

// split returns it with its data cut to ChunkBytes (and its size and chunk
// count set) and the chunk items holding the rest. Data over MaxDataBytes
// is truncated first.
func split(it Item) (Item, []Item) {
	data := it.Data
	it.DataBytes = len(data)
	if len(data) > MaxDataBytes {
		data, it.DataTruncated = data[:MaxDataBytes], true
	}
	if len(data) <= ChunkBytes {
		it.Data, it.DataChunks = data, 0
		return it, nil
	}
	n := (len(data) + ChunkBytes - 1) / ChunkBytes
	it.Data, it.DataChunks = data[:ChunkBytes], n
	chunks := make([]Item, 0, n-1)
	for i := 1; i < n; i++ {
		chunks = append(chunks, Item{Source: it.Source, SequenceNumber: ChunkKey(it.SequenceNumber, i), Kind: ItemChunk, ChunkOf: it.Kind,
			Data: data[i*ChunkBytes : min((i+1)*ChunkBytes, len(data))], ExpiresAt: it.ExpiresAt})
	}
	return it, chunks
}

// bound keeps every attribute of the item within its limit, so that no
// caller can build an item DynamoDB refuses: free text is cut (marked
// "…(truncated)"), the keys are checked, not cut (a cut key would merge two
// records); a key out of bounds is ErrUnwritable. Data is bounded by split.
func (it *Item) bound() error {
	if it.Source == "" {
		return fmt.Errorf("%w: the record has no source (event source ARN)", ErrUnwritable)
	}
	if it.SequenceNumber == "" {
		return fmt.Errorf("%w: record of %s has no sequence number", ErrUnwritable, strictjson.QuoteCut(it.Source, 64))
	}
	if len(it.Source) > maxSourceBytes {
		return fmt.Errorf("%w: source %.64q... is %d bytes, over %d", ErrUnwritable, it.Source, len(it.Source), maxSourceBytes)
	}
	if len(it.SequenceNumber) > maxSequenceBytes {
		return fmt.Errorf("%w: sequence number %.64q... is %d bytes, over %d", ErrUnwritable, it.SequenceNumber, len(it.SequenceNumber), maxSequenceBytes)
	}
	if len(it.Redacted) > 0 {
		it.Redacted = boundList(it.Redacted, maxRedacted, maxRedactedBytes)
		if note := redactionNote(it.Redacted); !strings.HasSuffix(it.Reason, note) {
			it.Reason = truncate(it.Reason, maxReasonBytes-len(note)-1) + " " + note
		}
	}
	it.Reason = truncate(it.Reason, maxReasonBytes)
	if it.Rule != nil {
		if !it.Rule.storable() {
			it.Rule = nil // an aid to putting the record back, never a reason to lose it
		} else {
			rule := *it.Rule // the caller's is not changed
			rule.Holds = truncate(rule.Holds, maxTextBytes)
			it.Rule = &rule
		}
	}
	for _, s := range []*string{&it.Kind, &it.ChunkOf, &it.Field, &it.Function, &it.Category, &it.PartitionKey, &it.EventID, &it.EventName,
		&it.Condition, &it.FunctionError, &it.FunctionArn, &it.RequestID} {
		*s = truncate(*s, maxTextBytes)
	}
	for _, s := range []*string{&it.StartSequenceNumber, &it.EndSequenceNumber, &it.PutBackSequence} {
		*s = truncate(*s, maxSequenceBytes)
	}
	for _, s := range []*string{&it.ApproximateArrival, &it.SetAsideAt, &it.FailedAt, &it.PutBackAt,
		&it.ApproximateArrivalOfFirstRecord, &it.ApproximateArrivalOfLastRecord} {
		*s = truncate(*s, maxTimeBytes)
	}
	return nil
}

// boundList keeps at most n entries of list, each cut to size bytes; the
// last one kept says how many were left out. list is not changed.
func boundList(list []string, n, size int) []string {
	out := make([]string, 0, min(len(list), n))
	for i, s := range list {
		if i == n-1 && len(list) > n {
			out = append(out, fmt.Sprintf("…(%d more)", len(list)-i))
			break
		}
		out = append(out, truncate(s, size))
	}
	return out
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…(truncated)"
	if n < len(mark) {
		n = len(mark) // never cut below the mark (a negative cut would panic)
	}
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// item is the quarantine item of a set-aside record.
func (r *Record) item(function string, now time.Time) Item {
	it := Item{Source: r.source(), SequenceNumber: r.Sequence, Kind: ItemSetAside, Data: r.Data,
		PartitionKey: r.PartitionKey, EventID: r.EventID, EventName: r.EventName,
		Function: r.Function, Field: r.Field, Category: r.Kind, Rule: r.Rule, IDTaken: r.IDTaken, Reason: r.Reason, Redacted: r.Redacted,
		SetAsideAt: now.UTC().Format(time.RFC3339Nano), ExpiresAt: now.Add(Retention).Unix()}
	if it.Function == "" {
		it.Function = function
	}
	if !r.ArrivedAt.IsZero() {
		it.ApproximateArrival = r.ArrivedAt.UTC().Format(time.RFC3339Nano)
	}
	if strings.TrimSpace(it.Reason) == "" {
		it.Reason = "set aside without a reason"
	}
	return it
}
