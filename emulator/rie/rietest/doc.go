// Package rietest runs a function's real bootstrap under aws-lambda-rie
// from a test: it builds the package as the Makefile does for this machine,
// installs aws-lambda-rie if needed, starts the function with its output
// captured, and invokes it, failing the test with the function's logs when
// the handler fails.
package rietest
