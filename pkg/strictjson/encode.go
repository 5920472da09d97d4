package strictjson

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping: '<', '>' and '&' stay one
// byte each instead of six ("\u003c"), so an answer, a record or an error
// text full of markup costs what it holds and reads as it was written. There
// is no trailing newline. (A value whose own MarshalJSON calls json.Marshal
// escapes them all the same: setaside.MarshalJSON undoes that too.)
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
