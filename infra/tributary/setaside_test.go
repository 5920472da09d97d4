package tributary

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"
)

// testQuarantine is a table with the quarantine's keys, for the tests of
// constructs whose functions set records aside.
func testQuarantine(stack awscdk.Stack) awsdynamodb.Table {
	return awsdynamodb.NewTable(stack, jsii.String("Quarantine"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("source"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String("sequenceNumber"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
	})
}

// quarantineGrants is what grants allows on the quarantine table, sorted.
func quarantineGrants(grants map[string]bool, quarantineID string) []string {
	var out []string
	for g := range grants {
		if action, resource, _ := strings.Cut(g, " "); strings.HasPrefix(resource, quarantineID+".") || resource == quarantineID {
			out = append(out, action+" "+resource)
		}
	}
	sort.Strings(out)
	return out
}

// assertSetAsideGrant checks that a role may call on the quarantine table
// exactly what setting a record aside calls (plus extra), on the table
// itself, and nothing else there.
func assertSetAsideGrant(t *testing.T, grants map[string]bool, quarantineID string, extra ...string) {
	t.Helper()
	var want []string
	for _, a := range append(append([]string(nil), setAsideActions...), extra...) {
		want = append(want, a+" "+quarantineID+".Arn")
	}
	sort.Strings(want)
	if got := quarantineGrants(grants, quarantineID); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("grants on the quarantine table %v, want exactly %v", got, want)
	}
}

// TestQuarantineWriters: in the stack, every stream consumer that sets
// records aside (aggregate, cdc, timeline, enrich) has the quarantine
// table's name in QUARANTINE_TABLE_NAME and may call BatchWriteItem and
// UpdateItem on it and nothing else; quarantine may also PutItem (its
// records of failed ranges) and nothing else; no other function may touch the table. The
// quarantine table and the failures queue and its DLQ survive cdk destroy.
func TestQuarantineWriters(t *testing.T) {
	s := fx.stack
	qID := logicalID(s.Stack, s.Quarantine.Table)
	writers := map[string]struct {
		fn    *GoFunction
		extra []string
	}{
		FunctionAggregate:  {pageviews(s).Aggregate.GoFunction, nil},
		FunctionCDC:        {s.Profiles.Function.GoFunction, nil},
		FunctionTimeline:   {s.Timelines.Function.GoFunction, nil},
		FunctionEnrich:     {s.Enrichment.Function.GoFunction, nil},
		FunctionQuarantine: {s.Quarantine.Function.GoFunction, []string{"dynamodb:PutItem"}},
	}
	for name, w := range writers {
		t.Run(name, func(t *testing.T) {
			_, fn := fx.tmpl.function(t, name)
			vars, _ := fn.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
			if got := vars[EnvQuarantineTableName]; !jsonEqual(got, ref(qID)) {
				t.Errorf("%s = %v, want the quarantine table's name", EnvQuarantineTableName, got)
			}
			assertSetAsideGrant(t, fx.tmpl.grants(logicalID(s.Stack, w.fn.Role)), qID, w.extra...)
		})
	}
	for _, other := range []struct {
		name string
		fn   *GoFunction
	}{{FunctionIngest, s.Ingest.Function}, {FunctionTicker, pageviews(s).Ticker}, {FunctionWorker, s.Work.Worker.GoFunction}, {FunctionSnapshot, s.Snapshot.Function}} {
		if got := quarantineGrants(fx.tmpl.grants(logicalID(s.Stack, other.fn.Role)), qID); len(got) > 0 {
			t.Errorf("%s may %v on the quarantine table", other.name, got)
		}
	}

	t.Run("retained on destroy", func(t *testing.T) {
		raw, err := json.Marshal(assertions.Template_FromStack(s.Stack, nil).ToJSON())
		if err != nil {
			t.Fatal(err)
		}
		var tmpl struct {
			Resources map[string]struct {
				Type                string `json:"Type"`
				DeletionPolicy      string `json:"DeletionPolicy"`
				UpdateReplacePolicy string `json:"UpdateReplacePolicy"`
			} `json:"Resources"`
		}
		if err := json.Unmarshal(raw, &tmpl); err != nil {
			t.Fatal(err)
		}
		for what, id := range map[string]string{
			"quarantine table": qID,
			"failures queue":   logicalID(s.Stack, s.Quarantine.Failures),
			"failures DLQ":     logicalID(s.Stack, s.Quarantine.FailuresDLQ),
		} {
			r, ok := tmpl.Resources[id]
			if !ok {
				t.Errorf("%s %s is not in the template", what, id)
				continue
			}
			if r.DeletionPolicy != "Retain" || r.UpdateReplacePolicy != "Retain" {
				t.Errorf("%s %s: DeletionPolicy %q, UpdateReplacePolicy %q; want both Retain", what, id, r.DeletionPolicy, r.UpdateReplacePolicy)
			}
		}
	})
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
