// Package cloudwatchlocal puts a local run's function output where CloudWatch
// would show it on AWS: each function's log lines go to the log group
// /aws/lambda/<function> on the stand-in's CloudWatch Logs, and every line
// that is an Embedded Metric Format document also becomes metric data, as
// CloudWatch Logs extracts it on AWS. QueueMetrics publishes what SQS
// publishes on AWS (AWS/SQS ApproximateNumberOfMessagesVisible and its
// siblings, by QueueName), so dead-letter queue depth can be watched as a
// metric. Tail, Metrics and LatestQueueMetric read them back for a script or
// a test.
package cloudwatchlocal
