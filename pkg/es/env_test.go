package es_test

import (
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/pkg/es"
)

// The tables' names are checked as DynamoDB takes them: a space after a
// name, or an empty optional one, fails naming the variable.
func TestTablesFromEnv(t *testing.T) {
	for _, c := range []struct {
		env                 map[string]string
		snapshots, commands bool
		want                string // "" : accepted
	}{
		{map[string]string{es.EnvEventsTable: "events"}, false, false, ""},
		{map[string]string{es.EnvEventsTable: "events", es.EnvSnapshotsTable: "snapshots", es.EnvCommandsTable: "commands"}, true, true, ""},
		{map[string]string{}, false, false, "ES_EVENTS_TABLE is not set"},
		{map[string]string{es.EnvEventsTable: "events "}, false, false, `ES_EVENTS_TABLE: "events " is not a DynamoDB table name`},
		{map[string]string{es.EnvEventsTable: "events"}, true, false, "ES_SNAPSHOTS_TABLE is not set"},
		{map[string]string{es.EnvEventsTable: "events", es.EnvSnapshotsTable: "snap shots", es.EnvCommandsTable: "commands"}, true, true, `ES_SNAPSHOTS_TABLE: "snap shots" is not`},
	} {
		lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		tables, err := es.TablesFromEnv(lookup, c.snapshots, c.commands)
		switch {
		case c.want == "" && (err != nil || tables.Events != c.env[es.EnvEventsTable]):
			t.Errorf("%v: %+v, %v", c.env, tables, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v; want %q", c.env, err, c.want)
		}
	}
}
