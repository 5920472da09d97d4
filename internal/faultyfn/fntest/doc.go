// Package fntest builds the faultyfn test function for tests that run it
// under aws-lambda-rie.
package fntest
