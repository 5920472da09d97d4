package local

import (
	"sort"

	"github.com/tributary-dev/tributary/emulator/template"
)

// functionNames gives each function of the template the name the runner
// knows it by (in its output, its statistics, the Invoke API, Stack.URL and
// Stack.Invoke), by logical id: its binary ("ingest") when no other function
// runs that binary; otherwise, as for the aggregate and ticker functions of
// several pipelines, "<binary>-<pipeline>" ("aggregate-checkouts"), from
// the function's Metadata "tributary:pipeline", or "<binary>-<logical id>"
// when that does not tell them apart.
func functionNames(specs []template.FunctionSpec) map[string]string {
	byBinary := map[string][]template.FunctionSpec{}
	for _, f := range specs {
		byBinary[f.Binary] = append(byBinary[f.Binary], f)
	}
	out := make(map[string]string, len(specs))
	for binary, fs := range byBinary {
		if len(fs) == 1 && binary != "" {
			out[fs[0].LogicalID] = binary
			continue
		}
		pipelines := map[string]int{}
		for _, f := range fs {
			pipelines[f.Pipeline]++
		}
		for _, f := range fs {
			switch {
			case binary == "":
				out[f.LogicalID] = f.LogicalID
			case f.Pipeline != "" && pipelines[f.Pipeline] == 1:
				out[f.LogicalID] = binary + "-" + f.Pipeline
			default:
				out[f.LogicalID] = binary + "-" + f.LogicalID
			}
		}
	}
	return out
}

// FunctionName is the name the runner knows the function with logicalID
// by (see Up's output): its binary, or "<binary>-<pipeline>" when several
// functions run the binary.
func (s *Stack) FunctionName(logicalID string) string { return s.names[logicalID] }

// FunctionsOf lists the runner's names of the functions built from binary,
// sorted.
func (s *Stack) FunctionsOf(binary string) []string {
	var out []string
	for _, f := range s.specs {
		if f.Binary == binary {
			out = append(out, s.names[f.LogicalID])
		}
	}
	sort.Strings(out)
	return out
}
