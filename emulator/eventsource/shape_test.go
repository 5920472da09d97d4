package eventsource_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/emulator/eventsource"
)

// The events decode into aws-lambda-go's types with every field Lambda sets.

func TestKinesisEventShape(t *testing.T) {
	needStandin(t)
	t.Parallel()
	stream := uniqueName(t, "")
	arn := createStream(t, stream, 2)
	seqs := putRecords(t, stream, "alpha", `{"n":1}`)
	var c capture
	p, err := eventsource.NewKinesis(awsCfg, eventsource.Settings{FunctionName: "f", SourceARN: arn, Enabled: true}, &c, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 10*time.Second)
	payloads := c.all()
	if len(payloads) != 1 {
		t.Fatalf("%d invocations, want 1", len(payloads))
	}
	var ev events.KinesisEvent
	if err := json.Unmarshal(payloads[0], &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Records) != 1 {
		t.Fatalf("%d records, want 1", len(ev.Records))
	}
	r := ev.Records[0]
	shard, _, _ := strings.Cut(r.EventID, ":")
	if r.EventID != shard+":"+seqs[0] || !strings.HasPrefix(shard, "shardId-") {
		t.Errorf("eventID = %q, want shardId-...:%s", r.EventID, seqs[0])
	}
	if r.EventSource != "aws:kinesis" || r.EventName != "aws:kinesis:record" || r.EventVersion != "1.0" ||
		r.EventSourceArn != arn || r.AwsRegion != "us-east-1" || r.InvokeIdentityArn == "" {
		t.Errorf("record metadata = %+v", r)
	}
	k := r.Kinesis
	if string(k.Data) != `{"n":1}` || k.PartitionKey != "alpha" || k.SequenceNumber != seqs[0] || k.KinesisSchemaVersion != "1.0" {
		t.Errorf("kinesis = %+v", k)
	}
	if age := time.Since(k.ApproximateArrivalTimestamp.Time); age < 0 || age > time.Minute {
		t.Errorf("approximateArrivalTimestamp %v is not the arrival time", k.ApproximateArrivalTimestamp)
	}
	if !strings.Contains(string(payloads[0]), `"approximateArrivalTimestamp":`) {
		t.Errorf("payload lacks approximateArrivalTimestamp: %s", payloads[0])
	}
}

func TestDynamoDBEventShape(t *testing.T) {
	needStandin(t)
	t.Parallel()
	table := uniqueName(t, "")
	arn := createTable(t, table)
	putItem(t, table, "a1", false)
	var c capture
	p, err := eventsource.NewDynamoDBStreams(awsCfg, eventsource.Settings{FunctionName: "f", SourceARN: arn, Enabled: true}, &c, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 10*time.Second)
	payloads := c.all()
	if len(payloads) != 1 {
		t.Fatalf("%d invocations, want 1", len(payloads))
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(payloads[0], &ev); err != nil {
		t.Fatal(err)
	}
	r := ev.Records[0]
	if r.EventSource != "aws:dynamodb" || r.EventName != "INSERT" || r.EventSourceArn != arn || r.AWSRegion != "us-east-1" || r.EventID == "" {
		t.Errorf("record metadata = %+v", r)
	}
	ch := r.Change
	if ch.Keys["id"].String() != "a1" || ch.NewImage["id"].String() != "a1" || !ch.NewImage["poison"].IsNull() && ch.NewImage["poison"].Boolean() {
		t.Errorf("dynamodb = %+v", ch)
	}
	if ch.SequenceNumber == "" || ch.StreamViewType != "NEW_AND_OLD_IMAGES" || ch.SizeBytes == 0 || ch.ApproximateCreationDateTime.IsZero() {
		t.Errorf("dynamodb = %+v", ch)
	}
}

func TestSQSEventShape(t *testing.T) {
	needStandin(t)
	t.Parallel()
	url, arn := createQueue(t, uniqueName(t, ""), nil)
	_, err := sqs.NewFromConfig(awsCfg).SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("hello"),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{"color": {DataType: aws.String("String"), StringValue: aws.String("red")}}})
	if err != nil {
		t.Fatal(err)
	}
	var c capture
	p, err := eventsource.NewSQS(awsCfg, eventsource.Settings{FunctionName: "f", SourceARN: arn, Enabled: true}, &c, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, p)
	waitIdle(t, p, 10*time.Second)
	payloads := c.all()
	if len(payloads) != 1 {
		t.Fatalf("%d invocations, want 1", len(payloads))
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(payloads[0], &ev); err != nil {
		t.Fatal(err)
	}
	m := ev.Records[0]
	if m.Body != "hello" || m.EventSource != "aws:sqs" || m.EventSourceARN != arn || m.AWSRegion != "us-east-1" || m.MessageId == "" || m.ReceiptHandle == "" || m.Md5OfBody == "" {
		t.Errorf("message = %+v", m)
	}
	if m.Attributes["ApproximateReceiveCount"] != "1" || m.Attributes["SentTimestamp"] == "" {
		t.Errorf("attributes = %v", m.Attributes)
	}
	if a := m.MessageAttributes["color"]; a.DataType != "String" || a.StringValue == nil || *a.StringValue != "red" {
		t.Errorf("messageAttributes = %+v", m.MessageAttributes)
	}
	if p.Stats().Deleted != 1 {
		t.Errorf("stats = %+v, want the message deleted", p.Stats())
	}
}

func TestRunFailsForAMissingSource(t *testing.T) {
	needStandin(t)
	t.Parallel()
	var c capture
	for name, mk := range map[string]func() (*eventsource.Poller, error){
		"kinesis": func() (*eventsource.Poller, error) {
			return eventsource.NewKinesis(awsCfg, eventsource.Settings{FunctionName: "f", SourceARN: "arn:aws:kinesis:us-east-1:123456789012:stream/nope", Enabled: true}, &c, nil)
		},
		"sqs": func() (*eventsource.Poller, error) {
			return eventsource.NewSQS(awsCfg, eventsource.Settings{FunctionName: "f", SourceARN: "arn:aws:sqs:us-east-1:123456789012:nope", Enabled: true}, &c, nil)
		},
	} {
		p, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err = p.Run(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "nope") {
			t.Errorf("%s: Run on a missing source = %v, want an error naming it", name, err)
		}
	}
}
