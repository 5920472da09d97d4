package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/redrive"
)

// TestRun drives the command as a user would: environment pointing at the
// stand-in, queues by name. Without a region it refuses to run; every bad
// flag is refused in one line naming it; the wrong direction and a dry run
// of a source queue are refused with nothing moved.
func TestRun(t *testing.T) {
	srv := standintest.Start(t)
	c := sqs.NewFromConfig(standintest.Config(t, srv))
	ctx := context.Background()
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": srv.Endpoint(), "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "",
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

	big := strings.Repeat("q", 100_000) // a value pasted by mistake
	steps := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
		dlqAfter   string
	}{
		{name: "no -dlq", args: nil, wantCode: 2, wantStderr: "redrive: -dlq is required"},
		{name: "negative -max", args: []string{"-dlq", "tasks-dlq", "-max", "-1"}, wantCode: 2, wantStderr: "-max -1: must be from 0 to 1000000", dlqAfter: "3"},
		{name: "huge -max", args: []string{"-dlq", "tasks-dlq", "-max", "5000000"}, wantCode: 2, wantStderr: "-max 5000000: must be from 0 to 1000000"},
		{name: "-max not a number", args: []string{"-dlq", "tasks-dlq", "-max", "all"}, wantCode: 2, wantStderr: `invalid value "all" for flag -max`},
		{name: "-wait without a unit", args: []string{"-dlq", "tasks-dlq", "-wait", "21"}, wantCode: 2, wantStderr: "redrive: -wait 21: a duration needs a unit, such as 21s; see go run ./cmd/redrive -h"},
		{name: "-wait= without a unit", args: []string{"-dlq", "tasks-dlq", "-wait=5"}, wantCode: 2, wantStderr: "redrive: -wait 5: a duration needs a unit, such as 5s; see go run ./cmd/redrive -h"},
		{name: "-wait a word", args: []string{"-dlq", "tasks-dlq", "-wait", "soon"}, wantCode: 2, wantStderr: `invalid value "soon" for flag -wait: parse error: want a duration`},
		{name: "-wait over 20s", args: []string{"-dlq", "tasks-dlq", "-wait", "21s"}, wantCode: 2, wantStderr: "-wait 21s: must be from 0s to 20s"},
		{name: "negative -wait", args: []string{"-dlq", "tasks-dlq", "-wait", "-1s"}, wantCode: 2, wantStderr: "-wait -1s: must be from 0s to 20s"},
		{name: "-wait not whole seconds", args: []string{"-dlq", "tasks-dlq", "-wait", "1500ms"}, wantCode: 2, wantStderr: "-wait 1.5s: whole seconds only"},
		{name: "-to with -dry-run", args: []string{"-dlq", "tasks-dlq", "-to", "tasks", "-dry-run"}, wantCode: 2, wantStderr: "-to has no use with -dry-run"},
		{name: "-to is -dlq", args: []string{"-dlq", "tasks-dlq", "-to", "tasks-dlq"}, wantCode: 2, wantStderr: "-to tasks-dlq is the -dlq queue itself"},
		{name: "bad queue name", args: []string{"-dlq", "tasks dlq"}, wantCode: 2, wantStderr: `-dlq "tasks dlq": an SQS queue name`},
		{name: "unknown flag", args: []string{"-dlq", "tasks-dlq", "-force"}, wantCode: 2, wantStderr: "flag provided but not defined: -force"},
		{name: "stray argument", args: []string{"-dlq", "tasks-dlq", "tasks"}, wantCode: 2, wantStderr: `unexpected argument "tasks"`},
		{name: "huge -dlq", args: []string{"-dlq", big}, wantCode: 2, wantStderr: `-dlq "` + big[:256] + `"…: an SQS queue name`},
		{name: "huge -max", args: []string{"-dlq", "tasks-dlq", "-max", big}, wantCode: 2, wantStderr: `invalid value "` + big[:256] + `"… for flag -max`},
		{name: "huge -wait=", args: []string{"-dlq", "tasks-dlq", "-wait=" + big}, wantCode: 2, wantStderr: `invalid value "` + big[:256] + `"… for flag -wait`},
		{name: "huge -wait without a unit", args: []string{"-dlq", "tasks-dlq", "-wait", strings.Repeat("9", 100_000)}, wantCode: 2, wantStderr: "-wait " + strings.Repeat("9", 256) + "…: a duration needs a unit"},
		{name: "huge unknown flag", args: []string{"-dlq", "tasks-dlq", "-" + big}, wantCode: 2, wantStderr: "flag provided but not defined: -" + big[:255] + "…"},
		{name: "huge stray argument", args: []string{"-dlq", "tasks-dlq", big}, wantCode: 2, wantStderr: `unexpected argument "` + big[:256] + `"…`},
		{name: "unknown dlq", args: []string{"-dlq", "nope"}, wantCode: 3, wantStderr: `-dlq queue "nope" does not exist`},
		{name: "no source to find", args: []string{"-dlq", "orphan-dlq"}, wantCode: 3, wantStderr: "give the source with -to"},
		{name: "the wrong way round", args: []string{"-dlq", "tasks", "-to", "tasks-dlq"}, wantCode: 3, wantStderr: "the wrong way round", dlqAfter: "3"},
		{name: "to a queue that is not the source", args: []string{"-dlq", "tasks-dlq", "-to", "orphan-dlq"}, wantCode: 3, wantStderr: "orphan-dlq has no redrive policy", dlqAfter: "3"},
		{name: "dry run of the source queue", args: []string{"-dlq", "tasks", "-dry-run"}, wantCode: 3, wantStderr: "would count as a receive", dlqAfter: "3"},
		{name: "dry run", args: []string{"-dlq", "tasks-dlq", "-dry-run"}, wantStdout: "3 message(s) listed (≈3 in the DLQ); nothing was moved", dlqAfter: "3"},
		{name: "move to the discovered source", args: []string{"-dlq", "tasks-dlq", "-max", "2"}, wantStderr: "moving messages from " + dlq + " to " + tasks, dlqAfter: "1"},
		{name: "move the rest by URL", args: []string{"-dlq", dlq, "-to", "tasks"}, wantStderr: "moved 1, failed 0\n", dlqAfter: "0"},
	}
	for _, s := range steps {
		var stdout, stderr bytes.Buffer
		args := s.args
		if args != nil && !slices.Contains(args, "-wait") {
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
		if s.wantCode >= 2 && stderr.Len() > 1000 {
			t.Errorf("%s: %d bytes on stderr: a value repeated whole", s.name, stderr.Len())
		}
		if s.wantCode >= 2 && (strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 || strings.Count(stderr.String(), "redrive:") != 1) {
			t.Errorf("%s: want one line with one prefix:\n%s", s.name, stderr.String())
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

	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "-wait") || !strings.Contains(stdout.String(), "AWS_REGION") {
		t.Errorf("-h: exit %d, stdout %q", code, stdout.String())
	}
	t.Setenv("AWS_REGION", "")
	stderr.Reset()
	if code := run(ctx, []string{"-dlq", "tasks-dlq", "-dry-run"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "no AWS region is set") {
		t.Errorf("no region: exit %d, stderr %q; want 2 naming the region", code, stderr.String())
	}
}

// TestReportIsBounded: a move the source refused thousands of messages of
// (its size limit below the DLQ's) names the first maxListed and says how
// many more, for refusals and for messages sent but not deleted alike.
func TestReportIsBounded(t *testing.T) {
	many := func(n int) redrive.Result {
		var res redrive.Result
		for i := range n {
			id := "m-" + strconv.Itoa(i)
			res.Failed = append(res.Failed, redrive.Failure{MessageID: id, Code: "InvalidParameterValue", Reason: strings.Repeat("r", 10_000)})
			res.NotDeleted = append(res.NotDeleted, "n-"+strconv.Itoa(i))
		}
		return res
	}
	for _, c := range []struct {
		n         int
		lines     int
		want, not []string
	}{
		{n: 3, lines: 3 + 3 + 1, want: []string{"failed m-2: InvalidParameterValue: rrr", "sent n-2 but could not delete it", "moved 0, failed 3, 3 sent but still in the DLQ"}, not: []string{"more"}},
		{n: 20, lines: 20 + 20 + 1, want: []string{"failed m-19:", "sent n-19 "}, not: []string{"more"}},
		{n: 5000, lines: 21 + 21 + 1, want: []string{"failed m-19:", "… and 4980 more failed (left in the DLQ; redrive -dry-run lists them)", "… and 4980 more sent but not deleted from the DLQ", "moved 0, failed 5000"}, not: []string{"m-20:", "n-20 "}},
	} {
		var stderr bytes.Buffer
		report(&stderr, many(c.n))
		out := stderr.String()
		if got := strings.Count(out, "\n"); got != c.lines {
			t.Errorf("%d refused: %d lines, want %d", c.n, got, c.lines)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%d refused: output lacks %q", c.n, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(out, w) {
				t.Errorf("%d refused: output has %q", c.n, w)
			}
		}
		if len(out) > 20_000 {
			t.Errorf("%d refused: %d bytes: a reason repeated whole", c.n, len(out))
		}
	}
}
