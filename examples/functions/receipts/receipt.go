package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// EventType is the type of the events the function renders receipts for.
const EventType = "order_placed"

// Bounds on an order: a receipt stays a few kilobytes, well inside the
// idempotency record it is stored in.
const (
	MaxLines      = 50
	MaxSKUBytes   = 64
	MaxQuantity   = 10_000
	MaxTotalCents = 100_000_000_00 // 100 million in the currency's unit
)

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// Order is an order_placed event's data.
type Order struct {
	Currency   string `json:"currency"`
	TotalCents *int64 `json:"totalCents"`
	Lines      []Line `json:"lines"`
}

// Line is one line of an order.
type Line struct {
	SKU       string `json:"sku"`
	Quantity  int64  `json:"quantity"`
	UnitCents int64  `json:"unitCents"`
}

// Receipt is what Render returns (as JSON) and the idempotency table keeps.
// It depends only on the event, so a copy of the event would get the same
// receipt even if it were rendered again.
type Receipt struct {
	ReceiptID  string    `json:"receiptId"`
	OrderID    string    `json:"orderId"`
	IssuedAt   time.Time `json:"issuedAt"`
	Currency   string    `json:"currency"`
	TotalCents int64     `json:"totalCents"`
	Total      string    `json:"total"`
	Lines      []Line    `json:"lines,omitempty"`
}

// Render is the task: the receipt of an order_placed event (its key is the
// order id). What no retry can fix is refused naming the field
// (handler.Refuse): another event type, a missing key, bad JSON, a missing
// or negative data.totalCents, a total that is not the sum of the lines.
func Render(_ context.Context, ev *handler.Event) ([]byte, error) {
	if ev.Type != EventType {
		return nil, handler.Refuse("type", "%q is not %s", ev.Type, EventType)
	}
	if ev.Key == "" {
		return nil, handler.Refuse("key", "the order id is missing")
	}
	// The one strict reader (package strictjson): fields it does not know
	// are skipped, but a key spelt as one of Order's in another case
	// ("TotalCents"), which encoding/json would take for it, is refused
	// naming it, as is a value of the wrong type.
	var o Order
	if err := strictjson.Decode(ev.Data, &o, strictjson.Options{MaxBytes: len(ev.Data), Name: "data", AllowUnknown: true}); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && se.Path != "" {
			return nil, handler.Refuse(strictjson.JoinPath("data", se.Path), "%s", se.Reason)
		}
		return nil, handler.Refuse("data", "not a JSON object: %v", err)
	}
	switch {
	case o.TotalCents == nil:
		return nil, handler.Refuse("data.totalCents", "missing")
	case *o.TotalCents < 0:
		return nil, handler.Refuse("data.totalCents", "%d is negative", *o.TotalCents)
	case *o.TotalCents > MaxTotalCents:
		return nil, handler.Refuse("data.totalCents", "%d is more than %d", *o.TotalCents, int64(MaxTotalCents))
	}
	if o.Currency == "" {
		o.Currency = "USD"
	}
	if !currencyRE.MatchString(o.Currency) {
		return nil, handler.Refuse("data.currency", "%q is not an ISO 4217 code", o.Currency)
	}
	if len(o.Lines) > MaxLines {
		return nil, handler.Refuse("data.lines", "%d lines, at most %d", len(o.Lines), MaxLines)
	}
	var sum int64
	for i, l := range o.Lines {
		switch {
		case l.SKU == "" || len(l.SKU) > MaxSKUBytes:
			return nil, handler.Refuse(fmt.Sprintf("data.lines[%d].sku", i), "%q is not 1-%d bytes", l.SKU, MaxSKUBytes)
		case l.Quantity < 1 || l.Quantity > MaxQuantity:
			return nil, handler.Refuse(fmt.Sprintf("data.lines[%d].quantity", i), "%d is outside 1-%d", l.Quantity, MaxQuantity)
		case l.UnitCents < 0 || l.UnitCents > MaxTotalCents:
			return nil, handler.Refuse(fmt.Sprintf("data.lines[%d].unitCents", i), "%d is outside 0-%d", l.UnitCents, int64(MaxTotalCents))
		}
		sum += l.Quantity * l.UnitCents
	}
	if len(o.Lines) > 0 && sum != *o.TotalCents {
		return nil, handler.Refuse("data.totalCents", "%d is not the sum of the lines, %d", *o.TotalCents, sum)
	}
	r := Receipt{
		ReceiptID:  "rcpt-" + ev.ID,
		OrderID:    ev.Key,
		IssuedAt:   ev.Time,
		Currency:   o.Currency,
		TotalCents: *o.TotalCents,
		Total:      fmt.Sprintf("%d.%02d %s", *o.TotalCents/100, *o.TotalCents%100, o.Currency),
		Lines:      o.Lines,
	}
	return json.Marshal(r)
}
