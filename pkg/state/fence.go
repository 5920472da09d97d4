package state

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// fenceWidth is wide enough for any Kinesis (up to 128-bit, 39 digits, shown
// as up to 56 digits) or DynamoDB Streams sequence number.
const fenceWidth = 64

// Fence turns a decimal sequence number into a string that DynamoDB compares
// as the number: zero-padded to a fixed width. "9" < "10" holds for fences
// even though it does not for the raw strings.
func Fence(seq string) (string, error) {
	if err := checkSeq(seq); err != nil {
		return "", err
	}
	return fenceZeros[:fenceWidth-len(seq)] + seq, nil
}

// sharedFence is Fence(seq) as a value shared (sharedS) with the other
// writes of a batch that carry seq: a key's records go to each of its
// windows' items with the same fences.
func sharedFence(seq string) (string, error) {
	if err := checkSeq(seq); err != nil {
		return "", err
	}
	var b [fenceWidth]byte
	n := copy(b[:], fenceZeros[:fenceWidth-len(seq)])
	copy(b[n:], seq)
	return sharedSBytes(b[:]).(*types.AttributeValueMemberS).Value, nil
}

func checkSeq(seq string) error {
	if seq == "" || len(seq) > fenceWidth {
		return fmt.Errorf("state: sequence number %q: want 1 to %d decimal digits", seq, fenceWidth)
	}
	for i := 0; i < len(seq); i++ {
		if seq[i] < '0' || seq[i] > '9' {
			return fmt.Errorf("state: sequence number %q: want decimal digits only", seq)
		}
	}
	return nil
}

// fenceZeros pads a fence: fenceWidth zeros.
const fenceZeros = "0000000000000000000000000000000000000000000000000000000000000000"

// fenceAttr is the item attribute holding shard's fence.
func fenceAttr(shard string) string { return "f_" + shard }

// SampleShard is the shard id under which records no stream delivered are
// applied: the console samples `make invoke` sends to a running local stack
// (emulator/local.FreshSample puts their Kinesis records on it). Kinesis
// names shards shardId-<12 digits>, so no stream has this one: the fences
// (f_shardId-make-invoke), watermark and open-windows index such records
// leave are this shard's own, never a real shard's, and the positions a
// version of the views reached (package replay) leave it out.
const SampleShard = "shardId-make-invoke"
