package onfailure

// Record is the invocation record Lambda sends to an event source
// mapping's on-failure destination (SQS or SNS). Exactly one of
// KinesisBatchInfo and DDBStreamBatchInfo is set.
type Record struct {
	RequestContext     RequestContext  `json:"requestContext"`
	ResponseContext    ResponseContext `json:"responseContext"`
	Version            string          `json:"version"`
	Timestamp          string          `json:"timestamp"` // when Lambda gave up, RFC 3339
	KinesisBatchInfo   *BatchInfo      `json:"KinesisBatchInfo,omitempty"`
	DDBStreamBatchInfo *BatchInfo      `json:"DDBStreamBatchInfo,omitempty"`
}

// RequestContext says which function failed and why Lambda gave up.
type RequestContext struct {
	RequestID string `json:"requestId"`
	// FunctionArn is the consumer's ARN.
	FunctionArn string `json:"functionArn"`
	// Condition is why the batch was discarded, for example
	// RetryAttemptsExhausted (MaximumRetryAttempts) or RecordAgeExceeded
	// (MaximumRecordAgeInSeconds). It is stored as
	// sent, whatever it says.
	Condition              string `json:"condition"`
	ApproximateInvokeCount int    `json:"approximateInvokeCount"`
}

// ResponseContext is the last invocation's outcome.
type ResponseContext struct {
	StatusCode      int    `json:"statusCode"`
	ExecutedVersion string `json:"executedVersion"`
	// FunctionError is "Unhandled", "Handled" or empty (the function
	// answered but reported batch item failures).
	FunctionError    string `json:"functionError,omitempty"`
	PayloadTruncated bool   `json:"payloadTruncated,omitempty"`
}

// BatchInfo locates the failed batch in its stream; the same shape for
// Kinesis (KinesisBatchInfo) and DynamoDB Streams (DDBStreamBatchInfo).
type BatchInfo struct {
	ShardID                         string `json:"shardId"`
	StartSequenceNumber             string `json:"startSequenceNumber"`
	EndSequenceNumber               string `json:"endSequenceNumber"`
	ApproximateArrivalOfFirstRecord string `json:"approximateArrivalOfFirstRecord"`
	ApproximateArrivalOfLastRecord  string `json:"approximateArrivalOfLastRecord"`
	BatchSize                       int    `json:"batchSize"`
	StreamArn                       string `json:"streamArn"`
}

// Source names the batch's shard: "<streamArn>/<shardId>".
func (b *BatchInfo) Source() string { return b.StreamArn + "/" + b.ShardID }
