package tail_test

import (
	"testing"

	"github.com/tributary-dev/tributary/pkg/tail"
)

// A filter reads a record as the consumers do, with the one strict reader:
// a record they set aside (a key twice, a field named twice in another
// case, text that is not UTF-8) matches no -type or -where, where
// encoding/json's reading (the last of two keys) made it look like the
// record the filter asked for.
func TestFilterReadsRecordsAsTheConsumersDo(t *testing.T) {
	where := func(expr string) []tail.Condition {
		c, err := tail.ParseCondition(expr)
		if err != nil {
			t.Fatal(err)
		}
		return []tail.Condition{c}
	}
	for _, tc := range []struct {
		name   string
		data   string
		filter tail.Filter
		want   bool
	}{
		{name: "type, strict JSON", data: `{"type":"click","data":{"page":"/buy"}}`, filter: tail.Filter{Types: []string{"click"}}, want: true},
		{name: "type given twice", data: `{"type":"page_view","type":"click"}`, filter: tail.Filter{Types: []string{"click"}}},
		{name: "where, a field twice", data: `{"type":"click","data":{"page":"/","page":"/buy"}}`, filter: tail.Filter{Where: where("data.page=/buy")}},
		{name: "where, not UTF-8", data: "{\"type\":\"click\",\"data\":{\"page\":\"/buy\",\"x\":\"\xff\"}}", filter: tail.Filter{Where: where("data.page=/buy")}},
		{name: "where, strict JSON", data: `{"type":"click","data":{"page":"/buy"}}`, filter: tail.Filter{Where: where("data.page=/buy")}, want: true},
		{name: "no filter shows every record", data: `{"type":"a","type":"b"}`, filter: tail.Filter{}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &tail.Record{Shard: "shardId-000000000000", SequenceNumber: "1", PartitionKey: "k", Data: []byte(tc.data)}
			if got := tc.filter.Match(r); got != tc.want {
				t.Errorf("Match(%s) = %v, want %v", tc.data, got, tc.want)
			}
		})
	}
}
