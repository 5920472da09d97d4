package seats_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCommandsRefuseWhatTheyCannotKeep sends the commands API what it used
// to store altered or drop in silence: invalid UTF-8 and lone surrogates in
// a title or a holder (stored as U+FFFD), a holder with a misspelt field or
// nested 5,000 deep (answered 200, the personal data dropped). Each is a
// 400 naming the field, and nothing is stored.
func TestCommandsRefuseWhatTheyCannotKeep(t *testing.T) {
	f := newFixture(t)
	if a := f.command(t, schedule); a.status != 200 {
		t.Fatalf("schedule: %+v", a)
	}
	reserve := func(id, holder string) string {
		return `{"id":"` + id + `","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-` + id + `","customerId":"ada","seats":["A1"],"holder":` + holder + `}}`
	}
	scheduleTitled := func(id, title string) string {
		return `{"id":"` + id + `","type":"ScheduleShow","showId":"show-` + id + `","data":{"title":"` + title + `","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}}`
	}
	reserveWith := func(id, data string) string {
		return `{"id":"` + id + `","type":"ReserveSeats","showId":"show-1","data":{` + data + `}}`
	}
	long := strings.Repeat("x", 60_000)
	deep := strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat(`}`, 5000)
	for _, tc := range []struct {
		name, body, field, text string
	}{
		{"title with invalid UTF-8", scheduleTitled("t1", "Ham\xfflet"), "data.title", "invalid UTF-8"},
		{"title with a lone surrogate", scheduleTitled("t2", `Ham\ud800let`), "data.title", "surrogate"},
		{"title with a lone low surrogate", scheduleTitled("t3", `Ham\udc00let`), "data.title", "surrogate"},
		{"holder name with invalid UTF-8", reserve("h1", `{"name":"Ad`+"\xc3\x28"+`a","email":"ada@example.com"}`), "data.holder.name", "invalid UTF-8"},
		{"holder email with a lone surrogate", reserve("h2", `{"name":"Ada","email":"ada\udbff@example.com"}`), "data.holder.email", "surrogate"},
		{"holder with a misspelt field", reserve("h3", `{"nmae":"Ada","email":"ada@example.com"}`), "data.holder.nmae", `unknown field; did you mean "name"?`},
		{"holder with a field of the wrong type", reserve("h4", `{"name":["Ada"]}`), "data.holder.name", "must be a JSON string, not an array"},
		{"holder 5,000 levels deep", reserve("h5", `{"name":"Ada","email":"ada@example.com","notes":`+deep+`}`), "data.holder.notes" + strings.Repeat(".a", 61), "deeper than 64"},
		{"holder with a key twice", reserve("h6", `{"name":"Ada","name":"Bob"}`), "data.holder.name", "duplicate object key"},
		{"a start time past year 9999 in UTC", `{"id":"y1","type":"ScheduleShow","showId":"show-y1","data":{"title":"Hamlet","startsAt":"9999-12-31T23:30:00-01:00","rows":2,"seatsPerRow":5}}`, "data.startsAt", "years 0000 to 9999"},
		{"a start time before year 0000 in UTC", `{"id":"y2","type":"ScheduleShow","showId":"show-y2","data":{"title":"Hamlet","startsAt":"0000-01-01T00:30:00+01:00","rows":2,"seatsPerRow":5}}`, "data.startsAt", "years 0000 to 9999"},
		{"a start time of 60,000 bytes", `{"id":"l1","type":"ScheduleShow","showId":"show-l1","data":{"title":"Hamlet","startsAt":"` + long + `","rows":2,"seatsPerRow":5}}`, "data.startsAt", "not an RFC 3339 time"},
		{"a reservation id of 60,000 bytes", reserveWith("l2", `"reservationId":"`+long+`","customerId":"ada","seats":["A1"]`), "data.reservationId", "1 to 64 letters"},
		{"a customer id of 60,000 bytes", reserveWith("l3", `"reservationId":"r-l3","customerId":"`+long+`","seats":["A1"]`), "data.customerId", "1 to 64 letters"},
		{"a seat of 60,000 bytes", reserveWith("l4", `"reservationId":"r-l4","customerId":"ada","seats":["`+long+`"]`), "data.seats[0]", "is not a seat"},
		{"a field of the command in another case", `{"id":"c9","type":"CancelReservation","showId":"show-1","data":{"ReservationId":"r1"}}`, "data.ReservationId", `did you mean "reservationId"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.command(t, tc.body)
			var got struct {
				Field, Error, Status string
			}
			if err := json.Unmarshal([]byte(a.body), &got); err != nil {
				t.Fatalf("%d %q: %v", a.status, a.body, err)
			}
			if a.status != 400 || got.Field != tc.field || !strings.Contains(got.Error, tc.text) {
				t.Fatalf("%d %s\nwant 400 with field %q and %q", a.status, a.body, tc.field, tc.text)
			}
			if len(a.body) > 2048 {
				t.Errorf("the answer is %d bytes", len(a.body))
			}
		})
	}
	// Nothing was stored: the show is at version 1 with every seat free,
	// and no show was scheduled by a refused title.
	sm := f.do(t, "GET", "/shows/show-1", nil, "")
	if sm.status != 200 || version(t, sm.body) != 1 || strings.Contains(sm.body, `"A1":"r-`) {
		t.Fatalf("seat map after the refusals: %+v", sm)
	}
	for _, id := range []string{"t1", "t2", "t3", "y1", "y2"} {
		if a := f.do(t, "GET", "/shows/show-"+id, nil, ""); a.status != 404 {
			t.Errorf("show-%s: %d %s, want 404", id, a.status, a.body)
		}
	}
}
