package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
)

// taskRounds is every task's SHA-256 rounds: one, so that the latency is the
// idempotency layer's and the side effect's, not the hashing's.
const taskRounds = 1

// task is one message of the workload and the results item it must leave.
type task struct {
	id     string
	body   string
	digest string
}

// generate returns n task messages with unique task ids, as an SQS queue
// would deliver them.
func generate(n int) []task {
	tasks := make([]task, n)
	for i := range tasks {
		id := fmt.Sprintf("task-%05d", i)
		input := fmt.Sprintf("input-%d", i)
		tasks[i] = task{
			id: id,
			body: fmt.Sprintf(`{"id":"evt-%05d","type":"task","key":%q,"occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:01Z","data":{"taskId":%q,"input":%q,"rounds":%d}}`,
				i, id, id, input, taskRounds),
			digest: digest(input, taskRounds),
		}
	}
	return tasks
}

// digest is what pkg/worker computes for a task: SHA-256 of input, then
// rounds-1 more times over the previous sum.
func digest(input string, rounds int) string {
	sum := sha256.Sum256([]byte(input))
	for i := 1; i < rounds; i++ {
		sum = sha256.Sum256(sum[:])
	}
	return hex.EncodeToString(sum[:])
}

// sqsEvents splits tasks into SQS events of at most size messages each.
func sqsEvents(tasks []task, size int) []events.SQSEvent {
	var out []events.SQSEvent
	for i := 0; i < len(tasks); i += size {
		var ev events.SQSEvent
		for j := i; j < min(i+size, len(tasks)); j++ {
			ev.Records = append(ev.Records, events.SQSMessage{
				MessageId:   fmt.Sprintf("msg-%05d", j),
				Body:        tasks[j].body,
				Attributes:  map[string]string{"SentTimestamp": "1795946401000"},
				EventSource: "aws:sqs",
			})
		}
		out = append(out, ev)
	}
	return out
}
