package template

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// FunctionMetadataKey is the CloudFormation Metadata key that names the
// function's binary (functions/<name>, built to <dir>/<name>/bootstrap).
const FunctionMetadataKey = "tributary:function"

// PipelineMetadataKey is the Metadata key naming the pipeline file a
// function runs (an aggregation's aggregate and ticker, a join's join
// function, a CEP file's detect and rules functions).
const PipelineMetadataKey = "tributary:pipeline"

// FunctionSpec is an AWS::Lambda::Function as the local runner needs it.
type FunctionSpec struct {
	LogicalID string
	// Binary is the function's name under functions/ (Metadata
	// "tributary:function"); empty when the template does not say.
	Binary string
	// Pipeline is the pipeline the function runs (Metadata
	// "tributary:pipeline"); empty for a function that runs none.
	Pipeline string
	// FunctionName is the physical name: the template's, or a generated
	// <Stack>-<LogicalID> (at most 64 characters).
	FunctionName string
	ARN          string
	// Env is the function's environment with every reference resolved.
	Env          map[string]string
	Timeout      time.Duration // AWS default 3s
	MemoryMB     int           // AWS default 128
	Architecture string        // "arm64" or "x86_64" (the AWS default)
	// ReservedConcurrency is nil when the function has no reserved
	// concurrency (0 would mean the function is throttled entirely).
	ReservedConcurrency *int
	Runtime             string
	Handler             string
	// AssetPath is CDK's Metadata "aws:asset:path" (relative to cdk.out), if any.
	AssetPath string
	// LogGroup is where Lambda writes the function's logs:
	// LoggingConfig.LogGroup, or /aws/lambda/<FunctionName>.
	LogGroup string
	// LogFormat is LoggingConfig.LogFormat: "Text" (the default) or "JSON".
	LogFormat string
}

// Functions returns the template's Lambda functions in logical id order.
func (d *Deployment) Functions() ([]FunctionSpec, error) {
	var out []FunctionSpec
	for _, id := range d.idsOfType("AWS::Lambda::Function") {
		pr, err := d.resolvedProps(id)
		if err != nil {
			return nil, err
		}
		f := d.functionNamed(id)
		f.Env, f.Architecture = map[string]string{}, "x86_64"
		env, err := pr.obj("Environment")
		if err != nil {
			return nil, err
		}
		vars, err := env.obj("Variables")
		if err != nil {
			return nil, err
		}
		for k := range vars.m {
			if f.Env[k], err = vars.str(k); err != nil {
				return nil, err
			}
		}
		secs, err := pr.integer("Timeout", 3)
		if err != nil {
			return nil, err
		}
		f.Timeout = time.Duration(secs) * time.Second
		if f.MemoryMB, err = pr.integer("MemorySize", 128); err != nil {
			return nil, err
		}
		archs, err := pr.strs("Architectures")
		if err != nil {
			return nil, err
		}
		if len(archs) > 0 {
			f.Architecture = archs[0]
		}
		if pr.has("ReservedConcurrentExecutions") {
			n, err := pr.integer("ReservedConcurrentExecutions", 0)
			if err != nil {
				return nil, err
			}
			f.ReservedConcurrency = &n
		}
		if f.Runtime, err = pr.str("Runtime"); err != nil {
			return nil, err
		}
		if f.Handler, err = pr.str("Handler"); err != nil {
			return nil, err
		}
		lc, err := pr.obj("LoggingConfig")
		if err != nil {
			return nil, err
		}
		if f.LogGroup, err = lc.str("LogGroup"); err != nil {
			return nil, err
		}
		if f.LogGroup == "" {
			f.LogGroup = "/aws/lambda/" + f.FunctionName
		}
		if f.LogFormat, err = lc.str("LogFormat"); err != nil {
			return nil, err
		}
		if f.LogFormat == "" {
			f.LogFormat = "Text"
		}
		out = append(out, f)
	}
	return out, nil
}

// SourceKind is the service an event source mapping reads from.
type SourceKind string

// Source kinds.
const (
	SourceKinesis  SourceKind = "kinesis"
	SourceDynamoDB SourceKind = "dynamodb"
	SourceSQS      SourceKind = "sqs"
)

// MappingSpec is an AWS::Lambda::EventSourceMapping with AWS's defaults
// filled in.
type MappingSpec struct {
	LogicalID string
	// FunctionLogicalID is the function the mapping invokes.
	FunctionLogicalID string
	// SourceLogicalID is the stream, table or queue read, when it is in the
	// template ("" for an ARN from elsewhere).
	SourceLogicalID string
	SourceARN       string
	SourceKind      SourceKind
	// ConsumerARN is the enhanced fan-out consumer the mapping reads
	// through when its EventSourceArn is an AWS::Kinesis::StreamConsumer
	// (SourceARN is then the consumer's stream); "" otherwise. Locally the
	// runner polls the stream's shards as for any Kinesis mapping.
	ConsumerARN string
	// BatchSize defaults to 100 for streams and 10 for SQS.
	BatchSize         int
	MaxBatchingWindow time.Duration
	// StartingPosition is TRIM_HORIZON, LATEST or AT_TIMESTAMP for streams,
	// "" for SQS.
	StartingPosition          string
	StartingPositionTimestamp time.Time
	ReportBatchItemFailures   bool
	// Stream sources only.
	BisectBatchOnFunctionError bool
	// MaximumRetryAttempts is -1 (retry until the record expires, the AWS
	// default) or 0..10000. Stream sources only.
	MaximumRetryAttempts int
	// MaximumRecordAge is 0 when records are retried however old they are
	// (the AWS default, -1 in the template). Stream sources only.
	MaximumRecordAge time.Duration
	// OnFailureARN is the on-failure destination (SQS queue, SNS topic, S3
	// bucket); "" when none. Stream sources only.
	OnFailureARN          string
	TumblingWindow        time.Duration
	ParallelizationFactor int // default 1
	// FilterPatterns are the FilterCriteria patterns, as JSON strings.
	FilterPatterns []string
	// MaximumConcurrency is the SQS ScalingConfig limit; 0 when unset.
	MaximumConcurrency int
	Enabled            bool
}

// FunctionNames returns the template's Lambda functions in logical id
// order with only what names them filled in (LogicalID, Binary, Pipeline,
// FunctionName, ARN, AssetPath). Unlike Functions it resolves no property,
// so it answers on a deployment only planned (Plan), before the resources
// its environment refers to exist.
func (d *Deployment) FunctionNames() []FunctionSpec {
	var out []FunctionSpec
	for _, id := range d.idsOfType("AWS::Lambda::Function") {
		out = append(out, d.functionNamed(id))
	}
	return out
}

// functionNamed is function id's spec with what names it filled in.
func (d *Deployment) functionNamed(id string) FunctionSpec {
	r := d.t.Resources[id]
	d.mu.Lock()
	ph := d.res[id]
	f := FunctionSpec{LogicalID: id, FunctionName: ph.name, ARN: ph.attrs["Arn"]}
	d.mu.Unlock()
	if b, ok := r.Metadata[FunctionMetadataKey].(string); ok {
		f.Binary = b
	}
	if p, ok := r.Metadata[PipelineMetadataKey].(string); ok {
		f.Pipeline = p
	}
	if a, ok := r.Metadata["aws:asset:path"].(string); ok {
		f.AssetPath = a
	}
	return f
}

// Mappings returns the template's event source mappings in logical id order.
func (d *Deployment) Mappings() ([]MappingSpec, error) {
	var out []MappingSpec
	for _, id := range d.idsOfType("AWS::Lambda::EventSourceMapping") {
		pr, err := d.resolvedProps(id)
		if err != nil {
			return nil, err
		}
		raw := d.t.Resources[id].Properties
		m := MappingSpec{LogicalID: id}
		if m.FunctionLogicalID, err = d.functionOf(raw["FunctionName"], pr, "FunctionName"); err != nil {
			return nil, err
		}
		if m.SourceARN, err = pr.str("EventSourceArn"); err != nil {
			return nil, err
		}
		if m.SourceARN == "" {
			return nil, fmt.Errorf("template: %s: missing (only Kinesis, DynamoDB Streams and SQS sources are emulated)", pr.at("EventSourceArn"))
		}
		if refs := d.t.refsOf(raw["EventSourceArn"]); len(refs) == 1 {
			m.SourceLogicalID = refs[0]
		}
		if stream, streamID, ok := d.consumerStream(m.SourceARN); ok {
			m.ConsumerARN, m.SourceARN, m.SourceLogicalID = m.SourceARN, stream, streamID
		}
		switch {
		case strings.HasPrefix(m.SourceARN, "arn:") && strings.Contains(m.SourceARN, ":kinesis:"):
			m.SourceKind = SourceKinesis
		case strings.Contains(m.SourceARN, ":dynamodb:") && strings.Contains(m.SourceARN, "/stream/"):
			m.SourceKind = SourceDynamoDB
		case strings.Contains(m.SourceARN, ":sqs:"):
			m.SourceKind = SourceSQS
		default:
			return nil, fmt.Errorf("template: %s: %s is not a Kinesis stream, DynamoDB stream or SQS queue; other sources are not emulated", pr.at("EventSourceArn"), m.SourceARN)
		}
		stream := m.SourceKind != SourceSQS
		defBatch := 10
		if stream {
			defBatch = 100
		}
		if m.BatchSize, err = pr.integer("BatchSize", defBatch); err != nil {
			return nil, err
		}
		if m.BatchSize < 1 {
			return nil, fmt.Errorf("template: %s: %d: want at least 1", pr.at("BatchSize"), m.BatchSize)
		}
		w, err := pr.integer("MaximumBatchingWindowInSeconds", 0)
		if err != nil {
			return nil, err
		}
		m.MaxBatchingWindow = time.Duration(w) * time.Second
		if m.StartingPosition, err = pr.str("StartingPosition"); err != nil {
			return nil, err
		}
		if stream && m.StartingPosition == "" {
			return nil, fmt.Errorf("template: %s: required for a %s source (TRIM_HORIZON, LATEST or AT_TIMESTAMP)", pr.at("StartingPosition"), m.SourceKind)
		}
		if pr.has("StartingPositionTimestamp") {
			s, err := pr.str("StartingPositionTimestamp")
			if err != nil {
				return nil, err
			}
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("template: %s: %q is not seconds since the epoch", pr.at("StartingPositionTimestamp"), s)
			}
			sec, frac := math.Modf(f)
			m.StartingPositionTimestamp = time.Unix(int64(sec), int64(frac*1e9)).UTC()
		}
		types, err := pr.strs("FunctionResponseTypes")
		if err != nil {
			return nil, err
		}
		for _, t := range types {
			if t == "ReportBatchItemFailures" {
				m.ReportBatchItemFailures = true
			}
		}
		if m.BisectBatchOnFunctionError, err = pr.boolean("BisectBatchOnFunctionError", false); err != nil {
			return nil, err
		}
		if m.MaximumRetryAttempts, err = pr.integer("MaximumRetryAttempts", -1); err != nil {
			return nil, err
		}
		age, err := pr.integer("MaximumRecordAgeInSeconds", -1)
		if err != nil {
			return nil, err
		}
		if age > 0 {
			m.MaximumRecordAge = time.Duration(age) * time.Second
		}
		dc, err := pr.obj("DestinationConfig")
		if err != nil {
			return nil, err
		}
		of, err := dc.obj("OnFailure")
		if err != nil {
			return nil, err
		}
		if m.OnFailureARN, err = of.str("Destination"); err != nil {
			return nil, err
		}
		tw, err := pr.integer("TumblingWindowInSeconds", 0)
		if err != nil {
			return nil, err
		}
		m.TumblingWindow = time.Duration(tw) * time.Second
		if m.ParallelizationFactor, err = pr.integer("ParallelizationFactor", 1); err != nil {
			return nil, err
		}
		fc, err := pr.obj("FilterCriteria")
		if err != nil {
			return nil, err
		}
		filters, err := fc.objs("Filters")
		if err != nil {
			return nil, err
		}
		for _, f := range filters {
			pat, err := f.str("Pattern")
			if err != nil {
				return nil, err
			}
			m.FilterPatterns = append(m.FilterPatterns, pat)
		}
		sc, err := pr.obj("ScalingConfig")
		if err != nil {
			return nil, err
		}
		if m.MaximumConcurrency, err = sc.integer("MaximumConcurrency", 0); err != nil {
			return nil, err
		}
		if m.Enabled, err = pr.boolean("Enabled", true); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// URLSpec is an AWS::Lambda::Url.
type URLSpec struct {
	LogicalID         string
	FunctionLogicalID string
	AuthType          string // NONE or AWS_IAM
	InvokeMode        string // BUFFERED (default) or RESPONSE_STREAM
	Cors              *Cors  // nil when the URL has no CORS configuration
}

// Cors is a function URL's CORS configuration.
type Cors struct {
	AllowCredentials bool
	AllowHeaders     []string
	AllowMethods     []string
	AllowOrigins     []string
	ExposeHeaders    []string
	MaxAge           time.Duration
}

// URLs returns the template's function URLs in logical id order.
func (d *Deployment) URLs() ([]URLSpec, error) {
	var out []URLSpec
	for _, id := range d.idsOfType("AWS::Lambda::Url") {
		pr, err := d.resolvedProps(id)
		if err != nil {
			return nil, err
		}
		u := URLSpec{LogicalID: id}
		if u.FunctionLogicalID, err = d.functionOf(d.t.Resources[id].Properties["TargetFunctionArn"], pr, "TargetFunctionArn"); err != nil {
			return nil, err
		}
		if u.AuthType, err = pr.str("AuthType"); err != nil {
			return nil, err
		}
		if u.InvokeMode, err = pr.str("InvokeMode"); err != nil {
			return nil, err
		}
		if u.InvokeMode == "" {
			u.InvokeMode = "BUFFERED"
		}
		if pr.has("Cors") {
			c, err := pr.obj("Cors")
			if err != nil {
				return nil, err
			}
			cors := &Cors{}
			if cors.AllowCredentials, err = c.boolean("AllowCredentials", false); err != nil {
				return nil, err
			}
			for key, dst := range map[string]*[]string{
				"AllowHeaders": &cors.AllowHeaders, "AllowMethods": &cors.AllowMethods,
				"AllowOrigins": &cors.AllowOrigins, "ExposeHeaders": &cors.ExposeHeaders,
			} {
				if *dst, err = c.strs(key); err != nil {
					return nil, err
				}
			}
			age, err := c.integer("MaxAge", 0)
			if err != nil {
				return nil, err
			}
			cors.MaxAge = time.Duration(age) * time.Second
			u.Cors = cors
		}
		out = append(out, u)
	}
	return out, nil
}

// Outputs returns the template's outputs resolved against the deployment.
func (d *Deployment) Outputs() (map[string]string, error) {
	out := map[string]string{}
	for name, o := range d.t.Outputs {
		if o.Condition != "" {
			ok, err := d.condition(o.Condition)
			if err != nil {
				return nil, fmt.Errorf("template: Outputs.%s.Condition: %w", name, err)
			}
			if !ok {
				continue
			}
		}
		v, err := d.resolveString(o.Value, "Outputs."+name+".Value")
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

// TableInfo describes a table Provision created or reused.
type TableInfo struct {
	LogicalID, Name, ARN string
	StreamARN            string // "" when the table has no stream
	Reused               bool
}

// StreamInfo describes a Kinesis stream Provision created or reused.
type StreamInfo struct {
	LogicalID, Name, ARN string
	Shards               int
	Reused               bool
}

// QueueInfo describes a queue Provision created or reused.
type QueueInfo struct {
	LogicalID, Name, ARN, URL string
	Reused                    bool
}

// Tables lists the DynamoDB tables in logical id order.
func (d *Deployment) Tables() []TableInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []TableInfo
	for _, id := range d.idsOfTypeLocked("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable") {
		ph := d.res[id]
		out = append(out, TableInfo{LogicalID: id, Name: ph.name, ARN: ph.attrs["Arn"], StreamARN: ph.attrs["StreamArn"], Reused: ph.reused})
	}
	return out
}

// Streams lists the Kinesis streams in logical id order.
func (d *Deployment) Streams() []StreamInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []StreamInfo
	for _, id := range d.idsOfTypeLocked("AWS::Kinesis::Stream") {
		ph := d.res[id]
		out = append(out, StreamInfo{LogicalID: id, Name: ph.name, ARN: ph.attrs["Arn"], Shards: ph.shards, Reused: ph.reused})
	}
	return out
}

// Queues lists the SQS queues in logical id order.
func (d *Deployment) Queues() []QueueInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []QueueInfo
	for _, id := range d.idsOfTypeLocked("AWS::SQS::Queue") {
		ph := d.res[id]
		out = append(out, QueueInfo{LogicalID: id, Name: ph.name, ARN: ph.attrs["Arn"], URL: ph.ref, Reused: ph.reused})
	}
	return out
}

func (d *Deployment) idsOfType(types ...string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.idsOfTypeLocked(types...)
}

func (d *Deployment) idsOfTypeLocked(types ...string) []string {
	var out []string
	for id, ph := range d.res {
		for _, t := range types {
			if ph.typ == t {
				out = append(out, id)
			}
		}
	}
	sort.Strings(out)
	return out
}

// functionOf finds the logical id of the function a FunctionName or
// TargetFunctionArn property names: {"Ref": fn}, {"Fn::GetAtt": [fn, "Arn"]},
// or a literal name or ARN of a function in the template.
func (d *Deployment) functionOf(raw any, pr props, key string) (string, error) {
	for _, id := range d.t.refsOf(raw) {
		if d.t.Resources[id].Type == "AWS::Lambda::Function" {
			return id, nil
		}
		if d.t.Resources[id].Type == "AWS::Lambda::Alias" || d.t.Resources[id].Type == "AWS::Lambda::Version" {
			return d.functionOf(d.t.Resources[id].Properties["FunctionName"], pr, key)
		}
	}
	v, err := pr.str(key)
	if err != nil {
		return "", err
	}
	for _, id := range d.idsOfType("AWS::Lambda::Function") {
		d.mu.Lock()
		ph := d.res[id]
		arn := ph.attrs["Arn"]
		d.mu.Unlock()
		if v == ph.name || v == arn || strings.HasPrefix(v, arn+":") {
			return id, nil
		}
	}
	return "", fmt.Errorf("template: %s: %q is not a function of this template", pr.at(key), v)
}
