package enrich

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// RecordError is a record of the batch that can be neither applied nor
// enriched: it names the record (its Kinesis sequence number) and the field.
// The handler sets such a record aside and goes on.
type RecordError struct {
	SequenceNumber string
	Field          string
	Reason         string
	// Kind is the setaside category (setaside.KindUnparseable, ...).
	Kind string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("record %s: field %s: %s", e.SequenceNumber, e.Field, e.Reason)
}

// MaxImageBytes bounds a profile image (compact JSON) the join keeps: a
// changelog record with a bigger one is set aside (kind state-budget) and
// the key keeps its previous version. Two images of this size and their
// entries fit in a key item's budget (keyItemBudget), so a batch always
// makes progress (see the package doc).
const MaxImageBytes = 128 << 10

// parsed is one record of a batch, decoded.
type parsed struct {
	rec    *events.KinesisEventRecord // as delivered
	idx    int                        // in the batch
	seq    string                     // fenced
	rawSeq string
	key    string
	env    stream.Envelope
	// isChange marks a changelog record; ch is then its change.
	isChange bool
	ch       change
}

// changelogData is the part of cdc.Data the join reads; the image stays raw
// so the enriched record carries it byte for byte (compacted).
type changelogData struct {
	Key     *string         `json:"key"`
	Version json.RawMessage `json:"version"`
	Image   json.RawMessage `json:"image"`
}

// parse decodes one Kinesis record. Errors are *RecordError.
func parse(rec *events.KinesisEventRecord) (parsed, error) {
	seq := rec.Kinesis.SequenceNumber
	fenced, err := state.Fence(seq)
	if err != nil {
		return parsed{}, &RecordError{SequenceNumber: seq, Field: "kinesis.sequenceNumber", Reason: err.Error(), Kind: setaside.KindInvalid}
	}
	p := parsed{rec: rec, seq: fenced, rawSeq: seq}
	if err := stream.DecodeKinesis(rec, &p.env); err != nil {
		pe, ok := err.(*stream.PoisonRecordError)
		// As the other consumers file it: unparseable when no field is
		// at fault (not JSON, not an object), else invalid, naming it.
		// The reason is the whole error, naming the record and the field
		// as theirs do ("record 7: field key: holds control character …").
		// No field for a record that is no envelope: "data" would name
		// the envelope's data field, which is not at fault.
		field, kind := "", setaside.KindUnparseable
		if ok && pe.Field != "" {
			field, kind = pe.Field, setaside.KindInvalid
		}
		return parsed{}, &RecordError{SequenceNumber: seq, Field: field, Reason: err.Error(), Kind: kind}
	}
	p.key = p.env.Key
	if !cdc.IsChangelogType(p.env.Type) {
		return p, nil
	}
	bad := func(field, format string, args ...any) error {
		return &RecordError{SequenceNumber: seq, Field: field, Kind: setaside.KindInvalid,
			Reason: fmt.Sprintf("%s record (a type only cdc writes, from the profiles table; a producer cannot send it): %s ", p.env.Type, field) + fmt.Sprintf(format, args...)}
	}
	var d changelogData
	// The strict reader: "Version" beside "version", which encoding/json
	// would take case-blind (the last one winning), is refused naming it.
	if err := strictjson.Decode(p.env.Data, &d, strictjson.Options{AllowUnknown: true, MaxBytes: max(len(p.env.Data), 1), Name: "data"}); err != nil {
		field, reason := "data", err.Error()
		var se *strictjson.Error
		if errors.As(err, &se) {
			field, reason = strictjson.JoinPath("data", se.Path), se.Reason
		}
		return parsed{}, bad(field, "does not read as a changelog record's data: %s", strictjson.Cut(reason, maxEcho))
	}
	switch {
	case d.Key == nil || *d.Key == "":
		return parsed{}, bad("data.key", "is required")
	case *d.Key != p.env.Key:
		return parsed{}, bad("data.key", "%s differs from the envelope key %q", strictjson.QuoteCut(*d.Key, maxEcho), p.env.Key)
	}
	version, err := parseVersion(d.Version)
	if err != nil {
		return parsed{}, bad("data.version", "%v", err)
	}
	if !cdc.IsChangeID(p.env.ID, p.env.Key, version) {
		return parsed{}, bad("id", "%s is not the id cdc gives version %s of key %q (<table>/<key>/<version>): a record of this type written to the stream by anything but cdc would set the profile's version",
			strictjson.QuoteCut(p.env.ID, maxEcho), version, strictjson.Cut(p.env.Key, maxEcho))
	}
	var image json.RawMessage
	if t := bytes.TrimSpace(d.Image); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if t[0] != '{' {
			return parsed{}, bad("data.image", "must be an object or null")
		}
		var b bytes.Buffer
		if err := json.Compact(&b, t); err != nil {
			return parsed{}, bad("data.image", "%v", err)
		}
		image = b.Bytes()
	}
	if p.env.Type == cdc.TypeDeleted && image != nil {
		return parsed{}, bad("data.image", "a deletion must carry a null image")
	}
	if p.env.Type != cdc.TypeDeleted && image == nil {
		return parsed{}, bad("data.image", "is required (null only in %s records)", cdc.TypeDeleted)
	}
	if len(image) > MaxImageBytes {
		return parsed{}, &RecordError{SequenceNumber: seq, Field: "data.image", Kind: setaside.KindStateBudget,
			Reason: fmt.Sprintf("%s record: the profile image is %d bytes as compact JSON; the join keeps images of at most %d (MaxImageBytes), so key %s keeps its previous version",
				p.env.Type, len(image), MaxImageBytes, p.key)}
	}
	p.isChange = true
	p.ch = change{seq: fenced, version: version, image: image}
	return p, nil
}

// maxEcho bounds how much of a value a reason repeats.
const maxEcho = 64

// parseVersion accepts a non-negative integer as a JSON number or string
// and returns it in decimal without leading zeros.
func parseVersion(raw json.RawMessage) (string, error) {
	t := strings.TrimSpace(string(raw))
	if t == "" || t == "null" {
		return "", fmt.Errorf("is required")
	}
	if strings.HasPrefix(t, `"`) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%s is not a valid string", strictjson.Cut(t, maxEcho))
		}
		t = s
	}
	if t == "" || len(t) > 64 || strings.Trim(t, "0123456789") != "" {
		return "", fmt.Errorf("%s is not a non-negative integer (at most 64 digits)", strictjson.Cut(t, maxEcho))
	}
	if t = strings.TrimLeft(t, "0"); t == "" {
		t = "0"
	}
	return t, nil
}

// shardOf is the shard of a Lambda Kinesis record: its eventID is
// "<shardId>:<sequenceNumber>".
func shardOf(rec *events.KinesisEventRecord) (string, error) {
	shard, _, ok := strings.Cut(rec.EventID, ":")
	if !ok || shard == "" {
		return "", &RecordError{SequenceNumber: rec.Kinesis.SequenceNumber, Field: "eventID", Kind: setaside.KindInvalid,
			Reason: fmt.Sprintf("%q is not <shardId>:<sequenceNumber> as Lambda sends it", rec.EventID)}
	}
	return shard, nil
}
