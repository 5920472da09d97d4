// Package emulator is the local emulator: what runs a synthesized Tributary
// stack (any CDK app's cdk.out) on a laptop without an AWS account and
// without Docker. It is not imported by any function; a team uses it from
// `make local`, from tests, or on its own for a stack of its own.
//
//   - standin: the local AWS stand-in (moto in server mode on 127.0.0.1,
//     or a LocalStack the caller points at), started on a free port;
//   - template: deploys a cdk.out CloudFormation template onto the stand-in
//     (tables, streams, queues, stream consumers, roles, parameters);
//   - rie: runs a function's real bootstrap binary under aws-lambda-rie;
//   - eventsource: plays Lambda's event source mappings (Kinesis, SQS,
//     DynamoDB Streams: batching, bisection, partial batch responses,
//     tumbling windows, on-failure destinations);
//   - cloudwatchlocal: function output into CloudWatch Logs, EMF into
//     metrics, on the stand-in;
//   - local: the runner behind `make local`, `make local-up` and
//     `make invoke`: the pieces above put together, function URLs, the
//     Lambda Invoke API and the local dashboard page.
//
// The stream-processing library a function imports is under pkg/.
package emulator
