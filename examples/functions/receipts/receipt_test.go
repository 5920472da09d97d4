package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/handler"
)

func order(data string) *handler.Event {
	return &handler.Event{ID: "e-1", Type: EventType, Key: "o-42", Time: time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC), Data: []byte(data)}
}

// TestRender: an order's receipt names the order, the event time and the
// total in the currency's unit; lines are kept.
func TestRender(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"total only, default currency", `{"totalCents":1999}`,
			`{"receiptId":"rcpt-e-1","orderId":"o-42","issuedAt":"2026-12-01T09:30:00Z","currency":"USD","totalCents":1999,"total":"19.99 USD"}`},
		{"free order", `{"totalCents":0,"currency":"EUR"}`,
			`{"receiptId":"rcpt-e-1","orderId":"o-42","issuedAt":"2026-12-01T09:30:00Z","currency":"EUR","totalCents":0,"total":"0.00 EUR"}`},
		{"lines summing to the total", `{"totalCents":2505,"currency":"EUR","lines":[{"sku":"mug","quantity":2,"unitCents":1000},{"sku":"tea","quantity":1,"unitCents":505}]}`,
			`{"receiptId":"rcpt-e-1","orderId":"o-42","issuedAt":"2026-12-01T09:30:00Z","currency":"EUR","totalCents":2505,"total":"25.05 EUR","lines":[{"sku":"mug","quantity":2,"unitCents":1000},{"sku":"tea","quantity":1,"unitCents":505}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(context.Background(), order(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("receipt\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestRenderRefuses: an order that can never have a receipt is refused
// with a *handler.FieldError naming the field (package handler sets the
// message aside on the DLQ with it), never a retryable error.
func TestRenderRefuses(t *testing.T) {
	long := `{"totalCents":1,"lines":[` + strings.Repeat(`{"sku":"a","quantity":1,"unitCents":0},`, MaxLines) + `{"sku":"a","quantity":1,"unitCents":1}]}`
	tests := []struct {
		name   string
		ev     *handler.Event
		field  string
		reason string
	}{
		{"missing total", order(`{"currency":"EUR"}`), "data.totalCents", "missing"},
		{"negative total", order(`{"totalCents":-5}`), "data.totalCents", "-5 is negative"},
		{"total not an integer", order(`{"totalCents":"12"}`), "data.totalCents", "string"},
		{"fractional total", order(`{"totalCents":12.5}`), "data.totalCents", "12.5"},
		{"huge total", order(`{"totalCents":100000000000}`), "data.totalCents", "more than"},
		{"total not the lines' sum", order(`{"totalCents":100,"lines":[{"sku":"mug","quantity":2,"unitCents":1000}]}`), "data.totalCents", "sum of the lines, 2000"},
		{"bad currency", order(`{"totalCents":1,"currency":"euro"}`), "data.currency", `"euro"`},
		{"zero quantity", order(`{"totalCents":0,"lines":[{"sku":"mug","quantity":0,"unitCents":1}]}`), "data.lines[0].quantity", "0 is outside"},
		{"no sku", order(`{"totalCents":1,"lines":[{"quantity":1,"unitCents":1}]}`), "data.lines[0].sku", `""`},
		{"too many lines", order(long), "data.lines", "51 lines"},
		{"not an object", order(`[1]`), "data", "not a JSON object"},
		// encoding/json would take "TotalCents" for totalCents: the last
		// of the two would be the total.
		{"total twice in two cases", order(`{"totalCents":100,"TotalCents":5}`), "data.TotalCents", `did you mean "totalCents"?`},
		{"a line's field in another case", order(`{"totalCents":2,"lines":[{"sku":"mug","quantity":1,"unitCents":2,"Quantity":9}]}`), "data.lines[0].Quantity", "unknown field"},
		{"another type", &handler.Event{ID: "e-2", Type: "order_shipped", Key: "o-1", Data: []byte(`{"totalCents":1}`)}, "type", "order_shipped"},
		{"no order id", &handler.Event{ID: "e-3", Type: EventType, Data: []byte(`{"totalCents":1}`)}, "key", "missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(context.Background(), tt.ev)
			var fe *handler.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Render = %s, %v; want a *handler.FieldError", got, err)
			}
			if fe.Field != tt.field || !strings.Contains(fe.Reason, tt.reason) {
				t.Errorf("refused %s: %s; want %s: ...%s...", fe.Field, fe.Reason, tt.field, tt.reason)
			}
		})
	}
}
