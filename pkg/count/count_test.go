package count

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/standin/standintest"
)

var now = time.Date(2026, 11, 29, 10, 45, 0, 0, time.UTC)

// record builds a Kinesis record as Lambda delivers it. occurred and sent are
// read from a device clock three hours behind; received is the server's.
func record(seq int, id, key, occurred, sent, received string) events.KinesisEventRecord {
	data := fmt.Sprintf(`{"id":%q,"type":"page_view","key":%q,"occurredAt":%q,"sentAt":%q,"receivedAt":%q}`, id, key, occurred, sent, received)
	s := "4960118965842235937883629852182763847532018901230970" + strconv.Itoa(4700+seq)
	return events.KinesisEventRecord{
		EventID: "shardId-000000000000:" + s,
		Kinesis: events.KinesisRecord{SequenceNumber: s, PartitionKey: key, Data: []byte(data)},
	}
}

func createTable(t *testing.T, db *dynamodb.Client, name string) {
	t.Helper()
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("key"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("window"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("key"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("window"), KeyType: types.KeyTypeRange},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// counts reads the whole table as "key window" -> count.
func counts(t *testing.T, db *dynamodb.Client, table string) map[string]int {
	t.Helper()
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, it := range out.Items {
		n, _ := strconv.Atoi(it["count"].(*types.AttributeValueMemberN).Value)
		k := it["key"].(*types.AttributeValueMemberS).Value + " " + it["window"].(*types.AttributeValueMemberS).Value
		m[k] = n
		end := it["windowEnd"].(*types.AttributeValueMemberS).Value
		if start, _ := time.Parse(time.RFC3339, it["window"].(*types.AttributeValueMemberS).Value); start.Add(time.Minute).Format(WindowLayout) != end {
			t.Errorf("%s: windowEnd %s", k, end)
		}
		if u := it["updatedAt"].(*types.AttributeValueMemberS).Value; u != now.Format(time.RFC3339Nano) {
			t.Errorf("%s: updatedAt %s", k, u)
		}
	}
	return m
}

func failureIDs(r events.KinesisEventResponse) []string {
	var out []string
	for _, f := range r.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

// TestAgainstStandIn runs the tests that need DynamoDB on one stand-in
// (starting moto costs a second or two on a busy machine).
func TestAgainstStandIn(t *testing.T) {
	srv := standintest.Start(t)
	db := dynamodb.NewFromConfig(standintest.Config(t, srv))
	t.Run("CountsPerKeyPerEventTimeMinute", func(t *testing.T) { testCountsPerKeyPerEventTimeMinute(t, db) })
	t.Run("ReportsUnwrittenWindows", func(t *testing.T) { testReportsUnwrittenWindows(t, db) })
}

func testCountsPerKeyPerEventTimeMinute(t *testing.T, db *dynamodb.Client) {
	ctx := context.Background()

	tests := []struct {
		name       string
		records    []events.KinesisEventRecord
		wantFailed []string
		want       map[string]int // table contents after this batch
		wantEMF    []string
	}{
		{
			name: "device clock three hours behind is corrected",
			records: []events.KinesisEventRecord{
				// 07:41:50 on the device, sent 1 s later, received 10:41:51.5 → event time 10:41:50.5
				record(1, "e-1", "user-1", "2026-11-29T07:41:50Z", "2026-11-29T07:41:51Z", "2026-11-29T10:41:51.5Z"),
				// occurred 07:41:59, sent 07:42:01, received 10:42:00.5 → 10:41:58.5: still minute 10:41
				record(2, "e-2", "user-1", "2026-11-29T07:41:59Z", "2026-11-29T07:42:01Z", "2026-11-29T10:42:00.5Z"),
				// 10:42:10 → minute 10:42
				record(3, "e-3", "user-1", "2026-11-29T07:42:10Z", "2026-11-29T07:42:10Z", "2026-11-29T10:42:10Z"),
				record(4, "e-4", "user-2", "2026-11-29T07:41:10Z", "2026-11-29T07:41:10Z", "2026-11-29T10:41:10Z"),
			},
			want: map[string]int{
				"user-1 2026-11-29T10:41:00Z": 2,
				"user-1 2026-11-29T10:42:00Z": 1,
				"user-2 2026-11-29T10:41:00Z": 1,
			},
			wantEMF: []string{`"RecordsIn":4`, `"PoisonRecords":0`, `"WriteRequests":3`},
		},
		{
			name: "poison record stops the batch: nothing at or after it is counted",
			records: []events.KinesisEventRecord{
				record(5, "e-5", "user-2", "2026-11-29T07:41:20Z", "2026-11-29T07:41:20Z", "2026-11-29T10:41:20Z"),
				record(6, "e-6", "user-2", "half past ten", "2026-11-29T07:41:20Z", "2026-11-29T10:41:20Z"),
				record(7, "e-7", "user-2", "2026-11-29T07:41:30Z", "2026-11-29T07:41:30Z", "2026-11-29T10:41:30Z"),
			},
			wantFailed: []string{record(6, "", "", "", "", "").Kinesis.SequenceNumber},
			want: map[string]int{
				"user-1 2026-11-29T10:41:00Z": 2,
				"user-1 2026-11-29T10:42:00Z": 1,
				"user-2 2026-11-29T10:41:00Z": 2, // e-5 only
			},
			wantEMF: []string{`"RecordsIn":3`, `"PoisonRecords":1`, `"WriteRequests":1`},
		},
		{
			name: "poison first record: nothing counted",
			records: []events.KinesisEventRecord{
				{Kinesis: events.KinesisRecord{SequenceNumber: "49601189658422359378836298521827638475320189012309704800", Data: []byte("not json")}},
				record(8, "e-8", "user-2", "2026-11-29T07:41:20Z", "2026-11-29T07:41:20Z", "2026-11-29T10:41:20Z"),
			},
			wantFailed: []string{"49601189658422359378836298521827638475320189012309704800"},
			want: map[string]int{
				"user-1 2026-11-29T10:41:00Z": 2,
				"user-1 2026-11-29T10:42:00Z": 1,
				"user-2 2026-11-29T10:41:00Z": 2,
			},
			wantEMF: []string{`"RecordsIn":2`, `"PoisonRecords":1`, `"WriteRequests":0`},
		},
	}
	createTable(t, db, "counts")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var emf bytes.Buffer
			h := New(db, "counts", WithClock(func() time.Time { return now }), WithMetrics(metrics.New(&emf, "aggregate")))
			resp, err := h.Handle(ctx, events.KinesisEvent{Records: tt.records})
			if err != nil {
				t.Fatal(err)
			}
			if got := failureIDs(resp); fmt.Sprint(got) != fmt.Sprint(tt.wantFailed) {
				t.Errorf("batch item failures %v, want %v", got, tt.wantFailed)
			}
			if got := counts(t, db, "counts"); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("table\n got %v\nwant %v", got, tt.want)
			}
			for _, w := range tt.wantEMF {
				if !strings.Contains(emf.String(), w) {
					t.Errorf("EMF line %q lacks %s", emf.String(), w)
				}
			}
		})
	}
}

// A write the table refuses (here: the table does not exist) fails the batch
// from the first record of the window that was not written.
func testReportsUnwrittenWindows(t *testing.T, db *dynamodb.Client) {
	h := New(db, "no-such-table")
	recs := []events.KinesisEventRecord{
		record(1, "e-1", "user-1", "2026-11-29T07:41:50Z", "2026-11-29T07:41:51Z", "2026-11-29T10:41:51Z"),
		record(2, "e-2", "user-2", "2026-11-29T07:41:50Z", "2026-11-29T07:41:51Z", "2026-11-29T10:41:51Z"),
	}
	resp, err := h.Handle(context.Background(), events.KinesisEvent{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	got := failureIDs(resp)
	if len(got) == 0 || got[0] != recs[0].Kinesis.SequenceNumber {
		t.Errorf("failures %v, want the first record %s first", got, recs[0].Kinesis.SequenceNumber)
	}
}
