package cdc

// Position is a position of a DynamoDB table's stream: for each shard, the
// sequence number of the last record in it when the position was taken
// ("" for a shard that held no record yet). A change with a higher sequence
// number in its shard comes after the position.
type Position struct {
	// StreamArn is the table's stream.
	StreamArn string `json:"streamArn"`
	// Shards maps shard id to its last sequence number.
	Shards map[string]string `json:"shards"`
}
