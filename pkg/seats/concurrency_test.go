package seats_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/seats"
)

var concurrencySeeds = flag.Int("concurrency.seeds", 2, "seeds of TestConcurrentCommands")

type sent struct {
	id, body string
	res      es.Result
}

// TestConcurrentCommands: clients send random reservations, cancellations
// and moves on a few small shows at once — many aimed at the same seats —
// and resend some of them (the same id, at the same time as the first).
// Then:
//
//   - no lost update: every accepted command's events are in the log, at
//     the versions its answer named, under its id, exactly once; versions
//     run 1, 2, 3, … without a gap;
//   - no double booking: the whole log folds (Evolve refuses a seat held
//     twice), and no seat is in two active reservations;
//   - a refused command appended nothing; every answer to the same id is
//     the same (a 409 "kept changing" keeps no answer: the command is sent
//     again after the rush and judged by what that gets);
//   - the seat map written with the commands equals the state folded from
//     the log; the snapshot plus its tail equals it too.
func TestConcurrentCommands(t *testing.T) {
	for s := 1; s <= *concurrencySeeds; s++ {
		t.Run(fmt.Sprintf("seed%d", s), func(t *testing.T) { concurrentCommands(t, uint64(s)) })
	}
}

func concurrentCommands(t *testing.T, seed uint64) {
	ctx := context.Background()
	f := newFixture(t, es.WithSnapshotEvery[seats.Show](4))
	shows := []string{"show-a", "show-b", "show-c"}
	for i, s := range shows {
		if a := f.command(t, fmt.Sprintf(`{"id":"sched-%d","type":"ScheduleShow","showId":%q,"data":{"title":"T","startsAt":"2026-12-0%dT20:00:00Z","rows":2,"seatsPerRow":4}}`, i, s, i+1)); a.status != 200 {
			t.Fatal(a)
		}
	}
	labels := seats.SeatLabels(2, 4)
	const clients, perClient = 6, 25
	var mu sync.Mutex
	var all []sent
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			var mine []string // reservation ids this client made, as "<show>/<rid>"
			send := func(id, body string) {
				res, err := f.x.Execute(ctx, []byte(body))
				if err != nil {
					t.Errorf("%s: %v", body, err)
					return
				}
				mu.Lock()
				all = append(all, sent{id, body, res})
				mu.Unlock()
			}
			for i := range perClient {
				id := fmt.Sprintf("c%d-%d", c, i)
				show := shows[rng.IntN(len(shows))]
				pick := func() string {
					n := rng.IntN(3) + 1
					p := rng.Perm(len(labels))[:n]
					out := make([]string, n)
					for j, k := range p {
						out[j] = labels[k]
					}
					b, _ := json.Marshal(out)
					return string(b)
				}
				var body string
				switch r := rng.IntN(10); {
				case r < 6 || len(mine) == 0:
					rid := fmt.Sprintf("r%d-%d", c, i)
					body = fmt.Sprintf(`{"id":%q,"type":"ReserveSeats","showId":%q,"data":{"reservationId":%q,"customerId":"cust%d","seats":%s}}`, id, show, rid, c, pick())
					mine = append(mine, show+"/"+rid)
				case r < 8:
					sr := mine[rng.IntN(len(mine))]
					show, rid := sr[:6], sr[7:]
					body = fmt.Sprintf(`{"id":%q,"type":"CancelReservation","showId":%q,"data":{"reservationId":%q}}`, id, show, rid)
				default:
					sr := mine[rng.IntN(len(mine))]
					show, rid := sr[:6], sr[7:]
					body = fmt.Sprintf(`{"id":%q,"type":"MoveReservation","showId":%q,"data":{"reservationId":%q,"seats":%s}}`, id, show, rid, pick())
				}
				if rng.IntN(5) == 0 {
					// A retry racing the first attempt.
					var inner sync.WaitGroup
					inner.Add(2)
					go func() { defer inner.Done(); send(id, body) }()
					go func() { defer inner.Done(); send(id, body) }()
					inner.Wait()
				} else {
					send(id, body)
				}
			}
		}()
	}
	wg.Wait()

	// A command that lost its append to others on every attempt is answered
	// 409 "send it again" and keeps no record: sent again once the rush is
	// over, it must be decided, and it is judged by that answer.
	conflicts := 0
	for i, s := range all {
		if s.res.Status != es.StatusConflict {
			continue
		}
		conflicts++
		res, err := f.x.Execute(ctx, []byte(s.body))
		if err != nil {
			t.Fatalf("%s sent again after a conflict: %v", s.id, err)
		}
		all[i].res = res
	}

	byID := map[string][]sent{}
	accepted, refused := 0, 0
	for _, s := range all {
		byID[s.id] = append(byID[s.id], s)
		switch s.res.Status {
		case es.StatusAccepted:
			accepted++
		case es.StatusRefused:
			refused++
		default:
			t.Errorf("%s: %s %s", s.id, s.res.Status, s.res.Body)
		}
	}
	for id, answers := range byID {
		for _, a := range answers[1:] {
			if string(a.res.Body) != string(answers[0].res.Body) {
				t.Errorf("command %s answered differently: %s and %s", id, answers[0].res.Body, a.res.Body)
			}
		}
	}
	if accepted < 20 || refused < 5 {
		t.Errorf("%d accepted, %d refused: the workload should produce both", accepted, refused)
	}
	for _, show := range shows {
		log, err := f.store.Events(ctx, show, 0, 0) // also checks versions have no gap
		if err != nil {
			t.Fatal(err)
		}
		events := map[string][]int64{}
		for _, e := range log {
			events[e.CommandID] = append(events[e.CommandID], e.Version)
		}
		for id, answers := range byID {
			a := answers[0].res
			if a.AggregateID != show {
				continue
			}
			var want []int64
			if a.Status == es.StatusAccepted {
				var body struct {
					Events []struct{ Version int64 }
				}
				_ = json.Unmarshal(a.Body, &body)
				for _, e := range body.Events {
					want = append(want, e.Version)
				}
			}
			if !slices.Equal(events[id], want) {
				t.Errorf("command %s (%s): versions %v in the log, want %v", id, a.Status, events[id], want)
			}
		}
		state, v, err := f.x.Fold(nil, log) // Evolve refuses any double booking
		if err != nil {
			t.Fatalf("%s: the log does not fold: %v", show, err)
		}
		held := map[string]string{}
		for rid, r := range state.Reservations {
			for _, seat := range r.Seats {
				if other, ok := held[seat]; ok {
					t.Errorf("%s: seat %s held by %s and %s", show, seat, other, rid)
				}
				held[seat] = rid
			}
		}
		loaded, lv, err := f.x.Load(ctx, show)
		if err != nil || lv != v || !reflect.DeepEqual(loaded, state) {
			t.Errorf("%s: snapshot + tail %+v at %d (%v), whole log %+v at %d", show, loaded, lv, err, state, v)
		}
		out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &f.views, Key: seats.SeatMapKey(show), ConsistentRead: new(true)})
		if err != nil {
			t.Fatal(err)
		}
		var got seats.SeatMap
		if err := attributevalue.UnmarshalMap(out.Item, &got); err != nil {
			t.Fatal(err)
		}
		want, _ := seats.SeatMapItem(show, v, state)
		var wantMap seats.SeatMap
		_ = attributevalue.UnmarshalMap(want, &wantMap)
		if !reflect.DeepEqual(got, wantMap) {
			t.Errorf("%s: seat map %+v, the log says %+v", show, got, wantMap)
		}
	}
	t.Logf("%d answers: %d accepted, %d refused, %d sent again after a conflict", len(all), accepted, refused, conflicts)
}
