// The baseline of `make bench`: the per-minute count per key done the way a
// team using Powertools for AWS Lambda (TypeScript) would do it, one
// idempotency record per event (makeIdempotent keyed by the event id) around
// the aggregate update.
//
// Usage:
//   AWS_ENDPOINT_URL=http://127.0.0.1:4566 node run.mjs \
//     --events events.jsonl --batch 100 --counts-table counts --idempotency-table idempotency
//
// The events file holds one envelope per line: {id,type,key,occurredAt,sentAt,receivedAt,data}.
// The events are walked in batches of --batch, one batch after the other, as
// one Lambda function on one shard would receive them; each batch is one
// "invocation" with its own context.
//
// Tables (created by the caller):
//   idempotency: partition key "id" (S), TTL on "expiration" — Powertools' default schema
//                (attributes id, expiration, status, data, in_progress_expiration).
//   counts:      partition key "key" (S), sort key "window" (S, the minute's start as
//                RFC 3339, UTC); the count is attribute "count" (N).
//
// Prints one JSON object: {"events", "batches", "processed", "applied", "elapsedMs",
// "counts": {"<key>|<window>": n}}: processed counts records handled, applied
// the updates that ran (a duplicate is processed but not applied), counts the
// applied updates per key and minute.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';

const { values: args } = parseArgs({
  options: {
    events: { type: 'string' },
    batch: { type: 'string', default: '100' },
    'counts-table': { type: 'string', default: 'counts' },
    'idempotency-table': { type: 'string', default: 'idempotency' },
  },
});

function fail(message) {
  process.stderr.write(`powertools peer: ${message}\n`);
  process.exit(2);
}

const endpoint = process.env.AWS_ENDPOINT_URL;
if (!endpoint) fail('AWS_ENDPOINT_URL is not set: point it at the stand-in, for example http://127.0.0.1:4566');
if (!args.events) fail('--events is required: a JSONL file of envelopes');
const batchSize = Number.parseInt(args.batch, 10);
if (!Number.isInteger(batchSize) || batchSize < 1) fail(`--batch ${args.batch}: want a positive integer`);

// Both clients go to the stand-in: the idempotency layer through clientConfig,
// the handler's own client likewise.
const clientConfig = {
  endpoint,
  region: process.env.AWS_REGION ?? 'us-east-1',
  credentials: {
    accessKeyId: process.env.AWS_ACCESS_KEY_ID ?? 'test',
    secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY ?? 'test',
  },
};
// The idempotency key is "<function name>.countEvent#<hash of id>", as in Lambda.
process.env.AWS_LAMBDA_FUNCTION_NAME ??= 'powertools-aggregate';
const persistenceStore = new DynamoDBPersistenceLayer({
  tableName: args['idempotency-table'],
  clientConfig,
});
const config = new IdempotencyConfig({ eventKeyJmesPath: 'id' });
const documents = DynamoDBDocumentClient.from(new DynamoDBClient(clientConfig));
const countsTable = args['counts-table'];

// eventTime is occurredAt + (receivedAt − sentAt), as Tributary computes it.
function eventTime(e) {
  const occurred = Date.parse(e.occurredAt);
  if (Number.isNaN(occurred)) throw new Error(`record ${e.id}: occurredAt ${JSON.stringify(e.occurredAt)} is not an RFC 3339 time`);
  if (!e.receivedAt || !e.sentAt) return occurred;
  return occurred + (Date.parse(e.receivedAt) - Date.parse(e.sentAt));
}

function minuteStart(ms) {
  return new Date(Math.floor(ms / 60000) * 60000).toISOString().replace('.000Z', 'Z');
}

const counts = {};
let applied = 0;

// The record handler: one aggregate update per event.
async function countEvent(envelope) {
  const window = minuteStart(eventTime(envelope));
  await documents.send(new UpdateCommand({
    TableName: countsTable,
    Key: { key: envelope.key, window },
    UpdateExpression: 'ADD #count :one',
    ExpressionAttributeNames: { '#count': 'count' },
    ExpressionAttributeValues: { ':one': 1 },
  }));
  const k = `${envelope.key}|${window}`;
  counts[k] = (counts[k] ?? 0) + 1;
  applied++;
  return { key: envelope.key, window };
}

const countEventOnce = makeIdempotent(countEvent, { persistenceStore, config });

// handler is what the Lambda function would export: for each record, the
// idempotent update, one after the other.
async function handler(records, context) {
  config.registerLambdaContext(context);
  const done = [];
  for (const record of records) {
    done.push(await countEventOnce(record));
  }
  return done;
}

const lines = readFileSync(args.events, 'utf8').split('\n').filter((l) => l.trim() !== '');
const envelopes = lines.map((line, i) => {
  try {
    return JSON.parse(line);
  } catch (err) {
    fail(`${args.events}:${i + 1}: not JSON: ${err.message}`);
  }
});

let batches = 0;
let processed = 0;
const started = process.hrtime.bigint();
for (let i = 0; i < envelopes.length; i += batchSize) {
  const batch = envelopes.slice(i, i + batchSize);
  const deadline = Date.now() + 60_000;
  const context = {
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    awsRequestId: `batch-${batches}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
  };
  await handler(batch, context);
  batches++;
  processed += batch.length;
}
const elapsedMs = Number(process.hrtime.bigint() - started) / 1e6;

process.stdout.write(`${JSON.stringify({ events: envelopes.length, batches, processed, applied, elapsedMs, counts })}\n`);
