package standin_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// moto alone loses concurrent updates; through the stand-in none is lost.
func TestConcurrentUpdatesAreNotLost(t *testing.T) {
	srv := standintest.Start(t)
	ctx := context.Background()
	db := dynamodb.NewFromConfig(standintest.Config(t, srv))
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("c"),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	})
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName:                 aws.String("c"),
					Key:                       map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "k"}},
					UpdateExpression:          aws.String("ADD n :one"),
					ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}},
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("c"), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "k"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := out.Item["n"].(*ddbtypes.AttributeValueMemberN).Value
	if got != strconv.Itoa(workers*each) {
		t.Fatalf("n = %s after %d concurrent ADD 1, want %d", got, workers*each, workers*each)
	}
}

// A long poll returns as soon as a message arrives and does not hold up other callers.
func TestLongPollDoesNotBlockOtherRequests(t *testing.T) {
	srv := standintest.Start(t)
	ctx := context.Background()
	q := sqs.NewFromConfig(standintest.Config(t, srv))
	created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("lp")})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		n       int
		elapsed time.Duration
		err     error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, WaitTimeSeconds: 5})
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{n: len(out.Messages), elapsed: time.Since(start)}
	}()
	time.Sleep(300 * time.Millisecond)
	// Other calls go through while the long poll waits.
	for i := 0; i < 5; i++ {
		if _, err := q.ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
			t.Fatal(err)
		}
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("ListQueues waited behind the long poll (%s)", time.Since(start))
	}
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: created.QueueUrl, MessageBody: aws.String("hi")}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.n != 1 {
		t.Fatalf("long poll got %d messages, want 1", r.n)
	}
	if r.elapsed > 3*time.Second {
		t.Fatalf("long poll returned after %s, want soon after the send", r.elapsed)
	}
}
