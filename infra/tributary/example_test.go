package tributary_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/tributary-dev/tributary/infra/tributary"
)

// A stack of your own from the public constructs: ingest in front, the
// quarantine behind every consumer, one aggregate and ticker per file in
// the pipelines directory, a dashboard per pipeline, and alarms and
// retention over all of it, last. In an app, AssetDir and Dir usually come
// from cdk.json's context (tributary:assetDir, tributary:pipelinesDir).
func Example() {
	out, err := os.MkdirTemp("", "tributary-example-cdk.out-")
	if err != nil {
		panic(err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out)})
	stack := awscdk.NewStack(app, jsii.String("Analytics"), nil)
	assets := exampleAssets() // <name>/bootstrap of ingest, quarantine, aggregate, ticker

	ingest, err := tributary.NewIngest(stack, "Ingest", tributary.IngestProps{AssetDir: assets})
	if err != nil {
		panic(err)
	}
	quarantine, err := tributary.NewQuarantine(stack, "Quarantine", tributary.QuarantineProps{AssetDir: assets})
	if err != nil {
		panic(err)
	}
	pipelines, err := tributary.NewPipelines(stack, "Pipelines", tributary.PipelinesProps{
		AssetDir:   assets,
		Dir:        "../../testdata/shipped-pipelines", // one <name>.json per pipeline (here the repository's own)
		Events:     ingest.Events,
		OnFailure:  quarantine.Failures,
		Quarantine: quarantine.Table,
	})
	if err != nil {
		panic(err)
	}
	if _, err := tributary.NewOperations(stack, tributary.OperationsProps{Quarantine: quarantine}); err != nil {
		panic(err)
	}
	for _, p := range pipelines.Pipelines {
		if _, err := tributary.NewDashboard(stack, "Dashboard"+p.Name, tributary.DashboardProps{Pipeline: p}); err != nil {
			panic(err)
		}
		fmt.Printf("%s: aggregate and ticker, enhanced fan-out %v\n", p.Name, pipelines.EnhancedFanOut)
	}
	app.Synth(nil)
	// Output:
	// checkouts: aggregate and ticker, enhanced fan-out true
	// pageviews: aggregate and ticker, enhanced fan-out true
}

// exampleAssets writes stand-in bootstraps, so that the example
// synthesizes without building the functions.
func exampleAssets() string {
	dir, err := os.MkdirTemp("", "tributary-example-assets-")
	if err != nil {
		panic(err)
	}
	for _, name := range []string{tributary.FunctionIngest, tributary.FunctionQuarantine, tributary.FunctionAggregate, tributary.FunctionTicker} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			panic(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "bootstrap"), []byte(name), 0o755); err != nil {
			panic(err)
		}
	}
	return dir
}
