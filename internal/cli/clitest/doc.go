// Package clitest helps the operator commands' tests act as a person at the
// terminal would.
package clitest
