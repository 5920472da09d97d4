package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/cli"
)

const streamsTemplate = "testdata/streams.template.json"

type result struct {
	code           int
	stdout, stderr string
}

func cmd(ctx context.Context, env map[string]string, args ...string) result {
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code := run(ctx, args, lookup, func() time.Time { return time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC) }, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// TestUsage: every command line that cannot run is refused before
// anything is read, in one line naming the flag.
func TestUsage(t *testing.T) {
	local := map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}
	big := strings.Repeat("t", 100_000) // a value pasted by mistake
	// A file far larger than any template (a -template /dev/zero, a log):
	// refused at the bound, not read whole.
	huge := filepath.Join(t.TempDir(), "huge.template.json")
	if err := os.WriteFile(huge, nil, 0o600); err != nil || os.Truncate(huge, 64<<20) != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{name: "no stream", args: []string{}, want: "-stream is required"},
		{name: "a where without =", args: []string{"-stream", "s", "-where", "data.page"}, want: `-where "data.page": want path=value`},
		{name: "a where with a bad index", args: []string{"-stream", "s", "-where", "items[a]=1"}, want: `-where "items[a]=1": "items[a]": an index is a whole number`},
		{name: "a position that is none", args: []string{"-stream", "s", "-from", "yesterday"}, want: `-from "yesterday" is none of latest, trim_horizon`},
		{name: "a position in the future", args: []string{"-stream", "s", "-from", "2027-01-01T00:00:00Z"}, want: "-from 2027-01-01T00:00:00Z is in the future"},
		{name: "a duration past any", args: []string{"-stream", "s", "-from", "99999999h"}, want: "-from 99999999h: at most 8760h0m0s ago (the longest a stream keeps records)"},
		{name: "an empty type in the list", args: []string{"-stream", "s", "-type", "page_view,,click"}, want: `-type "page_view,,click": type 2 of 3 is empty`},
		{name: "a list ending in a comma", args: []string{"-stream", "s", "-type", "page_view,"}, want: `-type "page_view,": type 2 of 2 is empty`},
		{name: "two formats", args: []string{"-stream", "s", "-json", "-raw"}, want: "-raw and -json are two formats"},
		{name: "-n 0 without -f", args: []string{"-stream", "s", "-n", "0"}, want: "-n 0: must be from 1 to 1000000"},
		{name: "-n too many", args: []string{"-stream", "s", "-f", "-n", "2000000"}, want: "-n 2000000: must be from 0 to 1000000"},
		{name: "-max-bytes too large", args: []string{"-stream", "s", "-max-bytes", "20000000"}, want: "-max-bytes 20000000: must be from 64 to 10485760"},
		{name: "polling faster than once a second", args: []string{"-stream", "s", "-interval", "200ms"}, want: "-interval 200ms: must be from 1s to 1m0s"},
		{name: "a session past the bound", args: []string{"-stream", "s", "-max-session", "48h"}, want: "-max-session 48h0m0s: must be from 1m0s to 24h0m0s"},
		{name: "a key too long", args: []string{"-stream", "s", "-key", strings.Repeat("k", 1025)}, want: "-key is 1025 bytes long"},
		{name: "a key not UTF-8", args: []string{"-stream", "s", "-key", "M\xfcnchen"}, want: `-key "M\xfcnchen" is not valid UTF-8: a partition key is Unicode text, so it would match nothing`},
		{name: "a type not UTF-8", args: []string{"-stream", "s", "-type", "page_view,cl\xe9ck"}, want: `-type "cl\xe9ck" is not valid UTF-8`},
		{name: "a where value not UTF-8", args: []string{"-stream", "s", "-where", "data.city=M\xfcnchen"}, want: `-where "data.city=M\xfcnchen": not valid UTF-8`},
		{name: "too many conditions", args: append([]string{"-stream", "s"}, strings.Split(strings.Repeat("-where a=1 ", 17), " ")[:34]...), want: "-where is given 17 times; at most 16"},
		{name: "a stream name Kinesis refuses", args: []string{"-stream", "a b"}, want: `-stream "a b": a Kinesis stream name is`},
		{name: "-template against AWS", args: []string{"-stream", "events", "-template", streamsTemplate}, want: "-template names streams as the local runner deploys them, but AWS_ENDPOINT_URL is not set"},
		{name: "-stack without -template", args: []string{"-stream", "s", "-stack", "X"}, want: "-stack is only read with -template"},
		{name: "an alias the stack lacks", env: local, args: []string{"-stream", "events", "-template", "testdata/two-joins.template.json"}, want: "-stream events: the stack has no events stream; its streams: OtherJoins (Tributary-OtherJoins0A1B2C3D), SearchClickJoinJoins (Tributary-SearchClickJoinJoinsD33285C4)"},
		{name: "an alias with two streams", env: local, args: []string{"-stream", "joins", "-template", "testdata/two-joins.template.json"}, want: "-stream joins: the stack has 2 such streams, give one by label"},
		{name: "a template past the bound", env: local, args: []string{"-stream", "events", "-template", huge}, want: "-template template: " + huge + ": more than 1048576 bytes"},
		{name: "not a stream of the stack", env: local, args: []string{"-stream", "nope", "-template", streamsTemplate}, want: `-stream "nope" is not a stream of the stack: give one of events, results, joins, matches, enriched, show-events`},
		// A value pasted by mistake is refused, and repeated cut.
		{name: "a type longer than any", args: []string{"-stream", "s", "-type", "page_view," + big}, want: `-type "` + big[:64] + `"… is 100000 bytes long; an event's type is at most 256`},
		{name: "a type with a control character", args: []string{"-stream", "s", "-type", "page_view,sign\tup"}, want: `-type "sign\tup" holds control character U+0009 at byte 4: no event's type can (ingest refuses it), so it would match nothing`},
		{name: "a type with a zero-width space", args: []string{"-stream", "s", "-type", "page\u200bview"}, want: `-type "page\u200bview" holds invisible character U+200B at byte 4: no event's type can (ingest refuses it), so it would match nothing`},
		{name: "a huge type list that names none", args: []string{"-stream", "s", "-type", strings.Repeat(",", 100_000)}, want: `-type "` + strings.Repeat(",", 256) + `"… names no type`},
		{name: "a huge stream not of the stack", env: local, args: []string{"-stream", big, "-template", streamsTemplate}, want: `-stream "` + big[:256] + `"… is not a stream of the stack`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cmd(context.Background(), tc.env, tc.args...)
			if r.code != cli.ExitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" || len(r.stderr) > 1000 {
				t.Errorf("exit %d, stderr %.300q, stdout %q; want exit 2 and one line saying %.300q", r.code, r.stderr, r.stdout, tc.want)
			}
		})
	}
}

func TestResolveStream(t *testing.T) {
	streams, err := templateStreams(streamsTemplate, "Tributary")
	if err != nil {
		t.Fatal(err)
	}
	for alias, want := range map[string]string{
		"events":                   "Tributary-EventsD32975C2",
		"results":                  "Tributary-WindowResults0D7FBD53",
		"joins":                    "Tributary-SearchClickJoinJoinsD33285C4",
		"matches":                  "Tributary-DetectionMatchesC92D8C61",
		"enriched":                 "Tributary-EnrichmentEnriched1555810A",
		"show-events":              "Tributary-EventSourcingShowEvents9C64F2AA",
		"StatusCodesResults":       "Tributary-StatusCodesResultsAB4B50BD",
		"Tributary-EventsD32975C2": "Tributary-EventsD32975C2",
		"statuscodesresults":       "Tributary-StatusCodesResultsAB4B50BD",
		"EventSourcingShowEvents":  "Tributary-EventSourcingShowEvents9C64F2AA",
	} {
		got, err := resolveStream(alias, streams)
		if err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %s", alias, got, err, want)
		}
	}
}

// TestTableOnlyPipelines: a pipeline whose file leaves its results off
// the stream (the default: outputs {"table": true}) is named, with make
// results, where make tail STREAM=results would print nothing of it —
// beside the stream when others write to it, in the refusal when none does.
func TestTableOnlyPipelines(t *testing.T) {
	st, err := templateStreams("testdata/table-only.template.json", "Tributary")
	if err != nil {
		t.Fatal(err)
	}
	name, err := resolveStream("results", st)
	if err != nil || name != "Tributary-WindowResults0D7FBD53" {
		t.Fatalf("results: %q, %v", name, err)
	}
	hint := st.resultsHint(name)
	if !strings.Contains(hint, "signups writes its windows only to the views table") || !strings.Contains(hint, "make results PIPELINE=signups") || strings.Contains(hint, "pageviews") {
		t.Errorf("hint %q, want signups named with make results, and not pageviews", hint)
	}
	if _, err := resolveStream("signups", st); err == nil || !strings.Contains(err.Error(), "signups is a pipeline that writes its windows only to the views table: make results PIPELINE=signups") {
		t.Errorf("-stream signups: %v, want it named as a table-only pipeline", err)
	}
	if _, err := resolveStream("pageviews", st); err == nil || !strings.Contains(err.Error(), "its results are on the results stream (STREAM=results)") {
		t.Errorf("-stream pageviews: %v, want it pointed at STREAM=results", err)
	}
	if hint := st.resultsHint("Tributary-EventsD32975C2"); hint != "" {
		t.Errorf("hint on the events stream: %q", hint)
	}

	st, err = templateStreams("testdata/no-results.template.json", "Tributary")
	if err != nil {
		t.Fatal(err)
	}
	_, err = resolveStream("results", st)
	if err == nil || !strings.Contains(err.Error(), "the stack has no results stream") || !strings.Contains(err.Error(), "make results PIPELINE=signups") {
		t.Errorf("results with no pipeline writing to a stream: %v, want the refusal to name make results PIPELINE=signups", err)
	}
}

// TestTailLocal runs the command as make tail does, against a stand-in
// with the template's events stream: -stream events names it, -json lines
// parse one by one, -key filters, and the first line on stderr says how it
// reads.
func TestTailLocal(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	kin := kinesis.NewFromConfig(cfg)
	ctx := context.Background()
	name := "Tributary-EventsD32975C2"
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"user-1", "user-2", "user-1"} {
		if _, err := kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String(k),
			Data: []byte(`{"id":"e","type":"page_view","key":"` + k + `","data":{"page":"/"}}`)}); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"AWS_ENDPOINT_URL": srv.Endpoint(), "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("AWS_PROFILE", "")
	// An alias without -template (go run ./cmd/tail -stream events, as make
	// tail is written) is no stream's name: the error says how to name it.
	if r := cmd(ctx, env, "-stream", "events", "-n", "1"); r.code != cli.ExitUsage || !strings.Contains(r.stderr, `-stream "events": no such stream`) ||
		!strings.Contains(r.stderr, "events names a stream only with -template infra/cdk.out/Tributary.template.json (as make tail passes it)") {
		t.Errorf("-stream events without -template: exit %d, stderr %q; want 2 saying an alias needs -template", r.code, r.stderr)
	}
	// A -stack that is not running (make tail STREAM=events STACK=nope)
	// is named, with the stacks that are, where it blamed STREAM=.
	if r := cmd(ctx, env, "-template", streamsTemplate, "-stack", "nope", "-stream", "events", "-n", "1"); r.code != cli.ExitUsage ||
		!strings.Contains(r.stderr, `-stack "nope": no stack of that name in the running topology; stacks: Tributary (give one`) || strings.Contains(r.stderr, "-stream") {
		t.Errorf("-stack nope: exit %d, stderr %q; want 2 naming -stack and the running stack Tributary", r.code, r.stderr)
	}
	r := cmd(ctx, env, "-template", streamsTemplate, "-stream", "events", "-from", "trim_horizon", "-key", "user-1", "-json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	first, _, _ := strings.Cut(r.stderr, "\n")
	if !strings.Contains(first, "tail: "+name+": reading 1 shard(s) from the oldest record kept (TRIM_HORIZON) by polling, at most 1 GetRecords call per shard every 1s") {
		t.Errorf("first line of stderr %q does not say how it reads", first)
	}
	n := 0
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var l struct {
			PartitionKey string `json:"partitionKey"`
			Data         struct{ Key string }
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if l.PartitionKey != "user-1" || l.Data.Key != "user-1" {
			t.Errorf("line %q is not user-1's", sc.Text())
		}
		n++
	}
	if n != 2 || !strings.Contains(r.stderr, "tail: 2 record(s) printed of 3 read from 1 shard(s)") {
		t.Errorf("%d lines; stderr %q", n, r.stderr)
	}
	if strings.Contains(r.stderr, "stopped at") {
		t.Errorf("a tail that read to the end says it stopped at its limit: %q", r.stderr)
	}
	// A tail that stops at its limit says so, and how to read more: make
	// tail printed 100 of a stream's 363 records and ended as if it had
	// read them all.
	r = cmd(ctx, env, "-template", streamsTemplate, "-stream", "events", "-from", "trim_horizon", "-n", "2")
	if r.code != 0 || !strings.Contains(r.stderr, "tail: 2 record(s) printed of") ||
		!strings.Contains(r.stderr, "; stopped at -n 2, its limit: more may follow (-n; N= with make tail)") {
		t.Errorf("-n 2 over 3 records: exit %d, stderr %q; want it to say it stopped at its limit", r.code, r.stderr)
	}
}

// TestInterruptedMidAnswerSaysNothingOfTheSDK: Ctrl-C while a GetRecords
// answer is still arriving (a large batch, a loaded stand-in) ends the
// tail without the SDK's warning "failed to discard remaining HTTP
// response body", which a user read as something gone wrong. A proxy in
// front of the stand-in holds the first GetRecords answer with records
// half sent, as no endpoint does on demand.
func TestInterruptedMidAnswerSaysNothingOfTheSDK(t *testing.T) {
	srv := standintest.Start(t)
	kin := kinesis.NewFromConfig(standintest.Config(t, srv))
	ctx := context.Background()
	name := "Tributary-EventsD32975C2"
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String("user-1"),
		Data: []byte(`{"id":"e","type":"page_view","key":"user-1","data":{"page":"/"}}`)}); err != nil {
		t.Fatal(err)
	}
	backend, err := url.Parse(srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	stalled := make(chan struct{})
	var once sync.Once
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, backend.JoinPath(r.URL.Path).String(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		if r.Header.Get("X-Amz-Target") != "Kinesis_20131202.GetRecords" || !bytes.Contains(answer, []byte("SequenceNumber")) {
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(answer)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer[:len(answer)/2])
		w.(http.Flusher).Flush()
		once.Do(func() { close(stalled) })
		<-r.Context().Done()
	}))
	defer proxy.Close()

	env := map[string]string{"AWS_ENDPOINT_URL": proxy.URL, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("AWS_PROFILE", "")
	// The SDK's logger writes to the process's stderr, not run's.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	sdkOut := make(chan string)
	go func() { b, _ := io.ReadAll(pr); sdkOut <- string(b) }()
	stderr := os.Stderr
	os.Stderr = pw
	cctx, interrupt := context.WithCancel(ctx)
	go func() {
		select {
		case <-stalled:
		case <-time.After(20 * time.Second):
		}
		time.Sleep(100 * time.Millisecond) // the SDK is reading the answer
		interrupt()
	}()
	r := cmd(cctx, env, "-template", streamsTemplate, "-stream", "events", "-from", "trim_horizon", "-f", "-poll")
	os.Stderr = stderr
	pw.Close()
	sdk := <-sdkOut
	select {
	case <-stalled:
	default:
		t.Fatalf("no GetRecords answer was held (exit %d, stderr %q)", r.code, r.stderr)
	}
	if sdk != "" || strings.Contains(r.stderr, "HTTP response body") {
		t.Errorf("interrupted mid-answer, the process's stderr holds %q (tail's own: %q); want nothing from the SDK", sdk, r.stderr)
	}
}
