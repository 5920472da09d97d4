package template

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

const (
	fanoutStream      = "arn:aws:kinesis:us-east-1:123456789012:stream/FanOut-EventsD32975C2"
	fanoutConsumer    = "AggregateConsumer6A5D1D4B"
	fanoutMapping     = "AggregateFunctionKinesisConsumerEventSourceFanOutAggregateConsumer9E8D7C6B"
	fanoutPlain       = "PlainFunctionKinesisEventSourceFanOutEvents4A3B2C1D"
	fanoutConsumerARN = fanoutStream + "/consumer/aggregate-efo"
)

func mappingByID(t *testing.T, ms []MappingSpec, id string) MappingSpec {
	t.Helper()
	for _, m := range ms {
		if m.LogicalID == id {
			return m
		}
	}
	t.Fatalf("no mapping %s in %+v", id, ms)
	return MappingSpec{}
}

// TestConsumerMappingReadsItsStream: a mapping whose EventSourceArn is an
// enhanced fan-out consumer becomes a Kinesis mapping on the consumer's
// stream, so the runner polls that stream's shards; the consumer's Ref and
// attributes resolve as CloudFormation documents them.
func TestConsumerMappingReadsItsStream(t *testing.T) {
	d, err := Plan(mustLoad(t, "testdata/fanout.template.json"), ProvisionOptions{Stack: "FanOut"})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := d.Mappings()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id                                   string
		wantSource, wantSourceID, wantConsum string
	}{
		{fanoutMapping, fanoutStream, "EventsD32975C2", fanoutConsumerARN},
		{fanoutPlain, fanoutStream, "EventsD32975C2", ""},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			m := mappingByID(t, ms, tt.id)
			if m.SourceKind != SourceKinesis || m.SourceARN != tt.wantSource || m.SourceLogicalID != tt.wantSourceID || m.ConsumerARN != tt.wantConsum {
				t.Errorf("mapping = kind %s, source %s (%s), consumer %q; want kinesis, %s (%s), consumer %q",
					m.SourceKind, m.SourceARN, m.SourceLogicalID, m.ConsumerARN, tt.wantSource, tt.wantSourceID, tt.wantConsum)
			}
		})
	}

	outs, err := d.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"ConsumerArn":    fanoutConsumerARN, // Ref is the consumer ARN
		"ConsumerName":   "aggregate-efo",
		"ConsumerStream": fanoutStream,
	} {
		if outs[name] != want {
			t.Errorf("output %s = %q, want %q", name, outs[name], want)
		}
	}
	if notes := strings.Join(d.Notes(), "\n"); !strings.Contains(notes, "aggregate-efo is played locally by polling the stream's shards with GetRecords, not SubscribeToShard") {
		t.Errorf("Notes() = %q, want a note that enhanced fan-out is played with GetRecords polling", notes)
	}
	for _, s := range d.Skipped() {
		if s.LogicalID == fanoutConsumer {
			t.Errorf("consumer listed as skipped: %+v", s)
		}
	}
}

// TestConsumerARNFromElsewhere: a mapping on a consumer that is not in the
// template (an imported consumer ARN, with AWS's creation timestamp)
// still reads the stream the ARN names.
func TestConsumerARNFromElsewhere(t *testing.T) {
	tests := []struct {
		name, arn, wantSource, wantConsumer string
	}{
		{"AWS form with timestamp",
			"arn:aws:kinesis:us-east-1:111122223333:stream/orders/consumer/billing:1700000000",
			"arn:aws:kinesis:us-east-1:111122223333:stream/orders",
			"arn:aws:kinesis:us-east-1:111122223333:stream/orders/consumer/billing:1700000000"},
		{"plain stream", "arn:aws:kinesis:us-east-1:111122223333:stream/orders", "arn:aws:kinesis:us-east-1:111122223333:stream/orders", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := Parse([]byte(`{"Resources":{
				"Fn":{"Type":"AWS::Lambda::Function","Properties":{"Handler":"bootstrap","Runtime":"provided.al2023","Code":{"ZipFile":"x"},"Role":"arn:aws:iam::123456789012:role/r"}},
				"Map":{"Type":"AWS::Lambda::EventSourceMapping","Properties":{"FunctionName":{"Ref":"Fn"},"StartingPosition":"LATEST","EventSourceArn":"` + tt.arn + `"}}}}`))
			if err != nil {
				t.Fatal(err)
			}
			d, err := Plan(tmpl, ProvisionOptions{Stack: "X"})
			if err != nil {
				t.Fatal(err)
			}
			ms, err := d.Mappings()
			if err != nil {
				t.Fatal(err)
			}
			m := mappingByID(t, ms, "Map")
			if m.SourceKind != SourceKinesis || m.SourceARN != tt.wantSource || m.ConsumerARN != tt.wantConsumer {
				t.Errorf("mapping = %s %s consumer %q, want kinesis %s consumer %q", m.SourceKind, m.SourceARN, m.ConsumerARN, tt.wantSource, tt.wantConsumer)
			}
		})
	}
}

// TestConsumerRejects: a consumer AWS would refuse fails Plan naming the
// property.
func TestConsumerRejects(t *testing.T) {
	tests := []struct {
		name, props, want string
	}{
		{"missing name", `{"StreamARN":{"Fn::GetAtt":["S","Arn"]}}`, `Resources.C.Properties.ConsumerName: ""`},
		{"bad name", `{"ConsumerName":"a b","StreamARN":{"Fn::GetAtt":["S","Arn"]}}`, `Resources.C.Properties.ConsumerName: "a b"`},
		{"not a stream", `{"ConsumerName":"c","StreamARN":"arn:aws:sqs:us-east-1:123456789012:q"}`, "Resources.C.Properties.StreamARN: \"arn:aws:sqs:us-east-1:123456789012:q\" is not a Kinesis stream ARN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := Parse([]byte(`{"Resources":{"S":{"Type":"AWS::Kinesis::Stream","Properties":{"ShardCount":1}},
				"C":{"Type":"AWS::Kinesis::StreamConsumer","Properties":` + tt.props + `}}}`))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Plan(tmpl, ProvisionOptions{Stack: "X"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Plan() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestProvisionRegistersConsumer: Provision registers the consumer on the
// stand-in's stream, once, and the mapping carries the ARN the endpoint gave.
func TestProvisionRegistersConsumer(t *testing.T) {
	t.Parallel()
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	kc := kinesis.NewFromConfig(cfg)

	var d *Deployment
	for run := range 2 {
		var log progressLog
		var err error
		d, err = Provision(ctx, cfg, mustLoad(t, "testdata/fanout.template.json"), ProvisionOptions{Stack: "FanOut", Progress: log.add})
		if err != nil {
			t.Fatal(err)
		}
		verb := []string{"registered", "reused"}[run]
		if log.count(verb+" Kinesis stream consumer aggregate-efo") != 1 {
			t.Errorf("run %d: progress %q, want one %q consumer line", run+1, log.msgs, verb)
		}
	}
	list, err := kc.ListStreamConsumers(ctx, &kinesis.ListStreamConsumersInput{StreamARN: aws.String(fanoutStream)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Consumers) != 1 || aws.ToString(list.Consumers[0].ConsumerName) != "aggregate-efo" {
		t.Fatalf("consumers on the stream after two runs = %+v, want aggregate-efo once", list.Consumers)
	}
	registered := aws.ToString(list.Consumers[0].ConsumerARN)

	ms, err := d.Mappings()
	if err != nil {
		t.Fatal(err)
	}
	m := mappingByID(t, ms, fanoutMapping)
	if m.ConsumerARN != registered || m.SourceARN != fanoutStream {
		t.Errorf("mapping consumer %q on %q, want %q on %q", m.ConsumerARN, m.SourceARN, registered, fanoutStream)
	}
	// The runner reads the mapping's SourceARN like any stream.
	if _, err := kc.ListShards(ctx, &kinesis.ListShardsInput{StreamARN: aws.String(m.SourceARN)}); err != nil {
		t.Errorf("ListShards on the mapping's SourceARN: %v", err)
	}
	outs, err := d.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	if outs["ConsumerArn"] != registered {
		t.Errorf("Ref consumer = %q, want the registered ARN %q", outs["ConsumerArn"], registered)
	}
	ts, err := d.Resolve(map[string]any{"Fn::GetAtt": []any{fanoutConsumer, "ConsumerCreationTimestamp"}})
	if err != nil || ts == "" {
		t.Errorf("GetAtt ConsumerCreationTimestamp = %q, %v", ts, err)
	}
}
