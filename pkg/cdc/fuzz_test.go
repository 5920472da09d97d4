package cdc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// FuzzImageJSON feeds DynamoDB stream records (seeded from the samples in
// events/cdc and a few hand-made images) through the image conversion and
// the changelog encoding. Whatever the record, either it becomes a
// changelog record — valid JSON within Kinesis' limit, with no HTML
// escapes, whose image has the same attributes as the stream's NewImage
// and the same strings — or the conversion answers a *ChangeError naming a
// field, which the handler sets aside. It never panics.
func FuzzImageJSON(f *testing.F) {
	files, err := filepath.Glob("../../events/cdc/*.json")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed samples in events/cdc: %v", err)
	}
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		for _, r := range ev.Records {
			b, err := json.Marshal(r)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, img := range []string{
		`{"userId":{"S":"u-1"},"version":{"N":"1e3"},"bio":{"S":"<b>&amp;</b>"},"ctl":{"S":"\u0001\u2028"}}`,
		`{"userId":{"N":"-0.5"},"m":{"M":{"l":{"L":[{"NULL":true},{"BOOL":false},{"B":"aGk="},{"NS":["1","2.50"]}]}}},"bs":{"BS":["aGk="]}}`,
		`{"userId":{"S":""},"version":{"S":"two"}}`,
		`{"version":{"N":"18446744073709551616"}}`,
	} {
		f.Add([]byte(`{"eventID":"e","eventName":"MODIFY","eventSourceARN":"arn:aws:dynamodb:us-east-1:1:table/profiles/stream/x",` +
			`"dynamodb":{"ApproximateCreationDateTime":1795949100,"SequenceNumber":"111","Keys":{"userId":{"S":"u-1"}},"NewImage":` + img + `}}`))
	}
	h := cdc.New(nil, "events")
	f.Fuzz(func(t *testing.T, raw []byte) {
		var rec events.DynamoDBEventRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return // Lambda hands the function only records it decoded
		}
		img, imgErr := cdc.ImageJSON(rec.Change.NewImage)
		entry, _, err := h.Record(&rec)
		if err != nil {
			var ce *cdc.ChangeError
			if !errors.As(err, &ce) || ce.Field == "" || ce.Reason == "" || ce.Kind == "" {
				t.Fatalf("Record: %v: want a *ChangeError naming the field", err)
			}
			return
		}
		if imgErr != nil {
			t.Fatalf("Record succeeded but ImageJSON failed: %v", imgErr)
		}
		if n := limits.KinesisRecordSize(entry.Data, *entry.PartitionKey); n > limits.KinesisRecordBytes {
			t.Fatalf("changelog record of %d bytes passed the size check", n)
		}
		if bytes.Contains(entry.Data, []byte(`\u003c`)) || bytes.Contains(entry.Data, []byte(`\u0026`)) {
			t.Fatalf("HTML escapes in %s", entry.Data)
		}
		var env stream.Envelope
		if err := json.Unmarshal(entry.Data, &env); err != nil {
			t.Fatalf("changelog record is not an envelope: %v", err)
		}
		if env.Key != *entry.PartitionKey || env.Validate() != nil {
			t.Fatalf("envelope key %q, partition key %q: %v", env.Key, *entry.PartitionKey, env.Validate())
		}
		dec := json.NewDecoder(bytes.NewReader(env.Data))
		dec.UseNumber()
		var d cdc.Data
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("data: %v", err)
		}
		if rec.EventName == "REMOVE" {
			if d.Image != nil {
				t.Fatalf("a tombstone carries image %v", d.Image)
			}
			return
		}
		if len(d.Image) != len(img) || len(d.Image) != len(rec.Change.NewImage) {
			t.Fatalf("image has %d attributes, the stream's NewImage %d", len(d.Image), len(rec.Change.NewImage))
		}
		for name, av := range rec.Change.NewImage {
			got, ok := d.Image[name]
			if !ok {
				t.Fatalf("attribute %q lost", name)
			}
			if av.DataType() == events.DataTypeString && utf8.ValidString(av.String()) && got != av.String() {
				t.Fatalf("attribute %q: %q became %q", name, av.String(), got)
			}
			if av.DataType() == events.DataTypeNumber && strings.TrimSpace(av.Number()) == av.Number() {
				if n, ok := got.(json.Number); !ok || n.String() != av.Number() {
					t.Fatalf("attribute %q: number %s became %v", name, av.Number(), got)
				}
			}
		}
	})
}
