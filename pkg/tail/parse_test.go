package tail_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/tail"
)

func TestParsePosition(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in      string
		want    tail.Position
		wantErr string
	}{
		{in: "latest", want: tail.Latest},
		{in: "LATEST", want: tail.Latest},
		{in: "trim_horizon", want: tail.Position{Type: types.ShardIteratorTypeTrimHorizon}},
		{in: "10m", want: tail.Position{Type: types.ShardIteratorTypeAtTimestamp, Time: now.Add(-10 * time.Minute)}},
		{in: "2026-12-02T09:30:00Z", want: tail.Position{Type: types.ShardIteratorTypeAtTimestamp, Time: now.Add(-30 * time.Minute)}},
		{in: "2026-12-02T10:30:00+01:00", want: tail.Position{Type: types.ShardIteratorTypeAtTimestamp, Time: now.Add(-30 * time.Minute)}},
		{in: "49590338271490256608559692538361571095921575989136588898", want: tail.Position{Type: types.ShardIteratorTypeAtSequenceNumber, Sequence: "49590338271490256608559692538361571095921575989136588898"}},
		{in: "", wantErr: "is empty"},
		{in: "-5m", wantErr: "must be positive"},
		{in: "9000h", wantErr: "at most 8760h0m0s ago"},
		// A duration too large for Go's time (past 2562047h) is a duration all the same.
		{in: "99999999h", wantErr: "99999999h: at most 8760h0m0s ago"},
		{in: "1e3h", wantErr: `"1e3h" is none of`},
		{in: "2026-12-02T11:00:00Z", wantErr: "in the future"},
		{in: "2020-01-01T00:00:00Z", wantErr: "at most 8760h0m0s ago"},
		{in: "yesterday", wantErr: `"yesterday" is none of latest, trim_horizon`},
		{in: strings.Repeat("1", 129), wantErr: "at most 128 digits"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := tail.ParsePosition(tc.in, now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Type != tc.want.Type || !got.Time.Equal(tc.want.Time) || got.Sequence != tc.want.Sequence {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseCondition(t *testing.T) {
	for _, tc := range []struct {
		in      string
		path    string
		value   string
		not     bool
		wantErr string
	}{
		{in: "data.page=/home", path: "data.page", value: "/home"},
		{in: "$.data.items[0].sku=a=b", path: "data.items[0].sku", value: "a=b"},
		{in: "type!=click", path: "type", value: "click", not: true},
		{in: "m[1][2]=", path: "m[1][2]", value: ""},
		{in: "data.page", wantErr: "want path=value"},
		{in: "=x", wantErr: "the path is empty"},
		{in: "data..page=x", wantErr: "an empty step"},
		{in: "items[x]=1", wantErr: "an index is a whole number"},
		{in: "items[0=1", wantErr: "an index is written [n]"},
		{in: "a]b=1", wantErr: "an index is written [n]"},
		{in: strings.Repeat("a.", 40) + "a=1", wantErr: "at most 32 steps"},
		{in: "a=" + strings.Repeat("x", 1100), wantErr: "at most 1024 bytes"},
		// A value typed in another encoding (Latin-1) can match no field:
		// records are JSON, which is UTF-8.
		{in: "data.city=M\xfcnchen", wantErr: "not valid UTF-8"},
		{in: "data.st\xe4dt=x", wantErr: "not valid UTF-8"},
	} {
		t.Run(tc.in[:min(len(tc.in), 30)], func(t *testing.T) {
			c, err := tail.ParseCondition(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tail.PathString(c.Path) != tc.path || c.Value != tc.value || c.Not != tc.not {
				t.Errorf("got path %q value %q not %v", tail.PathString(c.Path), c.Value, c.Not)
			}
		})
	}
}

func TestPrinter(t *testing.T) {
	rec := func(data string) *tail.Record {
		return &tail.Record{Shard: "shardId-000000000000", SequenceNumber: "7", PartitionKey: "user 1",
			Arrived: time.Date(2026, 12, 2, 10, 0, 0, 123e6, time.UTC), Data: []byte(data)}
	}
	for _, tc := range []struct {
		name      string
		format    tail.Format
		max       int
		data      string
		want      string
		truncated int
	}{
		{name: "pretty JSON", format: tail.Pretty, data: `{"id":"e1","data":{"n":1}}`,
			want: "── shardId-000000000000  7  key \"user 1\"  arrived 2026-12-02T10:00:00.123Z  26 bytes\n{\n  \"id\": \"e1\",\n  \"data\": {\n    \"n\": 1\n  }\n}\n\n"},
		{name: "pretty, not JSON", format: tail.Pretty, data: "a\tb",
			want: "── shardId-000000000000  7  key \"user 1\"  arrived 2026-12-02T10:00:00.123Z  3 bytes\n(not JSON) \"a\\tb\"\n\n"},
		{name: "pretty, cut at max bytes", format: tail.Pretty, max: 4, data: `{"id":"e1"}`, truncated: 1,
			want: "── shardId-000000000000  7  key \"user 1\"  arrived 2026-12-02T10:00:00.123Z  11 bytes\n{\"id\n… 7 more bytes not shown (-max-bytes 4)\n\n"},
		{name: "pretty, indented past max bytes", format: tail.Pretty, max: 12, data: `[[[[1]]]]`, truncated: 1,
			want: "── shardId-000000000000  7  key \"user 1\"  arrived 2026-12-02T10:00:00.123Z  9 bytes\n[\n  [\n    [\n\n… 37 more bytes of the shown text not shown (the record's 9 bytes shown indented or quoted; -max-bytes 12)\n\n"},
		{name: "pretty, quoted past max bytes", format: tail.Pretty, max: 16, data: "\x01\x02\x03\x04\x05", truncated: 1,
			want: "── shardId-000000000000  7  key \"user 1\"  arrived 2026-12-02T10:00:00.123Z  5 bytes\n(not JSON) \"\\x01\n… 17 more bytes of the shown text not shown (the record's 5 bytes shown indented or quoted; -max-bytes 16)\n\n"},
		// A record past the limit is shown cut; what the terminal would
		// take as a control sequence (here one that sets the window's
		// title) is quoted, as a short record's is, never written as it is.
		{name: "pretty, cut, with control characters", format: tail.Pretty, max: 16, data: "\x1b]0;pwned\x07 and more text", truncated: 1,
			want: "── shardId-000000000000  7  key \"user 1\"  arrived 2026-12-02T10:00:00.123Z  24 bytes\n(quoted) \"\\x1b]0;pwned\\a\"\n… 14 more bytes not shown (-max-bytes 16)\n\n"},
		{name: "pretty, cut, plain lines kept", format: tail.Pretty, max: 8, data: "{\n\t\"a\": 1}", truncated: 1,
			want: "── shardId-000000000000  7  key \"user 1\"  arrived 2026-12-02T10:00:00.123Z  10 bytes\n{\n\t\"a\": \n… 2 more bytes not shown (-max-bytes 8)\n\n"},
		{name: "raw", format: tail.Raw, data: `{"id": "e1"}`, want: "{\"id\": \"e1\"}\n"},
		{name: "raw, cut", format: tail.Raw, max: 3, data: "abcdef", want: "abc\n", truncated: 1},
		{name: "json, cut", format: tail.JSONLines, max: 3, data: `{"id":"e1"}`, truncated: 1,
			want: `{"shard":"shardId-000000000000","sequenceNumber":"7","partitionKey":"user 1","arrived":"2026-12-02T10:00:00.123Z","bytes":11,"truncated":true,"dataText":"{\"i"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			p := &tail.Printer{W: &b, Format: tc.format, MaxBytes: tc.max}
			if err := p.Print(rec(tc.data)); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%q\nwant\n%q", b.String(), tc.want)
			}
			if p.Truncated != tc.truncated {
				t.Errorf("truncated %d, want %d", p.Truncated, tc.truncated)
			}
		})
	}
	// Deep nesting under the limit, as ingest allows it (depth 64): what
	// is printed stays near the limit, where indenting it printed 64
	// times the record.
	var b bytes.Buffer
	data := strings.Repeat("[", 63) + strings.Repeat("0,", 30000) + "0" + strings.Repeat("]", 63)
	p := &tail.Printer{W: &b, Format: tail.Pretty}
	if err := p.Print(rec(data)); err != nil {
		t.Fatal(err)
	}
	if b.Len() > tail.DefaultMaxBytes+512 || p.Truncated != 1 {
		t.Errorf("a %d-byte record printed %d bytes (truncated %d); want at most -max-bytes and a line", len(data), b.Len(), p.Truncated)
	}
}
