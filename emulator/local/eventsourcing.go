package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/projection"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/seats"
)

// EventSourcing is the deployed event-sourced seat reservations: the
// commands function URL, the event store and the views registry, as the
// functions' environments in the template name them.
type EventSourcing struct {
	URL                                       string
	Events, Snapshots, ViewsParameter, Stream string
	s                                         *Stack
	http                                      *http.Client
}

// FindEventSourcing reads the commands and publish functions' environment
// and the commands function URL from the deployment.
func (s *Stack) FindEventSourcing() (*EventSourcing, error) {
	specs, err := s.deployment.Functions()
	if err != nil {
		return nil, err
	}
	e := &EventSourcing{URL: s.URL("commands"), s: s, http: &http.Client{Timeout: 30 * time.Second}}
	for _, f := range specs {
		switch f.Binary {
		case "commands":
			e.Events, e.Snapshots, e.ViewsParameter = f.Env[es.EnvEventsTable], f.Env[es.EnvSnapshotsTable], f.Env["VIEWS_PARAMETER_NAME"]
		case "publish":
			e.Stream = f.Env[es.EnvStreamName]
		}
	}
	if e.URL == "" || e.Events == "" || e.Snapshots == "" || e.ViewsParameter == "" || e.Stream == "" {
		return nil, fmt.Errorf("the template lacks the commands function URL, its %s, %s or VIEWS_PARAMETER_NAME, or publish's %s",
			es.EnvEventsTable, es.EnvSnapshotsTable, es.EnvStreamName)
	}
	return e, nil
}

// esAnswer is one HTTP answer of the commands function.
type esAnswer struct {
	Status  int
	Body    string
	Header  http.Header
	Version int64
}

func (e *EventSourcing) send(ctx context.Context, method, path string, query url.Values, body string) (esAnswer, error) {
	u := strings.TrimSuffix(e.URL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	if err != nil {
		return esAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.http.Do(req)
	if err != nil {
		return esAnswer{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return esAnswer{}, err
	}
	a := esAnswer{Status: resp.StatusCode, Body: string(b), Header: resp.Header}
	var v struct{ Version int64 }
	_ = json.Unmarshal(b, &v)
	a.Version = v.Version
	return a, nil
}

// commandRetryFor bounds how long Command sends a command again while the
// function answers 503.
const commandRetryFor = time.Minute

// Command posts a command and returns the answer. A 503 (the function ran
// out of time: the stand-in is serving every function of the topology) is
// sent again with the same id, as a client should (it runs at most once),
// until commandRetryFor has passed; the last answer is returned.
func (e *EventSourcing) Command(ctx context.Context, body string) (esAnswer, error) {
	deadline := time.Now().Add(commandRetryFor)
	for {
		a, err := e.send(ctx, http.MethodPost, "/commands", nil, body)
		if err != nil || a.Status != http.StatusServiceUnavailable || !time.Now().Before(deadline) {
			return a, err
		}
		select {
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// viewCatchUp bounds how long the demo reads a projected view again while
// it is behind the version a command returned. Each read waits up to
// seats.MaxWait inside the commands function and answers 503 (behind) if
// the view is not there yet; the projector is fed by a stream mapping,
// which on a loaded 2-core machine (LocalStack, every function of the
// topology at once) was seen to need more than one such wait.
const viewCatchUp = 2 * time.Minute

// readAtLeast reads path with minVersion=v, again while the view answers 503
// (still behind), until within (viewCatchUp in the demo) has passed. It
// returns the last answer and, when the view never reached v, an error
// saying how far it got.
func (e *EventSourcing) readAtLeast(ctx context.Context, what, path string, query url.Values, v int64, within time.Duration) (esAnswer, error) {
	q := url.Values{}
	for k, vs := range query {
		q[k] = vs
	}
	q.Set("minVersion", fmt.Sprint(v))
	q.Set("wait", seats.MaxWait.String())
	began := time.Now()
	deadline := began.Add(within)
	for reads := 1; ; reads++ {
		a, err := e.send(ctx, http.MethodGet, path, q, "")
		if err != nil {
			return a, fmt.Errorf("%s: %w", what, err)
		}
		if a.Status != http.StatusServiceUnavailable {
			return a, nil
		}
		if !time.Now().Before(deadline) {
			return a, fmt.Errorf("%s never reached version %d: %d reads over %s (each waiting up to %s), the last: %s",
				what, v, reads, time.Since(began).Round(time.Second), seats.MaxWait, a.Body)
		}
		select {
		case <-ctx.Done():
			return a, fmt.Errorf("%s: version %d not reached after %d reads: %w", what, v, reads, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Demo runs the event-sourcing story against the deployed functions and
// prints it: commands accepted, one refused by validation, two at once on
// the same version (one conflicts), a retry answered from its record, a
// move (two events, one transaction), the seat map current at once and the
// projected views catching up, a snapshot, and a rebuild of the views from
// the log, swapped and compared with the live ones. It returns an error
// when any of it does not hold.
func (e *EventSourcing) Demo(ctx context.Context, out io.Writer) error {
	show := fmt.Sprintf("show-%d", time.Now().Unix()%100000)
	step := func(what string, a esAnswer, want int) error {
		fmt.Fprintf(out, "    %-50s → %d %s\n", what, a.Status, summarize(a))
		if a.Status != want {
			return fmt.Errorf("%s: %d %s, want %d", what, a.Status, a.Body, want)
		}
		return nil
	}
	cmd := func(id, typ, data string, expected int64) string {
		ev := ""
		if expected >= 0 {
			ev = fmt.Sprintf(`,"expectedVersion":%d`, expected)
		}
		return fmt.Sprintf(`{"id":%q,"type":%q,"showId":%q%s,"data":%s}`, show+"-"+id, typ, show, ev, data)
	}
	run := func(what, body string, want int) (esAnswer, error) {
		a, err := e.Command(ctx, body)
		if err != nil {
			return a, err
		}
		return a, step(what, a, want)
	}
	fmt.Fprintf(out, "  commands on %s (function URL %s; the event store is %s)\n", show, e.URL, e.Events)
	if _, err := run("ScheduleShow (2 rows × 5 seats)", cmd("schedule", seats.CmdScheduleShow,
		`{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}`, -1), 200); err != nil {
		return err
	}
	if _, err := run("ReserveSeats A1 A2 for ada (holder kept apart)", cmd("ada", seats.CmdReserveSeats,
		`{"reservationId":"r-ada","customerId":"ada","seats":["A1","A2"],"holder":{"name":"Ada L.","email":"ada@example.com"}}`, -1), 200); err != nil {
		return err
	}
	bob := cmd("bob", seats.CmdReserveSeats, `{"reservationId":"r-bob","customerId":"bob","seats":["B1"]}`, -1)
	first, err := run("ReserveSeats B1 for bob", bob, 200)
	if err != nil {
		return err
	}
	if _, err := run("ReserveSeats A2 for cat (A2 is ada's)", cmd("cat", seats.CmdReserveSeats,
		`{"reservationId":"r-cat","customerId":"cat","seats":["A2"]}`, -1), 422); err != nil {
		return err
	}

	// Two commands decided on the same version, sent at once.
	var wg sync.WaitGroup
	answers := make([]esAnswer, 2)
	errs := make([]error, 2)
	for i, who := range []string{"dan", "eve"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = e.Command(ctx, cmd(who, seats.CmdReserveSeats,
				fmt.Sprintf(`{"reservationId":"r-%s","customerId":%q,"seats":["A%d"]}`, who, who, 3+i), 3))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	ok, conflict := answers[0], answers[1]
	if ok.Status != 200 {
		ok, conflict = conflict, ok
	}
	fmt.Fprintf(out, "    %-50s → %d %s · %d %s\n", "dan (A3) and eve (A4) at once, both expecting 3", ok.Status, summarize(ok), conflict.Status, summarize(conflict))
	if ok.Status != 200 || conflict.Status != 409 || !strings.Contains(conflict.Body, `"currentVersion":4`) {
		return fmt.Errorf("two commands on version 3: %d %s and %d %s, want one 200 and one 409 naming version 4", ok.Status, ok.Body, conflict.Status, conflict.Body)
	}

	again, err := e.Command(ctx, bob)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "    %-50s → %d, %s: %s, same body: %t\n", "bob's command sent again (same id)", again.Status, seats.HeaderReplayed,
		again.Header.Get(seats.HeaderReplayed), again.Body == first.Body)
	if again.Status != 200 || again.Body != first.Body || again.Header.Get(seats.HeaderReplayed) != "true" {
		return fmt.Errorf("retry: %d %s, want the first answer replayed", again.Status, again.Body)
	}
	move, err := run("MoveReservation r-ada → B4 B5 (two events, one transaction)", cmd("move", seats.CmdMoveReservation,
		`{"reservationId":"r-ada","seats":["B4","B5"]}`, -1), 200)
	if err != nil {
		return err
	}
	v := move.Version
	// The stand-in serves every function of the topology, so the projector
	// can be seconds behind here: each read below waits for version v, and
	// is made again while the view is behind (readAtLeast).

	// Read your writes.
	sm, err := e.readAtLeast(ctx, "seat map of "+show, "/shows/"+show, nil, v, viewCatchUp)
	if err != nil {
		return err
	}
	var m seats.SeatMap
	_ = json.Unmarshal([]byte(sm.Body), &m)
	fmt.Fprintf(out, "    %-50s → version %d, waited %s ms: written with the command; %d free\n",
		fmt.Sprintf("seat map, minVersion=%d", v), m.Version, sm.Header.Get(seats.HeaderWaited), m.Free)
	if sm.Status != 200 || m.Version != v || m.Free != 6 {
		return fmt.Errorf("seat map: %d %s", sm.Status, sm.Body)
	}
	now, err := e.send(ctx, http.MethodGet, "/shows/"+show+"/availability", nil, "")
	if err != nil {
		return err
	}
	seen := "not projected yet"
	if now.Status == 200 {
		seen = fmt.Sprintf("version %d", now.Version)
	}
	av, err := e.readAtLeast(ctx, "availability of "+show, "/shows/"+show+"/availability", nil, v, viewCatchUp)
	if err != nil {
		return err
	}
	var a seats.Availability
	_ = json.Unmarshal([]byte(av.Body), &a)
	fmt.Fprintf(out, "    %-50s → at once: %s; with minVersion=%d: version %d after %s ms (the projector caught up), %d free\n",
		"availability (projected from the stream)", seen, v, a.Version, av.Header.Get(seats.HeaderWaited), a.Free)
	if av.Status != 200 || a.Version < v || a.Free != 6 {
		return fmt.Errorf("availability: %d %s", av.Status, av.Body)
	}
	bk, err := e.readAtLeast(ctx, "ada's bookings on "+show, "/customers/ada/bookings", url.Values{"show": {show}}, v, viewCatchUp)
	if err != nil {
		return err
	}
	var bookings struct{ Bookings []seats.Booking }
	_ = json.Unmarshal([]byte(bk.Body), &bookings)
	var listed []string
	for _, b := range bookings.Bookings {
		listed = append(listed, fmt.Sprintf("%s %s %s at version %d", b.ReservationID, strings.Join(b.Seats, " "), b.Status, b.Version))
	}
	fmt.Fprintf(out, "    %-50s → %d after %s ms: %s\n", "ada's bookings across shows, minVersion="+fmt.Sprint(v), bk.Status, bk.Header.Get(seats.HeaderWaited), strings.Join(listed, "; "))
	if bk.Status != 200 || !strings.Contains(bk.Body, `"reservationId":"r-ada","seats":["B4","B5"],"status":"reserved"`) {
		return fmt.Errorf("bookings: %d %s", bk.Status, bk.Body)
	}

	// Snapshots: every 25 versions, in the command's transaction.
	big := show + "-big"
	if _, err := e.Command(ctx, fmt.Sprintf(`{"id":%q,"type":"ScheduleShow","showId":%q,"data":{"title":"Opera","startsAt":"2026-12-06T19:00:00Z","rows":4,"seatsPerRow":10}}`, big+"-s", big)); err != nil {
		return err
	}
	labels := seats.SeatLabels(4, 10)
	for i := range 29 {
		a, err := e.Command(ctx, fmt.Sprintf(`{"id":"%s-%d","type":"ReserveSeats","showId":%q,"data":{"reservationId":"r%d","customerId":"c%d","seats":[%q]}}`, big, i, big, i, i%7, labels[i]))
		if err != nil {
			return err
		}
		if a.Status != 200 {
			return fmt.Errorf("reservation %d on %s: %d %s", i, big, a.Status, a.Body)
		}
	}
	db := dynamodb.NewFromConfig(e.s.cfg)
	store := es.NewStore(db, es.Tables{Events: e.Events, Snapshots: e.Snapshots})
	snap, tail, err := store.Load(ctx, big, seats.Decider{}.StateSchema())
	if err != nil {
		return err
	}
	if snap == nil {
		return fmt.Errorf("%s has 30 versions and no snapshot", big)
	}
	fmt.Fprintf(out, "    %-50s → snapshot at version %d; a command loads it and the %d events after it\n", big+": 30 commands", snap.Version, len(tail))

	return e.rebuild(ctx, out, store, []string{show, big})
}

// rebuild rebuilds the views from the log into a new version, swaps, and
// compares it with the live one.
func (e *EventSourcing) rebuild(ctx context.Context, out io.Writer, store *es.Store, shows []string) error {
	last := map[string]int64{}
	for _, s := range shows {
		v, err := store.Version(ctx, s)
		if err != nil {
			return err
		}
		last[s] = v
		// The projector catches up on every show before the comparison.
		a, err := e.readAtLeast(ctx, "availability of "+s, "/shows/"+s+"/availability", nil, v, viewCatchUp)
		if err != nil {
			return err
		}
		if a.Status != 200 {
			return fmt.Errorf("availability of %s never reached version %d: %s", s, v, a.Body)
		}
	}
	cfg := e.s.cfg
	db := dynamodb.NewFromConfig(cfg)
	reg := replay.NewRegistry(ssm.NewFromConfig(cfg), e.ViewsParameter)
	p := projection.New(db, store, projection.FixedTable(""), seats.Views(es.NewExecutor[seats.Show](store, seats.Decider{})))
	var progress bytes.Buffer
	events := int64(0)
	for _, v := range last {
		events += v
	}
	fmt.Fprintf(out, "  rebuild the views from the log (cmd/eventstore rebuild, in-process here; handover 2 s)\n")
	start := time.Now()
	res, err := projection.Rebuild(ctx, replay.New(kinesis.NewFromConfig(cfg), db, reg), p, db, e.Events,
		replay.Options{Stream: e.Stream, Handover: 2 * time.Second, Poll: 100 * time.Millisecond, Progress: &progress})
	if err != nil {
		return fmt.Errorf("rebuild: %w\n%s", err, progress.String())
	}
	fmt.Fprintf(out, "    %s filled from the log from its start (%d events), caught up from %s (%d records), swapped in %s\n",
		res.Target, events, e.Stream, res.Read, time.Since(start).Round(100*time.Millisecond))
	d, err := projection.Compare(ctx, db, res.Current, res.Target)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "    rebuilt = live: %s; the readers now use %s\n", d, res.Target)
	if !d.Equal() || !res.Swapped {
		return fmt.Errorf("rebuild: swapped %t, %s", res.Swapped, d)
	}
	return nil
}

// summarize is a one-line view of an answer of the commands function.
func summarize(a esAnswer) string {
	var b struct {
		Status, Field, Reason, Error string
		Version, CurrentVersion      int64
		Events                       []struct{ Version int64 }
	}
	if json.Unmarshal([]byte(a.Body), &b) != nil {
		return truncateString(a.Body, 100)
	}
	switch b.Status {
	case es.StatusAccepted:
		if len(b.Events) > 1 {
			return fmt.Sprintf("accepted, versions %d–%d", b.Events[0].Version, b.Events[len(b.Events)-1].Version)
		}
		return fmt.Sprintf("accepted, version %d", b.Version)
	case es.StatusRefused:
		return fmt.Sprintf("refused: %s: %s", b.Field, b.Reason)
	case es.StatusConflict:
		return fmt.Sprintf("conflict: currentVersion %d", b.CurrentVersion)
	}
	return truncateString(a.Body, 100)
}
