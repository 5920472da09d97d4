package cdc_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/cdc"
)

// TestEnvOptions: an ENTITY_KEY_ATTRIBUTE edited in the console that no
// table key can be named (a space after it, blank, too long) stops the cold
// start naming the variable, instead of every change of the table being set
// aside at run time for a key the items never have.
func TestEnvOptions(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     map[string]string
		wantKey string // the attribute the handler reads the key from
		wantErr string // "" : accepted
	}{
		{name: "unset", env: nil, wantKey: cdc.DefaultEntityKeyAttribute},
		{name: "empty", env: map[string]string{"ENTITY_KEY_ATTRIBUTE": ""}, wantKey: cdc.DefaultEntityKeyAttribute},
		{name: "set", env: map[string]string{"ENTITY_KEY_ATTRIBUTE": "accountId"}, wantKey: "accountId"},
		{name: "blank", env: map[string]string{"ENTITY_KEY_ATTRIBUTE": "  "}, wantErr: `environment variable ENTITY_KEY_ATTRIBUTE: "  " is not a DynamoDB key attribute name`},
		{name: "trailing space", env: map[string]string{"ENTITY_KEY_ATTRIBUTE": "userId "}, wantErr: `environment variable ENTITY_KEY_ATTRIBUTE: "userId " is not`},
		{name: "newline", env: map[string]string{"ENTITY_KEY_ATTRIBUTE": "userId\n"}, wantErr: "ENTITY_KEY_ATTRIBUTE"},
		{name: "not UTF-8", env: map[string]string{"ENTITY_KEY_ATTRIBUTE": "user\xffId"}, wantErr: "ENTITY_KEY_ATTRIBUTE"},
		{name: "too long", env: map[string]string{"ENTITY_KEY_ATTRIBUTE": strings.Repeat("k", 256)}, wantErr: "ENTITY_KEY_ATTRIBUTE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts, err := cdc.EnvOptions(func(k string) string { return c.env[k] })
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			h := cdc.New(nil, "events", opts...)
			rec := events.DynamoDBEventRecord{EventID: "e1", EventName: "INSERT", EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/x",
				Change: events.DynamoDBStreamRecord{SequenceNumber: "100", StreamViewType: "NEW_AND_OLD_IMAGES",
					ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Unix(1_700_000_000, 0)},
					Keys:                        map[string]events.DynamoDBAttributeValue{c.wantKey: events.NewStringAttribute("u1")},
					NewImage:                    map[string]events.DynamoDBAttributeValue{c.wantKey: events.NewStringAttribute("u1"), cdc.VersionAttribute: events.NewNumberAttribute("1")}}}
			env, err := h.Envelope(&rec)
			if err != nil || env.Key != "u1" {
				t.Fatalf("a change keyed by %s: %v, %v; want key u1", c.wantKey, env, err)
			}
		})
	}
}
