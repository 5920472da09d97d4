package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestSessionStatesExpire: with the views options every writer of a
// pipeline's views uses, a key's session state item carries a TTL —
// keyed.StateExpiry past its write plus the longest a late record can
// still change it — so the state of a key that stops sending is deleted
// once no redelivery, replay or correction can need it (it was kept for
// ever); window items keep the pipeline's retention past their end.
func TestSessionStatesExpire(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"expiry","key":"key","windows":[{"kind":"session","gap":"30s"},{"kind":"tumbling","size":"1m"}],
	  "aggregates":["count"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"correct","allowedLateness":"2h","partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	table := fmt.Sprintf("expiry-%d", tableSeq.Add(1))
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	p := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates, aggregate.ViewsOptions(cfg)...), nil, "", aggregate.WithLogger(quiet))
	at := time.Now().UTC().Add(-time.Minute).Truncate(time.Minute)
	before := time.Now()
	resp, err := p.HandleBatch(ctx, kinesisEvent([]record{{shard: "shardId-000000000000", seq: 1, env: stream.Envelope{ID: "1", Type: "v", Key: "k",
		OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{}`)}}}))
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch: %+v %v", resp, err)
	}
	after := time.Now()
	out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	keep := keyed.StateExpiry + 2*time.Hour + 5*time.Second + 30*time.Second
	var states, windows int
	for _, it := range out.Items {
		sk := it["sk"].(*types.AttributeValueMemberS).Value
		n, ok := it["expiresAt"].(*types.AttributeValueMemberN)
		switch {
		case strings.HasPrefix(sk, "session") && strings.HasSuffix(sk, "|~state"):
			states++
			if !ok {
				t.Fatalf("the session state %s has no expiresAt: it is kept for ever", sk)
			}
			exp, _ := strconv.ParseInt(n.Value, 10, 64)
			if lo, hi := before.Add(keep).Unix()-1, after.Add(keep).Unix()+1; exp < lo || exp > hi {
				t.Errorf("the session state expires at %v, want %v after its write (%v to %v)", time.Unix(exp, 0).UTC(), keep, time.Unix(lo, 0).UTC(), time.Unix(hi, 0).UTC())
			}
		case strings.HasPrefix(sk, "tumbling"):
			windows++
			exp, _ := strconv.ParseInt(n.Value, 10, 64)
			if want := at.Truncate(time.Minute).Add(time.Minute).Add(cfg.Retention).Unix(); !ok || exp != want {
				t.Errorf("the window item expires at %v, want its end plus the retention, %v", time.Unix(exp, 0).UTC(), time.Unix(want, 0).UTC())
			}
		}
	}
	if states != 1 || windows != 1 {
		t.Fatalf("%d session states and %d tumbling windows written, want one of each: %v", states, windows, out.Items)
	}
}
