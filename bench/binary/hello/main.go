// Command hello is the peer of bench/binary: the smallest aws-lambda-go
// function, built with the same flags as Tributary's functions.
package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(context.Context, json.RawMessage) (string, error) { return "hello", nil })
}
