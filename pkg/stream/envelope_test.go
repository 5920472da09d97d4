package stream

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

const valid = `{"id":"e-1","type":"page_view","key":"user-42","occurredAt":"2026-11-29T10:41:07.250Z","sentAt":"2026-11-29T10:41:08Z","data":{"path":"/"}}`

func TestUnmarshalAndValidate(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantField string // "" with wantErr means the whole document
		wantErr   bool
		reason    string // substring of the reason
	}{
		{name: "valid", in: valid},
		{name: "valid without data", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z"}`},
		{name: "offset times", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T12:41:07+02:00","sentAt":"2026-11-29T10:41:07Z"}`},
		{name: "not json", in: `{"id":`, wantErr: true, reason: "not valid JSON"},
		{name: "array", in: `[]`, wantErr: true, reason: "must be a JSON object, not an array"},
		// null decodes into no field at all: it is no envelope (unparseable,
		// no field at fault), not one missing its id.
		{name: "null", in: `null`, wantErr: true, reason: "must be a JSON object, not null"},
		{name: "null in white space", in: " null\n", wantErr: true, reason: "must be a JSON object, not null"},
		{name: "a number", in: `7`, wantErr: true, reason: "must be a JSON object, not a number"},
		{name: "id missing", in: `{"type":"t","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "id", reason: "required"},
		{name: "id a number", in: `{"id":7,"type":"t","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "id", reason: "must be a string"},
		{name: "type missing", in: `{"id":"e","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "type"},
		{name: "key missing", in: `{"id":"e","type":"t","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "key"},
		// A blank id, type or key is there in name only: a producer writing
		// to the stream past ingest gets the refusal ingest gives, so every
		// consumer sets the record aside naming the field.
		{name: "id blank", in: `{"id":"  ","type":"t","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "id", reason: "is blank (only white space)"},
		{name: "key of other white space", in: `{"id":"e","type":"t","key":"\u00a0\u2003","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "key", reason: "is blank"},
		{name: "type blank", in: `{"id":"e","type":" ","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "type", reason: "is blank"},
		{name: "white space around an id", in: `{"id":" order 42 ","type":"t","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z"}`},
		{name: "key too long", in: `{"id":"e","type":"t","key":"` + strings.Repeat("k", 257) + `","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "key", reason: "at most 256"},
		{name: "key of 256 multibyte runes", in: `{"id":"e","type":"t","key":"` + strings.Repeat("é", 256) + `","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z"}`},
		{name: "occurredAt missing", in: `{"id":"e","type":"t","key":"k","sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "occurredAt", reason: "required"},
		{name: "occurredAt not RFC 3339", in: `{"id":"e","type":"t","key":"k","occurredAt":"29/11/2026 10:41","sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "occurredAt", reason: "RFC 3339"},
		{name: "occurredAt a number", in: `{"id":"e","type":"t","key":"k","occurredAt":1764412867,"sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "occurredAt", reason: "must be a string, an RFC 3339 time such as 2026-11-29T10:41:07.250Z, not number"},
		{name: "sentAt an object", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":{"s":1}}`, wantErr: true, wantField: "sentAt", reason: "RFC 3339 time such as"},
		{name: "sentAt missing", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "sentAt"},
		{name: "sentAt before occurredAt", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:06Z"}`, wantErr: true, wantField: "sentAt", reason: "before occurredAt"},
		// A clock reset to the epoch is still corrected; years its
		// difference from the server's clock would not fit in a
		// time.Duration are not.
		{name: "occurredAt at the Unix epoch", in: `{"id":"e","type":"t","key":"k","occurredAt":"1970-01-01T00:00:00Z","sentAt":"1970-01-01T00:01:00Z"}`},
		{name: "occurredAt in the year 9999", in: `{"id":"e","type":"t","key":"k","occurredAt":"9999-12-31T23:00:00Z","sentAt":"9999-12-31T23:00:01Z"}`, wantErr: true, wantField: "occurredAt", reason: "outside 1970-01-01T00:00:00Z to 2200-01-01T00:00:00Z"},
		{name: "sentAt from 2200", in: `{"id":"e","type":"t","key":"k","occurredAt":"2199-12-31T23:59:59Z","sentAt":"2200-01-01T00:00:00Z"}`, wantErr: true, wantField: "sentAt", reason: "outside"},
		{name: "occurredAt before 1970", in: `{"id":"e","type":"t","key":"k","occurredAt":"1969-12-31T23:59:59Z","sentAt":"1970-01-01T00:00:00Z"}`, wantErr: true, wantField: "occurredAt", reason: "outside"},
		{name: "receivedAt in the year 9999", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z","receivedAt":"9999-12-31T23:59:30Z"}`, wantErr: true, wantField: "receivedAt", reason: "outside"},
		// The zero time is what an absent time decodes to, but sent it is
		// there: it is outside the range, not missing.
		{name: "occurredAt the zero time", in: `{"id":"e","type":"t","key":"k","occurredAt":"0001-01-01T00:00:00Z","sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "occurredAt",
			reason: "0001-01-01T00:00:00Z is outside 1970-01-01T00:00:00Z to 2200-01-01T00:00:00Z, the times an envelope may hold"},
		{name: "occurredAt the zero time with an offset", in: `{"id":"e","type":"t","key":"k","occurredAt":"0001-01-01T01:00:00+01:00","sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "occurredAt",
			reason: "0001-01-01T01:00:00+01:00 is outside"},
		{name: "occurredAt the zero time with a comma", in: `{"id":"e","type":"t","key":"k","occurredAt":"0001-01-01T00:00:00,000Z","sentAt":"2026-11-29T10:41:07Z"}`, wantErr: true, wantField: "occurredAt",
			reason: "0001-01-01T00:00:00Z is outside"},
		{name: "sentAt the zero time", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":"0001-01-01T00:00:00Z"}`, wantErr: true, wantField: "sentAt", reason: "0001-01-01T00:00:00Z is outside"},
		{name: "receivedAt the zero time", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z","receivedAt":"0001-01-01T00:00:00Z"}`, wantErr: true, wantField: "receivedAt", reason: "0001-01-01T00:00:00Z is outside"},
		// RFC 3339 (section 5.6) allows "t" and "z" in lower case.
		{name: "lowercase t and z", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29t10:41:07.250z","sentAt":"2026-11-29t12:41:08+02:00"}`},
		// It allows second 60 (a leap second), which a Go time cannot hold:
		// refused saying so, and what to send, not "not an RFC 3339 time".
		{name: "leap second", in: `{"id":"e","type":"t","key":"k","occurredAt":"2016-12-31T23:59:60Z","sentAt":"2017-01-01T00:00:01Z"}`, wantErr: true, wantField: "occurredAt",
			reason: `"2016-12-31T23:59:60Z" is a leap second (second 60), which is not accepted (a Go time cannot hold one): send "2016-12-31T23:59:59.999Z", the last millisecond before it, or the next second`},
		{name: "leap second with a fraction and an offset", in: `{"id":"e","type":"t","key":"k","occurredAt":"2016-12-31T18:59:60.5-05:00","sentAt":"2017-01-01T00:00:01Z"}`, wantErr: true, wantField: "occurredAt",
			reason: `send "2016-12-31T18:59:59.999-05:00"`},
		// time.Parse takes offsets up to 99:99 (+23:60 as 24 hours), which
		// RFC 3339 does not and time.Time cannot encode: ingest answered 500.
		{name: "offset +24:00", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-12-07T10:00:00+24:00","sentAt":"2026-12-07T10:00:00Z"}`, wantErr: true, wantField: "occurredAt",
			reason: `"2026-12-07T10:00:00+24:00" has the offset +24:00: RFC 3339 allows hours 00 to 23 and minutes 00 to 59 in an offset`},
		{name: "offset -24:00", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-12-07T10:00:00Z","sentAt":"2026-12-07T10:00:00-24:00"}`, wantErr: true, wantField: "sentAt", reason: "has the offset -24:00"},
		{name: "offset +23:60", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-12-07T10:00:00.5+23:60","sentAt":"2026-12-07T10:00:00Z"}`, wantErr: true, wantField: "occurredAt", reason: "has the offset +23:60"},
		{name: "offset minute 60", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-12-07T10:00:00+05:60","sentAt":"2026-12-07T10:00:00Z"}`, wantErr: true, wantField: "occurredAt", reason: "has the offset +05:60"},
		{name: "offset +23:59", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-12-07T10:00:00+23:59","sentAt":"2026-12-07T10:00:00-23:59"}`},
		{name: "second 61", in: `{"id":"e","type":"t","key":"k","occurredAt":"2016-12-31T23:59:61Z","sentAt":"2017-01-01T00:00:01Z"}`, wantErr: true, wantField: "occurredAt", reason: "is not an RFC 3339 time"},
		{name: "receivedAt bad", in: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:07Z","receivedAt":"yesterday"}`, wantErr: true, wantField: "receivedAt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Envelope
			err := Unmarshal([]byte(tt.in), &e)
			if err == nil {
				err = e.Validate()
			}
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FieldError", err, err)
			}
			if fe.Field != tt.wantField {
				t.Errorf("field = %q, want %q (error %v)", fe.Field, tt.wantField, err)
			}
			if !strings.Contains(fe.Reason, tt.reason) {
				t.Errorf("reason %q does not mention %q", fe.Reason, tt.reason)
			}
		})
	}
}

// TestUnmarshalLowercaseTimes: a time with a lowercase "t" or "z" is the
// same instant, in the same zone, as with the uppercase letters.
func TestUnmarshalLowercaseTimes(t *testing.T) {
	for _, tc := range []struct{ lower, upper string }{
		{"2026-11-29t10:41:07.250z", "2026-11-29T10:41:07.250Z"},
		{"2026-11-29t10:41:07Z", "2026-11-29T10:41:07Z"},
		{"2026-11-29T10:41:07z", "2026-11-29T10:41:07Z"},
		{"2026-11-29t12:41:07+02:00", "2026-11-29T12:41:07+02:00"},
	} {
		doc := func(at string) string {
			return `{"id":"e","type":"t","key":"k","occurredAt":"` + at + `","sentAt":"2026-11-29T23:00:00Z","receivedAt":"` + at + `"}`
		}
		var lower, upper Envelope
		if err := Unmarshal([]byte(doc(tc.lower)), &lower); err != nil {
			t.Errorf("%s: %v", tc.lower, err)
			continue
		}
		if err := UnmarshalExact([]byte(doc(tc.lower)), &lower); err != nil {
			t.Errorf("%s (exact): %v", tc.lower, err)
			continue
		}
		if err := Unmarshal([]byte(doc(tc.upper)), &upper); err != nil {
			t.Fatal(err)
		}
		if d := timeDiff(lower.OccurredAt, upper.OccurredAt); d != "" {
			t.Errorf("%s: %s", tc.lower, d)
		}
		if d := timeDiff(lower.ReceivedAt, upper.ReceivedAt); d != "" {
			t.Errorf("%s: receivedAt %s", tc.lower, d)
		}
	}
}

func TestUnmarshalFields(t *testing.T) {
	var e Envelope
	if err := Unmarshal([]byte(valid), &e); err != nil {
		t.Fatal(err)
	}
	want := Envelope{ID: "e-1", Type: "page_view", Key: "user-42",
		OccurredAt: time.Date(2026, 11, 29, 10, 41, 7, 250e6, time.UTC),
		SentAt:     time.Date(2026, 11, 29, 10, 41, 8, 0, time.UTC)}
	if e.ID != want.ID || e.Type != want.Type || e.Key != want.Key || !e.OccurredAt.Equal(want.OccurredAt) || !e.SentAt.Equal(want.SentAt) || !e.ReceivedAt.IsZero() {
		t.Errorf("got %+v, want %+v", e, want)
	}
	if string(e.Data) != `{"path":"/"}` {
		t.Errorf("data = %s", e.Data)
	}
	// Unmarshal replaces what was there.
	if err := Unmarshal([]byte(`{"id":"x"}`), &e); err != nil {
		t.Fatal(err)
	}
	if e.Key != "" || e.Data != nil || !e.OccurredAt.IsZero() {
		t.Errorf("Unmarshal kept old fields: %+v", e)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	var e Envelope
	if err := Unmarshal([]byte(valid), &e); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "receivedAt") {
		t.Errorf("zero receivedAt was written: %s", b)
	}
	e.ReceivedAt = time.Date(2026, 11, 29, 10, 41, 9, 123456789, time.UTC)
	b, _ = json.Marshal(&e)
	if !strings.Contains(string(b), `"receivedAt":"2026-11-29T10:41:09.123456789Z"`) {
		t.Errorf("receivedAt not RFC3339Nano UTC: %s", b)
	}
	var back Envelope
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.ReceivedAt.Equal(e.ReceivedAt) || back.ID != e.ID || string(back.Data) != string(e.Data) {
		t.Errorf("round trip: got %+v, want %+v", back, e)
	}
}

func TestEventTime(t *testing.T) {
	server := func(h, m, s, ms int) time.Time { return time.Date(2026, 11, 29, h, m, s, ms*1e6, time.UTC) }
	tests := []struct {
		name                     string
		occurred, sent, received time.Time
		want                     time.Time
	}{
		{
			name:     "device clock right",
			occurred: server(10, 41, 7, 0), sent: server(10, 41, 9, 0), received: server(10, 41, 9, 300),
			want: server(10, 41, 7, 300),
		},
		{
			// The phone thinks it is 07:41 while it is 10:41: without the
			// correction the event would land three hours early.
			name:     "device clock three hours behind",
			occurred: server(7, 41, 7, 0), sent: server(7, 41, 10, 0), received: server(10, 41, 10, 500),
			want: server(10, 41, 7, 500),
		},
		{
			// Sent from a queue on the device an hour after it happened,
			// with the device clock two hours ahead.
			name:     "offline for an hour, clock two hours ahead",
			occurred: server(11, 0, 0, 0), sent: server(12, 0, 0, 0), received: server(10, 0, 1, 0),
			want: server(9, 0, 1, 0),
		},
		{
			name:     "device clock in another zone",
			occurred: time.Date(2026, 11, 29, 12, 41, 7, 0, time.FixedZone("EET", 2*3600)), sent: time.Date(2026, 11, 29, 12, 41, 7, 0, time.FixedZone("EET", 2*3600)), received: server(10, 41, 7, 0),
			want: server(10, 41, 7, 0),
		},
		{
			name:     "no receivedAt yet",
			occurred: server(7, 41, 7, 0), sent: server(7, 41, 10, 0),
			want: server(7, 41, 7, 0),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Envelope{OccurredAt: tt.occurred, SentAt: tt.sent, ReceivedAt: tt.received}
			if got := e.EventTime(); !got.Equal(tt.want) {
				t.Errorf("EventTime() = %s, want %s", got.UTC().Format(time.RFC3339Nano), tt.want.Format(time.RFC3339Nano))
			}
		})
	}
}

// TestValidateRefusesUnseenCharacters: an id, type or key holding a
// character that shows as nothing, or that breaks or reorders the line it
// is printed on, is refused naming the field, the code point and its byte
// offset: "\ufeffuser-1" and "user-1" look the same in every log, console
// and listing but are two keys. The joiners that scripts and emoji
// sequences need are kept.
func TestValidateRefusesUnseenCharacters(t *testing.T) {
	for _, tc := range []struct {
		name  string
		field string // the field that holds v
		v     string
		want  string // the whole error; "" means accepted
	}{
		// Category Cc keeps its message.
		{"NUL", "key", "a\x00b", "key: holds control character U+0000 at byte 1; identifiers are printable text"},
		{"DEL", "type", "t\x7f", "type: holds control character U+007F at byte 1; identifiers are printable text"},
		{"C1 next line", "id", "e\u0085", "id: holds control character U+0085 at byte 1; identifiers are printable text"},
		// Zl, Zp: they end the line in log viewers and in JavaScript.
		{"line separator", "key", "user\u20281", "key: holds line separator U+2028 at byte 4; identifiers are printable text"},
		{"paragraph separator", "id", "\u2029e", "id: holds paragraph separator U+2029 at byte 0; identifiers are printable text"},
		// Shown as nothing.
		{"byte order mark", "key", "\ufeffuser-1", "key: holds invisible character U+FEFF at byte 0; identifiers are printable text"},
		{"zero-width space", "key", "user\u200b-1", "key: holds invisible character U+200B at byte 4; identifiers are printable text"},
		{"word joiner", "type", "page\u2060view", "type: holds invisible character U+2060 at byte 4; identifiers are printable text"},
		{"invisible times", "key", "a\u2062b", "key: holds invisible character U+2062 at byte 1; identifiers are printable text"},
		{"soft hyphen", "key", "user\u00ad1", "key: holds invisible character U+00AD at byte 4; identifiers are printable text"},
		{"deprecated inhibit symmetric swapping", "key", "k\u206a", "key: holds invisible character U+206A at byte 1; identifiers are printable text"},
		{"interlinear annotation anchor", "key", "k\ufff9", "key: holds invisible character U+FFF9 at byte 1; identifiers are printable text"},
		// Bidirectional controls reorder what is shown ("Trojan Source").
		{"left-to-right mark", "key", "k\u200e", "key: holds bidirectional control U+200E at byte 1; identifiers are printable text"},
		{"right-to-left mark", "key", "k\u200f", "key: holds bidirectional control U+200F at byte 1; identifiers are printable text"},
		{"Arabic letter mark", "key", "k\u061c", "key: holds bidirectional control U+061C at byte 1; identifiers are printable text"},
		{"left-to-right embedding", "key", "k\u202a", "key: holds bidirectional control U+202A at byte 1; identifiers are printable text"},
		{"right-to-left override", "id", "order-\u202e1-tfel", "id: holds bidirectional control U+202E at byte 6; identifiers are printable text"},
		{"left-to-right isolate", "key", "k\u2066", "key: holds bidirectional control U+2066 at byte 1; identifiers are printable text"},
		{"pop directional isolate", "key", "k\u2069", "key: holds bidirectional control U+2069 at byte 1; identifiers are printable text"},
		{"the first of two is named", "key", "\u00e9\u200b\ufeff", "key: holds invisible character U+200B at byte 2; identifiers are printable text"},
		// Kept: what text in other scripts, and emoji, need.
		{"Persian with a zero-width non-joiner", "key", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", ""},
		{"Devanagari with a zero-width joiner", "key", "\u0915\u094d\u200d\u0937", ""},
		{"emoji family joined by ZWJ", "key", "\U0001F468\u200d\U0001F469\u200d\U0001F467", ""},
		{"flag of England (tag characters)", "key", "\U0001F3F4\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F", ""},
		{"Arabic number sign before digits", "key", "\u0600\u0661\u0662", ""},
		{"no-break space inside", "id", "order\u00a042", ""},
		{"combining accent", "key", "e\u0301", ""},
		{"CJK", "type", "\u6ce8\u6587", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Envelope{ID: "e-1", Type: "page_view", Key: "user-1", OccurredAt: time.Date(2026, 11, 29, 10, 41, 7, 0, time.UTC)}
			e.SentAt = e.OccurredAt
			switch tc.field {
			case "id":
				e.ID = tc.v
			case "type":
				e.Type = tc.v
			case "key":
				e.Key = tc.v
			}
			err := e.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%s %q refused: %v", tc.field, tc.v, err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || err.Error() != tc.want {
				t.Fatalf("%s %q: error %v; want *FieldError %q", tc.field, tc.v, err, tc.want)
			}
		})
	}
}
