package tail

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// ConsumerPrefix starts the name of every consumer a tail registers:
// tributary-tail-<deadline>-<session>, where deadline is the Unix second
// by which the session ends (MaxSession after it starts, at most) and
// session a random id. A consumer whose deadline has passed by more than
// StaleGrace was left by a run that could not deregister it (killed,
// crashed, lost its network), and the next run removes it.
const ConsumerPrefix = "tributary-tail-"

// Bounds of a session with its own consumer.
const (
	// DefaultMaxSession is how long a session with a consumer lasts
	// unless told otherwise; MaxSessionLimit the longest allowed.
	DefaultMaxSession = time.Hour
	MaxSessionLimit   = 24 * time.Hour
	// StaleGrace is how long after its deadline a consumer is left to
	// its own run to deregister.
	StaleGrace = 5 * time.Minute
	// activeWait bounds the wait for a new consumer to become ACTIVE
	// (AWS takes seconds); after it, the tail polls instead.
	activeWait = time.Minute
	// maxConsumerPages bounds the consumer listing: a stream has at most
	// 20 consumers, 100 a page.
	maxConsumerPages = 5
)

// consumerName is the name of a session's consumer.
func consumerName(deadline time.Time) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return ConsumerPrefix + strconv.FormatInt(deadline.Unix(), 10) + "-" + hex.EncodeToString(b[:]), nil
}

// consumerDeadline reads the deadline from a tail consumer's name; ok is
// false for a name that is not one.
func consumerDeadline(name string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(name, ConsumerPrefix)
	if !ok {
		return time.Time{}, false
	}
	sec, _, ok := strings.Cut(rest, "-")
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// stale reports whether c is a tail's consumer its run can no longer be
// using at now: its deadline passed more than StaleGrace ago (or, for a
// name without one, it was created more than MaxSessionLimit +
// StaleGrace ago).
func stale(c types.Consumer, now time.Time) bool {
	name := aws.ToString(c.ConsumerName)
	if !strings.HasPrefix(name, ConsumerPrefix) {
		return false
	}
	if d, ok := consumerDeadline(name); ok {
		return now.After(d.Add(StaleGrace))
	}
	created := aws.ToTime(c.ConsumerCreationTimestamp)
	return !created.IsZero() && now.Sub(created) > MaxSessionLimit+StaleGrace
}

// removeStale deregisters the tail consumers of the stream that earlier
// runs left behind, and returns what it removed, one line each.
func removeStale(ctx context.Context, kin KinesisAPI, streamARN string, now time.Time) ([]string, error) {
	var removed []string
	in := &kinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN)}
	for page := 0; page < maxConsumerPages; page++ {
		out, err := kin.ListStreamConsumers(ctx, in)
		if err != nil {
			return removed, fmt.Errorf("listing the consumers of %s: %w", streamARN, err)
		}
		for _, c := range out.Consumers {
			if !stale(c, now) || c.ConsumerStatus == types.ConsumerStatusDeleting {
				continue
			}
			if _, err := kin.DeregisterStreamConsumer(ctx, &kinesis.DeregisterStreamConsumerInput{ConsumerARN: c.ConsumerARN}); err != nil {
				var nf *types.ResourceNotFoundException
				if errors.As(err, &nf) {
					continue
				}
				return removed, fmt.Errorf("removing consumer %s left by an earlier tail: %w", aws.ToString(c.ConsumerName), err)
			}
			removed = append(removed, fmt.Sprintf("removed consumer %s, left by an earlier tail that did not end cleanly (created %s)",
				aws.ToString(c.ConsumerName), aws.ToTime(c.ConsumerCreationTimestamp).UTC().Format(time.RFC3339)))
		}
		if out.NextToken == nil {
			break
		}
		in = &kinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN), NextToken: out.NextToken}
	}
	return removed, nil
}

// register registers a consumer named name on the stream and waits until
// it is ACTIVE; it returns the consumer's ARN. On an error after the
// registration it deregisters the consumer again.
func register(ctx context.Context, kin KinesisAPI, streamARN, name string, sleep func(context.Context, time.Duration) error) (string, error) {
	out, err := kin.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("registering consumer %s: %w", name, err)
	}
	arn := aws.ToString(out.Consumer.ConsumerARN)
	status := out.Consumer.ConsumerStatus
	for waited := time.Duration(0); status != types.ConsumerStatusActive; waited += time.Second {
		if waited >= activeWait {
			err = fmt.Errorf("consumer %s is still %s after %s", name, status, activeWait)
		} else if err = sleep(ctx, time.Second); err == nil {
			var d *kinesis.DescribeStreamConsumerOutput
			if d, err = kin.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)}); err == nil {
				status = d.ConsumerDescription.ConsumerStatus
				continue
			}
		}
		return "", errors.Join(err, deregister(ctx, kin, arn))
	}
	return arn, nil
}

// deregister removes the session's consumer, even when ctx has ended
// (Ctrl-C): with a context of its own, bounded.
func deregister(ctx context.Context, kin KinesisAPI, arn string) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err := kin.DeregisterStreamConsumer(dctx, &kinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(arn)})
	var nf *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("deregistering consumer %s: %w", arn, err)
	}
	return nil
}
