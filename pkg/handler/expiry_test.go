package handler_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/state"
)

// TestKeyStateOutlivesItsOpenWindow sends one record to handlers whose
// windows, out-of-orderness, idle timeout and allowed lateness keep a
// window open, or open to corrections, for longer than a week, then reads
// the TTL (expiresAt) DynamoDB deletes the key's state item at. A key
// quiet since that record must keep its state until its window can have
// closed and taken its last correction — the record's window span, the
// out-of-orderness, the idle timeout and the allowed lateness after the
// write — and never less than the 8 days a replay of the events stream may
// need its fences for. An expiry of 8 days whatever the window lost a
// 30-day window's state before it closed: its result was never put nor
// set aside.
func TestKeyStateOutlivesItsOpenWindow(t *testing.T) {
	const (
		day = 24 * time.Hour
		// the default out-of-orderness and idle timeout: how long after
		// its end a window waits for an idle shard's watermark
		waits = handler.DefaultOutOfOrderness + handler.DefaultIdleTimeout
	)
	for _, c := range []struct {
		name string
		opts []handler.Option
		// open is how long after its last record a key's window can still
		// be closed or corrected, at the most: the record's window span,
		// the out-of-orderness, the idle timeout, the allowed lateness.
		open time.Duration
	}{
		{"a minute's window keeps the 8 days", []handler.Option{handler.WithWindow(time.Minute)}, time.Minute + waits},
		{"30-day tumbling window", []handler.Option{handler.WithWindow(30 * day)}, 30*day + waits},
		{"30-day hopping window", []handler.Option{handler.WithHopping(30*day, day)}, 30*day + waits},
		{"20-day sliding difference", []handler.Option{handler.WithSliding(20 * day)}, 20*day + waits},
		{"20-day session gap, a day's out-of-orderness and idle timeout",
			[]handler.Option{handler.WithSession(20 * day), handler.WithOutOfOrderness(day), handler.WithIdleTimeout(day)}, 22 * day},
		{"a minute's window corrected for 30 days",
			[]handler.Option{handler.WithWindow(time.Minute), handler.WithLatePolicy(handler.Correct), handler.WithAllowedLateness(30 * day)}, 30*day + time.Minute + waits},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := setup(t)
			h, err := handler.NewWindowed[Tally](cfg, selectLatency, append(c.opts, handler.WithLogger(quiet), handler.WithMetrics(nil))...)
			if err != nil {
				t.Fatal(err)
			}
			wrote := time.Now().Truncate(time.Second)
			mustBatch(t, h, kinesisRecords([]rec{{1, request("a", "k", 1, `{"ms":1}`)}}))
			pk, sk := state.KeyedRef{Pipeline: cfg.Name, Key: "k", Kind: handler.StateKind}.ItemKey()
			out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(cfg.StateTable), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}})
			if err != nil {
				t.Fatal(err)
			}
			n, ok := out.Item["expiresAt"].(*types.AttributeValueMemberN)
			if !ok {
				t.Fatalf("state item %s %s has no expiresAt: %v", pk, sk, out.Item)
			}
			sec, err := strconv.ParseInt(n.Value, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			kept := time.Unix(sec, 0).Sub(wrote)
			if want := max(keyed.StateExpiry, c.open); kept < want {
				t.Errorf("the key's state expires %v after its last write; its window can still close or be corrected %v after it (want at least %v)", kept, c.open, want)
			}
		})
	}
}
