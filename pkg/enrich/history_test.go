package enrich

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/limits"
)

func fence(n string) string { return strings.Repeat("0", 64-len(n)) + n }

func TestHistoryAsOfAndPrune(t *testing.T) {
	img := func(s string) json.RawMessage { return json.RawMessage(`{"plan":"` + s + `"}`) }
	var h history
	for _, c := range []change{
		{seq: fence("30"), version: "3", image: img("team")},
		{seq: fence("10"), version: "1", image: img("free")},
		{seq: fence("20"), version: "10", image: img("pro")}, // 10 > 3 as numbers, not as strings
		{seq: fence("40"), version: "11", image: nil},
	} {
		h.add(c)
	}
	if h.add(change{seq: fence("10"), version: "1"}) {
		t.Error("add of a sequence number already held = true, want false")
	}
	tests := []struct {
		at          string
		wantVersion string
		wantFound   bool
	}{
		{"5", "", false},
		{"10", "", false}, // strictly before the position
		{"11", "1", true},
		{"21", "10", true},
		{"31", "10", true}, // version 3 after 10 never regresses
		{"41", "11", true},
	}
	for _, tc := range tests {
		c, ok := h.asOf(fence(tc.at))
		if ok != tc.wantFound || c.version != tc.wantVersion {
			t.Errorf("asOf(%s) = %q, %v; want %q, %v", tc.at, c.version, ok, tc.wantVersion, tc.wantFound)
		}
	}
	dropped := h.prune(fence("35"))
	if len(dropped) != 2 || dropped[0] != fence("10") || dropped[1] != fence("30") {
		t.Errorf("prune dropped %v, want sequences 10 and 30 (20 is the best before 35, 40 is after it)", dropped)
	}
	for _, at := range []string{"35", "41"} {
		before, _ := h.asOf(fence(at))
		if at == "35" && before.version != "10" || at == "41" && before.version != "11" {
			t.Errorf("after prune asOf(%s) = %q", at, before.version)
		}
	}
}

func TestParseVersion(t *testing.T) {
	tests := []struct {
		raw, want, err string
	}{
		{`7`, "7", ""},
		{`"0042"`, "42", ""},
		{`0`, "0", ""},
		{`null`, "", "is required"},
		{``, "", "is required"},
		{`-1`, "", "not a non-negative integer"},
		{`1.5`, "", "not a non-negative integer"},
	}
	for _, tc := range tests {
		got, err := parseVersion(json.RawMessage(tc.raw))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseVersion(%s) error %v, want %q", tc.raw, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseVersion(%s) = %q, %v; want %q", tc.raw, got, err, tc.want)
		}
	}
}

func TestExtendTailBounds(t *testing.T) {
	h := New(nil, nil, "t", "s", WithTailLimits(3, 1<<20))
	var add []tailChange
	for _, s := range []string{"1", "2", "3", "4", "5"} {
		add = append(add, tailChange{key: "k", change: change{seq: fence(s), version: s}})
	}
	got := h.extendTail(tail{}, add, fence("6"))
	if len(got.changes) != 3 || got.changes[0].seq != fence("3") || got.from != fence("2") || got.last != fence("6") {
		t.Errorf("tail = from %s last %s, %d changes starting %s; want the newest 3, from 2, last 6",
			got.from, got.last, len(got.changes), got.changes[0].seq)
	}
}

func TestStoredKeyBytesIsDynamoDBsCount(t *testing.T) {
	img := json.RawMessage(`{"plan":"pro","bio":"<b>ünïcode</b>"}`)
	hist := history{
		{seq: "0000000000000000000000000000000000000000000000000000000000000100", version: "7", image: img},
		{seq: "0000000000000000000000000000000000000000000000000000000000000200", version: "12345678901234567890"},
	}
	first := "0000000000000000000000000000000000000000000000000000000000000150"
	item := map[string]ddbtypes.AttributeValue{
		attrPK:    &ddbtypes.AttributeValueMemberS{Value: keyPrefix + "user-42"},
		attrFloor: &ddbtypes.AttributeValueMemberS{Value: first},
	}
	for _, c := range hist {
		av, err := attributevalue.Marshal(storedEntry{Version: c.version, Image: imagePtr(c.image)})
		if err != nil {
			t.Fatal(err)
		}
		item[entryPre+c.seq] = av
	}
	if got, want := storedKeyBytes("user-42", first, hist), limits.ItemSize(item); got != want {
		t.Errorf("storedKeyBytes = %d, DynamoDB counts %d", got, want)
	}
}

// TestProjectedItemSizeIsTheItemsSize: the size a batch's walk keeps for a
// key item as it adds the batch's changes one at a time is the size of the
// stored history with all of them added and pruned at the batch's first
// record, measured afresh (what the budget check measured for each change
// before, at a cost quadratic in a key's changes in one batch), also when
// the batch repeats changes the stored history has (a retry whose key
// write went through).
func TestProjectedItemSizeIsTheItemsSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 300 {
		var stored history
		for range rng.IntN(6) {
			c := change{seq: fence(strconv.Itoa(10 + rng.IntN(90))), version: strconv.Itoa(1 + rng.IntN(50))}
			if rng.IntN(4) > 0 {
				c.image = json.RawMessage(`{"p":"` + strings.Repeat("x", rng.IntN(300)) + `"}`)
			}
			stored.add(c)
		}
		first := fence(strconv.Itoa(40 + rng.IntN(40)))
		item := newProjectedItem("user-42", first, stored)
		var added []change
		for range rng.IntN(40) {
			c := change{seq: fence(strconv.Itoa(40 + rng.IntN(200))), version: strconv.Itoa(1 + rng.IntN(99))}
			if c.seq < first {
				continue // a batch's changes are at or after its first record
			}
			if rng.IntN(5) > 0 {
				c.image = json.RawMessage(`{"p":"` + strings.Repeat("y", rng.IntN(500)) + `"}`)
			}
			want := stored.clone()
			for _, a := range append(slices.Clone(added), c) {
				want.add(a)
			}
			want.prune(first)
			if got, want := item.with(c), storedKeyBytes("user-42", first, want); got != want {
				t.Fatalf("round %d: the item with change %s is %d bytes by the walk, %d measured afresh", round, c.seq, got, want)
			}
			item.add(c)
			added = append(added, c)
		}
	}
}
