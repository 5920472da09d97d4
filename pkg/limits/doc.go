// Package limits holds the AWS service limits every write in Tributary is
// checked against before it is made, and sizes measured the way each
// service counts them: a DynamoDB item (ItemSize, by the rules of
// "DynamoDB item sizes and formats") and a Kinesis record (data plus
// partition key). A write that would exceed a limit can never succeed, so
// the caller sets its record aside (package setaside) instead of retrying it.
package limits
