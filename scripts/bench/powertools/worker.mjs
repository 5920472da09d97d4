// The Powertools peer of bench/worker: the SQS task worker done the way a
// team using Powertools for AWS Lambda (TypeScript) would do it —
// makeIdempotent with the DynamoDB persistence layer around the task, keyed
// like Tributary's worker (data.taskId, payload validated on data, a message
// without a task id is an error), doing the same side effect: one UpdateItem
// of the task's results item (SET digest, rounds, messageId, completedAt;
// ADD executions 1).
//
// Usage:
//   AWS_ENDPOINT_URL=http://127.0.0.1:4566 node worker.mjs \
//     --batch 10 --results-table results --idempotency-table idempotency < bodies.jsonl
//
// Stdin holds one SQS message body per line: a task envelope
// {id,type:"task",key,occurredAt,sentAt,data:{taskId,input,rounds}}. The
// messages are walked in batches of --batch, each batch one "invocation"
// with its own context, records one after the other.
//
// Tables (created by the caller):
//   idempotency: partition key "id" (S) — Powertools' default schema.
//   results:     partition key "taskId" (S).
//
// Prints one JSON object: {"messages", "batches", "applied", "latenciesMs"}:
// applied counts the side effects that ran; latenciesMs holds, per message,
// the wall time of the idempotent call (side effect included).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';

const { values: args } = parseArgs({
  options: {
    batch: { type: 'string', default: '10' },
    'results-table': { type: 'string', default: 'results' },
    'idempotency-table': { type: 'string', default: 'idempotency' },
  },
});

function fail(message) {
  process.stderr.write(`powertools worker peer: ${message}\n`);
  process.exit(2);
}

const endpoint = process.env.AWS_ENDPOINT_URL;
if (!endpoint) fail('AWS_ENDPOINT_URL is not set: point it at the stand-in, for example http://127.0.0.1:4566');
const batchSize = Number.parseInt(args.batch, 10);
if (!Number.isInteger(batchSize) || batchSize < 1) fail(`--batch ${args.batch}: want a positive integer`);

const clientConfig = {
  endpoint,
  region: process.env.AWS_REGION ?? 'us-east-1',
  credentials: {
    accessKeyId: process.env.AWS_ACCESS_KEY_ID ?? 'test',
    secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY ?? 'test',
  },
};
process.env.AWS_LAMBDA_FUNCTION_NAME ??= 'powertools-worker';
const persistenceStore = new DynamoDBPersistenceLayer({
  tableName: args['idempotency-table'],
  clientConfig,
});
const config = new IdempotencyConfig({
  eventKeyJmesPath: 'data.taskId',
  payloadValidationJmesPath: 'data',
  throwOnNoIdempotencyKey: true,
});
const documents = DynamoDBDocumentClient.from(new DynamoDBClient(clientConfig));
const resultsTable = args['results-table'];

// digest is what Tributary's worker computes: SHA-256 of input, then
// rounds-1 more times over the previous sum.
function digest(input, rounds) {
  let sum = createHash('sha256').update(input).digest();
  for (let i = 1; i < rounds; i++) sum = createHash('sha256').update(sum).digest();
  return sum.toString('hex');
}

let applied = 0;
let currentMessageId = '';

// runTask is the side effect: the task's results item.
async function runTask(envelope) {
  const t = envelope.data;
  const d = digest(t.input, t.rounds);
  await documents.send(new UpdateCommand({
    TableName: resultsTable,
    Key: { taskId: t.taskId },
    UpdateExpression: 'SET #d = :d, #r = :r, #m = :m, #c = :c ADD #x :one',
    ExpressionAttributeNames: { '#d': 'digest', '#r': 'rounds', '#m': 'messageId', '#c': 'completedAt', '#x': 'executions' },
    ExpressionAttributeValues: { ':d': d, ':r': t.rounds, ':m': currentMessageId, ':c': new Date().toISOString(), ':one': 1 },
  }));
  applied++;
  return { taskId: t.taskId, digest: d, rounds: t.rounds, messageId: currentMessageId };
}

const runTaskOnce = makeIdempotent(runTask, { persistenceStore, config });

const latenciesMs = [];

// handler is what the Lambda function would export: each record's task,
// idempotently, one after the other; it throws on the first failure.
async function handler(records, context) {
  config.registerLambdaContext(context);
  for (const record of records) {
    const envelope = JSON.parse(record.body);
    if (envelope.type !== 'task') throw new Error(`message ${record.messageId}: field type: ${JSON.stringify(envelope.type)}, want "task"`);
    currentMessageId = record.messageId;
    const started = process.hrtime.bigint();
    await runTaskOnce(envelope);
    latenciesMs.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
}

const bodies = readFileSync(0, 'utf8').split('\n').filter((l) => l.trim() !== '');
let batches = 0;
for (let i = 0; i < bodies.length; i += batchSize) {
  const records = bodies.slice(i, i + batchSize).map((body, j) => ({ messageId: `msg-${String(i + j).padStart(5, '0')}`, body }));
  const deadline = Date.now() + 60_000;
  const context = {
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    awsRequestId: `batch-${batches}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
  };
  await handler(records, context);
  batches++;
}

process.stdout.write(`${JSON.stringify({ messages: bodies.length, batches, applied, latenciesMs })}\n`);
