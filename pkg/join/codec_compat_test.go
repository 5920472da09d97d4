package join

import (
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
)

// storedJoinState is a state as version 1 of the encoding writes it: items
// already in DynamoDB hold these bytes, so the encoding must not change
// while the version stays 1.
const storedJoinState = "01ac020302090301730a7b2271223a2261227d018aa0abfef962040163010414c801000001c0a90703010401030402c801030404bfa9070202"

func TestStoredStateStillDecodes(t *testing.T) {
	st := &keyState{next: 300, recs: []rec{
		{n: 3, side: SideLeft, t: -5, id: "s", data: []byte(`{"q":"a"}`), matched: true},
		{n: 4, side: SideRight, t: 1_700_000_000_000, id: "c", data: []byte{}},
		{n: 200, side: SideLeft, t: 1_700_000_000_010, id: "", closed: true},
	}, rates: []rate{{start: 60_000, left: 3, matched: 1}},
		out: []outRef{{kind: outJoined, l: 3, r: 4}, {kind: outLeftOnly, l: 200}, {kind: outRightOnly, r: 4}, {kind: outRate, rate: rate{start: -60_000, left: 2, matched: 2}}}}
	if got := hex.EncodeToString(encodeState(nil, st)); got != storedJoinState {
		t.Fatalf("encoding changed:\n got %s\nwant %s", got, storedJoinState)
	}
	b, _ := hex.DecodeString(storedJoinState)
	got, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", st) {
		t.Fatalf("stored state decodes as\n%+v\nwant\n%+v", got, st)
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(b[:len(b):len(b)], 0), {stateVersion, 0xff}} {
		if _, err := decodeState(bad); !errors.Is(err, errEncoding) {
			t.Errorf("decodeState(%x): %v, want errEncoding", bad, err)
		}
	}
}
