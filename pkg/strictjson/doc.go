// Package strictjson is the one reader of JSON that comes from outside the
// process: request bodies (ingest, the commands API, the rules API), and
// files and parameters a user writes (pipeline, join and CEP configs). A
// document means one thing to every reader or it is refused:
//
//   - well-formed JSON (RFC 8259), exactly one value;
//   - valid UTF-8 everywhere, in raw bytes and in \u escapes: a lone
//     surrogate (\ud800 without its low half, or a low half alone) is
//     refused, where encoding/json would store U+FFFD without a word;
//   - no object with the same key twice, at any depth (parsers disagree on
//     which copy wins: the stored copy and the running one could differ);
//   - arrays and objects nested at most MaxDepth deep, and the document at
//     most Options.MaxBytes long;
//   - decoded into a Go value (Decode), every object key must be a field of
//     the value's type, spelt exactly as its json tag (no case folding), and
//     every value of the field's JSON type.
//
// Every refusal is an *Error naming the JSON path of the value at fault
// ("holder.nmae: unknown field; did you mean \"name\"? (known: name,
// email)", "pattern[1].within: duplicate object key \"within\"") with a
// reason of bounded length, so an API can answer it as a 400 and a config
// loader as an error naming the field.
//
// Check validates a document; Decode validates it and decodes it into a Go
// value; Split validates a request body of one object or an array of them
// and returns the elements without copying, with errors naming the element
// by its index (ingest's hot path: one pass, no allocation per value).
// UnknownParameter and RepeatedParameter hold a request's query
// parameters to the same rule: one not taken, or given twice, is refused
// by name, and CompressedBody refuses a body labelled with a
// Content-Encoding (it is read as sent). WholeNumber reads a value kept raw as a whole number in a field's own
// range, refusing it quoting that range. Nearest is the did-you-mean hint, shared with the readers that keep their
// own field tables (package pipeline).
package strictjson
