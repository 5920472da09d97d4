package ingest

import (
	"bytes"
	"fmt"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// MaxDepth is how deeply arrays and objects may nest in a request body,
// counting the top-level array (package strictjson's bound, which every
// JSON entry point shares).
const MaxDepth = strictjson.MaxDepth

// utf8BOM is the byte order mark some tools put before UTF-8 text; JSON
// (RFC 8259) has none.
var utf8BOM = []byte("\xef\xbb\xbf")

// gzipMagic starts every gzip stream (RFC 1952).
var gzipMagic = []byte{0x1f, 0x8b}

// bodyError is a request body the scanner refuses: elem is the index of the
// event it is in (-1: the body itself, outside any event), field the JSON
// path inside that event ("" for the event as a whole).
type bodyError struct {
	status int // 400, or 413 for too many events
	elem   int
	field  string
	reason string
}

// splitBody checks a whole request body in one pass before anything is
// decoded (strictjson.Split: well-formed JSON, valid UTF-8 everywhere with
// lone surrogates refused, no object with the same key twice, nesting at
// most MaxDepth) and returns its events without copying: the elements of a
// top-level array, or the body itself when it is one object. maxEvents
// bounds the array's length (a longer one is a 413).
func splitBody(body []byte, maxEvents int) ([][]byte, *bodyError) {
	raws, err := strictjson.Split(body, maxEvents, "events")
	if err == nil {
		return raws, nil
	}
	if bytes.HasPrefix(body, gzipMagic) {
		// Sent without Content-Encoding (which is refused on its own).
		return nil, &bodyError{status: 400, elem: -1, reason: "starts with the gzip magic bytes (1F 8B): the body must be sent uncompressed; send the JSON itself"}
	}
	be := &bodyError{status: 400, elem: err.Index, field: err.Path, reason: err.Reason}
	switch err.Kind {
	case strictjson.Empty:
		be.reason = "is empty; send one envelope or a JSON array of envelopes"
	case strictjson.EmptyArray:
		be.reason = "is an empty array; send at least one envelope"
	case strictjson.TooMany:
		be.status = 413
		be.reason = fmt.Sprintf("holds more than %d events; send at most %d per request", maxEvents, maxEvents)
	case strictjson.NotContainer:
		be.reason = "must be one envelope (a JSON object) or a JSON array of envelopes"
		if bytes.HasPrefix(body, utf8BOM) {
			be.reason = "starts with a UTF-8 byte order mark (EF BB BF): send the JSON without it"
		}
	}
	return nil, be
}
