package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/pkg/standin/standintest"
)

// TestRun drives the command as a user would: environment pointing at the
// stand-in (no region set, so the default us-east-1 must be the one the
// queues are in), queues by name.
func TestRun(t *testing.T) {
	srv := standintest.Start(t)
	c := sqs.NewFromConfig(standintest.Config(t, srv))
	ctx := context.Background()
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": srv.Endpoint(), "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none,
	} {
		t.Setenv(k, v)
	}

	create := func(name string, attrs map[string]string) string {
		out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.QueueUrl)
	}
	dlq := create("tasks-dlq", nil)
	arn, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := json.Marshal(map[string]any{"deadLetterTargetArn": arn.Attributes["QueueArn"], "maxReceiveCount": 3})
	tasks := create("tasks", map[string]string{"RedrivePolicy": string(policy)})
	orphan := create("orphan-dlq", nil)
	for i := range 3 {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String("task-" + strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	visible := func(url string) string {
		out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes["ApproximateNumberOfMessages"]
	}

	steps := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
		dlqAfter   string
	}{
		{name: "no -dlq", args: nil, wantCode: 2, wantStderr: "usage: redrive -dlq"},
		{name: "unknown dlq", args: []string{"-dlq", "nope"}, wantCode: 1, wantStderr: `-dlq: queue "nope" does not exist`},
		{name: "no source to find", args: []string{"-dlq", "orphan-dlq"}, wantCode: 1, wantStderr: "give the source with -to"},
		{name: "dry run", args: []string{"-dlq", "tasks-dlq", "-dry-run"}, wantStdout: "3 messages listed (≈3 in the DLQ); nothing was moved", dlqAfter: "3"},
		{name: "move to the discovered source", args: []string{"-dlq", "tasks-dlq", "-max", "2"}, wantStderr: "moving messages from " + dlq + " to " + tasks, dlqAfter: "1"},
		{name: "move the rest by URL", args: []string{"-dlq", dlq, "-to", "tasks"}, wantStderr: "moved 1, failed 0\n", dlqAfter: "0"},
	}
	for _, s := range steps {
		var stdout, stderr bytes.Buffer
		args := s.args
		if args != nil {
			args = append(args, "-wait", "0s") // moto answers short polls fully
		}
		code := run(ctx, args, &stdout, &stderr)
		if code != s.wantCode {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", s.name, code, s.wantCode, stderr.String())
		}
		if !strings.Contains(stdout.String(), s.wantStdout) {
			t.Errorf("%s: stdout lacks %q:\n%s", s.name, s.wantStdout, stdout.String())
		}
		if !strings.Contains(stderr.String(), s.wantStderr) {
			t.Errorf("%s: stderr lacks %q:\n%s", s.name, s.wantStderr, stderr.String())
		}
		if s.dlqAfter != "" {
			if got := visible(dlq); got != s.dlqAfter {
				t.Errorf("%s: DLQ holds %s, want %s", s.name, got, s.dlqAfter)
			}
		}
	}
	if got := visible(tasks); got != "3" {
		t.Errorf("tasks holds %s messages, want 3", got)
	}
	if got := visible(orphan); got != "0" {
		t.Errorf("orphan-dlq holds %s", got)
	}
}
