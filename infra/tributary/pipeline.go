package tributary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// defaultPipelineFile is the windowed pipeline the aggregate and ticker
// functions run, relative to the repository root. The root module's tests
// (pkg/pipeline) parse it with pipeline.Parse, so a config the functions
// would refuse at init fails `make test` instead of a deploy.
const defaultPipelineFile = "pipelines/pageviews.json"

// readDefaultPipeline reads defaultPipelineFile from the repository root,
// the first of the working directory's parents that holds it (synth runs
// in infra/, tests in infra/tributary).
func readDefaultPipeline() ([]byte, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for range 4 {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(defaultPipelineFile)))
		if err == nil {
			return b, nil
		}
		dir = filepath.Dir(dir)
	}
	return nil, fmt.Errorf("%s: not found in the working directory or its parents", defaultPipelineFile)
}

// PipelineConfig is the declared pipeline, field for field the JSON that
// package pipeline parses (see pipeline.Parse for what each field means).
// The stack marshals it into the functions' PIPELINE_CONFIG and reads the
// fields that shape the topology: ParallelizationFactor (the aggregate
// mapping's) and Outputs.Stream (whether there is a WindowResults stream).
type PipelineConfig struct {
	Schema                    string           `json:"$schema,omitempty"` // for editors; ignored
	Name                      string           `json:"name"`
	EventTypes                []string         `json:"eventTypes,omitempty"`
	Key                       string           `json:"key,omitempty"`
	Value                     string           `json:"value,omitempty"`
	Distinct                  string           `json:"distinct,omitempty"`
	Windows                   []PipelineWindow `json:"windows"`
	Aggregates                []string         `json:"aggregates,omitempty"`
	Quantiles                 []float64        `json:"quantiles,omitempty"`
	DistinctPrecision         int              `json:"distinctPrecision,omitempty"`
	OutOfOrderness            string           `json:"outOfOrderness,omitempty"`
	IdleTimeout               string           `json:"idleTimeout,omitempty"`
	LatePolicy                string           `json:"latePolicy,omitempty"`
	AllowedLateness           string           `json:"allowedLateness,omitempty"`
	Outputs                   *PipelineOutputs `json:"outputs,omitempty"`
	PartitionKeyIsGroupingKey bool             `json:"partitionKeyIsGroupingKey,omitempty"`
	ParallelizationFactor     int              `json:"parallelizationFactor,omitempty"`
	DedupeHorizon             string           `json:"dedupeHorizon,omitempty"`
}

// PipelineWindow is one declared window: tumbling {size, offset},
// hopping {size, advance, offset}, sliding {difference} or session {gap},
// durations as Go duration strings ("1m", "90s").
type PipelineWindow struct {
	Kind       string `json:"kind"`
	Size       string `json:"size,omitempty"`
	Advance    string `json:"advance,omitempty"`
	Difference string `json:"difference,omitempty"`
	Gap        string `json:"gap,omitempty"`
	Offset     string `json:"offset,omitempty"`
}

// PipelineOutputs says where window results go.
type PipelineOutputs struct {
	Table  bool `json:"table"`
	Stream bool `json:"stream"`
}

// DefaultPipeline is the pipeline declared in pipelines/pageviews.json: page views
// per key, their time on page (data.ms) counted, summed, min/max/mean and
// p50/p99, over 1-minute tumbling and 5-minute hopping windows, late records
// corrected for 10 minutes, results in the Views table and on the
// WindowResults stream.
func DefaultPipeline() (PipelineConfig, error) {
	doc, err := readDefaultPipeline()
	if err != nil {
		return PipelineConfig{}, err
	}
	return ParsePipeline(doc)
}

// ParsePipeline decodes a pipeline document, refusing fields PipelineConfig
// does not know (they would be dropped from PIPELINE_CONFIG) and the few
// settings the stack itself depends on. The full validation is
// pipeline.Parse's, in the root module's tests.
func ParsePipeline(doc []byte) (PipelineConfig, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	var c PipelineConfig
	if err := dec.Decode(&c); err != nil {
		return PipelineConfig{}, fmt.Errorf("pipeline config: %w", err)
	}
	if dec.More() {
		return PipelineConfig{}, fmt.Errorf("pipeline config: more than one JSON value")
	}
	if err := c.Validate(); err != nil {
		return PipelineConfig{}, err
	}
	return c, nil
}

// Validate checks what the stack depends on: a name, at least one window, a
// parallelization factor Lambda accepts, somewhere for results to go.
func (c PipelineConfig) Validate() error {
	switch {
	case c.Name == "":
		return fmt.Errorf("pipeline config: name: required")
	case len(c.Windows) == 0:
		return fmt.Errorf("pipeline config %s: windows: at least one is required", c.Name)
	case c.ParallelizationFactor < 0 || c.ParallelizationFactor > maxStreamParallelization:
		return fmt.Errorf("pipeline config %s: parallelizationFactor %d is not between 1 and %d",
			c.Name, c.ParallelizationFactor, maxStreamParallelization)
	case c.Outputs != nil && !c.Outputs.Table && !c.Outputs.Stream:
		return fmt.Errorf("pipeline config %s: outputs: at least one of table and stream must be true", c.Name)
	}
	return nil
}

// Output is where results go: Outputs, or the results table alone when the
// config does not say (pipeline.Parse's default).
func (c PipelineConfig) Output() PipelineOutputs {
	if c.Outputs == nil {
		return PipelineOutputs{Table: true}
	}
	return *c.Outputs
}

// JSON is the config as the functions read it from PIPELINE_CONFIG.
func (c PipelineConfig) JSON() (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("pipeline config %s: %w", c.Name, err)
	}
	return string(b), nil
}
