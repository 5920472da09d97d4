package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestPrintItemQuotesAFieldTheProducerNamed: an item's field and reason may
// repeat a key of the record, which its producer chose. printItem and
// printAlso show them as printData shows the data: a character a terminal
// acts on, or one that hides or reorders the text around it, is shown
// escaped, never written as it is. An item a function sets aside now names
// such a key as a quoted path step (stream.CheckNames); one written before
// holds the key raw, in its field and in its reason.
func TestPrintItemQuotesAFieldTheProducerNamed(t *testing.T) {
	const head = `"id":"a","type":"t","key":"k","occurredAt":"2026-11-29T09:00:00Z","sentAt":"2026-11-29T09:00:00Z"`
	setAside := func(t *testing.T, key string) (field, reason string) {
		t.Helper()
		rec := stream.KinesisRecord{EventID: "shardId-000000000000:1", PartitionKey: "k", SequenceNumber: "1",
			ApproximateArrivalTimestamp: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Data: []byte(`{` + head + `,"` + key + `":1}`)}
		var env stream.Envelope
		var pe *stream.PoisonRecordError
		if err := rec.DecodeEnvelope(&env); !errors.As(err, &pe) {
			t.Fatalf("DecodeEnvelope = %v, want a *PoisonRecordError", err)
		}
		return pe.Field, pe.Error()
	}
	for _, tc := range []struct {
		name  string
		field func(t *testing.T) (field, reason string)
		want  string // in what is printed
	}{
		{"an escape sequence, set aside now", func(t *testing.T) (string, string) {
			return setAside(t, `\u001b]0;PWNED\u0007\u001b[2J`)
		}, `["\x1b]0;PWNED\a\x1b[2J"]`},
		{"a bidirectional override, set aside now", func(t *testing.T) (string, string) {
			return setAside(t, `\u202eevil`)
		}, `["\u202eevil"]`},
		{"an escape sequence in an item written before", func(*testing.T) (string, string) {
			return "\x1b]0;PWNED\a\x1b[2J", "record 1: field \x1b]0;PWNED\a\x1b[2J: unknown field"
		}, `"\x1b]0;PWNED\a\x1b[2J"`},
		{"a bidirectional override in an item written before", func(*testing.T) (string, string) {
			return "\u202eevil", "record 1: field \u202eevil: unknown field"
		}, `"\u202eevil"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			field, reason := tc.field(t)
			entry := setaside.Entry{Field: field, Category: setaside.KindInvalid, Reason: reason, SetAsideAt: "2026-11-29T10:00:00.000Z"}
			it := &setaside.Item{Kind: "set-aside", Source: "arn:aws:kinesis:us-east-1:000000000000:stream/events/shardId-000000000000",
				SequenceNumber: "1", Function: "aggregate", Category: setaside.KindInvalid, Field: field, Reason: reason,
				SetAsideAt: "2026-11-29T10:00:00.000Z", Functions: map[string]setaside.Entry{"aggregate": entry, "enrich": entry}}
			var b bytes.Buffer
			views := it.SetAsides()
			printItem(&b, &views[0])
			printAlso(&b, &views[1])
			got := b.String()
			if strings.ContainsAny(got, "\x1b\a\u202e") {
				t.Errorf("printed %q: the producer's characters reach the terminal as they are", got)
			}
			if strings.Count(got, tc.want) < 2 {
				t.Errorf("printed %q; want the field shown as %s by printItem and printAlso", got, tc.want)
			}
		})
	}
}
