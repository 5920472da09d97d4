package archive

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Prefix is where every stream's archive is kept in the bucket:
// Prefix + <stream> + "/".
const Prefix = "archive/"

// Record is one archived Kinesis record: what a replay needs to hand it to a
// consumer as Lambda did, and to place it against the stream.
type Record struct {
	Shard string `json:"shard"`
	// Seq is the record's sequence number on Shard.
	Seq string `json:"seq"`
	// Arrival is the record's ApproximateArrivalTimestamp.
	Arrival time.Time `json:"arrival"`
	// Key is the record's partition key.
	Key string `json:"key"`
	// Data is the record's data, as put (base64 in the JSON line).
	Data []byte `json:"data"`
}

// Limits on what the reader accepts, so that a corrupt or hostile object
// cannot take all memory: at most what the archiver writes of one batch
// (Lambda hands at most 10000 records and 6 MB of them to a function, which
// base64 and the fields make about 8 MB).
const (
	maxObjectRecords = 10000
	maxObjectBytes   = 64 << 20
)

// StreamPrefix is the prefix of stream's objects.
func StreamPrefix(streamName string) string { return Prefix + streamName + "/" }

// HourPrefix is the prefix of stream's objects whose first record arrived in
// the hour of t (UTC).
func HourPrefix(streamName string, t time.Time) string {
	return StreamPrefix(streamName) + t.UTC().Format("dt=2006-01-02/hh=15") + "/"
}

// Key is the name of the object holding recs (of one shard, in order, the
// first one's arrival hour naming the partition), with no link: what the
// archiver wrote before it kept a chain, and writes for the first object
// of a shard's chain.
func Key(streamName string, recs []Record) string {
	return ChainedKey(streamName, recs, Link{})
}

// Link is what an object's name says of the record the archiver was handed
// just before the object's first one, on the same shard: its sequence
// number and the hour it arrived in (which names the object holding it:
// the archiver files each record under its own arrival hour). The zero
// Link is unknown: an object written before the archiver kept a chain, or
// the first of a shard's chain (a new shard, or its chain head was lost).
type Link struct {
	Seq  string
	Hour time.Time
}

// linkOf is the link to rec.
func linkOf(rec Record) Link { return Link{Seq: rec.Seq, Hour: rec.Arrival.UTC().Truncate(time.Hour)} }

// hourLayout is how a link's hour is written in a key.
const hourLayout = "2006-01-02T15"

// ChainedKey is the name of the object holding recs whose link is after:
// <shard>-<first>-<last>.after-<hour>-<seq>.jsonl.gz, or Key's name if
// after is unknown. A retried batch writes the same name again (its link
// is the same: the archiver's chain head remembers it).
func ChainedKey(streamName string, recs []Record, after Link) string {
	first, last := recs[0], recs[len(recs)-1]
	link := ""
	if after.Seq != "" {
		link = ".after-" + after.Hour.UTC().Format(hourLayout) + "-" + after.Seq
	}
	return HourPrefix(streamName, first.Arrival) + first.Shard + "-" + first.Seq + "-" + last.Seq + link + ".jsonl.gz"
}

// ObjectName is what a key says about its object.
type ObjectName struct {
	Key         string
	Hour        time.Time
	Shard       string
	First, Last string
	// After links the object to the record before First (zero: unknown).
	After Link
}

var keyRE = regexp.MustCompile(`/dt=(\d{4}-\d{2}-\d{2})/hh=(\d{2})/(shardId-[0-9A-Za-z_.-]+?)-(\d{1,128})-(\d{1,128})(?:\.after-(\d{4}-\d{2}-\d{2}T\d{2})-(\d{1,128}))?\.jsonl\.gz$`)

// ParseKey reads an object's key; false if it is not an archive object's.
func ParseKey(key string) (ObjectName, bool) {
	m := keyRE.FindStringSubmatch(key)
	if m == nil {
		return ObjectName{}, false
	}
	hour, err := time.Parse("2006-01-02 15", m[1]+" "+m[2])
	if err != nil || stream.CompareSequence(m[4], m[5]) > 0 {
		return ObjectName{}, false
	}
	n := ObjectName{Key: key, Hour: hour, Shard: m[3], First: m[4], Last: m[5]}
	if m[7] != "" {
		at, err := time.Parse(hourLayout, m[6])
		if err != nil || stream.CompareSequence(m[7], m[4]) >= 0 {
			return ObjectName{}, false
		}
		n.After = Link{Seq: m[7], Hour: at}
	}
	return n, true
}

// Encode writes recs as one gzip'd JSON-lines object.
func Encode(recs []Record) ([]byte, error) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	enc := json.NewEncoder(zw)
	for i := range recs {
		if err := enc.Encode(&recs[i]); err != nil {
			return nil, fmt.Errorf("record %s of %s: %w", recs[i].Seq, recs[i].Shard, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ObjectError is an archive object that could not be read or is not what
// the archiver writes. Key names it.
type ObjectError struct {
	Key    string
	Reason string
	Err    error
}

func (e *ObjectError) Error() string {
	s := "archive object " + e.Key + ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (e *ObjectError) Unwrap() error { return e.Err }

// Decode reads the object name from r and checks every record against its
// name: the shard, sequence numbers from First to Last in increasing order.
func Decode(name ObjectName, r io.Reader) ([]Record, error) {
	bad := func(reason string, err error) error { return &ObjectError{Key: name.Key, Reason: reason, Err: err} }
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, bad("not gzip", err)
	}
	// The whole object first: a truncated one fails here, before any of its
	// lines is taken for a record.
	body, err := io.ReadAll(io.LimitReader(zr, maxObjectBytes+1))
	if err != nil {
		return nil, bad("truncated or corrupt", err)
	}
	if len(body) > maxObjectBytes {
		return nil, bad(fmt.Sprintf("more than %d bytes uncompressed", maxObjectBytes), nil)
	}
	var out []Record
	for line, b := range bytes.Split(body, []byte("\n")) {
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if len(out) == maxObjectRecords {
			return nil, bad(fmt.Sprintf("more than %d records", maxObjectRecords), nil)
		}
		// The one strict reader, as for every input: a key twice, a name
		// in another case or a second value on the line is no record of
		// the archive's (it writes each line with encoding/json), so the
		// object was changed after it was written.
		var rec Record
		if err := strictjson.Decode(b, &rec, strictjson.Options{MaxBytes: len(b) + 1, Name: "line"}); err != nil {
			return nil, bad(fmt.Sprintf("line %d is not a record", line+1), err)
		}
		switch {
		case rec.Shard != name.Shard:
			return nil, bad(fmt.Sprintf("line %d: shard %q, but the name says %s", line+1, rec.Shard, name.Shard), nil)
		case !seqRE.MatchString(rec.Seq):
			return nil, bad(fmt.Sprintf("line %d: seq %q is not a sequence number", line+1, rec.Seq), nil)
		case stream.CompareSequence(rec.Seq, name.First) < 0 || stream.CompareSequence(rec.Seq, name.Last) > 0:
			return nil, bad(fmt.Sprintf("line %d: seq %s is outside the name's range %s-%s", line+1, rec.Seq, name.First, name.Last), nil)
		case len(out) > 0 && stream.CompareSequence(rec.Seq, out[len(out)-1].Seq) <= 0:
			return nil, bad(fmt.Sprintf("line %d: seq %s does not follow %s", line+1, rec.Seq, out[len(out)-1].Seq), nil)
		case rec.Arrival.IsZero():
			return nil, bad(fmt.Sprintf("line %d: arrival is missing", line+1), nil)
		}
		out = append(out, rec)
	}
	switch {
	case len(out) == 0:
		return nil, bad("holds no records", nil)
	case out[0].Seq != name.First || out[len(out)-1].Seq != name.Last:
		return nil, bad(fmt.Sprintf("holds %s-%s, but the name says %s-%s", out[0].Seq, out[len(out)-1].Seq, name.First, name.Last), nil)
	}
	return out, nil
}

var seqRE = regexp.MustCompile(`^\d{1,128}$`)

// shardOf is the shard of a Lambda Kinesis record's event id
// ("shardId-000000000000:4959…").
func shardOf(eventID string) (string, bool) {
	shard, _, ok := strings.Cut(eventID, ":")
	return shard, ok && strings.HasPrefix(shard, "shardId-")
}
