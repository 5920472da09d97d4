// Package onfailure is the invocation record Lambda sends to a stream event
// source mapping's on-failure destination (SQS or SNS) when it gives up on a
// batch: which function, why (condition), and where the batch is in its
// stream (KinesisBatchInfo or DDBStreamBatchInfo). The local runner writes it
// as Lambda does; the quarantine function reads it. These types hold no
// bounds of their own: read a record from outside with package
// quarantine's Parse (the strict reader, each field held to the bound of
// the API it comes from), not with json.Unmarshal.
package onfailure
