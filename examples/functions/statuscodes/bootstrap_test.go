package main

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/rie/rietest"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestBootstrapUnderRIE runs the real statuscodes binary under
// aws-lambda-rie against the stand-in: a raw Kinesis event with a
// producer's duplicate and a record of status 999, delivered twice, then a
// record that moves the watermark past the minute. The output stream holds
// each route's final StatusMix once, counting the duplicate once; the 999
// record is in the quarantine table naming data.status; a scheduled event
// runs the tick; without STATE_TABLE_NAME the function fails at init
// naming it.
func TestBootstrapUnderRIE(t *testing.T) {
	ctx := context.Background()
	bootstrap := rietest.Build(t, ".")
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	db, kin := dynamodb.NewFromConfig(cfg), kinesis.NewFromConfig(cfg)
	if err := state.CreateTable(ctx, db, "sc-state"); err != nil {
		t.Fatal(err)
	}
	if err := setaside.CreateTable(ctx, db, "sc-quarantine"); err != nil {
		t.Fatal(err)
	}
	keyedtest.CreateStream(t, kin, "sc-results", 1)
	env := map[string]string{
		"AWS_ENDPOINT_URL": srv.Endpoint(), "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
		"STATE_TABLE_NAME": "sc-state", "OUTPUT_STREAM_NAME": "sc-results", "QUARANTINE_TABLE_NAME": "sc-quarantine",
	}
	fn := rietest.Start(t, "statuscodes", bootstrap, env)
	invoke := func(payload []byte) []byte {
		t.Helper()
		return fn.MustInvoke(t, payload)
	}

	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	req := func(seq int, id, route string, sec, status int) events.KinesisEventRecord {
		at := base.Add(time.Duration(sec) * time.Second)
		data, _ := json.Marshal(stream.Envelope{ID: id, Type: EventType, Key: route, OccurredAt: at, SentAt: at, ReceivedAt: at,
			Data: json.RawMessage(`{"status":` + strconv.Itoa(status) + `}`)})
		s := strconv.Itoa(seq)
		return events.KinesisEventRecord{EventID: "shardId-000000000000:" + s, EventSource: "aws:kinesis", EventName: "aws:kinesis:record",
			EventSourceArn: "arn:aws:kinesis:us-east-1:000000000000:stream/events", AwsRegion: "us-east-1",
			Kinesis: events.KinesisRecord{SequenceNumber: s, PartitionKey: route, Data: data, KinesisSchemaVersion: "1.0",
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: at}}}
	}
	first, _ := json.Marshal(events.KinesisEvent{Records: []events.KinesisEventRecord{
		req(1, "q1", "/checkout", 1, 200),
		req(2, "q2", "/checkout", 2, 503),
		req(3, "q1", "/checkout", 1, 200), // the producer's duplicate
		req(4, "q3", "/search", 3, 404),
		req(5, "q4", "/checkout", 4, 999), // poison: data.status
		req(6, "q5", "/checkout", 10, 200),
	}})
	for range 2 {
		if got := string(invoke(first)); got != `{"batchItemFailures":[]}` {
			t.Fatalf("response %s, want no batch item failures", got)
		}
	}
	second, _ := json.Marshal(events.KinesisEvent{Records: []events.KinesisEventRecord{req(7, "q6", "/checkout", 70, 301)}})
	invoke(second)

	var got []string
	for _, b := range keyedtest.ReadAll(t, kin, "sc-results") {
		var r handler.Result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("output %s: %v", b, err)
		}
		got = append(got, r.Key+" "+r.WindowStart.Format("15:04")+" "+string(r.Result))
	}
	sort.Strings(got)
	want := []string{
		`/checkout 10:00 {"total":3,"classes":{"1xx":0,"2xx":2,"3xx":0,"4xx":0,"5xx":1},"codes":{"200":2,"503":1},"errorRate":0.3333}`,
		`/search 10:00 {"total":1,"classes":{"1xx":0,"2xx":0,"3xx":0,"4xx":1,"5xx":0},"codes":{"404":1},"errorRate":0}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("results:\n%s\nwant, once each:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	it, err := setaside.Load(ctx, db, "sc-quarantine", "arn:aws:kinesis:us-east-1:000000000000:stream/events/shardId-000000000000", "5")
	if err != nil || it == nil {
		t.Fatalf("the status-999 record is not set aside: %v", err)
	}
	if it.Field != "data.status" || it.Category != setaside.KindInvalid || !strings.Contains(it.Reason, "999") || !strings.Contains(string(it.Data), `"status":999`) {
		t.Errorf("set aside as field %q kind %q reason %q data %s; want data.status, invalid, the value and the record", it.Field, it.Category, it.Reason, it.Data)
	}

	// The schedule's event runs the tick (not a Kinesis batch): it answers
	// with what it did over the shard's watermark.
	tick := invoke([]byte(`{"version":"0","id":"t1","detail-type":"Scheduled Event","source":"aws.events","time":"2026-11-29T12:00:00Z","detail":{}}`))
	var tr handler.TickResult
	if err := json.Unmarshal(tick, &tr); err != nil || tr.Shards != 1 {
		t.Fatalf("tick response %s: %v; want one shard", tick, err)
	}
	out := fn.Logs()
	if !strings.Contains(out, `"RecordsSetAside"`) || !strings.Contains(out, `"Function":"statuscodes"`) {
		t.Errorf("the EMF lines do not count the record set aside:\n%s", out)
	}

	delete(env, "STATE_TABLE_NAME")
	broken := rietest.Start(t, "statuscodes-unconfigured", bootstrap, env)
	res, err := broken.Invoke(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	out = broken.Logs()
	if res.FunctionError == "" || !strings.Contains(out, "environment variable STATE_TABLE_NAME is not set") {
		t.Errorf("unconfigured function: error %q, want a failure naming STATE_TABLE_NAME; logs:\n%s", res.FunctionError, out)
	}
}
