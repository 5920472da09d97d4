package redrive

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Move moves messages from dlqURL to sourceURL until the DLQ is drained
// (EmptyReceives receives in a row that come back empty, or with only
// messages the source already refused, back in view after their
// VisibilityTimeout) or limit messages (0: no limit) have been tried, and
// returns what it did.
//
// Each batch of up to 10 is sent with SendMessageBatch, keeping body and
// message attributes (and, for a FIFO source, the MessageGroupId, with the
// DLQ message id as MessageDeduplicationId, and its AWSTraceHeader) but
// without the dead-letter attributes (AttrPrefix) a consumer added; then only the entries the send
// accepted are deleted from the DLQ. Entries the source refused are reported
// in Result.Failed and stay in the DLQ: they stay hidden for VisibilityTimeout
// so the run does not spin on them, and are made visible again when Move
// returns. A message back in the DLQ with the content (body, attributes
// without the dead-letter ones, group) of one this run moved failed again
// at the source — its cause still holds — and is not sent again: it is
// refused, FailedAgain, and stays in the DLQ, so a run alongside a
// consumer that keeps failing it ends. (A copy of a moved message,
// identical in body and attributes, is left for the next run the same
// way.) Nothing is lost whenever the run stops; at worst a message that was
// sent but not yet deleted is sent again by the next run, which idempotent
// consumers absorb.
//
// Before receiving anything Move checks the direction: sourceURL's redrive
// policy must name dlqURL as its dead-letter queue (a *DirectionError
// otherwise, which says when the two were given the wrong way round).
//
// Cancelling ctx stops Move between batches (a receive or batch in progress
// is finished first); it then returns the result so far and ctx's error.
func (r *Redriver) Move(ctx context.Context, dlqURL, sourceURL string, limit int) (Result, error) {
	var res Result
	if limit < 0 {
		return res, fmt.Errorf("limit %d: must be 0 (all) or more", limit)
	}
	if err := r.CheckDirection(ctx, dlqURL, sourceURL); err != nil {
		return res, err
	}
	// A dead-lettered message can be larger than its source queue takes
	// (the stack's dead-letter queues take 1 MiB, their sources 256 KiB):
	// such a message is refused by id and stays in the DLQ, where sending
	// it would fail its whole batch at every run.
	src, err := r.queueInfo(ctx, sourceURL)
	if err != nil {
		return res, err
	}
	approx, err := r.ApproximateCount(ctx, dlqURL)
	if err != nil {
		return res, err
	}
	total := approx
	printed := -1 // the count the last progress line gave
	if limit > 0 {
		total = min(total, limit)
	}
	fifo := strings.HasSuffix(sourceURL, ".fifo")
	// Refused messages by id, in the order first refused; a message refused
	// and later accepted (the run outlasted its visibility) is dropped again.
	refusedByID := map[string]refused{}
	// On a FIFO source, the id of the first message refused in each group:
	// the group's later messages stay behind it, or the source would get
	// them out of order.
	held := map[string]string{}
	var refusedOrder []string
	ordered := map[string]bool{}
	// What this run moved, by content: a message that is back in the DLQ
	// while the run goes on failed again (its cause still holds), and
	// moving it again would never end.
	moved := map[contentKey]bool{}
	empty := 0
	var runErr error
	for {
		if err := ctx.Err(); err != nil {
			runErr = err
			break
		}
		n := 10
		if limit > 0 {
			left := limit - res.Moved - len(res.Failed)
			if left <= 0 {
				break
			}
			n = min(n, left)
		}
		// The receive is not cancelled with ctx: messages it got after a
		// cancelled request would stay hidden for VisibilityTimeout. Ctrl-C
		// during a long poll waits for it (WaitTime) and moves what it got.
		msgs, err := r.receive(context.WithoutCancel(ctx), dlqURL, n)
		if err != nil {
			runErr = err
			break
		}
		if len(msgs) == 0 {
			empty++
			if empty >= r.EmptyReceives {
				break
			}
			continue
		}
		// A refused message comes back into view after VisibilityTimeout;
		// one that is refused again is no progress, so a receive of only
		// such messages counts as empty, or a DLQ whose refused messages
		// take longer than the visibility to go through is never drained.
		again := true
		for _, m := range msgs {
			if !ordered[aws.ToString(m.MessageId)] {
				again = false
				break
			}
		}
		b, err := r.moveBatch(context.WithoutCancel(ctx), dlqURL, sourceURL, src.maxBytes, fifo, held, moved, msgs)
		if again && b.moved == 0 && err == nil {
			empty++
		} else {
			empty = 0
		}
		res.Moved += b.moved
		res.NotDeleted = append(res.NotDeleted, b.notDeleted...)
		for _, id := range b.movedIDs {
			delete(refusedByID, id)
		}
		for _, f := range b.failed {
			if !ordered[f.failure.MessageID] {
				ordered[f.failure.MessageID] = true
				refusedOrder = append(refusedOrder, f.failure.MessageID)
			}
			refusedByID[f.failure.MessageID] = f
		}
		res.Failed = nil
		for _, id := range refusedOrder {
			if f, ok := refusedByID[id]; ok {
				res.Failed = append(res.Failed, f.failure)
			}
		}
		if err != nil {
			runErr = err
			break
		}
		if r.Progress != nil && progressDue(printed, res.Moved, total) {
			fmt.Fprintf(r.Progress, "moved %d/≈%d\n", res.Moved, max(total, res.Moved+len(res.Failed)))
			printed = res.Moved
		}
		if r.AfterBatch != nil {
			r.AfterBatch(res)
		}
		if empty >= r.EmptyReceives {
			break
		}
	}
	if r.Progress != nil && printed >= 0 && printed != res.Moved {
		fmt.Fprintf(r.Progress, "moved %d/≈%d\n", res.Moved, max(total, res.Moved+len(res.Failed)))
	}
	if len(refusedByID) > 0 {
		handles := make([]string, 0, len(refusedByID))
		for _, f := range refusedByID {
			handles = append(handles, f.handle)
		}
		if err := r.release(ctx, dlqURL, handles); err != nil {
			runErr = errors.Join(runErr, err)
		}
	}
	res.Left = r.left(context.WithoutCancel(ctx), dlqURL)
	return res, runErr
}

// left is about how many messages queueURL holds, visible and in flight
// (-1 if it cannot be read).
func (r *Redriver) left(ctx context.Context, queueURL string) int {
	n, err := r.count(ctx, queueURL, types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)
	if err != nil {
		return -1
	}
	return n
}

type refused struct {
	failure Failure
	handle  string
}

type batchResult struct {
	moved      int
	movedIDs   []string
	failed     []refused
	notDeleted []string
}

// moveBatch sends msgs to sourceURL in as few SendMessageBatch calls as the
// size limit allows, then deletes from dlqURL what was accepted; a message
// over maxBytes (the source's MaximumMessageSize, 0: unknown) is refused
// without being sent. On a FIFO source (fifo), a message whose group has a
// message refused before it in the run (held, by group: the refused one's
// id; moveBatch adds to it) is refused too, HeldBehindRefused, so the
// group reaches the source in order. A message with the content of one the
// run moved before (moved, by contentKey; moveBatch adds to it) is back in
// the DLQ because it failed again: it is refused, FailedAgain. An error
// means a call failed as a whole; the messages it covered were not deleted
// and are made visible again.
func (r *Redriver) moveBatch(ctx context.Context, dlqURL, sourceURL string, maxBytes int, fifo bool, held map[string]string, moved map[contentKey]bool, msgs []types.Message) (batchResult, error) {
	var b batchResult
	entries := make([]types.SendMessageBatchRequestEntry, 0, len(msgs))
	byEntry := map[string]types.Message{}
	keys := map[string]contentKey{}
	for i, m := range msgs {
		id := "m" + strconv.Itoa(i)
		e := types.SendMessageBatchRequestEntry{
			Id:                aws.String(id),
			MessageBody:       m.Body,
			MessageAttributes: withoutDeadLetterAttributes(m.MessageAttributes),
		}
		// The one system attribute a sender may set (its size does not
		// count towards the message's): the message's trace goes on.
		if h := m.Attributes[string(types.MessageSystemAttributeNameAWSTraceHeader)]; h != "" {
			e.MessageSystemAttributes = map[string]types.MessageSystemAttributeValue{
				string(types.MessageSystemAttributeNameForSendsAWSTraceHeader): {DataType: aws.String("String"), StringValue: aws.String(h)}}
		}
		if fifo {
			g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
			if g == "" {
				b.failed = append(b.failed, refused{
					failure: Failure{MessageID: aws.ToString(m.MessageId), Code: "MissingMessageGroupId",
						Reason: "the source is a FIFO queue but the message has no MessageGroupId (is the DLQ a standard queue?)"},
					handle: aws.ToString(m.ReceiptHandle),
				})
				continue
			}
			if first, ok := held[g]; ok && first != aws.ToString(m.MessageId) {
				b.failed = append(b.failed, refused{
					failure: Failure{MessageID: aws.ToString(m.MessageId), Code: "HeldBehindRefused",
						Reason: fmt.Sprintf("message %s before it in group %q was refused: on a FIFO queue the group goes in order, so it stays in the DLQ behind it", first, g)},
					handle: aws.ToString(m.ReceiptHandle),
				})
				continue
			}
			e.MessageGroupId = aws.String(g)
			// The DLQ message id, not the original MessageDeduplicationId: a
			// message that reached the DLQ within 5 minutes of being sent would
			// otherwise be accepted by the source but dropped as a duplicate of
			// itself, and then deleted from the DLQ — lost. The message id is
			// stable across runs, so a re-send after an interrupted run within
			// the deduplication interval is still dropped.
			e.MessageDeduplicationId = m.MessageId
		}
		key := keyOf(e)
		if moved[key] {
			b.failed = append(b.failed, refused{
				failure: Failure{MessageID: aws.ToString(m.MessageId), Code: codeFailedAgain,
					Reason: "moved to the source earlier in this run and back in the DLQ (or a copy of one that was, body and attributes alike): its failure still holds; read its reason (-dry-run), fix the cause, then redrive it"},
				handle: aws.ToString(m.ReceiptHandle),
			})
			continue
		}
		if n := entrySize(e); maxBytes > 0 && n > maxBytes {
			if fifo {
				held[aws.ToString(e.MessageGroupId)] = aws.ToString(m.MessageId)
			}
			b.failed = append(b.failed, refused{
				failure: Failure{MessageID: aws.ToString(m.MessageId), Code: "MessageTooLarge",
					Reason: fmt.Sprintf("%d bytes with its attributes, over the source queue's MaximumMessageSize of %d: left in the DLQ", n, maxBytes)},
				handle: aws.ToString(m.ReceiptHandle),
			})
			continue
		}
		entries = append(entries, e)
		byEntry[id] = m
		keys[id] = key
	}
	var toDelete []types.DeleteMessageBatchRequestEntry
	var unsent []string // receipt handles of messages whose send failed as a whole
	var sendErr error
	for _, chunk := range chunkBySize(entries) {
		if sendErr != nil {
			for _, e := range chunk {
				unsent = append(unsent, aws.ToString(byEntry[aws.ToString(e.Id)].ReceiptHandle))
			}
			continue
		}
		out, err := r.Client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(sourceURL), Entries: chunk})
		if err != nil {
			sendErr = fmt.Errorf("sending %d messages to %s (none deleted from the DLQ): %w", len(chunk), sourceURL, err)
			for _, e := range chunk {
				unsent = append(unsent, aws.ToString(byEntry[aws.ToString(e.Id)].ReceiptHandle))
			}
			continue
		}
		for _, ok := range out.Successful {
			m := byEntry[aws.ToString(ok.Id)]
			if g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; fifo && held[g] == aws.ToString(m.MessageId) {
				delete(held, g) // refused before, accepted now: its group goes on
			}
			toDelete = append(toDelete, types.DeleteMessageBatchRequestEntry{Id: ok.Id, ReceiptHandle: m.ReceiptHandle})
		}
		for _, f := range out.Failed {
			m := byEntry[aws.ToString(f.Id)]
			if fifo {
				// Later messages of its group in this call may have gone
				// already; none goes after it from here on.
				if g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; held[g] == "" {
					held[g] = aws.ToString(m.MessageId)
				}
			}
			b.failed = append(b.failed, refused{
				failure: Failure{MessageID: aws.ToString(m.MessageId), Code: aws.ToString(f.Code), Reason: aws.ToString(f.Message)},
				handle:  aws.ToString(m.ReceiptHandle),
			})
		}
	}
	if len(toDelete) > 0 {
		out, err := r.Client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(dlqURL), Entries: toDelete})
		if err != nil {
			for _, d := range toDelete {
				b.notDeleted = append(b.notDeleted, aws.ToString(byEntry[aws.ToString(d.Id)].MessageId))
			}
			sendErr = errors.Join(sendErr, fmt.Errorf("deleting %d sent messages from %s (they stay there and will be sent again): %w", len(toDelete), dlqURL, err))
		} else {
			notDeleted := map[string]bool{}
			for _, f := range out.Failed {
				id := aws.ToString(byEntry[aws.ToString(f.Id)].MessageId)
				notDeleted[aws.ToString(f.Id)] = true
				b.notDeleted = append(b.notDeleted, id)
			}
			for _, d := range toDelete {
				if !notDeleted[aws.ToString(d.Id)] {
					moved[keys[aws.ToString(d.Id)]] = true
					b.moved++
					b.movedIDs = append(b.movedIDs, aws.ToString(byEntry[aws.ToString(d.Id)].MessageId))
				}
			}
		}
	}
	if len(unsent) > 0 {
		if err := r.release(ctx, dlqURL, unsent); err != nil {
			sendErr = errors.Join(sendErr, err)
		}
	}
	return b, sendErr
}

// chunkBySize splits entries into runs that each fit in one SendMessageBatch.
func chunkBySize(entries []types.SendMessageBatchRequestEntry) [][]types.SendMessageBatchRequestEntry {
	var chunks [][]types.SendMessageBatchRequestEntry
	var cur []types.SendMessageBatchRequestEntry
	size := 0
	for _, e := range entries {
		s := entrySize(e)
		if len(cur) > 0 && size+s > maxBatchBytes {
			chunks = append(chunks, cur)
			cur, size = nil, 0
		}
		cur = append(cur, e)
		size += s
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks
}

// entrySize is the size SQS counts for an entry: body plus each attribute's
// name, data type and value.
func entrySize(e types.SendMessageBatchRequestEntry) int {
	n := len(aws.ToString(e.MessageBody))
	for name, v := range e.MessageAttributes {
		n += len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// contentKey identifies a message by what a consumer sees of it: its body,
// its message attributes (without the dead-letter ones) and its group
// (a SHA-256 cut to 16 bytes: a run that moves millions keeps little).
type contentKey [16]byte

// keyOf is the contentKey of the entry e would send.
func keyOf(e types.SendMessageBatchRequestEntry) contentKey {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(aws.ToString(e.MessageBody)))
	field([]byte(aws.ToString(e.MessageGroupId)))
	names := make([]string, 0, len(e.MessageAttributes))
	for name := range e.MessageAttributes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		a := e.MessageAttributes[name]
		field([]byte(name))
		field([]byte(aws.ToString(a.DataType)))
		field([]byte(aws.ToString(a.StringValue)))
		field(a.BinaryValue)
	}
	var k contentKey
	copy(k[:], h.Sum(nil))
	return k
}

// Progress lines: the first batch's, then one each time the count has
// grown by a hundredth of the DLQ's approximate size (at least
// progressEvery messages), and the last: about a hundred lines however many
// messages a run moves.
const (
	progressEvery = 10
	progressLines = 100
)

// progressDue reports whether a progress line is due at moved messages of
// about total, the last line having said printed (-1: none yet).
func progressDue(printed, moved, total int) bool {
	return printed < 0 || moved-printed >= max(progressEvery, total/progressLines)
}

// codeFailedAgain is the Failure code of a message the run moved that came
// back to the DLQ failing again.
const codeFailedAgain = "FailedAgain"
