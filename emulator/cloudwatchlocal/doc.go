// Package cloudwatchlocal puts a local run's function output where CloudWatch
// would show it on AWS: each function's log lines go to the log group
// /aws/lambda/<function> on the stand-in's CloudWatch Logs, and every line
// that is an Embedded Metric Format document also becomes metric data, as
// CloudWatch Logs extracts it on AWS. QueueMetrics publishes what SQS
// publishes on AWS (AWS/SQS ApproximateNumberOfMessagesVisible and its
// siblings, by QueueName), so dead-letter queue depth can be watched as a
// metric. Lines an execution environment printed go to its own log stream
// (Sink.StreamLine); Sink.Put publishes service metrics (the runner's
// AWS/Lambda ones), and the sink keeps what it put (Own, Samples) so that a
// reader can tell its run's data from another's and compute percentiles
// moto does not. Tail, Metrics, MetricsBetween and LatestQueueMetric read
// them back for a script, a test or the dashboard; EMFSums sums the metrics
// of log events already read (make logs), asking CloudWatch nothing.
package cloudwatchlocal
