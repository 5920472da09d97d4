package putback

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Store is what a Putter needs of DynamoDB: reading an item whole
// (setaside.Load) and marking it put back.
type Store interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Streams is what a Putter needs of Kinesis.
type Streams interface {
	PutRecord(ctx context.Context, in *kinesis.PutRecordInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error)
}

var (
	_ Store   = (*dynamodb.Client)(nil)
	_ Streams = (*kinesis.Client)(nil)
)

// DefaultHorizon is the consumers' default dedupe horizon (a pipeline's
// dedupeHorizon): a record put back within it of its first arrival is
// dropped as a copy by the consumers that applied it.
const DefaultHorizon = time.Hour

// MaxRecordBytes is the most a Kinesis record holds, its partition key
// included (1 MiB).
const MaxRecordBytes = 1 << 20

// ErrNotFound is returned for a record the table does not hold (never set
// aside, or gone after setaside.Retention).
var ErrNotFound = errors.New("not in the quarantine table")

// Refusal is a record Prepare will not put back: Reason says why, Flag
// names the option that would change that ("" when none would: FlagAgain,
// FlagData, FlagPastHorizon, FlagUnchanged), which a tool spells its own
// way.
type Refusal struct {
	Source, Sequence string
	Reason           string
	Flag             string
}

// The options a Refusal can name.
const (
	FlagAgain       = "again"        // Putter.Again
	FlagData        = "data"         // give the corrected record
	FlagPastHorizon = "past-horizon" // Putter.Horizon or Putter.PastHorizon
	FlagUnchanged   = "unchanged"    // Putter.Unchanged, or the corrected record
)

func (r *Refusal) Error() string {
	return fmt.Sprintf("%s %s: not put back: %s", r.Source, r.Sequence, r.Reason)
}

// AlreadyPutBack is the Refusal of an item marked put back before.
func (r *Refusal) AlreadyPutBack() bool { return r.Flag == FlagAgain }

// Putter puts records of the quarantine table back on their streams.
type Putter struct {
	DB      Store
	Streams Streams
	Table   string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Horizon is the consumers' dedupe horizon (DefaultHorizon when 0).
	Horizon time.Duration
	// PastHorizon puts back a record that first arrived longer ago than
	// Horizon: the consumers that applied it then apply it again.
	PastHorizon bool
	// ArriveNow leaves receivedAt out when the envelope has none, so the
	// record takes the time it arrives again.
	ArriveNow bool
	// Again puts back a record marked put back before.
	Again bool
	// Unchanged puts back a record whose field at fault holds what it held
	// when it was set aside, or breaks the rule its item keeps (its cause
	// was elsewhere: a pipeline file or a limit changed).
	Unchanged bool
}

// Plan is what putting a record back does.
type Plan struct {
	// Item is the record's quarantine item, its data whole.
	Item *setaside.Item
	// Stream is the stream's name, Shard the one it was read from.
	Stream, Shard string
	// PartitionKey is the key it is put with.
	PartitionKey string
	// Data is what is put: the item's data or the fixed data given, with
	// ReceivedAt added when it is not "".
	Data       []byte
	ReceivedAt string
	// Fixed is set when Data comes from the fixed data given.
	Fixed bool
}

// Result is a record put back: its plan and where the stream put it.
type Result struct {
	Plan
	Sequence, ShardID string
	// Unmarked is set when the item was gone before it could be marked
	// (its TTL passed): the record is on the stream all the same.
	Unmarked bool
}

// Prepare reads the record (source, sequence) whole and returns what
// putting it back does, or a *Refusal saying why it will not be put back,
// ErrNotFound, or a read error. fixed, when not nil, is put in place of
// the kept data (the record once its producer's mistake is corrected).
// A record several functions set aside is judged as each of them set it
// aside (its category, field, reason and rule), since the copy reaches
// every one of them: the first refusal is the answer.
func (p *Putter) Prepare(ctx context.Context, source, sequence string, fixed []byte) (*Plan, error) {
	return p.PrepareFor(ctx, source, sequence, nil, fixed)
}

// PrepareFor is Prepare judging the record only as the functions named
// (exactly, as the item names them) set it aside — all of them when
// functions is empty: a put-back for one function's records (Filter.Function)
// is held to that function's category and rule, not to another's that set
// the same record aside for another field. A function that did not set it
// aside is a *Refusal naming those that did.
func (p *Putter) PrepareFor(ctx context.Context, source, sequence string, functions []string, fixed []byte) (*Plan, error) {
	it, err := Load(ctx, p.DB, p.Table, source, sequence)
	if err != nil {
		return nil, err
	}
	if it == nil {
		return nil, fmt.Errorf("putback: %s %s: %w", source, sequence, ErrNotFound)
	}
	views := it.SetAsides()
	if len(functions) > 0 {
		var by []setaside.Item
		for _, f := range functions {
			v, ok := it.SetAsideBy(f)
			if !ok {
				return nil, &Refusal{Source: source, Sequence: sequence,
					Reason: fmt.Sprintf("%s did not set it aside (%s did)", strictjson.QuoteCut(f, 128), setAsideBy(views))}
			}
			by = append(by, v)
		}
		views = by
	}
	var plan *Plan
	for i := range views {
		if plan, err = p.prepare(&views[i], fixed); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// setAsideBy names the functions of an item's set-asides.
func setAsideBy(views []setaside.Item) string {
	names := make([]string, len(views))
	for i := range views {
		names[i] = orUnknown(views[i].Function)
	}
	return strings.Join(names, ", ")
}

// prepare is Prepare of the record as one function set it aside (it, its
// data whole).
func (p *Putter) prepare(it *setaside.Item, fixed []byte) (*Plan, error) {
	source, sequence := it.Source, it.SequenceNumber
	refuse := func(flag, format string, args ...any) (*Plan, error) {
		return nil, &Refusal{Source: source, Sequence: sequence, Reason: fmt.Sprintf(format, args...), Flag: flag}
	}
	if it.PutBackAt != "" && !p.Again {
		return refuse(FlagAgain, "put back at %s already (as sequence number %s)", it.PutBackAt, it.PutBackSequence)
	}
	if why := Hopeless(it); why != "" {
		return refuse("", "%s", why)
	}
	streamName, shard, _ := kinesisSource(it)
	arrived, _ := time.Parse(time.RFC3339Nano, it.ApproximateArrival)
	horizon := p.Horizon
	if horizon <= 0 {
		horizon = DefaultHorizon
	}
	if age := p.now().Sub(arrived); !arrived.IsZero() && age > horizon && !p.PastHorizon {
		return refuse(FlagPastHorizon, "it first arrived %s ago (%s), past the consumers' dedupe horizon of %s: those that applied it then no longer know its id and would apply it a second time",
			age.Round(time.Second), it.ApproximateArrival, horizon)
	}
	plan := &Plan{Item: it, Stream: streamName, Shard: shard, PartitionKey: it.PartitionKey, Data: it.Data}
	if fixed != nil {
		plan.Data, plan.Fixed = fixed, true
	}
	what := "its data"
	if plan.Fixed {
		what = "the record given in its place"
	}
	if err := plan.check(p.now(), !p.ArriveNow); err != nil {
		var fe *stream.FieldError
		if errors.As(err, &fe) && fe.Field != "" {
			err = fmt.Errorf("field %s: %s", fe.Field, fe.Reason)
		}
		return refuse(FlagData, "%s would be set aside again: %v", what, err)
	}
	if !p.Unchanged {
		if same, field := plan.unchangedAtFault(); same {
			return refuse(FlagUnchanged, "%s holds the %s it held when %s set the record aside (%s), so it would be set aside again",
				what, field, orUnknown(it.Function), strictjson.Cut(it.Reason, 200))
		}
		if err := plan.breaksRule(); err != nil {
			return refuse(FlagUnchanged, "%s would be set aside again: field %s: %v; %s takes only %s there (the rule the field broke when it set the record aside)",
				what, it.Field, err, orUnknown(it.Function), it.Rule)
		}
	}
	return plan, nil
}

// Load is setaside.Load, with ErrNoTable for a table that does not exist.
func Load(ctx context.Context, db Store, table, source, sequence string) (*setaside.Item, error) {
	it, err := setaside.Load(ctx, db, table, source, sequence)
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("%w: %s", ErrNoTable, table)
	}
	return it, err
}

// Hopeless says why a record can never be put back, whatever is done to
// it ("" when it can be): read from its item alone, without its data.
func Hopeless(it *setaside.Item) string {
	if _, _, why := kinesisSource(it); why != "" {
		return why
	}
	switch it.Category {
	case setaside.KindDuplicateConflict:
		return "duplicate-conflict: " + orUnknown(it.Function) + " took the record's event id before it set the record aside (an id it had applied with other data), so a copy is dropped as a producer's copy by it and applied a second time by the other consumers; no put-back reaches that function alone. Such an item appears for a record you put back corrected, from the consumers that had applied its first version: expected, nothing to do (docs/set-aside.md)"
	case setaside.KindNotInLog:
		return "not-in-log: " + orUnknown(it.Function) + " applies the events the event store holds, and this record is not one of them (" + strictjson.Cut(it.Reason, 300) + "): a copy put back is set aside again. To change a show, send a command to the commands URL, which appends the event and publishes it (docs/event-sourcing.md)"
	case setaside.KindStateBudget:
		return "state-budget: " + orUnknown(it.Function) + " took the record's event id before it set the record aside, so a copy is dropped as a producer's copy by it within its dedupe horizon, and applied a second time by the other consumers after it; no put-back reaches that function alone (docs/set-aside.md)"
	}
	if it.IDTaken {
		field := it.Field
		if field == "" {
			field = "it"
		}
		return fmt.Sprintf("%s %s: %s read the record and took its event id in its dedupe ledger before it set it aside for the part of it that could not read %s (%s). A copy put back is dropped by it as a producer's copy within its dedupe horizon, or set aside as duplicate-conflict when corrected, and past that horizon the parts that read it would read it a second time: no put-back reaches only the part that skipped it. That part goes without this event; to have a corrected value counted there, send it as a new event, with a new id (through ingest), which every consumer takes as another event, that function's other parts included (docs/set-aside.md)",
			it.Category, field, orUnknown(it.Function), field, strictjson.Cut(it.Reason, 300))
	}
	if it.DataTruncated {
		return fmt.Sprintf("only the start of its data was kept (%d bytes of %d): put the whole record on the stream yourself", len(it.Data), it.DataBytes)
	}
	return ""
}

// check holds the plan's data to what every consumer of the stream reads,
// takes the partition key from the envelope when the record was set aside
// for one that was not its key, and adds receivedAt (its first arrival)
// when keep and the envelope has none.
func (pl *Plan) check(now time.Time, keep bool) error {
	if err := stream.CheckStrict(pl.Data); err != nil {
		return err
	}
	var env stream.Envelope
	rec := events.KinesisEventRecord{Kinesis: events.KinesisRecord{Data: pl.Data, SequenceNumber: pl.Item.SequenceNumber,
		ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: now}}}
	if err := stream.DecodeKinesis(&rec, &env); err != nil {
		var pe *stream.PoisonRecordError
		if errors.As(err, &pe) {
			return unwrapPoison(pe)
		}
		return err
	}
	if pl.Fixed && cdc.IsChangelogType(env.Type) {
		return fmt.Errorf("field type: %q is a change data capture record type, which only cdc writes from the profiles table (enrich would take it as the profile's new version): change the profile item instead", env.Type)
	}
	if pl.Item.Field == "key" || pl.PartitionKey == "" {
		pl.PartitionKey = env.Key
	}
	if pl.PartitionKey != env.Key {
		return fmt.Errorf("field key: %s is not the partition key %s the record was put with", strictjson.QuoteCut(env.Key, 64), strictjson.QuoteCut(pl.PartitionKey, 64))
	}
	if keep && pl.Item.ApproximateArrival != "" && !hasReceivedAt(pl.Data) {
		at, err := time.Parse(time.RFC3339Nano, pl.Item.ApproximateArrival)
		if err == nil {
			// Kinesis keeps arrival times to the millisecond.
			pl.ReceivedAt = at.UTC().Round(time.Millisecond).Format(time.RFC3339Nano)
			pl.Data = withReceivedAt(pl.Data, pl.ReceivedAt)
		}
	}
	if n := len(pl.Data) + len(pl.PartitionKey); n > MaxRecordBytes {
		return fmt.Errorf("%d bytes with its partition key, over Kinesis's %d", n, MaxRecordBytes)
	}
	return nil
}

// DataAtFault reports whether it was set aside for its data (a field of
// it, or the whole record unreadable, not a state or a limit): it goes
// back corrected.
func DataAtFault(it *setaside.Item) bool {
	switch it.Category {
	case setaside.KindInvalid, setaside.KindOverflow, setaside.KindUnparseable:
		return true
	}
	return false
}

// unchangedAtFault reports whether the field the record was set aside
// for (a field of its data that the envelope check cannot judge:
// data.ms) holds the same JSON value in the data put as in the data kept,
// or is missing from both; field is the field. A record set aside for no
// field, for an envelope field, or for a reason that is not its data (a
// state, a limit), or whose field's path cannot be followed, is not judged.
func (pl *Plan) unchangedAtFault() (same bool, field string) {
	it := pl.Item
	if !DataAtFault(it) {
		return false, ""
	}
	path, ok := strings.CutPrefix(it.Field, "data.")
	if !ok || path == "" || strings.ContainsAny(path, "[]$") {
		return false, ""
	}
	kept, okKept := valueAt(it.Data, path)
	put, okPut := valueAt(pl.Data, path)
	if !okKept || !okPut {
		return false, ""
	}
	return reflect.DeepEqual(kept, put), it.Field
}

// breaksRule says why the field the record was set aside for does not
// hold, in the data put, what the item's rule says it must (the rule that
// field broke, kept by the function that set it aside: a pipeline's value
// is a finite number within ±2^53); nil when it holds, when the item
// keeps no rule (set aside before rules were kept), or when the field is
// no data field whose path can be followed.
func (pl *Plan) breaksRule() error {
	it := pl.Item
	if it.Rule == nil {
		return nil
	}
	raw, ok := rawAt(pl.Data, it.Field)
	if !ok {
		return nil
	}
	return it.Rule.Check(raw)
}

// rawAt is the JSON text at field ("data" or "data.<field>...") of an
// envelope (nil when it is missing, or under a value that is not an
// object, as a pipeline reads it), or false when field is no path that
// can be followed or data is not an envelope.
func rawAt(data []byte, field string) ([]byte, bool) {
	var path []string
	if field != "data" {
		rest, ok := strings.CutPrefix(field, "data.")
		if !ok || rest == "" || strings.ContainsAny(rest, "[]$") {
			return nil, false
		}
		path = strings.Split(rest, ".")
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(data, &env) != nil {
		return nil, false
	}
	v := bytes.TrimSpace(env.Data)
	for _, name := range path {
		if len(v) == 0 || v[0] != '{' {
			return nil, true
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) != nil {
			return nil, false
		}
		v = bytes.TrimSpace(obj[name])
	}
	if len(v) == 0 {
		return nil, true
	}
	return v, true
}

// valueAt is the value at the dotted path under an envelope's data (nil
// when it is missing), or false when data is not an envelope whose path
// can be followed.
func valueAt(data []byte, path string) (any, bool) {
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(data, &env) != nil {
		return nil, false
	}
	var v any
	if len(env.Data) > 0 {
		dec := json.NewDecoder(bytes.NewReader(env.Data))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return nil, false
		}
	}
	for _, name := range strings.Split(path, ".") {
		if v == nil {
			return nil, true
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		v = obj[name]
	}
	return v, true
}

// unwrapPoison is the field error of a record that does not decode,
// without the record's id (the caller names the record).
func unwrapPoison(pe *stream.PoisonRecordError) error {
	var fe *stream.FieldError
	if errors.As(pe.Err, &fe) && fe.Field != "" {
		return fmt.Errorf("field %s: %s", fe.Field, fe.Reason)
	}
	if pe.Field != "" {
		return fmt.Errorf("field %s: %v", pe.Field, pe.Err)
	}
	return pe.Err
}

// hasReceivedAt reports whether the envelope (an object that decodes)
// names receivedAt.
func hasReceivedAt(data []byte) bool {
	var env stream.Envelope
	return stream.Unmarshal(data, &env) == nil && !env.ReceivedAt.IsZero()
}

// withReceivedAt is the envelope object data with "receivedAt" as its
// first field.
func withReceivedAt(data []byte, at string) []byte {
	body := bytes.TrimSpace(data)
	rest := bytes.TrimSpace(body[1:])
	out := make([]byte, 0, len(body)+len(at)+20)
	out = append(out, `{"receivedAt":"`...)
	out = append(out, at...)
	out = append(out, '"')
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// Put puts the plan's record on its stream, then marks its item put back.
func (p *Putter) Put(ctx context.Context, plan *Plan) (Result, error) {
	it := plan.Item
	out, err := p.Streams.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(plan.Stream),
		PartitionKey: aws.String(plan.PartitionKey), Data: plan.Data})
	if err != nil {
		return Result{Plan: *plan}, fmt.Errorf("putback: putting %s %s on %s: %w", it.Source, it.SequenceNumber, plan.Stream, err)
	}
	res := Result{Plan: *plan, Sequence: aws.ToString(out.SequenceNumber), ShardID: aws.ToString(out.ShardId)}
	upd := expression.Set(expression.Name("putBackAt"), expression.Value(p.now().UTC().Format(time.RFC3339Nano))).
		Set(expression.Name("putBackSequence"), expression.Value(res.Sequence))
	expr, err := expression.NewBuilder().WithUpdate(upd).
		WithCondition(expression.AttributeExists(expression.Name("sequenceNumber"))).Build()
	if err != nil {
		return res, fmt.Errorf("putback: building the mark of %s %s: %w", it.Source, it.SequenceNumber, err)
	}
	_, err = p.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(p.Table),
		Key: map[string]types.AttributeValue{
			"source":         &types.AttributeValueMemberS{Value: it.Source},
			"sequenceNumber": &types.AttributeValueMemberS{Value: it.SequenceNumber},
		},
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()})
	var gone *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &gone):
		res.Unmarked = true
	case err != nil:
		return res, fmt.Errorf("putback: %s %s is on %s as %s, but marking its item failed (a run again puts it back a second time, which its consumers drop as a copy within their horizon): %w",
			it.Source, it.SequenceNumber, plan.Stream, res.Sequence, err)
	}
	return res, nil
}

func (p *Putter) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// kinesisSource is the stream and shard an item's record was read from, or
// why it has none to go back to.
func kinesisSource(it *setaside.Item) (streamName, shard, why string) {
	if it.Kind == setaside.ItemMissing {
		return "", "", "a note of records that could no longer be read: it holds no record (its reason names their sequence numbers, which may still be in the stream)"
	}
	a, err := arn.Parse(it.Source)
	if err != nil {
		if it.Category == setaside.KindOutputTooLarge {
			return "", "", "an output its function could not write (output-too-large): it was never on a stream, and its input was applied"
		}
		return "", "", fmt.Sprintf("its source %s is not a stream's ARN", strictjson.QuoteCut(it.Source, 128))
	}
	switch a.Service {
	case "kinesis":
		parts := strings.Split(a.Resource, "/")
		if len(parts) == 3 && parts[0] == "stream" && parts[1] != "" && parts[2] != "" {
			return parts[1], parts[2], ""
		}
		return "", "", fmt.Sprintf("its source %s does not name a stream and shard", strictjson.QuoteCut(it.Source, 128))
	case "dynamodb":
		return "", "", "a DynamoDB stream record: replay its change by writing its item again to the table its source names"
	case "sqs":
		return "", "", "an SQS message that was no on-failure record of Lambda's: it has no stream to go back to (its body is its data)"
	}
	return "", "", fmt.Sprintf("its source is a %s ARN, not a Kinesis stream's", a.Service)
}

func orUnknown(function string) string {
	if function == "" {
		return "the function that set it aside"
	}
	return function
}
