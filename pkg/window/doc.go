// Package window assigns event times to windows and decides when a window is
// final. It is pure: no AWS, no I/O, no clock of its own (callers pass "now").
//
// A Window is a half-open interval [Start, End) of event time with millisecond
// resolution. Its ID ("2026-11-29T10:41:00.000Z/2026-11-29T10:42:00.000Z")
// is the DynamoDB sort key of a window's item; IDs sort by start.
//
// Four kinds of windows, after the notes' "Types of windows":
//
//   - Tumbling: fixed size, epoch-aligned (plus an optional offset); every
//     event time lies in exactly one window.
//   - Hopping: fixed size, advancing by Advance. Built from tumbling panes of
//     size Advance, as the notes suggest: a record lands in exactly one pane,
//     and a hopping window's value is the merge of its Size/Advance panes.
//   - Sliding: Kafka Streams SlidingWindows semantics: windows of a fixed
//     time difference whose bounds follow the records (both ends inclusive);
//     see Sliding.
//   - Session: per key, records closer than Gap to each other form one
//     session; a record between two sessions merges them; see Session.
//
// A Watermark per shard (max event time seen − allowed out-of-orderness, and
// advanced by processing time when the shard is idle) decides when a window
// is final. Records for a final window are late; a LateRule (drop or correct)
// says what becomes of them, and a Correction carries a corrected window's
// previous value so a consumer can retract it.
package window
