package eventsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// streamsReader is the part of the DynamoDB Streams client a mapping uses.
type streamsReader interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

var _ streamsReader = (*dynamodbstreams.Client)(nil)

// NewDynamoDBStreams plays a DynamoDB Streams event source mapping:
// s.SourceARN is the table's stream ARN
// (arn:aws:dynamodb:region:account:table/name/stream/label). The function
// receives events.DynamoDBEvent (DynamoDBTimeWindowEvent with a tumbling
// window).
func NewDynamoDBStreams(cfg aws.Config, s Settings, inv Invoker, obs Observer) (*Poller, error) {
	s, src, err := s.normalize("dynamodb")
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(src.resource, "table/") || !strings.Contains(src.resource, "/stream/") {
		return nil, fmt.Errorf("eventsource: mapping of %s to %s: SourceARN is not a DynamoDB table stream ARN (arn:aws:dynamodb:region:account:table/name/stream/label)", s.SourceARN, s.FunctionName)
	}
	dest, err := newDestination(cfg, s.OnFailureARN)
	if err != nil {
		return nil, fmt.Errorf("eventsource: mapping of %s to %s: %w", s.SourceARN, s.FunctionName, err)
	}
	if inv == nil {
		return nil, fmt.Errorf("eventsource: mapping of %s to %s: no Invoker", s.SourceARN, s.FunctionName)
	}
	p := newPoller(s, obs)
	api := &ddbStreamsAPI{client: dynamodbstreams.NewFromConfig(cfg), arn: s.SourceARN, region: src.region, needView: len(s.FilterPatterns) > 0}
	p.runner = newStream(p, s, api, streamKind{
		eventSource:    "aws:dynamodb",
		batchInfoField: "DDBStreamBatchInfo",
		arrivalLayout:  "2006-01-02T15:04:05Z",
	}, inv, dest)
	return p, nil
}

type ddbStreamsAPI struct {
	client   streamsReader
	arn      string
	region   string
	needView bool
}

func (d *ddbStreamsAPI) listShards(ctx context.Context) ([]shardInfo, error) {
	var out []shardInfo
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: &d.arn}
	for {
		resp, err := d.client.DescribeStream(ctx, in)
		if err != nil {
			return nil, err
		}
		if resp.StreamDescription == nil {
			return out, nil
		}
		if resp.StreamDescription.StreamStatus == types.StreamStatusDisabled && len(resp.StreamDescription.Shards) == 0 {
			return nil, fmt.Errorf("stream %s is disabled", d.arn)
		}
		for _, sh := range resp.StreamDescription.Shards {
			out = append(out, shardInfo{id: aws.ToString(sh.ShardId), parent: aws.ToString(sh.ParentShardId)})
		}
		if resp.StreamDescription.LastEvaluatedShardId == nil {
			return out, nil
		}
		in = &dynamodbstreams.DescribeStreamInput{StreamArn: &d.arn, ExclusiveStartShardId: resp.StreamDescription.LastEvaluatedShardId}
	}
}

func (d *ddbStreamsAPI) iterator(ctx context.Context, shard string, pos position) (string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: &d.arn, ShardId: &shard, ShardIteratorType: types.ShardIteratorType(pos.typ)}
	if pos.typ == "AFTER_SEQUENCE_NUMBER" {
		in.SequenceNumber = &pos.seq
	}
	out, err := d.client.GetShardIterator(ctx, in)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ShardIterator), nil
}

func (d *ddbStreamsAPI) records(ctx context.Context, _ string, iter string) ([]*record, string, error) {
	out, err := d.client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: &iter, Limit: aws.Int32(1000)})
	if err != nil {
		return nil, "", err
	}
	recs := make([]*record, 0, len(out.Records))
	for _, r := range out.Records {
		rec, err := d.record(r)
		if err != nil {
			return nil, "", err
		}
		recs = append(recs, rec)
	}
	return recs, aws.ToString(out.NextShardIterator), nil
}

func (d *ddbStreamsAPI) expiredIterator(err error) bool {
	var e *types.ExpiredIteratorException
	return errors.As(err, &e)
}

// ddbEventRecord is one record of events.DynamoDBEvent, as Lambda writes it.
type ddbEventRecord struct {
	EventID        string           `json:"eventID"`
	EventName      string           `json:"eventName"`
	EventVersion   string           `json:"eventVersion"`
	EventSource    string           `json:"eventSource"`
	AwsRegion      string           `json:"awsRegion"`
	Dynamodb       ddbStreamRecord  `json:"dynamodb"`
	EventSourceARN string           `json:"eventSourceARN"`
	UserIdentity   *ddbUserIdentity `json:"userIdentity,omitempty"`
}

type ddbStreamRecord struct {
	ApproximateCreationDateTime int64          `json:"ApproximateCreationDateTime"`
	Keys                        map[string]any `json:"Keys,omitempty"`
	NewImage                    map[string]any `json:"NewImage,omitempty"`
	OldImage                    map[string]any `json:"OldImage,omitempty"`
	SequenceNumber              string         `json:"SequenceNumber"`
	SizeBytes                   int64          `json:"SizeBytes"`
	StreamViewType              string         `json:"StreamViewType"`
}

type ddbUserIdentity struct {
	Type        string `json:"type"`
	PrincipalID string `json:"principalId"`
}

func (d *ddbStreamsAPI) record(r types.Record) (*record, error) {
	if r.Dynamodb == nil {
		return nil, fmt.Errorf("stream record %s has no dynamodb part", aws.ToString(r.EventID))
	}
	created := aws.ToTime(r.Dynamodb.ApproximateCreationDateTime)
	region := aws.ToString(r.AwsRegion)
	if region == "" {
		region = d.region
	}
	ev := ddbEventRecord{
		EventID:      aws.ToString(r.EventID),
		EventName:    string(r.EventName),
		EventVersion: "1.1",
		EventSource:  "aws:dynamodb",
		AwsRegion:    region,
		Dynamodb: ddbStreamRecord{
			ApproximateCreationDateTime: created.Unix(),
			Keys:                        attributeMap(r.Dynamodb.Keys),
			NewImage:                    attributeMap(r.Dynamodb.NewImage),
			OldImage:                    attributeMap(r.Dynamodb.OldImage),
			SequenceNumber:              aws.ToString(r.Dynamodb.SequenceNumber),
			SizeBytes:                   aws.ToInt64(r.Dynamodb.SizeBytes),
			StreamViewType:              string(r.Dynamodb.StreamViewType),
		},
		EventSourceARN: d.arn,
	}
	if r.UserIdentity != nil {
		ev.UserIdentity = &ddbUserIdentity{Type: aws.ToString(r.UserIdentity.Type), PrincipalID: aws.ToString(r.UserIdentity.PrincipalId)}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	keys, _ := json.Marshal(ev.Dynamodb.Keys)
	rec := &record{seq: ev.Dynamodb.SequenceNumber, key: string(keys), arrival: created, event: b}
	if d.needView {
		v, _ := decodeJSON(b)
		rec.view, _ = v.(map[string]any)
	}
	return rec, nil
}

// attributeMap writes attribute values in DynamoDB's JSON form
// ({"S":"x"}, {"N":"1"}, ...), as stream records carry them.
func attributeMap(m map[string]types.AttributeValue) map[string]any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = attributeValue(v)
	}
	return out
}

func attributeValue(v types.AttributeValue) any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": v.Value}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": v.Value}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": v.Value}
	case *types.AttributeValueMemberBS:
		return map[string]any{"BS": v.Value}
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = attributeValue(e)
		}
		return map[string]any{"L": l}
	case *types.AttributeValueMemberM:
		m := attributeMap(v.Value)
		if m == nil {
			m = map[string]any{}
		}
		return map[string]any{"M": m}
	}
	return nil
}
