package stream

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// lambdaEncode is how lambda.Start encodes a handler's response.
func lambdaEncode(tb testing.TB, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		tb.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func failures(ids ...string) []events.KinesisBatchItemFailure {
	var fs []events.KinesisBatchItemFailure
	for _, id := range ids {
		fs = append(fs, events.KinesisBatchItemFailure{ItemIdentifier: id})
	}
	return fs
}

var responseStrings = []string{
	"", "49601189658422359378836298521827638475320189012309704721", "a\"b\\c", "<&>", "\b\f\n\r\t\x00\x1f\x7f",
	"é日本😀", "\u2028\u2029", "\xff", "a\xc3", "\xed\xa0\x80", "\xef\xbf\xbd", "p|tumbling-1m|20261129T1041|user-42",
}

// TestKinesisResponseMatchesEncodingJSON: the appended bytes are the
// runtime's encoding of the same response.
func TestKinesisResponseMatchesEncodingJSON(t *testing.T) {
	for _, fs := range [][]events.KinesisBatchItemFailure{nil, {}, failures("1"), failures(responseStrings...)} {
		r := events.KinesisEventResponse{BatchItemFailures: fs}
		if got, want := AppendKinesisEventResponse(nil, &r), lambdaEncode(t, r); !bytes.Equal(got, want) {
			t.Errorf("KinesisEventResponse %v:\n got %s\nwant %s", fs, got, want)
		}
	}
	big := map[string]string{}
	for i, s := range responseStrings {
		big[s] = responseStrings[len(responseStrings)-1-i]
		big["k"+strconv.Itoa(i)] = s
	}
	for _, state := range []map[string]string{nil, {}, {"wm": "AAE=", "seq": "12"}, big} {
		for _, fs := range [][]events.KinesisBatchItemFailure{nil, {}, failures("7", "\xff")} {
			r := events.KinesisTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: state}, BatchItemFailures: fs}
			if got, want := AppendKinesisTimeWindowEventResponse(nil, &r), lambdaEncode(t, r); !bytes.Equal(got, want) {
				t.Errorf("KinesisTimeWindowEventResponse:\n got %s\nwant %s", got, want)
			}
		}
	}
}

// TestAppendJSONString: every single byte and rune edge quotes as
// encoding/json quotes it.
func TestAppendJSONString(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	var inputs []string
	for c := range 256 {
		inputs = append(inputs, string([]byte{byte(c)}), "ab"+string([]byte{byte(c)})+"cd")
	}
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pick(rng, append(responseStrings, "x", "\xe2\x80", "\xe2\x80\xa8", "\xf0\x9f", string(rune(rng.IntN(0x110000))))...))
		}
		inputs = append(inputs, b.String())
	}
	for _, s := range inputs {
		if got, want := appendJSONString(nil, s), lambdaEncode(t, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	}
}

func FuzzKinesisResponse(f *testing.F) {
	f.Add("wm", "AAE=", "49601189658422359378836298521827638475320189012309704721")
	f.Add("\xff<", "\u2028\n", "")
	f.Fuzz(func(t *testing.T, k, v, id string) {
		r := events.KinesisTimeWindowEventResponse{
			TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: map[string]string{k: v, v: k, "seq": id}},
			BatchItemFailures:                 failures(id, k),
		}
		if got, want := AppendKinesisTimeWindowEventResponse(nil, &r), lambdaEncode(t, r); !bytes.Equal(got, want) {
			t.Errorf("got %s\nwant %s", got, want)
		}
	})
}

// BenchmarkKinesisResponse encodes the response of a carried interval (200
// partial aggregates in the state, 2 failures) and of a per-batch
// invocation, with the appenders and as lambda.Start does.
func BenchmarkKinesisResponse(b *testing.B) {
	state := map[string]string{"wm": "AAECAwQFBgcICQ==", "seq": "49601189658422359378836298521827638475320189010000000100"}
	for k := range 200 {
		state["p|tumbling-1m|20261129T1041|user-"+strconv.Itoa(k)] = "49601189658422359378836298521827638475320189010000000001 49601189658422359378836298521827638475320189010000000100 AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSYnKCkqKywtLi8w"
	}
	window := &events.KinesisTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: state},
		BatchItemFailures: failures("49601189658422359378836298521827638475320189010000000042", "49601189658422359378836298521827638475320189010000000043")}
	batch := &events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{}}
	var buf []byte
	for _, bm := range []struct {
		name string
		fn   func()
	}{
		{"window/append", func() { buf = AppendKinesisTimeWindowEventResponse(buf[:0], window) }},
		{"window/lambda-encoder", func() { buf = lambdaEncode(b, window) }},
		{"batch/append", func() { buf = AppendKinesisEventResponse(buf[:0], batch) }},
		{"batch/lambda-encoder", func() { buf = lambdaEncode(b, batch) }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bm.fn()
			}
		})
	}
}
