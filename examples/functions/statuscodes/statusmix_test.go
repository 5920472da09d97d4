package main

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/tributary-dev/tributary/pkg/handler"
)

// TestStatusMixKeepsTheMergeLaws: merging in any grouping and order gives
// the aggregate adding in order gives (associative, commutative, identity),
// the encoding is canonical and reads back, and merges never grow the
// encoding past their operands' — on fixed and random code mixes.
func TestStatusMixKeepsTheMergeLaws(t *testing.T) {
	cases := map[string][]Status{
		"empty":     nil,
		"one":       {200},
		"classes":   {100, 200, 201, 301, 404, 500, 503, 599, 200, 200},
		"all codes": nil,
	}
	for s := Status(MinStatus); s <= MaxStatus; s++ {
		cases["all codes"] = append(cases["all codes"], s, s)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3 {
		var vs []Status
		for range 200 {
			vs = append(vs, Status(MinStatus+rng.IntN(MaxStatus-MinStatus+1)))
		}
		cases["random"+string(rune('a'+len(cases)))] = vs
	}
	for name, vs := range cases {
		if err := handler.CheckMergeLaws[StatusMix](vs, 30, uint64(len(vs))); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestStatusMixResult is the JSON a window's result carries.
func TestStatusMixResult(t *testing.T) {
	var a, b StatusMix
	for _, s := range []Status{200, 200, 404} {
		a.Add(s)
	}
	b.Add(503)
	a.Merge(&b)
	got, err := json.Marshal(&a)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"total":4,"classes":{"1xx":0,"2xx":2,"3xx":0,"4xx":1,"5xx":1},"codes":{"200":2,"404":1,"503":1},"errorRate":0.25}`
	if string(got) != want {
		t.Fatalf("result %s, want %s", got, want)
	}
	bin, _ := a.MarshalBinary()
	for _, bad := range [][]byte{nil, {1}, {1, 0x90, 0x03, 0}, append(bin, 0)} {
		var m StatusMix
		if m.UnmarshalBinary(bad) == nil {
			t.Errorf("UnmarshalBinary(%x) accepted a bad encoding", bad)
		}
	}
}

// TestSelectStatus: what becomes of an event, and which field a refusal names.
func TestSelectStatus(t *testing.T) {
	for _, c := range []struct {
		typ, data string
		key       string
		status    Status
		field     string // "" accepted; "-" skipped
	}{
		{"http_request", `{"status":200}`, "/checkout", 200, ""},
		{"http_request", `{"status":599}`, "/checkout", 599, ""},
		{"page_view", `{"status":200}`, "", 0, "-"},
		{"http_request", `{"status":999}`, "", 0, "data.status"},
		{"http_request", `{"status":99}`, "", 0, "data.status"},
		{"http_request", `{"status":"200"}`, "", 0, "data.status"},
		{"http_request", `{"status":200.5}`, "", 0, "data.status"},
		{"http_request", `{}`, "", 0, "data.status"},
		{"http_request", `[1]`, "", 0, "data"},
		// encoding/json would take "Status" for status: the last of the
		// two would count, where a rule reading data.status sees 200.
		{"http_request", `{"status":200,"Status":503}`, "", 0, "data.Status"},
		{"http_request", `{"STATUS":503}`, "", 0, "data.STATUS"},
		{"http_request", `{"status":200,"route":"/checkout","ms":12}`, "/checkout", 200, ""},
	} {
		key, s, err := SelectStatus(&handler.Event{Type: c.typ, Key: "/checkout", Data: json.RawMessage(c.data)})
		var fe *handler.FieldError
		switch {
		case c.field == "-":
			if !errors.Is(err, handler.ErrSkip) {
				t.Errorf("%s %s: %v, want skipped", c.typ, c.data, err)
			}
		case c.field != "":
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Errorf("%s %s: %v, want refused naming %s", c.typ, c.data, err, c.field)
			}
		case err != nil || key != c.key || s != c.status:
			t.Errorf("%s %s: %q %v %v, want %q %v", c.typ, c.data, key, s, err, c.key, c.status)
		}
	}
}
