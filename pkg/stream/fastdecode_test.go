package stream

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin for the local-zone test, whatever the machine has

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// decodeStd is the encoding/json path of Unmarshal, the fast path's
// reference: the same steps with the same helpers.
func decodeStd(data []byte, e *Envelope) error {
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return jsonFieldError(err)
	}
	if got := strictjson.TypeOf(data); got != "an object" {
		return &FieldError{Reason: notAnObject(got)}
	}
	*e = Envelope{ID: w.ID, Type: w.Type, Key: w.Key}
	var err error
	if e.OccurredAt, err = parseTime("occurredAt", w.OccurredAt); err != nil {
		return err
	}
	if e.SentAt, err = parseTime("sentAt", w.SentAt); err != nil {
		return err
	}
	if e.ReceivedAt, err = parseTime("receivedAt", w.ReceivedAt); err != nil {
		return err
	}
	if len(w.Data) > 0 && !bytes.Equal(w.Data, []byte("null")) {
		e.Data = w.Data
	}
	return nil
}

// prefilled is what the envelope holds before decoding, so that a decoder
// that forgets to replace a field is caught.
func prefilled() Envelope {
	at := time.Date(2001, 2, 3, 4, 5, 6, 7, time.FixedZone("OLD", 3600))
	return Envelope{ID: "old-id", Type: "old-type", Key: "old-key", OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`"old"`)}
}

// compareDecoders decodes in with Unmarshal and with the encoding/json path
// and describes the first difference in error or in any field ("" if none).
// fast says whether Unmarshal took the fast path.
func compareDecoders(in []byte) (diff string, fast bool) {
	want, got, probe := prefilled(), prefilled(), prefilled()
	wantErr := decodeStd(in, &want)
	gotErr := Unmarshal(in, &got)
	fast, _ = decodeFast(in, &probe)
	if !reflect.DeepEqual(gotErr, wantErr) {
		return fmt.Sprintf("error %#v, encoding/json path %#v", gotErr, wantErr), fast
	}
	return envelopeDiff(&got, &want), fast
}

func envelopeDiff(got, want *Envelope) string {
	switch {
	case got.ID != want.ID:
		return fmt.Sprintf("ID %q, want %q", got.ID, want.ID)
	case got.Type != want.Type:
		return fmt.Sprintf("Type %q, want %q", got.Type, want.Type)
	case got.Key != want.Key:
		return fmt.Sprintf("Key %q, want %q", got.Key, want.Key)
	case (got.Data == nil) != (want.Data == nil) || !bytes.Equal(got.Data, want.Data):
		return fmt.Sprintf("Data %q (nil %t), want %q (nil %t)", got.Data, got.Data == nil, want.Data, want.Data == nil)
	}
	for _, f := range []struct {
		name      string
		got, want time.Time
	}{{"OccurredAt", got.OccurredAt, want.OccurredAt}, {"SentAt", got.SentAt, want.SentAt}, {"ReceivedAt", got.ReceivedAt, want.ReceivedAt}} {
		if d := timeDiff(f.got, f.want); d != "" {
			return f.name + ": " + d
		}
	}
	return ""
}

// timeDiff compares instant, zone name and offset, and which Location the
// time is in (UTC, time.Local or a fixed zone).
func timeDiff(got, want time.Time) string {
	gn, go_ := got.Zone()
	wn, wo := want.Zone()
	locKind := func(t time.Time) string {
		switch t.Location() {
		case time.UTC:
			return "UTC"
		case time.Local:
			return "Local"
		}
		return "other"
	}
	if !got.Equal(want) || gn != wn || go_ != wo || got.Location().String() != want.Location().String() || locKind(got) != locKind(want) || got.IsZero() != want.IsZero() {
		return fmt.Sprintf("%s (zone %q %d, %s %s), want %s (zone %q %d, %s %s)",
			got.Format(time.RFC3339Nano), gn, go_, locKind(got), got.Location(), want.Format(time.RFC3339Nano), wn, wo, locKind(want), want.Location())
	}
	return ""
}

const benchRecord = `{"id":"evt-1","type":"order_placed","key":"customer-1","occurredAt":"2026-11-29T10:41:00.05Z","sentAt":"2026-11-29T10:41:01.05Z","receivedAt":"2026-11-29T10:41:01.25Z","data":{"total":1.5,"currency":"EUR"}}`

func TestFastDecodeTable(t *testing.T) {
	const times = `"occurredAt":"2026-11-29T10:41:07.250Z","sentAt":"2026-11-29T10:41:08Z"`
	tests := []struct {
		name string
		in   string
		fast bool // the fast path decodes it (rather than falling back)
		want *Envelope
	}{
		{name: "benchmark record", in: benchRecord, fast: true},
		{name: "existing valid", in: valid, fast: true, want: &Envelope{ID: "e-1", Type: "page_view", Key: "user-42",
			OccurredAt: time.Date(2026, 11, 29, 10, 41, 7, 250e6, time.UTC), SentAt: time.Date(2026, 11, 29, 10, 41, 8, 0, time.UTC), Data: json.RawMessage(`{"path":"/"}`)}},
		{name: "keys in another order", in: `{"data":[1,2],"sentAt":"2026-11-29T10:41:08Z","key":"k","receivedAt":"2026-11-29T10:41:09Z","type":"t","occurredAt":"2026-11-29T10:41:07Z","id":"i"}`, fast: true,
			want: &Envelope{ID: "i", Type: "t", Key: "k", OccurredAt: time.Date(2026, 11, 29, 10, 41, 7, 0, time.UTC), SentAt: time.Date(2026, 11, 29, 10, 41, 8, 0, time.UTC), ReceivedAt: time.Date(2026, 11, 29, 10, 41, 9, 0, time.UTC), Data: json.RawMessage(`[1,2]`)}},
		{name: "whitespace everywhere", in: " \t\r\n{ \"id\" :\n\"i\" ,\t\"data\" : { \"a\" : [ 1 , { } , [ ] ] } ,\"type\":\"t\"\r\n} \n", fast: true,
			want: &Envelope{ID: "i", Type: "t", Data: json.RawMessage(`{ "a" : [ 1 , { } , [ ] ] }`)}},
		{name: "empty object", in: `{}`, fast: true, want: &Envelope{}},
		{name: "unknown fields of every kind", in: `{"a":1,"b":-0.5e+10,"c":"x\"y","d":true,"e":false,"f":null,"g":[{"h":[[]]}],"id":"i","z":{"\u0069d":"not id"}}`, fast: true, want: &Envelope{ID: "i"}},
		{name: "escapes", in: `{"id":"a\"b\\c\/d\be\ff\ng\rh\ti","key":"\u00e9\u65e5\ud83d\ude00"}`, fast: true, want: &Envelope{ID: "a\"b\\c/d\be\ff\ng\rh\ti", Key: "é日😀"}},
		{name: "lone surrogates", in: `{"id":"\ud800x\udc00\ud800\u0041\ud800\ud800\udc00"}`, fast: true, want: &Envelope{ID: "\uFFFDx\uFFFD\uFFFDA\uFFFD\U00010000"}},
		{name: "raw unicode", in: `{"id":"é日😀","type":"t"}`, fast: true, want: &Envelope{ID: "é日😀", Type: "t"}},
		{name: "invalid UTF-8 replaced", in: "{\"id\":\"a\xffb\xed\xa0\x80\",\"type\":\"\xc3\"}", fast: true, want: &Envelope{ID: "a\uFFFDb\uFFFD\uFFFD\uFFFD", Type: "\uFFFD"}},
		{name: "invalid UTF-8 kept in data", in: "{\"data\":\"\xff\"}", fast: true, want: &Envelope{Data: json.RawMessage("\"\xff\"")}},
		{name: "null strings keep the earlier value", in: `{"id":"a","id":null,"type":null}`, fast: true, want: &Envelope{ID: "a"}},
		{name: "null time resets an earlier one", in: `{"occurredAt":"not a time","occurredAt":null}`, fast: true, want: &Envelope{}},
		{name: "null data", in: `{"data":{"a":1},"data":null}`, fast: true, want: &Envelope{}},
		{name: "empty time is zero", in: `{"sentAt":""}`, fast: true, want: &Envelope{}},
		{name: "duplicate keys: last wins", in: `{"id":"a","id":"b","data":1,"data":"two"}`, fast: true, want: &Envelope{ID: "b", Data: json.RawMessage(`"two"`)}},
		{name: "key case folded", in: `{"ID":"a","Type":"t","KEY":"k","OCCURREDAT":"2026-11-29T10:41:07Z","Data":2}`, fast: true,
			want: &Envelope{ID: "a", Type: "t", Key: "k", OccurredAt: time.Date(2026, 11, 29, 10, 41, 7, 0, time.UTC), Data: json.RawMessage(`2`)}},
		{name: "exact name wins whatever the order", in: `{"id":"exact","ID":"folded"}`, fast: true, want: &Envelope{ID: "folded"}},
		{name: "long s folds to s: fallback", in: `{"ſentAt":"2026-11-29T10:41:07Z"}`, want: &Envelope{SentAt: time.Date(2026, 11, 29, 10, 41, 7, 0, time.UTC)}},
		{name: "Kelvin sign folds to k: fallback", in: "{\"\u212aey\":\"k\"}", want: &Envelope{Key: "k"}},
		{name: "other non-ASCII key is unknown", in: `{"ïd":"x","id":"i"}`, fast: true, want: &Envelope{ID: "i"}},
		{name: "escaped key", in: `{"\u0069d":"i","\u0054ype":"t","\n":1}`, fast: true, want: &Envelope{ID: "i", Type: "t"}},
		{name: "escaped key folding to a field by Unicode: fallback", in: `{"\u017fentAt":"2026-11-29T10:41:07Z"}`, want: &Envelope{SentAt: time.Date(2026, 11, 29, 10, 41, 7, 0, time.UTC)}},
		{name: "escaped key with a lone surrogate", in: `{"i\ud800d":"x","id":"i"}`, fast: true, want: &Envelope{ID: "i"}},
		{name: "time with offset", in: `{"occurredAt":"2026-11-29T12:41:07.5+02:00","sentAt":"2026-11-29T05:11:07-05:30"}`, fast: true},
		{name: "time with 12 fraction digits", in: `{"occurredAt":"2026-11-29T10:41:07.123456789999Z"}`, fast: true,
			want: &Envelope{OccurredAt: time.Date(2026, 11, 29, 10, 41, 7, 123456789, time.UTC)}},
		{name: "escaped time", in: `{"occurredAt":"2026-11-29\u005410:41:07Z"}`, fast: true, want: &Envelope{OccurredAt: time.Date(2026, 11, 29, 10, 41, 7, 0, time.UTC)}},
		{name: "one-digit hour (time.Parse accepts it)", in: `{"occurredAt":"2026-11-29T1:41:07Z"}`, fast: true, want: &Envelope{OccurredAt: time.Date(2026, 11, 29, 1, 41, 7, 0, time.UTC)}},
		{name: "comma fraction (time.Parse accepts it)", in: `{"occurredAt":"2026-11-29T10:41:07,5Z"}`, fast: true, want: &Envelope{OccurredAt: time.Date(2026, 11, 29, 10, 41, 7, 5e8, time.UTC)}},
		{name: "offset +24:00 (time.Parse accepts it)", in: `{"occurredAt":"2026-11-29T10:41:07+24:00"}`, fast: true},
		{name: "leap day", in: `{"occurredAt":"2028-02-29T00:00:00Z"}`, fast: true},
		{name: "large data", in: `{"data":"` + strings.Repeat("x", 100000) + `","id":"` + strings.Repeat("y", 1000) + `"}`, fast: true},
		{name: "data nested 400 deep", in: `{"data":` + strings.Repeat("[", 400) + strings.Repeat("]", 400) + `}`, fast: true},

		// Errors: every one is the encoding/json path's own.
		{name: "bad time", in: `{"id":"i","occurredAt":"2026-11-29T10:41:07Z","sentAt":"yesterday"}`, fast: true},
		{name: "not a leap day", in: `{"occurredAt":"2026-02-29T00:00:00Z"}`, fast: true},
		{name: "lowercase z", in: `{"occurredAt":"2026-11-29T10:41:07z"}`, fast: true},
		{name: "second 60", in: `{"occurredAt":"2026-11-29T23:59:60Z"}`, fast: true},
		{name: "id a number", in: `{"id":7}`},
		{name: "time an object", in: `{"sentAt":{}}`},
		{name: "top-level array", in: `[]`},
		{name: "top-level null", in: `null`},
		{name: "empty input", in: ``},
		{name: "trailing comma", in: `{"id":"i",}`},
		{name: "trailing garbage", in: `{"id":"i"} x`},
		{name: "two objects", in: `{}{}`},
		{name: "control character in string", in: "{\"id\":\"a\nb\"}"},
		{name: "bad escape", in: `{"id":"\x"}`},
		{name: "short unicode escape", in: `{"id":"\u12"}`},
		{name: "leading zero", in: `{"data":01}`},
		{name: "bare minus", in: `{"data":-}`},
		{name: "dot without digits", in: `{"data":1.}`},
		{name: "exponent without digits", in: `{"data":1e+}`},
		{name: "literal run on", in: `{"data":truex}`},
		{name: "single quotes", in: `{'id':'i'}`},
		{name: "unclosed data", in: `{"data":{"a":[1,2}}`},
		{name: "missing colon", in: `{"id" "i"}`},
		{name: "byte order mark", in: "\ufeff{}"},
		{name: "nested past the fast path's depth", in: `{"data":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`},
		{name: "nested past encoding/json's depth", in: `{"data":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			diff, fast := compareDecoders(in)
			if diff != "" {
				t.Errorf("Unmarshal differs from the encoding/json path: %s", diff)
			}
			if fast != tt.fast {
				t.Errorf("fast path taken = %t, want %t", fast, tt.fast)
			}
			if tt.want != nil {
				var got Envelope
				if err := Unmarshal(in, &got); err != nil {
					t.Fatal(err)
				}
				if d := envelopeDiff(&got, tt.want); d != "" {
					t.Error(d)
				}
			}
		})
	}
}

// TestFastDecodeLocalZone: an offset that is time.Local's at that instant
// gives a time in time.Local, as time.Parse does; any other a fixed zone.
func TestFastDecodeLocalZone(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	saved := time.Local
	time.Local = berlin
	t.Cleanup(func() { time.Local = saved })

	for _, at := range []string{
		"2026-11-29T10:41:07+01:00", // Berlin winter time: Local
		"2026-07-29T10:41:07+02:00", // summer time: Local
		"2026-07-29T10:41:07+01:00", // winter offset in summer: fixed zone
		"2026-11-29T10:41:07+00:00",
		"2026-11-29T10:41:07+05:45",
		"2026-11-29T10:41:07Z",
	} {
		in := []byte(`{"occurredAt":"` + at + `"}`)
		diff, fast := compareDecoders(in)
		if diff != "" || !fast {
			t.Errorf("%s: fast path %t, difference: %s", at, fast, diff)
		}
	}
	var e Envelope
	if err := Unmarshal([]byte(`{"occurredAt":"2026-07-29T10:41:07+02:00"}`), &e); err != nil {
		t.Fatal(err)
	}
	if e.OccurredAt.Location() != time.Local {
		t.Errorf("location %v, want time.Local", e.OccurredAt.Location())
	}
}

// TestFastDecodeTimes compares the fast path with time.Parse over many
// generated time strings, valid and not.
func TestFastDecodeTimes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var fast int
	for range 20000 {
		s := randomTime(rng)
		in := []byte(`{"receivedAt":` + jsonQuote(s) + `}`)
		diff, _ := compareDecoders(in)
		if diff != "" {
			t.Fatalf("receivedAt %q: %s", s, diff)
		}
		if _, ok := parseRFC3339([]byte(s)); ok {
			fast++
		}
	}
	if fast < 5000 {
		t.Errorf("only %d of 20000 times took the hand-written parser", fast)
	}
}

// TestFastDecodeRandom compares Unmarshal with the encoding/json path on
// generated envelopes: keys in any order, duplicates, unknown and case-folded
// keys, escapes, unicode and invalid UTF-8, offsets and fractions, nested
// data, whitespace, nulls and wrong types, and broken documents.
func TestFastDecodeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 5000
	var fast, errs int
	for i := range n {
		in := randomEnvelope(rng)
		if i%5 == 0 {
			in = mutate(rng, in)
		}
		diff, f := compareDecoders(in)
		if diff != "" {
			t.Fatalf("input %q: %s", in, diff)
		}
		if f {
			fast++
		}
		var e Envelope
		if Unmarshal(in, &e) != nil {
			errs++
		}
	}
	t.Logf("%d of %d decoded by the fast path, %d errors", fast, n, errs)
	if fast < n*6/10 {
		t.Errorf("only %d of %d inputs took the fast path", fast, n)
	}
	if errs < n/20 {
		t.Errorf("only %d of %d inputs were errors: the error paths are not exercised", errs, n)
	}
}

// TestFastDecodeAllocs: one allocation for ID, Type and Key together and
// one for Data.
func TestFastDecodeAllocs(t *testing.T) {
	in := []byte(benchRecord)
	var e Envelope
	allocs := testing.AllocsPerRun(100, func() {
		if err := Unmarshal(in, &e); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("Unmarshal allocates %.0f times per record, want at most 2", allocs)
	}
}

// TestFastDecodeDataOwnsItsBytes: Data is a copy; changing the input after
// decoding does not change the envelope, and appending to Data does not
// change the strings.
func TestFastDecodeDataOwnsItsBytes(t *testing.T) {
	in := []byte(`{"data":[1],"id":"abc"}`)
	var e Envelope
	if err := Unmarshal(in, &e); err != nil {
		t.Fatal(err)
	}
	copy(in, bytes.Repeat([]byte("x"), len(in)))
	_ = append(e.Data, "zzzzzzzzzzzzzzz"...)
	if string(e.Data) != "[1]" || e.ID != "abc" {
		t.Errorf("envelope changed with its input: Data %q, ID %q", e.Data, e.ID)
	}
}

// TestSpecialBytes: the word-at-a-time check finds the first byte that is
// not a plain string byte, whatever the bytes around it.
func TestSpecialBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	firstSpecial := func(w []byte) int {
		for i, c := range w {
			if !plainStringByte[c] {
				return i
			}
		}
		return 8
	}
	check := func(w []byte) {
		m := specialBytes(binary.LittleEndian.Uint64(w))
		got := 8
		if m != 0 {
			got = bits.TrailingZeros64(m) / 8
		}
		if want := firstSpecial(w); got != want {
			t.Fatalf("% x: first special byte at %d, want %d", w, got, want)
		}
	}
	w := make([]byte, 8)
	for pos := range 8 {
		for c := range 256 {
			for range 20 {
				for i := range w {
					w[i] = byte(rng.IntN(256))
					if i < pos {
						w[i] = byte(0x20 + rng.IntN(0x60))
						for w[i] == '"' || w[i] == '\\' {
							w[i] = byte(0x20 + rng.IntN(0x60))
						}
					}
				}
				w[pos] = byte(c)
				check(w)
			}
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		valid, benchRecord, `{}`, `null`, `[]`, ``, `{"id":7}`,
		`{"id":"a\"b\\c\/d\be\ff\ng\rh\ti\u00e9\ud83d\ude00\ud800"}`,
		"{\"id\":\"a\xffb\",\"data\":\"\xff\"}",
		`{"ID":"a","ſentAt":"2026-11-29T10:41:07Z","Key":"k","\u0069d":"i"}`,
		`{"occurredAt":"2026-11-29T12:41:07.123456789123+02:00","sentAt":"2026-11-29T1:41:07,5Z","receivedAt":"2026-11-29T10:41:07+24:00"}`,
		`{"occurredAt":"2026-02-29T00:00:00Z"}`, `{"occurredAt":null,"sentAt":""}`,
		`{"data":{"a":[1,-2.5e-3,true,false,null,"s",{}]},"x":[[{}]]}`,
		`{"data":01}`, `{"id":"i",}`, `{"id":"i"} x`,
	} {
		f.Add([]byte(s))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		f.Add(randomEnvelope(rng))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if diff, _ := compareDecoders(in); diff != "" {
			t.Errorf("input %q: %s", in, diff)
		}
	})
}

func BenchmarkUnmarshal(b *testing.B) {
	in := []byte(benchRecord)
	for _, bm := range []struct {
		name   string
		decode func([]byte, *Envelope) error
	}{{"Unmarshal", Unmarshal}, {"encoding-json", decodeStd}} {
		b.Run(bm.name, func(b *testing.B) {
			var e Envelope
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if err := bm.decode(in, &e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The generators below write JSON by hand so that whitespace, escapes and
// invalid UTF-8 are theirs to choose.

func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

func ws(rng *rand.Rand) string {
	if rng.IntN(4) != 0 {
		return ""
	}
	return pick(rng, " ", "\n", "\t", "\r\n  ", "  ")
}

// jsonQuote writes s as a JSON string, escaping only what JSON requires,
// and leaving invalid UTF-8 as it is.
func jsonQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// randomStringLiteral is a JSON string literal mixing plain text, every
// escape, raw unicode, surrogates (paired and lone) and invalid UTF-8.
func randomStringLiteral(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteByte('"')
	for range rng.IntN(8) {
		b.WriteString(pick(rng,
			"a", "evt-42", "customer-7", "Z", " ", "é", "日本", "😀", "\u2028", "\x7f",
			`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u0041`, `\u00e9`, `\u0000`, `\uFFFD`, `\uD83D\uDE00`, `\ud800`, `\udc00`, `\ud800\u0041`, `\ud800\ud800\udc00`,
			"\xff", "\xc3", "\xed\xa0\x80", "\xef\xbf\xbd", "\xc5\xbf", "\xe2\x84\xaa"))
	}
	b.WriteByte('"')
	return b.String()
}

func randomTime(rng *rand.Rand) string {
	if rng.IntN(10) == 0 {
		return pick(rng, "", "yesterday", "2026-11-29", "2026-11-29T10:41:07", "2026-11-29 10:41:07Z", "2026-11-29T10:41:07z",
			"2026-11-29T10:41:07.Z", "2026-11-29T10:41:07+0200", "2026-11-29T10:41:07+02", "+2026-11-29T10:41:07Z",
			"2026-1-29T10:41:07Z", "2026-11-29T10:4:07Z", "2026-11-29T10:41:07.5.5Z", "２026-11-29T10:41:07Z", "2026-11-29T10:41:07Z ")
	}
	year := pick(rng, 2026, 2024, 2000, 1900, 2100, 1970, 1, 0, 9999, rng.IntN(10000))
	month, day, hour, minute, sec := 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60)
	if rng.IntN(4) == 0 { // edges, in range and out
		month = pick(rng, month, 0, 2, 12, 13)
		day = pick(rng, day, 29, 30, 31, 0, 32)
		hour = pick(rng, hour, 0, 23, 24)
		minute = pick(rng, minute, 59, 60)
		sec = pick(rng, sec, 59, 60)
	}
	hourText := fmt.Sprintf("%02d", hour)
	if rng.IntN(20) == 0 && hour < 10 {
		hourText = fmt.Sprint(hour) // time.Parse takes one digit
	}
	s := fmt.Sprintf("%04d-%02d-%02dT%s:%02d:%02d", year, month, day, hourText, minute, sec)
	if rng.IntN(2) == 0 {
		digits := pick(rng, 1, 2, 3, 3, 6, 9, 1+rng.IntN(12))
		frac := make([]byte, digits)
		for i := range frac {
			frac[i] = byte('0' + rng.IntN(10))
		}
		s += pick(rng, ".", ".", ".", ".", ".", ",") + string(frac)
	}
	switch rng.IntN(4) {
	case 0, 1:
		s += "Z"
	default:
		hh, mm := pick(rng, rng.IntN(24), 0, 1, 2, 5), pick(rng, 0, 0, 30, 45)
		if rng.IntN(4) == 0 {
			hh, mm = pick(rng, hh, 23, 24, 25), pick(rng, mm, rng.IntN(60), 59, 60, 61)
		}
		s += fmt.Sprintf("%s%02d:%02d", pick(rng, "+", "-"), hh, mm)
	}
	return s
}

// randomTimeLiteral is a time as a JSON string, most often a valid one as
// producers write it, sometimes with an escape.
func randomTimeLiteral(rng *rand.Rand) string {
	var q string
	if rng.IntN(5) == 0 {
		q = jsonQuote(randomTime(rng))
	} else {
		at := time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)*pick(rng, int64(0), 1)).In(pick(rng, time.UTC, time.FixedZone("", 2*3600), time.FixedZone("", -(5*3600+1800))))
		q = jsonQuote(at.Format(pick(rng, time.RFC3339Nano, time.RFC3339, "2006-01-02T15:04:05.000Z07:00")))
	}
	if rng.IntN(15) == 0 {
		q = strings.Replace(q, "T", `\u0054`, 1)
	}
	return q
}

func randomNumber(rng *rand.Rand) string {
	return pick(rng, "0", "-0", "1", "-12", "3.25", "1e9", "-2.5E-3", "6.02e+23", "123456789012345678901234567890", fmt.Sprint(rng.Int64()))
}

func randomValue(rng *rand.Rand, depth int) string {
	k := rng.IntN(8)
	if depth > 3 {
		k = rng.IntN(5)
	}
	switch k {
	case 0:
		return "null"
	case 1:
		return pick(rng, "true", "false")
	case 2:
		return randomNumber(rng)
	case 3, 4:
		return randomStringLiteral(rng)
	case 5:
		var parts []string
		for range rng.IntN(4) {
			parts = append(parts, ws(rng)+randomValue(rng, depth+1)+ws(rng))
		}
		return "[" + strings.Join(parts, ",") + ws(rng) + "]"
	default:
		var parts []string
		for range rng.IntN(4) {
			parts = append(parts, ws(rng)+randomStringLiteral(rng)+ws(rng)+":"+ws(rng)+randomValue(rng, depth+1)+ws(rng))
		}
		return "{" + strings.Join(parts, ",") + ws(rng) + "}"
	}
}

func randomKey(rng *rand.Rand, name string) string {
	if rng.IntN(30) != 0 {
		return `"` + name + `"`
	}
	switch rng.IntN(4) {
	case 0:
		return `"` + strings.ToUpper(name) + `"`
	case 1:
		return `"` + strings.ToUpper(name[:1]) + name[1:] + `"`
	case 2: // folds to the name only with Unicode folding
		return `"` + strings.NewReplacer("s", "ſ", "k", "\u212a").Replace(name) + `"`
	default:
		return `"\u` + fmt.Sprintf("%04x", name[0]) + name[1:] + `"`
	}
}

func randomEnvelope(rng *rand.Rand) []byte {
	type member struct{ key, value string }
	var ms []member
	for _, name := range fieldNames {
		if rng.IntN(8) == 0 {
			continue
		}
		for range 1 + rng.IntN(4)/3 { // sometimes twice: the last wins
			var v string
			switch {
			case rng.IntN(15) == 0:
				v = "null"
			case rng.IntN(100) == 0:
				v = randomValue(rng, 3) // often the wrong type
			case name == "data":
				v = randomValue(rng, 0)
			case strings.HasSuffix(name, "At"):
				v = randomTimeLiteral(rng)
			default:
				v = randomStringLiteral(rng)
			}
			ms = append(ms, member{randomKey(rng, name), v})
		}
	}
	for range rng.IntN(3) {
		ms = append(ms, member{pick(rng, `"source"`, `"v"`, `"ïd"`, `"dat"`, `"ids"`, `"\n"`, randomStringLiteral(rng)), randomValue(rng, 1)})
	}
	rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	var b strings.Builder
	b.WriteString(ws(rng) + "{")
	for i, m := range ms {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(ws(rng) + m.key + ws(rng) + ":" + ws(rng) + m.value + ws(rng))
	}
	b.WriteString(ws(rng) + "}" + ws(rng))
	return []byte(b.String())
}

// mutate breaks a document in one of the ways documents break.
func mutate(rng *rand.Rand, in []byte) []byte {
	out := bytes.Clone(in)
	i := rng.IntN(len(out) + 1)
	switch rng.IntN(5) {
	case 0:
		return out[:i]
	case 1:
		if i < len(out) {
			return append(out[:i], out[i+1:]...)
		}
		return out
	case 2:
		c := pick(rng, byte('"'), '\\', ',', ':', '{', '}', '[', ']', '0', 'x', ' ', 0, 0xff)
		return append(out[:i], append([]byte{c}, in[i:]...)...)
	case 3:
		return append(out, pick(rng, " x", "{}", ",", "\x00")...)
	default:
		if i < len(out) {
			out[i] = byte(rng.IntN(256))
		}
		return out
	}
}
