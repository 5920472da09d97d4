package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/enrich"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Enrichment is the deployed stream–table join: the profiles table cdc
// captures, and enrich's join table and output stream, as the functions'
// environments and mappings in the template name them.
type Enrichment struct {
	Profiles, JoinTable, Enriched string
	db                            *dynamodb.Client
	kin                           *kinesis.Client
	join                          *enrich.Handler
}

// FindEnrichment reads the enrich function's environment and the table the
// cdc function's mapping reads from the deployment.
func (s *Stack) FindEnrichment() (*Enrichment, error) {
	specs, err := s.deployment.Functions()
	if err != nil {
		return nil, err
	}
	maps, err := s.deployment.Mappings()
	if err != nil {
		return nil, err
	}
	e := &Enrichment{db: dynamodb.NewFromConfig(s.cfg), kin: kinesis.NewFromConfig(s.cfg)}
	for _, f := range specs {
		switch f.Binary {
		case "enrich":
			e.JoinTable, e.Enriched = f.Env["JOIN_TABLE_NAME"], f.Env["ENRICHED_STREAM_NAME"]
		case "cdc":
			for _, m := range maps {
				if m.FunctionLogicalID == f.LogicalID {
					e.Profiles = tableOfStreamARN(m.SourceARN)
				}
			}
		}
	}
	if e.Profiles == "" || e.JoinTable == "" || e.Enriched == "" {
		return nil, fmt.Errorf("the template lacks the cdc function's table or enrich's JOIN_TABLE_NAME / ENRICHED_STREAM_NAME")
	}
	e.join = enrich.New(e.db, e.kin, e.JoinTable, e.Enriched)
	return e, nil
}

// tableOfStreamARN is the table name in a DynamoDB stream ARN
// (arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>).
func tableOfStreamARN(arn string) string {
	_, rest, ok := strings.Cut(arn, ":table/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

// Demo writes a profile (version 1), sends activity for its key through
// ingest, changes the profile (version 2, a conditional write on version 1),
// sends more activity, and prints the enriched records: the activity sent
// before the change carries version 1 and the activity after it version 2,
// because the change's changelog record sits between them on the key's shard.
func (e *Enrichment) Demo(ctx context.Context, ingestURL string, out io.Writer) error {
	const key = "user-ada"
	now := time.Now().UTC()
	activity := func(from int) []stream.Envelope {
		var evs []stream.Envelope
		for i := from; i < from+2; i++ {
			evs = append(evs, stream.Envelope{ID: fmt.Sprintf("purchase-%d", i), Type: "purchase", Key: key,
				OccurredAt: now, SentAt: now, Data: json.RawMessage(fmt.Sprintf(`{"amount":%d}`, 10*i))})
		}
		return evs
	}
	steps := []struct {
		say     string
		plan    string
		version int
	}{{"a profile for user-ada: plan free, version 1", "free", 1}, {"user-ada upgrades: plan pro, version 2 (conditional on version 1)", "pro", 2}}
	want := map[string]string{}
	for i, s := range steps {
		fmt.Fprintf(out, "    %s\n", s.say)
		if err := e.putProfile(ctx, key, s.plan, s.version); err != nil {
			return err
		}
		if err := e.waitVersion(ctx, key, s.version); err != nil {
			return err
		}
		evs := activity(2 * i)
		fmt.Fprintf(out, "    2 purchases by user-ada through ingest\n")
		if _, err := Send(ctx, ingestURL, evs, len(evs), io.Discard); err != nil {
			return err
		}
		for _, ev := range evs {
			want[ev.ID] = fmt.Sprint(s.version)
		}
	}
	got, err := e.waitEnriched(ctx, want)
	if err != nil {
		return err
	}
	for _, id := range sortedKeys(want) {
		fmt.Fprintf(out, "      enriched %s: %s\n", id, got[id])
	}
	return nil
}

// putProfile writes the profile at version, conditional on the previous
// version (the writer's side of cdc's versioning).
func (e *Enrichment) putProfile(ctx context.Context, key, plan string, version int) error {
	cond := "attribute_not_exists(userId)"
	vals := map[string]types.AttributeValue{}
	if version > 1 {
		cond = "version = :prev"
		vals[":prev"] = &types.AttributeValueMemberN{Value: fmt.Sprint(version - 1)}
	}
	in := &dynamodb.PutItemInput{TableName: &e.Profiles, ConditionExpression: aws.String(cond), Item: map[string]types.AttributeValue{
		"userId":  &types.AttributeValueMemberS{Value: key},
		"name":    &types.AttributeValueMemberS{Value: "Ada"},
		"plan":    &types.AttributeValueMemberS{Value: plan},
		"version": &types.AttributeValueMemberN{Value: fmt.Sprint(version)},
	}}
	if len(vals) > 0 {
		in.ExpressionAttributeValues = vals
	}
	if _, err := e.db.PutItem(ctx, in); err != nil {
		return fmt.Errorf("writing profile %s version %d to %s: %w", key, version, e.Profiles, err)
	}
	return nil
}

// waitVersion waits until enrich has applied the key's changelog record of
// version: from then on, activity for the key is behind it on the shard.
func (e *Enrichment) waitVersion(ctx context.Context, key string, version int) error {
	for {
		p, err := e.join.Lookup(ctx, key)
		if err != nil {
			return fmt.Errorf("reading %s from join table %s: %w", key, e.JoinTable, err)
		}
		if p.Version == fmt.Sprint(version) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("profile %s version %d never reached enrich's join table %s (it has %q): %w", key, version, e.JoinTable, p.Version, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitEnriched reads the enriched stream until every event id of want has
// an enriched record, and returns for each the profile it carries; it fails
// if one carries another version than want's.
func (e *Enrichment) waitEnriched(ctx context.Context, want map[string]string) (map[string]string, error) {
	shards, err := e.kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: &e.Enriched})
	if err != nil {
		return nil, fmt.Errorf("listing the shards of %s: %w", e.Enriched, err)
	}
	var iters []*string
	for _, sh := range shards.Shards {
		it, err := e.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: &e.Enriched, ShardId: sh.ShardId,
			ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", e.Enriched, err)
		}
		iters = append(iters, it.ShardIterator)
	}
	got := map[string]string{}
	for len(got) < len(want) {
		for i, it := range iters {
			if it == nil {
				continue
			}
			page, err := e.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it})
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", e.Enriched, err)
			}
			iters[i] = page.NextShardIterator
			for _, r := range page.Records {
				var env struct {
					ID   string      `json:"id"`
					Data enrich.Data `json:"data"`
				}
				if err := json.Unmarshal(r.Data, &env); err != nil {
					return nil, fmt.Errorf("enriched record %s is not JSON: %w", aws.ToString(r.SequenceNumber), err)
				}
				v, ok := want[env.ID]
				if !ok {
					continue
				}
				if env.Data.ProfileVersion == nil || env.Data.ProfileVersion.String() != v {
					return nil, fmt.Errorf("enriched %s carries profile version %v, want %s", env.ID, env.Data.ProfileVersion, v)
				}
				got[env.ID] = fmt.Sprintf("profile version %s %s", v, env.Data.Profile)
			}
		}
		if len(got) < len(want) {
			select {
			case <-ctx.Done():
				return got, fmt.Errorf("%d of %d enriched records on %s: %w", len(got), len(want), e.Enriched, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return got, nil
}
