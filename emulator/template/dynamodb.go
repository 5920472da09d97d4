package template

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// dynamodbAPI is what Provision needs of DynamoDB.
type dynamodbAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ dynamodbAPI = (*dynamodb.Client)(nil)

// tableSpec is what a table resource asks for.
type tableSpec struct {
	create   dynamodb.CreateTableInput
	ttlAttr  string // "" when TTL is not enabled
	viewType types.StreamViewType
}

// table creates (or reuses) an AWS::DynamoDB::Table or
// AWS::DynamoDB::GlobalTable, enables its stream and TTL, and records its
// StreamArn.
func (p *provisioner) table(ctx context.Context, id string, ph *physicalResource) error {
	spec, err := p.d.tableSpec(id, ph)
	if err != nil {
		return err
	}
	desc, err := p.describeTable(ctx, ph.name)
	if err != nil {
		return err
	}
	if desc == nil {
		_, err := p.dynamodb.CreateTable(ctx, &spec.create)
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("create table: %w", err)
		}
		if err == nil {
			what := ""
			if spec.viewType != "" {
				what = ", stream " + string(spec.viewType)
			}
			if spec.ttlAttr != "" {
				what += ", TTL on " + spec.ttlAttr
			}
			p.d.report(fmt.Sprintf("created DynamoDB table %s%s", ph.name, what))
		}
	} else {
		ph.reused = true
		if err := sameKeys(desc.KeySchema, spec.create.KeySchema); err != nil {
			return fmt.Errorf("table already exists with another key schema (%v); delete it or use another stack name", err)
		}
		p.d.report(fmt.Sprintf("reused DynamoDB table %s", ph.name))
	}
	err = p.waitFor(ctx, "table "+ph.name+" ACTIVE", func() (bool, error) {
		t, err := p.describeTable(ctx, ph.name)
		if err != nil || t == nil {
			return false, err
		}
		desc = t
		return t.TableStatus == types.TableStatusActive, nil
	})
	if err != nil {
		return err
	}
	if spec.viewType != "" && (desc.StreamSpecification == nil || !aws.ToBool(desc.StreamSpecification.StreamEnabled) || desc.StreamSpecification.StreamViewType != spec.viewType) {
		// An existing table without the stream the template asks for
		// (or with another view type): a stream's view type cannot be
		// changed in place, so a different one is reported.
		if desc.StreamSpecification != nil && aws.ToBool(desc.StreamSpecification.StreamEnabled) {
			p.d.note(fmt.Sprintf("%s: table %s already has a %s stream (template: %s); kept — delete the table to recreate", id, ph.name, desc.StreamSpecification.StreamViewType, spec.viewType))
		} else {
			if _, err := p.dynamodb.UpdateTable(ctx, &dynamodb.UpdateTableInput{
				TableName:           aws.String(ph.name),
				StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: spec.viewType},
			}); err != nil {
				return fmt.Errorf("enable stream: %w", err)
			}
			if desc, err = p.describeTable(ctx, ph.name); err != nil {
				return err
			}
			p.d.report(fmt.Sprintf("enabled %s stream on DynamoDB table %s", spec.viewType, ph.name))
		}
	}
	if spec.ttlAttr != "" {
		if err := p.ensureTTL(ctx, ph.name, spec.ttlAttr); err != nil {
			return err
		}
	}
	p.d.mu.Lock()
	if arn := aws.ToString(desc.TableArn); arn != "" {
		ph.attrs["Arn"] = arn
	}
	if s := aws.ToString(desc.LatestStreamArn); s != "" {
		ph.attrs["StreamArn"] = s
	}
	if tid := aws.ToString(desc.TableId); tid != "" {
		ph.attrs["TableId"] = tid
	}
	p.d.mu.Unlock()
	return nil
}

// ensureTTL turns TTL on for attr unless it already is.
func (p *provisioner) ensureTTL(ctx context.Context, table, attr string) error {
	out, err := p.dynamodb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("describe TTL: %w", err)
	}
	if d := out.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == attr &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = p.dynamodb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attr), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("enable TTL on %s: %w", attr, err)
	}
	return nil
}

// describeTable returns nil when the table does not exist.
func (p *provisioner) describeTable(ctx context.Context, name string) (*types.TableDescription, error) {
	out, err := p.dynamodb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describe table: %w", err)
	}
	return out.Table, nil
}

func sameKeys(got, want []types.KeySchemaElement) error {
	f := func(ks []types.KeySchemaElement) string {
		var parts []string
		for _, k := range ks {
			parts = append(parts, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
		}
		return strings.Join(parts, ", ")
	}
	if f(got) != f(want) {
		return fmt.Errorf("has %s, template wants %s", f(got), f(want))
	}
	return nil
}

// tableSpec reads a table resource's properties into a CreateTable call.
func (d *Deployment) tableSpec(id string, ph *physicalResource) (*tableSpec, error) {
	pr, err := d.resolvedProps(id)
	if err != nil {
		return nil, err
	}
	global := ph.typ == "AWS::DynamoDB::GlobalTable"
	spec := &tableSpec{create: dynamodb.CreateTableInput{TableName: aws.String(ph.name)}}
	c := &spec.create

	attrs, err := pr.objs("AttributeDefinitions")
	if err != nil {
		return nil, err
	}
	for _, a := range attrs {
		name, err := a.str("AttributeName")
		if err != nil {
			return nil, err
		}
		typ, err := a.str("AttributeType")
		if err != nil {
			return nil, err
		}
		if !slices.Contains([]string{"S", "N", "B"}, typ) {
			return nil, fmt.Errorf("%s: %q is not S, N or B", a.at("AttributeType"), typ)
		}
		c.AttributeDefinitions = append(c.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeType(typ)})
	}
	if c.KeySchema, err = keySchema(pr, "KeySchema"); err != nil {
		return nil, err
	}
	if len(c.KeySchema) == 0 {
		return nil, fmt.Errorf("%s: missing", pr.at("KeySchema"))
	}

	billing, err := pr.str("BillingMode")
	if err != nil {
		return nil, err
	}
	if billing == "" {
		billing = "PROVISIONED"
	}
	c.BillingMode = types.BillingMode(billing)
	provisioned := billing == "PROVISIONED"
	throughput := func(o props, key string) (*types.ProvisionedThroughput, error) {
		if !provisioned {
			return nil, nil
		}
		pt, err := o.obj(key)
		if err != nil {
			return nil, err
		}
		r, err := pt.integer("ReadCapacityUnits", 5)
		if err != nil {
			return nil, err
		}
		w, err := pt.integer("WriteCapacityUnits", 5)
		if err != nil {
			return nil, err
		}
		return &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(int64(r)), WriteCapacityUnits: aws.Int64(int64(w))}, nil
	}
	if c.ProvisionedThroughput, err = throughput(pr, "ProvisionedThroughput"); err != nil {
		return nil, err
	}

	gsis, err := pr.objs("GlobalSecondaryIndexes")
	if err != nil {
		return nil, err
	}
	for _, g := range gsis {
		name, err := g.str("IndexName")
		if err != nil {
			return nil, err
		}
		ks, err := keySchema(g, "KeySchema")
		if err != nil {
			return nil, err
		}
		proj, err := projection(g)
		if err != nil {
			return nil, err
		}
		gsi := types.GlobalSecondaryIndex{IndexName: aws.String(name), KeySchema: ks, Projection: proj}
		if gsi.ProvisionedThroughput, err = throughput(g, "ProvisionedThroughput"); err != nil {
			return nil, err
		}
		c.GlobalSecondaryIndexes = append(c.GlobalSecondaryIndexes, gsi)
	}
	lsis, err := pr.objs("LocalSecondaryIndexes")
	if err != nil {
		return nil, err
	}
	for _, l := range lsis {
		name, err := l.str("IndexName")
		if err != nil {
			return nil, err
		}
		ks, err := keySchema(l, "KeySchema")
		if err != nil {
			return nil, err
		}
		proj, err := projection(l)
		if err != nil {
			return nil, err
		}
		c.LocalSecondaryIndexes = append(c.LocalSecondaryIndexes, types.LocalSecondaryIndex{IndexName: aws.String(name), KeySchema: ks, Projection: proj})
	}

	ss, err := pr.obj("StreamSpecification")
	if err != nil {
		return nil, err
	}
	vt, err := ss.str("StreamViewType")
	if err != nil {
		return nil, err
	}
	if vt != "" {
		if !slices.Contains([]string{"KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"}, vt) {
			return nil, fmt.Errorf("%s: %q is not KEYS_ONLY, NEW_IMAGE, OLD_IMAGE or NEW_AND_OLD_IMAGES", ss.at("StreamViewType"), vt)
		}
		spec.viewType = types.StreamViewType(vt)
		c.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: spec.viewType}
	}

	ttl, err := pr.obj("TimeToLiveSpecification")
	if err != nil {
		return nil, err
	}
	on, err := ttl.boolean("Enabled", false)
	if err != nil {
		return nil, err
	}
	if on {
		if spec.ttlAttr, err = ttl.str("AttributeName"); err != nil {
			return nil, err
		}
		if spec.ttlAttr == "" {
			return nil, fmt.Errorf("%s: missing while TTL is enabled", ttl.at("AttributeName"))
		}
	}

	if pr.has("KinesisStreamSpecification") {
		d.note(fmt.Sprintf("%s: KinesisStreamSpecification (table changes to a Kinesis stream) is not emulated locally", id))
	}
	if global {
		reps, err := pr.objs("Replicas")
		if err != nil {
			return nil, err
		}
		for _, r := range reps {
			rg, _ := r.str("Region")
			if rg != "" && rg != d.region {
				d.note(fmt.Sprintf("%s: replica in %s is not emulated; only the %s table exists locally", id, rg, d.region))
			}
		}
	}
	return spec, nil
}

func keySchema(o props, key string) ([]types.KeySchemaElement, error) {
	ks, err := o.objs(key)
	if err != nil {
		return nil, err
	}
	var out []types.KeySchemaElement
	for _, k := range ks {
		name, err := k.str("AttributeName")
		if err != nil {
			return nil, err
		}
		typ, err := k.str("KeyType")
		if err != nil {
			return nil, err
		}
		if typ != "HASH" && typ != "RANGE" {
			return nil, fmt.Errorf("%s: %q is not HASH or RANGE", k.at("KeyType"), typ)
		}
		out = append(out, types.KeySchemaElement{AttributeName: aws.String(name), KeyType: types.KeyType(typ)})
	}
	return out, nil
}

func projection(o props) (*types.Projection, error) {
	p, err := o.obj("Projection")
	if err != nil {
		return nil, err
	}
	typ, err := p.str("ProjectionType")
	if err != nil {
		return nil, err
	}
	if typ == "" {
		typ = "ALL"
	}
	nk, err := p.strs("NonKeyAttributes")
	if err != nil {
		return nil, err
	}
	return &types.Projection{ProjectionType: types.ProjectionType(typ), NonKeyAttributes: nk}, nil
}
