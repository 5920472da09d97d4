package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/results"
	"github.com/tributary-dev/tributary/pkg/state"
)

// TestLimitBoundsTheRead: a key with more windows than -limit is read only
// as far as the limit and one more, across the window kinds in order, and
// the output says that more windows exist (not how many: that would take
// reading them) and how to see them. Before, every window of the range was
// read and the cut made after.
func TestLimitBoundsTheRead(t *testing.T) {
	ctx := context.Background()
	db := dynamodb.NewFromConfig(awsCfg)
	if err := state.CreateTable(ctx, db, "many"); err != nil {
		t.Fatal(err)
	}
	pcfg, err := pipeline.Parse([]byte(pipelineJSON))
	if err != nil {
		t.Fatal(err)
	}
	p := aggregate.New(pcfg, state.NewViews(db, "many", pcfg.Aggregates), nil, "", aggregate.WithLogger(slog.New(slog.DiscardHandler)))
	// One record a minute for 50 minutes: 50 tumbling windows (the last
	// open), 51 hopping ones, 50 sessions (the last open, in the key's
	// state): 150 window items.
	const minutes = 50
	var evs []ev
	for i := range minutes {
		evs = append(evs, ev{"heavy", time.Duration(i) * time.Minute, float64(i), "u0"})
	}
	seq := 0
	apply(t, p, &seq, evs...)

	counter := &standintest.QueryCounter{Client: db}
	query := func(limit int, asJSON bool) *query {
		return &query{cfg: pcfg, key: "heavy", kinds: results.Kinds(pcfg), from: base.Add(-time.Hour), to: base.Add(2 * time.Hour),
			asJSON: asJSON, limit: limit, table: "many"}
	}
	const note = "… and more windows not shown, past the first %d (raise -limit, or narrow -from/-to or -window)"
	for _, tt := range []struct {
		limit    int
		rows     map[string]int // rows shown by kind
		more     bool
		maxItems int
	}{
		{5, map[string]int{"tumbling:1m0s": 5}, true, 5 + 1},
		{60, map[string]int{"tumbling:1m0s": 50, "hopping:2m0s:1m0s": 10}, true, 50 + 10 + 1},
		{150, map[string]int{"tumbling:1m0s": 50, "hopping:2m0s:1m0s": 51, "session:30s": 49}, true, 50 + 51 + 49},
		{151, map[string]int{"tumbling:1m0s": 50, "hopping:2m0s:1m0s": 51, "session:30s": 50}, false, 50 + 51 + 49},
	} {
		counter.Take()
		var out, errb strings.Builder
		if err := show(ctx, counter, nil, query(tt.limit, false), &out, &errb); err != nil {
			t.Fatal(err)
		}
		items, _ := counter.Take()
		got := tableRows(out.String())
		for kind, n := range tt.rows {
			if len(got[kind]) != n {
				t.Errorf("-limit %d: %d %s rows, want %d", tt.limit, len(got[kind]), kind, n)
			}
		}
		if len(got) != len(tt.rows) {
			t.Errorf("-limit %d: kinds shown %d, want %d:\n%s", tt.limit, len(got), len(tt.rows), out.String())
		}
		if said := strings.Contains(out.String(), "more windows not shown"); said != tt.more ||
			(tt.more && !strings.Contains(out.String(), fmt.Sprintf(note, tt.limit))) {
			t.Errorf("-limit %d: says more windows exist: %v, want %v:\n%s", tt.limit, said, tt.more, out.String())
		}
		if items > tt.maxItems {
			t.Errorf("-limit %d: read %d window items, want at most %d", tt.limit, items, tt.maxItems)
		}
	}

	// -json: JSON lines only on stdout, the note on stderr.
	var out, errb strings.Builder
	if err := show(ctx, counter, nil, query(3, true), &out, &errb); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, l := range lines {
		var w results.WindowJSON
		if err := json.Unmarshal([]byte(l), &w); err != nil {
			t.Errorf("-json line %q: %v", l, err)
		}
	}
	if len(lines) != 3 || !strings.Contains(errb.String(), fmt.Sprintf(note, 3)) {
		t.Errorf("-json -limit 3: %d lines, stderr %q", len(lines), errb.String())
	}
	if items, _ := counter.Take(); items > 4 {
		t.Errorf("-json -limit 3: read %d window items, want at most 4", items)
	}
}

// slowStore answers each Query after a delay: a read of many pages against
// a far region or a throttled table, which the stand-in cannot show.
type slowStore struct {
	windowStore
	delay time.Duration
}

func (s slowStore) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	time.Sleep(s.delay)
	return s.windowStore.Query(ctx, in, opts...)
}

// TestLongReadShowsProgress: a table read that goes on (here every page
// slowed) says on stderr how far it got, while stdout stays the table
// alone; a quick one says nothing.
func TestLongReadShowsProgress(t *testing.T) {
	ctx := context.Background()
	db := dynamodb.NewFromConfig(awsCfg)
	if err := state.CreateTable(ctx, db, "slow"); err != nil {
		t.Fatal(err)
	}
	pcfg, err := pipeline.Parse([]byte(pipelineJSON))
	if err != nil {
		t.Fatal(err)
	}
	p := aggregate.New(pcfg, state.NewViews(db, "slow", pcfg.Aggregates), nil, "", aggregate.WithLogger(slog.New(slog.DiscardHandler)))
	seq := 0
	apply(t, p, &seq, ev{"k", 0, 1, "u0"}, ev{"k", time.Minute, 2, "u0"}, ev{"k", 2 * time.Minute, 3, "u0"})
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 20 * time.Millisecond
	q := &query{cfg: pcfg, key: "k", kinds: results.Kinds(pcfg), from: base.Add(-time.Hour), to: base.Add(time.Hour), limit: 1000, table: "slow"}

	var out, errb strings.Builder
	if err := show(ctx, slowStore{db, 50 * time.Millisecond}, nil, q, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errb.String(), "results: still reading the views table: ") || !strings.Contains(errb.String(), "window item(s) in") {
		t.Errorf("a slow read said nothing on stderr: %q", errb.String())
	}
	if strings.Contains(out.String(), "still reading") || len(tableRows(out.String())) == 0 {
		t.Errorf("stdout is not the table alone:\n%s", out.String())
	}

	progressEvery = time.Minute
	out.Reset()
	errb.Reset()
	if err := show(ctx, db, nil, q, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if errb.Len() != 0 {
		t.Errorf("a quick read wrote to stderr: %q", errb.String())
	}
}
