package tributary

import (
	"strings"
	"testing"
)

func TestParsePipeline(t *testing.T) {
	tests := []struct {
		name, doc, want string // want "" for valid
	}{
		{"minimal", `{"name":"p","windows":[{"kind":"tumbling","size":"1m"}]}`, ""},
		{"unknown field would be dropped", `{"name":"p","windows":[{"kind":"tumbling","size":"1m"}],"watermark":"5s"}`, `unknown field "watermark"`},
		{"unknown window field", `{"name":"p","windows":[{"kind":"tumbling","length":"1m"}]}`, `unknown field "length"`},
		{"no name", `{"windows":[{"kind":"tumbling","size":"1m"}]}`, "name: required"},
		{"no windows", `{"name":"p"}`, "windows: at least one"},
		{"parallelization", `{"name":"p","windows":[{"kind":"tumbling","size":"1m"}],"parallelizationFactor":11}`, "parallelizationFactor 11"},
		{"no output", `{"name":"p","windows":[{"kind":"tumbling","size":"1m"}],"outputs":{"table":false}}`, "outputs: at least one"},
		{"two documents", `{"name":"p","windows":[{"kind":"tumbling","size":"1m"}]} {}`, "more than one JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePipeline([]byte(tt.doc))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ParsePipeline = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("ParsePipeline = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// Without outputs the results go to the table, as pipeline.Parse has it.
	c, err := ParsePipeline([]byte(`{"name":"p","windows":[{"kind":"tumbling","size":"1m"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Output(); got != (PipelineOutputs{Table: true}) {
		t.Errorf("Output() without outputs = %+v, want table only", got)
	}
}
