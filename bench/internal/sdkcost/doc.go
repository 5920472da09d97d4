// Package sdkcost measures what the AWS SDK's DynamoDB client spends on
// each request: serializing the input to DynamoDB's JSON, signing it
// (SigV4), its middleware, and decoding the answer.
//
// The benchmarks call an in-process store through the SDK's interfaces, so
// that work is not in the CPU they time; in Lambda it is the function's, on
// every request, and at 50–300 µs a request it is most of what an
// aggregate instance spends. A benchmark keeps a uniform sample of the
// requests the handler really makes and the store's answers (Sampler);
// Measure replays them through a real dynamodb.Client whose HTTP client
// answers at once with the recorded answer, JSON-encoded as DynamoDB
// answers, and gives the CPU per request by operation, which the benchmark
// adds for each request an invocation made (CPU.Of). Not counted: TLS and
// the socket under each request, a few microseconds at these sizes.
package sdkcost
