package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/window"
)

// StatusCodesFunction is the asset name of the example stream function of
// your own (examples/functions/statuscodes, on package handler).
const StatusCodesFunction = "statuscodes"

// StatusCodes is the deployed statuscodes function, as its environment in
// the template names its resources.
type StatusCodes struct {
	Function   string // the function's name
	Results    string // OUTPUT_STREAM_NAME
	Quarantine string // QUARANTINE_TABLE_NAME
	kin        *kinesis.Client
	db         *dynamodb.Client
}

// FindStatusCodes reads the statuscodes function's environment.
func (s *Stack) FindStatusCodes() (*StatusCodes, error) {
	specs, err := s.deployment.Functions()
	if err != nil {
		return nil, err
	}
	for _, f := range specs {
		if f.Binary == StatusCodesFunction {
			sc := &StatusCodes{Function: f.FunctionName, Results: f.Env[handler.EnvOutputStream], Quarantine: f.Env[handler.EnvQuarantineTable],
				kin: kinesis.NewFromConfig(s.cfg), db: dynamodb.NewFromConfig(s.cfg)}
			if sc.Results == "" || sc.Quarantine == "" {
				return nil, fmt.Errorf("the statuscodes function's %s or %s is not set in the template", handler.EnvOutputStream, handler.EnvQuarantineTable)
			}
			return sc, nil
		}
	}
	return nil, errors.New("the template has no statuscodes function (tributary.NewStreamHandler)")
}

// statusTraffic is the demo's http_request events and what must come of
// them: results by id (records counted and the result's JSON), and the id
// of the event that must be set aside.
type statusTraffic struct {
	first, resend, advance []stream.Envelope
	want                   map[string]wantResult
	poisonID               string
}

type wantResult struct {
	key     string
	records int64
	result  string
}

// statusCodesTraffic builds the demo's events, their event times in the
// minute starting five minutes before now: /checkout 200, 503, 200 and 999
// (refused, naming data.status), /search 200 and 301; a producer's resend
// of the first; then one event per route 70 s later, which moves each
// route's shard watermark past the minute (plus the 5 s allowance).
func statusCodesTraffic(now time.Time, run string) statusTraffic {
	t0 := now.UTC().Truncate(time.Minute).Add(-5 * time.Minute)
	ev := func(id, route string, after time.Duration, status int) stream.Envelope {
		return stream.Envelope{ID: id + "-" + run, Type: "http_request", Key: route, OccurredAt: t0.Add(after), SentAt: now,
			Data: json.RawMessage(fmt.Sprintf(`{"status":%d,"method":"GET"}`, status))}
	}
	var st statusTraffic
	st.first = []stream.Envelope{
		ev("req-1", "/checkout", 1*time.Second, 200),
		ev("req-2", "/checkout", 2*time.Second, 503),
		ev("req-3", "/search", 3*time.Second, 200),
		ev("req-4", "/checkout", 4*time.Second, 999),
		ev("req-5", "/checkout", 5*time.Second, 200),
		ev("req-6", "/search", 6*time.Second, 301),
	}
	st.poisonID = st.first[3].ID
	st.resend = st.first[:1]
	st.advance = []stream.Envelope{ev("req-7", "/checkout", 70*time.Second, 200), ev("req-8", "/search", 70*time.Second, 200)}
	w := window.Window{Start: t0, End: t0.Add(time.Minute)}
	id := func(route string) string { return StatusCodesFunction + "/" + route + "/" + w.ID() }
	st.want = map[string]wantResult{
		id("/checkout"): {"/checkout", 3, `{"total":3,"classes":{"1xx":0,"2xx":2,"3xx":0,"4xx":0,"5xx":1},"codes":{"200":2,"503":1},"errorRate":0.3333}`},
		id("/search"):   {"/search", 2, `{"total":2,"classes":{"1xx":0,"2xx":1,"3xx":1,"4xx":0,"5xx":0},"codes":{"200":1,"301":1},"errorRate":0}`},
	}
	return st
}

// checkStatusResults compares the results read with the wanted ones: each
// wanted id present, with its key, record count and result; ok is false
// while one is missing (the caller waits), err is set for a wrong one.
func checkStatusResults(got map[string]handler.Result, want map[string]wantResult) (ok bool, err error) {
	ok = true
	for id, w := range want {
		r, found := got[id]
		if !found {
			ok = false
			continue
		}
		if r.Key != w.key || r.Records != w.records || string(r.Result) != w.result || !r.Final {
			return false, fmt.Errorf("statuscodes result %s: key %s, %d records, final %t, %s; want key %s, %d records (the resent event once), final, %s",
				id, r.Key, r.Records, r.Final, r.Result, w.key, w.records, w.result)
		}
	}
	return ok, nil
}

// Demo sends http_request events through ingest — a producer's resend of
// one and one with status 999 among them — waits for the statuscodes
// function's final results of the minute on its output stream and for the
// 999 record in the quarantine table, and prints both. Wrong results, a
// result twice with different contents, or the 999 record set aside without
// naming data.status fail it.
func (sc *StatusCodes) Demo(ctx context.Context, ingestURL string, out io.Writer) error {
	now := time.Now().UTC()
	st := statusCodesTraffic(now, now.Format("150405"))
	if _, err := Send(ctx, ingestURL, st.first, len(st.first), io.Discard); err != nil {
		return err
	}
	if _, err := Send(ctx, ingestURL, st.resend, len(st.resend), io.Discard); err != nil {
		return err
	}
	if _, err := Send(ctx, ingestURL, st.advance, len(st.advance), io.Discard); err != nil {
		return err
	}
	fmt.Fprintf(out, "    sent /checkout 200, 503, 200, 999 and /search 200, 301 in the minute from %s, %s resent by its producer,\n",
		st.first[0].OccurredAt.Format("15:04"), st.resend[0].ID)
	fmt.Fprintln(out, "    then one request per route 70 s later (their shards' watermarks pass the minute)")
	var got map[string]handler.Result
	for {
		var err error
		if got, err = sc.results(ctx); err != nil {
			return err
		}
		ok, err := checkStatusResults(got, st.want)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the statuscodes results never reached stream %s: %w", sc.Results, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	ids := make([]string, 0, len(st.want))
	for id := range st.want {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := got[id]
		fmt.Fprintf(out, "      final %-9s %s–%s %d requests: %s\n", r.Key, r.WindowStart.Format("15:04"), r.WindowEnd.Format("15:04"), r.Records, r.Result)
	}
	it, err := sc.waitSetAside(ctx, st.poisonID)
	if err != nil {
		return err
	}
	if it.Field != "data.status" || it.Category != setaside.KindInvalid {
		return fmt.Errorf("the status-999 record %s was set aside as field %q kind %q (%s); want data.status, %s", st.poisonID, it.Field, it.Category, it.Reason, setaside.KindInvalid)
	}
	fmt.Fprintf(out, "      set aside in %s: %s, field %s: %s\n", sc.Quarantine, st.poisonID, it.Field, it.Reason)
	return nil
}

// results reads every Result on the output stream by id; a result seen
// twice with different contents is an error.
func (sc *StatusCodes) results(ctx context.Context) (map[string]handler.Result, error) {
	shards, err := sc.kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(sc.Results)})
	if err != nil {
		return nil, fmt.Errorf("listing the shards of %s: %w", sc.Results, err)
	}
	out, raw := map[string]handler.Result{}, map[string]string{}
	for _, sh := range shards.Shards {
		it, err := sc.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(sc.Results), ShardId: sh.ShardId,
			ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", sc.Results, err)
		}
		iter := it.ShardIterator
		for iter != nil {
			page, err := sc.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", sc.Results, err)
			}
			for _, r := range page.Records {
				var res handler.Result
				if err := json.Unmarshal(r.Data, &res); err != nil {
					return nil, fmt.Errorf("a record on %s is not a result: %w", sc.Results, err)
				}
				if prev, ok := raw[res.ID]; ok && prev != string(r.Data) {
					return nil, fmt.Errorf("result %s is on %s twice with different contents:\n%s\n%s", res.ID, sc.Results, prev, r.Data)
				}
				raw[res.ID], out[res.ID] = string(r.Data), res
			}
			if len(page.Records) == 0 || aws.ToInt64(page.MillisBehindLatest) == 0 {
				break
			}
			iter = page.NextShardIterator
		}
	}
	return out, nil
}

// waitSetAside scans the quarantine table until the record of event id is
// in it.
func (sc *StatusCodes) waitSetAside(ctx context.Context, id string) (*setaside.Item, error) {
	for {
		p := dynamodb.NewScanPaginator(sc.db, &dynamodb.ScanInput{TableName: aws.String(sc.Quarantine)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("scanning %s: %w", sc.Quarantine, err)
			}
			for _, av := range page.Items {
				var it setaside.Item
				if attributevalue.UnmarshalMap(av, &it) == nil && it.Kind == setaside.ItemSetAside && strings.Contains(string(it.Data), `"`+id+`"`) {
					return &it, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the record of event %s never reached quarantine table %s: %w", id, sc.Quarantine, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// DemoStatusCodes finds the statuscodes function in the stack and runs its
// Demo, under a heading.
func DemoStatusCodes(ctx context.Context, s *Stack, ingestURL string, out io.Writer) error {
	sc, err := s.FindStatusCodes()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "▸ a stream function of your own: examples/functions/statuscodes (package handler) ─► %s, a StatusMix per route and minute\n", sc.Results)
	return sc.Demo(ctx, ingestURL, out)
}
