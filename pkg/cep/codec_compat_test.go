package cep

import (
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
)

// storedCEPState is a state as version 1 of the encoding writes it: items
// already in DynamoDB hold these bytes, so the encoding must not change
// while the version stays 1.
const storedCEPState = "010401410272310272320142ac020280a0abfef9620302653300020103000000000000f83f02818002000000000000d0bf09040003000101010d01026531000d01020000000000000040010202016e0000000000000840010265300302c8010059f3f8c21f6ea501"

func TestStoredStateStillDecodes(t *testing.T) {
	st := &cepState{ord: 300,
		pending: []pendingEv{
			{t: 1_700_000_000_000, ord: 3, id: "e3", typ: "A", hits: []hit{{rule: "r1", mask: 3, value: 1.5}, {rule: "r2", mask: 0x8001, value: -0.25}}},
			{t: -5, ord: 4, id: "", typ: "B"},
		},
		partials: []partial{{rule: "r1", next: 1, start: -7, events: []evRef{{id: "e1", typ: "A", t: -7, ord: 1, step: 2, v: 2}}}},
		out:      []Match{{Rule: "r2", Kind: Sequence, Absent: "n", Sum: 3, Events: []evRef{{id: "e0", typ: "B", t: 1, ord: 200, v: 1e-300}}}}}
	if got := hex.EncodeToString(encodeCEP(nil, st)); got != storedCEPState {
		t.Fatalf("encoding changed:\n got %s\nwant %s", got, storedCEPState)
	}
	b, _ := hex.DecodeString(storedCEPState)
	got, err := decodeCEP(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", st) {
		t.Fatalf("stored state decodes as\n%+v\nwant\n%+v", got, st)
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(b[:len(b):len(b)], 0), {cepStateVersion, 0xff}} {
		if _, err := decodeCEP(bad); !errors.Is(err, errEncoding) {
			t.Errorf("decodeCEP(%x): %v, want errEncoding", bad, err)
		}
	}
}
