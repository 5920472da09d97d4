// Command statuscodes is an example of a stream function of your own built
// on package handler: per route (the events' key) and one-minute window, a
// StatusMix of the http_request events' data.status — counts per status
// class and per code, and the 5xx error rate — put on the Kinesis stream
// OUTPUT_STREAM_NAME once each window is final. State is in
// STATE_TABLE_NAME; records that can never count (a status outside
// 100–599) are set aside in QUARANTINE_TABLE_NAME naming data.status. The
// construct tributary.NewStreamHandler deploys it.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/tributary-dev/tributary/pkg/handler"
)

func main() {
	h, err := handler.WindowedFromEnv[StatusMix]("statuscodes", SelectStatus,
		handler.WithWindow(time.Minute), handler.WithOutOfOrderness(5*time.Second), handler.WithIdleTimeout(30*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambda.Start(h)
}
