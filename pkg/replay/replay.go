package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
)

// StreamReader is what a replay needs of Kinesis.
type StreamReader interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

var _ StreamReader = (*kinesis.Client)(nil)

// HandlerFor builds the consumer a replay feeds into table. Records it
// cannot apply it gives to aside (a setaside.Reporting sink: the live
// function set them aside already), and the replay counts them and prints
// each with its field and reason.
type HandlerFor func(table string, aside *setaside.Sink) (BatchHandler, error)

// BatchHandler is the consumer a replay feeds: the aggregate Processor (its
// HandleBatch), given Lambda-shaped Kinesis events of one shard in order.
type BatchHandler interface {
	HandleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error)
}

// CarrySpiller is a BatchHandler that keeps partials of open windows apart
// from the table's window items (the aggregate Processor's shard carries):
// a replay has it write them out before it feeds the version, so that the
// records it applies again meet their windows' fences.
type CarrySpiller interface {
	SpillCarries(ctx context.Context) error
}

// tool is the command the messages name (Options.Tool).
func (o *Options) tool() string {
	if o.Tool == "" {
		return "replay"
	}
	return o.Tool
}

// Options say what to replay and how. Zero values take the defaults;
// negative ones are refused.
type Options struct {
	// Tool is the command a message names for what to run next
	// ("eventstore"); "replay" when empty.
	Tool string
	// Unwindowed says the views hold no windows (the event-sourced views
	// of package projection): the summary leaves out why windowed
	// versions differ (sessions, windows, late revisions).
	Unwindowed bool
	// Stream is the events stream's name. Required.
	Stream string
	// From is where every shard is read from (AT_TIMESTAMP). Required by
	// Run; it must not be in the future nor older than the stream's
	// retention.
	From time.Time
	// Target is, for Run, the new version's name (empty: NextVersion of the
	// current table; it must be <base>-vN and not exist); for UseVersion,
	// the version to point the readers at (required).
	Target string
	// Handover is how long to keep following after the swap; at least the
	// readers' refresh interval (VIEWS_REFRESH_SECONDS). Default 1 minute.
	Handover time.Duration
	// BatchSize is the GetRecords limit, so the largest batch (default 500,
	// at most 10000).
	BatchSize int32
	// Poll is the wait after an empty page or at the tip (default 250 ms;
	// Kinesis allows 5 GetRecords per second per shard).
	Poll time.Duration
	// ProgressEvery is how often the progress is shown (default 1 s).
	ProgressEvery time.Duration
	// Progress receives the output (nil: none).
	Progress io.Writer
	// InPlace rewrites one progress line in place (a terminal); otherwise a
	// progress line is written each time it changes.
	InPlace bool
	// MaxAttempts bounds the attempts of a record the handler keeps
	// reporting as failed before it is skipped and counted (default 3), and
	// of a batch whose handler returns an error before the replay stops.
	MaxAttempts int
	// DryRun only checks and describes what would be done.
	DryRun bool
	// AllowEmpty lets the readers be pointed at a version that holds no
	// items while the current one holds some; without it that swap is
	// refused.
	AllowEmpty bool
	// Margin is, for UseVersion, how long before the last record a version
	// finished the batch of on each shard (its watermark items' position;
	// a table without them, the newest record its items hold) its catch-up
	// starts (default 1 minute). With a
	// ParallelizationFactor above 1 the live function applies different
	// keys of a shard concurrently, so records just before that one may not
	// be in the version; the fences skip the ones that are.
	Margin time.Duration
	// Pipelines, for UseVersion, names the pipelines the catch-up applies:
	// their watermark items say where the version got to (none: every
	// pipeline's that has written the table, a removed one's too); a
	// shard none of them finished a batch of is read from the version's
	// start. Only with none named, and no watermark item in the version
	// (a projection's table), are its fences where it got to.
	Pipelines []string
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Archive, for Run, is the events stream's archive in S3 (package
	// archive). With it, a From older than the stream's retention is read
	// from the archive up to the seam (ArchiveUntil), and from the stream
	// after it, each shard joined at a sequence number (see the package doc).
	Archive ArchiveSource
	// ArchiveUntil is the seam: records that arrived before it are read
	// from the archive, the rest from the stream. Zero: SeamMargin inside
	// the stream's retention when From is older than it (else the archive
	// is not read). It must lie after From, before now, and within the
	// stream's retention.
	ArchiveUntil time.Time
}

// Result is what a replay did.
type Result struct {
	// Current is the table current when the command started (after a swap,
	// the previous one); Target the version built or pointed at.
	Current, Target string
	Parameter       string
	Plan            []string // what was (or, dry run, would be) done
	Shards          []ShardStats
	Read, Applied   int
	Skipped         int // records the handler kept failing, skipped after MaxAttempts
	// SetAside counts the records of Applied the handler could never
	// apply and set aside (each printed with its field and reason).
	SetAside int
	// Archived counts the records of Read that came from the archive.
	Archived int
	// Seam is where the archive part ended (zero: the archive was not read).
	Seam     time.Time
	CaughtUp time.Duration
	Swapped  bool
	// CurrentRebuilt: after a swap, Current is a version replay rebuild
	// created for Parameter, so delete-version accepts it; false for the
	// stack's own views table (or one made by hand), which it refuses.
	CurrentRebuilt bool
	// CurrentItems and TargetItems are the two tables' item counts at the
	// end, read in full (after a swap).
	CurrentItems, TargetItems int
	// Summary says what was compared and why the counts may differ.
	Summary []string
}

// ShardStats is one shard's progress.
type ShardStats struct {
	Shard              string
	Read, Applied      int
	Archived           int // of Read, from the archive
	Skipped            int
	SetAside           int   // of Applied, set aside by the handler
	MillisBehindLatest int64 // of the last page read; meaningful once Started
	Started            bool  // a page was read
	LastArrival        time.Time
	CaughtUp, Done     bool
	Waiting            bool // for its parent shards to finish
}

// Replayer rebuilds views into new table versions and moves the readers
// between versions.
type Replayer struct {
	kin StreamReader
	db  TableAdmin
	reg *Registry
}

// New returns a Replayer reading kin, creating tables with db and swapping
// the registry reg.
func New(kin StreamReader, db TableAdmin, reg *Registry) *Replayer {
	return &Replayer{kin: kin, db: db, reg: reg}
}

func (o *Options) defaults() error {
	if o.Stream == "" {
		return errors.New("Options.Stream: the events stream is required")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Handover", o.Handover}, {"Poll", o.Poll}, {"ProgressEvery", o.ProgressEvery}, {"Margin", o.Margin}} {
		if d.v < 0 {
			return fmt.Errorf("Options.%s %s: must not be negative", d.name, d.v)
		}
	}
	if o.BatchSize < 0 || o.BatchSize > 10000 {
		return fmt.Errorf("Options.BatchSize %d: must be from 1 to 10000 (GetRecords' limit), or 0 for 500", o.BatchSize)
	}
	if o.MaxAttempts < 0 {
		return fmt.Errorf("Options.MaxAttempts %d: must not be negative", o.MaxAttempts)
	}
	if o.Handover == 0 {
		o.Handover = time.Minute
	}
	if o.BatchSize == 0 {
		o.BatchSize = 500
	}
	if o.Poll == 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.ProgressEvery == 0 {
		o.ProgressEvery = time.Second
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 3
	}
	if o.Margin == 0 {
		o.Margin = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// streamInfo is what a replay reads of the events stream up front.
type streamInfo struct {
	name, arn string
	retention time.Duration
	created   time.Time
	shards    []kintypes.Shard
}

func (r *Replayer) describeStream(ctx context.Context, name string) (*streamInfo, error) {
	sum, err := r.kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	var nf *kintypes.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, refuse("stream", "stream %s does not exist", name)
	}
	if err != nil {
		return nil, fmt.Errorf("describing stream %s: %w", name, err)
	}
	d := sum.StreamDescriptionSummary
	st := &streamInfo{name: name, arn: aws.ToString(d.StreamARN), created: aws.ToTime(d.StreamCreationTimestamp),
		retention: time.Duration(aws.ToInt32(d.RetentionPeriodHours)) * time.Hour}
	if st.retention <= 0 {
		st.retention = 24 * time.Hour // Kinesis's minimum and default
	}
	in := &kinesis.ListShardsInput{StreamName: aws.String(name)}
	for {
		out, err := r.kin.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("listing shards of %s: %w", name, err)
		}
		st.shards = append(st.shards, out.Shards...)
		if out.NextToken == nil {
			return st, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

func hours(d time.Duration) string { return fmt.Sprintf("%dh", int(d/time.Hour)) }

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// job is one replay into a table, and the swap that ends it.
type job struct {
	kind    string // "rebuild" or "use-version"
	field   string // the input an empty result is refused as
	current string
	version int64
	target  string
	stream  *streamInfo
	starts  map[string]time.Time
	seam    *seamPlan
	tagged  bool // the target is a table rebuild created (and tagged)
	res     *Result
	prog    *progress
}

// Run rebuilds the views: it replays the stream from opts.From into a new
// version of the current views table (tagged as rebuild's, see TagCreatedBy),
// built by handlerFor(newTable), swaps the registry to it once every shard
// has caught up, and follows the stream for the handover period (see the
// package doc). The current table is left in place.
//
// It refuses (ErrRefused), before creating anything, a From in the future
// or older than the stream's retention (unless opts.Archive holds it: then
// the archive is read up to opts.ArchiveUntil and the stream after it, and
// a gap or overlap at that seam is refused), and a Target that is the current
// table, exists, or is not named <base>-vN; and, after catching up, a swap
// to a version that holds no items while the current one holds some
// (unless AllowEmpty): the version is then left in place, not current.
func (r *Replayer) Run(ctx context.Context, opts Options, handlerFor HandlerFor) (*Result, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if opts.From.IsZero() {
		return nil, errors.New("Options.From: the timestamp to replay from is required")
	}
	prog := newProgress(opts.Progress, "", opts.InPlace)
	now := opts.Now()
	if opts.From.After(now) {
		return nil, refuse("from", "%s is in the future (it is %s now): there is nothing to replay from there yet", stamp(opts.From), stamp(now))
	}
	current, version, err := r.reg.Current(ctx)
	if err != nil {
		return nil, err
	}
	base := baseOf(current)
	target := opts.Target
	if target == "" {
		if target, err = r.nextFree(ctx, current); err != nil {
			return nil, err
		}
	}
	if target == current {
		return nil, refuse("to-table", "%s is the current views table; a rebuild goes into a new table", target)
	}
	if _, ok := versionNumber(base, target); !ok {
		return nil, refuse("to-table", "%s is not named %s-vN (N from 2): delete-version and rollback recognise versions by that name", target, base)
	}
	if _, err := describeTable(ctx, r.db, target); err == nil {
		return nil, refuse("to-table", "%s already exists; choose another -to-table, or point the readers at it with %s use-version", target, opts.tool())
	} else if !errors.Is(err, ErrNoTable) {
		return nil, err
	}
	if len(r.reg.Name()) > maxTagValue || len(base) > maxTagValue {
		return nil, refuse("parameter", "parameter name %s or table name %s is longer than a DynamoDB tag value (%d characters), so the version could not be tagged", r.reg.Name(), base, maxTagValue)
	}
	res := &Result{Current: current, Target: target, Parameter: r.reg.Name()}
	plan, err := PlanVersion(ctx, r.db, current, target)
	if err != nil {
		return nil, err
	}
	plan.Input.Tags = rebuildTags(r.reg.Name(), base, opts.From)
	st, err := r.describeStream(ctx, opts.Stream)
	if err != nil {
		return nil, err
	}
	oldest := now.Add(-st.retention)
	if opts.From.Before(oldest) && opts.Archive == nil {
		return nil, refuse("from", "%s is older than stream %s keeps records (RetentionPeriodHours %d: nothing that arrived before %s is left), so a rebuild from there would silently miss them; give a -from within the last %s, or -archive-bucket, the bucket the stack archives the stream to",
			stamp(opts.From), st.name, int(st.retention/time.Hour), stamp(oldest), hours(st.retention))
	}
	var seam *seamPlan
	if opts.Archive != nil && (opts.From.Before(oldest) || !opts.ArchiveUntil.IsZero()) {
		at := opts.ArchiveUntil
		if at.IsZero() {
			at = oldest.Add(SeamMargin)
		}
		switch {
		case !at.After(opts.From):
			return nil, refuse("archive-until", "%s is not after -from %s: the archive part would be empty", stamp(at), stamp(opts.From))
		case at.After(now):
			return nil, refuse("archive-until", "%s is in the future (it is %s now)", stamp(at), stamp(now))
		case at.Before(oldest):
			return nil, refuse("archive-until", "%s is older than stream %s keeps records (since %s): the stream part after it would miss records; give an -archive-until within the last %s",
				stamp(at), st.name, stamp(oldest), hours(st.retention))
		}
		if seam, err = r.planSeam(ctx, opts, st, at, prog); err != nil {
			return nil, err
		}
		res.Seam = at
	}
	res.Plan = plan.Describe()
	if seam != nil {
		res.Plan = append(res.Plan, fmt.Sprintf("read the archive of %s in bucket %s (%d shards) for the records that arrived from %s to the seam at %s; then, on each shard, the stream after the last archived record (checked: no gap, no overlap)",
			st.name, seam.bucket, len(seam.shards), stamp(opts.From), stamp(seam.at)))
	}
	res.Plan = append(res.Plan,
		fmt.Sprintf("replay stream %s (%d shards, closed parents before their children) from %s into %s", st.name, len(st.shards), stamp(opts.From), target),
		fmt.Sprintf("when every shard is caught up, and %s holds items (or -allow-empty), write %s into parameter %s (now %s)", target, target, r.reg.Name(), current),
		fmt.Sprintf("then keep following for %s (the handover), and leave %s in place", opts.Handover, current))
	if opts.DryRun {
		for _, l := range res.Plan {
			prog.printf("dry run: %s", l)
		}
		return res, nil
	}
	for _, l := range res.Plan[:len(plan.Describe())] {
		prog.printf("%s", l)
	}
	if err := plan.Create(ctx, r.db); err != nil {
		return nil, err
	}
	return r.follow(ctx, opts, &job{kind: "rebuild", field: "from", tagged: true, current: current, version: version, target: target, stream: st, seam: seam, res: res, prog: prog}, handlerFor)
}

// UseVersion points the readers at an existing version (opts.Target) with
// the checks a rebuild's swap has: the version must be one (tagged by
// rebuild for this parameter, or named by the parameter before), it is
// first caught up — the stream is replayed into it from where it got to on
// each shard (where its batches finished, see Pipelines; less Margin), so
// the records the live functions applied while it was not current are in
// it — and it must hold items if the current one does (unless
// AllowEmpty). It refuses a version whose gap the stream no longer holds
// (it stopped being current, or its newest record arrived, longer ago
// than the stream's retention).
func (r *Replayer) UseVersion(ctx context.Context, opts Options, handlerFor HandlerFor) (*Result, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	target := opts.Target
	if target == "" {
		return nil, errors.New("Options.Target: the version to use is required")
	}
	prog := newProgress(opts.Progress, "", opts.InPlace)
	now := opts.Now()
	current, version, err := r.reg.Current(ctx)
	if err != nil {
		return nil, err
	}
	if target == current {
		return nil, refuse("table", "%s is already the current views table (parameter %s names it)", target, r.reg.Name())
	}
	hist, err := r.reg.History(ctx)
	if err != nil {
		return nil, err
	}
	base := baseOf(current)
	id, err := identify(ctx, r.db, r.reg.Name(), base, target, hist)
	if err != nil {
		return nil, err
	}
	switch {
	case !id.Exists:
		return nil, refuse("table", "%s does not exist", target)
	case !id.Rebuilt && !id.InHistory:
		return nil, refuse("table", "%s; use-version points readers only at versions", id.notAVersion(r.reg.Name(), base))
	case id.Desc.TableStatus != types.TableStatusActive:
		return nil, refuse("table", "%s is %s, not ACTIVE", target, id.Desc.TableStatus)
	}
	st, err := r.describeStream(ctx, opts.Stream)
	if err != nil {
		return nil, err
	}
	oldest := now.Add(-st.retention)
	sc, err := scanVersion(ctx, r.db, target, reading(opts, prog, target, "for where it got to on each shard"))
	if err != nil {
		return nil, err
	}
	items := sc.items
	if items == 0 && !opts.AllowEmpty {
		has, err := hasItems(ctx, r.db, current)
		if err != nil {
			return nil, err
		}
		if has {
			return nil, refuse("table", "%s holds no items while %s (current) holds some: the readers would see no windows; give -allow-empty if that is what you want", target, current)
		}
	}
	if n := len(id.Spans); n > 0 && id.Spans[n-1].Until.Before(oldest) {
		return nil, refuse("table", "%s stopped being current at %s, longer ago than stream %s keeps records (%s): what the live functions applied since then can no longer all be replayed into it; rebuild from a time instead",
			target, stamp(id.Spans[n-1].Until), st.name, hours(st.retention))
	}
	// Shards without a fence start where the version starts: the rebuild's
	// -from, or (the stack's own table) the stream's creation.
	opts.From = st.created
	if id.Rebuilt && !id.From.IsZero() {
		opts.From = id.From
	}
	if len(id.Spans) == 0 && opts.From.Before(oldest) {
		return nil, refuse("table", "%s was never current and starts at %s, longer ago than stream %s keeps records (%s): shards it has no record of cannot be read from there; rebuild from a time instead",
			target, stamp(opts.From), st.name, hours(st.retention))
	}
	committed := sc.committedThrough(opts.Pipelines)
	// A table without watermark items, a projection's, has only its
	// fences. A windowed pipeline's (pipelines named) has one per shard
	// once a batch of it finished: without any, every shard's run was cut
	// short in its first batch, and its fences are past records it never
	// applied.
	byFences := !sc.watermarks && len(opts.Pipelines) == 0
	starts := map[string]time.Time{}
	var from []string
	for _, sh := range st.shards {
		shard := aws.ToString(sh.ShardId)
		// Where the version's batches were committed through, not the
		// newest record an item holds: a batch cut short leaves items
		// written past records it did not apply.
		seq, ok := committed[shard]
		if byFences {
			seq, ok = sc.fences[shard]
		}
		if !ok {
			why := "no record of it in " + target + " yet"
			if _, some := sc.fences[shard]; some && !byFences {
				why = "no batch of it finished in " + target + ": a run was cut short in its first"
				if behind := sc.unfinished(opts.Pipelines, shard); len(behind) < len(opts.Pipelines) {
					why = "pipeline " + strings.Join(behind, ", ") + " finished no batch of it in " + target + ": a run was cut short in its first, or the pipeline is new to it"
				}
			}
			from = append(from, fmt.Sprintf("%s from %s (%s)", shard, stamp(opts.From), why))
			continue
		}
		at, ok, err := arrivalOf(ctx, r.kin, st.arn, shard, seq)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, refuse("table", "%s got to sequence number %s of shard %s, which stream %s no longer holds (it keeps %s): the records after it may be gone; rebuild from a time instead",
				target, seq, shard, st.name, hours(st.retention))
		}
		starts[shard] = at.Add(-opts.Margin)
		what := "the last record of its last finished batch there"
		if byFences {
			what = "its newest record there"
		}
		from = append(from, fmt.Sprintf("%s from %s (%s arrived %s)", shard, stamp(starts[shard]), what, stamp(at)))
	}
	res := &Result{Current: current, Target: target, Parameter: r.reg.Name()}
	res.Plan = append([]string{fmt.Sprintf("catch %s (%d items) up on stream %s from where it got to; records already in it are skipped by its fences:", target, items, st.name)},
		prefixed("  ", from)...)
	res.Plan = append(res.Plan,
		fmt.Sprintf("when every shard is caught up, write %s into parameter %s (now %s)", target, r.reg.Name(), current),
		fmt.Sprintf("then keep following for %s (the handover), and leave %s in place", opts.Handover, current))
	if opts.DryRun {
		for _, l := range res.Plan {
			prog.printf("dry run: %s", l)
		}
		return res, nil
	}
	for _, l := range res.Plan[:len(from)+1] {
		prog.printf("%s", l)
	}
	return r.follow(ctx, opts, &job{kind: "use-version", field: "table", tagged: id.Rebuilt, current: current, version: version, target: target, stream: st, starts: starts, res: res, prog: prog}, handlerFor)
}

// Rollback points the readers back at the table the parameter named before
// the current one (Registry.Previous), with UseVersion's checks.
func (r *Replayer) Rollback(ctx context.Context, opts Options, handlerFor HandlerFor) (*Result, error) {
	prev, err := r.reg.Previous(ctx)
	if err != nil {
		return nil, err
	}
	opts.Target = prev.Table
	return r.UseVersion(ctx, opts, handlerFor)
}

func prefixed(p string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = p + l
	}
	return out
}

// follow replays the stream into j.target until every shard is caught up,
// checks the result is plausible, swaps and follows for the handover.
func (r *Replayer) follow(ctx context.Context, opts Options, j *job, handlerFor HandlerFor) (*Result, error) {
	res, prog := j.res, j.prog
	// Publishers on the target ask the current version which results it
	// already put on the output stream (package aggregate, handover.go):
	// the replay's own processor from its first batch, the live functions
	// once they have moved. Views without windows publish nothing.
	if !opts.Unwindowed {
		if err := state.NewViews(r.db, j.target, nil).SetHandover(ctx, j.current, opts.Now()); err != nil {
			return res, err
		}
	}
	aside := &asides{byShard: map[string][]setaside.Record{}}
	h, err := handlerFor(j.target, setaside.Reporting(aside.add))
	if err != nil {
		return res, err
	}
	// A version caught up again (use-version, rollback) may hold carries
	// its functions wrote before the readers left it: out with them before
	// any record is applied again.
	if c, ok := h.(CarrySpiller); ok {
		if err := c.SpillCarries(ctx); err != nil {
			return res, fmt.Errorf("writing out the windows %s's shards carried: %w", j.target, err)
		}
	}
	run := &run{opts: opts, kin: r.kin, archive: opts.Archive, seam: j.seam, stream: j.stream.name, h: h, asides: aside, arn: j.stream.arn, region: regionOf(j.stream.arn), starts: j.starts, progress: prog,
		stop: make(chan struct{}), caughtUp: make(chan struct{})}
	// Shards the stream no longer lists are read from the archive first,
	// one after the other, oldest first; then the stream's shards.
	var archived *shardRun
	if j.seam != nil {
		for _, a := range j.seam.archiveOnlyOrder() {
			s := &shardRun{id: a.shard, seam: a, done: make(chan struct{}), stats: ShardStats{Shard: a.shard, Waiting: true}}
			if archived != nil {
				s.parents = []*shardRun{archived}
			}
			run.shards = append(run.shards, s)
			archived = s
		}
	}
	for _, sh := range j.stream.shards {
		s := &shardRun{id: aws.ToString(sh.ShardId), shard: sh, done: make(chan struct{}), stats: ShardStats{Shard: aws.ToString(sh.ShardId), Waiting: true}}
		if j.seam != nil {
			s.seam = j.seam.shards[s.id]
		}
		run.shards = append(run.shards, s)
	}
	byID := map[string]*shardRun{}
	for _, s := range run.shards {
		byID[s.id] = s
	}
	for _, s := range run.shards {
		if s.seam != nil && s.seam.archiveOnly {
			continue
		}
		if archived != nil {
			s.parents = append(s.parents, archived)
		}
		for _, p := range []*string{s.shard.ParentShardId, s.shard.AdjacentParentShardId} {
			if ps, ok := byID[aws.ToString(p)]; ok {
				s.parents = append(s.parents, ps)
			}
		}
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(run.shards))
	var wg sync.WaitGroup
	for _, s := range run.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run.follow(ctx, s); err != nil {
				errc <- err
				cancel()
			}
		}()
	}
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(opts.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				run.report()
			}
		}
	}()
	started := time.Now()
	finish := func(err error) (*Result, error) {
		close(run.stop)
		wg.Wait()
		cancel()
		<-progressDone
		close(errc)
		for e := range errc {
			if parent.Err() != nil && errors.Is(e, parent.Err()) {
				continue // a follower interrupted with the run: err says so once
			}
			err = errors.Join(err, e)
		}
		run.fill(res)
		run.report()
		prog.end()
		return res, err
	}
	select {
	case <-ctx.Done(): // interrupted (parent's error), or a follower failed (its error, from errc)
		return finish(parent.Err())
	case <-run.caughtUp:
	}
	res.CaughtUp = time.Since(started)
	run.report()
	prog.printf("every shard caught up after %s", res.CaughtUp.Round(time.Millisecond))
	if j.tagged { // the stack's own table is not tagged by this tool
		if _, err := r.db.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: aws.String(r.arnOf(ctx, j.target)),
			Tags: []types.Tag{{Key: aws.String(TagCaughtUp), Value: aws.String(opts.Now().UTC().Format(time.RFC3339Nano))}}}); err != nil {
			prog.printf("note: could not tag %s with %s (versions will not show it): %v", j.target, TagCaughtUp, err)
		}
	}
	if !opts.AllowEmpty {
		run.fill(res)
		if err := r.checkNotEmpty(ctx, opts, j); err != nil {
			return finish(err)
		}
	}
	if err := r.reg.Swap(ctx, j.target, j.version); err != nil {
		return finish(err)
	}
	res.Swapped = true
	run.mu.Lock()
	run.handoverEnd = time.Now().Add(opts.Handover)
	run.mu.Unlock()
	prog.printf("swapped: parameter %s now names %s (was %s) at %s; following for %s so the records the live functions still wrote to %s reach %s too",
		r.reg.Name(), j.target, j.current, time.Now().UTC().Format(time.RFC3339), opts.Handover, j.current, j.target)
	select {
	case <-ctx.Done():
	case <-time.After(opts.Handover):
	}
	res, err = finish(parent.Err())
	if err != nil {
		return res, fmt.Errorf("swapped to %s, but the handover was cut short: records the live functions wrote to %s just before they switched may be missing from %s (%s use-version -table %s catches it up): %w",
			j.target, j.current, j.target, opts.tool(), j.target, err)
	}
	// ctx ended with the followers; the parent's is still live.
	r.summarize(parent, opts, j)
	for _, l := range res.Summary {
		prog.printf("%s", l)
	}
	if id, err := identify(parent, r.db, r.reg.Name(), baseOf(j.current), j.current, nil); err == nil && id.Rebuilt {
		res.CurrentRebuilt = true
		prog.printf("%s is unchanged and no longer current; %s rollback points the readers back at it, and when it is no longer needed: replay delete-version -parameter %s -table %s (checks only; add -yes to delete)",
			j.current, opts.tool(), r.reg.Name(), j.current)
	} else {
		prog.printf("%s is unchanged and no longer current; %s rollback points the readers back at it (delete-version leaves it: no rebuild created it)", j.current, opts.tool())
	}
	return res, nil
}

// nextFree is the version after the highest of current's family that
// exists (a refused or interrupted rebuild leaves its table behind) or was
// ever current: a name is never reused, so the parameter's history means
// one table per name.
func (r *Replayer) nextFree(ctx context.Context, current string) (string, error) {
	base := baseOf(current)
	n := 1
	if v, ok := versionNumber(base, current); ok {
		n = v
	}
	tables, err := r.listTables(ctx, base+"-v")
	if err != nil {
		return "", err
	}
	hist, err := r.reg.History(ctx)
	if err != nil {
		return "", err
	}
	for _, c := range hist {
		tables = append(tables, c.Table)
	}
	for _, t := range tables {
		if v, ok := versionNumber(base, t); ok && v > n {
			n = v
		}
	}
	return fmt.Sprintf("%s-v%d", base, n+1), nil
}

// arnOf is table's ARN ("" if it cannot be read, which TagResource
// then refuses).
func (r *Replayer) arnOf(ctx context.Context, table string) string {
	d, err := describeTable(ctx, r.db, table)
	if err != nil {
		return ""
	}
	return aws.ToString(d.TableArn)
}

// checkNotEmpty refuses a swap to a target that holds no items while the
// current table holds some.
func (r *Replayer) checkNotEmpty(ctx context.Context, opts Options, j *job) error {
	res := j.res
	has, err := hasItems(ctx, r.db, j.target)
	if err != nil || has {
		return err
	}
	cur, err := hasItems(ctx, r.db, j.current)
	if err != nil || !cur {
		return err
	}
	what := fmt.Sprintf("%s holds no items after the replay (read %d records, applied %d)", j.target, res.Read, res.Applied)
	if j.kind == "rebuild" {
		what = fmt.Sprintf("nothing since %s became an item of %s (read %d records, applied %d)", stamp(opts.From), j.target, res.Read, res.Applied)
	}
	return refuse(j.field, "%s while %s (current) holds items: not swapped, %s stays current and %s is left in place; give -allow-empty to swap anyway", what, j.current, j.current, j.target)
}

// summarize counts both tables' items (reading them in full) and says what
// was compared and why the counts may differ.
func (r *Replayer) summarize(ctx context.Context, opts Options, j *job) {
	res := j.res
	what := fmt.Sprintf("summary: replayed stream %s from %s into %s: read %d records, handed %d to the processor, skipped %d (kept failing)", j.stream.name, stamp(opts.From), j.target, res.Read, res.Applied, res.Skipped)
	if j.kind == "use-version" {
		what = fmt.Sprintf("summary: caught %s up on stream %s from where it got to: read %d records, handed %d to the processor (those already in it were skipped by its fences), skipped %d (kept failing)", j.target, j.stream.name, res.Read, res.Applied, res.Skipped)
	}
	if j.seam != nil {
		what += fmt.Sprintf("; %d of them from the archive in bucket %s (arrived before the seam at %s), %d from the stream after it", res.Archived, j.seam.bucket, stamp(j.seam.at), res.Read-res.Archived)
	}
	if res.SetAside > 0 {
		what += fmt.Sprintf("; %d of those handed could never be applied (each named above with its field and reason; the live function set them aside)", res.SetAside)
	}
	res.Summary = append(res.Summary, what)
	cur, err1 := scanVersion(ctx, r.db, j.current, reading(opts, j.prog, j.current, "to count them"))
	tgt, err2 := scanVersion(ctx, r.db, j.target, reading(opts, j.prog, j.target, "to count them"))
	curItems, tgtItems := cur.items, tgt.items
	if err := errors.Join(err1, err2); err != nil {
		res.Summary = append(res.Summary, "summary: could not count the items of the two versions: "+err.Error())
		return
	}
	res.CurrentItems, res.TargetItems = curItems, tgtItems
	res.Summary = append(res.Summary,
		fmt.Sprintf("summary: compared the item counts of the two versions, each read in full: %s (previous) %d items, %s (current now) %d items", j.current, curItems, j.target, tgtItems))
	if opts.Unwindowed {
		return
	}
	res.Summary = append(res.Summary,
		"summary: why they can differ: each holds one item per (key, window) it saw, or one result page per bucket of keys a flush closed together (the live functions' carried windows; a replay's batches write items),",
		"  per-key state for session and sliding windows and one watermark item per shard;")
	if j.kind == "rebuild" {
		res.Summary = append(res.Summary, fmt.Sprintf("  %s has only windows of records since %s, %s also older ones until their time to live removes them;", j.target, stamp(opts.From), j.current))
	} else {
		res.Summary = append(res.Summary, fmt.Sprintf("  %s and %s each hold the windows of the records since they started (a rebuild's -from, or the stack's deployment), until their time to live removes them;", j.target, j.current))
	}
	res.Summary = append(res.Summary, fmt.Sprintf("  records that arrived after the live functions switched to %s (at most their refresh interval after the swap) are in %s only;", j.target, j.target))
	res.Summary = append(res.Summary,
		"  a session merged by a record that bridges two stays as an item marked retracted, and whether a session was written before it merged,",
		"  or a window was final before a late record corrected it (a new revision), depends on where batches ended — which differs between",
		"  the live functions and a replay — so retracted items and revisions can differ while every record is counted once in each.")
}

// reading is scanVersion's progress: the items of table read so far, shown
// every ProgressEvery (why says what for).
func reading(opts Options, prog *progress, table, why string) func(items int) {
	shown := time.Now()
	return func(items int) {
		if time.Since(shown) >= opts.ProgressEvery {
			shown = time.Now()
			prog.status(fmt.Sprintf("reading the items of %s %s: %d so far", table, why, items), "")
		}
	}
}

// regionOf reads the region of an ARN (arn:aws:kinesis:REGION:…).
func regionOf(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) > 3 {
		return parts[3]
	}
	return ""
}
