package cdc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/envvar"
	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Changelog record types.
const (
	TypeChanged  = "profile_changed"
	TypeDeleted  = "profile_deleted"
	TypeSnapshot = "profile_snapshot"
)

// IsChangelogType reports whether typ is one of the changelog's record
// types, which only this package (and the snapshot bootstrap) writes:
// enrich takes a record of one of them as the profile's new version, so
// ingest refuses them from producers.
func IsChangelogType(typ string) bool {
	return typ == TypeChanged || typ == TypeDeleted || typ == TypeSnapshot
}

// DefaultEntityKeyAttribute is the key attribute used when
// ENTITY_KEY_ATTRIBUTE is not set.
const DefaultEntityKeyAttribute = "userId"

// VersionAttribute is the number attribute the table's writer bumps on
// every write of an item.
const VersionAttribute = "version"

// maxPutRecords is Kinesis' limit of records per PutRecords call.
const maxPutRecords = limits.KinesisPutRecordsEntries

// recordPutter is the Kinesis call the handler makes.
type recordPutter interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

var _ recordPutter = (*kinesis.Client)(nil)

// Data is the data field of a changelog record.
type Data struct {
	// Key is the entity key (the record's partition key).
	Key string `json:"key"`
	// Version is the item's version (see the package doc).
	Version json.Number `json:"version"`
	// Image is the item as plain JSON; nil (null) for a tombstone.
	Image map[string]any `json:"image"`
	// SequenceNumber is the DynamoDB stream record's sequence number; empty
	// in a snapshot record.
	SequenceNumber string `json:"sequenceNumber,omitempty"`
	// SnapshotOf is the stream position a snapshot record is tied to; only
	// in snapshot records.
	SnapshotOf *Position `json:"snapshotOf,omitempty"`
}

// Handler is the cdc function: DynamoDB stream batches in, changelog
// records out on the events stream.
type Handler struct {
	kin     recordPutter
	stream  string
	keyAttr string
	sink    *setaside.Sink
	metrics *metrics.Logger
	log     *slog.Logger
}

// Option configures a Handler.
type Option func(*Handler)

// WithEntityKeyAttribute names the item attribute holding the entity key.
func WithEntityKeyAttribute(name string) Option { return func(h *Handler) { h.keyAttr = name } }

// WithMetrics emits ChangesIn, ChangelogRecords, Tombstones and
// RecordsSetAside per batch (give the set-aside sink the same logger).
func WithMetrics(m *metrics.Logger) Option { return func(h *Handler) { h.metrics = m } }

// WithLogger logs records that cannot become changelog records.
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithSetAside is where changes that can never become a changelog record
// go (the quarantine table). Without it such a change is reported as the
// batch item failure, as a transient error is, and nothing is lost.
func WithSetAside(s *setaside.Sink) Option { return func(h *Handler) { h.sink = s } }

// EnvEntityKeyAttribute is the environment variable naming the entity key
// attribute (optional; DefaultEntityKeyAttribute).
const EnvEntityKeyAttribute = "ENTITY_KEY_ATTRIBUTE"

// EnvOptions reads EnvEntityKeyAttribute with getenv (os.Getenv in main).
// Unset or empty keeps DefaultEntityKeyAttribute; a value no table key can
// be named (blank, a space at an end, a control character, over 255
// characters) is an error naming the variable, for the function's init to
// stop on: running with it, every change would be set aside for a key
// attribute no item has.
func EnvOptions(getenv func(string) string) ([]Option, error) {
	v := getenv(EnvEntityKeyAttribute)
	if v == "" {
		return nil, nil
	}
	if err := envvar.Check(v, envvar.Attribute); err != nil {
		return nil, fmt.Errorf("environment variable %s: %w (the item attribute holding the entity key)", EnvEntityKeyAttribute, err)
	}
	return []Option{WithEntityKeyAttribute(v)}, nil
}

// New returns a Handler writing to the Kinesis stream named streamName.
func New(kin recordPutter, streamName string, opts ...Option) *Handler {
	h := &Handler{kin: kin, stream: streamName, keyAttr: DefaultEntityKeyAttribute,
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(h)
	}
	return h
}

// ChangeError is a change that can never become a changelog record — a
// missing image or key, a bad version, a record over Kinesis' size limit.
// It names the stream record and the field.
type ChangeError struct {
	EventID        string
	SequenceNumber string
	// Field is the stream record's field at fault, for example
	// "dynamodb.NewImage.bio" or "dynamodb.Keys.userId".
	Field  string
	Reason string
	// Kind is the setaside category (setaside.KindInvalid, ...).
	Kind string
}

func (e *ChangeError) Error() string {
	return fmt.Sprintf("record %s (sequence number %s): %s: %s", e.EventID, e.SequenceNumber, e.Field, e.Reason)
}

// pending is one change converted, waiting to be written.
type pending struct {
	rec     int // index in the batch
	entry   kintypes.PutRecordsRequestEntry
	deleted bool
}

// Handle writes one changelog record per stream record, in order. A change
// that can never become one (ChangeError) is set aside — kept in the
// quarantine table with its stream record and the field at fault — and the
// batch goes on. It reports the first record it could not write (the lowest
// Kinesis failed, throttled or not; or the first it could not set aside) as
// the batch item failure, so Lambda redelivers it and the records after it.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	if err := stream.CheckDynamoDBEvent(&ev); err != nil {
		return events.DynamoDBEventResponse{}, fmt.Errorf("cdc: %w", err)
	}
	var failures batch.StreamFailures
	recs := ev.Records
	ready := make([]pending, 0, len(recs))
	var aside []setaside.Record
	var asideAt []int
	for i := range recs {
		entry, deleted, err := h.Record(&recs[i])
		if err != nil {
			r := setaside.FromDynamoDB(&recs[i])
			r.Field, r.Kind, r.Reason = "", setaside.KindInvalid, err.Error()
			var ce *ChangeError
			if errors.As(err, &ce) {
				r.Field, r.Kind, r.Reason = ce.Field, ce.Kind, ce.Reason
			}
			aside, asideAt = append(aside, r), append(asideAt, i)
			continue
		}
		ready = append(ready, pending{rec: i, entry: entry, deleted: deleted})
	}
	stop := len(recs) // the first record not done
	if err := h.sink.SetAside(ctx, aside); err != nil {
		h.log.ErrorContext(ctx, "changes not set aside; they will be retried", "records", len(aside), "error", err)
		stop = asideAt[0]
	}
	done := ready
	for i, p := range ready {
		if p.rec >= stop {
			done = ready[:i]
			break
		}
	}
	written := 0
	for _, c := range chunks(done) {
		failed, err := h.put(ctx, done[c[0]:c[1]])
		if err != nil {
			h.log.ErrorContext(ctx, "PutRecords failed; the batch is retried from the first record not written", "stream", h.stream, "error", err)
			failed = 0
		}
		if err != nil || failed >= 0 {
			stop = min(stop, done[c[0]+failed].rec)
			written += failed
			break
		}
		written += c[1] - c[0]
	}
	if stop < len(recs) {
		failures.Add(recs[stop].Change.SequenceNumber)
	}
	tombstones := 0
	for _, p := range done[:written] {
		if p.deleted {
			tombstones++
		}
	}
	h.emit(len(recs), written, tombstones)
	return failures.DynamoDB(), nil
}

// chunks splits entries into PutRecords calls within Kinesis' limits (500
// records, 5 MiB) and returns each call's [start, end).
func chunks(entries []pending) [][2]int {
	var out [][2]int
	start, size := 0, 0
	for i, e := range entries {
		n := limits.KinesisRecordSize(e.entry.Data, aws.ToString(e.entry.PartitionKey))
		if i > start && (i-start == limits.KinesisPutRecordsEntries || size+n > limits.KinesisPutRecordsBytes) {
			out = append(out, [2]int{start, i})
			start, size = i, 0
		}
		size += n
	}
	if start < len(entries) {
		out = append(out, [2]int{start, len(entries)})
	}
	return out
}

// put writes entries with one PutRecords call and returns the index of the
// lowest failed entry, or -1 when all were written. Kinesis fails entries
// only for throttling or an internal error: transient, retried by Lambda.
func (h *Handler) put(ctx context.Context, ps []pending) (int, error) {
	entries := make([]kintypes.PutRecordsRequestEntry, len(ps))
	for i := range ps {
		entries[i] = ps[i].entry
	}
	out, err := h.kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(h.stream), Records: entries})
	if err != nil {
		return 0, fmt.Errorf("putting %d changelog records on stream %s: %w", len(entries), h.stream, err)
	}
	if aws.ToInt32(out.FailedRecordCount) == 0 {
		return -1, nil
	}
	for i, r := range out.Records {
		if r.ErrorCode != nil {
			h.log.WarnContext(ctx, "changelog record not written", "index", i, "errorCode", aws.ToString(r.ErrorCode),
				"errorMessage", aws.ToString(r.ErrorMessage))
			return i, nil
		}
	}
	return 0, fmt.Errorf("stream %s: PutRecords reported %d failed records but none carries an error code", h.stream, aws.ToInt32(out.FailedRecordCount))
}

func (h *Handler) emit(in, out, tombstones int) {
	if h.metrics == nil {
		return
	}
	h.metrics.Add("ChangesIn", metrics.Count, float64(in))
	h.metrics.Add("ChangelogRecords", metrics.Count, float64(out))
	h.metrics.Add("Tombstones", metrics.Count, float64(tombstones))
	h.metrics.Add(setaside.Metric, metrics.Count, 0)
	if err := h.metrics.Flush(); err != nil {
		h.log.Warn("flushing metrics", "error", err)
	}
}

// Record builds the Kinesis entry of one stream record, and says whether it
// is a tombstone. Its errors are *ChangeError: the change can never become
// a changelog record as it is.
func (h *Handler) Record(rec *events.DynamoDBEventRecord) (kintypes.PutRecordsRequestEntry, bool, error) {
	env, err := h.Envelope(rec)
	if err != nil {
		return kintypes.PutRecordsRequestEntry{}, false, err
	}
	b, err := setaside.MarshalJSON(env)
	if err != nil {
		return kintypes.PutRecordsRequestEntry{}, false, h.changeError(rec, "dynamodb", setaside.KindInvalid, "encoding the changelog record: %v", err)
	}
	if n := limits.KinesisRecordSize(b, env.Key); n > limits.KinesisRecordBytes {
		field, reason := "dynamodb.NewImage", ""
		if name, size := largestAttribute(rec.Change.NewImage); name != "" {
			field = strictjson.KeyPath("dynamodb.NewImage", name)
			reason = fmt.Sprintf("; attribute %s is %d bytes as JSON", strictjson.KeyPath("", name), size)
		}
		return kintypes.PutRecordsRequestEntry{}, false, h.changeError(rec, field, setaside.KindOutputTooLarge,
			"the changelog record would be %d bytes (data and partition key), over Kinesis' limit of %d%s", n, limits.KinesisRecordBytes, reason)
	}
	return kintypes.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(env.Key)}, env.Type == TypeDeleted, nil
}

// largestAttribute is the image's attribute that is the biggest as JSON,
// and that size, among those a changelog record holds (not the personal
// attribute, which is left out of it).
func largestAttribute(img map[string]events.DynamoDBAttributeValue) (string, int) {
	best, size := "", -1
	for name, av := range img {
		if name == setaside.PersonalAttribute {
			continue
		}
		v, err := stream.AttributeJSON(av)
		if err != nil {
			continue
		}
		b, err := setaside.MarshalJSON(v)
		if err != nil {
			continue
		}
		if n := len(name) + len(b); n > size || (n == size && name < best) {
			best, size = name, n
		}
	}
	return best, size
}

func (h *Handler) changeError(rec *events.DynamoDBEventRecord, field, kind, format string, args ...any) *ChangeError {
	return &ChangeError{EventID: rec.EventID, SequenceNumber: rec.Change.SequenceNumber, Field: field, Kind: kind,
		Reason: fmt.Sprintf(format, args...)}
}

// Envelope is the changelog record of one stream record. Its errors are
// *ChangeError.
func (h *Handler) Envelope(rec *events.DynamoDBEventRecord) (*stream.Envelope, error) {
	ch := &rec.Change
	var img map[string]events.DynamoDBAttributeValue
	typ := TypeChanged
	switch events.DynamoDBOperationType(rec.EventName) {
	case events.DynamoDBOperationTypeInsert, events.DynamoDBOperationTypeModify:
		img = ch.NewImage
		if img == nil {
			return nil, h.changeError(rec, "dynamodb.NewImage", setaside.KindInvalid,
				"is missing in a %s record (StreamViewType %s): the table's stream must be NEW_AND_OLD_IMAGES", rec.EventName, ch.StreamViewType)
		}
	case events.DynamoDBOperationTypeRemove:
		typ = TypeDeleted
		if ch.OldImage == nil {
			// Without it the tombstone's version would be the stream's
			// sequence number, far above the item's own versions: every
			// later version of the key would lose to it.
			return nil, h.changeError(rec, "dynamodb.OldImage", setaside.KindInvalid,
				"is missing in a REMOVE record (StreamViewType %s): the table's stream must be NEW_AND_OLD_IMAGES", ch.StreamViewType)
		}
	default:
		return nil, h.changeError(rec, "eventName", setaside.KindInvalid, "%q is not INSERT, MODIFY or REMOVE", rec.EventName)
	}
	key, keyField, err := h.key(rec)
	if err != nil {
		return nil, err
	}
	version, err := h.recordVersion(rec)
	if err != nil {
		return nil, err
	}
	image, err := ImageJSON(img)
	if err != nil {
		field := "dynamodb.NewImage"
		var ne *NumberError
		if errors.As(err, &ne) {
			field = strictjson.JoinPath(field, ne.Path)
		}
		return nil, h.changeError(rec, field, setaside.KindInvalid, "%v", err)
	}
	data, err := setaside.MarshalJSON(Data{Key: key, Version: version, Image: image, SequenceNumber: ch.SequenceNumber})
	if err != nil {
		return nil, h.changeError(rec, "dynamodb.NewImage", setaside.KindInvalid, "encoding the image as JSON: %v", err)
	}
	// As every consumer reads it (the strict reader: an image nested
	// deeper than it takes was set aside by each of them, downstream).
	if err := strictjson.Check(data, strictjson.Options{MaxBytes: len(data), Name: "changelog data"}); err != nil {
		field := "dynamodb.NewImage"
		var se *strictjson.Error
		if errors.As(err, &se) {
			// image.a.b or image["a.b"]: the image's attributes are the
			// item's, so the path below image is the path below NewImage.
			if rest, ok := strings.CutPrefix(se.Path, "image"); ok && rest != "" && (rest[0] == '.' || rest[0] == '[') {
				field += rest
			}
		}
		return nil, h.changeError(rec, field, setaside.KindInvalid, "as the changelog record's data: %v", err)
	}
	if events.DynamoDBOperationType(rec.EventName) == events.DynamoDBOperationTypeModify {
		if err := h.checkBump(rec, version, image); err != nil {
			return nil, err
		}
	}
	at := ch.ApproximateCreationDateTime.Time.UTC()
	if at.IsZero() {
		return nil, h.changeError(rec, "dynamodb.ApproximateCreationDateTime", setaside.KindInvalid, "is missing")
	}
	// The key first: the id is made of it too, and a character the key
	// may not hold is named at its place in the key, not in the id.
	if err := stream.CheckKey(key); err != nil {
		return nil, h.changeError(rec, keyField, setaside.KindInvalid, "as the changelog record's %v", err)
	}
	env := &stream.Envelope{ID: changeID(tableName(rec.EventSourceArn), key, version.String()), Type: typ, Key: key,
		OccurredAt: at, SentAt: at, ReceivedAt: at, Data: data}
	err = env.Validate() // unprintable characters included, as ingest: the key is every view's key
	if err != nil {
		field := keyField // the id and the key are made of the entity key
		var fe *stream.FieldError
		if errors.As(err, &fe) && fe.Field != "id" && fe.Field != "key" {
			field = "dynamodb"
		}
		return nil, h.changeError(rec, field, setaside.KindInvalid, "as the changelog record's %v", err)
	}
	return env, nil
}

// changeID is a changelog record's id: "<table>/<key>/<version>", or, when
// that is longer than an envelope id may be (a key of 200 characters, which
// a partition key may be, and a long table name), "cdc:<hash>/<version>",
// the hash naming the table and the key: still one id per version of an
// entity, its version after the last slash.
func changeID(table, key, version string) string {
	id := table + "/" + key + "/" + version
	if utf8.RuneCountInString(id) <= stream.MaxIDLength {
		return id
	}
	sum := sha256.Sum256([]byte(table + "/" + key))
	return "cdc:" + hex.EncodeToString(sum[:20]) + "/" + version
}

// IsChangeID reports whether id is the id cdc (or the snapshot) gives the
// changelog record of version of key (changeID's, for some table). It is
// how enrich tells a changelog record in cdc's shape from one a producer
// wrote to the events stream itself with a changelog type (ingest refuses
// those types; a principal with PutRecords on the stream is not stopped by
// IAM from writing one): such a record would set the profile's version.
// It is a check of shape, not of origin: who may write to the events
// stream is who may change a profile's version.
func IsChangeID(id, key, version string) bool {
	if hashed, ok := strings.CutPrefix(id, "cdc:"); ok {
		sum, v, ok := strings.Cut(hashed, "/")
		return ok && v == version && len(sum) == 40 && strings.Trim(sum, "0123456789abcdef") == ""
	}
	table, ok := strings.CutSuffix(id, "/"+key+"/"+version)
	return ok && table != "" && !strings.Contains(table, "/")
}

// key is the entity key — the key attribute from Keys, else from an image —
// and the field it came from.
func (h *Handler) key(rec *events.DynamoDBEventRecord) (string, string, error) {
	for _, src := range []struct {
		name string
		m    map[string]events.DynamoDBAttributeValue
	}{{"Keys", rec.Change.Keys}, {"NewImage", rec.Change.NewImage}, {"OldImage", rec.Change.OldImage}} {
		av, ok := src.m[h.keyAttr]
		if !ok {
			continue
		}
		field := "dynamodb." + src.name + "." + h.keyAttr
		switch av.DataType() {
		case events.DataTypeString:
			if av.String() == "" {
				return "", "", h.changeError(rec, field, setaside.KindInvalid, "is empty")
			}
			return av.String(), field, nil
		case events.DataTypeNumber:
			return av.Number(), field, nil
		default:
			return "", "", h.changeError(rec, field, setaside.KindInvalid, "must be an S or N attribute")
		}
	}
	return "", "", h.changeError(rec, "dynamodb.Keys."+h.keyAttr, setaside.KindInvalid,
		"the entity key attribute %q (ENTITY_KEY_ATTRIBUTE) is not in dynamodb.Keys, NewImage or OldImage", h.keyAttr)
}

// recordVersion is the change's version (see the package doc).
func (h *Handler) recordVersion(rec *events.DynamoDBEventRecord) (json.Number, error) {
	ch := &rec.Change
	img, field, bump := ch.NewImage, "NewImage", false
	if events.DynamoDBOperationType(rec.EventName) == events.DynamoDBOperationTypeRemove {
		img, field, bump = ch.OldImage, "OldImage", true
	}
	if av, ok := img[VersionAttribute]; ok {
		v, err := itemVersion(av)
		if err != nil {
			return "", h.changeError(rec, "dynamodb."+field+"."+VersionAttribute, setaside.KindInvalid, "%v", err)
		}
		if bump {
			v.Add(v, big.NewInt(1))
		}
		return json.Number(v.String()), nil
	}
	// No version: nothing orders the change against the item's others.
	// (The stream's sequence number did once, and outranked every version
	// the item was given later: consumers never applied it again.)
	if bump {
		return "", h.changeError(rec, "dynamodb.OldImage."+VersionAttribute, setaside.KindInvalid,
			"is missing: the deleted item had no %[1]s, so its tombstone has none to follow; every item of the table carries a number attribute %[1]s, bumped on every write", VersionAttribute)
	}
	if _, had := ch.OldImage[VersionAttribute]; had {
		return "", h.changeError(rec, "dynamodb.NewImage."+VersionAttribute, setaside.KindInvalid,
			"is missing, but the item's previous image (dynamodb.OldImage) has one: every write of a versioned item must carry its %s", VersionAttribute)
	}
	return "", h.changeError(rec, "dynamodb.NewImage."+VersionAttribute, setaside.KindInvalid,
		"is missing: every item of the table carries a number attribute %[1]s, bumped on every write (a conditional write on the previous one); write the item again with one", VersionAttribute)
}

// checkBump refuses a MODIFY whose version is below its old image's, or
// equal to it with a changed image (what the changelog carries: the
// personal attribute left out). Consumers apply a change only above the
// version they hold, so they would skip it for good and keep serving the
// previous profile while the table holds another.
func (h *Handler) checkBump(rec *events.DynamoDBEventRecord, version json.Number, image map[string]any) error {
	av, ok := rec.Change.OldImage[VersionAttribute]
	if !ok {
		return nil // the item's first version: its change without one was set aside
	}
	old, err := itemVersion(av)
	if err != nil {
		return nil // an old image no consumer applied cannot outrank it
	}
	cur, ok := new(big.Int).SetString(version.String(), 10)
	if !ok {
		return nil
	}
	switch cur.Cmp(old) {
	case -1:
		// A deletion of the item as it now is would go out at version
		// cur + 1, at most old: skipped too, and the item would live on
		// in the join after the table lost it.
		return h.changeError(rec, "dynamodb.NewImage."+VersionAttribute, setaside.KindInvalid,
			"%s is below the item's previous %s %s (dynamodb.OldImage): consumers hold %s already and would never apply this change; write the item again at a %s above %s before anything else — deleted now, its tombstone would go out at %s %s, which consumers skip as well",
			version, VersionAttribute, old, old, VersionAttribute, old, VersionAttribute, new(big.Int).Add(cur, big.NewInt(1)))
	case 0:
		oldImage, err := ImageJSON(rec.Change.OldImage)
		if err != nil || sameValue(oldImage, image) {
			return nil // only the personal attribute changed (an erasure): a copy consumers skip
		}
		return h.changeError(rec, "dynamodb.NewImage."+VersionAttribute, setaside.KindInvalid,
			"%s is the item's previous %s (dynamodb.OldImage) but the item changed: consumers take an equal version for a copy and would keep the previous profile; every write must raise the %s",
			version, VersionAttribute, VersionAttribute)
	}
	return nil
}

// sameValue reports whether two ImageJSON values are equal, sets (which
// DynamoDB does not order) compared whatever their order.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], b[i]) {
				return false
			}
		}
		return true
	case []string:
		b, ok := b.([]string)
		return ok && slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
	case []json.Number:
		b, ok := b.([]json.Number)
		return ok && slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
	case [][]byte:
		b, ok := b.([][]byte)
		if !ok || len(a) != len(b) {
			return false
		}
		as, bs := make([]string, len(a)), make([]string, len(b))
		for i := range a {
			as[i], bs[i] = string(a[i]), string(b[i])
		}
		return sameValue(as, bs)
	}
	return reflect.DeepEqual(a, b)
}

var errVersion = errors.New("must be an N attribute holding a non-negative integer")

func itemVersion(av events.DynamoDBAttributeValue) (*big.Int, error) {
	fix := "write the item again with its " + VersionAttribute + " a whole number (N), above the one before"
	if av.DataType() != events.DataTypeNumber {
		got := "another type of attribute"
		if av.DataType() == events.DataTypeString {
			got = "an S attribute (" + strictjson.QuoteCut(av.String(), 40) + ")"
		}
		return nil, fmt.Errorf("%w, not %s: %s", errVersion, got, fix)
	}
	v, ok := new(big.Int).SetString(av.Number(), 10)
	if !ok || v.Sign() < 0 {
		return nil, fmt.Errorf("%w, not %s: %s", errVersion, strictjson.Cut(av.Number(), 40), fix)
	}
	return v, nil
}

// tableName is the table of a stream ARN
// (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL).
func tableName(arn string) string {
	_, rest, ok := strings.Cut(arn, ":table/")
	if !ok {
		return "table"
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}
