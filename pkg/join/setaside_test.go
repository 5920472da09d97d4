package join_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/join"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestRecordsThatCanNeverJoinAreSetAside sends one batch, twice (Lambda
// redelivering it), to the join with a small budget: a search that would
// take its session past the budget, one whose data is over the per-record
// bound and a record that is not JSON are set aside in the quarantine
// table — each once, with its data whole, the field and the kind — the
// batch reports no failure, and every other record joins as usual (the
// session at its budget keeps its three searches; another session joins).
func TestRecordsThatCanNeverJoinAreSetAside(t *testing.T) {
	ctx := context.Background()
	cfg, err := join.Parse([]byte(`{"name":"aside","left":"search","right":"click","within":"10s","joinType":"left","allowedLateness":"1s"}`))
	if err != nil {
		t.Fatal(err)
	}
	table, out, quarantine := newResources(t)
	// An open search of id "sN" and data {"q":"a"} takes 35 bytes of its
	// key's budget: three fit, a fourth does not.
	lim := join.Limits{MaxRecordData: 40, MaxOpenBytes: 3 * 35, FoldBytes: 1 << 20}
	h := join.New(cfg, state.NewViews(db, table, nil), kin, out, lim, keyed.WithLogger(quiet), keyed.WithSetAside(setaside.New(db, quarantine)))

	env := func(id, typ, key string, sec int, data string) stream.Envelope {
		at := base.Add(time.Duration(sec) * time.Second)
		return stream.Envelope{ID: id, Type: typ, Key: key, OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(data)}
	}
	small := `{"q":"a"}`
	big := `{"q":"` + strings.Repeat("x", 60) + `"}`
	var recs []record
	for i, e := range []stream.Envelope{
		env("s1", "search", "k1", 0, small), env("s2", "search", "k1", 1, small), env("s3", "search", "k1", 2, small),
		env("s4", "search", "k1", 3, small), // past k1's budget
		env("t1", "search", "k2", 3, small),
		env("t2", "search", "k2", 4, big), // data over the bound
		env("u1", "click", "k2", 5, small),
	} {
		recs = append(recs, record{shard: "shardId-000000000000", seq: 100 + i, env: e})
	}
	krecs := kinesisRecords(recs)
	garbage := krecs[0]
	garbage.Kinesis.SequenceNumber, garbage.EventID, garbage.Kinesis.Data = "200", "shardId-000000000000:200", []byte("not json")
	krecs = append(krecs, garbage)
	for range 2 {
		resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: krecs})
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch: %+v %v; want every record reported processed", resp, err)
		}
	}
	// The idle shard's watermark moves by processing time: the first tick
	// sees it idle, the second closes every window.
	for _, at := range []time.Time{base.Add(time.Hour), base.Add(2 * time.Hour)} {
		if _, err := h.Tick(ctx, at); err != nil {
			t.Fatal(err)
		}
	}

	got := strings.Join(describe(t, keyedtest.ReadAll(t, kin, out)), " ")
	if want := "k1 [s1, null] k1 [s2, null] k1 [s3, null] k2 [t1, u1]"; got != want {
		t.Fatalf("joins %q, want %q", got, want)
	}
	scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(quarantine)})
	if err != nil {
		t.Fatal(err)
	}
	if scan.Count != 3 {
		t.Fatalf("%d items set aside, want 3 (s4, t2, the garbage), each once", scan.Count)
	}
	source := garbage.EventSourceArn + "/shardId-000000000000"
	for _, c := range []struct {
		seq, field, kind, reason string
		data                     []byte
	}{
		{"103", "key", setaside.KindStateBudget, "budget", krecs[3].Kinesis.Data},
		{"105", "data", setaside.KindStateBudget, "at most 40", krecs[5].Kinesis.Data},
		{"200", "", setaside.KindUnparseable, "", garbage.Kinesis.Data},
	} {
		it, err := setaside.Load(ctx, db, quarantine, source, c.seq)
		if err != nil || it == nil {
			t.Fatalf("record %s not set aside: %v", c.seq, err)
		}
		if it.Field != c.field || it.Category != c.kind || !strings.Contains(it.Reason, c.reason) || !bytes.Equal(it.Data, c.data) {
			t.Errorf("record %s set aside as field %q kind %q reason %q data %q; want %q, %q, a reason with %q and the record's data",
				c.seq, it.Field, it.Category, it.Reason, it.Data, c.field, c.kind, c.reason)
		}
	}
}
