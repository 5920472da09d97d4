package redrive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// DryRunDefault is how many messages a dry run lists when no limit is
// given, and MaxDryRun the most it lists: it keeps each message it has
// listed in flight until it ends (so each is listed once), and SQS holds at
// most 120,000 in flight on a standard queue.
const (
	DryRunDefault = 100
	MaxDryRun     = 100_000
)

// DryRun prints to w each message in dlqURL (id, ApproximateReceiveCount —
// which counts the dry run's own receive —, SentTimestamp, MessageGroupId if any, message attributes and the body cut
// at BodyLimit bytes), up to limit messages (0: DryRunDefault; at most
// MaxDryRun), then a count and, when the DLQ holds more, how many, and
// returns how many it printed. The DLQ is left as it was: messages are
// received with VisibilityTimeout so each is listed once, then made visible
// again at once (also when ctx is cancelled).
//
// On a FIFO DLQ, SQS does not return a message group's later messages while
// earlier ones are in flight, so a dry run lists about one receive's worth
// (up to 10) per group.
//
// It refuses (*NotADLQError) a queue that no queue names as its DLQ but has
// a redrive policy of its own: there the dry run's receives would count
// towards each message's maxReceiveCount.
func (r *Redriver) DryRun(ctx context.Context, dlqURL string, limit int, w io.Writer) (int, error) {
	if limit < 0 || limit > MaxDryRun {
		return 0, fmt.Errorf("limit %d: must be from 0 (%d) to %d", limit, DryRunDefault, MaxDryRun)
	}
	if limit == 0 {
		limit = DryRunDefault
	}
	if err := r.checkListable(ctx, dlqURL); err != nil {
		return 0, err
	}
	approx, err := r.ApproximateCount(ctx, dlqURL)
	if err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	var handles []string
	count, empty := 0, 0
	var runErr error
	for limit == 0 || count < limit {
		if err := ctx.Err(); err != nil {
			runErr = err
			break
		}
		n := 10
		if limit > 0 {
			n = min(n, limit-count)
		}
		// Not cancelled with ctx, so that what a receive got is released below.
		msgs, err := r.receive(context.WithoutCancel(ctx), dlqURL, n)
		if err != nil {
			runErr = err
			break
		}
		fresh := 0
		for _, m := range msgs {
			handles = append(handles, aws.ToString(m.ReceiptHandle))
			id := aws.ToString(m.MessageId)
			if seen[id] || (limit > 0 && count >= limit) {
				continue
			}
			seen[id] = true
			fresh++
			count++
			r.printMessage(w, m)
		}
		if fresh == 0 {
			empty++
			if empty >= r.EmptyReceives {
				break
			}
			continue
		}
		empty = 0
	}
	if err := r.release(ctx, dlqURL, handles); err != nil {
		runErr = errors.Join(runErr, err)
	}
	fmt.Fprintf(w, "%d message(s) listed (≈%d in the DLQ); nothing was moved\n", count, approx)
	if count == limit && approx > count {
		fmt.Fprintf(w, "… about %d more not listed: -max lists up to %d\n", approx-count, MaxDryRun)
	}
	if strings.HasSuffix(dlqURL, ".fifo") && count < approx {
		fmt.Fprintln(w, "note: a FIFO queue hides a message group's later messages while earlier ones are in flight, so a dry run lists about 10 per group")
	}
	return count, runErr
}

func (r *Redriver) printMessage(w io.Writer, m types.Message) {
	a := m.Attributes
	fmt.Fprintf(w, "message %s  dlqReceives=%s  sent=%s", aws.ToString(m.MessageId),
		a[string(types.MessageSystemAttributeNameApproximateReceiveCount)],
		formatMillis(a[string(types.MessageSystemAttributeNameSentTimestamp)]))
	if g := a[string(types.MessageSystemAttributeNameMessageGroupId)]; g != "" {
		fmt.Fprintf(w, "  group=%s", printable(g))
	}
	fmt.Fprintln(w)
	if reason := m.MessageAttributes[AttrReason].StringValue; reason != nil {
		// Dead-lettered by a consumer that said why (package worker).
		fmt.Fprintf(w, "  reason: %s\n", printable(truncate(aws.ToString(reason), max(r.BodyLimit, ReasonLimit))))
	} else {
		fmt.Fprintln(w, "  reason: not recorded (SQS moved it after maxReceiveCount receives; see the function's logs)")
	}
	names := make([]string, 0, len(m.MessageAttributes))
	for name := range m.MessageAttributes {
		if name != AttrReason { // printed above
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		// A producer's attributes, like its body: each cut at BodyLimit
		// (a value may be most of the message's 256 KiB), names and types
		// shown printable.
		v := m.MessageAttributes[name]
		val := strconv.Quote(truncate(aws.ToString(v.StringValue), r.BodyLimit))
		if v.BinaryValue != nil {
			val = fmt.Sprintf("<%d bytes>", len(v.BinaryValue))
		}
		fmt.Fprintf(w, "  attribute %s (%s) = %s\n", printable(truncate(name, r.BodyLimit)), printable(truncate(aws.ToString(v.DataType), r.BodyLimit)), val)
	}
	body := aws.ToString(m.Body)
	fmt.Fprintf(w, "  body (%d bytes): %s\n", len(body), printable(truncate(body, r.BodyLimit)))
}

// printable is s as it is when every character prints, else quoted (Go
// syntax: \x1b, \r, \u2028): a message body or a reason is a producer's
// text, and an escape sequence in it would reach the operator's terminal.
func printable(s string) string {
	for _, c := range s {
		if c != ' ' && !strconv.IsGraphic(c) {
			return strconv.Quote(s)
		}
	}
	return s
}

// formatMillis turns SQS's epoch-milliseconds attribute into RFC 3339 UTC,
// or returns it unchanged if it is not a number.
func formatMillis(ms string) string {
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return ms
	}
	return time.UnixMilli(n).UTC().Format(time.RFC3339Nano)
}

// truncate cuts s to at most limit bytes on a rune boundary, marking the cut.
func truncate(s string, limit int) string {
	if limit <= 0 || len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d more bytes)", len(s)-cut)
}
