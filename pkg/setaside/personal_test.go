package setaside_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/setaside"
)

// TestSetAsideKeepsNoPersonalData: a DynamoDB stream record set aside
// keeps no "personal" attribute in either image — its copy would outlive
// the erasure of the item it came from by the quarantine's 14 days — but
// keeps the keys that find the item, and its reason says what was removed.
// The record handed over is not changed (the caller may still publish it).
func TestSetAsideKeepsNoPersonalData(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:dynamodb:us-east-1:123456789012:table/events/stream/2026-11-29T00:00:00.000"
	personal := events.NewStringAttribute(`{"name":"Grace Hopper","email":"grace@example.com"}`)
	image := func(withPersonal bool) map[string]events.DynamoDBAttributeValue {
		img := map[string]events.DynamoDBAttributeValue{"aggregateId": events.NewStringAttribute("show-1"),
			"version": events.NewNumberAttribute("2"), "subject": events.NewStringAttribute("cust-5")}
		if withPersonal {
			img["personal"] = personal
		}
		return img
	}
	tests := []struct {
		name     string
		event    string
		old, new map[string]events.DynamoDBAttributeValue
		removed  []string
	}{
		{"an INSERT", "INSERT", nil, image(true), []string{"dynamodb.NewImage.personal"}},
		{"a MODIFY that kept it", "MODIFY", image(true), image(true), []string{"dynamodb.OldImage.personal", "dynamodb.NewImage.personal"}},
		{"an erasure's MODIFY", "MODIFY", image(true), image(false), []string{"dynamodb.OldImage.personal"}},
		{"a REMOVE", "REMOVE", image(true), nil, []string{"dynamodb.OldImage.personal"}},
		{"a record without personal data", "INSERT", nil, image(false), nil},
	}
	tbl := table(t)
	sink := setaside.New(db, tbl, setaside.WithClock(func() time.Time { return now }))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := events.DynamoDBEventRecord{EventID: "e" + tt.event, EventName: tt.event, EventSourceArn: arn,
				Change: events.DynamoDBStreamRecord{SequenceNumber: strings.Repeat("1", 20) + string(rune('0'+i)), StreamViewType: "NEW_AND_OLD_IMAGES",
					Keys:     map[string]events.DynamoDBAttributeValue{"aggregateId": events.NewStringAttribute("show-1"), "version": events.NewNumberAttribute("2")},
					OldImage: tt.old, NewImage: tt.new}}
			r := setaside.FromDynamoDB(&rec)
			r.Field, r.Kind, r.Reason = "eventName", setaside.KindInvalid, "events are immutable"
			for _, s := range []string{"Grace Hopper", "grace@example.com"} {
				if bytes.Contains(r.Data, []byte(s)) {
					t.Errorf("the record set aside holds %q: %s", s, r.Data)
				}
			}
			var back events.DynamoDBEventRecord
			if err := json.Unmarshal(r.Data, &back); err != nil || back.Change.Keys["aggregateId"].String() != "show-1" || back.Change.Keys["version"].Number() != "2" {
				t.Errorf("the record set aside lost the keys that find its item: %s (%v)", r.Data, err)
			}
			if img := tt.new; img != nil && back.Change.NewImage["subject"].String() != "cust-5" {
				t.Errorf("the new image lost its other attributes: %s", r.Data)
			}
			if _, ok := (rec.Change.OldImage)["personal"]; tt.old != nil && !ok {
				t.Errorf("the caller's record was changed")
			}
			if err := sink.SetAside(context.Background(), []setaside.Record{r}); err != nil {
				t.Fatal(err)
			}
			it, err := setaside.Load(context.Background(), db, tbl, arn, rec.Change.SequenceNumber)
			if err != nil || it == nil {
				t.Fatalf("Load: %+v %v", it, err)
			}
			if !slices.Equal(it.Redacted, tt.removed) || !slices.Equal(r.Redacted, tt.removed) {
				t.Errorf("redacted: record %v, item %v; want %v", r.Redacted, it.Redacted, tt.removed)
			}
			if len(tt.removed) == 0 {
				if it.Reason != "events are immutable" {
					t.Errorf("reason %q, want it as given", it.Reason)
				}
				return
			}
			if !strings.HasPrefix(it.Reason, "events are immutable") || !strings.Contains(it.Reason, "Personal data removed from this copy ("+strings.Join(tt.removed, ", ")+")") {
				t.Errorf("reason %q: want it to say %v was removed", it.Reason, tt.removed)
			}
		})
	}
}
