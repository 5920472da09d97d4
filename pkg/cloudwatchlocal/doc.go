// Package cloudwatchlocal puts a local run's function output where CloudWatch
// would show it on AWS: each function's log lines go to the log group
// /aws/lambda/<function> on the stand-in's CloudWatch Logs, and every line
// that is an Embedded Metric Format document also becomes metric data, as
// CloudWatch Logs extracts it on AWS. Tail and Metrics read them back for a
// script or a test.
package cloudwatchlocal
