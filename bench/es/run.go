package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/eventsource"
	"github.com/tributary-dev/tributary/emulator/rie"
	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/projection"
	"github.com/tributary-dev/tributary/pkg/seats"
)

// config is one run of the driver.
type config struct {
	commands, clients, shows, lagCommands int
	rate                                  float64
	verbose                               bool
}

func (c config) logf(w io.Writer, format string, args ...any) {
	if c.verbose {
		fmt.Fprintf(w, "es: "+format+"\n", args...)
	}
}

const (
	rows, seatsPerRow = 10, 20
	tablePrefix       = "bench-es"
)

func run(ctx context.Context, cfg config, out, log io.Writer) error {
	srv, counter, err := standin.StartCounting(ctx, standin.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer srv.Stop()
	awsCfg, err := standin.Config(ctx, srv.Endpoint())
	if err != nil {
		return err
	}
	db, kin := dynamodb.NewFromConfig(awsCfg), kinesis.NewFromConfig(awsCfg)
	tables := es.Tables{Events: tablePrefix + "-events", Snapshots: tablePrefix + "-snapshots", Commands: tablePrefix + "-commands"}
	views, streamName := tablePrefix+"-views", tablePrefix+"-published"
	if err := es.CreateTables(ctx, db, tables); err != nil {
		return err
	}
	if err := seats.CreateViewsTable(ctx, db, views); err != nil {
		return err
	}
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(streamName), ShardCount: aws.Int32(1)}); err != nil {
		return err
	}
	store := es.NewStore(db, tables)
	x := es.NewExecutor[seats.Show](store, seats.Decider{}, es.WithSyncView(seats.SyncView(projection.FixedTable(views))))
	api := seats.NewAPI(x, db, projection.FixedTable(views))

	// Phase 1: commands at once, counted.
	shows := make([]string, cfg.shows)
	for i := range shows {
		shows[i] = fmt.Sprintf("show-%03d", i)
	}
	if err := schedule(ctx, api, shows); err != nil {
		return err
	}
	counter.Reset()
	start := time.Now()
	res, err := load(ctx, api, shows, cfg.commands, cfg.clients, 0, 1)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	c := counter.Snapshot()
	requests := 0
	for _, op := range c.DynamoDB {
		requests += op.Requests
	}
	cfg.logf(log, "%d commands in %s: %d accepted, %d refused; DynamoDB %v", cfg.commands, elapsed, res.accepted, res.refused, c.DynamoDB)

	// Phase 2: the pipeline running, commands at a steady rate on new shows.
	var mu sync.Mutex
	var lags []time.Duration
	p := projection.New(db, store, projection.FixedTable(views), seats.Views(x), projection.WithoutStateViews(),
		projection.WithLagObserver(func(d time.Duration) { mu.Lock(); lags = append(lags, d); mu.Unlock() }))
	pub := es.NewPublisher(kin, streamName)
	streamArn, err := tableStream(ctx, db, tables.Events)
	if err != nil {
		return err
	}
	sum, err := kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(streamName)})
	if err != nil {
		return err
	}
	settings := func(fn, arn string) eventsource.Settings {
		return eventsource.Settings{FunctionName: fn, SourceARN: arn, BatchSize: 100, StartingPosition: eventsource.Latest,
			ReportBatchItemFailures: true, BisectBatchOnFunctionError: true, MaximumRetryAttempts: 3, Enabled: true}
	}
	pp, err := eventsource.NewDynamoDBStreams(awsCfg, settings("publish", streamArn), invoker[events.DynamoDBEvent, events.DynamoDBEventResponse](pub.Handle), nil)
	if err != nil {
		return err
	}
	pk, err := eventsource.NewKinesis(awsCfg, settings("project", aws.ToString(sum.StreamDescriptionSummary.StreamARN)),
		invoker[events.KinesisEvent, events.KinesisEventResponse](p.Handle), nil)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, pl := range []*eventsource.Poller{pp, pk} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = pl.Run(runCtx) }()
	}
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(500 * time.Millisecond) // the LATEST iterators are taken
	lagShows := make([]string, cfg.shows)
	for i := range lagShows {
		lagShows[i] = fmt.Sprintf("lag-%03d", i)
	}
	if err := schedule(ctx, api, lagShows); err != nil {
		return err
	}
	rate := cfg.rate
	if rate == 0 {
		rate = float64(cfg.commands) / elapsed.Seconds() / 3
	}
	cfg.logf(log, "projection phase: %d commands at %.1f/s", cfg.lagCommands, rate)
	lagRes, err := load(ctx, api, lagShows, cfg.lagCommands, cfg.clients, rate, 2)
	if err != nil {
		return err
	}
	want := len(lagShows) + lagRes.events
	waitCtx, stop := context.WithTimeout(ctx, 2*time.Minute)
	defer stop()
	for p.Stats().EventsApplied < int64(want) {
		select {
		case <-waitCtx.Done():
			return fmt.Errorf("the projector applied %d of %d events in 2 minutes", p.Stats().EventsApplied, want)
		case <-time.After(100 * time.Millisecond):
		}
	}
	mu.Lock()
	sorted := slices.Clone(lags)
	mu.Unlock()
	slices.Sort(sorted)
	pct := func(q float64) float64 {
		return float64(sorted[min(len(sorted)-1, int(q*float64(len(sorted))))].Microseconds()) / 1000
	}
	st := p.Stats()
	fmt.Fprintf(out, "BENCH es commands_per_s=%.1f requests_per_command=%.2f projection_lag_ms_p50=%.0f projection_lag_ms_p99=%.0f\n",
		float64(cfg.commands)/elapsed.Seconds(), float64(requests)/float64(cfg.commands), pct(0.50), pct(0.99))
	fmt.Fprintf(out, "BENCH es_detail commands=%d lag_phase_rate_per_s=%.1f accepted=%d refused=%d appends_lost=%d get_item=%d query=%d transact_write_items=%d put_item=%d events_projected=%d projector_writes_per_event=%.2f gap_fills=%d\n",
		cfg.commands, rate, res.accepted, res.refused, c.Operation("TransactWriteItems").Failed, c.Operation("GetItem").Requests, c.Operation("Query").Requests,
		c.Operation("TransactWriteItems").Requests, c.Operation("PutItem").Requests, st.EventsApplied,
		float64(st.Writes)/float64(max(st.EventsApplied, 1)), st.GapFills)
	return nil
}

// outcome counts the answers of a load.
type outcome struct {
	accepted, refused, events int
}

// schedule schedules each show.
func schedule(ctx context.Context, api *seats.API, shows []string) error {
	for _, s := range shows {
		body := fmt.Sprintf(`{"id":"%s-scheduled","type":"ScheduleShow","showId":%q,"data":{"title":"Bench","startsAt":"2026-12-05T19:30:00Z","rows":%d,"seatsPerRow":%d}}`,
			s, s, rows, seatsPerRow)
		if a, err := post(ctx, api, body); err != nil || a.StatusCode != 200 {
			return fmt.Errorf("scheduling %s: %v %v", s, a.Body, err)
		}
	}
	return nil
}

// load sends n commands from clients (at rate per second in all, or as
// fast as they go when rate is 0): reservations of one or two seats, and a
// fifth cancellations of an earlier reservation of the same client.
func load(ctx context.Context, api *seats.API, shows []string, n, clients int, rate float64, seed uint64) (outcome, error) {
	labels := seats.SeatLabels(rows, seatsPerRow)
	var mu sync.Mutex
	var total outcome
	var firstErr error
	next := make(chan int)
	go func() {
		defer close(next)
		tick := time.Duration(0)
		if rate > 0 {
			tick = time.Duration(float64(time.Second) / rate)
		}
		for i := range n {
			if tick > 0 {
				time.Sleep(tick)
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			var mine [][2]string
			for i := range next {
				show := shows[rng.IntN(len(shows))]
				id := fmt.Sprintf("%s-%d-%d", shows[0], seed, i)
				var body string
				if len(mine) > 0 && rng.IntN(5) == 0 {
					k := rng.IntN(len(mine))
					body = fmt.Sprintf(`{"id":%q,"type":"CancelReservation","showId":%q,"data":{"reservationId":%q}}`, id, mine[k][0], mine[k][1])
					mine = append(mine[:k], mine[k+1:]...)
				} else {
					seatsJSON, _ := json.Marshal(pick(rng, labels, rng.IntN(2)+1))
					rid := "r" + id
					body = fmt.Sprintf(`{"id":%q,"type":"ReserveSeats","showId":%q,"data":{"reservationId":%q,"customerId":"c%d","seats":%s}}`, id, show, rid, c, seatsJSON)
					mine = append(mine, [2]string{show, rid})
				}
				a, err := post(ctx, api, body)
				mu.Lock()
				switch {
				case err != nil && firstErr == nil:
					firstErr = err
				case a.StatusCode == 200:
					total.accepted++
					var b struct{ Events []json.RawMessage }
					_ = json.Unmarshal([]byte(a.Body), &b)
					total.events += len(b.Events)
				case a.StatusCode == 422:
					total.refused++
				case firstErr == nil:
					firstErr = fmt.Errorf("%s: %d %s", body, a.StatusCode, a.Body)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return total, firstErr
}

func pick(rng *rand.Rand, labels []string, n int) []string {
	out := make([]string, n)
	for i, k := range rng.Perm(len(labels))[:n] {
		out[i] = labels[k]
	}
	return out
}

func post(ctx context.Context, api *seats.API, body string) (events.LambdaFunctionURLResponse, error) {
	req := events.LambdaFunctionURLRequest{RawPath: "/commands", Body: body}
	req.RequestContext.HTTP.Method = "POST"
	return api.Handle(ctx, req)
}

func tableStream(ctx context.Context, db *dynamodb.Client, table string) (string, error) {
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", err
	}
	return aws.ToString(d.Table.LatestStreamArn), nil
}

// invoker runs a handler in this process as an event source mapping's
// function, the payload decoded as Lambda does.
type invoker[E, R any] func(ctx context.Context, ev E) (R, error)

func (f invoker[E, R]) Invoke(ctx context.Context, payload []byte) (rie.Result, error) {
	var ev E
	if err := json.Unmarshal(payload, &ev); err != nil {
		return rie.Result{}, err
	}
	resp, err := f(ctx, ev)
	if err != nil {
		b, _ := json.Marshal(map[string]string{"errorMessage": err.Error(), "errorType": "error"})
		return rie.Result{FunctionError: rie.Unhandled, Payload: b}, nil
	}
	b, err := json.Marshal(resp)
	return rie.Result{Payload: b}, err
}
