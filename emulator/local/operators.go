package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/emulator/template"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// Resources is what an operator's tools (cmd/results, cmd/replay,
// cmd/redrive, cmd/snapshot) need of a running deployment, by physical
// name: every stream, table and queue (with the DLQ each sends failures
// to), the current-views parameter, and which of them each tool takes.
type Resources struct {
	Streams []Named
	Tables  []Named
	Queues  []Queue
	// ViewsParameter is the aggregate function's VIEWS_PARAMETER_NAME and
	// CurrentViews the table it names now ("" when the stack has none).
	ViewsParameter, CurrentViews string
	// EventsStream is ingest's EVENTS_STREAM_NAME.
	EventsStream string
	// ResultsStream is the aggregate function's OUTPUT_STREAM_NAME, the
	// WindowResults stream ("" when the pipeline emits none).
	ResultsStream string
	// Stack is the prefix of the deployment's names (make results STACK=).
	Stack string
	// Pipelines names the pipelines the aggregate functions run, sorted
	// (make results PIPELINE= when there are several).
	Pipelines []string
	// SnapshotTable and SnapshotKey are the snapshot function's
	// PROFILES_TABLE_NAME and ENTITY_KEY_ATTRIBUTE.
	SnapshotTable, SnapshotKey string
	// ArchiveBucket is the archive function's ARCHIVE_BUCKET_NAME ("" when
	// the stack has none).
	ArchiveBucket string
	// Endpoint is the stand-in's URL (http://127.0.0.1:4566): the make
	// commands the banner gives carry TRIBUTARY_STANDIN_ADDR when it is on
	// another address (see Make).
	Endpoint string
}

// Named is a resource: a label (its logical id without CDK's hash) and its
// physical name.
type Named struct{ Label, Name string }

// Queue is a queue and its dead-letter relations.
type Queue struct {
	Named
	// DLQ is the name of the queue its redrive policy sends failures to.
	DLQ string
	// DLQOf names the queues whose redrive policy names this one.
	DLQOf []string
}

var cdkHash = regexp.MustCompile(`[0-9A-F]{8}$`)

func label(logicalID string) string { return cdkHash.ReplaceAllString(logicalID, "") }

// FindResources reads the deployment and, from the stand-in at cfg, each
// queue's redrive policy and the views parameter's value.
func FindResources(ctx context.Context, cfg aws.Config, d *template.Deployment) (*Resources, error) {
	r := &Resources{Stack: d.StackName(), Endpoint: aws.ToString(cfg.BaseEndpoint)}
	for _, s := range d.Streams() {
		r.Streams = append(r.Streams, Named{label(s.LogicalID), s.Name})
	}
	for _, t := range d.Tables() {
		r.Tables = append(r.Tables, Named{label(t.LogicalID), t.Name})
	}
	specs, err := d.Functions()
	if err != nil {
		return nil, err
	}
	for _, f := range specs {
		switch f.Binary {
		case "ingest":
			r.EventsStream = f.Env["EVENTS_STREAM_NAME"]
		case "aggregate":
			r.ViewsParameter, r.ResultsStream = f.Env["VIEWS_PARAMETER_NAME"], f.Env["OUTPUT_STREAM_NAME"]
			if c, err := pipeline.Parse([]byte(f.Env[pipeline.EnvVar])); err == nil {
				r.Pipelines = append(r.Pipelines, c.Name)
			}
		case "snapshot":
			r.SnapshotTable, r.SnapshotKey = f.Env["PROFILES_TABLE_NAME"], f.Env["ENTITY_KEY_ATTRIBUTE"]
		case "archive":
			r.ArchiveBucket = f.Env["ARCHIVE_BUCKET_NAME"]
		}
	}
	if r.ViewsParameter != "" {
		out, err := ssm.NewFromConfig(cfg).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(r.ViewsParameter)})
		if err != nil {
			return nil, fmt.Errorf("reading parameter %s: %w", r.ViewsParameter, err)
		}
		r.CurrentViews = aws.ToString(out.Parameter.Value)
	}
	client := sqs.NewFromConfig(cfg)
	byARN := map[string]int{}
	for _, q := range d.Queues() {
		byARN[q.ARN] = len(r.Queues)
		r.Queues = append(r.Queues, Queue{Named: Named{label(q.LogicalID), q.Name}})
	}
	for _, q := range d.Queues() {
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.URL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameRedrivePolicy}})
		if err != nil {
			return nil, fmt.Errorf("reading the redrive policy of %s: %w", q.Name, err)
		}
		p := out.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)]
		if p == "" {
			continue
		}
		var policy struct {
			DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		}
		if err := json.Unmarshal([]byte(p), &policy); err != nil {
			return nil, fmt.Errorf("the redrive policy of %s: %w", q.Name, err)
		}
		if i, ok := byARN[policy.DeadLetterTargetArn]; ok {
			r.Queues[byARN[q.ARN]].DLQ = r.Queues[i].Name
			r.Queues[i].DLQOf = append(r.Queues[i].DLQOf, q.Name)
		}
	}
	for i := range r.Queues {
		sort.Strings(r.Queues[i].DLQOf)
	}
	return r, nil
}

// Print writes every resource name and a ready command for each tool
// (to run with the AWS_* variables of the local endpoint exported).
func (r *Resources) Print(w io.Writer) {
	width := 0
	for _, n := range r.all() {
		width = max(width, len(n.Label))
	}
	row := func(n Named, note string) {
		if note != "" {
			note = "   " + note
		}
		fmt.Fprintf(w, "    %-*s  %s%s\n", width, n.Label, n.Name, note)
	}
	fmt.Fprintln(w, "  Kinesis streams")
	for _, s := range r.Streams {
		note := ""
		switch s.Name {
		case r.EventsStream:
			note = "(events: replay -stream, snapshot -stream)"
		case r.ResultsStream:
			note = "(window results: results -follow -stream)"
		}
		row(s, note)
	}
	fmt.Fprintln(w, "  DynamoDB tables")
	for _, t := range r.Tables {
		var notes []string
		if t.Name == r.CurrentViews {
			notes = append(notes, "the current views table: replay")
		}
		if t.Name == r.SnapshotTable {
			notes = append(notes, "the CDC table: snapshot -table")
		}
		note := ""
		if len(notes) > 0 {
			note = "(" + strings.Join(notes, "; ") + ")"
		}
		row(t, note)
	}
	fmt.Fprintln(w, "  SQS queues")
	for _, q := range r.Queues {
		note := ""
		switch {
		case q.DLQ != "":
			note = "(dead letters go to " + q.DLQ + ")"
		case len(q.DLQOf) > 0:
			note = "(DLQ of " + strings.Join(q.DLQOf, ", ") + ": redrive -dlq)"
		}
		row(q.Named, note)
	}
	if r.ViewsParameter != "" {
		fmt.Fprintln(w, "  SSM parameter")
		row(Named{"CurrentViews", r.ViewsParameter}, "(names "+r.CurrentViews+": results -parameter, replay -parameter)")
	}

	if r.ViewsParameter != "" {
		stack := ""
		if r.Stack != "Tributary" {
			stack = " STACK=" + r.Stack
		}
		ps := slices.Sorted(slices.Values(r.Pipelines))
		pl, plFlag, which := "", "", ""
		if len(ps) > 1 {
			// The sample key user-1 is a page view's; another pipeline
			// added after it would not have it.
			pick := ps[len(ps)-1]
			if slices.Contains(ps, "pageviews") {
				pick = "pageviews"
			}
			pl, plFlag = "PIPELINE="+pick+" ", "-pipeline "+pick+" "
			which = "; PIPELINE= one of " + strings.Join(ps, ", ")
		}
		fmt.Fprintln(w, "\nResults (in another terminal; make results needs no exports):")
		fmt.Fprintf(w, "  a key's windows, open and final (count, sum, mean, min, max, quantiles, revision; FROM=2h TO=now%s):\n    %s\n", which, r.Make("results "+pl+"KEY=user-1"+stack))
		fmt.Fprintf(w, "    go run ./cmd/results %s-parameter %s -key user-1 -from 1h   (with the AWS_* variables above; -json, -window)\n", plFlag, r.ViewsParameter)
		if r.ResultsStream != "" {
			fmt.Fprintf(w, "  each final result, correction and retraction as it arrives (Ctrl-C stops):\n    %s   (KEY=user-1 for one key)\n", r.Make("results "+pl+"FOLLOW=1"+stack))
			fmt.Fprintf(w, "    go run ./cmd/results %s-follow -stream %s\n", plFlag, r.ResultsStream)
		}
	}

	fmt.Fprintln(w, "\nOperator tools (in another terminal, with the AWS_* variables above exported; each takes -h):")
	if r.EventsStream != "" {
		stack := ""
		if r.Stack != "Tributary" {
			stack = " STACK=" + r.Stack
		}
		fmt.Fprintf(w, "  print a stream's records as they arrive, through a consumer of its own (STREAM=results, joins, matches, enriched, show-events; Ctrl-C stops; make tail needs no exports):\n    %s\n", r.Make("tail STREAM=events KEY=user-1"+stack))
		fmt.Fprintf(w, "  list the records the functions set aside, then put one back once its cause is fixed (docs/set-aside.md; no exports):\n    %s\n    %s\n",
			r.Make("setaside"+stack), r.Make("putback SOURCE='<source>' SEQUENCE=<n> DATA=record.json DRY_RUN=1"+stack))
	}
	if r.ViewsParameter != "" && r.EventsStream != "" {
		p := fmt.Sprintf("-stream %s -parameter %s", r.EventsStream, r.ViewsParameter)
		// Every pipeline that shares the views table: a version made of
		// one would hold none of the others' windows (replay refuses it).
		all := "-pipeline pipelines/" // every aggregation file of the directory
		if len(r.Pipelines) > 0 {
			var each []string
			for _, name := range r.Pipelines {
				each = append(each, "-pipeline pipelines/"+name+".json")
			}
			all = strings.Join(each, " ")
		}
		fmt.Fprintf(w, "  rebuild every pipeline's views from 10 minutes ago into a new version and point readers at it:\n    go run ./cmd/replay rebuild %s %s -from 10m\n", all, p)
		if r.ArchiveBucket != "" && len(r.Pipelines) > 0 {
			fmt.Fprintf(w, "  rebuild every pipeline's views reading the archive (S3 %s) up to 5 minutes ago, the stream after (docs/archive.md; once this has run over 5 minutes: before, the archive holds nothing that old and the rebuild reads the stream alone):\n    go run ./cmd/replay rebuild %s %s -from 30m -archive-bucket %s -archive-until 5m\n",
				r.ArchiveBucket, all, p, r.ArchiveBucket)
		}
		fmt.Fprintf(w, "  list the versions (items, position reached, which is current):\n    go run ./cmd/replay versions %s\n", p)
		fmt.Fprintf(w, "  point readers back at the previous version (caught up first):\n    go run ./cmd/replay rollback %s %s\n", all, p)
		fmt.Fprintf(w, "  check (then, with -yes, delete) a version rebuild made:\n    go run ./cmd/replay delete-version -parameter %s -table <version>\n", r.ViewsParameter)
	}
	for _, q := range r.Queues {
		if len(q.DLQOf) > 0 {
			fmt.Fprintf(w, "  list the dead letters of %s (drop -dry-run to move them back):\n    go run ./cmd/redrive -dlq %s -dry-run\n", strings.Join(q.DLQOf, ", "), q.Name)
		}
	}
	if r.SnapshotTable != "" && r.EventsStream != "" {
		key := ""
		if r.SnapshotKey != "" {
			key = " -key-attribute " + r.SnapshotKey
		}
		fmt.Fprintf(w, "  publish a snapshot of the CDC table for a new consumer:\n    go run ./cmd/snapshot -table %s -stream %s%s\n", r.SnapshotTable, r.EventsStream, key)
	}
}

// Make is the command line of make with args that reaches this stand-in
// from another terminal: the make targets that read it (results, tail,
// logs) ask TRIBUTARY_STANDIN_ADDR, default 127.0.0.1:4566, so on another
// address the line sets it.
func (r *Resources) Make(args string) string { return standin.MakePrefix(r.Endpoint) + "make " + args }

func (r *Resources) all() []Named {
	out := append(append([]Named{}, r.Streams...), r.Tables...)
	for _, q := range r.Queues {
		out = append(out, q.Named)
	}
	return append(out, Named{Label: "CurrentViews"})
}
