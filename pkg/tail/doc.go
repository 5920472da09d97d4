// Package tail reads a Kinesis stream for a person looking at it, without
// disturbing the stack's own readers: the records of every shard (or one)
// from a position (a time, latest, trim_horizon, a sequence number),
// filtered by partition key, by the top-level "type", or by JSON fields
// (-where data.page=/home), printed pretty, as JSON lines or raw.
//
//	sum, err := tail.Run(ctx, kinesisClient, tail.Options{Stream: name, From: pos, Follow: true, Status: os.Stderr},
//		(&tail.Printer{W: os.Stdout, Format: tail.Pretty}).Print)
//
// How it reads. Polling readers share each shard's five GetRecords calls
// and 2 MB a second with the stack's functions, so a careless tail can
// slow production. Run first removes the consumers earlier tails left
// (named ConsumerPrefix + their deadline; one is stale StaleGrace after
// its deadline, so a live session's is never taken), then registers an
// enhanced fan-out consumer of its own, whose name carries the session's
// deadline (Options.MaxSession from the start), and reads every shard with
// SubscribeToShard: 2 MB a second per shard of its own. It deregisters the
// consumer before it returns, whatever ends it (Ctrl-C is a cancelled
// context). Where that fails — no SubscribeToShard (the local stand-in),
// no permission, the stream's consumers all taken — it deregisters what
// it registered and polls instead, at most one GetRecords call per shard
// per Options.Poll (at least MinPoll, a second), up to 1,000 records a
// call. The first line it writes to Options.Status says which, at what
// rate and why; every Options.Progress while a shard is still catching up,
// a line says how far it got.
//
// It never checkpoints: nothing remembers where a tail got to. The only
// thing it writes is its own consumer's registration (and the removal of
// stale ones of earlier tails).
//
// Every answer is bounded: Options.Limit records (MaxRecords at most),
// Printer.MaxBytes of each record's data (MaxRecordBytes at most, cut
// records say so), one batch held per shard; and every input: -where
// expressions (MaxConditions, MaxPathSteps, MaxConditionBytes), -type
// values (MaxTypes), positions (MaxAgo, 128-digit sequence numbers).
// cmd/tail is the command around it.
package tail
