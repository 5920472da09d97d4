package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Tags `replay rebuild` puts on every table it creates (in CreateTable, so
// a table never exists without them). A table is a version that
// delete-version may delete only when it carries TagCreatedBy =
// CreatedByRebuild and TagParameter = the parameter given, and is named
// <TagBase>-vN; use-version and rollback accept those tables and the tables
// the parameter named before (the stack's own views table).
const (
	TagCreatedBy     = "tributary:created-by"
	CreatedByRebuild = "replay rebuild"
	// TagParameter is the current-views parameter the version was built for.
	TagParameter = "tributary:views-parameter"
	// TagBase is the views table the version's name is built on.
	TagBase = "tributary:views-base"
	// TagFrom is the rebuild's -from (RFC 3339): records before it are not
	// in the version.
	TagFrom = "tributary:replayed-from"
	// TagCaughtUp is when the rebuild (or a use-version catch-up) last
	// reached the tip of every shard (RFC 3339).
	TagCaughtUp = "tributary:caught-up-at"
)

// maxTagValue is DynamoDB's limit on a tag value.
const maxTagValue = 256

var versionName = regexp.MustCompile(`^(.+)-v([0-9]{1,9})$`)

// baseOf is the name versions of table are built on: table without its
// -vN suffix.
func baseOf(table string) string {
	if m := versionName.FindStringSubmatch(table); m != nil {
		return m[1]
	}
	return table
}

// versionNumber is N when table is named <base>-vN with N ≥ 2.
func versionNumber(base, table string) (int, bool) {
	m := versionName.FindStringSubmatch(table)
	if m == nil || m[1] != base {
		return 0, false
	}
	n, err := strconv.Atoi(m[2])
	if err != nil || n < 2 || strconv.Itoa(n) != m[2] {
		return 0, false
	}
	return n, true
}

func rebuildTags(param, base string, from time.Time) []types.Tag {
	return []types.Tag{
		{Key: aws.String(TagCreatedBy), Value: aws.String(CreatedByRebuild)},
		{Key: aws.String(TagParameter), Value: aws.String(param)},
		{Key: aws.String(TagBase), Value: aws.String(base)},
		{Key: aws.String(TagFrom), Value: aws.String(from.UTC().Format(time.RFC3339Nano))},
	}
}

func readTags(ctx context.Context, db TableAdmin, arn string) (map[string]string, error) {
	tags := map[string]string{}
	in := &dynamodb.ListTagsOfResourceInput{ResourceArn: aws.String(arn)}
	for {
		out, err := db.ListTagsOfResource(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("listing the tags of %s: %w", arn, err)
		}
		for _, t := range out.Tags {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		if out.NextToken == nil {
			return tags, nil
		}
		in.NextToken = out.NextToken
	}
}

// identity is what is known of a table as a version of the views a
// parameter names.
type identity struct {
	Table      string
	Exists     bool
	Desc       *types.TableDescription
	Tags       map[string]string
	Number     int  // N of <base>-vN; 1 for a table without the suffix
	Rebuilt    bool // tagged by rebuild for this parameter and named <base>-vN
	InHistory  bool // the parameter named it at some time
	Spans      []Span
	From       time.Time // TagFrom
	CaughtUpAt time.Time // TagCaughtUp
}

// Span is a period a table was current: [From, Until), Until zero while it
// still is.
type Span struct{ From, Until time.Time }

func identify(ctx context.Context, db TableAdmin, param, base, table string, hist []Change) (*identity, error) {
	id := &identity{Table: table, Number: 1}
	id.Spans = spans(hist, table)
	id.InHistory = len(id.Spans) > 0
	d, err := describeTable(ctx, db, table)
	if errors.Is(err, ErrNoTable) {
		return id, nil
	}
	if err != nil {
		return nil, err
	}
	id.Exists, id.Desc = true, d
	if id.Tags, err = readTags(ctx, db, aws.ToString(d.TableArn)); err != nil {
		return nil, err
	}
	n, named := versionNumber(base, table)
	if named {
		id.Number = n
	}
	id.Rebuilt = named && id.Tags[TagCreatedBy] == CreatedByRebuild && id.Tags[TagParameter] == param && id.Tags[TagBase] == base
	id.From, _ = time.Parse(time.RFC3339Nano, id.Tags[TagFrom])
	id.CaughtUpAt, _ = time.Parse(time.RFC3339Nano, id.Tags[TagCaughtUp])
	return id, nil
}

// notAVersion says why a table that is neither tagged nor in the history is
// refused.
func (id *identity) notAVersion(param, base string) string {
	var why []string
	if _, ok := versionNumber(base, id.Table); !ok {
		why = append(why, fmt.Sprintf("it is not named %s-vN", base))
	}
	if id.Tags[TagCreatedBy] != CreatedByRebuild {
		why = append(why, fmt.Sprintf("it has no %s=%s tag", TagCreatedBy, CreatedByRebuild))
	} else if id.Tags[TagParameter] != param {
		why = append(why, fmt.Sprintf("its %s tag is %q", TagParameter, id.Tags[TagParameter]))
	} else if id.Tags[TagBase] != base {
		why = append(why, fmt.Sprintf("its %s tag is %q", TagBase, id.Tags[TagBase]))
	}
	return fmt.Sprintf("%s is not a version of the views parameter %s names (%s): %s", id.Table, param, base, strings.Join(why, ", "))
}

// Position is how far into one shard a version got: the highest sequence
// number of the shard applied to any of its items (each window and state
// item keeps one fence per shard, package state).
type Position struct {
	Shard    string
	Sequence string
	// Arrival is when that record reached the stream (zero when not looked
	// up, or Gone).
	Arrival time.Time
	// Gone: the stream no longer holds the record (past its retention, or
	// the shard expired), so what came after it cannot all be read.
	Gone bool
}

// fencePrefix starts the attribute holding an item's fence for a shard
// (package state: f_<shard id>, the sequence number zero-padded to a fixed
// width so that string order is numeric order).
const fencePrefix = "f_"

// scanned is what scanVersion finds in a version.
type scanned struct {
	// items counts the items (windows, per-key state, watermarks; not the
	// dedupe ledger's nor window listings).
	items int
	// fences is the highest fence per shard: the newest record any item
	// holds.
	fences map[string]string
	// committed is, per pipeline and shard, the last record the pipeline
	// finished the batch of (its watermark item's position): every record
	// of the pipeline up to it is in the version. A batch cut short
	// (Ctrl-C, expired credentials) leaves some of its items written, with
	// fences up to its last record, and others not, so the highest fence
	// is no such position.
	committed map[string]map[string]string
	// watermarks: the table has watermark items, so it is a windowed
	// pipeline's and committed says where its batches finished (a table
	// without, a projection's, has only fences).
	watermarks bool
	// samples: some item holds a fence of state.SampleShard.
	samples bool
}

// committedThrough is, per shard, the lowest position of the pipelines
// named (every one of the table's when none is): where all of them had
// finished their batches. A shard where a named pipeline finished no batch
// (a run cut short in its first, a pipeline new to the table) has none:
// the others' positions are past records that pipeline never applied.
func (sc scanned) committedThrough(pipelines []string) map[string]string {
	out := map[string]string{}
	for p, shards := range sc.committed {
		if len(pipelines) > 0 && !slices.Contains(pipelines, p) {
			continue // a pipeline that no longer runs here: its position stays behind
		}
		for shard, seq := range shards {
			if c, ok := out[shard]; !ok || stream.CompareSequence(seq, c) < 0 {
				out[shard] = seq
			}
		}
	}
	for _, p := range pipelines {
		for shard := range out {
			if _, ok := sc.committed[p][shard]; !ok {
				delete(out, shard)
			}
		}
	}
	return out
}

// unfinished is the pipelines of those named that finished no batch of
// shard.
func (sc scanned) unfinished(pipelines []string, shard string) []string {
	var out []string
	for _, p := range pipelines {
		if _, ok := sc.committed[p][shard]; !ok {
			out = append(out, p)
		}
	}
	return out
}

// scanVersion reads every item of table once (a consistent Scan): it
// counts them and finds the highest fence per shard and the position each
// shard's batches were committed through. The fences of state.SampleShard
// (records `make invoke` sent, which no stream holds) are not a position:
// they are left out, and samples reports whether any item has one. read,
// if not nil, is called after each page (a megabyte of items) with the
// items read so far: a table of millions of items takes minutes.
func scanVersion(ctx context.Context, db itemScanner, table string, read func(items int)) (scanned, error) {
	sc := scanned{fences: map[string]string{}, committed: map[string]map[string]string{}}
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		out, err := db.Scan(ctx, in)
		if err != nil {
			return scanned{}, fmt.Errorf("reading the items of %s: %w", table, err)
		}
		for _, it := range out.Items {
			if state.IsLedgerItem(it) || state.IsListingItem(it) || state.IsHandoverItem(it) {
				continue // the dedupe ledger, the finalize's listings, a replay's handover: not results
			}
			sc.items++
			for name, v := range it {
				s, ok := v.(*types.AttributeValueMemberS)
				if !ok || !strings.HasPrefix(name, fencePrefix) {
					continue
				}
				shard := strings.TrimPrefix(name, fencePrefix)
				if shard == state.SampleShard {
					sc.samples = true
					continue
				}
				if s.Value > sc.fences[shard] {
					sc.fences[shard] = s.Value
				}
			}
			pipeline, shard, through, ok := state.CommittedThrough(it)
			if !ok {
				continue
			}
			sc.watermarks = true
			if through != "" {
				if sc.committed[pipeline] == nil {
					sc.committed[pipeline] = map[string]string{}
				}
				sc.committed[pipeline][shard] = unpad(through)
			}
		}
		if out.LastEvaluatedKey == nil {
			break
		}
		if read != nil {
			read(sc.items)
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	for shard, f := range sc.fences {
		sc.fences[shard] = unpad(f)
	}
	return sc, nil
}

func unpad(fence string) string {
	s := strings.TrimLeft(fence, "0")
	if s == "" {
		return "0"
	}
	return s
}

func positionsOf(fences map[string]string) []Position {
	out := make([]Position, 0, len(fences))
	for shard, seq := range fences {
		out = append(out, Position{Shard: shard, Sequence: seq})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shard < out[j].Shard })
	return out
}

// arrivalOf reads the record seq of shard and returns when it reached the
// stream; ok is false when the stream no longer holds it.
func arrivalOf(ctx context.Context, kin StreamReader, arn, shard, seq string) (time.Time, bool, error) {
	it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamARN: aws.String(arn), ShardId: aws.String(shard),
		ShardIteratorType: kintypes.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(seq)})
	var invalid *kintypes.InvalidArgumentException
	var missing *kintypes.ResourceNotFoundException
	if errors.As(err, &invalid) || errors.As(err, &missing) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("iterator of shard %s at %s: %w", shard, seq, err)
	}
	iter := it.ShardIterator
	// A page can come back empty before the records behind it; a few pages
	// are enough to reach a record that is there.
	for range 5 {
		out, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1), StreamARN: aws.String(arn)})
		if err != nil {
			return time.Time{}, false, fmt.Errorf("reading shard %s at %s: %w", shard, seq, err)
		}
		if len(out.Records) > 0 {
			r := out.Records[0]
			if unpad(aws.ToString(r.SequenceNumber)) != unpad(seq) {
				return time.Time{}, false, nil
			}
			return aws.ToTime(r.ApproximateArrivalTimestamp), true, nil
		}
		if out.NextShardIterator == nil || aws.ToInt64(out.MillisBehindLatest) == 0 {
			break
		}
		iter = out.NextShardIterator
	}
	return time.Time{}, false, nil
}

// VersionInfo is one version of the views, as `replay versions` lists it.
type VersionInfo struct {
	Table   string
	Number  int // 1 for the stack's own table, N for <base>-vN
	Current bool
	// Rebuilt: created by replay rebuild for this parameter (tagged).
	Rebuilt bool
	// Deleted: the parameter named it once, and it no longer exists.
	Deleted bool
	// From is the rebuild's -from; CaughtUpAt when it last reached the
	// tip of every shard (zero if unknown).
	From, CaughtUpAt time.Time
	// Spans are the periods it was current (from the parameter's history).
	Spans []Span
	// Items is the number of items (windows, per-key state, one watermark
	// per shard), counted by reading them all.
	Items int
	// Positions are how far into each shard it got.
	Positions []Position
	// Samples: some items hold records of console samples `make invoke`
	// sent (state.SampleShard); they are in Items, not in Positions.
	Samples bool
}

// VersionsOptions say what Versions reads and where it shows how far it got.
type VersionsOptions struct {
	// Stream, when given, is the events stream each position's arrival
	// time is read from.
	Stream string
	// Progress receives a line as each version's items are read (every item
	// of a table: minutes for millions), then the count so far every
	// ProgressEvery (default 1 s); nil: none.
	Progress io.Writer
	// InPlace rewrites the progress line in place (a terminal).
	InPlace       bool
	ProgressEvery time.Duration
}

// Versions lists the versions of the views the registry names: the tables
// the parameter named (its history) and the tables rebuild created for it,
// each with its item count and the position it reached on every shard.
// With a stream, each position also gets its arrival time (or Gone).
func (r *Replayer) Versions(ctx context.Context, vo VersionsOptions) ([]VersionInfo, error) {
	if vo.ProgressEvery < 0 {
		return nil, fmt.Errorf("VersionsOptions.ProgressEvery %s: must not be negative", vo.ProgressEvery)
	}
	opts := Options{ProgressEvery: vo.ProgressEvery}
	if opts.ProgressEvery == 0 {
		opts.ProgressEvery = time.Second
	}
	prog := newProgress(vo.Progress, "", vo.InPlace)
	defer prog.end()
	stream := vo.Stream
	current, _, err := r.reg.Current(ctx)
	if err != nil {
		return nil, err
	}
	hist, err := r.reg.History(ctx)
	if err != nil {
		return nil, err
	}
	base := baseOf(current)
	names := map[string]bool{current: true}
	for _, c := range hist {
		names[c.Table] = true
	}
	listed, err := r.listTables(ctx, base+"-v")
	if err != nil {
		return nil, err
	}
	for _, t := range listed {
		if _, ok := versionNumber(base, t); ok {
			names[t] = true
		}
	}
	var arn string
	if stream != "" {
		sum, err := r.kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			return nil, fmt.Errorf("describing stream %s: %w", stream, err)
		}
		arn = aws.ToString(sum.StreamDescriptionSummary.StreamARN)
	}
	var out []VersionInfo
	ordered := make([]string, 0, len(names))
	for name := range names {
		ordered = append(ordered, name)
	}
	sort.Strings(ordered)
	for n, name := range ordered {
		id, err := identify(ctx, r.db, r.reg.Name(), base, name, hist)
		if err != nil {
			return nil, err
		}
		if id.Exists && !id.Rebuilt && !id.InHistory && name != current {
			continue // named like a version, but not one of ours
		}
		v := VersionInfo{Table: name, Number: id.Number, Current: name == current, Rebuilt: id.Rebuilt, Deleted: !id.Exists,
			From: id.From, CaughtUpAt: id.CaughtUpAt, Spans: id.Spans}
		if id.Exists {
			why := fmt.Sprintf("(version %d of %d) to count them and find where each shard got to", n+1, len(ordered))
			prog.status(fmt.Sprintf("reading the items of %s %s", name, why), "")
			sc, err := scanVersion(ctx, r.db, name, reading(opts, prog, name, why))
			if err != nil {
				return nil, err
			}
			v.Items, v.Positions, v.Samples = sc.items, positionsOf(sc.fences), sc.samples
			shown := time.Now()
			for i := range v.Positions {
				if arn == "" {
					break
				}
				if time.Since(shown) >= opts.ProgressEvery {
					shown = time.Now()
					prog.status(fmt.Sprintf("reading when the last record %s holds of each shard arrived: %d of %d shards", name, i, len(v.Positions)), "")
				}
				p := &v.Positions[i]
				at, ok, err := arrivalOf(ctx, r.kin, arn, p.Shard, p.Sequence)
				if err != nil {
					return nil, err
				}
				p.Arrival, p.Gone = at, !ok
			}
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Number != out[j].Number {
			return out[i].Number < out[j].Number
		}
		return out[i].Table < out[j].Table
	})
	return out, nil
}

// listTables lists the tables whose names start with prefix.
func (r *Replayer) listTables(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	in := &dynamodb.ListTablesInput{}
	for {
		page, err := r.db.ListTables(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("listing tables: %w", err)
		}
		for _, t := range page.TableNames {
			if strings.HasPrefix(t, prefix) {
				out = append(out, t)
			}
		}
		if page.LastEvaluatedTableName == nil {
			return out, nil
		}
		in.ExclusiveStartTableName = page.LastEvaluatedTableName
	}
}

// DeletePlan is what DeleteVersion checked, and whether it deleted.
type DeletePlan struct {
	Table   string
	Checked []string
	Deleted bool
}

// DeleteVersion deletes table, a version `replay rebuild` created for the
// views reg names, when yes is true; otherwise (a dry run) it only checks.
// It refuses (ErrRefused, naming the "table" field) the current table, a
// table that does not exist, and any table that is not tagged by rebuild
// for this parameter or not named <base>-vN: the stack's own views table
// and every other table are never deleted.
func DeleteVersion(ctx context.Context, db TableAdmin, reg *Registry, table string, yes bool) (*DeletePlan, error) {
	plan := &DeletePlan{Table: table}
	current, _, err := reg.Current(ctx)
	if err != nil {
		return plan, err
	}
	if table == current {
		return plan, refuse("table", "%s is the current views table (parameter %s names it); point the readers elsewhere first (replay use-version or replay rollback)", table, reg.Name())
	}
	hist, err := reg.History(ctx)
	if err != nil {
		return plan, err
	}
	base := baseOf(current)
	id, err := identify(ctx, db, reg.Name(), base, table, hist)
	if err != nil {
		return plan, err
	}
	if !id.Exists {
		return plan, refuse("table", "%s does not exist", table)
	}
	if !id.Rebuilt {
		reason := id.notAVersion(reg.Name(), base)
		if id.InHistory {
			reason = fmt.Sprintf("%s was not created by replay rebuild (it is the stack's own views table, or was made by hand): delete-version deletes only tables rebuild created; remove it with the stack that owns it", table)
		}
		return plan, refuse("table", "%s", reason)
	}
	if aws.ToBool(id.Desc.DeletionProtectionEnabled) {
		return plan, refuse("table", "%s has deletion protection enabled; turn it off first if you mean to delete it", table)
	}
	plan.Checked = append(plan.Checked,
		fmt.Sprintf("%s is not current (parameter %s names %s)", table, reg.Name(), current),
		fmt.Sprintf("%s was created by replay rebuild for parameter %s (tags %s, %s) and is named %s-v%d", table, reg.Name(), TagCreatedBy, TagParameter, base, id.Number))
	switch {
	case len(id.Spans) == 0:
		plan.Checked = append(plan.Checked, fmt.Sprintf("%s was never current", table))
	default:
		last := id.Spans[len(id.Spans)-1]
		plan.Checked = append(plan.Checked, fmt.Sprintf("%s was last current until %s", table, last.Until.UTC().Format(time.RFC3339)))
	}
	if prev, err := reg.Previous(ctx); err == nil && prev.Table == table {
		plan.Checked = append(plan.Checked, fmt.Sprintf("%s is what replay rollback returns to: after deleting it, rollback cannot", table))
	}
	if !yes {
		return plan, nil
	}
	// The parameter may have moved since the checks (a rollback racing
	// this command): check once more right before deleting.
	if now, _, err := reg.Current(ctx); err != nil {
		return plan, err
	} else if now == table {
		return plan, refuse("table", "%s became the current views table while checking; nothing deleted", table)
	}
	if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
		return plan, fmt.Errorf("deleting views table %s: %w", table, err)
	}
	plan.Deleted = true
	return plan, nil
}
