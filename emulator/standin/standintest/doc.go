// Package standintest starts a private stand-in for a test: moto on a free
// port of 127.0.0.1, stopped when the test ends.
package standintest
