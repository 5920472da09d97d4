// Package cep is complex event processing with rules stored long-term and
// added at runtime — the notes' "queries are stored long-term, and events
// from the input streams continuously flow past them": rules live in a
// DynamoDB table, are added, listed, disabled and deleted while the detect
// function runs (cmd/rules, or the rules function's IAM-authenticated URL,
// Admin), and every match is emitted once to the matches stream, with a
// stable id, and logged as one JSON line.
//
// # The rule language
//
// A subset of Flink CEP's pattern API, as JSON. A pattern is a list of
// steps; the key holding a step's name says how it follows the step before
// (begin, next, followedBy, notFollowedBy); type and where say which
// events match it; the whole pattern must happen within a time, per key
// (the envelope key):
//
//		{"id": "big-payment", "pattern": [{"begin": "p", "type": "payment", "where": "data.amount > 100"}]}
//		{"id": "fail-then-big", "pattern": [{"begin": "fail", "type": "payment_failed"}, {"followedBy": "big", "type": "payment", "where": "data.amount > 100"}], "within": "10m"}
//		{"id": "cart-checkout", "pattern": [{"begin": "cart", "type": "add_to_cart"}, {"next": "buy", "type": "checkout"}], "within": "5m"}
//		{"id": "unpaid", "pattern": [{"begin": "order", "type": "order_placed"}, {"notFollowedBy": "paid", "type": "payment"}], "within": "15m"}
//		{"id": "brute-force", "pattern": [{"begin": "fail", "type": "login_failed", "timesOrMore": 5}], "within": "1m"}
//		{"id": "big-spender", "pattern": [{"begin": "spend", "type": "payment", "sum": "data.amount", "atLeast": 1000}], "within": "1h"}
//		{"id": "vip-nz", "pattern": [{"begin": "p", "type": "payment", "where": "data.country in ('NZ', 'AU') && data.amount >= 50"}], "keyPrefix": "vip-"}
//
//	  - filter (one step, no quantifier): every matching event is a match —
//	    a search stored long-term;
//	  - sequence: followedBy is relaxed contiguity (events in between are
//	    skipped; the first matching one is taken), next is strict (the very
//	    next event of the key among the types the rule names must match);
//	  - absence: a last step notFollowedBy matches when nothing matching it
//	    follows within the time; it is emitted once the watermark passes the
//	    end of that time;
//	  - count (timesOrMore n) and sum (sum of a data field, atLeast x)
//	    thresholds within a sliding time; counting starts again after a match.
//	    A sum skips events whose field is missing or not a number, and one
//	    whose value is past ±pipeline.MaxValue (2^53) or not a finite
//	    float64 (SumError): no sum becomes infinite. Such an event is set
//	    aside once, naming the field and the sum rules that skip it, as
//	    aggregate sets aside such a value; the other rules still read and
//	    match it (a set-aside record here is one some rule could not read,
//	    not always one no rule read: its reason says which);
//	  - where: comparisons of key, type, id or data.<field> with ==, !=, >,
//	    >=, <, <=, in (...), not in (...), exists(...), combined with &&, ||,
//	    not and parentheses (expr.go). A missing field compares false, a
//	    number past what a float64 holds (1e400) as ±infinity;
//	  - keys (1 to 100) or keyPrefix limit a rule to some keys; with
//	    neither it reads every key (an empty keys list is refused: it
//	    would read every key while naming none); afterMatch is
//	    skipPastLastEvent (default: partial matches that began at or before
//	    the match's last event are dropped, one alert per occurrence) or
//	    noSkip (every combination).
//
// A bad rule is refused with a *RuleError naming the part at fault:
// "pattern[1].where: at column 14: expected a value ...". Rules, the body of
// POST /test, the CEP config and cmd/rules' events files are read by package
// strictjson first: a key twice ("within" given twice), text that is not
// UTF-8, nesting past strictjson.MaxDepth and unknown fields
// ("pattern[0].whre: unknown field; did you mean \"where\"?") are refused
// by path.
//
// # Semantics
//
// Matching is in event time per key, as Flink's: an event is buffered in
// its key's state until the shard's watermark (newest event time minus
// outOfOrderness) passes it, then events run through the rules in event
// time order; an event older than the watermark when it arrives is late.
// Partial matches, buffered events and the matches of the last fold are the
// key's state, run by package keyed with the join's guarantees: fenced by
// sequence numbers, one write per key per batch, producer copies
// suppressed by id, bounded (an event that would take a key's buffered
// events and partial matches past DefaultMaxStateBytes is set aside; a
// buffered event counts at the most matching it can add — a match or an
// event of a partial match for each filter or threshold it hits, a new
// partial match and itself in each partial match it can extend, at most
// 64, for each sequence — so an event many rules match
// fills the budget sooner and one whose matches alone outgrow it is always
// set aside; the matches waiting to be sent do not count, so what is set
// aside never depends on how Lambda cut the batches; a fold whose state
// and matches reach FoldBytes ends early and Lambda resumes at the next
// record; matching never adds more than was counted, so no state item
// passes DefaultMaxStateBytes + FoldBytes and none is refused and retried
// for ever), an outbox so no match is lost or emitted without its state.
// Match ids are "<rule>:" and a hash of the key and the matched events'
// ids.
//
// # Rules at runtime
//
// The function checks its copy of the rules when it is older than
// RefreshInterval (5 s), before a batch or a tick: it reads the rules
// table's version item, which every change bumps in the same transaction,
// and scans the rules only when that moved. A rule applies to the
// events that reach the events stream at or after ActivationDelay (10 s)
// after it was added or enabled, judged by their arrival time, which every
// retry carries unchanged; disabled or deleted, it reads no event arriving
// ActivationDelay after that (the local runner shortens both to 1 s and 2 s
// through TimingEnvVar on detect and rules: its clocks are one machine's).
// Events it read are still matched; its
// absences stop firing once it no longer runs. Deleted rules stay as
// tombstones for TombstoneTTL. Adding again an active rule with the same
// definition (compared parsed) is done already and writes nothing, so a
// retried add is safe; another definition under its id is refused. The index (RuleSet) finds an event's rules
// by type and key, so the cost of an event follows the rules that can
// match it, not all rules.
//
// A rule added later can be run over the past (Backfill): the events
// stream from a timestamp up to when the rule became active, through the
// offline engine (Offline, also behind `cmd/rules test` and the rules
// URL's POST /test, which lists at most MaxTestMatches matches within
// MaxTestAnswerBytes and counts the rest), matches to the
// matches stream with the same ids.
package cep
