// Command receipts is an example of an SQS function of your own built on
// package handler's Tasks: for each order_placed event on its queue it
// renders the order's receipt (Render), once per event id — a copy of the
// event gets the stored receipt from the idempotency table
// IDEMPOTENCY_TABLE_NAME without rendering again. An order that can never
// have a receipt (data.totalCents missing, negative, or not the sum of its
// lines) is set aside on the queue's dead-letter queue with a reason naming
// the field. The construct tributary.NewTaskHandler deploys it.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/tributary-dev/tributary/pkg/handler"
)

func main() {
	t, err := handler.TasksFromEnv("receipts", Render)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambda.Start(t.Handle)
}
