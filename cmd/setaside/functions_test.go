package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// TestOneRecordSetAsideByTwoFunctions: the events stream has several
// consumers, and two pipelines set one record aside, each for its own
// field (one reads data.v, the other data.d), the second after the first.
// make setaside FUNCTION=<the first> found nothing, though that function
// counted the record in RecordsSetAside: its operator could neither read
// its reason nor put the record back. Each now lists it with its own
// field and reason, show tells both, and putback -function judges it by
// that function's category alone (the other's is state-budget, which no
// put-back may reach).
func TestOneRecordSetAsideByTwoFunctions(t *testing.T) {
	st := newCommandStack(t)
	db, kin, now, table, arn := st.db, st.kin, st.now, st.table, st.arn
	ctx, cmd := context.Background(), st.cmd
	const shard = "shardId-000000000000"
	data := `{"id":"evt-9","type":"page_view","key":"user-9","occurredAt":"2026-12-05T09:54:00Z","sentAt":"2026-12-05T09:54:01Z","data":{"v":"x","d":"y"}}`
	rec := setaside.Record{Source: arn, Shard: shard, Sequence: "49650009", PartitionKey: "user-9", ArrivedAt: now.Add(-5 * time.Minute), Data: []byte(data)}
	tiny, views := rec, rec
	tiny.Field, tiny.Kind, tiny.Reason = "data.v", setaside.KindInvalid, `data.v: "x" is not a number`
	views.Field, views.Kind, views.Reason = "data.d", setaside.KindStateBudget, "data.d: the key's state is over its budget"
	for _, w := range []struct {
		function string
		rec      setaside.Record
		ago      time.Duration
	}{{"Tributary-PipelinesHostiletinyAggregate", tiny, 2 * time.Minute}, {"Tributary-PipelinesPageviewsAggregate", views, time.Minute}} {
		sink := setaside.New(db, table, setaside.WithFunction(w.function), setaside.WithClock(func() time.Time { return now.Add(-w.ago) }))
		if err := sink.SetAside(ctx, []setaside.Record{w.rec}); err != nil {
			t.Fatal(err)
		}
	}

	r := cmd("list", "-template", tmpl, "-function", "hostiletiny")
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, "invalid  data.v  by Tributary-PipelinesHostiletinyAggregate") ||
		!strings.Contains(r.stdout, tiny.Reason) || strings.Contains(r.stdout, views.Reason) {
		t.Errorf("list -function hostiletiny: exit %d\n%s%s\nwant the record with hostiletiny's field and reason alone", r.code, r.stdout, r.stderr)
	}
	r = cmd("list", "-template", tmpl)
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, tiny.Reason) || !strings.Contains(r.stdout, views.Reason) ||
		!strings.Contains(r.stderr, "2 record(s) listed") {
		t.Errorf("list: exit %d\n%s%s\nwant the record listed once for each function, with its reason", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "SEQUENCE=49650009 FUNCTION='Tributary-PipelinesHostiletinyAggregate' DATA=record.json") {
		t.Errorf("list: stderr\n%s\nwant the put-back it offers to name hostiletiny, whose set-aside can go back", r.stderr)
	}
	r = cmd("show", "-template", tmpl, "-source", arn+"/"+shard, "-sequence", rec.Sequence)
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, tiny.Reason) || !strings.Contains(r.stdout, views.Reason) {
		t.Errorf("show: exit %d\n%s%s\nwant both functions' reasons", r.code, r.stdout, r.stderr)
	}

	// By source and sequence, the record is judged as each function set
	// it aside: pageviews' state-budget refuses it.
	r = cmd("putback", "-template", tmpl, "-source", arn+"/"+shard, "-sequence", rec.Sequence, "-unchanged")
	if r.code != cli.ExitRefused || !strings.Contains(r.stderr, "state-budget: Tributary-PipelinesPageviewsAggregate") {
		t.Errorf("putback of the record: exit %d\n%s%s\nwant refused for pageviews' state-budget", r.code, r.stdout, r.stderr)
	}
	r = cmd("putback", "-template", tmpl, "-source", arn+"/"+shard, "-sequence", rec.Sequence, "-function", "hostiletiny", "-unchanged", "-dry-run")
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, "would put back") {
		t.Errorf("putback of the record -function hostiletiny -dry-run: exit %d\n%s%s\nwant it judged as hostiletiny set it aside", r.code, r.stdout, r.stderr)
	}
	r = cmd("putback", "-template", tmpl, "-source", arn+"/"+shard, "-sequence", rec.Sequence, "-function", "enrich")
	if r.code != cli.ExitRefused || !strings.Contains(r.stderr, `"enrich" did not set it aside (Tributary-PipelinesPageviewsAggregate, Tributary-PipelinesHostiletinyAggregate did)`) {
		t.Errorf("putback of the record -function enrich: exit %d\n%s%s\nwant refused, naming the functions that set it aside", r.code, r.stdout, r.stderr)
	}
	// For hostiletiny's records: its own field and category.
	r = cmd("putback", "-template", tmpl, "-function", "hostiletiny")
	if r.code != cli.ExitRefused || !strings.Contains(r.stderr, "data.v it held when Tributary-PipelinesHostiletinyAggregate set the record aside") {
		t.Errorf("putback -function hostiletiny: exit %d\n%s%s\nwant refused for hostiletiny's data.v, unchanged", r.code, r.stdout, r.stderr)
	}
	r = cmd("putback", "-template", tmpl, "-function", "hostiletiny", "-unchanged")
	if r.code != cli.ExitOK || !strings.Contains(r.stderr, "1 put back, 0 refused") {
		t.Errorf("putback -function hostiletiny -unchanged: exit %d\n%s%s\nwant the record put back", r.code, r.stdout, r.stderr)
	}
	it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("events"), ShardId: aws.String(shard),
		ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	out, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil || len(out.Records) != 1 || !strings.Contains(string(out.Records[0].Data), `"v":"x"`) {
		t.Errorf("the stream holds %d records (%v), want the one put back", len(out.Records), err)
	}
}
