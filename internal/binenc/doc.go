// Package binenc holds what the compact binary state codecs (the CEP and
// join operators' key state, the aggregate's keyed window state) share: a
// Reader that takes varints, bytes and length-prefixed runs off a blob and
// remembers the first error, and the Append helpers that write the same
// shapes.
//
// State blobs are read back from DynamoDB items, which anyone with write
// access to the table can change, so a Reader never panics and never
// allocates more than its input holds, whatever the bytes: a truncated
// blob, an overlong varint or a length past the end makes it fail, and
// from then on every read returns a zero value. A decoder reads the whole
// structure without checking after each field and asks Err once at the
// end.
//
// Each codec keeps its own format, version byte and error: NewReader takes
// the error a failed read reports (the codec's sentinel, which callers
// match with errors.Is). Nothing here is a format of its own: the helpers
// write unsigned and zigzag varints (encoding/binary), a length as a
// uvarint followed by that many bytes, and float64 as its 8 IEEE 754 bytes
// little-endian, so moving a codec onto this package leaves its bytes as
// they were.
package binenc
