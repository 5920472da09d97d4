package aggregate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// A pipeline keeps its claims by key unless it says dedupeLedger "range":
// the items one commit of 40 keys' claims leaves in the views table say
// which, and so does the pipeline's layout marker.
func TestThePipelinesLedgerIsByRangeWhenItSaysSo(t *testing.T) {
	for _, tt := range []struct {
		name, extra string
		byRange     bool
	}{
		{"default", ``, false},
		{"by key", `,"dedupeLedger":"key"`, false},
		{"by range", `,"dedupeLedger":"range"`, true},
		{"by range, a day's horizon", `,"dedupeLedger":"range","dedupeHorizon":"24h"`, true},
		{"by key, batches side by side", `,"parallelizationFactor":2`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := pipeline.Parse([]byte(`{"name":"lr","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
			  "aggregates":["count","sum"]` + tt.extra + `}`))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			table := fmt.Sprintf("ledgerranges-%d", tableSeq.Add(1))
			if err := state.CreateTable(ctx, db, table); err != nil {
				t.Fatal(err)
			}
			l := aggregate.NewLedger(db, table, cfg)
			arrival := uint32(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC).Unix())
			var cands []dedupe.Candidate
			for k := range 40 {
				key := fmt.Sprintf("user-%d", k)
				cands = append(cands, dedupe.Candidate{Key: key, Entry: dedupe.Entry{
					ID: dedupe.IdentityOf(key, "e1"), Claim: dedupe.ClaimOf("shardId-000000000000", fmt.Sprint(k+1)), Arrival: arrival,
				}})
			}
			s := l.Begin("", nil)
			if err := s.Judge(ctx, cands); err != nil {
				t.Fatal(err)
			}
			if failed := s.Commit(ctx, 4); len(failed) > 0 {
				t.Fatal(failed[0])
			}
			out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
			if err != nil {
				t.Fatal(err)
			}
			ranges, keys, layout := 0, 0, ""
			for _, item := range out.Items {
				pk := item["pk"].(*types.AttributeValueMemberS).Value
				switch {
				case pk == "dedupe#~layout#lr":
					layout = item["layout"].(*types.AttributeValueMemberS).Value
				case strings.HasPrefix(pk, "dedupe#~range#lr#"):
					ranges++
				case strings.HasPrefix(pk, "dedupe#lr#"):
					keys++
				}
			}
			// The layout marker names the layout, so that a change of it
			// either way is known to every ledger (dedupe.WithLayoutMarker).
			if want := map[bool]string{true: "range", false: "key"}[tt.byRange]; layout != want {
				t.Errorf("the layout marker says %q, want %q", layout, want)
			}
			if tt.byRange && (keys != 0 || ranges == 0 || ranges > 2*dedupe.Ranges) {
				t.Errorf("%d range items and %d key items, want only range items, at most a head and a segment for each of %d ranges", ranges, keys, dedupe.Ranges)
			}
			if !tt.byRange && (ranges != 0 || keys < 40) {
				t.Errorf("%d range items and %d key items, want a head for each of the 40 keys and no range", ranges, keys)
			}
		})
	}
}
