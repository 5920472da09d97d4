package main

import (
	"math"
	"time"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// Alarms the stack creates for one pipeline (infra/tributary NewAlarms),
// counted in metrics evaluated: the aggregate's errors, throttles,
// iterator age and set-aside alarms and its late-dropped percentage (two
// metrics: LateDropped over RecordsIn), the ticker's errors and throttles,
// the depth of its failure queue, and each one's expired windows.
const pipelineAlarmMetrics = 4 + 2 + 2 + 1 + 2

// Alarms a Powertools-style function would carry, the same way: errors,
// throttles and iterator age.
const powertoolsAlarmMetrics = 3

// logRetentionDays is how long the stack keeps function logs
// (infra/tributary DefaultLogRetention: two weeks).
const logRetentionDays = 14

// bill is a month at one load, in US dollars.
type bill struct {
	lambda, dynamodb, cloudwatch float64
	// wruPerEvent is write request units (tables and indexes) per event.
	wruPerEvent float64
}

func (b bill) total() float64 { return b.lambda + b.dynamodb + b.cloudwatch }

// logsMonthly is the month of ingesting and keeping gb a month of logs.
func logsMonthly(gb float64) float64 {
	return gb*logsIngestPerGB + gb*logRetentionDays/(hoursPerMonth/24.0)*logsStoragePerGBMo
}

// lambdaMonthly is the month of invocations and billed seconds at memoryMB.
func lambdaMonthly(invocations, billedSeconds float64, memoryMB int) float64 {
	return invocations*lambdaPerRequest + billedSeconds*float64(memoryMB)/1024*lambdaPerGBSecond
}

// price is the month of a run's tally: every count scaled from the run's
// event time to a month; storage from what the tables hold (steadyLoad: what they grow by),
// kept for the window items' retention (the pipeline's retention field: an
// upper bound for the few items kept shorter, the ledger and watermarks).
func price(t tally, st stack) bill {
	f := secondsPerMonth / t.simulated.Seconds()
	storedGB := float64(t.storedBytes) * (t.retention.Seconds() / t.simulated.Seconds()) / 1e9
	return bill{
		lambda: lambdaMonthly(float64(t.aggInvokes+t.tickInvokes)*f, float64(t.billedMs)/1000*f, st.memoryMB),
		dynamodb: float64(t.db.WRU())*f*dynamoPerWRU + t.db.ReadUnits()*f*dynamoPerRRU +
			storedGB*(dynamoStoragePerGBMo+dynamoPITRPerGBMonth),
		cloudwatch: logsMonthly(float64(t.logBytes)*f/1e9) + float64(len(t.metrics))*metricPerMonth +
			pipelineAlarmMetrics*alarmPerMetricMonth,
		wruPerEvent: float64(t.db.WRU()) / float64(t.events),
	}
}

// peerPerEvent is what the Powertools peer (bench/internal/powertools)
// spent per event, measured on a sample: its idempotency record's writes
// and the one window update it makes, apart, and its reads.
type peerPerEvent struct {
	idemWCU, idemWrites     float64 // per event, on the idempotency table
	windowWCU, windowWrites float64 // per event and window, on the counts table
	rcu, reads              float64 // per event
}

// windowsPerEvent is how many windows one event of cfg lands in: one per
// tumbling, session or sliding window spec, size/advance per hopping one.
func windowsPerEvent(cfg *pipeline.Config) int {
	n := 0
	for _, w := range cfg.Windows {
		if w.Kind == pipeline.Hopping && w.Advance > 0 {
			n += int(w.Size / w.Advance)
			continue
		}
		n++
	}
	return n
}

// peerMemoryMB is the Powertools-style peer's memory: Lambda's smallest
// that a team would pick for a function that mostly waits (the stack's
// functions other than aggregate use it too).
const peerMemoryMB = 256

// pricePeer is the month of the Powertools way at rate events a second
// over a pipeline whose events land in windows windows each: per event one
// idempotency record and one update per window, as measured per event;
// the same invocations as the deployed mapping makes (invocations a month);
// billed duration the requests it awaits one after the other at latency
// each (its CPU is not counted, nor its storage: a lower bound); its logs
// Lambda's platform lines only, no custom metrics. It runs at
// peerMemoryMB, whatever memory the stack gives aggregate: its time is
// waiting on DynamoDB, which more memory does not shorten.
func pricePeer(p peerPerEvent, rate float64, windows int, invocations float64, latency time.Duration, st stack) bill {
	st.memoryMB = peerMemoryMB
	events := rate * secondsPerMonth
	wru := p.idemWCU + float64(windows)*p.windowWCU
	requests := p.idemWrites + float64(windows)*p.windowWrites + p.reads
	billed := events*requests*latency.Seconds() + invocations*float64(lambdaBilledGranularityMs)/1000
	return bill{
		lambda:      lambdaMonthly(invocations, billed, st.memoryMB),
		dynamodb:    events*wru*dynamoPerWRU + events*p.rcu*dynamoPerRRU,
		cloudwatch:  logsMonthly(invocations*(lambdaPlatformBytes+lambdaPlatformEvents*logsEventOverhead)/1e9) + powertoolsAlarmMetrics*alarmPerMetricMonth,
		wruPerEvent: wru,
	}
}

// kinesisMonthly is the events stream's month at rate events a second
// (shards, and one PUT payload unit per event: each is under 25 KB) and the
// WindowResults stream's (one shard, and the units the run put, scaled):
// the same whichever way the events are processed, so not in total_usd.
func kinesisMonthly(rate float64, shards int, t tally) (events, results float64) {
	events = float64(shards)*hoursPerMonth*kinesisPerShardHour + rate*secondsPerMonth/1e6*kinesisPerMillionPUT
	results = hoursPerMonth*kinesisPerShardHour + float64(t.resultsUnits)*secondsPerMonth/t.simulated.Seconds()/1e6*kinesisPerMillionPUT
	return events, results
}

// Provisioned capacity as the stack deploys it with tributary:viewsWriteCapacity
// (infra/tributary: auto scaled to keep utilization at 70 %, the
// open-windows index at 5 units each at least), and what DynamoDB keeps of
// unused capacity to serve a burst: 300 seconds of it (not guaranteed).
const (
	provisionedUtilization = 0.70
	provisionedIndexUnits  = 5
	burstSeconds           = 300
	// provisionedAlarms are the CloudWatch alarms Application Auto Scaling
	// makes: two for each of the four target-tracking policies.
	provisionedAlarms = 8
)

// provisionedBill is the month of a run's tally with the views table
// provisioned: the capacity that keeps the run's average demand at
// provisionedUtilization, and the write units of the run's invocations
// that capacity (with its burst credit) could not serve at once — retried
// by the SDK, a delay, not a loss.
type provisionedBill struct {
	bill
	wcu, rcu       int
	throttledWU    int
	largestBurstWU int
}

// priceProvisioned is price with the views table provisioned.
func priceProvisioned(t tally, st stack) provisionedBill {
	b := price(t, st)
	f := secondsPerMonth / t.simulated.Seconds()
	onDemand := float64(t.db.WRU())*f*dynamoPerWRU + t.db.ReadUnits()*f*dynamoPerRRU
	seconds := t.simulated.Seconds()
	wcu := max(provisionedIndexUnits, int(math.Ceil(float64(t.db.WriteUnits)/seconds/provisionedUtilization)))
	rcu := max(provisionedIndexUnits, int(math.Ceil(t.db.ReadUnits()/seconds/provisionedUtilization)))
	indexWCU := max(provisionedIndexUnits, int(math.Ceil(float64(t.db.IndexUnits)/seconds/provisionedUtilization)))
	capacity := float64(wcu+indexWCU)*dynamoPerWCUHour*hoursPerMonth + float64(rcu+provisionedIndexUnits)*dynamoPerRCUHour*hoursPerMonth
	p := provisionedBill{bill: b, wcu: wcu, rcu: rcu}
	p.dynamodb = b.dynamodb - onDemand + capacity
	p.cloudwatch = b.cloudwatch + provisionedAlarms*alarmPerMetricMonth
	p.throttledWU, p.largestBurstWU = throttled(t.demand, float64(wcu))
	return p
}

// throttled plays demand against a table of capacity write units a second
// that starts with its whole burst credit (burstSeconds of capacity) and
// refills at capacity up to it: the write units the credit could not cover
// when asked for, and the most one instant asked for (the shards'
// invocations of one time together).
func throttled(demand []demand, capacity float64) (units, largest int) {
	if len(demand) == 0 {
		return 0, 0
	}
	full := burstSeconds * capacity
	credit, last := full, demand[0].at
	short := 0.0
	for i := 0; i < len(demand); {
		at, asked := demand[i].at, 0
		for ; i < len(demand) && demand[i].at.Equal(at); i++ {
			asked += demand[i].wu
		}
		largest = max(largest, asked)
		credit = min(full, credit+capacity*max(0, at.Sub(last).Seconds()))
		last = at
		credit -= float64(asked)
		if credit < 0 {
			short -= credit
			credit = 0
		}
	}
	return int(math.Ceil(short)), largest
}
