package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/cep"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

type result struct {
	code           int
	stdout, stderr string
}

func cmd(ctx context.Context, now time.Time, env map[string]string, args ...string) result {
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code := run(ctx, args, lookup, func() time.Time { return now }, &out, &errb)
	return result{code, out.String(), errb.String()}
}

func setAWS(t *testing.T, endpoint, region string) {
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": region, "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none} {
		t.Setenv(k, v)
	}
}

// TestOfflineAndBadCommandLines needs no AWS: test runs a rule over a file
// of events; a bad rule is refused naming its part; flags are checked first.
func TestOfflineAndBadCommandLines(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	big := strings.Repeat("r", 100_000) // a value pasted by mistake
	for _, c := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"test", "-rule", "testdata/unpaid.json", "-events", "testdata/events.jsonl"}, 0,
			"rule unpaid key cust-2: order=o2@10:06:00.000 (no paid within the rule's time)\n4 events, 1 matches, 0 late", ""},
		{[]string{"test", "-rule", "testdata/bad.json", "-events", "testdata/events.jsonl"}, 3, "", `refused: testdata/bad.json: rule: pattern[0].where: at column 14: expected a value`},
		{[]string{"test", "-events", "testdata/events.jsonl"}, 2, "", "-rule is required"},
		// Two rules of one id would make matches that cannot be told apart.
		{[]string{"test", "-rule", "testdata/unpaid.json", "-rule", "testdata/unpaid.json", "-events", "testdata/events.jsonl"}, 3, "", `refused: testdata/unpaid.json: rule: id: "unpaid" is the id of testdata/unpaid.json too`},
		{[]string{"add", "-file", "testdata/unpaid.json"}, 2, "", "-table is required"},
		{[]string{"disable", "-table", "rules"}, 2, "", "-id is required"},
		{[]string{"backfill", "-table", "rules", "-id", "x", "-stream", "ev", "-matches", "ev", "-from", "1h"}, 2, "", "-matches ev is the events stream"},
		{[]string{"backfill", "-table", "rules", "-id", "x", "-stream", "ev", "-matches", "m", "-from", "tomorrow"}, 2, "", "-from \"tomorrow\""},
		{[]string{"backfill", "-table", "rules", "-id", "x", "-stream", "ev", "-matches", "m", "-from", "1h", "-idle-timeout", "-100h"}, 2, "", "-idle-timeout -100h0m0s: must be from 1ms to 24h0m0s"},
		{[]string{"add", "-table", "rules", "-file", "testdata/unpaid.json", "-stream", "ev", "-matches", "m", "-from", "1h", "-idle-timeout", "0s"}, 2, "", "-idle-timeout 0s: must be from 1ms"},
		{[]string{"fly"}, 2, "", `unknown command "fly"`},
		{[]string{"disable", "-table", "rules", "-id", "no such/id"}, 2, "", `-id "no such/id": a rule id is 1 to 64 letters`},
		{[]string{"backfill", "-table", "rules", "-id", big, "-stream", "ev", "-matches", "m", "-from", "1h"}, 2, "", `-id "` + big[:256] + `"…: a rule id is 1 to 64`},
		{[]string{"backfill", "-table", "rules", "-id", "x", "-stream", "bad/stream", "-matches", "m", "-from", "1h"}, 2, "", `-stream "bad/stream": a Kinesis stream name`},
		{[]string{"add", "-table", "rules", "-file", "testdata/unpaid.json", "-stream", "ev", "-matches", "m m", "-from", "1h"}, 2, "", `-matches "m m": a Kinesis stream name`},
		// A value pasted by mistake is repeated cut, not whole.
		{[]string{big}, 2, "", `unknown command "` + big[:256] + `"…`},
		{[]string{"backfill", "-table", "rules", "-id", "x", "-stream", "ev", "-matches", "m", "-from", big}, 2, "", `-from "` + big[:256] + `"…: want`},
		{[]string{"backfill", "-table", "rules", "-id", "x", "-stream", "ev", "-matches", "m", "-from", "-" + strings.Repeat("1s", 50_000)}, 2, "", "-from -1s1s1s"},
		{[]string{}, 2, "", "a command is required"},
		// The detect function's config decides what is late, as it does
		// for detect: the payment 2 s behind the watermark is late with
		// the flag's 0s, in time with the file's 5s; a flag given
		// overrides the file.
		{[]string{"test", "-rule", "testdata/unpaid.json", "-events", "testdata/late.jsonl"}, 0, "3 events, 1 matches, 1 late", ""},
		{[]string{"test", "-rule", "testdata/unpaid.json", "-events", "testdata/late.jsonl", "-config", "testdata/detect.json"}, 0, "3 events, 0 matches, 0 late", "rules: outOfOrderness 5s from testdata/detect.json"},
		{[]string{"test", "-rule", "testdata/unpaid.json", "-events", "testdata/late.jsonl", "-config", "testdata/detect.json", "-out-of-orderness", "0s"}, 0, "3 events, 1 matches, 1 late", ""},
		{[]string{"test", "-rule", "testdata/unpaid.json", "-events", "testdata/late.jsonl", "-config", "testdata/detect-bad.json"}, 2, "", `-config testdata/detect-bad.json: outOfOrderness: "5 seconds"`},
		{[]string{"test", "-rule", "testdata/unpaid.json", "-events", "testdata/late.jsonl", "-config", "testdata/none.json"}, 2, "", "-config open testdata/none.json: no such file"},
		{[]string{"backfill", "-table", "rules", "-id", "x", "-stream", "ev", "-matches", "m", "-from", "1h", "-config", "testdata/detect-bad.json"}, 2, "", `-config testdata/detect-bad.json: outOfOrderness: "5 seconds"`},
	} {
		r := cmd(ctx, now, nil, c.args...)
		if r.code != c.code || !strings.Contains(r.stdout, c.out) || !strings.Contains(r.stderr, c.err) || len(r.stderr) > 2000 {
			t.Errorf("rules %.200s: exit %d\nstdout %s\nstderr %.300s\nwant exit %d, stdout with %q, stderr with %q", strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.code, c.out, strictjson.Cut(c.err, 300))
		}
	}
}

// TestCommands manages rules in a table on the stand-in as an operator
// would: add, add again (done already), the same id with another
// definition (refused), list, disable twice (the second
// refused), enable, delete, an unknown id (refused).
func TestCommands(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	if err := cep.CreateRulesTable(ctx, dynamodb.NewFromConfig(cfg), "rules"); err != nil {
		t.Fatal(err)
	}
	setAWS(t, srv.Endpoint(), "us-east-1")
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	env := map[string]string{"RULES_TABLE_NAME": "rules"}
	for _, c := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"add", "-file", "testdata/unpaid.json"}, 0, "added rule unpaid: it applies to events reaching the stream from 2026-11-29T12:00:10Z on", ""},
		// Run again (after a timeout, say): what it asks for is stored.
		{[]string{"add", "-file", "testdata/unpaid.json"}, 0, "rule unpaid was already added with this definition (nothing changed): it applies to events reaching the stream from 2026-11-29T12:00:10Z on", ""},
		{[]string{"add", "-file", "testdata/unpaid-longer.json"}, 3, "", "refused: cep: a rule with this id exists: \"unpaid\", with another definition: its within differs"},
		{[]string{"list"}, 0, "unpaid                   active, applies from 2026-11-29T12:00:10Z", ""},
		{[]string{"disable", "-id", "unpaid"}, 0, "disabled rule unpaid: it reads no event reaching the stream from 2026-11-29T12:00:10Z on", ""},
		{[]string{"disable", "-id", "unpaid"}, 3, "", `rule "unpaid" is disabled: cannot disable it`},
		{[]string{"enable", "-id", "unpaid"}, 0, "enabled rule unpaid", ""},
		{[]string{"delete", "-id", "unpaid"}, 0, "deleted rule unpaid", ""},
		{[]string{"list", "-json"}, 0, `"status": "deleted"`, ""},
		{[]string{"delete", "-id", "nope"}, 3, "", "no such rule"},
	} {
		r := cmd(ctx, now, env, c.args...)
		if r.code != c.code || !strings.Contains(r.stdout, c.out) || !strings.Contains(r.stderr, c.err) || len(r.stderr) > 2000 {
			t.Errorf("rules %.200s: exit %d\nstdout %s\nstderr %.300s\nwant exit %d, stdout with %q, stderr with %q", strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.code, c.out, strictjson.Cut(c.err, 300))
		}
	}
}
