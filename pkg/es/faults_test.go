package es_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
)

var (
	faultSeeds     = flag.Int("fault.seeds", 8, "fault-injection scenarios on the in-process DynamoDB (internal/memdb); make soak runs many more")
	faultMotoSeeds = flag.Int("fault.moto", 1, "of those scenarios, how many (the first) also run on moto, so that memdb cannot drift from it")
	faultFirstSeed = flag.Int("fault.seed", 1, "the first scenario's seed: a failing scenario prints the command that runs it alone")
)

// The event store's tables on memdb, keyed as es.CreateTables makes them.
var memdbTables = map[string]memdb.Schema{
	"events":    {PK: es.AttrAggregateID, SK: es.AttrVersion},
	"snapshots": {PK: es.AttrAggregateID},
	"commands":  {PK: es.AttrCommandRecordID},
}

// sentCommand is one command a client sends, and the answer it ended with.
type sentCommand struct {
	id, account, typ string
	body             []byte
	events           int // events it appends when accepted
	amount           int
	final            es.Result
}

// TestFaultInjectionCommandsExactlyOnce plays seeded command histories:
// clients at once on a few accounts (deposits in one or several events,
// withdrawals the balance may refuse, some with an expectedVersion that
// may be stale), each command sent until it gets an answer through a
// DynamoDB that crashes before a write, throttles, and makes writes whose
// answer is lost, on executors that cold-start; answered commands are sent
// again now and then. Then every account's log must hold exactly the
// events of the commands answered "accepted", each once, at the versions
// their answers name; replaying it never overdraws; the balance is the sum
// of what was accepted; the snapshot and the log agree; and every command
// sent again got its first answer back, byte for byte. The scenarios run
// on memdb, and the first -fault.moto on moto too, so that memdb cannot
// drift from it.
func TestFaultInjectionCommandsExactlyOnce(t *testing.T) {
	keyedtest.Seeds{Test: "TestFaultInjectionCommandsExactlyOnce", Package: "./pkg/es", First: *faultFirstSeed, N: *faultSeeds, Moto: *faultMotoSeeds}.Run(t,
		func(t *testing.T, backend string, seed int) { commandScenario(t, backend, uint64(seed)) })
}

func commandScenario(t *testing.T, backend string, seed uint64) {
	ctx := context.Background()
	var store memdb.Client
	var tables es.Tables
	if backend == "moto" {
		db, s := newStore(t)
		store, tables = db, s.Tables()
	} else {
		store, tables = memdb.New(memdbTables), es.Tables{Events: "events", Snapshots: "snapshots", Commands: "commands"}
	}
	rng := rand.New(rand.NewPCG(seed, 53))
	accounts := []string{"acct-a", "acct-b", "acct-c"}
	const clients = 3
	sent := make([][]*sentCommand, clients)
	for c := range sent {
		for i := 0; i < 10+rng.IntN(15); i++ {
			sc := &sentCommand{id: fmt.Sprintf("cmd-%d-%d", c, i), account: accounts[rng.IntN(len(accounts))], amount: 1 + rng.IntN(100)}
			extra := ""
			if rng.IntN(2) == 0 {
				sc.typ, sc.events = "Deposit", 1+rng.IntN(3)
				extra = fmt.Sprintf(`,"split":%d`, sc.events)
			} else {
				sc.typ, sc.events, sc.amount = "Withdraw", 1, 1+rng.IntN(150)
			}
			sc.body = cmd(sc.id, sc.typ, sc.account, sc.amount, extra)
			sent[c] = append(sent[c], sc)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		bad = append(bad, fmt.Sprintf(format, args...))
	}
	for c := range clients {
		crng := rand.New(rand.NewPCG(seed, uint64(100+c)))
		budget := keyedtest.NewBudget(3)
		fdb := &keyedtest.DB{Client: store, B: budget, ThrottleEvery: 25, LoseEvery: 8}
		newExecutor := func() *es.Executor[account] {
			return es.NewExecutor(es.NewStore(fdb, tables), ledger{}, es.WithSnapshotEvery[account](3))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := newExecutor()
			seen := map[string]int64{} // the version this client last saw of each account
			var answered []*sentCommand
			for _, sc := range sent[c] {
				body := sc.body
				if v, ok := seen[sc.account]; ok && crng.IntN(3) == 0 {
					// Decided on what this client saw: stale if another
					// client appended since.
					body = bytes.Replace(body, []byte(`"data":`), fmt.Appendf(nil, `"expectedVersion":%d,"data":`, v), 1)
					sc.body = body
				}
				for attempt := 0; ; attempt++ {
					if attempt > 200 {
						fail("%s: no answer after %d attempts", sc.id, attempt)
						return
					}
					if crng.IntN(8) == 0 {
						x = newExecutor() // a cold start
					}
					if crng.IntN(3) == 0 {
						budget.Arm(int64(crng.IntN(3)))
					}
					res, err := x.Execute(ctx, body)
					budget.Arm(-1)
					runtime.Gosched()
					if err != nil {
						continue // a crash, a throttle or a lost answer: sent again
					}
					sc.final = res
					if res.Status == es.StatusAccepted || res.Status == es.StatusRefused {
						seen[sc.account] = res.Version
						answered = append(answered, sc)
					}
					break
				}
				runtime.Gosched() // the clients' commands interleave
				if len(answered) > 0 && crng.IntN(4) == 0 {
					// A recorded command sent again (a client's retry
					// after its answer was lost on the way back).
					again := answered[crng.IntN(len(answered))]
					for {
						res, err := x.Execute(ctx, again.body)
						if err != nil {
							continue
						}
						if !res.Replayed || res.Status != again.final.Status || !bytes.Equal(res.Body, again.final.Body) {
							fail("%s sent again: %s replayed=%v %s, first answer %s %s", again.id, res.Status, res.Replayed, res.Body, again.final.Status, again.final.Body)
						}
						break
					}
				}
			}
		}()
	}
	wg.Wait()

	// The log against the answers.
	clean := es.NewStore(store, tables)
	byID := map[string]*sentCommand{}
	for _, list := range sent {
		for _, sc := range list {
			byID[sc.id] = sc
		}
	}
	statuses := map[string]int{}
	for _, acct := range accounts {
		evs, err := clean.Events(ctx, acct, 0, 0)
		if err != nil {
			t.Fatal(err) // includes a gap in the versions
		}
		var balance int
		var ops []int
		perCommand := map[string][]int64{}
		for _, e := range evs {
			perCommand[e.CommandID] = append(perCommand[e.CommandID], e.Version)
		}
		for id, versions := range perCommand {
			sc := byID[id]
			switch {
			case sc == nil:
				fail("%s: events %v of unknown command %s", acct, versions, id)
			case sc.final.Status != es.StatusAccepted:
				fail("%s: command %s answered %s (%s) has events %v in the log", acct, id, sc.final.Status, sc.final.Body, versions)
			case len(versions) != sc.events || versions[len(versions)-1] != sc.final.Version || versions[len(versions)-1]-versions[0] != int64(len(versions)-1):
				fail("%s: command %s (%d events, answered at version %d) has events at versions %v", acct, id, sc.events, sc.final.Version, versions)
			}
		}
		for _, list := range sent {
			for _, sc := range list {
				if sc.account != acct {
					continue
				}
				statuses[sc.final.Status]++
				if sc.final.Status == es.StatusAccepted {
					if _, ok := perCommand[sc.id]; !ok {
						fail("%s: command %s was answered accepted at version %d but none of its events is in the log (lost)", acct, sc.id, sc.final.Version)
					}
					if sc.typ == "Deposit" {
						balance += sc.amount * sc.events
					} else {
						balance -= sc.amount
					}
				}
			}
		}
		// Replaying the log never overdraws, and ends at the balance of
		// what was accepted.
		x := es.NewExecutor(clean, ledger{}, es.WithSnapshotEvery[account](3))
		state, version, err := x.Fold(nil, evs)
		if err != nil {
			fail("%s: replaying the log: %v", acct, err)
			continue
		}
		ops = state.Ops
		if state.Balance != balance {
			fail("%s: balance %d after replaying %d events (%v), want %d from the accepted commands", acct, state.Balance, len(evs), ops, balance)
		}
		loaded, lv, err := x.Load(ctx, acct)
		if err != nil {
			t.Fatal(err)
		}
		if lv != version || !reflect.DeepEqual(loaded, state) {
			fail("%s: snapshot and tail give %+v at version %d, the whole log %+v at %d", acct, loaded, lv, state, version)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("%d problems:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	if statuses[es.StatusAccepted] == 0 {
		t.Fatalf("no command was accepted: the scenario proved nothing (%v)", statuses)
	}
	t.Logf("answers %v", statuses)
}

// throttledTransactions is moto's DynamoDB whose TransactWriteItems fails
// with err while left > 0: DynamoDB throttling the transaction, as the SDK
// reports it once its own retries are spent.
type throttledTransactions struct {
	*dynamodb.Client
	err  error
	left atomic.Int64
}

func (d *throttledTransactions) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if d.left.Add(-1) >= 0 {
		return nil, d.err
	}
	return d.Client.TransactWriteItems(ctx, in, opts...)
}

// TestThrottledAppendIsRetryable: a command whose transaction DynamoDB
// throttles — ProvisionedThroughputExceededException, ThrottlingException,
// or the transaction cancelled with ThrottlingError or
// ProvisionedThroughputExceeded as its reasons — is an error the commands
// API answers 503 (send it again with the same id), never the 400 of a
// command that can never fit one transaction, nor the 500 of views ahead
// of the log; also for a command whose due snapshot is left out for not
// fitting. Nothing is appended, and the command sent again once the
// throttling stops is accepted at the version a clean run gives.
func TestThrottledAppendIsRetryable(t *testing.T) {
	cancelled := func(code string) error {
		return &ddbtypes.TransactionCanceledException{Message: aws.String("Transaction cancelled"),
			CancellationReasons: []ddbtypes.CancellationReason{{Code: aws.String("None")}, {Code: aws.String(code), Message: aws.String("throttled")}}}
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"ProvisionedThroughputExceededException", &ddbtypes.ProvisionedThroughputExceededException{Message: aws.String("throughput exceeded")}},
		{"ThrottlingException", &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate of requests exceeds the allowed throughput."}},
		{"cancelled, ThrottlingError", cancelled("ThrottlingError")},
		{"cancelled, ProvisionedThroughputExceeded", cancelled("ProvisionedThroughputExceeded")},
	} {
		for _, c := range []struct {
			name, extra string
			version     int64
		}{
			{"one event", "", 1},
			{"99 events, the due snapshot left out", `,"split":99`, 99},
		} {
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				ctx := context.Background()
				db, store := newStore(t)
				fdb := &throttledTransactions{Client: db, err: tc.err}
				x := es.NewExecutor[account](es.NewStore(fdb, store.Tables()), ledger{})
				body := cmd("c-1", "Deposit", "a1", 1, c.extra)
				fdb.left.Store(2) // with its snapshot, then without it
				res, err := x.Execute(ctx, body)
				if err == nil {
					t.Fatalf("answered %d %.300s; want an error the API answers 503, to be sent again", res.HTTPStatus, res.Body)
				}
				if errors.Is(err, es.ErrAheadOfLog) {
					t.Fatalf("err = %v; the API answers it 500, never to be retried", err)
				}
				if _, v, err := x.Load(ctx, "a1"); err != nil || v != 0 {
					t.Fatalf("a1 at version %d (%v) after the throttled command; want nothing appended", v, err)
				}
				fdb.left.Store(0)
				if res := run(t, x, body); res.HTTPStatus != 200 || res.Version != c.version || res.Replayed {
					t.Fatalf("sent again: %d at version %d (replayed %v) %.300s; want accepted at %d", res.HTTPStatus, res.Version, res.Replayed, res.Body, c.version)
				}
			})
		}
	}
}
