package timeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// slowStore answers every call after latency, as DynamoDB does over the
// network (a few ms), where the in-process stand-in answers in microseconds.
type slowStore struct {
	*countingStore
	latency time.Duration
	// writeSlot, when set (a channel of one), makes writes wait their
	// latency one at a time, as a hot partition takes them: n writes then
	// take n × latency whatever the machine's speed.
	writeSlot chan struct{}
}

func (s *slowStore) wait(ctx context.Context) error {
	select {
	case <-time.After(s.latency):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitWrite is wait for a write.
func (s *slowStore) waitWrite(ctx context.Context) error {
	if s.writeSlot == nil {
		return s.wait(ctx)
	}
	select {
	case s.writeSlot <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.writeSlot }()
	return s.wait(ctx)
}

func (s *slowStore) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.countingStore.GetItem(ctx, in, opts...)
}

func (s *slowStore) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := s.waitWrite(ctx); err != nil {
		return nil, err
	}
	return s.countingStore.PutItem(ctx, in, opts...)
}

func (s *slowStore) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := s.waitWrite(ctx); err != nil {
		return nil, err
	}
	return s.countingStore.DeleteItem(ctx, in, opts...)
}

func (s *slowStore) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.countingStore.Query(ctx, in, opts...)
}

// TestFollowOverALongTimelineCompletesOverRedeliveries: bob's timeline
// already holds 400 of ann's tweets among 400 of carl's when a follow
// record of bob → ann is processed (an unfollow and a re-follow processed
// after both happened: ann's entries stay for the INSERT, go for the
// REMOVE). Every entry of ann's in the timeline is the record's to touch,
// more than one invocation can at a few ms a call (deadline), or than a
// store throttling one call in 97 lets through (throttled: a throttle
// fails the record, never the batch). Each delivery stops with its
// progress saved, each redelivery resumes after it, never before it (past
// a deadline: gets further), and the record is applied: the view is the
// join, carl's entries untouched, and ann's written no more than twice
// (her latest tweets once as latest, once as found in the timeline by a
// later delivery) plus, under throttling, the page each delivery redoes.
func TestFollowOverALongTimelineCompletesOverRedeliveries(t *testing.T) {
	type stores struct {
		name string
		wrap func(*countingStore) store
		// invoke bounds each delivery (a deadline) or not.
		invoke time.Duration
	}
	for _, st := range []stores{
		// 10 s: 7.5 s of work a delivery once the handler's 2.5 s stop
		// margin is taken; at 4 s (1.5 s), and then at 6 s (3.5 s) once
		// make test's parts grew, a loaded machine (its parts on 2 cores,
		// the stand-in's calls taking hundreds of ms) made no progress in
		// three deliveries in a row: a page read and its save did not fit.
		// Writes one at a time at 20 ms: each of the 400 entries is a
		// write, 8 s of them, so no machine is fast enough to apply the
		// record in one delivery (at 10 ms a call, in parallel, a faster
		// stand-in did).
		//
		// Its stand-in is its own: on the package's shared one, the other
		// tests' calls (the throttled variant's run as fast as moto answers)
		// queued ahead of its own, and under make test's load a page read
		// and its save took longer than the 2.5 s the handler keeps for
		// the save, three deliveries in a row (it failed so once).
		{"deadline", func(c *countingStore) store {
			return &slowStore{countingStore: c, latency: 20 * time.Millisecond, writeSlot: make(chan struct{}, 1)}
		}, 10 * time.Second},
		{"throttled", func(c *countingStore) store { return &throttlingStore{countingStore: c, every: 97} }, 0},
	} {
		for _, tc := range []struct {
			name    string
			event   string
			follows bool
		}{
			{"follow", "INSERT", true},
			{"unfollow", "REMOVE", false},
		} {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				const n = 400
				db := sharedDB
				if st.invoke > 0 {
					db = dynamodb.NewFromConfig(standintest.Config(t, standintest.Start(t)))
				}
				tb, rec, annEntries, carlEntries := longTimeline(t, db, n, tc.event, tc.follows)
				ctx := context.Background()
				counting := &countingStore{Client: db, table: tb.Timelines, puts: map[string]int{}}
				h := New(st.wrap(counting), tb, WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
				h.fanOutStop = 2 * time.Second // as in TestTweetOfManyFollowersCompletesOverRedeliveries
				// stalls counts deliveries in a row that made no progress: a
				// loaded machine can spend a bounded delivery's little time
				// before any entry converges, but one that never resumes
				// (redoing its work at each delivery) stalls every time.
				done, deliveries, stalls := 0, 0, 0
				for ; deliveries < 100; deliveries++ {
					start := time.Now()
					ictx, cancel := ctx, context.CancelFunc(func() {})
					if st.invoke > 0 {
						ictx, cancel = context.WithTimeout(ctx, st.invoke)
					}
					resp, err := h.Handle(ictx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}})
					cancel()
					if err != nil {
						t.Fatalf("delivery %d failed the batch: %v", deliveries+1, err)
					}
					if len(resp.BatchItemFailures) == 0 {
						break
					}
					p, err := h.loadProgress(ctx, followProgressKey("bob", "ann"), "100")
					if err != nil {
						t.Fatal(err)
					}
					if p.done < done {
						t.Fatalf("delivery %d lost progress: %d entries done before it, %d after (started %v)", deliveries+1, done, p.done, p.started)
					}
					if stalls = stalls + 1; p.done > done {
						stalls = 0
					}
					if st.invoke > 0 && stalls == 3 {
						t.Fatalf("deliveries %d to %d made no progress: %d entries done (started %v)", deliveries-1, deliveries+1, p.done, p.started)
					}
					t.Logf("delivery %d: %d entries done in %v, cursor after %q", deliveries+1, p.done, time.Since(start).Round(time.Millisecond), p.after)
					done = p.done
				}
				if deliveries == 100 {
					t.Fatalf("the %s was not applied in %d deliveries", tc.name, deliveries)
				}
				if deliveries < 1 {
					t.Fatalf("the %s was applied in one invocation: the test shows nothing (raise n)", tc.name)
				}
				t.Logf("applied in %d deliveries", deliveries+1)
				want := slices.Clone(carlEntries)
				if tc.follows {
					want = append(want, annEntries...)
				}
				slices.Sort(want)
				if got := view(t, db, tb.Timelines); !slices.Equal(got, want) {
					t.Errorf("view has %d entries, want %d: carl's, and ann's only if bob follows her", len(got), len(want))
				}
				limit := 2 * n
				if st.invoke == 0 {
					limit += (deliveries + 1) * followScanPage
				}
				for u, c := range counting.puts {
					if u != "bob" {
						t.Errorf("%s's timeline was written", u)
					}
					if c > limit {
						t.Errorf("%d writes to bob's timeline, want at most %d", c, limit)
					}
				}
			})
		}
	}
}

// throttlingStore refuses every nth call that reads or writes the
// timelines or progress tables as DynamoDB does once the SDK's own retries
// of a throttled request are spent, which no local endpoint can be made to do.
type throttlingStore struct {
	*countingStore
	every int

	mu        sync.Mutex
	calls     int
	throttled int
}

func (s *throttlingStore) throttle() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls%s.every != 0 {
		return nil
	}
	s.throttled++
	return &types.ProvisionedThroughputExceededException{Message: aws.String("Rate of requests exceeds the allowed throughput.")}
}

func (s *throttlingStore) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := s.throttle(); err != nil {
		return nil, err
	}
	return s.countingStore.PutItem(ctx, in, opts...)
}

func (s *throttlingStore) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := s.throttle(); err != nil {
		return nil, err
	}
	return s.countingStore.DeleteItem(ctx, in, opts...)
}

func (s *throttlingStore) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if err := s.throttle(); err != nil {
		return nil, err
	}
	return s.countingStore.Query(ctx, in, opts...)
}

func (s *throttlingStore) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := s.throttle(); err != nil {
		return nil, err
	}
	return s.countingStore.UpdateItem(ctx, in, opts...)
}

// longTimeline puts n tweets each by ann and carl in the tables, all of
// them in bob's timeline, bob following carl (and ann when follows), and
// returns the follow record of bob → ann (event INSERT or REMOVE) with the
// timeline entries of ann's and carl's ("bob|<sort key>").
func longTimeline(t *testing.T, db *dynamodb.Client, n int, event string, follows bool) (tb Tables, rec events.DynamoDBEventRecord, annEntries, carlEntries []string) {
	t.Helper()
	tb = createTables(t, db, "long")
	ctx := context.Background()
	var tweets, entries []map[string]types.AttributeValue
	for i := range n {
		for _, author := range []string{"ann", "carl"} {
			id, at := fmt.Sprintf("%s%05d", author, i), fmt.Sprintf("2026-12-10T00:%02d:%02dZ", i/60, i%60)
			tw := map[string]types.AttributeValue{AttrAuthorID: s(author), AttrTweetID: s(id), AttrCreatedAt: s(at), AttrText: s("hello from " + author)}
			tweets = append(tweets, tw)
			e := map[string]types.AttributeValue{AttrUserID: s("bob"), AttrSortKey: s(SortKey(at, author, id))}
			for k, v := range tw {
				e[k] = v
			}
			entries = append(entries, e)
			if author == "ann" {
				annEntries = append(annEntries, "bob|"+SortKey(at, author, id))
			} else {
				carlEntries = append(carlEntries, "bob|"+SortKey(at, author, id))
			}
		}
	}
	put := func(table string, items []map[string]types.AttributeValue) {
		for chunk := range slices.Chunk(items, 25) {
			var reqs []types.WriteRequest
			for _, it := range chunk {
				reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
			}
			out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
			if err != nil || len(out.UnprocessedItems) > 0 {
				t.Fatalf("writing %s: %v (%d unprocessed)", table, err, len(out.UnprocessedItems))
			}
		}
	}
	put(tb.Tweets, tweets)
	put(tb.Timelines, entries)
	edges := []map[string]types.AttributeValue{{AttrFollowerID: s("bob"), AttrFolloweeID: s("carl")}}
	if follows {
		edges = append(edges, map[string]types.AttributeValue{AttrFollowerID: s("bob"), AttrFolloweeID: s("ann")})
	}
	put(tb.Follows, edges)
	keys := map[string]events.DynamoDBAttributeValue{AttrFollowerID: sattr("bob"), AttrFolloweeID: sattr("ann")}
	rec = events.DynamoDBEventRecord{EventName: event, Change: events.DynamoDBStreamRecord{SequenceNumber: "100", Keys: keys}}
	return tb, rec, annEntries, carlEntries
}

// failingPuts refuses, once each, the put of the named tweets' entries in
// the timelines table, as DynamoDB does a throttled request the SDK has
// stopped retrying.
type failingPuts struct {
	*countingStore
	mu   sync.Mutex
	fail map[string]bool
}

func (s *failingPuts) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if aws.ToString(in.TableName) == s.table {
		s.mu.Lock()
		id := str(in.Item, AttrTweetID)
		fail := s.fail[id]
		delete(s.fail, id)
		s.mu.Unlock()
		if fail {
			return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("Rate of requests exceeds the allowed throughput.")}
		}
	}
	return s.countingStore.PutItem(ctx, in, opts...)
}

// TestFollowSavesItsLatestTweetsDoneAfterAPartlyDoneDelivery: a delivery
// stops among the followee's latest tweets (ann00120 refused) and saves
// how far it got; the next does the rest of them and stops at the first
// entry of the timeline (ann00000 refused). Its progress must say the
// latest tweets are all done, as it would had the first delivery not
// stopped among them, so that the one after reads on from the timeline
// rather than converging the rest of the latest tweets again.
func TestFollowSavesItsLatestTweetsDoneAfterAPartlyDoneDelivery(t *testing.T) {
	const n = 150 // ann's latest MaxFanIn are ann00149 down to ann00050
	db := sharedDB
	tb, rec, annEntries, carlEntries := longTimeline(t, db, n, "INSERT", true)
	ctx := context.Background()
	st := &failingPuts{countingStore: &countingStore{Client: db, table: tb.Timelines, puts: map[string]int{}}}
	h := New(st, tb, WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	deliver := func(fail ...string) progress {
		t.Helper()
		st.mu.Lock()
		st.fail = map[string]bool{}
		for _, id := range fail {
			st.fail[id] = true
		}
		st.mu.Unlock()
		resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}})
		if err != nil || len(resp.BatchItemFailures) != 1 {
			t.Fatalf("delivery refusing %v: %v, %v; want the record failed", fail, resp, err)
		}
		p, err := h.loadProgress(ctx, followProgressKey("bob", "ann"), "100")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := deliver("ann00120"); p.started || p.latest == "" || p.latest <= "ann00120" {
		t.Fatalf("after the first delivery: %+v; want the latest tweets partly done, down to one newer than ann00120", p)
	}
	if p := deliver("ann00000"); !p.started || p.state != fanOutRunning || p.done != MaxFanIn {
		t.Errorf("after the second delivery: %+v; want the latest tweets all done (%d entries), the timeline not begun", p, MaxFanIn)
	}
	resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("third delivery: %v, %v; want the record applied", resp, err)
	}
	want := append(slices.Clone(carlEntries), annEntries...)
	slices.Sort(want)
	if got := view(t, db, tb.Timelines); !slices.Equal(got, want) {
		t.Errorf("view has %d entries, want %d", len(got), len(want))
	}
}

// TestConvergeStartsNoEntryItCannotFinish: a fan-out started entries until
// fanOutStop before its deadline whatever they took, so on a store slow
// enough (a loaded stand-in, a latency spike) the last ones ran past the
// deadline, the delivery's progress could not be saved and the next
// delivery redid the same work (make test saw three deliveries in a row
// make none). Judging by the slowest entry so far, it starts none it does
// not expect to finish before its stop: the entries it ran are done, and
// no error is left for the progress save to inherit.
func TestConvergeStartsNoEntryItCannotFinish(t *testing.T) {
	const n = 2 * fanOutConcurrency
	db := sharedDB
	tb, _, annEntries, _ := longTimeline(t, db, n, "INSERT", true)
	// Five store calls an entry (two reads, a write, two reads) at 500 ms:
	// about 2.5 s an entry, so a second wave started at 2.5 s would end at
	// 5 s, past the 4 s deadline, and the stop (3.7 s) lets it start. A
	// loaded stand-in adding up to 300 ms a call still ends the first wave
	// in time (at 300 ms a call and a 2.5 s deadline, a make test run with
	// more than its own load on the cores did not).
	h := New(&slowStore{countingStore: &countingStore{Client: db, table: tb.Timelines, puts: map[string]int{}}, latency: 500 * time.Millisecond}, tb)
	h.fanOutStop = 300 * time.Millisecond
	var entries []entry
	for i := range n {
		id, at := fmt.Sprintf("ann%05d", i), fmt.Sprintf("2026-12-10T00:%02d:%02dZ", i/60, i%60)
		entries = append(entries, entry{user: "bob", author: "ann", id: id, createdAt: at})
	}
	if len(annEntries) != n {
		t.Fatalf("%d of ann's entries, want %d", len(annEntries), n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	done, _, err := h.convergeAll(ctx, entries)
	if err != nil {
		t.Fatalf("converged %d entries, then %v: an entry started that could not finish before the deadline", done, err)
	}
	if done == 0 || done == n {
		t.Errorf("converged %d of %d entries: want the first wave only", done, n)
	}
}
