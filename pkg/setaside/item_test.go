package setaside

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/limits"
)

// hostileItem is an item of the given kind whose every string attribute
// but the keys is 100 KB, whose list attributes hold 100 such strings and
// whose data is over MaxDataBytes: what a careless or hostile caller could
// build. Fields are filled by reflection, so an attribute added to Item
// later is filled too, and fails TestBoundedItemFits until bound knows it.
func hostileItem(kind string) Item {
	big := strings.Repeat("é", 50<<10) // 100 KB, two bytes a rune: cuts must respect them
	it := Item{}
	v := reflect.ValueOf(&it).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.String:
			f.SetString(big)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			list := make([]string, 100)
			for j := range list {
				list[j] = big
			}
			f.Set(reflect.ValueOf(list))
		}
	}
	it.Source = strings.Repeat("s", maxSourceBytes)
	it.SequenceNumber = strings.Repeat("9", maxSequenceBytes)
	it.Kind = kind
	it.Data = make([]byte, MaxDataBytes+1)
	it.ExpiresAt = 1<<62 - 1
	found := 1 << 30
	it.RecordsFound, it.BatchSize, it.DataBytes, it.DataChunks = &found, 1<<30, 1<<30, 1<<30
	it.Rule, it.IDTaken = &Rule{Holds: big, Within: maxRuleBound}, true
	return it
}

// standInSize is an item's size as moto counts it (binary data by its
// base64 length), which is at least DynamoDB's.
func standInSize(av map[string]types.AttributeValue) int {
	n := limits.ItemSize(av)
	if b, ok := av["data"].(*types.AttributeValueMemberB); ok {
		n += base64.StdEncoding.EncodedLen(len(b.Value)) - len(b.Value)
	}
	return n
}

// TestBoundedItemFits: whatever a caller puts in an item, bound and split
// make items DynamoDB (and the stand-in) accept; only keys out of bounds
// are refused, as ErrUnwritable.
func TestBoundedItemFits(t *testing.T) {
	for _, kind := range []string{ItemSetAside, ItemRecord, ItemMissing, strings.Repeat("k", 100<<10)} {
		t.Run(kind[:min(len(kind), 16)], func(t *testing.T) {
			it := hostileItem(kind)
			if err := it.bound(); err != nil {
				t.Fatal(err)
			}
			// The most functions an item keeps, each entry at its bounds.
			it.Functions = map[string]Entry{}
			for i := range MaxFunctions {
				by := it
				by.Function = fmt.Sprintf("%03d%s", i, it.Function)
				name, e := by.entry()
				if len(name) > maxFunctionNameBytes || len(e.Reason) > maxEntryReasonBytes || len(e.Field) > maxEntryFieldBytes {
					t.Fatalf("entry %d: name of %d bytes, reason %d, field %d: over their bounds", i, len(name), len(e.Reason), len(e.Field))
				}
				it.Functions[name] = e
			}
			head, chunks := split(it)
			for _, x := range append([]Item{head}, chunks...) {
				av, err := attributevalue.MarshalMap(x)
				if err != nil {
					t.Fatal(err)
				}
				if err := limits.CheckItem(av); err != nil {
					t.Errorf("item %.20s: %v", x.SequenceNumber, err)
				}
				if n := standInSize(av); n > 405_000 {
					t.Errorf("item %.20s is %d bytes as the stand-in counts, over its 405,000", x.SequenceNumber, n)
				}
			}
			if len(head.Redacted) != maxRedacted || head.Redacted[maxRedacted-1] != "…(93 more)" {
				t.Errorf("redacted: %d entries, last %.40q", len(head.Redacted), head.Redacted[len(head.Redacted)-1])
			}
			if !strings.HasSuffix(head.FailedAt, "…(truncated)") || len(head.FailedAt) > maxTimeBytes {
				t.Errorf("failedAt %q: want it cut to %d bytes, marked", head.FailedAt, maxTimeBytes)
			}
			if head.Rule == nil || len(head.Rule.Holds) > maxTextBytes {
				t.Errorf("rule %.40v: want it kept, its kind cut to %d bytes", head.Rule, maxTextBytes)
			}
		})
	}
}

// TestBoundDropsARuleDynamoDBCannotStore: a rule whose bound is no number
// DynamoDB stores (NaN, ±Inf, past 1e125, below 1e-130, negative) would
// make every write of the record fail, and the record come again for
// good: the rule goes, the record is set aside without it.
func TestBoundDropsARuleDynamoDBCannotStore(t *testing.T) {
	for _, within := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, 1e126, 1e-200, -1} {
		it := Item{Source: "s", SequenceNumber: "1", Kind: ItemSetAside, Rule: NumberRule(within)}
		if err := it.bound(); err != nil {
			t.Fatal(err)
		}
		if it.Rule != nil {
			t.Errorf("a rule within ±%g was kept", within)
		}
	}
	it := Item{Source: "s", SequenceNumber: "1", Kind: ItemSetAside, Rule: NumberRule(1 << 53)}
	if err := it.bound(); err != nil || it.Rule == nil || *it.Rule != *NumberRule(1 << 53) {
		t.Errorf("a rule within ±2^53: %v, kept as %+v; want it kept as it is", err, it.Rule)
	}
}

func TestBoundRefusesKeysOutOfBounds(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Item)
		want string
	}{
		{"no source", func(it *Item) { it.Source = "" }, "no source"},
		{"no sequence number", func(it *Item) { it.SequenceNumber = "" }, "no sequence number"},
		{"source over the partition key limit", func(it *Item) { it.Source += "s" }, "over 2048"},
		{"sequence number over the sort key limit", func(it *Item) { it.SequenceNumber += "9" }, "over 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := hostileItem(ItemMissing)
			tt.edit(&it)
			err := it.bound()
			if !errors.Is(err, ErrUnwritable) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("bound = %v, want ErrUnwritable saying %q", err, tt.want)
			}
			if err != nil && len(err.Error()) > 300 {
				t.Errorf("error is %d bytes: it must not repeat the key whole", len(err.Error()))
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789abcdefghijklmnopq", 20, "012345…(truncated)"}, // the mark is 14 bytes
		{"ééééééééééé", 16, "é…(truncated)"},                      // not through a rune
		{"0123456789abcdefghijklmnopq", 3, "…(truncated)"},        // n below the mark: the mark, no panic
		{"0123456789abcdefghijklmnopq", -5, "…(truncated)"},       // even negative
	}
	for _, tt := range tests {
		if got := truncate(tt.s, tt.n); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
