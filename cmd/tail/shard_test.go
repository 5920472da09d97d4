package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/cli"
)

// makeTailVars is the flag-to-variable map make tail gives the tool
// (TRIBUTARY_MAKE_VARS in the Makefile's tail recipe).
func makeTailVars(t *testing.T) string {
	t.Helper()
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`TRIBUTARY_MAKE_VARS='(stream:[^']*)'`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile's tail recipe sets no TRIBUTARY_MAKE_VARS='stream:…'")
	}
	return string(m[1])
}

// make tail FROM=<sequence number> on the two-shard events stream names
// the variable that picks the shard: it said "-shard is required with
// FROM= <sequence number>", and make tail had no variable for -shard.
// Given SHARD=, the tail reads that shard from that record.
func TestMakeTailFromASequenceNumberNamesSHARD(t *testing.T) {
	srv := standintest.Start(t)
	kin := kinesis.NewFromConfig(standintest.Config(t, srv))
	ctx := context.Background()
	name := "Tributary-EventsD32975C2"
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	put, err := kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String("user-1"),
		Data: []byte(`{"id":"e","type":"page_view","key":"user-1","data":{"page":"/"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AWS_ENDPOINT_URL": srv.Endpoint(), "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		cli.EnvMakeVars: makeTailVars(t)}
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("AWS_PROFILE", "")
	seq := aws.ToString(put.SequenceNumber)
	r := cmd(ctx, env, "-template", streamsTemplate, "-stream", "events", "-from", seq, "-poll")
	if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "SHARD= is required with FROM= <sequence number>") {
		t.Errorf("FROM=%s on two shards: exit %d, stderr %q; want 2 naming SHARD=", seq, r.code, r.stderr)
	}
	r = cmd(ctx, env, "-template", streamsTemplate, "-stream", "events", "-from", seq, "-shard", aws.ToString(put.ShardId), "-poll", "-json")
	if r.code != 0 || !strings.Contains(r.stdout, `"sequenceNumber":"`+seq+`"`) {
		t.Errorf("FROM=%s SHARD=%s: exit %d, stdout %q, stderr %q; want the record", seq, aws.ToString(put.ShardId), r.code, r.stdout, r.stderr)
	}
}

// A sequence number the stand-in takes (moto answers any number) and
// nothing is at or after: the tail said only "0 record(s) printed of 0
// read" and exited 0, as if a filter had dropped them; it says that
// nothing is at or after the position.
func TestTailFromASequenceNumberWithNothingAfter(t *testing.T) {
	srv := standintest.Start(t)
	kin := kinesis.NewFromConfig(standintest.Config(t, srv))
	ctx := context.Background()
	name := "Tributary-EventsD32975C2"
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	put, err := kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String("user-1"), Data: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AWS_ENDPOINT_URL": srv.Endpoint(), "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("AWS_PROFILE", "")
	huge := "99999999999999999999999999999999999999999999999999999999"
	shard := aws.ToString(put.ShardId)
	r := cmd(ctx, env, "-template", streamsTemplate, "-stream", "events", "-from", huge, "-shard", shard, "-poll")
	want := "nothing is at or after sequence number " + huge + " on shard " + shard
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, want) {
		t.Errorf("-from %s -shard %s: exit %d, stdout %q, stderr %q; want 0 records and %q", huge, shard, r.code, r.stdout, r.stderr, want)
	}
}
