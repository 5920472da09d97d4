package main

import (
	"regexp"
	"sort"
	"strings"

	"github.com/tributary-dev/tributary/emulator/template"
	"github.com/tributary-dev/tributary/internal/cli"
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
	{"results", "WindowResults", true},
	{"joins", "Joins", false},
	{"matches", "Matches", false},
	{"enriched", "Enriched", false},
	{"show-events", "ShowEvents", false},
}

var cdkHash = regexp.MustCompile(`[0-9A-F]{8}$`)

// templateStreams lists the streams the template deploys, named as the
// local runner deploys them under stack.
func templateStreams(path, stack string) ([]stackStream, error) {
	t, err := template.Load(path)
	if err != nil {
		return nil, cli.Usagef("template", "%v (make synth-local writes it)", err)
	}
	d, err := template.Plan(t, template.ProvisionOptions{Stack: stack})
	if err != nil {
		return nil, cli.Usagef("stack", "%v", err)
	}
	var out []stackStream
	for _, s := range d.Streams() {
		out = append(out, stackStream{label: cdkHash.ReplaceAllString(s.LogicalID, ""), name: s.Name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].label < out[j].label })
	return out, nil
}

// resolveStream finds -stream's value among the stack's streams: an alias
// (events, results, joins, matches, enriched, show-events), a label
// (StatusCodesResults) or a name.
func resolveStream(v string, streams []stackStream) (string, error) {
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
			return "", cli.Usagef("stream", "%s: the stack has no %s stream; its streams: %s", strictjson.Cut(v, cli.MaxEcho), a.alias, list(streams))
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
	return "", cli.Usagef("stream", "%s is not a stream of the stack: give one of %s, or a label or name of %s", strictjson.QuoteCut(v, cli.MaxEcho), strings.Join(names, ", "), list(streams))
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
