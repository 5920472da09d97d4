package cep

import (
	"testing"
)

// FuzzParseRule: any definition either is refused with a *RuleError or
// parses into a rule whose stored source parses again to the same rule;
// nothing panics (rules come from users, through the URL and cmd/rules).
func FuzzParseRule(f *testing.F) {
	for _, doc := range randomRules {
		f.Add(doc)
	}
	f.Add(`{"id":"x","pattern":[{"begin":"a","type":"t","where":"not (data.a.b in (1, 'x', true, null)) or exists(key)"}]}`)
	f.Fuzz(func(t *testing.T, doc string) {
		r, err := ParseRule([]byte(doc))
		if err != nil {
			if _, ok := err.(*RuleError); !ok {
				t.Fatalf("error %T %v, want *RuleError", err, err)
			}
			return
		}
		again, err := ParseRule(r.Source)
		if err != nil || again.ID != r.ID || again.Kind != r.Kind || len(again.Steps) != len(r.Steps) {
			t.Fatalf("the stored source %s does not parse back: %v", r.Source, err)
		}
	})
}

// FuzzDecodeState: a state item's blob, whatever it holds, decodes or is
// refused; it never panics.
func FuzzDecodeState(f *testing.F) {
	f.Add(encodeCEP(nil, &cepState{ord: 2, pending: []pendingEv{{t: 1, id: "e", typ: "A", hits: []hit{{rule: "r", mask: 1}}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeCEP(b)
		if err == nil {
			if _, err := decodeCEP(encodeCEP(nil, st)); err != nil {
				t.Fatalf("re-encoding a decoded state: %v", err)
			}
		}
	})
}
