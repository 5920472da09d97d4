package enrich_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/enrich"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// TestJoinAsOfPosition: activity is joined with the profile as of its place
// in the shard — the old version before a change, the new one after it — and
// a duplicate older change never regresses the profile.
func TestJoinAsOfPosition(t *testing.T) {
	t.Parallel()
	in, out := newStream(t, "events"), newStream(t, "enriched")
	put(t, in,
		profile("u-1", 1, "free"),
		activity("a1", "u-1"),
		profile("u-1", 2, "pro"),
		activity("a2", "u-1"),
		profile("u-1", 1, "free"), // cdc redelivered an old change
		activity("a3", "u-1"),
		activity("b1", "u-2"),
		tombstone("u-1", 3),
		activity("a4", "u-1"),
	)
	h := enrich.New(db, kin, joinTable(t), out, fastBackoff)
	if f := handle(t, h, shardRecords(t, in)); f != "" {
		t.Fatalf("failure reported at %s", f)
	}
	got := byID(t, output(t, out))
	tests := []struct {
		id, plan, version string
		deleted           bool
	}{
		{"a1", "free", "1", false},
		{"a2", "pro", "2", false},
		{"a3", "pro", "2", false},
		{"b1", "-", "-", false},
		{"a4", "-", "3", true},
	}
	for _, tc := range tests {
		e, ok := got[tc.id]
		if !ok {
			t.Errorf("%s: not enriched", tc.id)
			continue
		}
		if plan(e) != tc.plan || version(e) != tc.version || e.data.ProfileDeleted != tc.deleted {
			t.Errorf("%s joined plan %s version %s deleted %v; want plan %s version %s deleted %v",
				tc.id, plan(e), version(e), e.data.ProfileDeleted, tc.plan, tc.version, tc.deleted)
		}
		if e.env.Type != "page_view" || string(e.data.Event) != `{"path":"/`+tc.id+`"}` {
			t.Errorf("%s: type %q event %s; want the original event", tc.id, e.env.Type, e.data.Event)
		}
	}
	if len(got) != len(tests) {
		t.Errorf("%d enriched records, want %d (changelog records are not enriched)", len(got), len(tests))
	}
	st := h.Stats()
	if st.ChangesApplied != 3 || st.ChangesSkipped != 1 || st.Enriched != 5 || st.ReadRoundTrips != 1 {
		t.Errorf("stats %+v: want 3 changes applied, 1 skipped, 5 enriched, 1 read round trip", st)
	}
	p, err := h.Lookup(context.Background(), "u-1")
	if err != nil || !p.Deleted || p.Version != "3" {
		t.Errorf("Lookup(u-1) = %+v, %v; want deleted at version 3", p, err)
	}
}

// TestBadInput: a record that is not a valid envelope, or a changelog
// record without key or version, or with a profile image over
// MaxImageBytes, is set aside in the quarantine table with its data and the
// field at fault, its sequence number and field are logged, and the records
// after it are enriched in the same batch: nothing is reported. Without a
// quarantine table it is reported as the batch item failure instead, after
// the records before it.
func TestBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, field, kind string
		bad               []byte
	}{
		{"activity without occurredAt", "occurredAt", setaside.KindInvalid, []byte(`{"id":"x1","type":"page_view","key":"u-1","sentAt":"2026-11-29T10:00:00Z"}`)},
		{"activity not JSON", "", setaside.KindUnparseable, []byte(`not json`)},
		{"changelog without version", "data.version", setaside.KindInvalid, []byte(`{"id":"p/u-1/9","type":"profile_changed","key":"u-1","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z","data":{"key":"u-1","image":{"plan":"pro"}}}`)},
		{"changelog without key", "data.key", setaside.KindInvalid, []byte(`{"id":"p/u-1/9","type":"profile_deleted","key":"u-1","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z","data":{"version":9,"image":null}}`)},
		{"profile image over the join's budget", "data.image", setaside.KindStateBudget, profile("u-1", 2, strings.Repeat("x", enrich.MaxImageBytes))},
		// Values of 300 KB the reason must not repeat whole.
		{"changelog key unlike the envelope's", "data.key", setaside.KindInvalid, []byte(`{"id":"p/u-1/9","type":"profile_changed","key":"u-1","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z","data":{"key":"` + strings.Repeat("k", 300_000) + `","version":9,"image":{}}}`)},
		// encoding/json takes "Version" for version, case-blind, the last
		// one winning: a second version beside the first.
		{"changelog version twice, cased apart", "data.Version", setaside.KindInvalid, []byte(`{"id":"p/u-1/9","type":"profile_changed","key":"u-1","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z","data":{"key":"u-1","version":9,"Version":99,"image":{}}}`)},
		// A changelog type a producer wrote to the stream itself (ingest
		// refuses these types): enrich took it as the profile's version 99
		// and then skipped every real change below it.
		{"changelog id not cdc's", "id", setaside.KindInvalid, []byte(`{"id":"r1-c1","type":"profile_changed","key":"u-1","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z","data":{"key":"u-1","version":99,"image":{"userId":"u-1","plan":"EVIL"}}}`)},
		{"changelog id of another version", "id", setaside.KindInvalid, []byte(`{"id":"profiles/u-1/2","type":"profile_changed","key":"u-1","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z","data":{"key":"u-1","version":99,"image":{"userId":"u-1","plan":"EVIL"}}}`)},
		{"changelog version not a number", "data.version", setaside.KindInvalid, []byte(`{"id":"p/u-1/9","type":"profile_changed","key":"u-1","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z","data":{"key":"u-1","version":"` + strings.Repeat("v", 300_000) + `","image":{}}}`)},
	}
	for _, tc := range tests {
		for _, withSink := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/quarantine=%v", tc.name, withSink), func(t *testing.T) {
				t.Parallel()
				in, out := newStream(t, "events"), newStream(t, "enriched")
				put(t, in, profile("u-1", 1, "free"), activity("a1", "u-1"), tc.bad, activity("a2", "u-1"))
				var logs bytes.Buffer
				opts := []enrich.Option{fastBackoff, enrich.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))}
				q := ""
				if withSink {
					q = quarantineTable(t)
					opts = append(opts, enrich.WithSetAside(setaside.New(db, q)))
				}
				h := enrich.New(db, kin, joinTable(t), out, opts...)
				recs := shardRecords(t, in)
				badSeq := recs[2].Kinesis.SequenceNumber
				wantFailure, wantEnriched := "", []string{"a1", "a2"}
				if !withSink {
					wantFailure, wantEnriched = badSeq, []string{"a1"}
				}
				if f := handle(t, h, recs); f != wantFailure {
					t.Fatalf("failure reported at %q, want %q", f, wantFailure)
				}
				if !strings.Contains(logs.String(), "record "+badSeq+": field "+tc.field+":") {
					t.Errorf("log does not name record %s and field %s:\n%.2000s", badSeq, tc.field, logs.String())
				}
				if logs.Len() > 8<<10 {
					t.Errorf("log is %d bytes for one bad record: a value of the record repeated whole", logs.Len())
				}
				got := byID(t, output(t, out))
				if ids := sortedKeys(got); !slices.Equal(ids, wantEnriched) {
					t.Errorf("enriched %v, want %v", ids, wantEnriched)
				}
				if e, ok := got["a2"]; ok && plan(e) != "free" {
					t.Errorf("a2 joined plan %q, want free (version 1: the bad record changed nothing)", plan(e))
				}
				if st := h.Stats(); st.BadRecords != 1 {
					t.Errorf("BadRecords = %d, want 1", st.BadRecords)
				}
				if withSink {
					assertSetAside(t, q, recs[2], tc.field, tc.kind)
				}
			})
		}
	}
}

// TestWarmCacheNeverStale: two instances alternate the batches of one
// shard; a profile changed in a batch the other instance ran is seen by the
// next batch, from the cache caught up with the shard's tail, in one read
// round trip.
func TestWarmCacheNeverStale(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		tailLimit int
		wantExtra int64
	}{
		{"tail covers the gap", enrich.DefaultTailEntries, 0},
		{"tail too short: one extra read, still fresh", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in, out := newStream(t, "events"), newStream(t, "enriched")
			put(t, in,
				// batch 1 on A
				profile("u-1", 1, "free"), profile("u-2", 1, "free"), activity("a1", "u-1"), activity("b1", "u-2"),
				// batch 2 on B: both profiles change
				profile("u-1", 2, "pro"), profile("u-2", 2, "team"), activity("b2", "u-2"),
				// batch 3 on A, whose cache still holds version 1
				activity("a3", "u-1"), activity("b3", "u-2"),
				// batch 4 on B
				profile("u-1", 3, "team"), activity("b4", "u-2"),
				// batch 5 on A
				activity("a5", "u-1"),
			)
			recs := shardRecords(t, in)
			table := joinTable(t)
			opts := []enrich.Option{fastBackoff, enrich.WithTailLimits(tc.tailLimit, 1<<20)}
			a, b := enrich.New(db, kin, table, out, opts...), enrich.New(db, kin, table, out, opts...)
			bounds := []int{0, 4, 7, 9, 11, 12}
			for i := 0; i+1 < len(bounds); i++ {
				h := a
				if i%2 == 1 {
					h = b
				}
				before := h.Stats()
				if f := handle(t, h, recs[bounds[i]:bounds[i+1]]); f != "" {
					t.Fatalf("batch %d: failure at %s", i+1, f)
				}
				if d := h.Stats(); d.ReadRoundTrips-before.ReadRoundTrips > 1+tc.wantExtra {
					t.Errorf("batch %d: %d read round trips", i+1, d.ReadRoundTrips-before.ReadRoundTrips)
				}
			}
			got := byID(t, output(t, out))
			want := map[string]string{"a1": "free", "b1": "free", "b2": "team", "a3": "pro", "b3": "team", "b4": "team", "a5": "team"}
			for id, p := range want {
				if plan(got[id]) != p {
					t.Errorf("%s joined plan %q, want %q", id, plan(got[id]), p)
				}
			}
			if v := version(got["a5"]); v != "3" {
				t.Errorf("a5 joined version %s, want 3", v)
			}
			sa := a.Stats()
			if sa.CacheHits == 0 {
				t.Errorf("instance A never hit its cache: %+v", sa)
			}
			if sa.ExtraReadRoundTrips != tc.wantExtra {
				t.Errorf("instance A: %d extra read round trips, want %d", sa.ExtraReadRoundTrips, tc.wantExtra)
			}
			if tc.wantExtra == 0 && sa.TailCatchUps != 2 {
				t.Errorf("instance A caught up from the tail %d times, want 2 (batches 3 and 5)", sa.TailCatchUps)
			}
		})
	}
}

// batchOf is a Lambda event of recs.
func batchOf(recs []events.KinesisEventRecord) events.KinesisEvent {
	return events.KinesisEvent{Records: recs}
}

// synthetic is docs as one shard's Lambda records with made-up sequence
// numbers, for inputs no stream needs to hold.
func synthetic(docs ...[]byte) []events.KinesisEventRecord {
	var recs []events.KinesisEventRecord
	for i, d := range docs {
		seq := fmt.Sprintf("4960118965842235937883629852%028d", i+1)
		var env struct{ Key string }
		_ = json.Unmarshal(d, &env) // the partition key ingest would have put it with
		recs = append(recs, events.KinesisEventRecord{EventID: "shardId-000000000000:" + seq, EventSourceArn: syntheticStream,
			Kinesis: events.KinesisRecord{Data: d, SequenceNumber: seq, PartitionKey: env.Key}})
	}
	return recs
}

// TestOversizeEnrichedRecord: an activity event that would exceed Kinesis'
// record limit once joined with its profile is set aside with its data
// (1 MB, kept whole) and the field; the records before and after it are
// enriched. Without a quarantine table it is reported by sequence number
// and field, after the records before it.
func TestOversizeEnrichedRecord(t *testing.T) {
	t.Parallel()
	for _, withSink := range []bool{true, false} {
		t.Run(fmt.Sprintf("quarantine=%v", withSink), func(t *testing.T) {
			t.Parallel()
			out := newStream(t, "enriched")
			big := strings.Repeat("x", 950<<10)
			recs := synthetic(profile("u-1", 1, big[:100<<10]), activity("a1", "u-2"), activity("a2", "u-1"), activity("a3", "u-2"))
			var logs bytes.Buffer
			opts := []enrich.Option{fastBackoff, enrich.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))}
			q := ""
			if withSink {
				q = quarantineTable(t)
				opts = append(opts, enrich.WithSetAside(setaside.New(db, q)))
			}
			h := enrich.New(db, kin, joinTable(t), out, opts...)
			recs[2].Kinesis.Data = bytes.Replace(recs[2].Kinesis.Data, []byte(`"/a2"`), []byte(`"/`+big+`"`), 1)
			wantFailure, wantEnriched := "", []string{"a1", "a3"}
			if !withSink {
				wantFailure, wantEnriched = recs[2].Kinesis.SequenceNumber, []string{"a1"}
			}
			if f := handle(t, h, recs); f != wantFailure {
				t.Fatalf("failure at %q, want %q", f, wantFailure)
			}
			if !strings.Contains(logs.String(), "record "+recs[2].Kinesis.SequenceNumber+": field data: the enriched record would be") {
				t.Errorf("log does not name the record and field:\n%.300s", logs.String())
			}
			if got := sortedKeys(byID(t, output(t, out))); !slices.Equal(got, wantEnriched) {
				t.Errorf("enriched %v, want %v", got, wantEnriched)
			}
			if withSink {
				assertSetAside(t, q, recs[2], "data", setaside.KindOutputTooLarge)
			}
		})
	}
}

// TestStaleDuplicateIsFenced: a duplicate of an earlier batch arriving after
// a later batch wrote the same keys (an invocation Lambda gave up on) is
// refused: it writes neither state nor output.
func TestStaleDuplicateIsFenced(t *testing.T) {
	t.Parallel()
	out := newStream(t, "enriched")
	recs := synthetic(profile("u-1", 1, "free"), activity("a1", "u-1"), profile("u-1", 2, "pro"), activity("a2", "u-1"))
	table := joinTable(t)
	handleOK(t, enrich.New(db, kin, table, out, fastBackoff), recs[:2])
	handleOK(t, enrich.New(db, kin, table, out, fastBackoff), recs[2:])
	stale := enrich.New(db, kin, table, out, fastBackoff)
	if f := handle(t, stale, recs[:2]); f != recs[0].Kinesis.SequenceNumber {
		t.Fatalf("stale duplicate: failure at %q, want its first record", f)
	}
	if st := stale.Stats(); st.Superseded != 1 || st.KeyWrites != 0 || st.Enriched != 0 {
		t.Errorf("stale duplicate stats %+v: want superseded, no writes, nothing enriched", st)
	}
	if got := output(t, out); len(got) != 2 {
		t.Errorf("output enriches %d records, want 2 (a1 and a2 once each)", len(got))
	}
	if p, err := stale.Lookup(context.Background(), "u-1"); err != nil || p.Version != "2" {
		t.Errorf("Lookup(u-1) = %+v, %v; want version 2", p, err)
	}
}

// TestMarkupIsNotInflated: '<', '>' and '&' in an event's data or its
// profile stay one byte each in the enriched record, as cdc writes them:
// an event of 300 KB of markup joined with a 100 KB profile of markup is a
// 400 KB enriched record, not one of 2.4 MB set aside as too large.
func TestMarkupIsNotInflated(t *testing.T) {
	t.Parallel()
	out := newStream(t, "enriched")
	q := quarantineTable(t)
	recs := synthetic(profile("u-1", 1, "PLAN"), activity("a1", "u-1"))
	recs[0].Kinesis.Data = bytes.Replace(recs[0].Kinesis.Data, []byte(`"PLAN"`), []byte(`"`+strings.Repeat("<b>&", 25_000)+`"`), 1)
	recs[1].Kinesis.Data = bytes.Replace(recs[1].Kinesis.Data, []byte(`"/a1"`), []byte(`"`+strings.Repeat("<i>&", 75_000)+`"`), 1)
	h := enrich.New(db, kin, joinTable(t), out, fastBackoff, enrich.WithSetAside(setaside.New(db, q)))
	handleOK(t, h, recs)
	got := byID(t, output(t, out))
	e, ok := got["a1"]
	if !ok {
		t.Fatalf("a1 not enriched (stats %+v)", h.Stats())
	}
	if n := len(e.raw); n > 450_000 {
		t.Errorf("enriched record is %d bytes for 400 KB of markup: escaped as \\u003c, six bytes a character", n)
	}
	if !bytes.Contains(e.raw, []byte("<b>&<b>&")) || !bytes.Contains(e.raw, []byte("<i>&<i>&")) {
		t.Errorf("enriched record does not carry the markup as it came: %.200s", e.raw)
	}
}
