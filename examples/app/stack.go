package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/tributary-dev/tributary/infra/tributary"
)

// ShopStackProps configures NewShopStack. Zero values take cdk.json's
// context: tributary:assetDir (the function binaries) and
// tributary:pipelinesDir (the pipeline files).
type ShopStackProps struct {
	awscdk.StackProps
	// AssetDir holds <name>/bootstrap of ingest, quarantine, aggregate,
	// ticker, statuscodes and receipts.
	AssetDir string
	// PipelinesDir holds one <name>.json per pipeline.
	PipelinesDir string
}

// ShopStack is what NewShopStack built, for tests and for further
// constructs.
type ShopStack struct {
	awscdk.Stack
	Ingest      *tributary.Ingest
	Quarantine  *tributary.Quarantine
	Pipelines   *tributary.Pipelines
	StatusCodes *tributary.StreamHandler
	Receipts    *tributary.TaskHandler
	Dashboards  []*tributary.Dashboard
	Ops         *tributary.Operations
}

// NewShopStack composes the public constructs in the documented order:
// ingest, quarantine, the pipelines and functions of your own, operations
// (alarms and retention over everything above), then the dashboards.
func NewShopStack(scope constructs.Construct, id string, props ShopStackProps) (*ShopStack, error) {
	sp := props.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String("Shop analytics on Tributary: orders and signups per window, HTTP status mix per route")
	}
	s := &ShopStack{Stack: awscdk.NewStack(scope, jsii.String(id), &sp)}
	var err error
	if s.Ingest, err = tributary.NewIngest(s.Stack, "Ingest", tributary.IngestProps{AssetDir: props.AssetDir}); err != nil {
		return nil, err
	}
	if s.Quarantine, err = tributary.NewQuarantine(s.Stack, "Quarantine", tributary.QuarantineProps{AssetDir: props.AssetDir}); err != nil {
		return nil, err
	}
	if s.Pipelines, err = tributary.NewPipelines(s.Stack, "Pipelines", tributary.PipelinesProps{
		AssetDir:   props.AssetDir,
		Dir:        props.PipelinesDir,
		Events:     s.Ingest.Events,
		OnFailure:  s.Quarantine.Failures,
		Quarantine: s.Quarantine.Table,
	}); err != nil {
		return nil, err
	}
	if s.StatusCodes, err = tributary.NewStreamHandler(s.Stack, "StatusCodes", tributary.StreamHandlerProps{
		Name:        "statuscodes",
		AssetDir:    props.AssetDir,
		Description: "HTTP status mix per route and minute (examples/functions/statuscodes)",
		Events:      s.Ingest.Events,
		EventTypes:  []string{"http_request"},
		Quarantine:  s.Quarantine.Table,
		OnFailure:   s.Quarantine.Failures,
	}); err != nil {
		return nil, err
	}
	if s.Receipts, err = tributary.NewTaskHandler(s.Stack, "Receipts", tributary.TaskHandlerProps{
		Name:        "receipts",
		AssetDir:    props.AssetDir,
		Description: "Renders each order_placed event's receipt once per event id (examples/functions/receipts)",
	}); err != nil {
		return nil, err
	}
	if s.Ops, err = tributary.NewOperations(s.Stack, tributary.OperationsProps{Quarantine: s.Quarantine}); err != nil {
		return nil, err
	}
	for _, p := range s.Pipelines.Pipelines {
		d, err := tributary.NewDashboard(s.Stack, "Dashboard"+p.Name, tributary.DashboardProps{Pipeline: p})
		if err != nil {
			return nil, err
		}
		s.Dashboards = append(s.Dashboards, d)
	}
	return s, nil
}
