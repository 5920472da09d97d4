package es

import (
	"fmt"
	"strconv"

	"github.com/tributary-dev/tributary/internal/envvar"
)

// Environment variables of the event-sourcing functions (set by the stack,
// infra/eventsourcing.go).
const (
	EnvEventsTable    = "ES_EVENTS_TABLE"
	EnvSnapshotsTable = "ES_SNAPSHOTS_TABLE"
	EnvCommandsTable  = "ES_COMMANDS_TABLE"
	EnvSnapshotEvery  = "ES_SNAPSHOT_EVERY"
	EnvStreamName     = "ES_STREAM_NAME"
)

// TablesFromEnv reads the tables' names: the events table always, the
// snapshots and commands tables when required. Errors name the variable:
// unset when required, or not a name DynamoDB takes.
func TablesFromEnv(lookup func(string) (string, bool), snapshots, commands bool) (Tables, error) {
	get := func(name, what string, required bool) (string, error) {
		if v, _ := lookup(name); v == "" && !required {
			return "", nil
		}
		return envvar.Name(lookup, name, what, envvar.Table)
	}
	var t Tables
	var err error
	if t.Events, err = get(EnvEventsTable, "the events table", true); err != nil {
		return t, err
	}
	if t.Snapshots, err = get(EnvSnapshotsTable, "the snapshots table", snapshots); err != nil {
		return t, err
	}
	if t.Commands, err = get(EnvCommandsTable, "the command records table", commands); err != nil {
		return t, err
	}
	return t, nil
}

// SnapshotEveryFromEnv reads ES_SNAPSHOT_EVERY (DefaultSnapshotEvery when
// unset; 0 turns snapshots off).
func SnapshotEveryFromEnv(lookup func(string) (string, bool)) (int, error) {
	v, ok := lookup(EnvSnapshotEvery)
	if !ok || v == "" {
		return DefaultSnapshotEvery, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 10000 {
		return 0, fmt.Errorf("environment variable %s: %q is not a whole number from 0 (no snapshots) to 10000", EnvSnapshotEvery, v)
	}
	return n, nil
}
