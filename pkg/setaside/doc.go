// Package setaside is how a stream consumer gives up on a record that can
// never succeed — unparseable, a wrong type, a value that would overflow an
// aggregate, a key over its state budget, an output over a service limit —
// without stopping its shard. The function writes the record, with its
// data, its position (source, shard, sequence number) and a reason naming
// the field, to the quarantine table, counts it in the metric
// RecordsSetAside (namespace Tributary, dimension Function), logs one
// structured line per record, and then reports the record processed, so
// Lambda moves the shard on at once. Only transient errors (throttling,
// timeouts, 5xx) fail a batch and are retried.
//
//	sink := setaside.New(dynamodbClient, os.Getenv("QUARANTINE_TABLE_NAME"),
//		setaside.WithFunction(os.Getenv("AWS_LAMBDA_FUNCTION_NAME")), setaside.WithMetrics(m))
//	rec := setaside.FromKinesis(&ev.Records[i])
//	rec.Field, rec.Kind, rec.Reason = "data.ms", setaside.KindOverflow, "1.7e308 would make the window's sum +Inf"
//	if err := sink.SetAside(ctx, []setaside.Record{rec}); err != nil {
//		// transient: report the record as a batch item failure; nothing is lost
//	}
//
// # The quarantine table
//
// Items are the ones package quarantine has always written (partition key
// source = "<stream ARN>/<shard>", sort key sequenceNumber; TTL expiresAt,
// 14 days), told apart by kind:
//
//	set-aside  a record a function gave up on: function, field, category, reason;
//	           rule (what the field must hold, when the function says: Rule) and
//	           idTaken (its dedupe ledger took the record's id: Record.IDTaken);
//	           functions, the same of each function that set it aside (Entry)
//	record     a record of a range Lambda gave up on (on-failure destination),
//	           written by quarantine: condition, functionError, reason
//	missing    a note that records of such a range could no longer be read
//	chunk      a continuation of a record's data (sort key "<sequence>#001", ...)
//
// Writing is idempotent: the same record gives the same items, so a retried
// batch or a redelivered message does no harm. A record several consumers
// of a stream set aside is one item, its data kept once: each adds its
// entry to functions with an UpdateItem that sets that entry alone, so
// none hides another's reason (Item.SetAsides tells each one's), and the
// item's own function, field, category and reason are the last one's. A DynamoDB Streams record
// has no shard in the Lambda event, so its source is the stream ARN alone;
// quarantine's copies of such records use the same source, so that a
// record set aside is never kept a second time as a copy.
//
// # Personal data
//
// A copy here outlives its source: the quarantine keeps it for 14 days,
// after the item it came from may have been erased. So a DynamoDB stream
// record is never kept with personal data: its images lose the attribute
// PersonalAttribute ("personal", where the events table keeps an event's
// personal data) — FromDynamoDB for a record a function sets aside,
// DynamoDBData for quarantine's copies of failed ranges. The copy keeps the
// record's keys, which name the item where the data stays until it is
// erased; its redacted attribute lists the fields removed and its reason
// says so. Erasure then has nothing to find here.
//
// # Records bigger than an item
//
// A Kinesis record can be 1 MiB and a DynamoDB stream record as JSON more,
// but a DynamoDB item holds 400 KB. The data is kept whole, spread over
// items of at most ChunkBytes each: the first part in the record's own item
// (dataChunks says how many items hold it, dataBytes its full size), the
// rest in chunk items under the same source, sort keys "<sequence>#001",
// "<sequence>#002", .... Chunks are written before the record's item, so a
// record item is never there without its chunks. A chunk says whose it is
// (chunkOf: set-aside or record), so a copy of a record Keep writes never
// replaces the chunks of that record set aside, whose data need not be the
// same bytes. Load reassembles a record.
// ChunkBytes leaves room for the item's other attributes and for stand-ins
// that count binary data by its base64 length (moto); every other attribute
// is bounded whoever filled it (text cut and marked "…(truncated)", the
// redacted list shortened), and every item is checked against DynamoDB's
// limit (limits.CheckItem) before it is written. Keys are checked, not cut:
// an item without source or sequence number, or with a key over DynamoDB's
// limit, is ErrUnwritable, which no retry can change. This
// keeps everything in the table the stack already has: no bucket, no new
// permission beyond PutItem, BatchWriteItem and UpdateItem on that table.
package setaside
