package redrive

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Message attributes a consumer adds when it moves a message to its queue's
// dead-letter queue itself (package worker does, for failures no retry can
// fix), so that whoever reads the DLQ sees why. A message SQS moved after
// maxReceiveCount receives carries none of them. Move drops them when it
// sends a message back, so the source sees the message as it was first sent.
const (
	// AttrPrefix starts the name of every dead-letter attribute.
	AttrPrefix = "Tributary.DeadLetter."
	// AttrReason is the error that sent the message to the DLQ (String).
	AttrReason = AttrPrefix + "Reason"
	// AttrSourceQueue is the ARN of the queue the message came from (String).
	AttrSourceQueue = AttrPrefix + "SourceQueue"
	// AttrReceiveCount is the message's ApproximateReceiveCount when it was
	// dead-lettered (Number).
	AttrReceiveCount = AttrPrefix + "ReceiveCount"
	// AttrFunction is the function that dead-lettered it (String).
	AttrFunction = AttrPrefix + "Function"
)

// ReasonLimit is the most bytes of AttrReason a dry run prints: what
// package worker writes (its reasons are cut there), so a reason is shown
// whole, with the remedy at its end.
const ReasonLimit = 1024

// withoutDeadLetterAttributes returns attrs without the AttrPrefix ones,
// or attrs itself when it has none.
func withoutDeadLetterAttributes(attrs map[string]types.MessageAttributeValue) map[string]types.MessageAttributeValue {
	n := 0
	for name := range attrs {
		if strings.HasPrefix(name, AttrPrefix) {
			n++
		}
	}
	if n == 0 {
		return attrs
	}
	out := make(map[string]types.MessageAttributeValue, len(attrs)-n)
	for name, v := range attrs {
		if !strings.HasPrefix(name, AttrPrefix) {
			out[name] = v
		}
	}
	return out
}
