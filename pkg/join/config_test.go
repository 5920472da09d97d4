package join

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

func TestParseRefusesNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		doc, field, reason string
	}{
		{`{"left":"s","right":"c","within":"1m"}`, "name", "required"},
		{`{"name":"x y","left":"s","right":"c","within":"1m"}`, "name", "letters"},
		{`{"name":"j","right":"c","within":"1m"}`, "left", "required"},
		{`{"name":"j","left":"s","within":"1m"}`, "right", "required"},
		{`{"name":"j","left":"s","right":"s","within":"1m"}`, "right", "self-join"},
		{`{"name":"j","left":"s","right":"c"}`, "within", "required"},
		{`{"name":"j","left":"s","right":"c","within":"10 minutes"}`, "within", "not a duration"},
		{`{"name":"j","left":"s","right":"c","within":"9999999999h"}`, "within", "9999999999h is longer than a duration can be"},
		{`{"name":"j","left":"s","right":"c","within":"0s"}`, "within", "above zero"},
		{`{"name":"j","left":"s","right":"c","within":"1m","before":"-1s"}`, "before", "negative"},
		{`{"name":"j","left":"s","right":"c","within":"1m","joinType":"cross"}`, "joinType", `"inner", "left" or "outer"`},
		{`{"name":"j","left":"s","right":"c","within":"1m","kind":"left"}`, "kind", `a join's file has kind "join"`},
		{`{"name":"j","left":"s","right":"c","within":"20h","allowedLateness":"5h"}`, "within", "at most 24h"},
		// Two durations whose sum wraps to a negative one passed the
		// bound on the sum; each is bounded on its own first.
		{`{"name":"j","left":"s","right":"c","within":"2562047h","before":"2562047h"}`, "within", "at most 24h"},
		{`{"name":"j","left":"s","right":"c","within":"1m","before":"2562047h","allowedLateness":"2562047h"}`, "before", "at most 24h"},
		{`{"name":"j","left":"s","right":"c","within":"1m","key":"type"}`, "key", "cannot be a join key"},
		{`{"name":"j","left":"s","right":"c","within":"1m","key":"session"}`, "key", "not a path"},
		{`{"name":"j","left":"s","right":"c","within":"1m","key":"data.session"}`, "partitionKeyIsJoinKey", "envelope key"},
		{`{"name":"j","left":"s","right":"c","within":"1m","rateWindow":"10ms"}`, "rateWindow", "from 1s"},
		{`{"name":"j","left":"s","right":"c","within":"24h","rateWindow":"1s"}`, "rateWindow", "rate windows open"},
		{`{"name":"j","left":"s","right":"c","within":"1m","dedupeHorizon":""}`, "dedupeHorizon", "empty"},
		{`{"name":"j","left":"s","right":"c","within":"1m","dedupeHorizon":"200h"}`, "dedupeHorizon", "longer"},
		// An idle shard's keys would outlive their items (they expire 8
		// days after their last write) before the tick closed them: their
		// unmatched records would never be emitted.
		{`{"name":"j","left":"s","right":"c","within":"1m","idleTimeout":"200h"}`, "idleTimeout", "at most 24h"},
		{`{"name":"j","left":"s","right":"c","within":"1m","idleTimeout":"2562047h"}`, "idleTimeout", "at most 24h"},
		{`{"name":"j","left":"` + strings.Repeat("s", 257) + `","right":"c","within":"1m"}`, "left", "256 characters"},
		{`{"name":"j","left":"s","right":"` + strings.Repeat("ü", 257) + `","within":"1m"}`, "right", "256 characters"},
		// Ingest refuses control characters in an event's type: such a
		// side could never be read.
		{`{"name":"j","left":"search\n","right":"c","within":"1m"}`, "left", "control character U+000A"},
		{`{"name":"j","left":"s","right":"c\u0085","within":"1m"}`, "right", "control character U+0085"},
		{`{"name":"j","left":"search\u200e","right":"c","within":"1m"}`, "left", "holds bidirectional control U+200E at byte 6: no event's type can (ingest refuses it), so this side would never be read"},
		{`{"name":"j","left":"s","right":"\ufeffclick","within":"1m"}`, "right", "holds invisible character U+FEFF at byte 0"},
		{`{"name":"j","left":"s","right":"c","within":"1m","grace":"1s"}`, "grace", "unknown field (known: $schema, kind, name, left, right"},
		{`{"name":"j","left":3,"right":"c","within":"1m"}`, "left", "must be a JSON string, not a number"},
		{`{"name":"j","left":"s","right":"c","within":"1m"} {}`, "", "must hold exactly one value"},
	} {
		_, err := Parse([]byte(tc.doc))
		var ce *pipeline.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(ce.Reason, tc.reason) {
			t.Errorf("%s: got %v, want field %q with %q", tc.doc, err, tc.field, tc.reason)
		}
	}
}

// TestParseTypesOfAnyScript takes an event type of 256 characters in
// two-byte letters, as an envelope may carry one.
func TestParseTypesOfAnyScript(t *testing.T) {
	typ := strings.Repeat("ü", 256)
	c, err := Parse([]byte(`{"name":"j","left":"` + typ + `","right":"c","within":"1m"}`))
	if err != nil || c.Left != typ {
		t.Fatalf("Parse: %v", err)
	}
}

func TestParseDefaults(t *testing.T) {
	c, err := Parse([]byte(`{"name":"search-click","left":"search","right":"click","key":"data.session","partitionKeyIsJoinKey":true,"within":"2m"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != Left || c.Before != 0 || c.AllowedLateness != 0 || c.IdleTimeout != DefaultIdleTimeout || c.DedupeHorizon != time.Hour || c.Key.String() != "data.session" {
		t.Fatalf("defaults: %+v", c)
	}
	if _, err := FromEnv(func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), EnvVar) {
		t.Fatalf("missing env: %v", err)
	}
}

// TestConfigFieldsAreTheSchemas: Parse reads the fields the JSON Schema
// declares for a join file, and no others.
func TestConfigFieldsAreTheSchemas(t *testing.T) {
	var got []string
	typ := reflect.TypeOf(rawConfig{})
	for i := range typ.NumField() {
		got = append(got, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
	}
	want := pipeline.FieldNames(pipeline.KindJoin)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Parse reads %v, the schema's join file has %v", got, want)
	}
}

// TestConfigErrorsAreBounded: a join file may hold 64 KB in one value; the
// error repeats its start and what is wanted, not the whole of it.
func TestConfigErrorsAreBounded(t *testing.T) {
	big := strings.Repeat("x", 60_000)
	for _, doc := range []string{
		`{"name":"` + big + `","left":"s","right":"c","within":"1m"}`,
		`{"name":"j","left":"s","right":"c","within":"` + big + `"}`,
		`{"name":"j","left":"s","right":"c","within":"1m","` + big + `":1}`,
	} {
		_, err := Parse([]byte(doc))
		if err == nil || len(err.Error()) > 1500 {
			t.Errorf("error of %d bytes: %.200s…", len(fmt.Sprint(err)), err)
		}
	}
}
