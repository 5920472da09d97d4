package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// KeyError says that the part of a payload a path names could not be taken:
// the payload is not JSON, or the path leads nowhere or to null.
type KeyError struct {
	// Path is the configured JSON path (Config.KeyPath or ValidationPath).
	Path string
	// Reason says what is wrong.
	Reason string
	// absent: the path leads to no member, or to null (not: the payload is
	// not JSON, or the path goes through a value it cannot enter).
	absent bool
}

func (e *KeyError) Error() string {
	if e.Path == "" {
		return "idempotency: payload: " + e.Reason
	}
	return fmt.Sprintf("idempotency: payload field %s: %s", e.Path, e.Reason)
}

// hashPath returns the hex SHA-256 of the canonical JSON (object keys sorted,
// numbers as written) of the part of payload that path names. An empty path
// names the whole payload; a payload that is not JSON is then hashed as its
// bytes. Path segments are separated by dots; a segment that is a number
// indexes an array; a string holding a JSON document is decoded when more
// segments follow it (so "body.orderId" reaches into an SQS body, as
// Powertools' powertools_json(body).orderId does).
func hashPath(payload []byte, path string) (string, error) {
	v, err := selectPath(payload, path)
	if err != nil {
		return "", err
	}
	var canon []byte
	if raw, ok := v.(rawBytes); ok {
		canon = raw
	} else if canon, err = json.Marshal(v); err != nil {
		return "", &KeyError{Path: path, Reason: err.Error()}
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// validationHash is hashPath for Config.ValidationPath: a part that is
// missing or null is a value to compare like any other (hashed as null),
// not an error — an envelope need not have data, and a payload without it
// must still run, and still differ from one with it.
func validationHash(payload []byte, path string) (string, error) {
	h, err := hashPath(payload, path)
	var ke *KeyError
	if errors.As(err, &ke) && ke.absent {
		sum := sha256.Sum256([]byte("null"))
		return hex.EncodeToString(sum[:]), nil
	}
	return h, err
}

// rawBytes is a payload that is not JSON, hashed as it is.
type rawBytes []byte

func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

func selectPath(payload []byte, path string) (any, error) {
	v, err := decodeJSON(payload)
	if err != nil {
		if path == "" {
			return rawBytes(payload), nil
		}
		return nil, &KeyError{Path: path, Reason: "payload is not JSON: " + err.Error()}
	}
	if path == "" {
		return v, nil
	}
	segs := strings.Split(path, ".")
	for i, seg := range segs {
		if s, ok := v.(string); ok {
			inner, err := decodeJSON([]byte(s))
			if err != nil {
				return nil, &KeyError{Path: path, Reason: fmt.Sprintf("%s is a string that is not a JSON document", strings.Join(segs[:i], "."))}
			}
			v = inner
		}
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[seg]
			if !ok {
				return nil, &KeyError{Path: path, Reason: "missing", absent: true}
			}
			v = next
		case []any:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(c) {
				return nil, &KeyError{Path: path, Reason: fmt.Sprintf("%q is not an index of an array of %d", seg, len(c))}
			}
			v = c[n]
		default:
			return nil, &KeyError{Path: path, Reason: fmt.Sprintf("%s is not an object or array", strings.Join(append([]string{"payload"}, segs[:i]...), "."))}
		}
	}
	if v == nil {
		return nil, &KeyError{Path: path, Reason: "is null", absent: true}
	}
	return v, nil
}
