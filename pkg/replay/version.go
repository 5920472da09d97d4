package replay

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableAdmin is what creating and deleting view versions needs of DynamoDB.
type TableAdmin interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DescribeContinuousBackups(ctx context.Context, in *dynamodb.DescribeContinuousBackupsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeContinuousBackupsOutput, error)
	UpdateContinuousBackups(ctx context.Context, in *dynamodb.UpdateContinuousBackupsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateContinuousBackupsOutput, error)
	TagResource(ctx context.Context, in *dynamodb.TagResourceInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TagResourceOutput, error)
	ListTagsOfResource(ctx context.Context, in *dynamodb.ListTagsOfResourceInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ListTagsOfResourceOutput, error)
	ListTables(ctx context.Context, in *dynamodb.ListTablesInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ListTablesOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	// The item requests of state.Views: a replay records in the version it
	// fills which version was current before it (state.Views.SetHandover).
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

var _ TableAdmin = (*dynamodb.Client)(nil)

var versionSuffix = regexp.MustCompile(`^(.*)-v([0-9]+)$`)

// NextVersion is the name of the version after table: <base>-v2 for a
// table without a version suffix, <base>-v(n+1) for <base>-vn.
func NextVersion(table string) string {
	if m := versionSuffix.FindStringSubmatch(table); m != nil {
		n, err := strconv.Atoi(m[2])
		if err == nil {
			return m[1] + "-v" + strconv.Itoa(n+1)
		}
	}
	return table + "-v2"
}

// VersionPlan is the table a new version is created as.
type VersionPlan struct {
	From, Name string
	Input      *dynamodb.CreateTableInput
	// TTLAttribute is the time-to-live attribute to enable ("" if none).
	TTLAttribute string
	// PointInTimeRecovery is enabled on the copy when the table has it.
	PointInTimeRecovery bool
	// FromProvisioned: the table is provisioned and the copy on demand.
	FromProvisioned bool
}

// PlanVersion reads table's definition and returns the creation of a copy
// named name: key schema, attribute definitions, billing on demand (a
// provisioned table's too: a rebuild writes in a burst its capacity would
// throttle, and the auto scaling the stack gives its own views table,
// tributary:viewsWriteCapacity, is Application Auto Scaling's, not the
// table's to copy), global and local secondary indexes, stream
// specification, table class, deletion protection, TTL and point-in-time
// recovery. Items, tags, backups and alarms are not copied.
func PlanVersion(ctx context.Context, db TableAdmin, table, name string) (*VersionPlan, error) {
	t, err := describeTable(ctx, db, table)
	if err != nil {
		return nil, err
	}
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		KeySchema:            t.KeySchema,
		AttributeDefinitions: t.AttributeDefinitions,
		BillingMode:          types.BillingModePayPerRequest,
		StreamSpecification:  t.StreamSpecification,
	}
	fromProvisioned := (t.BillingModeSummary != nil && t.BillingModeSummary.BillingMode == types.BillingModeProvisioned) ||
		(t.BillingModeSummary == nil && t.ProvisionedThroughput != nil && aws.ToInt64(t.ProvisionedThroughput.ReadCapacityUnits) > 0)
	if t.TableClassSummary != nil && t.TableClassSummary.TableClass != "" {
		in.TableClass = t.TableClassSummary.TableClass
	}
	if t.DeletionProtectionEnabled != nil {
		in.DeletionProtectionEnabled = t.DeletionProtectionEnabled
	}
	for _, g := range t.GlobalSecondaryIndexes {
		gi := types.GlobalSecondaryIndex{IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, gi)
	}
	for _, l := range t.LocalSecondaryIndexes {
		in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, types.LocalSecondaryIndex{IndexName: l.IndexName, KeySchema: l.KeySchema, Projection: l.Projection})
	}
	if in.StreamSpecification != nil && !aws.ToBool(in.StreamSpecification.StreamEnabled) {
		in.StreamSpecification = nil
	}
	plan := &VersionPlan{From: table, Name: name, Input: in, FromProvisioned: fromProvisioned}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return nil, fmt.Errorf("describing time to live of %s: %w", table, err)
	}
	if s := ttl.TimeToLiveDescription; s != nil && (s.TimeToLiveStatus == types.TimeToLiveStatusEnabled || s.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		plan.TTLAttribute = aws.ToString(s.AttributeName)
	}
	cb, err := db.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(table)})
	if err != nil {
		return nil, fmt.Errorf("describing point-in-time recovery of %s: %w", table, err)
	}
	if d := cb.ContinuousBackupsDescription; d != nil && d.PointInTimeRecoveryDescription != nil &&
		d.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus == types.PointInTimeRecoveryStatusEnabled {
		plan.PointInTimeRecovery = true
	}
	return plan, nil
}

// Describe says in one line per setting what the plan creates.
func (p *VersionPlan) Describe() []string {
	in := p.Input
	keys := ""
	for _, k := range in.KeySchema {
		keys += fmt.Sprintf(" %s(%s)", aws.ToString(k.AttributeName), k.KeyType)
	}
	lines := []string{fmt.Sprintf("create table %s as a copy of %s: keys%s, billing %s", p.Name, p.From, keys, in.BillingMode)}
	if p.FromProvisioned {
		lines = append(lines, fmt.Sprintf("  (%s is provisioned: the copy is on demand, for the rebuild's burst of writes; after a swap, provision it again if wanted: its auto scaling stays with %s)", p.From, p.From))
	}
	for _, g := range in.GlobalSecondaryIndexes {
		lines = append(lines, fmt.Sprintf("  global index %s (%s)", aws.ToString(g.IndexName), g.Projection.ProjectionType))
	}
	for _, l := range in.LocalSecondaryIndexes {
		lines = append(lines, fmt.Sprintf("  local index %s", aws.ToString(l.IndexName)))
	}
	if s := in.StreamSpecification; s != nil {
		lines = append(lines, fmt.Sprintf("  stream %s", s.StreamViewType))
	}
	if p.TTLAttribute != "" {
		lines = append(lines, fmt.Sprintf("  time to live on %s", p.TTLAttribute))
	}
	if p.PointInTimeRecovery {
		lines = append(lines, "  point-in-time recovery")
	}
	if len(in.Tags) > 0 {
		var tags []string
		for _, t := range in.Tags {
			tags = append(tags, aws.ToString(t.Key)+"="+aws.ToString(t.Value))
		}
		lines = append(lines, "  tags "+strings.Join(tags, " "))
	}
	return lines
}

// Create creates the table, waits until it is ACTIVE and enables its TTL.
func (p *VersionPlan) Create(ctx context.Context, db TableAdmin) error {
	if _, err := db.CreateTable(ctx, p.Input); err != nil {
		return fmt.Errorf("creating views table %s: %w", p.Name, err)
	}
	for {
		d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(p.Name)})
		if err != nil {
			return fmt.Errorf("waiting for views table %s: %w", p.Name, err)
		}
		if d.Table.TableStatus == types.TableStatusActive {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for views table %s: %w", p.Name, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	if p.TTLAttribute != "" {
		if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(p.Name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(p.TTLAttribute), Enabled: aws.Bool(true)}}); err != nil {
			return fmt.Errorf("enabling time to live on %s of views table %s: %w", p.TTLAttribute, p.Name, err)
		}
	}
	if p.PointInTimeRecovery {
		if _, err := db.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{TableName: aws.String(p.Name),
			PointInTimeRecoverySpecification: &types.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(true)}}); err != nil {
			return fmt.Errorf("enabling point-in-time recovery of views table %s: %w", p.Name, err)
		}
	}
	return nil
}
