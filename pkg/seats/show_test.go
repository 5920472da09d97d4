package seats

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/pkg/es"
)

// scheduledShow is a show of rows × seatsPerRow with the given
// reservations already made.
func scheduledShow(t *testing.T, rows, perRow int, reservations map[string][]string) (Show, int64) {
	t.Helper()
	d := Decider{}
	s := d.Initial()
	v := int64(1)
	s, err := d.Evolve(s, es.Event{Version: v, Type: EvShowScheduled, Data: json.RawMessage(
		`{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":` + itoa(rows) + `,"seatsPerRow":` + itoa(perRow) + `}`)})
	if err != nil {
		t.Fatal(err)
	}
	for rid, seats := range reservations {
		v++
		b, _ := json.Marshal(SeatsChanged{ReservationID: rid, CustomerID: "cust-" + rid, Seats: seats})
		if s, err = d.Evolve(s, es.Event{Version: v, Type: EvSeatsReserved, Data: b}); err != nil {
			t.Fatal(err)
		}
	}
	return s, v
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestDecide(t *testing.T) {
	show, v := scheduledShow(t, 2, 5, map[string][]string{"r1": {"A1", "A2"}})
	tests := []struct {
		name    string
		state   Show
		typ     string
		data    string
		refused string // the refusal's field, or
		invalid string // the invalid field, or
		events  []string
	}{
		{name: "schedule", state: Decider{}.Initial(), typ: CmdScheduleShow, data: `{"title":"Hamlet","startsAt":"2026-12-05T20:30:00+01:00","rows":2,"seatsPerRow":5}`, events: []string{EvShowScheduled}},
		{name: "schedule twice", state: show, typ: CmdScheduleShow, data: `{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}`, refused: "showId"},
		{name: "schedule without rows", state: Decider{}.Initial(), typ: CmdScheduleShow, data: `{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","seatsPerRow":5}`, invalid: "data.rows"},
		{name: "schedule 27 rows", state: Decider{}.Initial(), typ: CmdScheduleShow, data: `{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":27,"seatsPerRow":5}`, invalid: "data.rows"},
		{name: "schedule bad time", state: Decider{}.Initial(), typ: CmdScheduleShow, data: `{"title":"Hamlet","startsAt":"tonight","rows":2,"seatsPerRow":5}`, invalid: "data.startsAt"},
		{name: "reserve", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"bob","seats":["B1","B2"]}`, events: []string{EvSeatsReserved}},
		{name: "reserve a taken seat", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"bob","seats":["A3","A2"]}`, refused: "data.seats[1]"},
		{name: "reserve a seat that does not exist", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"bob","seats":["C1"]}`, refused: "data.seats[0]"},
		{name: "reserve before scheduling", state: Decider{}.Initial(), typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"bob","seats":["A1"]}`, refused: "showId"},
		{name: "reserve an active reservation id", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r1","customerId":"bob","seats":["B1"]}`, refused: "data.reservationId"},
		{name: "reserve a seat twice in one command", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"bob","seats":["B1","B1"]}`, invalid: "data.seats[1]"},
		{name: "reserve a malformed seat", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"bob","seats":["b1"]}`, invalid: "data.seats[0]"},
		// One seat, one label: a sign or a leading zero would name a
		// seat held by r1 (A1) under another label and book it twice.
		{name: "reserve a seat with a sign", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"mallory","seats":["A+1"]}`, invalid: "data.seats[0]"},
		{name: "reserve a seat with a leading zero", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"mallory","seats":["B5","A01"]}`, invalid: "data.seats[1]"},
		{name: "reserve eleven seats", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"bob","seats":["B1","B2","B3","B4","B5","A3","A4","A5","A1","A2","C1"]}`, invalid: "data.seats"},
		{name: "reserve with an unknown field", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"bob","seats":["B1"],"vip":true}`, invalid: "data.vip"},
		{name: "reserve with seats not a list", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"bob","seats":"B1"}`, invalid: "data.seats"},
		{name: "cancel", state: show, typ: CmdCancelReservation, data: `{"reservationId":"r1"}`, events: []string{EvReservationCancelled}},
		{name: "cancel what is not active", state: show, typ: CmdCancelReservation, data: `{"reservationId":"r9"}`, refused: "data.reservationId"},
		{name: "move", state: show, typ: CmdMoveReservation, data: `{"reservationId":"r1","seats":["A2","A3"]}`, events: []string{EvReservationCancelled, EvSeatsReserved}},
		{name: "move onto the same seats", state: show, typ: CmdMoveReservation, data: `{"reservationId":"r1","seats":["A2","A1"]}`, refused: "data.seats"},
		// Titles and holders are bounded in characters, as their errors say:
		// 150 characters of Japanese are 450 bytes.
		{name: "schedule a title of 150 characters in 450 bytes", state: Decider{}.Initial(), typ: CmdScheduleShow, data: `{"title":"` + strings.Repeat("劇", 150) + `","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}`, events: []string{EvShowScheduled}},
		{name: "schedule a title of 201 characters", state: Decider{}.Initial(), typ: CmdScheduleShow, data: `{"title":"` + strings.Repeat("a", 201) + `","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}`, invalid: "data.title"},
		{name: "reserve for a holder named in 150 characters", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"bob","seats":["B1"],"holder":{"name":"` + strings.Repeat("名", 150) + `"}}`, events: []string{EvSeatsReserved}},
		{name: "reserve for a holder named in 201 characters", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"bob","seats":["B1"],"holder":{"name":"` + strings.Repeat("a", 201) + `"}}`, invalid: "data.holder.name"},
		// "No control characters" is every one (Unicode Cc), not only
		// those below 0x20: NEL breaks a line, CSI starts a terminal escape.
		{name: "schedule a title with a next line (U+0085)", state: Decider{}.Initial(), typ: CmdScheduleShow, data: `{"title":"Ham\u0085let","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}`, invalid: "data.title"},
		{name: "reserve for a holder named with a CSI (U+009B)", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"bob","seats":["B1"],"holder":{"name":"Ada\u009b2J"}}`, invalid: "data.holder.name"},
		{name: "reserve for a holder with a C1 control in the email", state: show, typ: CmdReserveSeats, data: `{"reservationId":"r2","customerId":"bob","seats":["B1"],"holder":{"email":"ada\u0080@example.com"}}`, invalid: "data.holder.email"},
		{name: "unknown command", state: show, typ: "BuyPopcorn", data: `{}`, invalid: "type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := Decider{}.Decide(tt.state, v, es.Command{ID: "c", Type: tt.typ, AggregateID: "show-1", Data: json.RawMessage(tt.data)})
			var r *es.Refusal
			var ie *es.InvalidError
			switch {
			case tt.refused != "":
				if !errors.As(err, &r) || r.Field != tt.refused {
					t.Fatalf("got %v, want a refusal naming %s", err, tt.refused)
				}
			case tt.invalid != "":
				if !errors.As(err, &ie) || ie.Field != tt.invalid {
					t.Fatalf("got %v, want invalid naming %s", err, tt.invalid)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				var types []string
				for _, e := range evs {
					types = append(types, e.Type)
				}
				if strings.Join(types, ",") != strings.Join(tt.events, ",") {
					t.Fatalf("events %v, want %v", types, tt.events)
				}
			}
		})
	}
}

// TestEvolveRefusesADoubleBooking: a log in which a seat is reserved twice
// cannot even be loaded.
func TestEvolveRefusesADoubleBooking(t *testing.T) {
	show, v := scheduledShow(t, 1, 3, map[string][]string{"r1": {"A1"}})
	b, _ := json.Marshal(SeatsChanged{ReservationID: "r2", CustomerID: "x", Seats: []string{"A2", "A1"}})
	if _, err := (Decider{}).Evolve(show, es.Event{Version: v + 1, Type: EvSeatsReserved, Data: b}); err == nil || !strings.Contains(err.Error(), "double booking") {
		t.Fatalf("got %v, want a double booking refused", err)
	}
	if show.Seats["A2"] != "" {
		t.Fatal("Evolve changed the state it was given")
	}
}

// TestMoveKeepsTheCustomer: a move is the old seats released and the new
// ones taken by the same reservation, for the same customer, in one step.
func TestMoveKeepsTheCustomer(t *testing.T) {
	d := Decider{}
	show, v := scheduledShow(t, 1, 4, map[string][]string{"r1": {"A1", "A2"}})
	evs, err := d.Decide(show, v, es.Command{Type: CmdMoveReservation, AggregateID: "s", Data: json.RawMessage(`{"reservationId":"r1","seats":["A2","A3"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i, ne := range evs {
		b, _ := json.Marshal(ne.Data)
		if show, err = d.Evolve(show, es.Event{Version: v + int64(i) + 1, Type: ne.Type, Data: b}); err != nil {
			t.Fatal(err)
		}
	}
	r := show.Reservations["r1"]
	if r.CustomerID != "cust-r1" || strings.Join(r.Seats, ",") != "A2,A3" || show.Seats["A1"] != "" || show.Free() != 2 {
		t.Fatalf("after the move: %+v, free %d", show, show.Free())
	}
}

// TestTextFieldErrorsSayWhatIsWrong: a title or holder field that is
// present but refused says what is wrong with it (its length, the control
// character and where), not "is required", which reads as if it were
// missing.
func TestTextFieldErrorsSayWhatIsWrong(t *testing.T) {
	show := Decider{}.Initial()
	scheduled, _ := scheduledShow(t, 2, 5, nil)
	for _, tt := range []struct {
		name  string
		state Show
		typ   string
		data  string
		field string
		want  string
	}{
		{"no title", show, CmdScheduleShow, `{"startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}`, "data.title", "is required: 1 to 200 characters"},
		{"an empty title", show, CmdScheduleShow, `{"title":"","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}`, "data.title", "is required: 1 to 200 characters"},
		{"a title of 60,000 characters", show, CmdScheduleShow, `{"title":"` + strings.Repeat("a", 60000) + `","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}`, "data.title", "is 60000 characters; at most 200"},
		{"a title with a next line", show, CmdScheduleShow, `{"title":"Ham\u0085let","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}`, "data.title", "holds control character U+0085 (character 4)"},
		{"a holder name of 201 characters", scheduled, CmdReserveSeats, `{"reservationId":"r2","customerId":"bob","seats":["B1"],"holder":{"name":"` + strings.Repeat("名", 201) + `"}}`, "data.holder.name", "is 201 characters; at most 200"},
		{"a holder email with a tab", scheduled, CmdReserveSeats, `{"reservationId":"r2","customerId":"bob","seats":["B1"],"holder":{"email":"ada@example.com\t"}}`, "data.holder.email", "holds control character U+0009 (character 16)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decider{}.Decide(tt.state, 1, es.Command{ID: "c", Type: tt.typ, AggregateID: "show-1", Data: json.RawMessage(tt.data)})
			var ie *es.InvalidError
			if !errors.As(err, &ie) || ie.Field != tt.field || !strings.Contains(err.Error(), tt.want) || len(err.Error()) > 300 {
				t.Fatalf("got %.300v; want %s refused with %q", err, tt.field, tt.want)
			}
		})
	}
}

// TestScheduleQuotesEachNumbersOwnRange: rows and seatsPerRow refused for
// any reason — out of range, a fraction, 1.0, past an int64, a string —
// quote their own range (1 to 26, 1 to 40), not an int64's, and the value
// sent, cut with its cut marked.
func TestScheduleQuotesEachNumbersOwnRange(t *testing.T) {
	schedule := func(rows, perRow string) string {
		return `{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":` + rows + `,"seatsPerRow":` + perRow + `}`
	}
	const rowsRange, perRowRange = "must be a whole number from 1 to 26", "must be a whole number from 1 to 40"
	for _, tt := range []struct {
		name, data, field, want string
	}{
		{"rows 27", schedule("27", "5"), "data.rows", rowsRange + ", not 27 (rows A to Z)"},
		{"rows 0", schedule("0", "5"), "data.rows", rowsRange + ", not 0 (rows A to Z)"},
		{"rows -1", schedule("-1", "5"), "data.rows", rowsRange + ", not -1 (rows A to Z)"},
		{"rows 2.5", schedule("2.5", "5"), "data.rows", rowsRange + ", not 2.5 (rows A to Z)"},
		// The strict reader takes a whole number in one spelling, for
		// every field: 1.0 is refused, as Decode refuses it for an int.
		{"rows 1.0", schedule("1.0", "5"), "data.rows", rowsRange + ", not 1.0 (rows A to Z)"},
		{"rows 1e400", schedule("1e400", "5"), "data.rows", rowsRange + ", not 1e400 (rows A to Z)"},
		{"rows 1e1", schedule("1e1", "5"), "data.rows", rowsRange + ", not 1e1 (rows A to Z)"},
		{"rows as a string", schedule(`"2"`, "5"), "data.rows", rowsRange + ", not a string (rows A to Z)"},
		{"rows of 1,000 digits", schedule(strings.Repeat("9", 1000), "5"), "data.rows", rowsRange + ", not " + strings.Repeat("9", 40) + "… (rows A to Z)"},
		{"rows left out", `{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","seatsPerRow":5}`, "data.rows", "is required: " + rowsRange + " (rows A to Z)"},
		{"rows null", schedule("null", "5"), "data.rows", "is required: " + rowsRange + " (rows A to Z)"},
		{"seatsPerRow 41", schedule("2", "41"), "data.seatsPerRow", perRowRange + ", not 41"},
		{"seatsPerRow 1e400", schedule("2", "1e400"), "data.seatsPerRow", perRowRange + ", not 1e400"},
		{"seatsPerRow 2.5", schedule("2", "2.5"), "data.seatsPerRow", perRowRange + ", not 2.5"},
		{"seatsPerRow -9223372036854775809", schedule("2", "-9223372036854775809"), "data.seatsPerRow", perRowRange + ", not -9223372036854775809"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decider{}.Decide(Decider{}.Initial(), 0, es.Command{ID: "c", Type: CmdScheduleShow, AggregateID: "show-1", Data: json.RawMessage(tt.data)})
			var ie *es.InvalidError
			if !errors.As(err, &ie) || ie.Field != tt.field || !strings.Contains(ie.Reason, tt.want) {
				t.Fatalf("got %.300v; want %s refused with %q", err, tt.field, tt.want)
			}
		})
	}
}

// TestScheduleReadsStartsAtAsIngestReadsTimes: RFC 3339 allows "t" and
// "z" in lower case; ingest takes them (package stream), and so does a
// command's startsAt, keeping the time in its one UTC spelling.
func TestScheduleReadsStartsAtAsIngestReadsTimes(t *testing.T) {
	for _, tt := range []struct{ startsAt, stored, invalid string }{
		{startsAt: "2026-12-05T19:30:00Z", stored: "2026-12-05T19:30:00Z"},
		{startsAt: "2026-12-05t19:30:00z", stored: "2026-12-05T19:30:00Z"},
		{startsAt: "2026-12-05t20:30:00+01:00", stored: "2026-12-05T19:30:00Z"},
		{startsAt: "2026-12-05T19:30:00.250z", stored: "2026-12-05T19:30:00Z"},
		{startsAt: "2026-12-05T23:59:60Z", invalid: "leap second"},
		{startsAt: "2026-12-05T19:30:00+23:60", invalid: "has the offset +23:60"},
		{startsAt: "tonight", invalid: `"tonight" is not an RFC 3339 time`},
	} {
		t.Run(tt.startsAt, func(t *testing.T) {
			evs, err := Decider{}.Decide(Decider{}.Initial(), 0, es.Command{ID: "c", Type: CmdScheduleShow, AggregateID: "show-1",
				Data: json.RawMessage(`{"title":"Hamlet","startsAt":"` + tt.startsAt + `","rows":2,"seatsPerRow":5}`)})
			if tt.invalid != "" {
				var ie *es.InvalidError
				if !errors.As(err, &ie) || ie.Field != "data.startsAt" || !strings.Contains(ie.Reason, tt.invalid) {
					t.Fatalf("got %v; want data.startsAt refused with %q", err, tt.invalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := evs[0].Data.(ShowScheduled).StartsAt; got != tt.stored {
				t.Fatalf("stored startsAt %q, want %q", got, tt.stored)
			}
		})
	}
}
