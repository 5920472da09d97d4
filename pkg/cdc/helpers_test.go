package cdc_test

import (
	"bytes"
	"io"

	"github.com/aws/aws-lambda-go/events"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/tributary-dev/tributary/pkg/stream"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// lambdaRecord is r in the shape Lambda hands a DynamoDB Streams consumer.
func lambdaRecord(r *streamtypes.Record, streamArn string) events.DynamoDBEventRecord {
	return stream.FromStreamsRecord(r, streamArn)
}
