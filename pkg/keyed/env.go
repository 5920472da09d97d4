package keyed

import (
	"github.com/tributary-dev/tributary/pkg/backlog"
)

// EnvEventsStream names the stream a keyed operator's function reads
// (the join's and CEP's events stream): its tick reads it before it takes
// a shard for idle (WithBacklog). Optional.
const EnvEventsStream = backlog.EnvStream

// BacklogFromEnv is WithBacklog on the stream EVENTS_STREAM_NAME names,
// read with client, or an option that changes nothing when the variable
// is not set (the tick advances idle shards by the clock alone). A value
// that is not a stream name is an error naming the variable.
func BacklogFromEnv(lookup func(string) (string, bool), client backlog.ShardReader) (Option, error) {
	name, err := backlog.StreamFromEnv(lookup)
	if err != nil || name == "" {
		return func(*options) {}, err
	}
	return WithBacklog(backlog.New(client, name)), nil
}
