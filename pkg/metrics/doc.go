// Package metrics writes CloudWatch metrics in the Embedded Metric Format
// (EMF): one JSON log line per Flush on the function's stdout. Lambda sends
// stdout to CloudWatch Logs, which extracts the metrics asynchronously, so a
// handler publishes metrics without a PutMetricData call on its hot path (and
// the local runner turns the same lines into metrics on the stand-in).
//
// Every metric is in namespace "Tributary" with the dimension Function (the
// function's logical name, e.g. "aggregate"), so dashboards and alarms do not
// depend on the deployed function's physical name. A function that runs once
// per pipeline adds WithDimension("Pipeline", name): its documents then carry
// the one dimension set ["Function", "Pipeline"], a series per pipeline,
// which is what the stack's alarms and dashboards read (a rollup under
// Function alone would be billed as a second custom metric per name).
//
// CloudWatch drops, without a word, a document that breaks one of its
// limits, so Flush keeps within them: it splits what it collected into
// documents of at most 100 metrics, 100 values a metric and 256 KB (one
// log event), and refuses, with an error naming it, a metric name, value
// or dimension CloudWatch would not take (WithDimension leaves such a
// dimension out and writes the metrics under Function alone).
package metrics
