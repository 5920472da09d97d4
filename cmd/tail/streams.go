package main

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/internal/localdeploy"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// stackStream is one Kinesis stream of the stack: its label (the logical
// id without CDK's hash, as make local-up lists it) and its name.
type stackStream struct{ label, name string }

// aliases name the stack's streams by what they carry. A label matches
// when it is the alias's (exact) or ends with it (the construct's id comes
// first: SearchClickJoinJoins, DetectionMatches).
var aliases = []struct {
	alias, label string
	exact        bool
}{
	{"events", "Events", true},
	{"results", resultsLabel, true},
	{"joins", "Joins", false},
	{"matches", "Matches", false},
	{"enriched", "Enriched", false},
	{"show-events", "ShowEvents", false},
}

// resultsLabel is the window results stream's label.
const resultsLabel = "WindowResults"

var cdkHash = regexp.MustCompile(`[0-9A-F]{8}$`)

// localStack is what the local runner deploys from a template: its
// streams, and the pipelines whose results go only to the views table
// (their files leave outputs.stream false), which make tail STREAM=results
// never shows.
type localStack struct {
	streams   []stackStream
	tableOnly []string
	// pipelines are every aggregation pipeline's name.
	pipelines []string
}

// templateStreams reads the streams the template deploys, named as the
// local runner deploys them under stack, and its table-only pipelines.
func templateStreams(path, stack string) (localStack, error) {
	d, err := localdeploy.Plan(path, stack)
	if err != nil {
		return localStack{}, err
	}
	var st localStack
	for _, s := range d.Streams() {
		st.streams = append(st.streams, stackStream{label: cdkHash.ReplaceAllString(s.LogicalID, ""), name: s.Name})
	}
	sort.Slice(st.streams, func(i, j int) bool { return st.streams[i].label < st.streams[j].label })
	// A file the stack was synthesized from parses; one that does not is
	// the results tool's concern, not this hint's.
	pipelines, _ := localdeploy.Pipelines(path, d)
	for _, p := range pipelines {
		st.pipelines = append(st.pipelines, p.Config.Name)
		if !p.Config.Outputs.Stream {
			st.tableOnly = append(st.tableOnly, p.Config.Name)
		}
	}
	sort.Strings(st.tableOnly)
	return st, nil
}

// resultsHint says which pipelines stream does not carry the windows of
// when it is the window results stream: "" otherwise, or when every
// pipeline writes to it.
func (st localStack) resultsHint(stream string) string {
	if len(st.tableOnly) == 0 {
		return ""
	}
	for _, s := range st.streams {
		if s.name == stream && s.label == resultsLabel {
			return st.tableOnlyNote()
		}
	}
	return ""
}

// tableOnlyNote names the table-only pipelines and how to read them.
func (st localStack) tableOnlyNote() string {
	verb := "writes its windows"
	if len(st.tableOnly) > 1 {
		verb = "write their windows"
	}
	return fmt.Sprintf("pipeline %s %s only to the views table (no \"outputs\": {\"stream\": true} in the file): make results PIPELINE=%s KEY=<key> reads them",
		strings.Join(st.tableOnly, ", "), verb, st.tableOnly[0])
}

// resolveStream finds -stream's value among the stack's streams: an alias
// (events, results, joins, matches, enriched, show-events), a label
// (StatusCodesResults) or a name.
func resolveStream(v string, st localStack) (string, error) {
	streams := st.streams
	list := func(ss []stackStream) string {
		parts := make([]string, len(ss))
		for i, s := range ss {
			parts[i] = s.label + " (" + s.name + ")"
		}
		return strings.Join(parts, ", ")
	}
	for _, a := range aliases {
		if !strings.EqualFold(v, a.alias) {
			continue
		}
		var found []stackStream
		for _, s := range streams {
			if s.label == a.label || !a.exact && strings.HasSuffix(s.label, a.label) {
				found = append(found, s)
			}
		}
		switch len(found) {
		case 1:
			return found[0].name, nil
		case 0:
			msg := fmt.Sprintf("%s: the stack has no %s stream; its streams: %s", strictjson.Cut(v, cli.MaxEcho), a.alias, list(streams))
			if a.label == resultsLabel && len(st.tableOnly) > 0 {
				msg += "; " + st.tableOnlyNote()
			}
			return "", cli.Usagef("stream", "%s", msg)
		default:
			return "", cli.Usagef("stream", "%s: the stack has %d such streams, give one by label: %s", strictjson.Cut(v, cli.MaxEcho), len(found), list(found))
		}
	}
	for _, s := range streams {
		if strings.EqualFold(v, s.label) || v == s.name {
			return s.name, nil
		}
	}
	names := make([]string, len(aliases))
	for i, a := range aliases {
		names[i] = a.alias
	}
	msg := fmt.Sprintf("%s is not a stream of the stack: give one of %s, or a label or name of %s", strictjson.QuoteCut(v, cli.MaxEcho), strings.Join(names, ", "), list(streams))
	for _, p := range st.pipelines {
		if !strings.EqualFold(v, p) {
			continue
		}
		if slices.Contains(st.tableOnly, p) {
			msg += fmt.Sprintf("; %s is a pipeline that writes its windows only to the views table: make results PIPELINE=%s KEY=<key> reads them", p, p)
		} else {
			msg += fmt.Sprintf("; %s is a pipeline: its results are on the results stream (STREAM=results), and make results PIPELINE=%s KEY=<key> reads its windows", p, p)
		}
	}
	return "", cli.Usagef("stream", "%s", msg)
}

// isAlias reports whether v is one of the aliases (events, results, …).
func isAlias(v string) bool {
	for _, a := range aliases {
		if strings.EqualFold(v, a.alias) {
			return true
		}
	}
	return false
}

// aliasHelp says the aliases in -stream's help.
func aliasHelp() string {
	names := make([]string, len(aliases))
	for i, a := range aliases {
		names[i] = a.alias
	}
	return strings.Join(names, ", ")
}
