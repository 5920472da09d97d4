package tail

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// MaxAgo is the furthest back a duration or time may reach: Kinesis keeps
// a stream's records at most 365 days (8760 h).
const MaxAgo = 8760 * time.Hour

// maxSequenceDigits bounds a sequence number: Kinesis' are decimal
// numbers of up to 128 digits.
const maxSequenceDigits = 128

// Position is where a shard's reading starts.
type Position struct {
	// Type is LATEST (only records put from now on), TRIM_HORIZON (the
	// oldest record the stream keeps), AT_TIMESTAMP (Time) or
	// AT_SEQUENCE_NUMBER (Sequence, on one shard).
	Type     types.ShardIteratorType
	Time     time.Time
	Sequence string
}

// Latest is the position of records put from now on.
var Latest = Position{Type: types.ShardIteratorTypeLatest}

// ParsePosition reads a -from value: "latest", "trim_horizon", a duration
// ago ("10m"), an RFC 3339 time, or a sequence number (digits only).
// Times are not in the future and not more than MaxAgo before now.
func ParsePosition(s string, now time.Time) (Position, error) {
	v := strings.TrimSpace(s)
	switch strings.ToLower(v) {
	case "latest", "now":
		return Latest, nil
	case "trim_horizon", "trim-horizon", "oldest":
		return Position{Type: types.ShardIteratorTypeTrimHorizon}, nil
	case "":
		return Position{}, fmt.Errorf("is empty: give latest, trim_horizon, a duration ago (10m), an RFC 3339 time or a sequence number")
	}
	if isDigits(v) {
		if len(v) > maxSequenceDigits {
			return Position{}, fmt.Errorf("%.20s…: a sequence number has at most %d digits", v, maxSequenceDigits)
		}
		return Position{Type: types.ShardIteratorTypeAtSequenceNumber, Sequence: v}, nil
	}
	var at time.Time
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		at = t
		if at.After(now) {
			return Position{}, fmt.Errorf("%s is in the future (it is %s now)", v, now.UTC().Format(time.RFC3339))
		}
	} else {
		d, err := time.ParseDuration(v)
		if err != nil && cli.IsDuration(v) {
			// Written as a duration, only past what time.Duration holds
			// (about 2562047h).
			return Position{}, fmt.Errorf("%s: at most %s ago (the longest a stream keeps records)", strictjson.Cut(v, 64), MaxAgo)
		}
		if err != nil {
			return Position{}, fmt.Errorf("%q is none of latest, trim_horizon, a duration ago (10m), an RFC 3339 time (2026-11-29T10:00:00Z) or a sequence number", strictjson.Cut(v, 64))
		}
		if d <= 0 {
			return Position{}, fmt.Errorf("%s: a duration ago must be positive (10m means ten minutes ago)", v)
		}
		if d > MaxAgo {
			return Position{}, fmt.Errorf("%s: at most %s ago (the longest a stream keeps records)", v, MaxAgo)
		}
		at = now.Add(-d)
	}
	if now.Sub(at) > MaxAgo {
		return Position{}, fmt.Errorf("%s: at most %s ago (the longest a stream keeps records)", v, MaxAgo)
	}
	return Position{Type: types.ShardIteratorTypeAtTimestamp, Time: at.UTC()}, nil
}

// String says the position to a person.
func (p Position) String() string {
	switch p.Type {
	case types.ShardIteratorTypeAtTimestamp:
		return p.Time.UTC().Format(time.RFC3339Nano)
	case types.ShardIteratorTypeAtSequenceNumber:
		return "sequence number " + p.Sequence
	case types.ShardIteratorTypeAfterSequenceNumber:
		return "after sequence number " + p.Sequence
	case types.ShardIteratorTypeTrimHorizon:
		return "the oldest record kept (TRIM_HORIZON)"
	default:
		return "now (LATEST)"
	}
}

// iteratorInput is the GetShardIterator request for shard at p.
func (p Position) iteratorInput(stream, shard string) *kinesis.GetShardIteratorInput {
	in := &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(shard), ShardIteratorType: p.Type}
	switch p.Type {
	case types.ShardIteratorTypeAtTimestamp:
		in.Timestamp = aws.Time(p.Time)
	case types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber:
		in.StartingSequenceNumber = aws.String(p.Sequence)
	}
	return in
}

// startingPosition is the SubscribeToShard form of p.
func (p Position) startingPosition() *types.StartingPosition {
	sp := &types.StartingPosition{Type: p.Type}
	switch p.Type {
	case types.ShardIteratorTypeAtTimestamp:
		sp.Timestamp = aws.Time(p.Time)
	case types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber:
		sp.SequenceNumber = aws.String(p.Sequence)
	}
	return sp
}

// after is the position just after the record with sequence number seq.
func after(seq string) Position {
	return Position{Type: types.ShardIteratorTypeAfterSequenceNumber, Sequence: seq}
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
