// Package ddbsize computes item sizes the way DynamoDB counts them, so that
// every write can be checked against the 400 KB item limit before it is made
// and benchmarks can bill capacity units as DynamoDB would.
package ddbsize
