package strictjson

import (
	"fmt"
	"strings"
)

// CompressedBody reports whether a request's headers name a
// Content-Encoding other than identity, with a message for the 415 (RFC
// 9110 section 15.5.16) that names the header and says what to send: the
// JSON entry points read the body as sent, and a compressed body (or one
// labelled so) would otherwise be read as JSON and refused as "not valid
// JSON: unexpected byte 0x1f", or taken although its sender said it was
// compressed. Header names are matched in any case, as HTTP's are.
func CompressedBody(headers map[string]string) (message string, compressed bool) {
	enc, ok := headers["content-encoding"]
	if !ok {
		for k, v := range headers {
			if strings.EqualFold(k, "Content-Encoding") {
				enc, ok = v, true
				break
			}
		}
	}
	if !ok || isIdentity(enc) {
		return "", false
	}
	return fmt.Sprintf("Content-Encoding: %s: the body must be sent uncompressed (identity); send it without Content-Encoding", Cut(enc, 64)), true
}

// isIdentity reports whether a Content-Encoding header value names no
// coding but identity (or none at all).
func isIdentity(enc string) bool {
	for c := range strings.SplitSeq(enc, ",") {
		if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
			return false
		}
	}
	return true
}
