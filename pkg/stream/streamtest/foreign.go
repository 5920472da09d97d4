package streamtest

// Events of every kind a function may be sent by hand (the console's Test
// tab, aws lambda invoke), one record each, as Lambda or EventBridge
// shape them.
var samples = map[string]string{
	"aws:kinesis": `{"Records":[{"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":"user-1",` +
		`"sequenceNumber":"49590338271490256608559692538361571095921575989136588898","data":"e30=",` +
		`"approximateArrivalTimestamp":1795949000.08},"eventSource":"aws:kinesis","eventVersion":"1.0",` +
		`"eventID":"shardId-000000000000:49590338271490256608559692538361571095921575989136588898",` +
		`"eventName":"aws:kinesis:record","awsRegion":"us-east-1","eventSourceARN":"` + StreamARN + `"}]}`,
	"aws:dynamodb": `{"Records":[{"eventID":"c4ca4238a0b923820dcc509a6f75849b","eventName":"INSERT","eventVersion":"1.1",` +
		`"eventSource":"aws:dynamodb","awsRegion":"us-east-1","dynamodb":{"Keys":{"userId":{"S":"user-1"}},` +
		`"NewImage":{"userId":{"S":"user-1"}},"SequenceNumber":"111","SizeBytes":26,"StreamViewType":"NEW_AND_OLD_IMAGES"},` +
		`"eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/Profiles/stream/2026-11-29T00:00:00.000"}]}`,
	"aws:sqs": `{"Records":[{"messageId":"6f1c2a9e-3b1d-4b8e-9d0a-2c4f5e6a7b81","receiptHandle":"AQEBexample",` +
		`"body":"{}","attributes":{"ApproximateReceiveCount":"1"},"messageAttributes":{},"md5OfBody":"",` +
		`"eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-1:123456789012:Tributary-Tasks","awsRegion":"us-east-1"}]}`,
	"scheduled": `{"version":"0","id":"53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa","detail-type":"Scheduled Event",` +
		`"source":"aws.events","account":"123456789012","time":"2026-11-29T10:50:00Z","region":"us-east-1",` +
		`"resources":["arn:aws:events:us-east-1:123456789012:rule/Tributary-Tick"],"detail":{}}`,
	"empty object": `{}`,
}

// ForeignEvents are events a consumer of source ("aws:kinesis",
// "aws:dynamodb", "aws:sqs") is never sent by its event source mapping but
// may be sent by hand: the other two sources' batches, an EventBridge
// scheduled event and {}, by name. A consumer should refuse each (see
// stream.EventShapeError) rather than take it as an empty batch or set its
// records aside as malformed.
func ForeignEvents(source string) map[string][]byte {
	out := map[string][]byte{}
	for name, ev := range samples {
		if name != source {
			out[name] = []byte(ev)
		}
	}
	return out
}

// SampleEvent is a one-record batch of source ("aws:kinesis",
// "aws:dynamodb", "aws:sqs") as its event source mapping sends it.
func SampleEvent(source string) []byte { return []byte(samples[source]) }
