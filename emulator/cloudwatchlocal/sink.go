package cloudwatchlocal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/schemas"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"
)

// PutLogEvents and PutMetricData limits.
const (
	maxEventsPerPut  = 10000
	maxBytesPerPut   = 1048576
	eventOverhead    = 26 // bytes CloudWatch Logs counts per event
	maxEventBytes    = 256*1024 - eventOverhead
	maxDatumsPerPut  = 500
	defaultFlushTick = time.Second
)

// logsAPI is what the sink needs of CloudWatch Logs.
type logsAPI interface {
	CreateLogGroup(ctx context.Context, in *cloudwatchlogs.CreateLogGroupInput, opts ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.CreateLogGroupOutput, error)
	CreateLogStream(ctx context.Context, in *cloudwatchlogs.CreateLogStreamInput, opts ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.CreateLogStreamOutput, error)
	PutLogEvents(ctx context.Context, in *cloudwatchlogs.PutLogEventsInput, opts ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.PutLogEventsOutput, error)
}

// metricPutter is what the sink needs of CloudWatch.
type metricPutter interface {
	PutMetricData(ctx context.Context, in *cloudwatch.PutMetricDataInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error)
}

var (
	_ logsAPI      = (*cloudwatchlogs.Client)(nil)
	_ metricPutter = (*cloudwatch.Client)(nil)
)

// SinkOptions configure a Sink.
type SinkOptions struct {
	// RunID ends every log stream name ("2026/11/29/[$LATEST]<RunID>"), as
	// Lambda ends it with an execution environment id. Empty means 32
	// random hex digits.
	RunID string
	// FlushInterval is how often buffered lines and metrics are sent;
	// 0 means one second.
	FlushInterval time.Duration
	// OnError, when set, is told about every failed send and every EMF
	// document that gives no metrics (an *EMFError), as they happen.
	// Close returns them too.
	OnError func(error)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// LogGroups maps a function name to the log group its lines go to, for
	// functions whose LoggingConfig names one (template.FunctionSpec.LogGroup);
	// other functions log to /aws/lambda/<function>, as on Lambda.
	LogGroups map[string]string
}

// Sink forwards function log lines to CloudWatch Logs and EMF metrics to
// CloudWatch, in batches. It is safe for concurrent use.
type Sink struct {
	logs    logsAPI
	metrics metricPutter
	opts    SinkOptions
	date    string // log stream date prefix, fixed at start

	mu       sync.Mutex
	streams  map[string]*logStream // by function name and log stream
	pending  map[string][]cwtypes.MetricDatum
	totals   map[string]float64  // sum of every value put, by namespace and series (seriesKey)
	samples  map[string][]Sample // the values put, by namespace and series, for percentiles
	nsamples int
	errs     []error
	closed   bool

	sendMu sync.Mutex // one flush at a time keeps each stream's events in order
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
}

// logStream is one function's log stream and its unsent events.
type logStream struct {
	group, name string
	created     bool
	events      []types.InputLogEvent
	bytes       int
	lastMillis  int64
}

// NewSink starts a sink that sends to the endpoint cfg points at.
func NewSink(ctx context.Context, cfg aws.Config, opts SinkOptions) (*Sink, error) {
	if opts.RunID == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("cloudwatchlocal: run id: %w", err)
		}
		opts.RunID = hex.EncodeToString(b[:])
	}
	if strings.ContainsAny(opts.RunID, ":*") {
		return nil, fmt.Errorf("cloudwatchlocal: SinkOptions.RunID %q: a log stream name cannot contain ':' or '*'", opts.RunID)
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = defaultFlushTick
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Sink{
		logs:    cloudwatchlogs.NewFromConfig(cfg),
		metrics: CloudWatchClient(cfg),
		opts:    opts,
		date:    opts.Now().UTC().Format("2006/01/02"),
		streams: map[string]*logStream{},
		pending: map[string][]cwtypes.MetricDatum{},
		totals:  map[string]float64{},
		samples: map[string][]Sample{},
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go s.loop(context.WithoutCancel(ctx))
	return s, nil
}

// CloudWatchClient returns a CloudWatch client that speaks the awsQuery
// protocol. The SDK's default since 2025, Smithy RPC v2 CBOR, is not served
// by moto 5.2.5 (it answers 404); CloudWatch on AWS and LocalStack serve
// awsQuery as well, so this client works everywhere.
func CloudWatchClient(cfg aws.Config) *cloudwatch.Client {
	return cloudwatch.NewFromConfig(cfg, func(o *cloudwatch.Options) {
		o.Protocol = awsquery.New(schemas.GraniteServiceVersion20100801)
	})
}

// LogGroup is the log group of a function, as Lambda names it.
func LogGroup(function string) string { return "/aws/lambda/" + function }

// LogStream is the name of the log stream the sink writes function's lines
// to: "<yyyy/mm/dd>/[$LATEST]<run id>".
func (s *Sink) LogStream() string { return s.date + "/[$LATEST]" + s.opts.RunID }

// Line buffers one line of function's output for its log group
// (/aws/lambda/<function> unless SinkOptions.LogGroups says otherwise),
// in the sink's own log stream (LogStream). A line that is an EMF document
// also becomes metric data. Empty lines are dropped, as CloudWatch Logs does
// not store empty events; lines longer than a log event may be are cut to
// fit.
func (s *Sink) Line(function, line string) { s.StreamLine(function, "", line) }

// StreamLine is Line for a line an execution environment printed into the
// log stream named stream (its AWS_LAMBDA_LOG_STREAM_NAME), so that, as on
// Lambda, each environment's lines sit in a stream of their own. An empty
// stream, or one CloudWatch Logs would refuse (':' or '*', over 512
// bytes), means the sink's own stream.
func (s *Sink) StreamLine(function, stream, line string) {
	if stream == "" || strings.ContainsAny(stream, ":*") || len(stream) > 512 {
		stream = s.LogStream()
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" || function == "" {
		return
	}
	var batch emfBatch
	var emfErr error
	if isEMF(line) {
		if batch, emfErr = parseEMF(line); emfErr != nil {
			emfErr = &EMFError{Function: function, Line: line, Reason: emfErr.Error()}
		}
	}
	if len(line) > maxEventBytes {
		cut := maxEventBytes
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut]
	}
	now := s.opts.Now().UnixMilli()

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	st := s.streams[function+"\x00"+stream]
	if st == nil {
		group := s.opts.LogGroups[function]
		if group == "" {
			group = LogGroup(function)
		}
		st = &logStream{group: group, name: stream}
		s.streams[function+"\x00"+stream] = st
	}
	// Events of one PutLogEvents call must be in time order; a clock that
	// steps back must not reorder lines.
	if now < st.lastMillis {
		now = st.lastMillis
	}
	st.lastMillis = now
	st.events = append(st.events, types.InputLogEvent{Message: aws.String(line), Timestamp: aws.Int64(now)})
	st.bytes += len(line) + eventOverhead
	full := len(st.events) >= maxEventsPerPut || st.bytes >= maxBytesPerPut
	for ns, ds := range batch {
		s.pending[ns] = append(s.pending[ns], ds...)
		for _, d := range ds {
			s.record(ns, d)
		}
	}
	if emfErr != nil {
		s.errs = append(s.errs, emfErr)
	}
	s.mu.Unlock()

	if emfErr != nil && s.opts.OnError != nil {
		s.opts.OnError(emfErr)
	}
	if full {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// Put buffers metric data for namespace, sent with the next flush, as if a
// service published it (the runner publishes AWS/Lambda metrics this way).
func (s *Sink) Put(namespace string, data ...cwtypes.MetricDatum) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.pending[namespace] = append(s.pending[namespace], data...)
	for _, d := range data {
		s.record(namespace, d)
	}
}

// maxSamples bounds the values kept for percentiles, over all series; the
// oldest half of a series goes when it is reached.
const maxSamples = 200_000

// Sample is one value put to a series, observed Count times.
type Sample struct {
	At           time.Time
	Value, Count float64
}

// record adds d to the totals and samples; callers hold mu.
func (s *Sink) record(namespace string, d cwtypes.MetricDatum) {
	k := namespace + "/" + seriesKey(cwtypes.Metric{MetricName: d.MetricName, Dimensions: d.Dimensions})
	s.totals[k] += datumSum(d)
	at := aws.ToTime(d.Timestamp)
	if at.IsZero() {
		at = s.opts.Now()
	}
	add := func(v, c float64) {
		if s.nsamples >= maxSamples {
			old := s.samples[k]
			drop := (len(old) + 1) / 2
			s.samples[k] = append(old[:0], old[drop:]...)
			s.nsamples -= drop
		}
		s.samples[k] = append(s.samples[k], Sample{At: at, Value: v, Count: c})
		s.nsamples++
	}
	if d.Value != nil {
		add(*d.Value, 1)
		return
	}
	for i, v := range d.Values {
		c := 1.0
		if i < len(d.Counts) {
			c = d.Counts[i]
		}
		add(v, c)
	}
}

// Samples returns the values this sink put to the series (namespace, name,
// dimensions) stamped in [from, to), oldest first. CloudWatch computes
// percentile statistics (p50, p99) from such values; moto does not, so a
// local reader computes them from these.
func (s *Sink) Samples(namespace, name string, dims map[string]string, from, to time.Time) []Sample {
	ds := make([]cwtypes.Dimension, 0, len(dims))
	for k, v := range dims {
		ds = append(ds, cwtypes.Dimension{Name: aws.String(k), Value: aws.String(v)})
	}
	k := namespace + "/" + seriesKey(cwtypes.Metric{MetricName: aws.String(name), Dimensions: ds})
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sample
	for _, x := range s.samples[k] {
		if !x.At.Before(from) && x.At.Before(to) {
			out = append(out, x)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// Own returns the sum of the values this sink has put to m's series (its
// namespace, name and dimensions), so that a reader can tell its own data
// from another run's on a shared endpoint.
func (s *Sink) Own(m MetricSummary) float64 {
	dims := make([]cwtypes.Dimension, 0, len(m.Dimensions))
	for k, v := range m.Dimensions {
		dims = append(dims, cwtypes.Dimension{Name: aws.String(k), Value: aws.String(v)})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totals[m.Namespace+"/"+seriesKey(cwtypes.Metric{MetricName: aws.String(m.Name), Dimensions: dims})]
}

// datumSum is the sum of the values d carries.
func datumSum(d cwtypes.MetricDatum) float64 {
	if d.Value != nil {
		return *d.Value
	}
	sum := 0.0
	for i, v := range d.Values {
		c := 1.0
		if i < len(d.Counts) {
			c = d.Counts[i]
		}
		sum += v * c
	}
	return sum
}

// Flush sends everything buffered so far.
func (s *Sink) Flush(ctx context.Context) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.send(ctx)
}

// Close flushes everything and stops the sink. It returns every send error
// and EMF problem seen since the start.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true // later lines are dropped
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	err := s.Flush(ctx)
	s.mu.Lock()
	errs := append(s.errs, err)
	s.errs = nil
	s.mu.Unlock()
	return errors.Join(errs...)
}

func (s *Sink) loop(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.kick:
		}
		if err := s.Flush(ctx); err != nil {
			s.mu.Lock()
			s.errs = append(s.errs, err)
			s.mu.Unlock()
		}
	}
}

// send takes what is buffered and sends it; callers hold sendMu.
func (s *Sink) send(ctx context.Context) error {
	type work struct {
		st     *logStream
		events []types.InputLogEvent
	}
	s.mu.Lock()
	var todo []work
	for _, st := range s.streams {
		if len(st.events) > 0 {
			todo = append(todo, work{st, st.events})
			st.events, st.bytes = nil, 0
		}
	}
	metrics := s.pending
	s.pending = map[string][]cwtypes.MetricDatum{}
	s.mu.Unlock()

	var errs []error
	report := func(err error) {
		errs = append(errs, err)
		if s.opts.OnError != nil {
			s.opts.OnError(err)
		}
	}
	for _, w := range todo {
		if err := s.putEvents(ctx, w.st, w.events); err != nil {
			report(err)
		}
	}
	for ns, data := range metrics {
		for len(data) > 0 {
			n := min(len(data), maxDatumsPerPut)
			if _, err := s.metrics.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String(ns), MetricData: data[:n]}); err != nil {
				report(fmt.Errorf("cloudwatchlocal: put %d metric data to namespace %s: %w", n, ns, err))
			}
			data = data[n:]
		}
	}
	return errors.Join(errs...)
}

// putEvents creates st's group and stream on first use, then sends events
// in batches within PutLogEvents' limits.
func (s *Sink) putEvents(ctx context.Context, st *logStream, events []types.InputLogEvent) error {
	if !st.created {
		_, err := s.logs.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String(st.group)})
		var exists *types.ResourceAlreadyExistsException
		if err != nil && !errors.As(err, &exists) {
			return fmt.Errorf("cloudwatchlocal: create log group %s: %w", st.group, err)
		}
		_, err = s.logs.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String(st.group), LogStreamName: aws.String(st.name)})
		if err != nil && !errors.As(err, &exists) {
			return fmt.Errorf("cloudwatchlocal: create log stream %s in %s: %w", st.name, st.group, err)
		}
		st.created = true
	}
	for len(events) > 0 {
		n, size := 0, 0
		for n < len(events) && n < maxEventsPerPut {
			sz := len(aws.ToString(events[n].Message)) + eventOverhead
			if n > 0 && size+sz > maxBytesPerPut {
				break
			}
			size += sz
			n++
		}
		if _, err := s.logs.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{
			LogGroupName:  aws.String(st.group),
			LogStreamName: aws.String(st.name),
			LogEvents:     events[:n],
		}); err != nil {
			return fmt.Errorf("cloudwatchlocal: put %d log events to %s: %w", n, st.group, err)
		}
		events = events[n:]
	}
	return nil
}
