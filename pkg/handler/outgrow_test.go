package handler_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// bulkBytes is what one record adds to a Bulk's encoding: a pane of one
// record is within DefaultLimits' 16 KB, a window merging eight is not.
const bulkBytes = 15_000

// Bulk is an aggregate whose encoding grows with what it merges (as a
// list of values does, not a sum): a hopping window's result merges its
// panes, so it is several times a pane.
type Bulk struct{ N int64 }

func (b *Bulk) Add(int64)     { b.N++ }
func (b *Bulk) Merge(o *Bulk) { b.N += o.N }

func (b *Bulk) MarshalBinary() ([]byte, error) {
	return append(binary.AppendVarint(nil, b.N), make([]byte, b.N*bulkBytes)...), nil
}

func (b *Bulk) UnmarshalBinary(p []byte) error {
	v, n := binary.Varint(p)
	if n <= 0 || int64(len(p)-n) != v*bulkBytes {
		return errors.New("bulk: bad encoding")
	}
	b.N = v
	return nil
}

func (b *Bulk) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf(`{"N":%d}`, b.N)), nil }

// asideOfTable reads the quarantine table's set-aside records (not their
// chunks).
func asideOfTable(t *testing.T, table string) []setaside.Item {
	t.Helper()
	scan, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	var out []setaside.Item
	for _, it := range scan.Items {
		var rec setaside.Item
		if err := attributevalue.UnmarshalMap(it, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Kind != setaside.ItemChunk {
			out = append(out, rec)
		}
	}
	return out
}

// TestResultsThatOutgrowTheItemAreSetAside: a key of hopping windows (8
// minutes, advancing by 1) holds 8 panes of 15 KB, within its limits; when
// the watermark jumps past them, its 15 windows close at once, and their
// results (each merging up to 8 panes) are about 960 KB, which its state
// item holds until they are on the stream: no retry can write it. The
// jump came in a batch holding another /big record (the fold), or only
// other keys' records (the close): before, the first failed its batch on
// every retry until Lambda gave up on it, the second failed every batch of
// the shard and every tick. Now the batch's /big record is set aside
// (state-budget, naming the key) and, when a close meets the state (the
// batch's end, here), a copy of it is set aside once and the key unlisted; batches and ticks succeed
// and /small's results come out.
func TestResultsThatOutgrowTheItemAreSetAside(t *testing.T) {
	for _, c := range []struct {
		name      string
		jump      []rec // the batch whose watermark passes /big's windows
		wantField []string
	}{
		{name: "fold", jump: []rec{{seq: 200, env: request("j0", "/big", 3600, `{"ms":1}`)}, {seq: 201, env: request("j1", "/small", 3601, `{"ms":1}`)}},
			wantField: []string{"key 200", "state"}},
		{name: "close", jump: []rec{{seq: 200, env: request("j0", "/small", 3600, `{"ms":1}`)}},
			wantField: []string{"state"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := setup(t)
			h, err := handler.NewWindowed[Bulk](cfg, selectLatency, handler.WithHopping(8*time.Minute, time.Minute),
				handler.WithOutOfOrderness(10*time.Minute), handler.WithLogger(quiet), handler.WithMetrics(nil))
			if err != nil {
				t.Fatal(err)
			}
			var recs []rec
			for i := range 8 {
				recs = append(recs, rec{seq: 100 + i, env: request(fmt.Sprint("e", i), "/big", float64(60*i+1), `{"ms":1}`)})
			}
			mustBatch(t, h, kinesisRecords(recs))
			resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: kinesisRecords(c.jump)})
			if err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("the batch that closes /big's windows: %+v %v; want no failure: no retry can write them", resp, err)
			}
			for _, at := range []time.Time{base.Add(3 * time.Hour), base.Add(4 * time.Hour)} {
				if _, err := h.Tick(ctx, at); err != nil {
					t.Fatalf("tick at %s: %v; want /big set aside, not a failure", at.Format("15:04"), err)
				}
			}
			var got []string
			for _, a := range asideOfTable(t, cfg.QuarantineTable) {
				if a.Category != setaside.KindStateBudget || !strings.Contains(a.Reason, `key "/big"`) {
					t.Errorf("set aside %s field %q as %s: %s; want %s naming /big", a.SequenceNumber, a.Field, a.Category, a.Reason, setaside.KindStateBudget)
				}
				if a.Field == "key" {
					got = append(got, "key "+a.SequenceNumber)
				} else {
					got = append(got, a.Field)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, c.wantField) {
				t.Errorf("set aside %v; want %v", got, c.wantField)
			}
			byID, _ := results(t, cfg.OutputStream)
			if d := strings.Join(describe(byID), "\n"); !strings.Contains(d, "/small") {
				t.Errorf("results\n%s\nwant /small's", d)
			}
		})
	}
}
