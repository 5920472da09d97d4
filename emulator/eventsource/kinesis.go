package eventsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// kinesisReader is the part of the Kinesis client a mapping uses.
type kinesisReader interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

var _ kinesisReader = (*kinesis.Client)(nil)

// NewKinesis plays a Kinesis event source mapping: s.SourceARN is the stream
// ARN. The function receives events.KinesisEvent (KinesisTimeWindowEvent with
// a tumbling window).
func NewKinesis(cfg aws.Config, s Settings, inv Invoker, obs Observer) (*Poller, error) {
	s, src, err := s.normalize("kinesis")
	if err != nil {
		return nil, err
	}
	name, ok := strings.CutPrefix(src.resource, "stream/")
	if !ok || name == "" {
		return nil, fmt.Errorf("eventsource: mapping of %s to %s: SourceARN is not a Kinesis stream ARN (arn:aws:kinesis:region:account:stream/name)", s.SourceARN, s.FunctionName)
	}
	dest, err := newDestination(cfg, s.OnFailureARN)
	if err != nil {
		return nil, fmt.Errorf("eventsource: mapping of %s to %s: %w", s.SourceARN, s.FunctionName, err)
	}
	if inv == nil {
		return nil, fmt.Errorf("eventsource: mapping of %s to %s: no Invoker", s.SourceARN, s.FunctionName)
	}
	p := newPoller(s, obs)
	api := &kinesisAPI{client: kinesis.NewFromConfig(cfg), stream: name, arn: s.SourceARN, region: src.region,
		role: fmt.Sprintf("arn:aws:iam::%s:role/%s-role", src.account, s.FunctionName), needView: len(s.FilterPatterns) > 0}
	p.runner = newStream(p, s, api, streamKind{
		eventSource:    "aws:kinesis",
		batchInfoField: "KinesisBatchInfo",
		arrivalLayout:  "2006-01-02T15:04:05.000Z",
	}, inv, dest)
	return p, nil
}

type kinesisAPI struct {
	client   kinesisReader
	stream   string
	arn      string
	region   string
	role     string
	needView bool
}

func (k *kinesisAPI) listShards(ctx context.Context) ([]shardInfo, error) {
	var out []shardInfo
	in := &kinesis.ListShardsInput{StreamName: &k.stream}
	for {
		resp, err := k.client.ListShards(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, sh := range resp.Shards {
			out = append(out, shardInfo{id: aws.ToString(sh.ShardId), parent: aws.ToString(sh.ParentShardId)})
		}
		if resp.NextToken == nil {
			return out, nil
		}
		in = &kinesis.ListShardsInput{NextToken: resp.NextToken}
	}
}

func (k *kinesisAPI) iterator(ctx context.Context, shard string, pos position) (string, error) {
	// The stand-in resolves iterators by stream name, so name the stream.
	in := &kinesis.GetShardIteratorInput{StreamName: &k.stream, ShardId: &shard, ShardIteratorType: types.ShardIteratorType(pos.typ)}
	switch pos.typ {
	case AtTimestamp:
		in.Timestamp = aws.Time(pos.ts)
	case "AFTER_SEQUENCE_NUMBER":
		in.StartingSequenceNumber = &pos.seq
	}
	out, err := k.client.GetShardIterator(ctx, in)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ShardIterator), nil
}

func (k *kinesisAPI) records(ctx context.Context, shard, iter string) ([]*record, string, error) {
	out, err := k.client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: &iter, Limit: aws.Int32(10000)})
	if err != nil {
		return nil, "", err
	}
	recs := make([]*record, 0, len(out.Records))
	for _, r := range out.Records {
		rec, err := k.record(shard, r)
		if err != nil {
			return nil, "", err
		}
		recs = append(recs, rec)
	}
	return recs, aws.ToString(out.NextShardIterator), nil
}

func (k *kinesisAPI) expiredIterator(err error) bool {
	var e *types.ExpiredIteratorException
	return errors.As(err, &e)
}

// kinesisEventRecord is one record of events.KinesisEvent, fields in the
// order Lambda writes them.
type kinesisEventRecord struct {
	Kinesis           kinesisData `json:"kinesis"`
	EventSource       string      `json:"eventSource"`
	EventVersion      string      `json:"eventVersion"`
	EventID           string      `json:"eventID"`
	EventName         string      `json:"eventName"`
	InvokeIdentityArn string      `json:"invokeIdentityArn"`
	AwsRegion         string      `json:"awsRegion"`
	EventSourceARN    string      `json:"eventSourceARN"`
}

type kinesisData struct {
	KinesisSchemaVersion        string       `json:"kinesisSchemaVersion"`
	PartitionKey                string       `json:"partitionKey"`
	SequenceNumber              string       `json:"sequenceNumber"`
	Data                        []byte       `json:"data"`
	ApproximateArrivalTimestamp epochSeconds `json:"approximateArrivalTimestamp"`
	EncryptionType              string       `json:"encryptionType,omitempty"`
}

// epochSeconds is a time as Lambda writes approximateArrivalTimestamp:
// seconds since the epoch with milliseconds, 1545084650.987.
type epochSeconds time.Time

func (e epochSeconds) MarshalJSON() ([]byte, error) {
	ms := time.Time(e).UnixMilli()
	return fmt.Appendf(nil, "%d.%03d", ms/1000, ms%1000), nil
}

func (k *kinesisAPI) record(shard string, r types.Record) (*record, error) {
	seq := aws.ToString(r.SequenceNumber)
	arrival := aws.ToTime(r.ApproximateArrivalTimestamp)
	ev := kinesisEventRecord{
		Kinesis: kinesisData{
			KinesisSchemaVersion:        "1.0",
			PartitionKey:                aws.ToString(r.PartitionKey),
			SequenceNumber:              seq,
			Data:                        r.Data,
			ApproximateArrivalTimestamp: epochSeconds(arrival),
		},
		EventSource:       "aws:kinesis",
		EventVersion:      "1.0",
		EventID:           shard + ":" + seq,
		EventName:         "aws:kinesis:record",
		InvokeIdentityArn: k.role,
		AwsRegion:         k.region,
		EventSourceARN:    k.arn,
	}
	if r.EncryptionType != "" && r.EncryptionType != types.EncryptionTypeNone {
		ev.Kinesis.EncryptionType = string(r.EncryptionType)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	rec := &record{seq: seq, key: ev.Kinesis.PartitionKey, arrival: arrival, event: b}
	if k.needView {
		// Filters see the record's fields with data decoded from JSON.
		view := map[string]any{
			"kinesisSchemaVersion":        "1.0",
			"partitionKey":                ev.Kinesis.PartitionKey,
			"sequenceNumber":              seq,
			"approximateArrivalTimestamp": json.Number(string(must(ev.Kinesis.ApproximateArrivalTimestamp.MarshalJSON()))),
			"eventSource":                 ev.EventSource,
			"eventVersion":                ev.EventVersion,
			"eventID":                     ev.EventID,
			"eventName":                   ev.EventName,
			"invokeIdentityArn":           ev.InvokeIdentityArn,
			"awsRegion":                   ev.AwsRegion,
			"eventSourceARN":              ev.EventSourceARN,
		}
		if v, ok := decodeJSON(r.Data); ok {
			view["data"] = v
		} else {
			view["data"] = notJSON{}
		}
		rec.view = view
	}
	return rec, nil
}

func must(b []byte, _ error) []byte { return b }
