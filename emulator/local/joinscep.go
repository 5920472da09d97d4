package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/cep"
	"github.com/tributary-dev/tributary/pkg/join"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// JoinsAndRules is the deployed stream–stream join and CEP: the join's
// config and output stream, the matches stream and the rules function's
// URL, as the functions' environments in the template name them.
type JoinsAndRules struct {
	Join          *join.Config
	JoinsStream   string
	MatchesStream string
	RulesURL      string
	RulesTable    string
	kin           *kinesis.Client
}

// FindJoinsAndRules reads the join, detect and rules functions'
// environments. The stack deploys a join per join file and a detection per
// CEP file of pipelines/; with several, it takes the first join and the
// first detection (by logical id) and that detection's rules function.
func (s *Stack) FindJoinsAndRules() (*JoinsAndRules, error) {
	specs, err := s.deployment.Functions()
	if err != nil {
		return nil, err
	}
	j := &JoinsAndRules{kin: kinesis.NewFromConfig(s.cfg)}
	detection := ""
	for _, f := range specs {
		switch {
		case f.Binary == "join" && j.Join == nil:
			j.JoinsStream = f.Env["JOINS_STREAM_NAME"]
			if j.Join, err = join.Parse([]byte(f.Env[join.EnvVar])); err != nil {
				return nil, fmt.Errorf("the join function's %s: %w", join.EnvVar, err)
			}
		case f.Binary == "detect" && j.MatchesStream == "":
			j.MatchesStream = f.Env["MATCHES_STREAM_NAME"]
			j.RulesTable = f.Env["RULES_TABLE_NAME"]
			detection = f.Pipeline
		}
	}
	for _, f := range specs {
		if f.Binary == "rules" && f.Pipeline == detection {
			j.RulesURL = s.URL(s.names[f.LogicalID])
			break
		}
	}
	if j.Join == nil || j.JoinsStream == "" || j.MatchesStream == "" || j.RulesURL == "" {
		return nil, fmt.Errorf("the template lacks the join function's JOINS_STREAM_NAME, detect's MATCHES_STREAM_NAME or the rules function's URL")
	}
	return j, nil
}

// DemoJoin sends searches and clicks through ingest (event times five
// minutes back, sent now) and prints what the joins stream carries: a
// search clicked within the bound (joined), a search with no click
// (unmatched once a later search of its session moves the watermark past
// the bound), and the click-through rate of each session's minute, final
// once the later searches move the watermark past it.
func (j *JoinsAndRules) DemoJoin(ctx context.Context, ingestURL string, out io.Writer) error {
	now := time.Now().UTC()
	run := now.Format("150405")
	t0 := now.Truncate(time.Minute).Add(-5 * time.Minute)
	sessA, sessB := "sess-a-"+run, "sess-b-"+run
	ev := func(id, typ, key string, after time.Duration, data string) stream.Envelope {
		return stream.Envelope{ID: id + "-" + run, Type: typ, Key: key, OccurredAt: t0.Add(after), SentAt: now, Data: json.RawMessage(data)}
	}
	first := []stream.Envelope{
		ev("search-a1", j.Join.Left, sessA, 1*time.Second, `{"query":"red shoes"}`),
		ev("search-b1", j.Join.Left, sessB, 2*time.Second, `{"query":"blue hat"}`),
		ev("click-a1", j.Join.Right, sessA, 5*time.Second, `{"result":3}`),
	}
	// Sent after the first are joined: later event times, which move each
	// session's shard watermark past the bound and the minute.
	later := 2*time.Minute + j.Join.Within + j.Join.AllowedLateness
	second := []stream.Envelope{
		ev("search-a2", j.Join.Left, sessA, later, `{"query":"red boots"}`),
		ev("search-b2", j.Join.Left, sessB, later, `{"query":"blue cap"}`),
	}
	fmt.Fprintf(out, "    %s: %s at %s, %s at %s; %s: %s at %s and no %s\n", sessA, j.Join.Left, clock(first[0]), j.Join.Right, clock(first[2]),
		sessB, j.Join.Left, clock(first[1]), j.Join.Right)
	if _, err := Send(ctx, ingestURL, first, len(first), io.Discard); err != nil {
		return err
	}
	joinedID := join.OutputID(j.Join.Name, join.TypeJoined, sessA, first[0].ID, first[2].ID)
	recs, err := j.waitFor(ctx, j.JoinsStream, joinedID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "      joined    %s ⋈ %s (id %s)\n", first[0].ID, first[2].ID, shortID(joinedID))
	fmt.Fprintf(out, "    later %s events of both sessions at %s move the watermark past %s + %s\n", j.Join.Left, clock(second[0]), clock(first[1]), j.Join.Within)
	if _, err := Send(ctx, ingestURL, second, len(second), io.Discard); err != nil {
		return err
	}
	unmatchedID := join.OutputID(j.Join.Name, join.TypeUnmatched, sessB, "left", first[1].ID)
	if recs, err = j.waitFor(ctx, j.JoinsStream, unmatchedID); err != nil {
		return err
	}
	fmt.Fprintf(out, "      unmatched %s: no %s within %s (a left join emits it once the watermark passes the bound)\n", first[1].ID, j.Join.Right, j.Join.Within)
	if j.Join.RateWindow == 0 {
		return nil
	}
	minute := t0.Truncate(j.Join.RateWindow).Format(time.RFC3339Nano)
	rateA := join.OutputID(j.Join.Name, join.TypeRate, sessA, minute)
	rateB := join.OutputID(j.Join.Name, join.TypeRate, sessB, minute)
	if recs, err = j.waitFor(ctx, j.JoinsStream, rateA, rateB); err != nil {
		return err
	}
	fmt.Fprintf(out, "      click-through rate, %s window from %s (derived in the join function):", j.Join.RateWindow, t0.Format("15:04"))
	for _, id := range []string{rateA, rateB} {
		var d join.RateData
		if err := json.Unmarshal(recs[id].Data, &d); err != nil {
			return err
		}
		fmt.Fprintf(out, " %s %d/%d (%.0f%%)", recs[id].Key, d.Matched, d.Left, 100*d.Rate)
	}
	fmt.Fprintln(out)
	return nil
}

func clock(e stream.Envelope) string { return e.OccurredAt.Format("15:04:05") }

func shortID(id string) string {
	if i := strings.IndexByte(id, ':'); i >= 0 && len(id) > i+9 {
		return id[:i+9] + "…"
	}
	return id
}

// DemoRules adds two rules through the rules function's URL while detect
// runs, waits until they apply, sends events that match the sequence rule
// and prints its first match; then deletes that rule, waits until the
// deletion applies, sends the same pattern for another key and shows that
// only the filter rule still matches.
func (j *JoinsAndRules) DemoRules(ctx context.Context, ingestURL string, out io.Writer) error {
	run := time.Now().UTC().Format("150405")
	seqRule := `{"id":"fail-then-big-` + run + `","pattern":[{"begin":"fail","type":"payment_failed"},{"followedBy":"big","type":"payment","where":"data.amount > 100"}],"within":"10m"}`
	bigRule := `{"id":"huge-payment-` + run + `","pattern":[{"begin":"p","type":"payment","where":"data.amount >= 1000"}]}`
	var applies, posted time.Time // the last rule's: when it applies, when it was posted
	for _, r := range []string{seqRule, bigRule} {
		posted = time.Now()
		var resp struct {
			AppliesFrom time.Time `json:"appliesFrom"`
		}
		if err := j.rulesCall(ctx, http.MethodPost, "rules", r, http.StatusCreated, &resp); err != nil {
			return err
		}
		applies = resp.AppliesFrom
	}
	fmt.Fprintf(out, "    POST %srules: fail-then-big (payment_failed followedBy payment > 100 within 10m) and huge-payment (payment >= 1000)\n", j.RulesURL)
	fmt.Fprintf(out, "      no deploy: detect re-reads the rules table; they apply to events arriving from %s, %s after they were posted (on AWS %s)\n",
		applies.Format("15:04:05"), applies.Sub(posted).Round(time.Second), cep.ActivationDelay)
	sleepUntil(ctx, applies.Add(time.Second))
	acct1 := "acct-1-" + run
	if err := j.sendPattern(ctx, ingestURL, acct1, 150, run+"a"); err != nil {
		return err
	}
	seqMatch, err := j.waitMatch(ctx, "fail-then-big-"+run, acct1)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "      %s: payment_failed, payment 150 → first match %s: %s\n", acct1, shortID(seqMatch.ID), matchEvents(seqMatch))
	var del struct {
		Rule cep.RuleView `json:"rule"`
	}
	if err := j.rulesCall(ctx, http.MethodDelete, "rules/fail-then-big-"+run, "", http.StatusOK, &del); err != nil {
		return err
	}
	until := del.Rule.Intervals[len(del.Rule.Intervals)-1].Until
	fmt.Fprintf(out, "    DELETE %srules/fail-then-big: it reads no event arriving from %s\n", j.RulesURL, until.Format("15:04:05"))
	sleepUntil(ctx, until.Add(time.Second))
	acct2 := "acct-2-" + run
	if err := j.sendPattern(ctx, ingestURL, acct2, 5000, run+"b"); err != nil {
		return err
	}
	huge, err := j.waitMatch(ctx, "huge-payment-"+run, acct2)
	if err != nil {
		return err
	}
	recs, err := j.readAll(ctx, j.MatchesStream)
	if err != nil {
		return err
	}
	for _, r := range recs {
		var d cep.MatchData
		if json.Unmarshal(r.Data, &d) == nil && r.Key == acct2 && d.Rule == "fail-then-big-"+run {
			return fmt.Errorf("the deleted rule fail-then-big matched %s: %s", acct2, r.ID)
		}
	}
	fmt.Fprintf(out, "      %s: payment_failed, payment 5000 → huge-payment matches (%s); fail-then-big, deleted, does not\n", acct2, matchEvents(huge))
	return nil
}

// sendPattern sends a failed payment and a payment of amount for key, then
// (3 s later, so its event time is past the watermark's allowance) a page
// view that moves the watermark past them: detect matches in event time,
// once the watermark has passed the events. The page view carries the
// data.ms the pageviews pipeline aggregates, so it is a valid page view
// there (counted under key), not a record pageviews sets aside.
func (j *JoinsAndRules) sendPattern(ctx context.Context, ingestURL, key string, amount int, run string) error {
	now := time.Now().UTC()
	ev := func(id, typ, data string) stream.Envelope {
		return stream.Envelope{ID: id + "-" + run, Type: typ, Key: key, OccurredAt: now, SentAt: now, Data: json.RawMessage(data)}
	}
	if _, err := Send(ctx, ingestURL, []stream.Envelope{ev("pay-failed", "payment_failed", `{"amount":80}`), ev("pay", "payment", fmt.Sprintf(`{"amount":%d}`, amount))}, 2, io.Discard); err != nil {
		return err
	}
	sleepUntil(ctx, time.Now().Add(3*time.Second))
	now = time.Now().UTC()
	_, err := Send(ctx, ingestURL, []stream.Envelope{ev("view", "page_view", `{"path":"/billing","ms":120}`)}, 1, io.Discard)
	return err
}

func matchEvents(r streamRecord) string {
	var d cep.MatchData
	if json.Unmarshal(r.Data, &d) != nil {
		return ""
	}
	var parts []string
	for _, e := range d.Events {
		parts = append(parts, e.Step+"="+e.ID)
	}
	return strings.Join(parts, " ")
}

// rulesCall calls the rules function URL and decodes its answer.
func (j *JoinsAndRules) rulesCall(ctx context.Context, method, path, body string, want int, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(j.RulesURL, "/")+"/"+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s /%s: the rules function answered %d: %s", method, path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

// streamRecord is an envelope read from an output stream.
type streamRecord struct {
	ID, Type, Key string
	Data          json.RawMessage
}

// readAll reads every record of a (small) stream from its start.
func (j *JoinsAndRules) readAll(ctx context.Context, name string) (map[string]streamRecord, error) {
	shards, err := j.kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("listing the shards of %s: %w", name, err)
	}
	out := map[string]streamRecord{}
	for _, sh := range shards.Shards {
		it, err := j.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId,
			ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		iter := it.ShardIterator
		for iter != nil {
			page, err := j.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", name, err)
			}
			for _, r := range page.Records {
				var env stream.Envelope
				if stream.Unmarshal(r.Data, &env) == nil {
					out[env.ID] = streamRecord{ID: env.ID, Type: env.Type, Key: env.Key, Data: append(json.RawMessage(nil), env.Data...)}
				}
			}
			if len(page.Records) == 0 || aws.ToInt64(page.MillisBehindLatest) == 0 {
				break
			}
			iter = page.NextShardIterator
		}
	}
	return out, nil
}

// waitFor reads the stream until every id is on it.
func (j *JoinsAndRules) waitFor(ctx context.Context, name string, ids ...string) (map[string]streamRecord, error) {
	for {
		recs, err := j.readAll(ctx, name)
		if err != nil {
			return nil, err
		}
		missing := ""
		for _, id := range ids {
			if _, ok := recs[id]; !ok {
				missing = id
			}
		}
		if missing == "" {
			return recs, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("record %s never reached stream %s: %w", missing, name, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitMatch waits for a match of rule for key on the matches stream.
func (j *JoinsAndRules) waitMatch(ctx context.Context, rule, key string) (streamRecord, error) {
	for {
		recs, err := j.readAll(ctx, j.MatchesStream)
		if err != nil {
			return streamRecord{}, err
		}
		for _, r := range recs {
			var d cep.MatchData
			if r.Key == key && json.Unmarshal(r.Data, &d) == nil && d.Rule == rule {
				return r, nil
			}
		}
		select {
		case <-ctx.Done():
			return streamRecord{}, fmt.Errorf("no match of rule %s for %s reached stream %s: %w", rule, key, j.MatchesStream, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}
