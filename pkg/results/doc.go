// Package results reads a windowed pipeline's results the way a person
// wants them, without knowing how they are stored: a key's windows over a
// time range (final ones as the views table holds them, with their
// revision; open ones with their running value, the session and sliding
// ones computed from the key's state), and the WindowResults stream as it
// grows (every final result, correction and retraction, from every shard);
// and it writes both readably, as an aligned table or as JSON lines.
//
//	r := results.NewReader(cfg, dynamodbClient, viewsTable)
//	views, more, err := r.Windows(ctx, "user-1", r.Kinds(), from, to, 100)
//	results.WriteTable(os.Stdout, cfg.Aggregates, views) // more: there are others past the 100th
//
//	f := results.NewFollower(kinesisClient, windowResultsStream)
//	err := f.Follow(ctx, time.Time{}, func(rec results.Record) error {
//		fmt.Println(results.FormatOutput(rec.Output))
//		return nil
//	})
//
// The reader only reads: its store refuses writes, so pointing it at a live
// views table is safe. cmd/results is the command around it.
package results
