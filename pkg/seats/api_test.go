package seats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/projection"
	"github.com/tributary-dev/tributary/pkg/seats"
)

var awsCfg aws.Config

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(c aws.Config) { awsCfg = c }))
}

var seq atomic.Int64

type fixture struct {
	db    *dynamodb.Client
	store *es.Store
	x     *es.Executor[seats.Show]
	api   *seats.API
	views string
	proj  *projection.Projector
}

func newFixture(t testing.TB, opts ...es.ExecutorOption[seats.Show]) *fixture {
	t.Helper()
	ctx := context.Background()
	n := seq.Add(1)
	f := &fixture{db: dynamodb.NewFromConfig(awsCfg), views: fmt.Sprintf("views-%d", n)}
	tables := es.Tables{Events: fmt.Sprintf("events-%d", n), Snapshots: fmt.Sprintf("snapshots-%d", n), Commands: fmt.Sprintf("commands-%d", n)}
	if err := es.CreateTables(ctx, f.db, tables); err != nil {
		t.Fatal(err)
	}
	if err := seats.CreateViewsTable(ctx, f.db, f.views); err != nil {
		t.Fatal(err)
	}
	f.store = es.NewStore(f.db, tables)
	table := projection.FixedTable(f.views)
	f.x = es.NewExecutor[seats.Show](f.store, seats.Decider{}, append([]es.ExecutorOption[seats.Show]{es.WithSyncView(seats.SyncView(table))}, opts...)...)
	f.api = seats.NewAPI(f.x, f.db, table)
	f.proj = projection.New(f.db, f.store, table, seats.Views(f.x), projection.WithoutStateViews())
	return f
}

type answer struct {
	status  int
	body    string
	headers map[string]string
}

func (f *fixture) do(t testing.TB, method, path string, query map[string]string, body string) answer {
	t.Helper()
	req := events.LambdaFunctionURLRequest{RawPath: path, QueryStringParameters: query, Body: body}
	req.RequestContext.HTTP.Method = method
	resp, err := f.api.Handle(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Body, resp.Headers}
}

func (f *fixture) command(t testing.TB, body string) answer {
	return f.do(t, "POST", "/commands", nil, body)
}

// project applies the whole log to the stream-fed views (what the
// projector function does from the published records).
func (f *fixture) project(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if _, err := es.ScanLog(ctx, f.db, f.store.Tables().Events, func(run []es.Event) error { return f.proj.ApplyLog(ctx, f.views, run) }); err != nil {
		t.Fatal(err)
	}
}

func version(t *testing.T, body string) int64 {
	t.Helper()
	var v struct{ Version int64 }
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return v.Version
}

const schedule = `{"id":"cmd-1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}}`

// TestAPI: commands accepted, refused with the field, a conflict on a
// stale expectedVersion, a retry answered from the record; the seat map is
// at the command's version at once, the projected views wait for it.
func TestAPI(t *testing.T) {
	f := newFixture(t)
	if a := f.command(t, schedule); a.status != 200 || version(t, a.body) != 1 {
		t.Fatalf("schedule: %+v", a)
	}
	reserve := `{"id":"cmd-2","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-ada","customerId":"ada","seats":["A1","A2"],"holder":{"name":"Ada","email":"ada@example.com"}}}`
	a := f.command(t, reserve)
	if a.status != 200 || a.body != `{"id":"cmd-2","status":"accepted","showId":"show-1","version":2,"events":[{"version":2,"type":"SeatsReserved"}]}` {
		t.Fatalf("reserve: %+v", a)
	}
	if again := f.command(t, reserve); again.status != 200 || again.body != a.body || again.headers[seats.HeaderReplayed] != "true" {
		t.Fatalf("retry: %+v", again)
	}
	taken := f.command(t, `{"id":"cmd-3","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-bob","customerId":"bob","seats":["A2"]}}`)
	if taken.status != 422 || !strings.Contains(taken.body, `"field":"data.seats[0]","reason":"seat A2 is already reserved"`) {
		t.Fatalf("double booking: %+v", taken)
	}
	stale := f.command(t, `{"id":"cmd-4","type":"ReserveSeats","showId":"show-1","expectedVersion":1,"data":{"reservationId":"r-bob","customerId":"bob","seats":["B1"]}}`)
	if stale.status != 409 || !strings.Contains(stale.body, `"expectedVersion":1,"currentVersion":2`) {
		t.Fatalf("stale expectedVersion: %+v", stale)
	}
	move := f.command(t, `{"id":"cmd-5","type":"MoveReservation","showId":"show-1","data":{"reservationId":"r-ada","seats":["B4","B5"]}}`)
	if move.status != 200 || version(t, move.body) != 4 {
		t.Fatalf("move: %+v", move)
	}

	// The seat map is written with the command: at version 4 at once.
	sm := f.do(t, "GET", "/shows/show-1", map[string]string{"minVersion": "4"}, "")
	var m seats.SeatMap
	if sm.status != 200 || json.Unmarshal([]byte(sm.body), &m) != nil || m.Version != 4 || m.Free != 8 || m.Seats["B4"] != "r-ada" || m.Seats["A1"] != "" {
		t.Fatalf("seat map: %+v", sm)
	}
	if strings.Contains(sm.body, "ada@example.com") {
		t.Fatalf("the seat map holds personal data: %s", sm.body)
	}
	// Availability is projected: nothing yet, so a read for version 4
	// waits, then says how far behind it is.
	behind := f.do(t, "GET", "/shows/show-1/availability", map[string]string{"minVersion": "4", "wait": "100ms"}, "")
	if behind.status != 503 || !strings.Contains(behind.body, "is at version 0, behind the 4 asked for") || behind.headers["Retry-After"] != "1" {
		t.Fatalf("availability before the projector ran: %+v", behind)
	}
	f.project(t)
	av := f.do(t, "GET", "/shows/show-1/availability", map[string]string{"minVersion": "4"}, "")
	if av.status != 200 || !strings.Contains(av.body, `"version":4`) || !strings.Contains(av.body, `"free":8`) {
		t.Fatalf("availability: %+v", av)
	}
	b := f.do(t, "GET", "/customers/ada/bookings", map[string]string{"show": "show-1", "minVersion": "4"}, "")
	if b.status != 200 || !strings.Contains(b.body, `"seats":["B4","B5"],"status":"reserved","version":4`) {
		t.Fatalf("bookings: %+v", b)
	}
	day := f.do(t, "GET", "/days/2026-12-05/availability", nil, "")
	if day.status != 200 || !strings.Contains(day.body, `"showId":"show-1"`) {
		t.Fatalf("day: %+v", day)
	}
	for _, tt := range []struct {
		method, path string
		query        map[string]string
		status       int
	}{
		{"GET", "/shows/show-1", map[string]string{"minVersion": "x"}, 400},
		{"GET", "/shows/show-1", map[string]string{"wait": "1m"}, 400},
		{"GET", "/shows/nope", nil, 404},
		{"DELETE", "/shows/show-1", nil, 405},
		{"GET", "/commands", nil, 405},
		{"GET", "/elsewhere", nil, 404},
		{"GET", "/customers/ada/bookings", map[string]string{"minVersion": "3"}, 400},
	} {
		if got := f.do(t, tt.method, tt.path, tt.query, ""); got.status != tt.status {
			t.Errorf("%s %s %v: %d %s, want %d", tt.method, tt.path, tt.query, got.status, got.body, tt.status)
		}
	}
	// What an answer repeats of the request is cut: a path, a day, a
	// customer, a show, a minVersion or a wait of 100 KB gets an answer of
	// a few hundred bytes.
	long := strings.Repeat("x", 100<<10)
	for _, tt := range []struct {
		path   string
		query  map[string]string
		status int
	}{
		{"/" + long, nil, 404},
		{"/days/" + long + "/availability", nil, 400},
		{"/customers/ada/bookings", map[string]string{"show": long}, 400},
		{"/customers/ada/bookings", map[string]string{"show": "a b"}, 400},
		{"/customers/" + long + "/bookings", nil, 400},
		{"/customers/ada/bookings", map[string]string{"minVersion": long}, 400},
		{"/customers/ada/bookings", map[string]string{"wait": long}, 400},
		{"/shows/show-1", map[string]string{"minVersion": long}, 400},
		{"/shows/show-1/availability", map[string]string{"wait": long}, 400},
	} {
		if got := f.do(t, "GET", tt.path, tt.query, ""); got.status != tt.status || len(got.body) > 1<<10 {
			t.Errorf("GET %.40s… %.40v: %d, %d bytes %.300s; want %d in under 1 KB", tt.path, tt.query, got.status, len(got.body), got.body, tt.status)
		}
	}
}

// TestUnknownQueryParameterRefused: a read whose query names a parameter
// its route does not take is a 400 naming it (and the one meant), not an
// answer that silently ignored it: minversion=9 answered 200 at version 4

// TestRetrySpelledAnotherWay: POST /commands with a command sent again
// that writes its data another way — keys in another order (as a client
// that rebuilds its request may), startsAt with a "z" or at an offset, the
// holder's fields swapped — is answered with the first answer, marked
// Idempotency-Replayed, and appends nothing; the same id with another
// title, another time or other seats is refused naming the id.
func TestRetrySpelledAnotherWay(t *testing.T) {
	f := newFixture(t)
	first := f.command(t, `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}}`)
	if first.status != 200 {
		t.Fatalf("schedule: %+v", first)
	}
	reserve := f.command(t, `{"id":"c2","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r1","customerId":"ada","seats":["A1","A2"],"holder":{"name":"Ada","email":"ada@example.com"}}}`)
	if reserve.status != 200 {
		t.Fatalf("reserve: %+v", reserve)
	}
	for _, tt := range []struct {
		name, body string
		want       answer // status and body; a zero body: refused naming the id
	}{
		{"schedule, data keys in another order", `{"type":"ScheduleShow","id":"c1","showId":"show-1","data":{"rows":2,"title":"Hamlet","seatsPerRow":5,"startsAt":"2026-12-05T19:30:00Z"}}`, first},
		{"schedule, startsAt with a lower-case z", `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00z","rows":2,"seatsPerRow":5}}`, first},
		{"schedule, startsAt at an offset", `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T20:30:00+01:00","rows":2,"seatsPerRow":5}}`, first},
		{"reserve, holder's fields swapped", `{"id":"c2","type":"ReserveSeats","showId":"show-1","data":{"holder":{"email":"ada@example.com","name":"Ada"},"seats":["A1","A2"],"customerId":"ada","reservationId":"r1"}}`, reserve},
		{"schedule, another title", `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Lear","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}}`, answer{status: 422}},
		{"schedule, another time", `{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00+01:00","rows":2,"seatsPerRow":5}}`, answer{status: 422}},
		{"reserve, other seats", `{"id":"c2","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r1","customerId":"ada","seats":["A2","A3"],"holder":{"name":"Ada","email":"ada@example.com"}}}`, answer{status: 422}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := f.command(t, tt.body)
			if tt.want.body == "" {
				if got.status != 422 || !strings.Contains(got.body, `"field":"id"`) || !strings.Contains(got.body, "was used for another command") {
					t.Errorf("%d %s, want 422: the id was used for another command", got.status, got.body)
				}
				return
			}
			if got.status != tt.want.status || got.body != tt.want.body || got.headers[seats.HeaderReplayed] != "true" {
				t.Errorf("%d %s %v, want the first answer replayed: %d %s", got.status, got.body, got.headers, tt.want.status, tt.want.body)
			}
		})
	}
	if _, v, err := f.x.Load(context.Background(), "show-1"); err != nil || v != 2 {
		t.Errorf("show-1 at version %d (%v), want 2: no retry appended", v, err)
	}
}

// TestMinVersionRefusedSayingWhy: a minVersion that is no whole number is
// refused as such; one past the largest version there can be (the int64
// maximum) was refused as "not a version (a whole number from 0)", which
// it is: the answer says it is too large, and how large a version gets.
func TestMinVersionRefusedSayingWhy(t *testing.T) {
	f := newFixture(t)
	if a := f.command(t, schedule); a.status != 200 {
		t.Fatalf("schedule: %+v", a)
	}
	for _, tt := range []struct {
		minVersion string
		want       string
	}{
		{"x", `minVersion: \"x\" is not a version (a whole number from 0)`},
		{"-1", `minVersion: \"-1\" is not a version (a whole number from 0)`},
		{"1.5", `minVersion: \"1.5\" is not a version (a whole number from 0)`},
		{"-0", `minVersion: \"-0\" is not a version (a whole number from 0)`},
		{"+4", `minVersion: \"+4\" is not a version (a whole number from 0)`},
		{"99999999999999999999", `minVersion: 99999999999999999999 is larger than any version can be (at most 9223372036854775807)`},
		{"9223372036854775808", `minVersion: 9223372036854775808 is larger than any version can be`},
	} {
		for _, path := range []string{"/shows/show-1", "/customers/ada/bookings"} {
			query := map[string]string{"minVersion": tt.minVersion}
			if path == "/customers/ada/bookings" {
				query["show"] = "show-1"
			}
			got := f.do(t, "GET", path, query, "")
			if got.status != 400 || !strings.Contains(got.body, tt.want) || !strings.Contains(got.body, `"field":"minVersion"`) {
				t.Errorf("GET %s?minVersion=%s: %d %.300s; want 400 naming minVersion with %s", path, tt.minVersion, got.status, got.body, tt.want)
			}
		}
	}
}

// reads as the read-your-writes a caller asked for.
func TestUnknownQueryParameterRefused(t *testing.T) {
	f := newFixture(t)
	if a := f.command(t, schedule); a.status != 200 {
		t.Fatalf("schedule: %+v", a)
	}
	for _, tt := range []struct {
		path  string
		query map[string]string
		want  string
	}{
		{"/shows/show-1", map[string]string{"minversion": "9"}, `"field":"minversion"`},
		{"/shows/show-1", map[string]string{"minversion": "9"}, `did you mean \"minVersion\"?`},
		{"/shows/show-1/availability", map[string]string{"minVersion": "1", "wiat": "1s"}, `"field":"wiat"`},
		{"/days/2026-12-05/availability", map[string]string{"minVersion": "1"}, `(known: after)`},
		{"/customers/ada/bookings", map[string]string{"shows": "show-1"}, `did you mean \"show\"?`},
		{"/shows/show-1", map[string]string{strings.Repeat("x", 100<<10): "1"}, `"field":"xxx`},
	} {
		got := f.do(t, "GET", tt.path, tt.query, "")
		if got.status != 400 || !strings.Contains(got.body, tt.want) || len(got.body) > 1<<10 {
			t.Errorf("GET %s %.40v: %d %.300s; want 400 under 1 KB with %s", tt.path, tt.query, got.status, got.body, tt.want)
		}
	}
	// A parameter given twice arrives joined by a comma ("2,2"): refused
	// as given twice, not as "not a version".
	req := events.LambdaFunctionURLRequest{RawPath: "/shows/show-1", RawQueryString: "minVersion=1&minVersion=1",
		QueryStringParameters: map[string]string{"minVersion": "1,1"}}
	req.RequestContext.HTTP.Method = "GET"
	if resp, err := f.api.Handle(context.Background(), req); err != nil || resp.StatusCode != 400 ||
		!strings.Contains(resp.Body, `"field":"minVersion"`) || !strings.Contains(resp.Body, "given 2 times; give it once") {
		t.Errorf("GET /shows/show-1?minVersion=1&minVersion=1: %d %.300s (%v); want 400: given 2 times", resp.StatusCode, resp.Body, err)
	}
	// A command sent with a Content-Encoding other than identity is a 415
	// naming the header, as at ingest, and is not executed.
	gz := events.LambdaFunctionURLRequest{RawPath: "/commands", Headers: map[string]string{"Content-Encoding": "gzip"},
		Body: `{"id":"cmd-gz","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-gz","customerId":"ada","seats":["A2"]}}`}
	gz.RequestContext.HTTP.Method = "POST"
	if resp, err := f.api.Handle(context.Background(), gz); err != nil || resp.StatusCode != 415 || resp.Headers["Accept-Encoding"] != "identity" ||
		!strings.Contains(resp.Body, `"field":"Content-Encoding"`) || !strings.Contains(resp.Body, "the body must be sent uncompressed") {
		t.Errorf("POST /commands with Content-Encoding gzip: %d %v %.300s (%v); want 415 naming Content-Encoding", resp.StatusCode, resp.Headers, resp.Body, err)
	}
	if got := f.do(t, "GET", "/shows/show-1", nil, ""); strings.Contains(got.body, "r-gz") {
		t.Errorf("seat map after the refused command: %.300s; want no reservation r-gz", got.body)
	}
	// The parameters a route takes still work.
	if got := f.do(t, "GET", "/shows/show-1", map[string]string{"minVersion": "1", "wait": "0s"}, ""); got.status != 200 {
		t.Errorf("seat map with minVersion and wait: %d %s", got.status, got.body)
	}
	// A command takes none: POST /commands?dryRun=true is refused, not
	// executed as if it were a trial.
	reserve := `{"id":"cmd-q","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-q","customerId":"ada","seats":["A1"]}}`
	if got := f.do(t, "POST", "/commands", map[string]string{"dryRun": "true"}, reserve); got.status != 400 || !strings.Contains(got.body, `"field":"dryRun"`) || !strings.Contains(got.body, "takes no query parameters") {
		t.Errorf("POST /commands?dryRun=true: %d %.300s; want 400 naming dryRun", got.status, got.body)
	}
	if got := f.do(t, "GET", "/shows/show-1", nil, ""); got.status != 200 || strings.Contains(got.body, "r-q") {
		t.Errorf("seat map after the refused command: %d %.300s; want no reservation r-q", got.status, got.body)
	}
}

// TestProjectedReadWaitsForItsVersion: a read with minVersion that starts
// before the projector has run waits (bounded) and answers once the view
// holds the version, saying it waited; it is not refused.
func TestProjectedReadWaitsForItsVersion(t *testing.T) {
	f := newFixture(t)
	if a := f.command(t, schedule); a.status != 200 {
		t.Fatalf("schedule: %+v", a)
	}
	a := f.command(t, `{"id":"cmd-2","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-ada","customerId":"ada","seats":["A1"]}}`)
	if a.status != 200 || version(t, a.body) != 2 {
		t.Fatalf("reserve: %+v", a)
	}
	type read struct {
		name string
		path string
		q    map[string]string
		want string
	}
	reads := []read{
		{"availability", "/shows/show-1/availability", map[string]string{"minVersion": "2", "wait": "5s"}, `"free":9`},
		{"bookings", "/customers/ada/bookings", map[string]string{"show": "show-1", "minVersion": "2", "wait": "5s"}, `"seats":["A1"],"status":"reserved","version":2`},
	}
	got := make([]chan answer, len(reads))
	for i, r := range reads {
		got[i] = make(chan answer, 1)
		go func() {
			req := events.LambdaFunctionURLRequest{RawPath: r.path, QueryStringParameters: r.q}
			req.RequestContext.HTTP.Method = "GET"
			resp, err := f.api.Handle(context.Background(), req)
			if err != nil {
				resp.StatusCode, resp.Body = -1, err.Error()
			}
			got[i] <- answer{resp.StatusCode, resp.Body, resp.Headers}
		}()
	}
	time.Sleep(300 * time.Millisecond) // both reads have found the view behind
	f.project(t)
	for i, r := range reads {
		ans := <-got[i]
		if ans.status != 200 || !strings.Contains(ans.body, r.want) {
			t.Errorf("%s: %d %s, want 200 with %s", r.name, ans.status, ans.body, r.want)
		}
		// The first read (at 0 ms) found nothing: the one that answered came later.
		if ms, err := strconv.Atoi(ans.headers[seats.HeaderWaited]); err != nil || ms <= 0 {
			t.Errorf("%s: %s = %q, want the milliseconds waited (> 0)", r.name, seats.HeaderWaited, ans.headers[seats.HeaderWaited])
		}
	}
}

// TestSeatMapAheadOfTheLog: a seat map at a later version than the log
// holds (an events table restored to an earlier point) refuses every
// append; the command is answered 500 saying so and what to do, not 503
// "retry", which would have its sender retry for ever.
func TestSeatMapAheadOfTheLog(t *testing.T) {
	f := newFixture(t)
	if a := f.command(t, schedule); a.status != 200 {
		t.Fatalf("schedule: %+v", a)
	}
	if _, err := f.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(f.views),
		Key:              map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "show#show-1"}, "sk": &types.AttributeValueMemberS{Value: "seatmap"}},
		UpdateExpression: aws.String("SET version = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: "7"}}}); err != nil {
		t.Fatal(err)
	}
	a := f.command(t, `{"id":"cmd-2","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-ada","customerId":"ada","seats":["A1"]}}`)
	if a.status != 500 || !strings.Contains(a.body, "ahead of the event log") || !strings.Contains(a.body, "eventstore rebuild") || a.headers["Retry-After"] != "" {
		t.Errorf("a command on a show whose seat map is ahead of its log: %+v; want 500 naming it, no Retry-After", a)
	}
}

// TestBookingsReadWaitsPastTheFirstPage: a customer with more bookings
// than one answer lists (a box office's account, years of a regular's
// bookings: cancelled ones stay) reads its own write on a show whose
// bookings sort after them. The read answers once the view holds the
// version, as for any customer; it is not a 503 "behind" however long the
// projector has been done.
func TestBookingsReadWaitsPastTheFirstPage(t *testing.T) {
	f := newFixture(t)
	if a := f.command(t, schedule); a.status != 200 {
		t.Fatalf("schedule: %+v", a)
	}
	// 250 earlier bookings of ada on shows whose ids sort before show-1.
	var reqs []types.WriteRequest
	for i := range 250 {
		show := fmt.Sprintf("old-%03d", i)
		item := seats.BookingKey("ada", show, "r")
		item["showId"] = &types.AttributeValueMemberS{Value: show}
		item["reservationId"] = &types.AttributeValueMemberS{Value: "r"}
		item["status"] = &types.AttributeValueMemberS{Value: seats.StatusCancelled}
		item["seats"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "A1"}}}
		item[projection.AttrVersion] = &types.AttributeValueMemberN{Value: "3"}
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
	}
	f.putViews(t, reqs)
	if a := f.command(t, `{"id":"cmd-2","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-ada","customerId":"ada","seats":["A1"]}}`); a.status != 200 || version(t, a.body) != 2 {
		t.Fatalf("reserve: %+v", a)
	}
	f.project(t)
	b := f.do(t, "GET", "/customers/ada/bookings", map[string]string{"show": "show-1", "minVersion": "2", "wait": "300ms"}, "")
	if b.status != 200 || !strings.Contains(b.body, `"more":true`) {
		t.Fatalf("ada's bookings with show-1 at version 2 in the view: %d %.400s; want 200, more of them than one answer lists", b.status, b.body)
	}
	if len(b.body) > 64<<10 {
		t.Errorf("the answer is %d bytes", len(b.body))
	}
	// Still behind for a version of ada's the view does not hold yet.
	if a := f.command(t, `{"id":"cmd-3","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-ada2","customerId":"ada","seats":["A2"]}}`); a.status != 200 || version(t, a.body) != 3 {
		t.Fatalf("reserve: %+v", a)
	}
	if b := f.do(t, "GET", "/customers/ada/bookings", map[string]string{"show": "show-1", "minVersion": "3", "wait": "100ms"}, ""); b.status != 503 || !strings.Contains(b.body, "is at version 2, behind the 3") {
		t.Errorf("minVersion 3: %d %.400s; want 503 naming version 2", b.status, b.body)
	}
}

// TestListingsPageOnWithNext: a customer's bookings and a day's shows past
// the 200 one answer lists are reached by passing the answer's "next" as
// after; each page is bounded, the pages together list every item once,
// and an after that is not a "next" is a 400 naming it.
func TestListingsPageOnWithNext(t *testing.T) {
	f := newFixture(t)
	put := func(items []map[string]types.AttributeValue) {
		t.Helper()
		var reqs []types.WriteRequest
		for _, item := range items {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
		f.putViews(t, reqs)
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	var bookings, shows []map[string]types.AttributeValue
	for i := range 250 {
		show := fmt.Sprintf("show-%03d", i)
		b := seats.BookingKey("ada", show, "r")
		b["showId"], b["reservationId"], b["status"] = s(show), s("r"), s(seats.StatusReserved)
		b["seats"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{s("A1")}}
		b[projection.AttrVersion] = &types.AttributeValueMemberN{Value: "2"}
		bookings = append(bookings, b)
		a := seats.AvailabilityKey(show)
		startsAt := fmt.Sprintf("2026-12-24T%02d:%02d:00Z", i/60, i%60)
		a["showId"], a["title"], a["startsAt"], a["day"], a["at"] = s(show), s("Hamlet"), s(startsAt), s("2026-12-24"), s(startsAt+"#"+show)
		a[projection.AttrVersion] = &types.AttributeValueMemberN{Value: "1"}
		shows = append(shows, a)
	}
	put(append(bookings, shows...))

	type page struct {
		Bookings []seats.Booking      `json:"bookings"`
		Shows    []seats.Availability `json:"shows"`
		More     bool                 `json:"more"`
		Next     *string              `json:"next"`
	}
	for _, tc := range []struct {
		name, path string
		query      map[string]string
		ids        func(p page) []string
	}{
		{"bookings", "/customers/ada/bookings", map[string]string{}, func(p page) (ids []string) {
			for _, b := range p.Bookings {
				ids = append(ids, b.ShowID)
			}
			return ids
		}},
		{"day", "/days/2026-12-24/availability", map[string]string{}, func(p page) (ids []string) {
			for _, a := range p.Shows {
				ids = append(ids, a.ShowID)
			}
			return ids
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var all []string
			query := tc.query
			for pages := 1; ; pages++ {
				a := f.do(t, "GET", tc.path, query, "")
				var p page
				if a.status != 200 || json.Unmarshal([]byte(a.body), &p) != nil {
					t.Fatalf("page %d: %d %.300s", pages, a.status, a.body)
				}
				ids := tc.ids(p)
				if len(ids) > 200 || len(a.body) > 64<<10 {
					t.Fatalf("page %d lists %d items in %d bytes", pages, len(ids), len(a.body))
				}
				all = append(all, ids...)
				if p.More != (p.Next != nil) {
					t.Fatalf("page %d: more %v with next %v", pages, p.More, p.Next)
				}
				if !p.More {
					if pages != 2 {
						t.Errorf("%d pages, want 2 (250 items, 200 a page)", pages)
					}
					break
				}
				if pages == 5 {
					t.Fatal("still more after 5 pages")
				}
				query = map[string]string{"after": *p.Next}
			}
			if len(all) != 250 || len(slices.Compact(slices.Sorted(slices.Values(all)))) != 250 {
				t.Errorf("the pages listed %d items, %d distinct; want the 250 once each", len(all), len(slices.Compact(slices.Sorted(slices.Values(all)))))
			}
		})
	}

	// minVersion is checked against the show's bookings also on a later page.
	b := f.do(t, "GET", "/customers/ada/bookings", map[string]string{"show": "show-010", "minVersion": "2", "after": "show-200#r", "wait": "0s"}, "")
	if b.status != 200 {
		t.Errorf("minVersion 2 of show-010 on the page after show-200: %d %.300s; want 200", b.status, b.body)
	}
	for _, bad := range []struct{ path, after string }{
		{"/customers/ada/bookings", "show-1"},
		{"/customers/ada/bookings", "show 1#r"},
		{"/customers/ada/bookings", strings.Repeat("s", 65) + "#r"},
		{"/days/2026-12-24/availability", "show-1"},
		{"/days/2026-12-24/availability", "yesterday#show-1"},
		{"/days/2026-12-24/availability", "2026-12-24T00:00:00Z#" + strings.Repeat("s", 5000)},
	} {
		a := f.do(t, "GET", bad.path, map[string]string{"after": bad.after}, "")
		if a.status != 400 || !strings.Contains(a.body, `"field":"after"`) || !strings.Contains(a.body, "#<") || len(a.body) > 2048 {
			t.Errorf("%s after=%.40q: %d %.300s; want a bounded 400 naming after", bad.path, bad.after, a.status, a.body)
		}
	}
}

// putViews writes items to the views table as a projector would have.
func (f *fixture) putViews(t *testing.T, reqs []types.WriteRequest) {
	t.Helper()
	for len(reqs) > 0 {
		n := min(25, len(reqs))
		out, err := f.db.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{f.views: reqs[:n]}})
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs[n:], out.UnprocessedItems[f.views]...)
	}
}

// TestBookingsReadOfAVersionAnotherCustomerMade: a client reads a
// customer's bookings of a show at a version of the show that was another
// customer's command (the seat map's version, say). The customer's
// bookings are current for it once the view holds the customer's own last
// event of the show up to that version: the read answers 200, where it
// answered 503 "read again" for ever, the customer's own bookings being at
// an earlier version. Until the projector has applied the customer's
// event the read is behind and names the version it waits for.
func TestBookingsReadOfAVersionAnotherCustomerMade(t *testing.T) {
	f := newFixture(t)
	if a := f.command(t, schedule); a.status != 200 {
		t.Fatalf("schedule: %+v", a)
	}
	if a := f.command(t, `{"id":"cmd-2","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-ada","customerId":"ada","seats":["A1"]}}`); a.status != 200 || version(t, a.body) != 2 {
		t.Fatalf("ada's reservation: %+v", a)
	}
	for i, seat := range []string{"B1", "B2"} {
		cmd := fmt.Sprintf(`{"id":"cmd-bob-%d","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-bob-%d","customerId":"bob","seats":[%q]}}`, i, i, seat)
		if a := f.command(t, cmd); a.status != 200 || version(t, a.body) != int64(3+i) {
			t.Fatalf("bob's reservation: %+v", a)
		}
	}
	read := func(minVersion string) answer {
		return f.do(t, "GET", "/customers/ada/bookings", map[string]string{"show": "show-1", "minVersion": minVersion, "wait": "100ms"}, "")
	}
	// Not projected: ada's event (version 2) is what the read waits for.
	if b := read("4"); b.status != 503 || !strings.Contains(b.body, "version 2") || b.headers["Retry-After"] != "1" {
		t.Errorf("before the projector ran: %d %.400s; want 503 naming ada's version 2", b.status, b.body)
	}
	f.project(t)
	for _, v := range []string{"2", "3", "4"} {
		b := read(v)
		if b.status != 200 || !strings.Contains(b.body, `"reservationId":"r-ada","seats":["A1"],"status":"reserved","version":2`) || strings.Contains(b.body, "r-bob") {
			t.Errorf("minVersion %s, ada's bookings projected at version 2, bob's at 3 and 4: %d %.400s; want 200 with ada's booking alone", v, b.status, b.body)
		}
	}
}

// TestBookingsReadLooksBackABoundedWay: a bookings read looks back from
// minVersion at most 1,000 versions of the show for the customer's last
// event; a minVersion further past the customer's bookings than that is a
// 400 naming minVersion and saying what to pass, never a 503 "read again"
// and never an unbounded read of the log.
func TestBookingsReadLooksBackABoundedWay(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var evs []types.WriteRequest
	for v := int64(1); v <= 1002; v++ {
		customer := "bob"
		if v == 1 {
			customer = "ada"
		}
		e := es.Event{AggregateType: seats.AggregateType, AggregateID: "show-1", Version: v, Type: seats.EvSeatsReserved, CommandID: fmt.Sprintf("cmd-%d", v),
			Data: json.RawMessage(fmt.Sprintf(`{"reservationId":"r-%d","customerId":%q,"seats":["A1"]}`, v, customer)), RecordedAt: time.Now()}
		evs = append(evs, types.WriteRequest{PutRequest: &types.PutRequest{Item: e.Item()}})
	}
	table := f.store.Tables().Events
	for len(evs) > 0 {
		n := min(25, len(evs))
		out, err := f.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: evs[:n]}})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs[n:], out.UnprocessedItems[table]...)
	}
	booking := seats.BookingKey("ada", "show-1", "r-1")
	booking["showId"], booking["reservationId"], booking["status"] = &types.AttributeValueMemberS{Value: "show-1"}, &types.AttributeValueMemberS{Value: "r-1"}, &types.AttributeValueMemberS{Value: seats.StatusReserved}
	booking["seats"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "A1"}}}
	booking[projection.AttrVersion] = &types.AttributeValueMemberN{Value: "1"}
	f.putViews(t, []types.WriteRequest{{PutRequest: &types.PutRequest{Item: booking}}})

	read := func(minVersion string) answer {
		return f.do(t, "GET", "/customers/ada/bookings", map[string]string{"show": "show-1", "minVersion": minVersion, "wait": "0s"}, "")
	}
	if b := read("1001"); b.status != 200 || !strings.Contains(b.body, `"reservationId":"r-1"`) {
		t.Errorf("minVersion 1001, 1,000 versions past ada's 1: %d %.400s; want 200", b.status, b.body)
	}
	if b := read("1002"); b.status != 400 || !strings.Contains(b.body, `"field":"minVersion"`) || !strings.Contains(b.body, "at most 1000 versions") || b.headers["Retry-After"] != "" {
		t.Errorf("minVersion 1002, 1,001 versions past ada's 1: %d %.400s; want a 400 naming minVersion", b.status, b.body)
	}
}

// TestReadOfAVersionNoCommandMadeIsRefused: a read with a minVersion the
// show's log has not reached — a client's mistake, or a version of another
// show — is a 400 naming minVersion and the version the log is at, not a
// 503 "read again" that no retry could ever satisfy. A version the log
// holds but the view has not reached yet is still a 503.
func TestReadOfAVersionNoCommandMadeIsRefused(t *testing.T) {
	f := newFixture(t)
	if a := f.command(t, schedule); a.status != 200 {
		t.Fatalf("schedule: %+v", a)
	}
	// With no wait, and with the longest wait: the log is read when the
	// view is first found behind, so the refusal does not wait for a
	// version no wait would bring (a trial saw 5 s pass before the 400).
	for _, wait := range []string{"0s", "5s"} {
		for _, tc := range []struct {
			path  string
			query map[string]string
		}{
			{"/shows/show-1", map[string]string{"minVersion": "9", "wait": wait}},
			{"/shows/show-1/availability", map[string]string{"minVersion": "9", "wait": wait}},
			{"/customers/ada/bookings", map[string]string{"show": "show-1", "minVersion": "9", "wait": wait}},
		} {
			start := time.Now()
			a := f.do(t, "GET", tc.path, tc.query, "")
			took := time.Since(start)
			var got struct{ Field, Error string }
			_ = json.Unmarshal([]byte(a.body), &got)
			if a.status != 400 || got.Field != "minVersion" || !strings.Contains(got.Error, "at version 1") {
				t.Errorf("%s wait %s: %d %s, want a 400 naming minVersion and the log's version 1", tc.path, wait, a.status, a.body)
			}
			if wait == "5s" && took >= 4*time.Second {
				t.Errorf("%s wait %s: the 400 came after %v: it waited for a version no command made", tc.path, wait, took.Round(time.Millisecond))
			}
		}
	}
	// The availability view is projected from the stream: not yet, so
	// version 1 is behind, and worth reading again.
	if a := f.do(t, "GET", "/shows/show-1/availability", map[string]string{"minVersion": "1", "wait": "0s"}, ""); a.status != 503 {
		t.Errorf("availability at a version the log holds, not yet projected: %d %s, want 503", a.status, a.body)
	}
}

// TestDamagedEventLog: an item of a show's log that no command wrote
// (data that is not JSON, a time that is not one, a version missing, an
// event the show's state cannot take) fails every command on the show and
// every read that needs its log. The answer is a 500 naming the version
// and the attribute, saying no retry helps and how an operator repairs it
// (point-in-time recovery) — not a 503 "retry", which would have the
// sender retry for ever — and EventLogDamaged is counted for the alarm.
func TestDamagedEventLog(t *testing.T) {
	reserve := `{"id":"cmd-3","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-bob","customerId":"bob","seats":["B1"]}}`
	for _, tc := range []struct {
		name    string
		version string // the hand-written item's
		change  func(item map[string]types.AttributeValue)
		want    []string
		// read: a bookings read fails too (it reads the items, and
		// evolves no state).
		read bool
	}{
		{"data not JSON", "3", func(it map[string]types.AttributeValue) {
			it[es.AttrData] = &types.AttributeValueMemberS{Value: "not json"}
		}, []string{"damaged at version 3", "attribute data: is not JSON"}, true},
		{"recordedAt not a time", "3", func(it map[string]types.AttributeValue) {
			it[es.AttrRecordedAt] = &types.AttributeValueMemberS{Value: "yesterday"}
		}, []string{"damaged at version 3", "attribute recordedAt:"}, true},
		{"a version missing", "4", func(map[string]types.AttributeValue) {},
			// The item to take away is the one after the gap (a trial was
			// told to delete version 3, which was not there).
			[]string{"damaged at version 3", "version 3 is missing", "delete the item at version 4"}, true},
		{"an event the state cannot take", "3", func(it map[string]types.AttributeValue) {
			it[es.AttrData] = &types.AttributeValueMemberS{Value: `{"reservationId":"r-eve","customerId":"eve","seats":["Z99"]}`}
		}, []string{"damaged at version 3", "seat Z99 does not exist"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var emf strings.Builder
			mt := metrics.New(&emf, "commands")
			f := newFixture(t, es.WithMetrics[seats.Show](mt))
			f.api = seats.NewAPI(f.x, f.db, projection.FixedTable(f.views), seats.APIWithMetrics(mt))
			if a := f.command(t, schedule); a.status != 200 {
				t.Fatalf("schedule: %+v", a)
			}
			if a := f.command(t, `{"id":"cmd-2","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-ada","customerId":"ada","seats":["A1"]}}`); a.status != 200 {
				t.Fatalf("reserve: %+v", a)
			}
			evs, err := f.store.Events(ctx, "show-1", 1, 2)
			if err != nil || len(evs) != 1 {
				t.Fatalf("version 2: %v %v", evs, err)
			}
			item := evs[0].Item()
			item[es.AttrVersion] = &types.AttributeValueMemberN{Value: tc.version}
			item[es.AttrCommandID] = &types.AttributeValueMemberS{Value: "by-hand"}
			tc.change(item)
			if _, err := f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.store.Tables().Events), Item: item}); err != nil {
				t.Fatal(err)
			}
			check := func(what string, a answer) {
				t.Helper()
				if a.status != 500 || a.headers["Retry-After"] != "" {
					t.Errorf("%s: %d (Retry-After %q) %s; want 500 without Retry-After", what, a.status, a.headers["Retry-After"], a.body)
				}
				// publish sets a deleted event aside: the operator is told
				// that this is expected (a trial took it for a new fault).
				for _, w := range append([]string{"event log of show-1", "no retry succeeds", "point-in-time recovery", "publish sets the deletion aside"}, tc.want...) {
					if !strings.Contains(a.body, w) {
						t.Errorf("%s: %s; want it to say %q", what, a.body, w)
					}
				}
			}
			for i := range 2 { // the same answer sent again: no retry helps
				check(fmt.Sprintf("command, try %d", i+1), f.command(t, reserve))
			}
			answers := 2
			if tc.read {
				check("bookings read", f.do(t, "GET", "/customers/ada/bookings", map[string]string{"show": "show-1", "minVersion": tc.version, "wait": "0"}, ""))
				answers++
			}
			if n := strings.Count(emf.String(), `"EventLogDamaged":1`); n != answers {
				t.Errorf("EventLogDamaged counted in %d of %d answers; metrics: %s", n, answers, emf.String())
			}
		})
	}
}
