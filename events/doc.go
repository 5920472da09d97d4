// Package events holds sample events, one directory per function, that a
// user pastes into the Lambda console's "Test" tab, or sends to the local
// topology through its Lambda Invoke API (make invoke FN=<dir> EVENT=<file>,
// or aws lambda invoke --endpoint-url). The Go code here is only their
// tests: events_test.go runs every sample through its function's handler
// against the local stand-in and checks the outcome documented below;
// invoke_test.go deploys the whole stack locally and sends every sample
// through the Invoke API with the SDK's Lambda client. Both fail for a sample
// without a case, so the samples stay valid.
//
// Samples name resources as the deployed stack's construct ids would
// ("table": "profiles") or by a plain stack name ("…:Tributary-Tasks"); on
// AWS, put your stack's names in. Locally, the Invoke API maps such names
// (members table, tableName, stream, streamName, queue, queueName, queueUrl,
// and eventSourceARN) to the local deployment's, so every sample works as it
// is. Through the Invoke API, worker/sqs-after-missing.json therefore goes to
// the local Tasks DLQ with its reason (the queue its ARN names has one), and
// snapshot/console-test.json publishes the local profiles table.
//
// make invoke sends a fresh copy of the file (local.FreshSample): times
// moved to now, Kinesis records on shard shardId-make-invoke, new sequence
// numbers and ids, so that a sample never moves a running stack's real
// shards, and event ids with a suffix new at each invocation, so
// that each invocation is counted, not set aside as an id reused with other
// content. The outcomes below are the file's own, at its fixed times and ids.
//
//	ingest/function-url-post.json      one envelope            → 202, accepted 1, the record is on the stream
//	ingest/function-url-batch.json     three envelopes         → 202, accepted 3
//	ingest/function-url-invalid.json   second has a bad time   → 400 naming events[1].occurredAt (id "evt-0006"); nothing written
//	ingest/function-url-idempotency-key.json  two events with Idempotency-Key "8e03978e-…" → 202, accepted 2; sent again,
//	                                   the same answer byte for byte with Idempotency-Replayed: true, still 2 records
//	ingest/function-url-signed.json    one event signed (HMAC-SHA256, secret "tributary-test-secret") at 10:41:09
//	                                   → 202 at that time; in the console, hours later, 401 naming X-Tributary-Timestamp
//	                                   (outside the 5-minute window: the replay guard); re-sign it to send it for real
//	aggregate/kinesis-batch.json       three valid records     → no batch item failures; the tumbling 1m window 10:41 holds
//	                                   user-42: count 2, sum 2000 ms; user-7: count 1, sum 300 ms (open: the watermark is
//	                                   not past 10:42). user-42's device clock is three hours behind: event time corrects it
//	aggregate/kinesis-poison.json      the second record is poison (occurredAt "yesterday")
//	                                   → the deployed function (it has a quarantine table) sets it aside there, kind
//	                                   set-aside naming occurredAt, with its data, and answers batchItemFailures: [] (as
//	                                   make invoke shows); the bare handler events_test.go runs, with no quarantine table,
//	                                   reports exactly its sequenceNumber ...4722 as the failure instead. Only the first
//	                                   record is counted
//	aggregate/kinesis-tumbling-window.json  the same three records in a tumbling-window invocation (per-interval path)
//	                                   → no writes yet; the returned state carries the partial aggregates and the watermark
//	ticker/eventbridge-scheduled.json  the ticker rule's Scheduled Event (10:50) → after aggregate/kinesis-batch.json, a tick
//	                                   at 10:50 starts the idle shard's clock (nothing final); the next, at 10:51, moves the
//	                                   watermark to 10:50:25 and finalizes and emits all 12 tumbling and hopping windows and the 2 sessions
//	worker/sqs-tasks.json              two copies of task-1001 → no failures; its side effect runs once (executions 1),
//	                                   also when the batch is redelivered
//	worker/sqs-fifo.json               group customer-1's second message is poison (rounds 0) → it and the group's later
//	                                   message fail; task-2001 and task-3001 run once
//	worker/sqs-after-missing.json      task-4002 needs task-4001's result (data.after), which does not exist, on receive 5
//	                                   (the Tasks queue's maxReceiveCount, its last) → reported by its messageId, never run;
//	                                   the deployed worker instead sends it to the Tasks DLQ with the reason (on an earlier
//	                                   receive it is reported failed to wait for its dependency, in both)
//	cdc/dynamodb-insert.json           INSERT of user-42 (version 1) → one profile_changed record, partition key user-42,
//	                                   id profiles/user-42/1, image = the item (the id's first part is the table's name
//	                                   from eventSourceARN: under make invoke the local table's, Tributary-ProfilesCDC…/user-42/1)
//	cdc/dynamodb-modify.json           MODIFY to version 2 → profile_changed, id profiles/user-42/2, image = the new image
//	cdc/dynamodb-remove.json           REMOVE of version 2 → profile_deleted tombstone, id profiles/user-42/3, image null
//	enrich/kinesis-profile-change.json activity, profile_changed user-42 v2 (pro), activity → evt-0100 gets no profile
//	                                   (profile and profileVersion null), evt-0101 gets pro at version 2; delivered twice,
//	                                   the two outputs are byte-identical
//	enrich/kinesis-tombstone.json      user-7 v1 (free), activity, profile_deleted v2, activity → evt-0201 gets free at 1,
//	                                   evt-0202 gets profile null, profileVersion 2, profileDeleted true
//	snapshot/console-test.json         {"table":"profiles"} → 2 published, the table's stream position, startingPosition
//	                                   AT_TIMESTAMP, startAt no later than the invocation (start the new consumer there)
//	timeline/dynamodb-tweet-insert.json  ann's new tweet (bob follows ann, cat follows bob) → in ann's and bob's
//	                                   timelines, not cat's; delivered twice = the same view
//	timeline/dynamodb-follow-remove.json bob unfollows ann → ann's tweet leaves bob's timeline, stays in ann's
//	commands/function-url-schedule.json  POST /commands ScheduleShow show-1 (2 rows × 5 seats) → 200 accepted, version 1
//	commands/function-url-reserve.json   after it, ReserveSeats A1 A2 for ada (holder: name, email) → 200, version 2; sent again,
//	                                   the same answer with Idempotency-Replayed: true and no second event; the holder is kept
//	                                   in the event's "personal" attribute, apart from its data
//	commands/function-url-refused.json   after both, ReserveSeats A3 A2 for bob → 422 refused, field data.seats[1] (A2 is taken)
//	commands/function-url-seatmap.json   after both, GET /shows/show-1?minVersion=2 → the seat map at version 2 at once, 8 free
//	publish/dynamodb-insert.json       the event store's INSERT of show-1/2 → one record on the stream, key show-1, id show-1/2,
//	                                   without the holder's name and email
//	publish/dynamodb-modify-tampered.json a MODIFY that changed an event's data → nothing published; set aside naming
//	                                   dynamodb.NewImage.data ("events are immutable")
//	project/kinesis-events.json        show-1's ShowScheduled and SeatsReserved, held to the event store: against one without
//	                                   them, both set aside naming data.version (no such event was appended); once the store
//	                                   holds them, availability 8 free at version 2, ada's booking r-ada reserved at version 2;
//	                                   delivered twice, the same views
//	quarantine/sqs-on-failure.json     Lambda's on-failure record for a Kinesis batch
//	                                   → no failure; against an empty stand-in the records are not in any stream, so
//	                                     one "missing" item with the batch's coordinates is written
//	quarantine/sqs-unparseable.json    a message that is not an on-failure record → no failure: set aside in the quarantine
//	                                   table (kind set-aside, reason "body is not a JSON object", its body as data)
//	join/kinesis-search-click.json     srch-1 and clk-1 (sess-1), srch-2 (sess-2), srch-3 (sess-2, 10:42) under pipelines/search-click.json
//	                                   → joined srch-1 ⋈ clk-1; srch-2 unmatched (the watermark, 10:41:55, passed its 30 s);
//	                                   delivered twice, nothing more on the joins stream
//	join/eventbridge-tick.json         after that batch, ticks at 10:50 and 10:51 move the idle shard's watermark to 10:50:35
//	                                   → srch-3 unmatched; join_rate sess-1 10:41 1/1, sess-2 10:41 0/1 and 10:42 0/1
//	detect/kinesis-payments.json       with rule fail-then-big (rules/function-url-add.json) in the rules table: acct-1's
//	                                   failed payment, a page view, a payment of 150 → one match pay-1,pay-2; acct-2's payment
//	                                   of 500 follows no failure → none; delivered twice, one match
//	rules/function-url-add.json        POST /rules with fail-then-big → 201, the rule, appliesFrom 10 s later (2 s under make local-up);
//	                                   under make invoke, send detect's payments once the next minute has begun (docs/local.md)
//	rules/function-url-add-invalid.json  a where clause with "=>" → 400, part "pattern[0].where"
//	rules/function-url-test.json       POST /test: the rule over three events offline → 200, one match
//
// Two of the stack's functions have no samples: archive (the events
// stream's S3 archiver) and statuscodes (the example function of
// examples/functions). Both read the events stream: send events to ingest
// (make local does, and shows the statuscodes results).
//
// Kinesis record data in the samples is base64, as Lambda delivers it; decode
// it to read the envelopes.
package events
