package local

import (
	"context"
	"encoding/json"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/tributary-dev/tributary/emulator/cloudwatchlocal"
	"github.com/tributary-dev/tributary/emulator/rie"
)

// LambdaNamespace is where Lambda publishes its per-function metrics.
const LambdaNamespace = "AWS/Lambda"

// meteredFunction invokes a running function and publishes, for each
// invocation, the AWS/Lambda metrics Lambda publishes by FunctionName:
// Invocations, Errors, Throttles (always 0: nothing throttles locally),
// Duration, ConcurrentExecutions and, for a stream batch, IteratorAge (the
// age of the batch's last record when it is handed to the function). So a
// dashboard or alarm on them has data locally too.
type meteredFunction struct {
	fn       *rie.Function
	name     string // the physical function name, the FunctionName dimension
	sink     *cloudwatchlocal.Sink
	inFlight atomic.Int32
	now      func() time.Time
	crashes  *crashLog // where a crash (Runtime.ExitError) is recorded; nil: nowhere
}

// Crash is an invocation whose runtime process exited (Runtime.ExitError):
// on Lambda a crash, not a slow or failed invocation, whatever retried it.
type Crash struct {
	Function  string // the physical function name
	RequestID string
	Message   string // the error document's errorMessage
}

// crashLog collects crashes; safe for concurrent use.
type crashLog struct {
	mu   sync.Mutex
	list []Crash
}

func (l *crashLog) add(c Crash) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, c)
}

func (l *crashLog) all() []Crash {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Crash(nil), l.list...)
}

var _ functionInvoker = (*meteredFunction)(nil)

func newMeteredFunction(fn *rie.Function, name string, sink *cloudwatchlocal.Sink) *meteredFunction {
	return &meteredFunction{fn: fn, name: name, sink: sink, now: time.Now}
}

// Invoke invokes the function and publishes the invocation's metrics.
func (m *meteredFunction) Invoke(ctx context.Context, payload []byte) (rie.Result, error) {
	concurrent := m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	at := m.now()
	age, hasAge := iteratorAge(payload, at)
	res, err := m.fn.Invoke(ctx, payload)
	if err != nil {
		return res, err // the emulator failed: Lambda would not have counted an invocation
	}
	errs := 0.0
	if res.FunctionError != "" {
		errs = 1
	}
	m.noteCrash(res)
	dims := []cwtypes.Dimension{{Name: aws.String("FunctionName"), Value: aws.String(m.name)}}
	datum := func(name string, unit cwtypes.StandardUnit, v float64) cwtypes.MetricDatum {
		return cwtypes.MetricDatum{MetricName: aws.String(name), Dimensions: dims, Unit: unit, Value: aws.Float64(v), Timestamp: aws.Time(at)}
	}
	data := []cwtypes.MetricDatum{
		datum("Invocations", cwtypes.StandardUnitCount, 1),
		datum("Errors", cwtypes.StandardUnitCount, errs),
		datum("Throttles", cwtypes.StandardUnitCount, 0),
		datum("Duration", cwtypes.StandardUnitMilliseconds, math.Round(float64(res.Duration.Microseconds()))/1000),
		datum("ConcurrentExecutions", cwtypes.StandardUnitCount, float64(concurrent)),
	}
	if hasAge {
		data = append(data, datum("IteratorAge", cwtypes.StandardUnitMilliseconds, float64(age.Milliseconds())))
	}
	m.sink.Put(LambdaNamespace, data...)
	return res, nil
}

// noteCrash records res in m.crashes when the runtime exited during it.
func (m *meteredFunction) noteCrash(res rie.Result) {
	if res.ErrorType() != rie.ErrorTypeExit || m.crashes == nil {
		return
	}
	var doc struct{ ErrorMessage string }
	_ = json.Unmarshal(res.Payload, &doc)
	m.crashes.add(Crash{Function: m.name, RequestID: res.RequestID, Message: doc.ErrorMessage})
}

// iteratorAge is how old the last record of a Kinesis or DynamoDB Streams
// batch is at now; ok is false for other payloads.
func iteratorAge(payload []byte, now time.Time) (time.Duration, bool) {
	var ev struct {
		Records []struct {
			Kinesis *struct {
				ApproximateArrivalTimestamp float64 `json:"approximateArrivalTimestamp"`
			} `json:"kinesis"`
			DynamoDB *struct {
				ApproximateCreationDateTime float64 `json:"ApproximateCreationDateTime"`
			} `json:"dynamodb"`
		} `json:"Records"`
	}
	if json.Unmarshal(payload, &ev) != nil || len(ev.Records) == 0 {
		return 0, false
	}
	last := ev.Records[len(ev.Records)-1]
	var secs float64
	switch {
	case last.Kinesis != nil:
		secs = last.Kinesis.ApproximateArrivalTimestamp
	case last.DynamoDB != nil:
		secs = last.DynamoDB.ApproximateCreationDateTime
	default:
		return 0, false
	}
	if secs <= 0 {
		return 0, false
	}
	arrived := time.UnixMilli(int64(secs * 1000))
	return max(now.Sub(arrived), 0), true
}
