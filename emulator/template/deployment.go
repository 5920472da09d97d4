package template

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Local identity of the stand-in: moto's default account, the region every
// local client uses.
const (
	DefaultAccountID = "123456789012"
	DefaultRegion    = "us-east-1"
)

// ProvisionOptions say how to name and report what Provision creates.
type ProvisionOptions struct {
	// Stack is the prefix of generated physical names (<Stack>-<LogicalID>)
	// and the value of AWS::StackName. Empty means the template's Name, or
	// "local".
	Stack string
	// Progress, when set, receives one line per resource created or reused
	// and per semantic adjustment. The resources of one dependency level
	// are provisioned at once: it is called from several goroutines.
	Progress func(msg string)
	// Region and AccountID override the pseudo parameters; empty means the
	// aws.Config's region (or us-east-1) and moto's default account.
	Region    string
	AccountID string
}

// Deployment is a template bound to physical resources: names, ARNs and URLs
// on the endpoint it was provisioned to.
type Deployment struct {
	t                                 *Template
	stack, region, account, partition string
	urlSuffix                         string
	progress                          func(string)
	order                             []string // logical ids in dependency order
	mu                                sync.Mutex
	res                               map[string]*physicalResource
	conds                             map[string]bool
	evaluating                        map[string]bool
	skipped                           []Skipped
	notes                             []string
	playedRules                       map[string]bool // scheduled rules the runner plays (Schedules)
}

// physicalResource is what one logical resource became.
type physicalResource struct {
	typ         string
	name        string // physical name, when the type has one
	ref         string // what Ref returns
	attrs       map[string]string
	provisioned bool // created or reused on the endpoint
	reused      bool
	shards      int // Kinesis
}

// Skipped is a resource of the template that Provision does not create.
type Skipped struct {
	LogicalID string
	Type      string
	// Reason says what happens to it locally.
	Reason string
	// RunByRunner is true for the Lambda resources the local runner plays
	// itself (functions, event source mappings, function URLs).
	RunByRunner bool
}

// Template returns the template d was planned from.
func (d *Deployment) Template() *Template { return d.t }

// StackName is the value of AWS::StackName and the prefix of generated names.
func (d *Deployment) StackName() string { return d.stack }

// Skipped lists the template's resources that are not created on the
// endpoint, in logical id order.
func (d *Deployment) Skipped() []Skipped { return append([]Skipped(nil), d.skipped...) }

// Notes lists where the local deployment differs from what AWS would do
// (for example an ON_DEMAND stream emulated with provisioned shards).
func (d *Deployment) Notes() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.notes...)
}

// SetAttribute defines or overrides what Fn::GetAtt logicalID.attr (or, with
// attr "Ref", what Ref logicalID) resolves to. The local runner uses it for
// values only it knows, such as the FunctionUrl it serves a function on.
func (d *Deployment) SetAttribute(logicalID, attr, value string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	ph, ok := d.res[logicalID]
	if !ok {
		return fmt.Errorf("template: SetAttribute: no resource %q in the deployment", logicalID)
	}
	if attr == "Ref" {
		ph.ref = value
		return nil
	}
	ph.attrs[attr] = value
	return nil
}

func (d *Deployment) note(msg string) {
	d.mu.Lock()
	d.notes = append(d.notes, msg)
	d.mu.Unlock()
	d.report(msg)
}

func (d *Deployment) report(msg string) {
	if d.progress != nil {
		d.progress(msg)
	}
}

var stackNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,127}$`)

// ValidStackName reports whether stack is a name Plan takes: a letter,
// then letters, digits and hyphens, at most 128 in all.
func ValidStackName(stack string) bool { return stackNameRE.MatchString(stack) }

// Plan binds t to physical names without touching any endpoint: names,
// ARNs and the references between resources are known, but attributes only
// the endpoint can give (a DynamoDB StreamArn, a queue's URL on the
// endpoint) are known only after Provision.
func Plan(t *Template, opts ProvisionOptions) (*Deployment, error) {
	stack := opts.Stack
	if stack == "" {
		stack = t.Name
	}
	if stack == "" {
		stack = "local"
	}
	if !ValidStackName(stack) {
		return nil, fmt.Errorf("template: ProvisionOptions.Stack %q: a stack name starts with a letter and has only letters, digits and hyphens (at most 128)", stack)
	}
	d := &Deployment{
		t:           t,
		stack:       stack,
		region:      opts.Region,
		account:     opts.AccountID,
		partition:   "aws",
		urlSuffix:   "amazonaws.com",
		progress:    opts.Progress,
		res:         map[string]*physicalResource{},
		conds:       map[string]bool{},
		evaluating:  map[string]bool{},
		playedRules: map[string]bool{},
	}
	if d.region == "" {
		d.region = DefaultRegion
	}
	if d.account == "" {
		d.account = DefaultAccountID
	}
	if strings.HasPrefix(d.region, "cn-") {
		d.partition, d.urlSuffix = "aws-cn", "amazonaws.com.cn"
	}
	order, err := t.dependencyOrder()
	if err != nil {
		return nil, err
	}
	for _, id := range order {
		r := t.Resources[id]
		if r.Condition != "" {
			ok, err := d.condition(r.Condition)
			if err != nil {
				return nil, fmt.Errorf("template: Resources.%s.Condition: %w", id, err)
			}
			if !ok {
				continue
			}
		}
		d.order = append(d.order, id)
	}
	// Names first (in dependency order, as a name may be built from another
	// resource's name), then what each type exposes.
	for _, id := range d.order {
		ph, err := d.plan(id)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		d.res[id] = ph
		d.mu.Unlock()
		if !provisionable(ph.typ) {
			reason, byRunner := skipReason(ph.typ)
			if ph.typ == "AWS::Events::Rule" {
				rp := d.classifyRule(id)
				reason, byRunner = rp.reason, rp.played
				d.playedRules[id] = rp.played
				for _, n := range rp.notes {
					d.note(n)
				}
			}
			d.skipped = append(d.skipped, Skipped{LogicalID: id, Type: ph.typ, Reason: reason, RunByRunner: byRunner})
		}
	}
	sort.Slice(d.skipped, func(i, j int) bool { return d.skipped[i].LogicalID < d.skipped[j].LogicalID })
	return d, nil
}

// provisionable reports whether Provision creates resources of type typ.
func provisionable(typ string) bool {
	switch typ {
	case "AWS::Kinesis::Stream", "AWS::Kinesis::StreamConsumer", "AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable", "AWS::SQS::Queue",
		"AWS::SSM::Parameter", "AWS::SecretsManager::Secret", "AWS::S3::Bucket":
		return true
	}
	return false
}

func skipReason(typ string) (string, bool) {
	switch {
	case typ == "AWS::Lambda::Function":
		return "run by the local runner under aws-lambda-rie", true
	case typ == "AWS::Lambda::EventSourceMapping":
		return "played by the local runner's event source mappings", true
	case typ == "AWS::Lambda::Url":
		return "served by the local runner over HTTP", true
	case typ == "AWS::Lambda::EventInvokeConfig":
		return "asynchronous invoke settings are not emulated: the runner invokes schedule targets once, synchronously", false
	case typ == "AWS::CDK::Metadata":
		return "CDK metadata, nothing to run", false
	case strings.HasPrefix(typ, "AWS::IAM::"), typ == "AWS::Lambda::Permission",
		typ == "AWS::SQS::QueuePolicy", typ == "AWS::SNS::TopicPolicy", typ == "AWS::S3::BucketPolicy":
		return "permissions are not enforced locally", false
	case strings.HasPrefix(typ, "AWS::KMS::"):
		return "encryption keys are not emulated; data is stored unencrypted locally", false
	case strings.HasPrefix(typ, "AWS::Logs::"):
		return "log groups are created on demand by the local CloudWatch sink", false
	case strings.HasPrefix(typ, "AWS::Events::"), strings.HasPrefix(typ, "AWS::Scheduler::"):
		return "schedules and EventBridge rules are not emulated", false
	case strings.HasPrefix(typ, "Custom::"), typ == "AWS::CloudFormation::CustomResource":
		return "custom resources are not run locally", false
	case strings.HasPrefix(typ, "AWS::CloudWatch::"):
		return "alarms and dashboards are not emulated", false
	}
	return "not emulated locally", false
}

// nameRule says which property carries a type's explicit physical name and
// how long a name may be.
type nameRule struct {
	prop string
	max  int
}

var nameRules = map[string]nameRule{
	"AWS::Kinesis::Stream":        {"Name", 128},
	"AWS::DynamoDB::Table":        {"TableName", 255},
	"AWS::DynamoDB::GlobalTable":  {"TableName", 255},
	"AWS::SQS::Queue":             {"QueueName", 80},
	"AWS::SNS::Topic":             {"TopicName", 256},
	"AWS::Lambda::Function":       {"FunctionName", 64},
	"AWS::IAM::Role":              {"RoleName", 64},
	"AWS::IAM::Policy":            {"PolicyName", 128},
	"AWS::Logs::LogGroup":         {"LogGroupName", 512},
	"AWS::Events::Rule":           {"Name", 64},
	"AWS::SSM::Parameter":         {"Name", 2048},
	"AWS::CloudWatch::Alarm":      {"AlarmName", 255},
	"AWS::CloudWatch::Dashboard":  {"DashboardName", 255},
	"AWS::SecretsManager::Secret": {"Name", 512},
	"AWS::S3::Bucket":             {"BucketName", 63},
}

// generatedName is <stack>-<logicalID> within max characters (suffix, e.g.
// ".fifo", included). A name that does not fit keeps its start and gets a
// hash of the whole, so that it stays unique and stable across runs.
func generatedName(stack, logicalID string, max int, suffix string) string {
	base := stack + "-" + logicalID
	limit := max - len(suffix)
	if len(base) > limit {
		sum := sha256.Sum256([]byte(base))
		base = base[:limit-9] + "-" + hex.EncodeToString(sum[:4])
	}
	return base + suffix
}

// stableUUID derives a UUID-shaped id from s, the same on every run.
func stableUUID(s string) string {
	h := sha256.Sum256([]byte(s))
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// plan computes resource id's physical name and the attributes that follow
// from it.
func (d *Deployment) plan(id string) (*physicalResource, error) {
	r := d.t.Resources[id]
	ph := &physicalResource{typ: r.Type, attrs: map[string]string{}}
	if rule, ok := nameRules[r.Type]; ok {
		if v, ok := r.Properties[rule.prop]; ok {
			name, err := d.resolveString(v, "Resources."+id+".Properties."+rule.prop)
			if err != nil {
				return nil, err
			}
			ph.name = name
		} else {
			suffix := ""
			if r.Type == "AWS::SQS::Queue" && truthy(r.Properties["FifoQueue"]) {
				suffix = ".fifo"
			}
			ph.name = generatedName(d.stack, id, rule.max, suffix)
			if r.Type == "AWS::S3::Bucket" {
				ph.name = bucketName(d.stack, id)
			}
		}
	}
	p, rg, a, n := d.partition, d.region, d.account, ph.name
	switch r.Type {
	case "AWS::Kinesis::Stream":
		ph.ref = n
		ph.attrs["Arn"] = fmt.Sprintf("arn:%s:kinesis:%s:%s:stream/%s", p, rg, a, n)
	case "AWS::Kinesis::StreamConsumer":
		if err := d.planConsumer(id, ph); err != nil {
			return nil, err
		}
	case "AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable":
		ph.ref = n
		ph.attrs["Arn"] = fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s", p, rg, a, n)
	case "AWS::SQS::Queue":
		url := fmt.Sprintf("https://sqs.%s.%s/%s/%s", rg, d.urlSuffix, a, n)
		ph.ref = url
		ph.attrs["Arn"] = fmt.Sprintf("arn:%s:sqs:%s:%s:%s", p, rg, a, n)
		ph.attrs["QueueName"] = n
		ph.attrs["QueueUrl"] = url
	case "AWS::SNS::Topic":
		arn := fmt.Sprintf("arn:%s:sns:%s:%s:%s", p, rg, a, n)
		ph.ref = arn
		ph.attrs["TopicArn"] = arn
		ph.attrs["TopicName"] = n
	case "AWS::Lambda::Function":
		ph.ref = n
		ph.attrs["Arn"] = fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", p, rg, a, n)
	case "AWS::Lambda::Url":
		h := sha256.Sum256([]byte(d.stack + "/" + id))
		ph.attrs["FunctionUrl"] = fmt.Sprintf("https://%s.lambda-url.%s.on.aws/", hex.EncodeToString(h[:16]), rg)
	case "AWS::Lambda::EventSourceMapping":
		u := stableUUID(d.stack + "/" + id)
		ph.ref = u
		ph.attrs["Id"] = u
		ph.attrs["EventSourceMappingArn"] = fmt.Sprintf("arn:%s:lambda:%s:%s:event-source-mapping:%s", p, rg, a, u)
	case "AWS::IAM::Role":
		ph.ref = n
		ph.attrs["Arn"] = fmt.Sprintf("arn:%s:iam::%s:role/%s", p, a, n)
		h := sha256.Sum256([]byte(n))
		ph.attrs["RoleId"] = "AROA" + strings.ToUpper(hex.EncodeToString(h[:8]))
	case "AWS::IAM::Policy":
		ph.ref = n
	case "AWS::Logs::LogGroup":
		ph.ref = n
		ph.attrs["Arn"] = fmt.Sprintf("arn:%s:logs:%s:%s:log-group:%s:*", p, rg, a, n)
	case "AWS::KMS::Key":
		u := stableUUID(d.stack + "/" + id)
		ph.ref = u
		ph.attrs["KeyId"] = u
		ph.attrs["Arn"] = fmt.Sprintf("arn:%s:kms:%s:%s:key/%s", p, rg, a, u)
	case "AWS::Events::Rule":
		ph.ref = n
		ph.attrs["Arn"] = fmt.Sprintf("arn:%s:events:%s:%s:rule/%s", p, rg, a, n)
	case "AWS::SQS::QueuePolicy":
		ph.ref = generatedName(d.stack, id, 128, "")
	case "AWS::SSM::Parameter":
		ph.ref = n // Type and Value: known after Provision (ssm.go)
	case "AWS::CloudWatch::Alarm":
		// Not created locally, but a dashboard's alarm widget names it.
		ph.ref = n
		ph.attrs["Arn"] = fmt.Sprintf("arn:%s:cloudwatch:%s:%s:alarm:%s", p, rg, a, n)
	case "AWS::CloudWatch::Dashboard":
		ph.ref = n
	case "AWS::S3::Bucket":
		ph.ref = n
		ph.attrs["Arn"] = fmt.Sprintf("arn:%s:s3:::%s", p, n)
		ph.attrs["DomainName"] = n + ".s3." + d.urlSuffix
		ph.attrs["RegionalDomainName"] = n + ".s3." + rg + "." + d.urlSuffix
	case "AWS::SecretsManager::Secret":
		// Ref and Id are the ARN, whose random suffix the endpoint picks:
		// known after Provision (secrets.go).
	}
	return ph, nil
}

// dependencyOrder sorts the template's resources so that every resource
// comes after those it refers to or depends on (ties in logical id order).
func (t *Template) dependencyOrder() ([]string, error) {
	deps := map[string][]string{}
	for _, id := range t.ids() {
		r := t.Resources[id]
		ds := t.refsOf(r.Properties)
		for _, x := range r.dependsOn() {
			if _, ok := t.Resources[x]; !ok {
				return nil, fmt.Errorf("template: Resources.%s.DependsOn: no resource %q", id, x)
			}
			ds = append(ds, x)
		}
		deps[id] = ds
	}
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	var order []string
	var visit func(id string, chain []string) error
	visit = func(id string, chain []string) error {
		switch state[id] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("template: Resources: circular dependency %s", strings.Join(append(chain, id), " → "))
		}
		state[id] = visiting
		for _, x := range deps[id] {
			if x == id {
				continue
			}
			if err := visit(x, append(chain, id)); err != nil {
				return err
			}
		}
		state[id] = done
		order = append(order, id)
		return nil
	}
	for _, id := range t.ids() {
		if err := visit(id, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// truthy reads a CloudFormation boolean (true or "true").
func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return strings.EqualFold(x, "true")
	}
	return false
}
