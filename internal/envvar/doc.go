// Package envvar reads the names of AWS resources (DynamoDB tables and
// indexes, Kinesis streams, S3 buckets, a table's key attribute) from a function's environment,
// checked as each service's API takes them, so that a value an operator
// mistyped in the console fails the cold start naming the variable rather
// than every batch with a ValidationException.
package envvar
