package local

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freshNow is the time the tests rewrite samples to.
var freshNow = time.Date(2027, 3, 4, 12, 34, 56, 789e6, time.UTC)

// recent reports whether at is in the minute up to freshNow.
func recent(at time.Time) bool {
	return !at.After(freshNow) && at.After(freshNow.Add(-time.Minute))
}

// freshOf rewrites the sample file and decodes the result.
func freshOf(t *testing.T, file string) (map[string]any, []Rewrite, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "events", file))
	if err != nil {
		t.Fatal(err)
	}
	out, rewrites, err := FreshSample(raw, freshNow)
	if err != nil {
		t.Fatalf("FreshSample(%s): %v", file, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("FreshSample(%s) = %s: %v", file, out, err)
	}
	return doc, rewrites, out
}

func records(doc map[string]any) []map[string]any {
	var out []map[string]any
	for _, r := range doc["Records"].([]any) {
		out = append(out, r.(map[string]any))
	}
	return out
}

func rfcTime(t *testing.T, v any) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, v.(string))
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func envelopeOf(t *testing.T, data any) map[string]any {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(data.(string))
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil
	}
	return env
}

// Each sample type: its times land in the minute before now with their
// spacing kept, and its positions in a namespace no real one has.
func TestFreshSample(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, doc map[string]any)
	}{
		{"aggregate/kinesis-batch.json", func(t *testing.T, doc map[string]any) {
			var prev string
			var received []time.Time
			for _, r := range records(doc) {
				k := r["kinesis"].(map[string]any)
				seq := k["sequenceNumber"].(string)
				if r["eventID"] != SampleShard+":"+seq {
					t.Errorf("eventID %v, want %s:%s", r["eventID"], SampleShard, seq)
				}
				if !strings.HasPrefix(seq, strconv.FormatInt(freshNow.UnixNano(), 10)) || (prev != "" && compareDecimal(seq, prev) <= 0) {
					t.Errorf("sequence number %s after %s: want now's nanoseconds, rising in the sample's order", seq, prev)
				}
				prev = seq
				arrival, _ := k["approximateArrivalTimestamp"].(float64)
				if !recent(time.UnixMilli(int64(arrival * 1000))) {
					t.Errorf("approximateArrivalTimestamp %v, want the minute before %s", arrival, freshNow)
				}
				env := envelopeOf(t, k["data"])
				received = append(received, rfcTime(t, env["receivedAt"]))
				// user-42's device clock is three hours behind: still so.
				if sent, occurred := rfcTime(t, env["sentAt"]), rfcTime(t, env["occurredAt"]); rfcTime(t, env["receivedAt"]).Sub(sent) > 2*time.Hour != (env["key"] == "user-42") || occurred.After(sent) {
					t.Errorf("envelope %v: the sample's clock offsets changed", env)
				}
			}
			// 10:41:12.4 and 10:41:41.2 stay in one minute, 28.8 s apart.
			if received[1].Sub(received[0]) != 28800*time.Millisecond || received[0].Truncate(time.Minute) != received[1].Truncate(time.Minute) || !recent(received[1]) {
				t.Errorf("receivedAt %v: want the sample's spacing, in one minute, the latest in the minute before now", received)
			}
		}},
		{"aggregate/kinesis-poison.json", func(t *testing.T, doc map[string]any) {
			env := envelopeOf(t, records(doc)[1]["kinesis"].(map[string]any)["data"])
			if env["occurredAt"] != "yesterday" {
				t.Errorf("the poison record's occurredAt is %v, want it kept: yesterday", env["occurredAt"])
			}
		}},
		{"aggregate/kinesis-tumbling-window.json", func(t *testing.T, doc map[string]any) {
			w := doc["window"].(map[string]any)
			start, end := rfcTime(t, w["start"]), rfcTime(t, w["end"])
			if doc["shardId"] != SampleShard || end.Sub(start) != time.Minute || start.Truncate(time.Minute) != start || !recent(end) {
				t.Errorf("shardId %v, window %v: want %s and a minute ending in the minute before now", doc["shardId"], w, SampleShard)
			}
		}},
		{"cdc/dynamodb-insert.json", func(t *testing.T, doc map[string]any) {
			r := records(doc)[0]
			d := r["dynamodb"].(map[string]any)
			created, _ := d["ApproximateCreationDateTime"].(float64)
			if r["eventID"] == "c4ca4238a0b923820dcc509a6f75849b" || len(r["eventID"].(string)) != 32 {
				t.Errorf("eventID %v: want a new one of the same shape", r["eventID"])
			}
			if seq := d["SequenceNumber"].(string); !strings.HasPrefix(seq, strconv.FormatInt(freshNow.UnixNano(), 10)) {
				t.Errorf("SequenceNumber %s: want now's nanoseconds", seq)
			}
			if !recent(time.Unix(int64(created), 0)) {
				t.Errorf("ApproximateCreationDateTime %v, want the minute before now", created)
			}
			if r["eventSourceARN"] != "arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/2026-11-29T00:00:00.000" {
				t.Errorf("eventSourceARN %v: want it as it is (the Invoke API maps it)", r["eventSourceARN"])
			}
		}},
		{"worker/sqs-fifo.json", func(t *testing.T, doc map[string]any) {
			ids := map[any]bool{}
			var prev string
			for _, r := range records(doc) {
				ids[r["messageId"]] = true
				if strings.HasPrefix(r["messageId"].(string), "0b7e4c1a-") {
					t.Errorf("messageId %v: want a new one", r["messageId"])
				}
				a := r["attributes"].(map[string]any)
				ms, _ := strconv.ParseInt(a["SentTimestamp"].(string), 10, 64)
				if !recent(time.UnixMilli(ms)) && !recent(time.UnixMilli(ms).Add(time.Minute)) {
					t.Errorf("SentTimestamp %v: want around now", a["SentTimestamp"])
				}
				if seq := a["SequenceNumber"].(string); compareDecimal(seq, prev) <= 0 || !strings.HasPrefix(seq, strconv.FormatInt(freshNow.UnixNano(), 10)) {
					t.Errorf("FIFO SequenceNumber %s after %s: want now's nanoseconds, rising", seq, prev)
				} else {
					prev = seq
				}
				var body map[string]any
				if err := json.Unmarshal([]byte(r["body"].(string)), &body); err != nil {
					t.Fatal(err)
				}
				if at := rfcTime(t, body["occurredAt"]); at.Year() != freshNow.Year() {
					t.Errorf("body occurredAt %v: want it moved to now", body["occurredAt"])
				}
			}
			if len(ids) != len(records(doc)) {
				t.Errorf("messageIds %v: want one per message", ids)
			}
		}},
		{"quarantine/sqs-on-failure.json", func(t *testing.T, doc map[string]any) {
			var body struct {
				Timestamp        string
				KinesisBatchInfo struct {
					ShardID                         string `json:"shardId"`
					Start                           string `json:"startSequenceNumber"`
					End                             string `json:"endSequenceNumber"`
					ApproximateArrivalOfFirstRecord string `json:"approximateArrivalOfFirstRecord"`
				}
			}
			if err := json.Unmarshal([]byte(records(doc)[0]["body"].(string)), &body); err != nil {
				t.Fatal(err)
			}
			b := body.KinesisBatchInfo
			if b.ShardID != SampleShard || b.Start != b.End || !strings.HasPrefix(b.Start, strconv.FormatInt(freshNow.UnixNano(), 10)) {
				t.Errorf("KinesisBatchInfo %+v: want shard %s and one renumbered sequence number", b, SampleShard)
			}
			if !recent(rfcTime(t, body.Timestamp)) || rfcTime(t, b.ApproximateArrivalOfFirstRecord).Year() != freshNow.Year() {
				t.Errorf("on-failure record at %s, first record %s: want both moved to now", body.Timestamp, b.ApproximateArrivalOfFirstRecord)
			}
		}},
		{"ingest/function-url-idempotency-key.json", func(t *testing.T, doc map[string]any) {
			rc := doc["requestContext"].(map[string]any)
			epoch, _ := rc["timeEpoch"].(float64)
			if !recent(time.UnixMilli(int64(epoch))) {
				t.Errorf("timeEpoch %v: want the minute before now", epoch)
			}
			if at, err := time.Parse(clfLayout, rc["time"].(string)); err != nil || !at.Equal(time.UnixMilli(int64(epoch)).Truncate(time.Second)) {
				t.Errorf("time %v, timeEpoch %v: want one moment", rc["time"], epoch)
			}
			key := doc["headers"].(map[string]any)["idempotency-key"].(string)
			if key == `"8e03978e-40d5-43e8-bc93-6894a57f9324"` || !strings.HasPrefix(key, `"`) {
				t.Errorf("idempotency-key %s: want a new quoted key", key)
			}
			var body []map[string]any
			if err := json.Unmarshal([]byte(doc["body"].(string)), &body); err != nil {
				t.Fatal(err)
			}
			// 07:41:20 and 07:41:25 from a device three hours behind: kept.
			if d := rfcTime(t, body[1]["occurredAt"]).Sub(rfcTime(t, body[0]["occurredAt"])); d != 5*time.Second || rfcTime(t, body[0]["occurredAt"]).Year() != freshNow.Year() {
				t.Errorf("body %v: want the times moved with their spacing", body)
			}
		}},
		{"ingest/function-url-signed.json", func(t *testing.T, doc map[string]any) {
			h := doc["headers"].(map[string]any)
			ts, _ := strconv.ParseInt(h["x-tributary-timestamp"].(string), 10, 64)
			if !recent(time.Unix(ts, 0)) {
				t.Errorf("x-tributary-timestamp %v: want the minute before now", h["x-tributary-timestamp"])
			}
		}},
		{"ticker/eventbridge-scheduled.json", func(t *testing.T, doc map[string]any) {
			if at := rfcTime(t, doc["time"]); !recent(at) {
				t.Errorf("time %v: want the minute before now", doc["time"])
			}
		}},
		{"snapshot/console-test.json", func(t *testing.T, doc map[string]any) {
			if len(doc) != 1 || doc["table"] != "profiles" {
				t.Errorf("%v: want it as it is", doc)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			doc, rewrites, _ := freshOf(t, tc.file)
			tc.check(t, doc)
			if tc.file == "snapshot/console-test.json" {
				if len(rewrites) != 0 {
					t.Errorf("rewrites %v for a payload with no times or positions", rewrites)
				}
				return
			}
			if len(rewrites) == 0 {
				t.Error("no rewrites reported")
			}
		})
	}
}

// Every sample leaves FreshSample without its fixed times, shard or
// sequence numbers, and each change is reported on a line of its own.
func TestFreshSampleLeavesNoFixedPosition(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "events", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("samples: %v %v", files, err)
	}
	for _, f := range files {
		name, _ := filepath.Rel(filepath.Join("..", "..", "events"), f)
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out, rewrites, err := FreshSample(raw, freshNow)
			if err != nil {
				t.Fatal(err)
			}
			text := string(out) + decodedData(t, out)
			for _, fixed := range []string{"shardId-000000000000", "496011896584223593788362985218276384753201890123097", `"sequenceNumber":"1111`, `"SequenceNumber":"2222`, `"SequenceNumber":"1889`} {
				if strings.Contains(text, fixed) {
					t.Errorf("the fresh copy still holds %s", fixed)
				}
			}
			// Times of the sample left only where they are no time of the
			// event but data: a DynamoDB stream's label, a SQS sender's id,
			// an item's or an event's own attributes.
			rest := regexp.MustCompile(`stream/2026-11-29T[0-9:.]+|_20261129|"(recordedAt|createdAt)":(\{"S":)?"2026-11-29T[0-9:.]+Z"`).ReplaceAllString(text, "")
			if strings.Contains(rest, "2026-11-29") || strings.Contains(rest, "29/Nov/2026") || strings.Contains(rest, "17959") {
				t.Errorf("the fresh copy still holds a time of 2026-11-29:\n%s", rest)
			}
			seen := map[string]bool{}
			for _, r := range rewrites {
				if seen[r.Path+r.What] || r.Count < 1 || r.What == "" {
					t.Errorf("rewrite %+v: want one line per change, with a count and what it became", r)
				}
				seen[r.Path+r.What] = true
			}
			// make invoke says, for every sample it rewrites, why the
			// copy is safe for its kind of source.
			if why := SampleSafety(raw); len(rewrites) > 0 && !strings.Contains(why, ": rewritten, never refused") && !strings.HasPrefix(why, "schedule sample") {
				t.Errorf("SampleSafety = %q: want the source's decision", why)
			}
		})
	}
}

// decodedData is the text of every Kinesis record's data in payload.
func decodedData(t *testing.T, payload []byte) string {
	t.Helper()
	var ev struct {
		Records []struct {
			Kinesis struct{ Data string }
		}
	}
	_ = json.Unmarshal(payload, &ev)
	var b strings.Builder
	for _, r := range ev.Records {
		d, err := base64.StdEncoding.DecodeString(r.Kinesis.Data)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(d)
	}
	return b.String()
}

func TestFmtShift(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "+0m"},
		{50 * time.Minute, "+50m"},
		{2 * time.Hour, "+2h"},
		{(2*24+14)*time.Hour + 50*time.Minute, "+2d14h50m"},
		{-(24*time.Hour + time.Minute), "-1d1m"},
	}
	for _, tc := range tests {
		if got := fmtShift(tc.d); got != tc.want {
			t.Errorf("fmtShift(%s) = %s, want %s", tc.d, got, tc.want)
		}
	}
}

// A sample later than now moves back, to the minute up to now, not after.
func TestFreshSampleFromTheFuture(t *testing.T) {
	in := []byte(`{"version":"0","detail-type":"Scheduled Event","source":"aws.events","time":"2027-03-04T12:36:30Z","detail":{}}`)
	out, _, err := FreshSample(in, freshNow)
	if err != nil {
		t.Fatal(err)
	}
	var ev struct{ Time time.Time }
	if err := json.Unmarshal(out, &ev); err != nil {
		t.Fatal(err)
	}
	if !recent(ev.Time) || ev.Time.Second() != 30 {
		t.Errorf("time %s: want 12:34:30, the minute up to %s", ev.Time, freshNow)
	}
}

// sampleIDs lists, in the payload's order, every id a sample carries in
// the documents its records and body hold: each object's "id" (envelopes,
// commands, rules), a task's data.taskId and data.after, and a FIFO
// message's MessageDeduplicationId, each as "<member>=<value>".
func sampleIDs(t *testing.T, payload []byte) []string {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(payload, &root); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if id, ok := x["id"].(string); ok {
				out = append(out, "id="+id)
			}
			for _, k := range []string{"taskId", "after"} {
				if s, ok := x[k].(string); ok {
					out = append(out, k+"="+s)
				}
			}
			for _, k := range sortedKeys(x) {
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	doc := func(s string, b64 bool) {
		raw := []byte(s)
		if b64 {
			var err error
			if raw, err = base64.StdEncoding.DecodeString(s); err != nil {
				t.Fatal(err)
			}
		}
		var d any
		if json.Unmarshal(raw, &d) == nil {
			walk(d)
		}
	}
	recs, _ := root["Records"].([]any)
	for _, r := range recs {
		rec := r.(map[string]any)
		if k, ok := rec["kinesis"].(map[string]any); ok {
			doc(k["data"].(string), true)
		}
		if body, ok := rec["body"].(string); ok {
			doc(body, false)
		}
		if a, ok := rec["attributes"].(map[string]any); ok {
			if s, ok := a["MessageDeduplicationId"].(string); ok {
				out = append(out, "MessageDeduplicationId="+s)
			}
		}
	}
	if body, ok := root["body"].(string); ok {
		b64, _ := root["isBase64Encoded"].(bool)
		doc(body, b64)
	}
	return out
}

// tasksAfter is a queue sample whose second task waits for the first.
const tasksAfter = `{"Records":[
 {"messageId":"m-1","eventSource":"aws:sqs","attributes":{"SentTimestamp":"1795949000000"},
  "body":"{\"id\":\"evt-task-1\",\"type\":\"task\",\"key\":\"c-1\",\"occurredAt\":\"2026-11-29T10:43:00Z\",\"sentAt\":\"2026-11-29T10:43:00Z\",\"data\":{\"taskId\":\"task-1\",\"input\":\"a\",\"rounds\":1}}"},
 {"messageId":"m-2","eventSource":"aws:sqs","attributes":{"SentTimestamp":"1795949000100"},
  "body":"{\"id\":\"evt-task-2\",\"type\":\"task\",\"key\":\"c-1\",\"occurredAt\":\"2026-11-29T10:43:01Z\",\"sentAt\":\"2026-11-29T10:43:01Z\",\"data\":{\"taskId\":\"task-2\",\"input\":\"b\",\"rounds\":1,\"after\":\"task-1\"}}"}]}`

// Each invocation of a sample is a new delivery: every event id it carries
// (envelope ids, task ids, a FIFO deduplication id) is new, so a running
// stack's ledgers count it rather than set it aside as an id reused with
// other content (its times moved); an id the sample repeats stays
// repeated (a retry stays a duplicate, a reference still names its event),
// and ids that are no delivery's — an entity's version, a command's, a
// rule's — stay as they are.
func TestFreshSampleGivesFreshIDs(t *testing.T) {
	tests := []struct {
		name    string
		payload string // "" reads events/<name>
		kept    []string
		// same lists pairs of members (index in sampleIDs) that must hold
		// one id after the rewrite.
		same [][2]int
	}{
		{name: "aggregate/kinesis-batch.json"},
		{name: "aggregate/kinesis-poison.json"},
		{name: "ingest/function-url-post.json"},
		{name: "ingest/function-url-idempotency-key.json"},
		{name: "detect/kinesis-payments.json"},
		{name: "join/kinesis-search-click.json"},
		{name: "enrich/kinesis-tombstone.json", kept: []string{"id=profiles/user-7/1", "id=profiles/user-7/2"}},
		{name: "project/kinesis-events.json", kept: []string{"id=show-1/1", "id=show-1/2"}},
		// Two copies of task-1001: still one task, run once.
		{name: "worker/sqs-tasks.json"},
		{name: "worker/sqs-fifo.json"},
		{name: "worker/sqs-after-missing.json"},
		{name: "commands/function-url-reserve.json", kept: []string{"id=cmd-0002"}},
		{name: "rules/function-url-test.json", kept: []string{"id=fail-then-big"}},
		// task-2's after names task-1's new id (members: id, taskId of
		// task-1; id, taskId, after of task-2).
		{name: "tasks with after", payload: tasksAfter, same: [][2]int{{1, 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(tc.payload)
			if tc.payload == "" {
				var err error
				if raw, err = os.ReadFile(filepath.Join("..", "..", "events", tc.name)); err != nil {
					t.Fatal(err)
				}
			}
			orig := sampleIDs(t, raw)
			var fresh [2][]string
			for i := range fresh {
				out, rewrites, err := FreshSample(raw, freshNow)
				if err != nil {
					t.Fatal(err)
				}
				fresh[i] = sampleIDs(t, out)
				if len(fresh[i]) != len(orig) {
					t.Fatalf("ids %v, want one for each of %v", fresh[i], orig)
				}
				var said bool
				for _, r := range rewrites {
					said = said || strings.Contains(r.What, "new for this invocation")
				}
				if !said && len(orig) > len(tc.kept) {
					t.Errorf("rewrites %v: no line says the ids are new", rewrites)
				}
				// The line shows an id the sample has and what it became
				// (it printed "<id> → <id>~…", naming none).
				for j, id := range orig {
					if slices.Contains(tc.kept, id) {
						continue
					}
					_, was, _ := strings.Cut(id, "=") // sampleIDs names the place: "id=evt-1"
					_, now, _ := strings.Cut(fresh[i][j], "=")
					shown := false
					for _, r := range rewrites {
						shown = shown || strings.Contains(r.What, `"`+was+`" → "`+now+`"`)
					}
					if !shown {
						t.Errorf("rewrites %v: no line shows %s becoming %s", rewrites, id, fresh[i][j])
					}
					break
				}
			}
			if len(orig) == 0 {
				t.Fatal("the sample carries no id")
			}
			for i, id := range orig {
				kept := slices.Contains(tc.kept, id)
				switch {
				case kept && fresh[0][i] != id:
					t.Errorf("%s became %s: want it kept", id, fresh[0][i])
				case !kept && (fresh[0][i] == id || !strings.HasPrefix(fresh[0][i], id)):
					t.Errorf("%s became %s: want a new id that still reads as the sample's", id, fresh[0][i])
				case !kept && fresh[0][i] == fresh[1][i]:
					t.Errorf("%s became %s at two invocations: want a new id each time", id, fresh[0][i])
				}
				for j := range orig {
					if (orig[i] == orig[j]) != (fresh[0][i] == fresh[0][j]) {
						t.Errorf("%s and %s became %s and %s: want equal ids to stay equal and others different", orig[i], orig[j], fresh[0][i], fresh[0][j])
					}
				}
			}
			for _, p := range tc.same {
				a, b := fresh[0][p[0]], fresh[0][p[1]]
				if _, av, _ := strings.Cut(a, "="); !strings.HasSuffix(b, "="+av) {
					t.Errorf("%s and %s: want the reference to name the new id", a, b)
				}
			}
		})
	}
}

// An id with no room for the invocation's suffix is an error naming it.
func TestFreshSampleRefusesAnIDWithNoRoomForItsSuffix(t *testing.T) {
	long := strings.Repeat("x", 250)
	in := []byte(`{"Records":[{"messageId":"m-1","eventSource":"aws:sqs","body":"{\"id\":\"` + long + `\",\"type\":\"page_view\",\"key\":\"k\",\"occurredAt\":\"2026-11-29T10:43:00Z\",\"sentAt\":\"2026-11-29T10:43:00Z\"}"}]}`)
	if _, _, err := FreshSample(in, freshNow); err == nil || !strings.Contains(err.Error(), "Records[].body.id") || !strings.Contains(err.Error(), long) {
		t.Errorf("FreshSample with a %d-character id: %v, want an error naming Records[].body.id and the id", len(long), err)
	}
}

// TestFreshSampleSendsHostileRecordsAsTheyAre: a sample's record whose
// data or body the strict reader refuses — a key twice, text that is not
// UTF-8 — is sent byte for byte, so the function sets aside what the file
// holds: decoded and written back, the last copy of the key would win and
// the text be mended. Its sibling records are still made fresh.
func TestFreshSampleSendsHostileRecordsAsTheyAre(t *testing.T) {
	for _, hostile := range []string{
		`{"id":"e1","type":"page_view","key":"k","occurredAt":"2026-11-29T10:41:12Z","data":{"ms":1,"ms":2}}`,
		"{\"id\":\"e1\",\"type\":\"page_view\",\"key\":\"k\xff\",\"occurredAt\":\"2026-11-29T10:41:12Z\",\"data\":{\"ms\":1}}",
	} {
		good := `{"id":"e2","type":"page_view","key":"k","occurredAt":"2026-11-29T10:41:12Z","data":{"ms":1}}`
		rec := func(seq, data string) string {
			return `{"eventSource":"aws:kinesis","eventID":"shardId-000000000000:` + seq + `","eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/events",` +
				`"kinesis":{"partitionKey":"k","sequenceNumber":"` + seq + `","approximateArrivalTimestamp":1764412872.4,"data":"` + base64.StdEncoding.EncodeToString([]byte(data)) + `"}}`
		}
		payload := []byte(`{"Records":[` + rec("49000000000000000000000000000000000000000000000000000001", hostile) + `,` + rec("49000000000000000000000000000000000000000000000000000002", good) + `]}`)
		out, _, err := FreshSample(payload, freshNow)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatal(err)
		}
		recs := records(doc)
		if got, _ := base64.StdEncoding.DecodeString(recs[0]["kinesis"].(map[string]any)["data"].(string)); string(got) != hostile {
			t.Errorf("the hostile record's data became %q; want it as the file has it, %q", got, hostile)
		}
		if env := envelopeOf(t, recs[1]["kinesis"].(map[string]any)["data"]); env["id"] == "e2" {
			t.Errorf("the good record kept id e2: want it made fresh")
		}
	}
}
