package pipeline

import (
	"strings"

	"github.com/tributary-dev/tributary/pkg/stream"
)

// Text reads p from env as a string, as the grouping key is read: the
// value of key, type or id; a data string's contents; a data number as
// written. The error is a *stream.PoisonRecordError naming the path. The
// join (package join) reads its join key with it.
func (p Path) Text(env *stream.Envelope) (string, error) { return p.str(env) }

// Raw returns the JSON text of the value at a data path ("data.amount" →
// `12.5`, `"NZ"`, `true`, `{...}`), or a *stream.PoisonRecordError naming
// the path when it is missing or not inside an object. For key, type and
// id it returns nil and no error: read those with Text. The text shares
// env.Data's memory. The predicates of package cep read fields with it.
func (p Path) Raw(env *stream.Envelope) ([]byte, error) {
	if p.src != fromData {
		return nil, nil
	}
	if len(p.fields) == 0 {
		if len(env.Data) == 0 {
			return nil, fieldError(env, p, "is missing")
		}
		return env.Data, nil
	}
	return p.raw(env)
}

// IsData reports whether p points into the envelope's data.
func (p Path) IsData() bool { return p.src == fromData }

// Number reads p from env as a number a sum holds without overflow, as an
// aggregate's value is read: finite and within ±MaxValue. The error is a
// *stream.PoisonRecordError naming the path (missing, not a number, not
// finite, or past ±MaxValue: Overflows tells the last apart); -0 reads as
// 0. CEP's sum rules read their values with it.
func (p Path) Number(env *stream.Envelope) (float64, error) { return p.number(env) }

// Overflows reports whether err refused a number for its magnitude: past
// ±MaxValue, where a sum could become infinite (set aside as overflow).
func Overflows(err error) bool { return err != nil && strings.Contains(err.Error(), overflowReason) }
