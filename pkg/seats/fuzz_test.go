package seats_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// FuzzAPI sends the commands API what a hostile caller might: any method,
// path, query and body, built from the commands and reads it serves. Every
// answer is one a client can act on — a 2xx, or a 4xx saying what to
// change, never a 500 or a 503 that has it retry for ever — its body is
// one bounded JSON document, and the shows' logs still fold (no seat is
// held twice, versions run without a gap).
func FuzzAPI(f *testing.F) {
	fx := newFixture(f)
	if a := fx.command(f, schedule); a.status != 200 {
		f.Fatalf("schedule: %+v", a)
	}
	for _, s := range []struct{ method, path, query, body string }{
		{"POST", "/commands", "", `{"id":"c-2","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-1","customerId":"ada","seats":["A1","A2"],"holder":{"name":"Ada","email":"ada@example.com"}}}`},
		{"POST", "/commands", "", `{"id":"c-3","type":"MoveReservation","showId":"show-1","expectedVersion":2,"data":{"reservationId":"r-1","seats":["B1"]}}`},
		{"POST", "/commands", "", `{"id":"c-4","type":"CancelReservation","showId":"show-1","data":{"reservationId":"r-1"}}`},
		{"POST", "/commands", "", `{"id":"c-5","type":"ScheduleShow","showId":"show-2","data":{"title":"Lear","startsAt":"2026-12-06T19:30:00Z","rows":3,"seatsPerRow":4}}`},
		{"GET", "/shows/show-1", "minVersion=2&waitMs=10", ""},
		{"GET", "/shows/show-1/availability", "", ""},
		{"GET", "/days/2026-12-05/availability", "limit=2", ""},
		{"GET", "/customers/ada/bookings", "", ""},
		{"DELETE", "/commands", "", ""},
		{"GET", "/nowhere", "x=1", ""},
	} {
		f.Add(s.method, s.path, s.query, s.body)
	}
	f.Fuzz(func(t *testing.T, method, path, rawQuery, body string) {
		req := events.LambdaFunctionURLRequest{RawPath: path, RawQueryString: rawQuery, Body: body}
		req.RequestContext.HTTP.Method = method
		if q, err := url.ParseQuery(rawQuery); err == nil && len(q) > 0 {
			req.QueryStringParameters = map[string]string{}
			for k, v := range q {
				req.QueryStringParameters[k] = v[0]
			}
		}
		resp, err := fx.api.Handle(context.Background(), req)
		if err != nil {
			t.Fatalf("%s %s?%s %q: Handle: %v", method, path, rawQuery, body, err)
		}
		switch resp.StatusCode {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed,
			http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		default:
			t.Fatalf("%s %s?%s %q: %d %s", method, path, rawQuery, body, resp.StatusCode, resp.Body)
		}
		if !json.Valid([]byte(resp.Body)) {
			t.Fatalf("%s %s %q: the answer is not JSON: %q", method, path, body, resp.Body)
		}
		if resp.StatusCode >= 400 && len(resp.Body) > 2048 {
			t.Fatalf("%s %s %q: a refusal of %d bytes", method, path, body, len(resp.Body))
		}
		for _, show := range []string{"show-1", "show-2"} {
			log, err := fx.store.Events(context.Background(), show, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := fx.x.Fold(nil, log); err != nil {
				t.Fatalf("after %s %s %q: %s's log does not fold: %v", method, path, body, show, err)
			}
		}
	})
}
