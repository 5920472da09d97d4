package tributary

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// ProtectState makes what holds data outlive `cdk destroy` and mistakes:
// every DynamoDB table in stack is retained (DeletionPolicy and
// UpdateReplacePolicy Retain) and deletion-protected, and every failure
// queue (FailureQueues) is retained with its queue policy. It overrides the
// removal policy the table's construct chose (the join table and the
// idempotency table would otherwise go with the stack): every table of the
// topology holds state that no stream can give back once the events
// stream's retention has passed. Streams, functions, logs, alarms and the
// topic are still deleted with the stack.
func ProtectState(stack awscdk.Stack) {
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		t, ok := c.(awsdynamodb.Table)
		if !ok {
			continue
		}
		t.Node().DefaultChild().(awsdynamodb.CfnTable).SetDeletionProtectionEnabled(jsii.Bool(true))
		t.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN)
	}
	for _, q := range FailureQueues(stack) {
		q.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN)
		// A retained queue keeps its TLS-only policy too (the queue
		// policy construct CDK adds as child "Policy").
		if p, ok := q.Node().TryFindChild(jsii.String("Policy")).(awssqs.QueuePolicy); ok {
			p.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN)
		}
	}
}

// FailureQueues lists, ordered by construct path, the queues of stack that
// hold failures: every queue that is another queue's dead-letter queue,
// every queue that is the on-failure destination of an event source
// mapping or of a function's asynchronous invocations, and every queue
// that is the dead-letter queue of an EventBridge rule's target (the
// schedule events EventBridge could not deliver).
func FailureQueues(stack awscdk.Stack) []awssqs.Queue {
	byArn := map[string]awssqs.Queue{}
	var queues []awssqs.Queue
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if q, ok := c.(awssqs.Queue); ok {
			byArn[resolvedJSON(stack, q.QueueArn())] = q
			queues = append(queues, q)
		}
	}
	found := map[string]awssqs.Queue{}
	add := func(arn string) {
		if q, ok := byArn[arn]; ok {
			found[*q.Node().Path()] = q
		}
	}
	for _, q := range queues {
		if d := q.DeadLetterQueue(); d != nil && d.Queue != nil {
			add(resolvedJSON(stack, d.Queue.QueueArn()))
		}
	}
	for _, m := range stackMappings(stack) {
		if m.onFailure != "" {
			add(m.onFailure)
		}
	}
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if cfg, ok := c.(awslambda.CfnEventInvokeConfig); ok {
			if d := onFailureDestination(stack, cfg.DestinationConfig()); d != "" {
				add(d)
			}
		}
	}
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if rule, ok := c.(awsevents.CfnRule); ok {
			for _, arn := range ruleDeadLetterQueues(stack, rule) {
				add(arn)
			}
		}
	}
	paths := make([]string, 0, len(found))
	for p := range found {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	out := make([]awssqs.Queue, 0, len(paths))
	for _, p := range paths {
		out = append(out, found[p])
	}
	return out
}

// Quarantine's reads of a failed range: it fetches the records of an
// on-failure message by shard and sequence number (GetShardIterator
// AT_SEQUENCE_NUMBER, then GetRecords), from Kinesis or DynamoDB Streams
// (package quarantine's shardReader and streamReader). Keep them in step
// with those interfaces: a missing action works locally, where permissions
// are not enforced, and fails in AWS.
var (
	failedRangeKinesisActions  = []string{"kinesis:GetShardIterator", "kinesis:GetRecords"}
	failedRangeDynamoDBActions = []string{"dynamodb:GetShardIterator", "dynamodb:GetRecords"}
)

// GrantFailedRangeReads lets reader read back the records of every stream
// whose event source mapping in stack sends its failures to failures: the
// Kinesis stream (also when the mapping reads it through an enhanced
// fan-out consumer) or the DynamoDB table's stream. It grants nothing else
// on them (no DescribeStream, no ListShards: the message names the shard).
// Call it after the last stream mapping is added.
func GrantFailedRangeReads(stack awscdk.Stack, failures awssqs.IQueue, reader *GoFunction) {
	kinesisByArn := map[string]awskinesis.IStream{}
	tableStreams := map[string]*string{}
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		switch r := c.(type) {
		case awskinesis.Stream:
			kinesisByArn[resolvedJSON(stack, r.StreamArn())] = r
		case awskinesis.StreamConsumer:
			kinesisByArn[resolvedJSON(stack, r.StreamConsumerArn())] = r.Stream()
		case awsdynamodb.Table:
			if arn := r.TableStreamArn(); arn != nil {
				tableStreams[resolvedJSON(stack, arn)] = arn
			}
		}
	}
	want := resolvedJSON(stack, failures.QueueArn())
	kinesisGranted := map[string]bool{}
	var streamArns []*string
	seen := map[string]bool{}
	for _, m := range stackMappings(stack) {
		if !m.stream || m.onFailure != want {
			continue
		}
		if s, ok := kinesisByArn[m.source]; ok {
			key := resolvedJSON(stack, s.StreamArn())
			if !kinesisGranted[key] {
				kinesisGranted[key] = true
				s.Grant(reader.Role, *jsii.Strings(failedRangeKinesisActions...)...)
			}
			continue
		}
		if arn, ok := tableStreams[m.source]; ok && !seen[m.source] {
			seen[m.source] = true
			streamArns = append(streamArns, arn)
		}
	}
	if len(streamArns) > 0 {
		reader.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(failedRangeDynamoDBActions...),
			Resources: &streamArns,
		}))
	}
}

// ruleDeadLetterQueues are the resolved dead-letter queue ARNs of rule's
// targets.
func ruleDeadLetterQueues(stack awscdk.Stack, rule awsevents.CfnRule) []string {
	var targets []map[string]any
	if err := json.Unmarshal([]byte(resolvedJSON(stack, rule.Targets())), &targets); err != nil {
		return nil
	}
	var out []string
	for _, t := range targets {
		for k, v := range t {
			if !strings.EqualFold(k, "deadLetterConfig") {
				continue
			}
			dlc, _ := v.(map[string]any)
			for k2, arn := range dlc {
				if strings.EqualFold(k2, "arn") {
					raw, _ := json.Marshal(arn)
					out = append(out, string(raw))
				}
			}
		}
	}
	return out
}
