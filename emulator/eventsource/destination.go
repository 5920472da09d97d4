package eventsource

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// messageSender is the part of the SQS client a destination uses.
type messageSender interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var _ messageSender = (*sqs.Client)(nil)

// destination is an SQS queue that receives on-failure records.
type destination struct {
	client messageSender
	queue  arnParts

	mu  sync.Mutex
	url string
}

func newDestination(cfg aws.Config, arn string) (*destination, error) {
	if arn == "" {
		return nil, nil
	}
	p, err := parseARN("OnFailureARN", arn)
	if err != nil {
		return nil, err
	}
	return &destination{client: sqs.NewFromConfig(cfg), queue: p}, nil
}

func (d *destination) send(ctx context.Context, body []byte) error {
	url, err := d.queueURL(ctx)
	if err != nil {
		return err
	}
	_, err = d.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(string(body))})
	return err
}

func (d *destination) queueURL(ctx context.Context) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.url != "" {
		return d.url, nil
	}
	out, err := d.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &d.queue.resource, QueueOwnerAWSAccountId: &d.queue.account})
	if err != nil {
		return "", fmt.Errorf("queue %s: %w", d.queue.resource, err)
	}
	d.url = aws.ToString(out.QueueUrl)
	return d.url, nil
}

// newUUID returns a random version 4 UUID.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
