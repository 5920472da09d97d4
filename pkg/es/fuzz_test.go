package es_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/es"
)

// FuzzParseCommand: any body a caller sends is a command or an
// *InvalidError; nothing panics, and a command that parses has its id,
// type and aggregate id.
func FuzzParseCommand(f *testing.F) {
	for _, b := range []string{
		`{"id":"c1","type":"Deposit","accountId":"a1","expectedVersion":3,"data":{"amount":5,"owner":"Ada"}}`,
		`{"id":"c2","type":"Withdraw","accountId":"a1","data":{}}`,
		`{"id":"","type":"x","accountId":"a1","data":null}`,
		`{"id":"c3","id":"c4","type":"x","accountId":"a1","data":{}}`,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		cmd, err := es.ParseCommand(body, "accountId")
		if err != nil {
			var invalid *es.InvalidError
			if !errors.As(err, &invalid) {
				t.Fatalf("%q: error %T %v, want *es.InvalidError", body, err, err)
			}
			return
		}
		if cmd.ID == "" || cmd.Type == "" || cmd.AggregateID == "" {
			t.Fatalf("%q parsed to %+v: a command without its id, type or aggregate id", body, cmd)
		}
	})
}

// FuzzDecodePublished: any record on the published stream is an event or a
// *RecordError naming the field; nothing panics.
func FuzzDecodePublished(f *testing.F) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	env, err := es.Envelope(&es.Event{AggregateType: "account", AggregateID: "a1", Version: 2, CommandID: "c1",
		Type: "Deposited", RecordedAt: at, Data: json.RawMessage(`{"amount":5}`)}, at)
	if err != nil {
		f.Fatal(err)
	}
	b, err := json.Marshal(env)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"id":"a1/1","type":"Deposited","key":"a1","occurredAt":"2026-12-05T10:00:00Z","sentAt":"2026-12-05T10:00:00Z","data":{"version":1,"version":2}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := es.DecodePublished(data); err != nil {
			var re *es.RecordError
			if !errors.As(err, &re) || re.Field == "" && re.Reason == "" {
				t.Fatalf("%q: error %T %v, want *es.RecordError", data, err, err)
			}
		}
	})
}
