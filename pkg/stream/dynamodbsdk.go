package stream

import (
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// The DynamoDB SDK and the DynamoDB Streams SDK each have their own attribute
// value types, and Lambda's events package a third: these convert the first
// two to the third, for code that reads a stream or a table itself and hands
// the result on as Lambda would (quarantine, the cdc snapshot).

// FromStreamsRecord is a record read with the DynamoDB Streams API in the
// shape Lambda hands a DynamoDB Streams consumer.
func FromStreamsRecord(r *streamtypes.Record, streamArn string) events.DynamoDBEventRecord {
	d := r.Dynamodb
	return events.DynamoDBEventRecord{
		AWSRegion:      aws.ToString(r.AwsRegion),
		EventID:        aws.ToString(r.EventID),
		EventName:      string(r.EventName),
		EventSource:    aws.ToString(r.EventSource),
		EventVersion:   aws.ToString(r.EventVersion),
		EventSourceArn: streamArn,
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: aws.ToTime(d.ApproximateCreationDateTime)},
			Keys:                        streamsImage(d.Keys),
			NewImage:                    streamsImage(d.NewImage),
			OldImage:                    streamsImage(d.OldImage),
			SequenceNumber:              aws.ToString(d.SequenceNumber),
			SizeBytes:                   aws.ToInt64(d.SizeBytes),
			StreamViewType:              string(d.StreamViewType),
		},
	}
}

func streamsImage(m map[string]streamtypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = streamsAttribute(v)
	}
	return out
}

func streamsAttribute(v streamtypes.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *streamtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *streamtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *streamtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *streamtypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *streamtypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *streamtypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *streamtypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, x := range v.Value {
			l[i] = streamsAttribute(x)
		}
		return events.NewListAttribute(l)
	case *streamtypes.AttributeValueMemberM:
		return events.NewMapAttribute(streamsImage(v.Value))
	}
	return events.NewNullAttribute()
}

// FromItem converts a DynamoDB item (as GetItem or Scan return it) to the
// attributes of a stream image, as if the item had just been written.
func FromItem(item map[string]ddbtypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if item == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(item))
	for k, v := range item {
		out[k] = itemAttribute(v)
	}
	return out
}

func itemAttribute(v ddbtypes.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, x := range v.Value {
			l[i] = itemAttribute(x)
		}
		return events.NewListAttribute(l)
	case *ddbtypes.AttributeValueMemberM:
		return events.NewMapAttribute(FromItem(v.Value))
	}
	return events.NewNullAttribute()
}
