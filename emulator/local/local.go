package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/tributary-dev/tributary/emulator/cloudwatchlocal"
	"github.com/tributary-dev/tributary/emulator/eventsource"
	"github.com/tributary-dev/tributary/emulator/rie"
	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/emulator/template"
	"github.com/tributary-dev/tributary/pkg/cep"
)

// Options say what to run and where.
type Options struct {
	// Template is the synthesized stack template (infra/cdk.out/Tributary.template.json).
	Template string
	// Functions is the directory holding <binary>/bootstrap built for this
	// machine (.build/local).
	Functions string
	// Endpoint is the AWS stand-in's URL.
	Endpoint string
	// Stack prefixes the physical names of resources the template leaves unnamed.
	Stack string
	// URLPort, when not 0, is the first port function URLs listen on
	// (127.0.0.1:URLPort, URLPort+1, ...); 0 picks free ports.
	URLPort int
	// DashboardPort is the port of the dashboard page on 127.0.0.1 (the
	// stack's CloudWatch dashboards and the results view); 0 picks a free
	// port, -1 serves none.
	DashboardPort int
	// LambdaPort is the port of the local Lambda Invoke API on 127.0.0.1
	// (`aws lambda invoke --endpoint-url`); 0 picks a free port, -1 serves
	// none.
	LambdaPort int
	// Progress receives a few lines per step; nil discards.
	Progress io.Writer
	// Verbose also lists every resource created, every function with its
	// physical name and every mapping on Progress.
	Verbose bool
	// Logs, when set, also receives every function log line.
	Logs func(function, line string)
	// ScheduleEvery, when > 0, fires the template's EventBridge schedules
	// this often instead of at their rate (make local shortens a minute).
	ScheduleEvery time.Duration
	// MaxBatchingWindow, when > 0, caps every mapping's
	// MaximumBatchingWindow (make local shortens the aggregate mapping's 5 s,
	// as it shortens the ticker's minute); each capped mapping is reported.
	MaxBatchingWindow time.Duration
	// QueueMetricsEvery is how often every queue's AWS/SQS depth metrics are
	// published to the stand-in's CloudWatch (AWS: every minute); 0 means
	// every 5 seconds.
	QueueMetricsEvery time.Duration
}

// Stack is the topology running locally.
type Stack struct {
	cfg        aws.Config
	deployment *template.Deployment
	specs      []template.FunctionSpec
	functions  map[string]*rie.Function    // by the runner's name (functionNames)
	metered    map[string]*meteredFunction // by the runner's name: invoke through these
	crashes    crashLog                    // invocations whose runtime exited
	names      map[string]string           // the runner's name of each function, by logical id
	invokeAPI  *invokeServer
	dashboard  *dashboardServer
	invLogs    *invocationLogs
	runCtx     context.Context         // ends with Close
	urls       map[string]*functionURL // by the runner's name
	sink       *cloudwatchlocal.Sink
	queueStats *cloudwatchlocal.QueueMetrics
	stats      *Stats
	cancel     context.CancelFunc
	stopTicks  func()
	wg         sync.WaitGroup
	errs       chan error
	progress   io.Writer
}

// localRulesRefresh is the CEP rules' refresh and clock slack locally
// (cep.TimingEnvVar, on every function that reads the rules table): a rule
// change applies 2 s after it is made rather than 10 s. Moto stamps a
// record's arrival from this machine's clock, with fractions of a second.
const localRulesRefresh = time.Second

// Up deploys the template onto the stand-in and starts functions, mappings and
// function URLs. Close stops them all.
func Up(ctx context.Context, opts Options) (_ *Stack, err error) {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	if opts.Stack == "" {
		opts.Stack = "Tributary"
	}
	cfg, err := standin.Config(ctx, opts.Endpoint)
	if err != nil {
		return nil, err
	}
	tpl, err := template.Load(opts.Template)
	if err != nil {
		return nil, fmt.Errorf("local: %w (run `make synth` to produce it)", err)
	}
	// The ports first: one in use fails here, before a stack is deployed
	// onto a stand-in (perhaps another make local-up's) and functions start.
	lns, err := reservePorts(tpl, opts)
	if err != nil {
		return nil, err
	}
	defer lns.close()
	runCtx, cancel := context.WithCancel(context.Background())
	s := &Stack{
		cfg:       cfg,
		functions: map[string]*rie.Function{},
		metered:   map[string]*meteredFunction{},
		urls:      map[string]*functionURL{},
		stats:     newStats(),
		invLogs:   newInvocationLogs(),
		runCtx:    runCtx,
		cancel:    cancel,
		errs:      make(chan error, 64),
		progress:  progress,
	}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()

	began := time.Now()
	fmt.Fprintf(progress, "▸ deploying %s onto %s as stack %s\n", opts.Template, opts.Endpoint, opts.Stack)
	report := newDeployReport(tpl)
	s.deployment, err = template.Provision(ctx, cfg, tpl, template.ProvisionOptions{
		Stack: opts.Stack,
		Progress: func(msg string) {
			report.add(msg)
			if opts.Verbose {
				fmt.Fprintf(progress, "    %s\n", msg)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	report.print(progress, s.deployment, time.Since(began))

	specs, err := s.deployment.Functions()
	if err != nil {
		return nil, err
	}
	s.specs = specs
	s.names = functionNames(specs)
	groups := map[string]string{}
	for _, f := range specs {
		groups[f.FunctionName] = f.LogGroup
	}
	s.sink, err = cloudwatchlocal.NewSink(ctx, cfg, cloudwatchlocal.SinkOptions{
		LogGroups: groups,
		OnError:   func(err error) { fmt.Fprintf(progress, "    cloudwatch: %v\n", err) },
	})
	if err != nil {
		return nil, err
	}
	queues := map[string]string{}
	for _, q := range s.deployment.Queues() {
		queues[q.Name] = q.URL
	}
	every := opts.QueueMetricsEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	s.queueStats = cloudwatchlocal.StartQueueMetrics(ctx, cfg, queues, every, func(err error) { fmt.Fprintf(progress, "    cloudwatch: %v\n", err) })
	logLine := func(function, logStream, line string) {
		// RIE's own "(rapid)" lines are the emulator talking; CloudWatch on
		// AWS shows START/END/REPORT and the function's output only, each
		// execution environment in its own log stream.
		if !strings.Contains(line, "] (rapid) ") {
			s.sink.StreamLine(function, logStream, line)
			s.invLogs.line(logStream, line)
		}
		if opts.Logs != nil {
			opts.Logs(function, line)
		}
	}

	mappings, err := s.deployment.Mappings()
	if err != nil {
		return nil, err
	}
	began = time.Now()
	environments := 0
	var rulesTimed []string // the functions given localRulesRefresh
	byLogical := map[string]*meteredFunction{}
	for _, f := range specs {
		bootstrap := filepath.Join(opts.Functions, f.Binary, "bootstrap")
		if _, statErr := os.Stat(bootstrap); statErr != nil {
			return nil, fmt.Errorf("local: function %s (%s): %w (run `make functions-local`)", f.LogicalID, f.Binary, statErr)
		}
		env := map[string]string{}
		for k, v := range f.Env {
			env[k] = v
		}
		// What Lambda's execution environment provides, pointed at the stand-in.
		env["AWS_ENDPOINT_URL"] = opts.Endpoint
		env["AWS_REGION"] = standin.Region
		env["AWS_DEFAULT_REGION"] = standin.Region
		env["AWS_ACCESS_KEY_ID"] = "test"
		env["AWS_SECRET_ACCESS_KEY"] = "test"
		if _, ok := env["RULES_TABLE_NAME"]; ok {
			env[cep.TimingEnvVar] = localRulesRefresh.String()
			rulesTimed = append(rulesTimed, s.names[f.LogicalID])
		}
		fn, startErr := rie.Start(ctx, rie.Config{
			Name:       f.FunctionName,
			Bootstrap:  bootstrap,
			Env:        env,
			Timeout:    f.Timeout,
			MemoryMB:   f.MemoryMB,
			Instances:  instancesFor(f, mappings),
			StreamLogs: logLine,
		})
		if startErr != nil {
			return nil, fmt.Errorf("local: starting %s: %w", s.names[f.LogicalID], startErr)
		}
		name := s.names[f.LogicalID]
		s.functions[name] = fn
		s.metered[name] = newMeteredFunction(fn, f.FunctionName, s.sink)
		s.metered[name].crashes = &s.crashes
		byLogical[f.LogicalID] = s.metered[name]
		environments += instancesFor(f, mappings)
		if opts.Verbose {
			fmt.Fprintf(progress, "    %-12s %s (%d execution environments)\n", name, f.FunctionName, instancesFor(f, mappings))
		}
	}
	binaries := make([]string, 0, len(specs))
	for _, f := range specs {
		binaries = append(binaries, s.names[f.LogicalID])
	}
	sort.Strings(binaries)
	fmt.Fprintf(progress, "▸ started %d functions under aws-lambda-rie in %s (%d execution environments): %s\n",
		len(specs), time.Since(began).Round(100*time.Millisecond), environments, strings.Join(binaries, ", "))
	if len(rulesTimed) > 0 {
		sort.Strings(rulesTimed)
		t := cep.Timing{Refresh: localRulesRefresh, ClockSlack: localRulesRefresh}
		fmt.Fprintf(progress, "  not as on AWS: a CEP rule change applies %s after it is made here, where detect re-reads the rules every %s (on AWS %s, re-read every %s: the clocks of the writer, Kinesis and Lambda may differ there, here they are one machine's) — %s\n",
			t.ActivationDelay(), localRulesRefresh, cep.ActivationDelay, cep.RefreshInterval, strings.Join(rulesTimed, ", "))
	}

	labels := sourceLabels(s.deployment)
	var sources, capped []string
	for _, m := range mappings {
		fn, ok := byLogical[m.FunctionLogicalID]
		if !ok {
			return nil, fmt.Errorf("local: event source mapping on %s targets function %s, which the template does not define", m.SourceARN, m.FunctionLogicalID)
		}
		binary := s.names[m.FunctionLogicalID]
		settings := toSettings(m, specs)
		if envs := instancesFor(functionOf(m.FunctionLogicalID, specs), mappings); settings.MaximumConcurrency > envs {
			// More pollers than execution environments could only wait for
			// one, and each idle poller costs the stand-in a poll every 50 ms.
			settings.MaximumConcurrency = envs
		}
		if opts.MaxBatchingWindow > 0 && settings.MaximumBatchingWindow > opts.MaxBatchingWindow {
			capped = append(capped, fmt.Sprintf("%s %s", binary, settings.MaximumBatchingWindow))
			settings.MaximumBatchingWindow = opts.MaxBatchingWindow
		}
		obs := s.stats.observer(binary, m)
		var p *eventsource.Poller
		switch m.SourceKind {
		case template.SourceKinesis:
			p, err = eventsource.NewKinesis(cfg, settings, fn, obs)
		case template.SourceDynamoDB:
			p, err = eventsource.NewDynamoDBStreams(cfg, settings, fn, obs)
		case template.SourceSQS:
			p, err = eventsource.NewSQS(cfg, settings, fn, obs)
		default:
			err = fmt.Errorf("local: event source mapping for %s: source kind %q is not emulated", binary, m.SourceKind)
		}
		if err != nil {
			return nil, err
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if runErr := p.Run(runCtx); runErr != nil && !errors.Is(runErr, context.Canceled) {
				s.errs <- fmt.Errorf("mapping %s → %s: %w", m.SourceARN, binary, runErr)
			}
		}()
		label := labels.of(m)
		sources = append(sources, binary+" ← "+label)
		if opts.Verbose {
			fmt.Fprintf(progress, "    %-12s ← %s (batch %d)\n", binary, label, settings.BatchSize)
		}
	}
	if len(mappings) > 0 {
		fmt.Fprintf(progress, "▸ playing %d event source mappings: %s\n", len(mappings), strings.Join(sources, "; "))
	}
	if len(capped) > 0 {
		fmt.Fprintf(progress, "  not as on AWS: batching windows shortened to %s here (the template's: %s)\n", opts.MaxBatchingWindow, strings.Join(capped, ", "))
	}

	schedules, err := s.deployment.Schedules()
	if err != nil {
		return nil, err
	}
	if len(schedules) > 0 {
		var every func(time.Duration) time.Duration
		if opts.ScheduleEvery > 0 {
			every = func(time.Duration) time.Duration { return opts.ScheduleEvery }
		}
		s.stopTicks = startSchedules(runCtx, schedules, invokeByLogicalID(runCtx, byLogical), every, progress)
	}

	urls, err := s.deployment.URLs()
	if err != nil {
		return nil, err
	}
	// Ports in a fixed order: ingest's URL first (the curls of README.md and
	// docs/events.md are sent to URLPort), then the others by function name.
	sort.SliceStable(urls, func(i, j int) bool {
		bi, bj := s.names[urls[i].FunctionLogicalID], s.names[urls[j].FunctionLogicalID]
		if (bi == "ingest") != (bj == "ingest") {
			return bi == "ingest"
		}
		return bi < bj
	})
	for i, u := range urls {
		fn, ok := byLogical[u.FunctionLogicalID]
		if !ok {
			return nil, fmt.Errorf("local: function URL targets %s, which the template does not define", u.FunctionLogicalID)
		}
		binary := s.names[u.FunctionLogicalID]
		ln, lnErr := lns.url(i)
		if lnErr != nil {
			return nil, lnErr
		}
		fu := newFunctionURL(binary, fn, ln)
		s.urls[binary] = fu
		if err := s.deployment.SetAttribute(u.LogicalID, "FunctionUrl", fu.URL()); err != nil {
			return nil, err
		}
		note := ""
		if u.AuthType == "AWS_IAM" {
			note = " (AuthType AWS_IAM is not enforced locally)"
		}
		fmt.Fprintf(progress, "    function URL of %s: %s%s\n", binary, fu.URL(), note)
	}
	if lns.lambda != nil {
		s.invokeAPI, lns.lambda = newInvokeServer(s, lns.lambda, progress), nil
		fmt.Fprintf(progress, "    Lambda Invoke API: %s (aws lambda invoke --endpoint-url %s --function-name <function> …)\n", s.invokeAPI.URL(), s.invokeAPI.URL())
	}
	if lns.dashboard != nil {
		s.dashboard, lns.dashboard = newDashboardServer(s, lns.dashboard), nil
		names := s.Dashboards()
		what := "dashboards " + strings.Join(names, ", ")
		if len(names) == 0 {
			what = "no dashboard in the template yet"
		}
		fmt.Fprintf(progress, "    dashboard: %s (the results view, then %s)\n", s.dashboard.URL(), what)
	}
	return s, nil
}

// URL is the function URL of the function built from binary (the runner's
// name of it: see FunctionName), or "".
func (s *Stack) URL(binary string) string {
	if u, ok := s.urls[binary]; ok {
		return u.URL()
	}
	return ""
}

// Invoke calls the function built from binary (the runner's name of it:
// see FunctionName) with payload, as the console's Test tab (or a schedule)
// would.
func (s *Stack) Invoke(ctx context.Context, binary string, payload []byte) (rie.Result, error) {
	f, ok := s.metered[binary]
	if !ok {
		return rie.Result{}, fmt.Errorf("local: no function %s in the template", binary)
	}
	return f.Invoke(ctx, payload)
}

// Deployment is what was provisioned (names, ARNs, outputs).
func (s *Stack) Deployment() *template.Deployment { return s.deployment }

// Config is the aws.Config pointed at the stand-in.
func (s *Stack) Config() aws.Config { return s.cfg }

// Stats are the mappings' counters so far.
func (s *Stack) Stats() *Stats { return s.stats }

// Errors reports mapping failures (a poller that stopped); nil channel reads block.
func (s *Stack) Errors() <-chan error { return s.errs }

// PublishQueueMetrics puts every queue's AWS/SQS depth metrics to the
// stand-in's CloudWatch now, without waiting for the next interval.
func (s *Stack) PublishQueueMetrics(ctx context.Context) error { return s.queueStats.Publish(ctx) }

// OwnMetric is the sum of the values this stack's functions (and the
// runner's emulated service metrics) put to m's series, to tell them from
// another run's on a shared endpoint.
func (s *Stack) OwnMetric(m cloudwatchlocal.MetricSummary) float64 { return s.sink.Own(m) }

// FlushLogs sends buffered log lines and metrics to the stand-in's CloudWatch now.
func (s *Stack) FlushLogs(ctx context.Context) error { return s.sink.Flush(ctx) }

// Crashes lists the invocations so far whose runtime process exited
// (Runtime.ExitError), oldest first: a function that crashed, whether a
// mapping's retry or the next tick then succeeded or not.
func (s *Stack) Crashes() []Crash { return s.crashes.all() }

// Close stops mappings, function URLs and functions, and flushes logs.
func (s *Stack) Close() error {
	if s.stopTicks != nil {
		s.stopTicks()
	}
	s.cancel()
	s.wg.Wait()
	if s.queueStats != nil {
		s.queueStats.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, u := range s.urls {
		errs = append(errs, u.close(ctx))
	}
	if s.invokeAPI != nil {
		errs = append(errs, s.invokeAPI.close(ctx))
	}
	if s.dashboard != nil {
		errs = append(errs, s.dashboard.close(ctx))
	}
	for _, f := range s.functions {
		errs = append(errs, f.Stop())
	}
	if s.sink != nil {
		errs = append(errs, s.sink.Close(ctx))
	}
	return errors.Join(errs...)
}

// maxEnvironments caps a function's execution environments locally (the
// machine runs every function at once).
const maxEnvironments = 3

// instancesFor sizes a function's pool of execution environments as Lambda
// would scale it, within maxEnvironments: up to its reserved concurrency, and
// for a function on SQS up to its mappings' MaximumConcurrency (Lambda
// scales queue consumers out to it), else 2.
func instancesFor(f template.FunctionSpec, mappings []template.MappingSpec) int {
	if f.ReservedConcurrency != nil && *f.ReservedConcurrency > 0 {
		return min(*f.ReservedConcurrency, maxEnvironments)
	}
	n := 0
	for _, m := range mappings {
		if m.FunctionLogicalID == f.LogicalID && m.SourceKind == template.SourceSQS {
			c := m.MaximumConcurrency
			if c <= 0 {
				c = maxEnvironments
			}
			n = max(n, c)
		}
	}
	if n == 0 {
		return 2
	}
	return min(n, maxEnvironments)
}

func functionOf(logicalID string, specs []template.FunctionSpec) template.FunctionSpec {
	for _, f := range specs {
		if f.LogicalID == logicalID {
			return f
		}
	}
	return template.FunctionSpec{}
}

func toSettings(m template.MappingSpec, specs []template.FunctionSpec) eventsource.Settings {
	f := functionOf(m.FunctionLogicalID, specs)
	return eventsource.Settings{
		FunctionName:               f.FunctionName,
		FunctionARN:                f.ARN,
		SourceARN:                  m.SourceARN,
		BatchSize:                  m.BatchSize,
		MaximumBatchingWindow:      m.MaxBatchingWindow,
		StartingPosition:           m.StartingPosition,
		StartingPositionTimestamp:  m.StartingPositionTimestamp,
		ReportBatchItemFailures:    m.ReportBatchItemFailures,
		BisectBatchOnFunctionError: m.BisectBatchOnFunctionError,
		MaximumRetryAttempts:       m.MaximumRetryAttempts,
		MaximumRecordAge:           m.MaximumRecordAge,
		OnFailureARN:               m.OnFailureARN,
		TumblingWindow:             m.TumblingWindow,
		ParallelizationFactor:      m.ParallelizationFactor,
		FilterPatterns:             m.FilterPatterns,
		MaximumConcurrency:         m.MaximumConcurrency,
		Enabled:                    m.Enabled,
	}
}

// sortedKeys returns m's keys in order, for stable printing.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func shortARN(arn string) string {
	for i := len(arn) - 1; i >= 0; i-- {
		if arn[i] == ':' {
			return arn[i+1:]
		}
	}
	return arn
}
