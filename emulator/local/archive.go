package local

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/archive"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
)

// ArchiveBucket is the bucket the archive function writes the events
// stream to (its ARCHIVE_BUCKET_NAME); an error if the template has no
// archive function.
func (s *Stack) ArchiveBucket() (string, error) {
	specs, err := s.deployment.Functions()
	if err != nil {
		return "", err
	}
	for _, f := range specs {
		if f.Binary == "archive" && f.Env["ARCHIVE_BUCKET_NAME"] != "" {
			return f.Env["ARCHIVE_BUCKET_NAME"], nil
		}
	}
	return "", fmt.Errorf("the template has no archive function with ARCHIVE_BUCKET_NAME (infra's NewArchive)")
}

// ArchiveRebuild is a rebuild that reads the archive for what arrived
// before Seam and the stream after it.
type ArchiveRebuild struct {
	Stream, Parameter string
	// Pipelines are every pipeline sharing the views table: the new version
	// holds all of them. Check is compared window by window with the table
	// the readers used before.
	Pipelines []*Windows
	Check     *Windows
	// From is where the rebuild starts (arrival time), Seam where the
	// archive part ends.
	From, Seam time.Time
}

// Run rebuilds the views into a new version as replay rebuild
// -archive-bucket -archive-until does (a short handover: nothing more is
// sent), then checks that Check's windows in want's keys from..to hold the
// same counts in the new version as in the previous one.
func (a ArchiveRebuild) Run(ctx context.Context, s *Stack, want Counts, from, to time.Time, w io.Writer) error {
	bucket, err := s.ArchiveBucket()
	if err != nil {
		return err
	}
	db := dynamodb.NewFromConfig(s.cfg)
	r := replay.New(kinesis.NewFromConfig(s.cfg), db, replay.NewRegistry(ssm.NewFromConfig(s.cfg), a.Parameter))
	var progress bytes.Buffer
	handler := func(table string, aside *setaside.Sink) (replay.BatchHandler, error) {
		var f replay.Fanout
		for _, p := range a.Pipelines {
			views := state.NewViews(db, table, p.Pipeline.Aggregates, aggregate.ViewsOptions(p.Pipeline)...)
			// Quiet: its result log lines (one a window, as the deployed
			// function writes them for CloudWatch) would fill the demo.
			f = append(f, aggregate.New(p.Pipeline, views, nil, "", aggregate.WithDedupe(aggregate.NewLedger(db, table, p.Pipeline)),
				aggregate.WithHandover(db, aggregate.FixedViewsTable(table).Current), aggregate.WithSetAside(aside),
				aggregate.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))))
		}
		return f, nil
	}
	fmt.Fprintf(w, "  replay rebuild -from %s -archive-bucket %s -archive-until %s (in-process here; handover 2 s)\n",
		a.From.UTC().Format("15:04:05"), bucket, a.Seam.UTC().Format("15:04:05"))
	res, err := r.Run(ctx, replay.Options{Stream: a.Stream, From: a.From, Archive: archive.NewReader(archive.NewS3Client(s.cfg), bucket), ArchiveUntil: a.Seam,
		Handover: 2 * time.Second, Poll: 100 * time.Millisecond, Progress: &progress}, handler)
	if err != nil {
		return fmt.Errorf("rebuild across the seam: %w\n%s", err, progress.String())
	}
	fmt.Fprintf(w, "    %s: %d records from the archive (arrived before the seam), %d from the stream after it, each shard joined at a sequence number; now current\n",
		res.Target, res.Archived, res.Read-res.Archived)
	if res.Archived == 0 || res.Read == res.Archived {
		return fmt.Errorf("rebuild across the seam read %d records from the archive and %d from the stream: it did not cross the seam\n%s", res.Archived, res.Read-res.Archived, progress.String())
	}
	keys := want.Keys()
	before, err := a.Check.Read(ctx, keys, from, to)
	if err != nil {
		return err
	}
	rebuilt := *a.Check
	rebuilt.Table, rebuilt.views = res.Target, state.NewViews(db, res.Target, a.Check.Pipeline.Aggregates)
	after, err := rebuilt.Read(ctx, keys, from, to)
	if err != nil {
		return err
	}
	got, was := Counted(after), Counted(before)
	diff := 0
	for k, n := range was {
		if got[k] != n {
			diff++
		}
	}
	for k := range got {
		if _, ok := was[k]; !ok {
			diff++
		}
	}
	if diff > 0 {
		return fmt.Errorf("rebuild across the seam: %d windows of pipeline %s differ between %s and %s", diff, a.Check.Pipeline.Name, res.Current, res.Target)
	}
	fmt.Fprintf(w, "    rebuilt = live: %d windows of pipeline %s, %d events, equal in %s and %s\n", len(got), a.Check.Pipeline.Name, got.Total(), res.Current, res.Target)
	return nil
}
