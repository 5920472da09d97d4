package local_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/testtools"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// TestReadmeFirstPipeline does what the README's "Your first pipeline"
// says: the pipeline file it shows, added to the repository's pipelines/,
// is deployed by `cdk synth` as a pipeline of its own (its own aggregate
// and ticker functions, next to the others'), and the README's curl, run as
// written against the local ingest URL, ends in the windows the README
// describes: for plan pro count 2, sum 8, max 5; for free 1, 1, 1.
func TestReadmeFirstPipeline(t *testing.T) {
	t.Parallel()
	testtools.Need(t, "the README's example needs it", "curl")
	const template = ".build/synth-readme/Tributary.template.json" // make synth-readme: below
	root, _, bin := paths(t, template)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- tested by emulator/local TestReadmeFirstPipeline: it synthesizes"
	_, after, ok := strings.Cut(string(readme), marker)
	if !ok {
		t.Fatalf("README.md has no %q", marker)
	}
	_, after, _ = strings.Cut(after, "```json\n")
	file, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("no ```json block after the marker")
	}
	cfg, err := pipeline.Parse([]byte(file))
	if err != nil {
		t.Fatalf("the README's pipeline file: %v", err)
	}
	curl := recipeBlock(t, "README.md", string(readme), "<!-- tested by emulator/local TestReadmeFirstPipeline -->")
	const documented = "http://127.0.0.1:9000/"
	if !strings.Contains(curl, documented) {
		t.Fatalf("the README's curl does not post to %s, make local-up's ingest URL:\n%s", documented, curl)
	}

	// make synth-readme: the repository's pipelines and the README's, as a
	// user would have them, in .build/readme-pipelines, synthesized as make
	// local-up synthesizes (make synth-local), since the README posts its
	// curl to a make local-up: the bootstraps built for this machine as
	// assets, and aggregates writing once per batch
	// (LOCAL_FLUSH_SECONDS=0). With cdk.json's deployed default (120 s) the
	// windows showed only at the end of a 2-minute tumbling window aligned
	// to the epoch: a wait of 0 to 120 s, taken by chance, with the whole
	// topology polling moto meanwhile (make local LOCAL_FLUSH_SECONDS=120
	// runs that path; pkg/aggregate's and emulator/eventsource's tests
	// test it). Make remakes it when the app, the pipelines or the README
	// change; the file it added must be the README's block.
	pipelines := filepath.Join(root, ".build", "readme-pipelines")
	added, err := os.ReadFile(filepath.Join(pipelines, cfg.Name+".json"))
	if err != nil {
		t.Fatalf("make synth-readme added no %s.json: %v", cfg.Name, err)
	}
	if string(added) != file {
		t.Fatalf("make synth-readme added %s.json as\n%s\nthe README's block is\n%s", cfg.Name, added, file)
	}
	shipped, err := filepath.Glob(filepath.Join(root, "pipelines", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range shipped {
		if filepath.Base(f) == cfg.Name+".json" {
			t.Fatalf("pipelines/ already has %s.json: the README's example must add a pipeline", cfg.Name)
		}
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(pipelines, filepath.Base(f))); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("make synth-readme's %s is not the repository's (err %v)", filepath.Base(f), err)
		}
	}
	srv := standintest.Start(t)
	var progress bytes.Buffer
	stack, err := local.Up(context.Background(), local.Options{
		Template: filepath.Join(root, template), Functions: bin, Endpoint: srv.Endpoint(),
		Progress: &progress, LambdaPort: -1, DashboardPort: -1,
	})
	if err != nil {
		t.Fatalf("local.Up: %v\n%s", err, progress.String())
	}
	t.Cleanup(func() { _ = stack.Close() })
	files, err := pipeline.LoadDir(pipelines)
	if err != nil {
		t.Fatal(err)
	}
	aggregations := 0 // the shipped ones and the README's (the join and CEP files have functions of their own)
	for _, f := range files {
		if f.Kind == pipeline.KindAggregate {
			aggregations++
		}
	}
	for _, binary := range []string{"aggregate", "ticker"} {
		if fns := stack.FunctionsOf(binary); !slices.Contains(fns, binary+"-"+cfg.Name) || len(fns) != aggregations {
			t.Errorf("%s functions %v: want one per aggregation pipeline file (%d), %s-%s among them", binary, fns, aggregations, binary, cfg.Name)
		}
	}
	w, err := stack.FindPipeline(cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	if w.Function != "aggregate-"+cfg.Name {
		t.Errorf("pipeline %s runs in %s", cfg.Name, w.Function)
	}

	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", strings.ReplaceAll(curl, documented, stack.URL("ingest")))
	answer, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(answer)) != `{"events":3,"accepted":3}` {
		t.Fatalf("the README's curl: %v, answer %s; want {\"events\":3,\"accepted\":3}", err, answer)
	}
	// The events land in the current minute (their device clock's offset
	// moves them), perhaps across a minute boundary: sum per key.
	want := map[string]local.Totals{"pro": {Count: 2, Sum: 8, Max: 5}, "free": {Count: 1, Sum: 1, Max: 1}}
	now := time.Now()
	var got map[string]local.Totals
	for {
		vs, err := w.Read(ctx, []string{"pro", "free"}, now.Add(-5*time.Minute), now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]local.Totals{}
		for _, v := range vs {
			g := got[v.Key]
			g.Count += int(v.Result.Count)
			g.Sum += v.Result.Sum
			g.Max = max(g.Max, v.Result.Max)
			got[v.Key] = g
		}
		if got["pro"] == want["pro"] && got["free"] == want["free"] {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pipeline %s's windows hold %v, want %v (the README says so)", cfg.Name, got, want)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
